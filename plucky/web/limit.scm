;;; (plucky web limit) --- rate limits shared by all workers, in SQLite or a store

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A rate limit counts events by key ("account:alice", "address:192.0.2.7")
;;; and says when a key has had LIMIT of them within the last WINDOW
;;; seconds.  The events are rows of a table of the app's SQLite
;;; database, so the limit holds across the worker processes: a count
;;; kept in each worker's memory lets N workers accept N times the limit,
;;; as the blog's comment limit did (issue 25 (e)).
;;;
;;;   (define logins (make-rate-limit #:db db #:name "login" #:limit 10 #:window 900))
;;;
;;;   (rate-limit-retry-after logins key)  -> #f, or the seconds to wait
;;;   (rate-limit-hit! logins key)         counts one event (a failed login)
;;;   (rate-limit-clear! logins key)       forgets KEY's events (a login that worked)
;;;   (rate-limit-take! logins key)        -> #f and the event counted, or
;;;                                           the seconds to wait: check and
;;;                                           count at once (a comment)
;;;
;;; A refusal is answered 429 with Retry-After (`too-many-requests'
;;; makes its response head).  `rate-limit-take!' checks and counts in
;;; one write transaction, so workers racing on one key count exactly;
;;; a check, then a count after some work (a login: the password is
;;; verified between), lets through at most one event per request in
;;; flight past the limit.
;;;
;;; The table, plucky_rate_events, holds (name, key, time); each count
;;; also deletes the events of its limit that have left the window, so
;;; the table holds one window's worth.  DB is an open (sqlite3)
;;; database, or a procedure of no argument that returns one, called in
;;; each process (an SQLite connection must not cross a fork), as for
;;; `with-sessions'.  The threads of a process (handlers on the pool)
;;; take turns: a connection holds one transaction at a time.
;;;
;;; Where the events are counted is a store, a record of four procedures
;;; (`make-rate-limit-store'); #:db makes the SQLite one, and #:store
;;; takes another: (plucky db postgresql)'s `pg-rate-limit-store' counts
;;; in PostgreSQL, shared by every host of a site.
;;;
;;; Code:

(define-module (plucky web limit)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 threads)
  #:use-module (sqlite3)
  #:use-module (web response)
  #:export (make-rate-limit
            rate-limit?
            rate-limit-name
            rate-limit-limit
            rate-limit-window
            rate-limit-retry-after
            rate-limit-hit!
            rate-limit-take!
            rate-limit-clear!
            make-rate-limit-store
            rate-limit-store?
            sqlite-rate-limit-store
            too-many-requests))

(define-record-type <rate-limit-store>
  (%make-rate-limit-store retry-after hit! take! clear!)
  rate-limit-store?
  (retry-after store-retry-after)       ; NAME KEY LIMIT WINDOW NOW -> #f or seconds
  (hit! store-hit!)                     ; NAME KEY WINDOW NOW: one event counted
  (take! store-take!)                   ; NAME KEY LIMIT WINDOW NOW -> as retry-after, counting on #f
  (clear! store-clear!))                ; NAME KEY: its events forgotten

(define* (make-rate-limit-store #:key retry-after hit! take! clear!)
  "Return a rate-limit store: where `make-rate-limit's limits count
their events, as four procedures.  (RETRY-AFTER NAME KEY LIMIT WINDOW
NOW) returns #f when KEY has had fewer than LIMIT events of the limit
NAME in the WINDOW seconds before NOW, else the seconds (at least 1)
until one leaves the window; (HIT! NAME KEY WINDOW NOW) counts one event
(and may forget those older than WINDOW); (TAKE! NAME KEY LIMIT WINDOW
NOW) is RETRY-AFTER and, when that is #f, HIT!, atomically across every
process sharing the store; (CLEAR! NAME KEY) forgets KEY's events."
  (%make-rate-limit-store retry-after hit! take! clear!))

(define-record-type <rate-limit>
  (%make-rate-limit store name limit window clock)
  rate-limit?
  (store rate-limit-store)              ; <rate-limit-store>
  (name rate-limit-name)                ; string: this limit's rows
  (limit rate-limit-limit)              ; events allowed…
  (window rate-limit-window)            ; …in this many seconds
  (clock rate-limit-clock))             ; -> seconds since the epoch

(define (prepare! db)
  (sqlite-busy-timeout db 5000)
  (sqlite-exec db "PRAGMA journal_mode=WAL")
  (sqlite-exec db "CREATE TABLE IF NOT EXISTS plucky_rate_events (
                     name TEXT NOT NULL,     -- the limit's
                     key TEXT NOT NULL,      -- what it counts by
                     time INTEGER NOT NULL   -- seconds since the epoch
                   )")
  (sqlite-exec db "CREATE INDEX IF NOT EXISTS plucky_rate_events_key
                     ON plucky_rate_events (name, key, time)")
  (sqlite-exec db "CREATE INDEX IF NOT EXISTS plucky_rate_events_time
                     ON plucky_rate_events (name, time)")
  db)

(define (per-process-connection open)
  ;; -> a procedure that returns OPEN's database, prepared, once per
  ;; process (see `with-sessions')
  (let ((pid #f) (db #f))
    (lambda ()
      (unless (eqv? pid (getpid))
        (set! db (prepare! (open)))
        (set! pid (getpid)))
      db)))

;; A connection holds one transaction at a time: this process's
;; threads take turns at the limits' statements.
(define statements-mutex (make-recursive-mutex))

(define-syntax-rule (exclusively body ...)
  (with-mutex statements-mutex body ...))

(define* (make-rate-limit #:key db store (name "default") (limit 10) (window 900)
                          (clock current-time))
  "Return a rate limit that allows LIMIT events per key in any WINDOW
seconds, counted under NAME (so that limits share a store) in STORE (see
`make-rate-limit-store'), or else in the table plucky_rate_events of DB.
DB is an open (sqlite3) database, or a procedure of no argument that
returns one, then called once in each process.  CLOCK returns the time
in seconds."
  (when (and store (not (rate-limit-store? store)))
    (error "make-rate-limit: #:store is not a rate-limit store (make-rate-limit-store):" store))
  (unless (and (exact-integer? limit) (positive? limit)
               (exact-integer? window) (positive? window))
    (error "make-rate-limit: LIMIT and WINDOW must be positive integers:" limit window))
  (%make-rate-limit (or store (sqlite-rate-limit-store db)) name limit window clock))

(define (sqlite-rate-limit-store db)
  "Return the rate-limit store (see `make-rate-limit-store') of the table
plucky_rate_events of DB: an open (sqlite3) database, or a procedure of
no argument that returns one, then called once in each process."
  (unless (or (sqlite-db? db) (procedure? db))
    (error "make-rate-limit: #:db is neither an open sqlite3 database nor a procedure that opens one:"
           db))
  (when (sqlite-db? db) (prepare! db))
  (let ((connect (if (procedure? db) (per-process-connection db) (lambda () db))))
    (make-rate-limit-store
     #:retry-after (lambda (name key limit window now)
                     (exclusively (retry-after (connect) name key limit window now)))
     #:hit! (lambda (name key window now)
              (exclusively
               (let ((db (connect)))
                 (call-with-write-transaction db
                   (lambda () (count! db name key window now))))))
     #:take! (lambda (name key limit window now)
               (exclusively
                (let ((db (connect)))
                  (call-with-write-transaction db
                    (lambda ()
                      (or (retry-after db name key limit window now)
                          (begin (count! db name key window now) #f)))))))
     #:clear! (lambda (name key)
                (exclusively
                 (run (connect) "DELETE FROM plucky_rate_events WHERE name = ? AND key = ?"
                      name key))))))

(define (run db sql . args)
  ;; -> the first row of SQL with ARGS bound, or #f; the statement reset
  ;; at once, so that no read transaction stays open
  (let ((statement (sqlite-prepare db sql #:cache? #t)))
    (dynamic-wind
      (lambda () #t)
      (lambda ()
        (apply sqlite-bind-arguments statement args)
        (sqlite-step statement))
      (lambda () (sqlite-reset statement)))))

(define (call-with-write-transaction db thunk)
  ;; -> THUNK's value, in a transaction that holds the write lock from
  ;; its start (BEGIN IMMEDIATE: a check then a count see no other
  ;; process's count in between)
  (sqlite-exec db "BEGIN IMMEDIATE")
  (with-exception-handler
      (lambda (e)
        (false-if-exception (sqlite-exec db "ROLLBACK"))
        (raise-exception e))
    (lambda ()
      (let ((result (thunk)))
        (sqlite-exec db "COMMIT")
        result))))

(define (retry-after db name key limit window now)
  ;; -> #f when KEY has had fewer than LIMIT events of NAME in the
  ;; WINDOW before NOW, else the seconds until one of them leaves it
  (let* ((since (- now window))
         (count (vector-ref (run db "SELECT count(*) FROM plucky_rate_events
                                     WHERE name = ? AND key = ? AND time > ?"
                                 name key since)
                            0)))
    (and (>= count limit)
         ;; the event whose leaving brings the count below the limit
         (let ((row (run db "SELECT time FROM plucky_rate_events
                             WHERE name = ? AND key = ? AND time > ?
                             ORDER BY time LIMIT 1 OFFSET ?"
                         name key since (- count limit))))
           (max 1 (- (+ (vector-ref row 0) window) now))))))

(define (count! db name key window now)
  (run db "DELETE FROM plucky_rate_events WHERE name = ? AND time <= ?"
       name (- now window))
  (run db "INSERT INTO plucky_rate_events (name, key, time) VALUES (?, ?, ?)"
       name key now))

(define (rate-limit-retry-after limit key)
  "Return #f if KEY (a string) has had fewer than LIMIT's events in its
window, else the whole seconds, at least 1, until it may have one more."
  ((store-retry-after (rate-limit-store limit))
   (rate-limit-name limit) key (rate-limit-limit limit) (rate-limit-window limit)
   ((rate-limit-clock limit))))

(define (rate-limit-hit! limit key)
  "Count one event of KEY (a string) against LIMIT; return unspecified."
  ((store-hit! (rate-limit-store limit))
   (rate-limit-name limit) key (rate-limit-window limit) ((rate-limit-clock limit))))

(define (rate-limit-take! limit key)
  "Return #f and count one event of KEY against LIMIT if KEY is within
it, else the seconds until it may have one (as `rate-limit-retry-after'),
counting nothing.  The check and the count are one transaction: workers
racing on KEY never let more than the limit through."
  ((store-take! (rate-limit-store limit))
   (rate-limit-name limit) key (rate-limit-limit limit) (rate-limit-window limit)
   ((rate-limit-clock limit))))

(define (rate-limit-clear! limit key)
  "Forget the events of KEY counted against LIMIT; return unspecified."
  ((store-clear! (rate-limit-store limit)) (rate-limit-name limit) key))

(define* (too-many-requests seconds #:key (content-type '(text/plain (charset . "utf-8"))))
  "Return the head of a 429 Too Many Requests response that asks the
client to wait SECONDS (Retry-After), with CONTENT-TYPE, and no caching."
  (build-response #:code 429
                  #:headers `((retry-after . ,seconds)
                              (content-type . ,content-type)
                              (cache-control . (no-store)))))

;;; (plucky web limit) ends here
