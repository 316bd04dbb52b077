// bench/tfb.d/server.js --- the TechEmpower test types on Node's http and pg
//
// Copyright (C) 2026 the plucky authors
// SPDX-License-Identifier: LGPL-3.0-or-later
//
// Node's idiom, as TFB's nodejs implementation writes it: one process,
// http.createServer with a switch on the path, async handlers, one
// pg.Pool (named queries: prepared once per connection), JSON.stringify,
// the fortunes page concatenated with an escaping function.  Updates read
// each row by its own query, then write the batch back with one
// UPDATE ... FROM (VALUES ...), the same SQL as the other servers of
// bench/tfb.
//
// Usage: DATABASE_URL=postgresql://... DATABASE_POOL_SIZE=N node server.js PORT
"use strict";
const http = require("http");
const { Pool } = require("pg");

const pool = new Pool({
  connectionString: process.env.DATABASE_URL,
  max: Number(process.env.DATABASE_POOL_SIZE || 8),
});
const worldQuery = { name: "world", text: "SELECT id, randomnumber FROM world WHERE id = $1" };
const fortunesQuery = { name: "fortunes", text: "SELECT id, message FROM fortune" };
const cache = [];                       // id - 1 -> { id, randomNumber }
const updateSQL = new Map();            // n -> the UPDATE of n rows

const randomId = () => 1 + Math.floor(Math.random() * 10000);

// The parameter NAME of URL clamped to 1..500, 1 when not an integer.
function queryCount(url, name) {
  const n = parseInt(new URLSearchParams(url.slice(url.indexOf("?") + 1)).get(name), 10);
  return Number.isNaN(n) || n < 1 ? 1 : Math.min(n, 500);
}

async function readWorld() {
  const { rows } = await pool.query({ ...worldQuery, values: [randomId()] });
  return { id: rows[0].id, randomNumber: rows[0].randomnumber };
}

function updateStatement(n) {
  let sql = updateSQL.get(n);
  if (!sql) {
    const values = [];
    for (let i = 0; i < n; i++) values.push(`($${2 * i + 1}::int, $${2 * i + 2}::int)`);
    sql = `UPDATE world SET randomnumber = v.r FROM (VALUES ${values.join(", ")}) AS v(id, r) ` +
      "WHERE world.id = v.id";
    updateSQL.set(n, sql);
  }
  return sql;
}

const escapes = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escape = (text) => text.replace(/[&<>"']/g, (c) => escapes[c]);

function send(res, type, body) {
  res.writeHead(200, { Server: "Node", "Content-Type": type,
                       "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}

const json = (res, value) => send(res, "application/json", JSON.stringify(value));

const routes = {
  "/plaintext": (req, res) => send(res, "text/plain", "Hello, World!"),
  "/json": (req, res) => json(res, { message: "Hello, World!" }),
  "/db": async (req, res) => json(res, await readWorld()),
  "/queries": async (req, res) => {
    const worlds = [];
    for (let n = queryCount(req.url, "queries"); n > 0; n--) worlds.push(await readWorld());
    json(res, worlds);
  },
  "/updates": async (req, res) => {
    const worlds = [];
    for (let n = queryCount(req.url, "queries"); n > 0; n--) {
      const world = await readWorld();
      world.randomNumber = randomId();
      worlds.push(world);
    }
    // In id order, so that concurrent batches lock rows in one order.
    const values = [];
    for (const w of [...worlds].sort((a, b) => a.id - b.id)) values.push(w.id, w.randomNumber);
    await pool.query(updateStatement(worlds.length), values);
    json(res, worlds);
  },
  "/fortunes": async (req, res) => {
    const { rows } = await pool.query(fortunesQuery);
    rows.push({ id: 0, message: "Additional fortune added at request time." });
    rows.sort((a, b) => (a.message < b.message ? -1 : a.message > b.message ? 1 : 0));
    let html = "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>" +
      "<tr><th>id</th><th>message</th></tr>";
    for (const f of rows) html += `<tr><td>${f.id}</td><td>${escape(f.message)}</td></tr>`;
    send(res, "text/html; charset=utf-8", html + "</table></body></html>");
  },
  "/cached-queries": (req, res) => {
    const worlds = [];
    for (let n = queryCount(req.url, "count"); n > 0; n--) worlds.push(cache[randomId() - 1]);
    json(res, worlds);
  },
};

async function main() {
  const { rows } = await pool.query("SELECT id, randomnumber FROM world ORDER BY id");
  for (const r of rows) cache.push({ id: r.id, randomNumber: r.randomnumber });
  http.createServer((req, res) => {
    const q = req.url.indexOf("?");
    const route = routes[q < 0 ? req.url : req.url.slice(0, q)];
    if (!route) {
      res.writeHead(404, { Server: "Node" }).end();
      return;
    }
    Promise.resolve(route(req, res)).catch((e) => {
      res.writeHead(500, { Server: "Node", "Content-Type": "text/plain" }).end(String(e));
    });
  }).listen(Number(process.argv[2]), "127.0.0.1");
}

main().catch((e) => { console.error(e); process.exit(1); });
