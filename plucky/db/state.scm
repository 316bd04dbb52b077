;;; (plucky db state) --- sessions and rate limits in PostgreSQL, shared by every host

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; (plucky web session) and (plucky web limit) keep their rows in the
;;; app's SQLite file by default: shared by the workers of one host,
;;; not by two hosts.  This module gives each the store it takes
;;; (#:store) in a PostgreSQL database instead, so that a visitor stays
;;; logged in whichever host answers, and a limit counts the events of
;;; every host:
;;;
;;;   (define db (make-pg-pool (getenv "DATABASE_URL")))
;;;   (with-sessions handler #:store (pg-session-store db))
;;;   (make-rate-limit #:store (pg-rate-limit-store db) #:name "login" …)
;;;
;;; The tables, plucky_sessions and plucky_rate_events, are made at the
;;; first request (sessions) or the first use (limits) in each process
;;; (CREATE TABLE IF NOT EXISTS, under an advisory lock: two hosts
;;; starting at once would otherwise race in PostgreSQL's catalog).  Every write is committed before the handler's
;;; response is sent: the session is saved after the handler returns
;;; and before `with-sessions' returns the response.  `take!' holds an
;;; advisory lock on (name, key) for its transaction, so that two hosts
;;; checking and counting one key at once count exactly.  Inside a
;;; request every query suspends the request, not the worker.
;;;
;;; Code:

(define-module (plucky db state)
  #:use-module (plucky db postgresql)
  #:use-module ((plucky web session) #:select (make-session-store))
  #:use-module ((plucky web limit) #:select (make-rate-limit-store))
  #:export (pg-session-store
            pg-rate-limit-store))

(define tables-lock 7203946)            ; pg_advisory_xact_lock's: plucky's tables

(define (tables-maker db statements)
  ;; -> a thunk that runs STATEMENTS (CREATE … IF NOT EXISTS) on DB, a
  ;; pool, once per process, in a transaction under `tables-lock'
  (let ((made-in #f))
    (lambda ()
      (unless (eqv? made-in (getpid))
        (call-with-pg-connection db
          (lambda (conn)
            (with-transaction conn
              (pg-execute conn "SELECT pg_advisory_xact_lock($1)" tables-lock)
              ;; no NOTICE on stderr for each table found there
              (pg-execute conn "SET LOCAL client_min_messages = warning")
              (for-each (lambda (statement) (pg-execute conn statement)) statements))))
        (set! made-in (getpid))))))

(define session-tables
  '("CREATE TABLE IF NOT EXISTS plucky_sessions (
       id_hash BYTEA PRIMARY KEY,   -- SHA-256 of the id
       data TEXT NOT NULL,          -- the alist, as written
       created BIGINT NOT NULL,     -- seconds since the epoch
       seen BIGINT NOT NULL,        -- last marked as seen
       expires BIGINT NOT NULL)     -- created + max-age"
    "CREATE INDEX IF NOT EXISTS plucky_sessions_expires ON plucky_sessions (expires)"))

(define (pg-session-store db)
  "Return a session store (`make-session-store' of (plucky web session))
that keeps the sessions in the table plucky_sessions of DB, a pool of
`make-pg-pool', made at its first use."
  (let ((ready! (tables-maker db session-tables)))
    (make-session-store
     #:prepare ready!
     #:load (lambda (hash)
              (ready!)
              (pg-query-row db "SELECT data, created, seen, expires FROM plucky_sessions
                                WHERE id_hash = $1" hash))
     #:insert! (lambda (hash data created expires)
                 (ready!)
                 (pg-execute db "INSERT INTO plucky_sessions (id_hash, data, created, seen, expires)
                                 VALUES ($1, $2, $3, $3, $4)" hash data created expires))
     #:update! (lambda (hash data seen)
                 (ready!)
                 (if data
                     (pg-execute db "UPDATE plucky_sessions SET data = $1, seen = $2
                                     WHERE id_hash = $3" data seen hash)
                     (pg-execute db "UPDATE plucky_sessions SET seen = $1 WHERE id_hash = $2"
                                 seen hash)))
     #:remove! (lambda (hash)
                 (ready!)
                 (pg-execute db "DELETE FROM plucky_sessions WHERE id_hash = $1" hash))
     #:replace! (lambda (old new data created expires)
                  (ready!)
                  (call-with-pg-connection db
                    (lambda (conn)
                      (with-transaction conn
                        (pg-execute conn "DELETE FROM plucky_sessions WHERE id_hash = $1" old)
                        (pg-execute conn "INSERT INTO plucky_sessions
                                            (id_hash, data, created, seen, expires)
                                          VALUES ($1, $2, $3, $3, $4)"
                                    new data created expires)))))
     #:purge! (lambda (now cutoff)
                (ready!)
                (pg-execute db "DELETE FROM plucky_sessions WHERE expires <= $1 OR seen <= $2"
                            now cutoff)))))

(define rate-tables
  '("CREATE TABLE IF NOT EXISTS plucky_rate_events (
       name TEXT NOT NULL,      -- the limit's
       key TEXT NOT NULL,       -- what it counts by
       time BIGINT NOT NULL)    -- seconds since the epoch"
    "CREATE INDEX IF NOT EXISTS plucky_rate_events_key ON plucky_rate_events (name, key, time)"
    "CREATE INDEX IF NOT EXISTS plucky_rate_events_time ON plucky_rate_events (name, time)"))

(define (retry-after db name key limit window now)
  ;; -> #f when KEY has had fewer than LIMIT events of NAME in the
  ;; WINDOW before NOW, else the seconds until the one whose leaving
  ;; brings the count below LIMIT leaves
  (let* ((since (- now window))
         (count (vector-ref (pg-query-row db "SELECT count(*) FROM plucky_rate_events
                                              WHERE name = $1 AND key = $2 AND time > $3"
                                          name key since)
                            0)))
    (and (>= count limit)
         (let ((row (pg-query-row db "SELECT time FROM plucky_rate_events
                                      WHERE name = $1 AND key = $2 AND time > $3
                                      ORDER BY time LIMIT 1 OFFSET $4"
                                  name key since (- count limit))))
           (max 1 (- (+ (vector-ref row 0) window) now))))))

(define (count! db name key window now)
  (pg-execute db "DELETE FROM plucky_rate_events WHERE name = $1 AND time <= $2"
              name (- now window))
  (pg-execute db "INSERT INTO plucky_rate_events (name, key, time) VALUES ($1, $2, $3)"
              name key now))

(define (pg-rate-limit-store db)
  "Return a rate-limit store (`make-rate-limit-store' of (plucky web
limit)) that counts events in the table plucky_rate_events of DB, a pool
of `make-pg-pool', made at its first use: one count for every process
and host using DB."
  (let ((ready! (tables-maker db rate-tables)))
    (define (locked name key proc)
      ;; PROC's value, given a connection in a transaction that holds the
      ;; lock of (NAME, KEY)
      (call-with-pg-connection db
        (lambda (conn)
          (with-transaction conn
            (pg-execute conn "SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))" name key)
            (proc conn)))))
    (make-rate-limit-store
     #:retry-after (lambda (name key limit window now)
                     (ready!)
                     (retry-after db name key limit window now))
     #:hit! (lambda (name key window now)
              (ready!)
              (locked name key (lambda (conn) (count! conn name key window now))))
     #:take! (lambda (name key limit window now)
               (ready!)
               (locked name key
                       (lambda (conn)
                         (or (retry-after conn name key limit window now)
                             (begin (count! conn name key window now) #f)))))
     #:clear! (lambda (name key)
                (ready!)
                (pg-execute db "DELETE FROM plucky_rate_events WHERE name = $1 AND key = $2"
                            name key)))))

;;; (plucky db state) ends here
