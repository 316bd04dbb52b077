// bench/tfb.d/main.go --- the TechEmpower test types on Go's net/http and pgx
//
// Copyright (C) 2026 the plucky authors
// SPDX-License-Identifier: LGPL-3.0-or-later
//
// Go's idiom, as TFB's go-std implementations write it: a goroutine per
// connection, blocking calls, one pgxpool.Pool shared by all of them
// (prepared statements cached per connection by pgx), encoding/json,
// html/template.  Updates read each row by its own query, then write the
// batch back with one UPDATE ... FROM (VALUES ...), the same SQL as the
// other servers of bench/tfb.  Run with GOMAXPROCS=1: one CPU, as one
// plucky worker.
//
// Usage: DATABASE_URL=postgresql://... DATABASE_POOL_SIZE=N app PORT
package main

import (
	"context"
	"encoding/json"
	"html/template"
	"log"
	"math/rand"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

type World struct {
	Id           int32 `json:"id"`
	RandomNumber int32 `json:"randomNumber"`
}

type Fortune struct {
	Id      int32
	Message string
}

const worldSQL = "SELECT id, randomnumber FROM world WHERE id = $1"

var (
	pool      *pgxpool.Pool
	cache     []World // index id - 1
	fortunes  = template.Must(template.New("fortunes").Parse(fortunesHTML))
	updateSQL sync.Map // n -> the UPDATE of n rows
)

const fortunesHTML = `<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>{{range .}}<tr><td>{{.Id}}</td><td>{{.Message}}</td></tr>{{end}}</table></body></html>`

func header(w http.ResponseWriter, contentType string) {
	h := w.Header()
	h.Set("Server", "Go")
	h.Set("Content-Type", contentType)
}

// queryCount: the parameter NAME clamped to 1..500, 1 when not an integer.
func queryCount(r *http.Request, name string) int {
	n, err := strconv.Atoi(r.URL.Query().Get(name))
	if err != nil || n < 1 {
		return 1
	}
	if n > 500 {
		return 500
	}
	return n
}

func randomId() int32 { return int32(rand.Intn(10000) + 1) }

func readWorld(ctx context.Context, w *World) error {
	return pool.QueryRow(ctx, worldSQL, randomId()).Scan(&w.Id, &w.RandomNumber)
}

func writeJSON(w http.ResponseWriter, v any) {
	header(w, "application/json")
	body, _ := json.Marshal(v)
	w.Write(body)
}

func plaintext(w http.ResponseWriter, r *http.Request) {
	header(w, "text/plain")
	w.Write([]byte("Hello, World!"))
}

func jsonHandler(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, struct {
		Message string `json:"message"`
	}{"Hello, World!"})
}

func db(w http.ResponseWriter, r *http.Request) {
	var world World
	if err := readWorld(r.Context(), &world); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, &world)
}

func queries(w http.ResponseWriter, r *http.Request) {
	worlds := make([]World, queryCount(r, "queries"))
	for i := range worlds {
		if err := readWorld(r.Context(), &worlds[i]); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	writeJSON(w, worlds)
}

func updateStatement(n int) string {
	if s, ok := updateSQL.Load(n); ok {
		return s.(string)
	}
	var b strings.Builder
	b.WriteString("UPDATE world SET randomnumber = v.r FROM (VALUES ")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("($" + strconv.Itoa(2*i+1) + "::int, $" + strconv.Itoa(2*i+2) + "::int)")
	}
	b.WriteString(") AS v(id, r) WHERE world.id = v.id")
	updateSQL.Store(n, b.String())
	return b.String()
}

func updates(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	worlds := make([]World, queryCount(r, "queries"))
	for i := range worlds {
		if err := readWorld(ctx, &worlds[i]); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		worlds[i].RandomNumber = randomId()
	}
	// In id order, so that concurrent batches lock rows in one order.
	sorted := append([]World(nil), worlds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Id < sorted[j].Id })
	args := make([]any, 0, 2*len(sorted))
	for _, world := range sorted {
		args = append(args, world.Id, world.RandomNumber)
	}
	if _, err := pool.Exec(ctx, updateStatement(len(sorted)), args...); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, worlds)
}

func fortunesHandler(w http.ResponseWriter, r *http.Request) {
	rows, err := pool.Query(r.Context(), "SELECT id, message FROM fortune")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	list := make([]Fortune, 0, 16)
	for rows.Next() {
		var f Fortune
		if err := rows.Scan(&f.Id, &f.Message); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		list = append(list, f)
	}
	list = append(list, Fortune{0, "Additional fortune added at request time."})
	sort.Slice(list, func(i, j int) bool { return list[i].Message < list[j].Message })
	header(w, "text/html; charset=utf-8")
	fortunes.Execute(w, list)
}

func cachedQueries(w http.ResponseWriter, r *http.Request) {
	worlds := make([]World, queryCount(r, "count"))
	for i := range worlds {
		worlds[i] = cache[randomId()-1]
	}
	writeJSON(w, worlds)
}

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: DATABASE_URL=... app PORT")
	}
	config, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	if n, err := strconv.Atoi(os.Getenv("DATABASE_POOL_SIZE")); err == nil {
		config.MaxConns = int32(n)
		config.MinConns = int32(n)
	}
	if pool, err = pgxpool.NewWithConfig(context.Background(), config); err != nil {
		log.Fatal(err)
	}
	rows, err := pool.Query(context.Background(), "SELECT id, randomnumber FROM world ORDER BY id")
	if err != nil {
		log.Fatal(err)
	}
	for rows.Next() {
		var world World
		rows.Scan(&world.Id, &world.RandomNumber)
		cache = append(cache, world)
	}
	http.HandleFunc("/plaintext", plaintext)
	http.HandleFunc("/json", jsonHandler)
	http.HandleFunc("/db", db)
	http.HandleFunc("/queries", queries)
	http.HandleFunc("/updates", updates)
	http.HandleFunc("/fortunes", fortunesHandler)
	http.HandleFunc("/cached-queries", cachedQueries)
	log.Fatal(http.ListenAndServe("127.0.0.1:"+os.Args[1], nil))
}
