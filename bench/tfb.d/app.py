# bench/tfb.d/app.py --- the TechEmpower test types on uvicorn + Starlette + asyncpg
#
# Copyright (C) 2026 the plucky authors
# SPDX-License-Identifier: LGPL-3.0-or-later
#
# Run it:  DATABASE_URL=postgresql://... DATABASE_POOL_SIZE=N \
#          uvicorn app:app --workers 1 --loop uvloop --http httptools
#
# asyncio's idiom, as TFB's starlette implementation writes it: async
# handlers, one asyncpg pool made at start-up (prepared statements cached
# per connection by asyncpg), JSONResponse, a Jinja2 template with
# autoescape for the fortunes.  Updates read each row by its own query,
# then write the batch back with one UPDATE ... FROM (VALUES ...), the
# same SQL as the other servers of bench/tfb.
import contextlib
import os
from operator import itemgetter
from random import randint

import asyncpg
import jinja2
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse
from starlette.routing import Route

WORLD_SQL = "SELECT id, randomnumber FROM world WHERE id = $1"
FORTUNES_SQL = "SELECT id, message FROM fortune"
SERVER = {"Server": "Starlette"}
FORTUNES = jinja2.Environment(autoescape=True).from_string(
    "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
    "<tr><th>id</th><th>message</th></tr>"
    "{% for id, message in fortunes %}<tr><td>{{ id }}</td><td>{{ message }}</td></tr>"
    "{% endfor %}</table></body></html>")

pool = None
cache = {}                              # id -> {"id": id, "randomNumber": n}
update_sql = {}                         # n -> the UPDATE of n rows


def query_count(request, name):
    """The parameter NAME clamped to 1..500, 1 when not an integer."""
    try:
        n = int(request.query_params.get(name, 1))
    except ValueError:
        return 1
    return min(max(n, 1), 500)


def update_statement(n):
    sql = update_sql.get(n)
    if sql is None:
        values = ", ".join(f"(${2 * i + 1}::int, ${2 * i + 2}::int)" for i in range(n))
        sql = (f"UPDATE world SET randomnumber = v.r FROM (VALUES {values}) AS v(id, r) "
               "WHERE world.id = v.id")
        update_sql[n] = sql
    return sql


async def plaintext(request):
    return PlainTextResponse(b"Hello, World!", headers=SERVER)


async def json(request):
    return JSONResponse({"message": "Hello, World!"}, headers=SERVER)


async def db(request):
    async with pool.acquire() as connection:
        id, number = await connection.fetchrow(WORLD_SQL, randint(1, 10000))
    return JSONResponse({"id": id, "randomNumber": number}, headers=SERVER)


async def read_worlds(connection, n):
    """N random rows of World, each read by its own query."""
    statement = await connection.prepare(WORLD_SQL)
    worlds = []
    for _ in range(n):
        id, number = await statement.fetchrow(randint(1, 10000))
        worlds.append({"id": id, "randomNumber": number})
    return worlds


async def queries(request):
    async with pool.acquire() as connection:
        worlds = await read_worlds(connection, query_count(request, "queries"))
    return JSONResponse(worlds, headers=SERVER)


async def updates(request):
    n = query_count(request, "queries")
    async with pool.acquire() as connection:
        worlds = await read_worlds(connection, n)
        for world in worlds:
            world["randomNumber"] = randint(1, 10000)
        # In id order, so that concurrent batches lock rows in one order.
        args = []
        for world in sorted(worlds, key=itemgetter("id")):
            args += (world["id"], world["randomNumber"])
        await connection.execute(update_statement(n), *args)
    return JSONResponse(worlds, headers=SERVER)


async def fortunes(request):
    async with pool.acquire() as connection:
        rows = await connection.fetch(FORTUNES_SQL)
    rows = [tuple(row) for row in rows]
    rows.append((0, "Additional fortune added at request time."))
    rows.sort(key=itemgetter(1))
    return HTMLResponse(FORTUNES.render(fortunes=rows), headers=SERVER)


async def cached_queries(request):
    n = query_count(request, "count")
    return JSONResponse([cache[randint(1, 10000)] for _ in range(n)], headers=SERVER)


@contextlib.asynccontextmanager
async def lifespan(app):
    global pool
    size = int(os.environ.get("DATABASE_POOL_SIZE", "8"))
    pool = await asyncpg.create_pool(os.environ["DATABASE_URL"], min_size=size, max_size=size)
    async with pool.acquire() as connection:
        for id, number in await connection.fetch("SELECT id, randomnumber FROM world"):
            cache[id] = {"id": id, "randomNumber": number}
    yield
    await pool.close()


app = Starlette(routes=[
    Route("/plaintext", plaintext),
    Route("/json", json),
    Route("/db", db),
    Route("/queries", queries),
    Route("/updates", updates),
    Route("/fortunes", fortunes),
    Route("/cached-queries", cached_queries),
], lifespan=lifespan)
