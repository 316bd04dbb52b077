;;; (plucky web limit) --- rate limits shared by all workers, in SQLite

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
            too-many-requests))

(define-record-type <rate-limit>
  (%make-rate-limit connection name limit window clock)
  rate-limit?
  (connection rate-limit-connection)    ; -> this process's database
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

(define* (make-rate-limit #:key db (name "default") (limit 10) (window 900)
                          (clock current-time))
  "Return a rate limit that allows LIMIT events per key in any WINDOW
seconds, counted in the table plucky_rate_events of DB under NAME (so
that limits share a database).  DB is an open (sqlite3) database, or a
procedure of no argument that returns one, then called once in each
process.  CLOCK returns the time in seconds."
  (unless (or (sqlite-db? db) (procedure? db))
    (error "make-rate-limit: #:db is neither an open sqlite3 database nor a procedure that opens one:"
           db))
  (unless (and (exact-integer? limit) (positive? limit)
               (exact-integer? window) (positive? window))
    (error "make-rate-limit: LIMIT and WINDOW must be positive integers:" limit window))
  (when (sqlite-db? db) (prepare! db))
  (%make-rate-limit (if (procedure? db) (per-process-connection db) (lambda () db))
                    name limit window clock))

;; A connection holds one transaction at a time: this process's
;; threads take turns at the limits' statements.
(define statements-mutex (make-recursive-mutex))

(define-syntax-rule (exclusively body ...)
  (with-mutex statements-mutex body ...))

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

(define (retry-after limit db key now)
  ;; -> #f when KEY has had fewer than the limit's events in its window
  ;; at NOW, else the seconds until one of them leaves it
  (let* ((since (- now (rate-limit-window limit)))
         (count (vector-ref (run db "SELECT count(*) FROM plucky_rate_events
                                     WHERE name = ? AND key = ? AND time > ?"
                                 (rate-limit-name limit) key since)
                            0)))
    (and (>= count (rate-limit-limit limit))
         ;; the event whose leaving brings the count below the limit
         (let ((row (run db "SELECT time FROM plucky_rate_events
                             WHERE name = ? AND key = ? AND time > ?
                             ORDER BY time LIMIT 1 OFFSET ?"
                         (rate-limit-name limit) key since
                         (- count (rate-limit-limit limit)))))
           (max 1 (- (+ (vector-ref row 0) (rate-limit-window limit)) now))))))

(define (count! limit db key now)
  (run db "DELETE FROM plucky_rate_events WHERE name = ? AND time <= ?"
       (rate-limit-name limit) (- now (rate-limit-window limit)))
  (run db "INSERT INTO plucky_rate_events (name, key, time) VALUES (?, ?, ?)"
       (rate-limit-name limit) key now))

(define (rate-limit-retry-after limit key)
  "Return #f if KEY (a string) has had fewer than LIMIT's events in its
window, else the whole seconds, at least 1, until it may have one more."
  (exclusively
   (retry-after limit ((rate-limit-connection limit)) key ((rate-limit-clock limit)))))

(define (rate-limit-hit! limit key)
  "Count one event of KEY (a string) against LIMIT; return unspecified."
  (exclusively
   (let ((db ((rate-limit-connection limit))))
     (call-with-write-transaction db
       (lambda () (count! limit db key ((rate-limit-clock limit))))))))

(define (rate-limit-take! limit key)
  "Return #f and count one event of KEY against LIMIT if KEY is within
it, else the seconds until it may have one (as `rate-limit-retry-after'),
counting nothing.  The check and the count are one transaction: workers
racing on KEY never let more than the limit through."
  (exclusively
   (let ((db ((rate-limit-connection limit)))
         (now ((rate-limit-clock limit))))
     (call-with-write-transaction db
       (lambda ()
         (or (retry-after limit db key now)
             (begin (count! limit db key now) #f)))))))

(define (rate-limit-clear! limit key)
  "Forget the events of KEY counted against LIMIT; return unspecified."
  (exclusively
   (run ((rate-limit-connection limit))
        "DELETE FROM plucky_rate_events WHERE name = ? AND key = ?"
        (rate-limit-name limit) key)))

(define* (too-many-requests seconds #:key (content-type '(text/plain (charset . "utf-8"))))
  "Return the head of a 429 Too Many Requests response that asks the
client to wait SECONDS (Retry-After), with CONTENT-TYPE, and no caching."
  (build-response #:code 429
                  #:headers `((retry-after . ,seconds)
                              (content-type . ,content-type)
                              (cache-control . (no-store)))))

;;; (plucky web limit) ends here
