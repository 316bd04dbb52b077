// bench/upstream.d/app.go --- bench/upstream's app in Go's net/http
//
// Copyright (C) 2026 the plucky authors
// SPDX-License-Identifier: LGPL-3.0-or-later
//
// Go's idiom for both rows: a goroutine per connection, blocking calls.
//   sleep     time.Sleep(50 ms), then "ok";
//   upstream  GET UPSTREAM-URL with one shared http.Client, then its body.
// The Transport keeps up to 1000 idle connections to the upstream (the
// default, 2 per host, would open and close one per request under
// wrk -c 500).  Run with GOMAXPROCS=1: one CPU, as one plucky worker.
//
// Usage: app PORT sleep | app PORT upstream UPSTREAM-URL
package main

import (
	"io"
	"log"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		log.Fatal("usage: app PORT sleep | app PORT upstream UPSTREAM-URL")
	}
	switch os.Args[2] {
	case "sleep":
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(50 * time.Millisecond)
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("ok"))
		})
	case "upstream":
		url := os.Args[3]
		client := &http.Client{
			Transport: &http.Transport{MaxIdleConns: 1000, MaxIdleConnsPerHost: 1000},
			Timeout:   10 * time.Second,
		}
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			resp, err := client.Get(url)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			w.Write(body)
		})
	default:
		log.Fatal("usage: app PORT sleep | app PORT upstream UPSTREAM-URL")
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:"+os.Args[1], nil))
}
