// bench/upstream.d/upstream.go --- the upstream of bench/upstream
//
// Copyright (C) 2026 the plucky authors
// SPDX-License-Identifier: LGPL-3.0-or-later
//
// Answers every request with "ok" 50 ms after it came, keeping the
// connection alive: the service the apps under test call.  Go's
// net/http, because a goroutine per connection makes 500 concurrent
// waits cheap, so the upstream is never what limits a row.
//
// Usage: upstream PORT   (listens on 127.0.0.1:PORT only)
package main

import (
	"log"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: upstream PORT")
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("ok"))
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:"+os.Args[1], nil))
}
