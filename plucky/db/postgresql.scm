;;; (plucky db postgresql) --- a PostgreSQL client for handlers: pool, queries, transactions

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; What an app imports to talk to PostgreSQL.  libpq (plucky sys libpq)
;;; speaks the protocol in non-blocking mode; (plucky db postgresql
;;; connection) waits on its socket with (plucky server)'s waits, so a
;;; handler's query suspends the request and its worker serves others,
;;; while a script's query simply blocks; (plucky db postgresql types)
;;; converts values.  This module adds the pool and the API:
;;;
;;;   (define db (make-pg-pool (getenv "DATABASE_URL")))   ; opens nothing yet
;;;   (pg-query db "SELECT id, name FROM t WHERE id = $1" 42)  -> (#(42 "x"))
;;;
;;; A query on a pool takes an idle connection (or opens one, up to
;;; #:size), runs, and gives the connection back.  A request that finds
;;; all #:size connections in use waits (suspends) for one, the oldest
;;; waiter first.  The pool belongs to a process: a pool made before the
;;; server forks its workers opens connections in each worker, and a
;;; child never uses (or closes) its parent's.
;;;
;;; Checkout checks a connection: closed, broken (libpq's status) or past
;;; #:max-lifetime-ms, it is closed and another taken; idle for more than
;;; a second, its socket is also polled (a server that restarted has
;;; closed it).  Given back, a connection still in the middle of a
;;; statement (its request failed or was cancelled while it waited) or
;;; inside a transaction is closed, not kept; idle ones past
;;; #:idle-timeout-ms are closed as the pool is used.  When connecting
;;; fails, the pool waits before trying again (from 25 ms, doubling, to
;;; a second); meanwhile queries that need a new connection fail at once
;;; with the last error, so that a database that is down costs requests
;;; no time.
;;;
;;; A database that is down, restarting or out of connections is not a
;;; bug in the app: `pg-unavailable-middleware' answers a request whose
;;; handler raised such an error (`pg-unavailable?') 503 with
;;; Retry-After, and logs one line a second at most, where any other
;;; exception would be a 500 and a backtrace each.
;;;
;;; Code:

(define-module (plucky db postgresql)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 exceptions)
  #:use-module ((web request) #:select (request-method request-uri))
  #:use-module ((web response) #:select (build-response))
  #:use-module ((web uri) #:select (uri-path))
  #:use-module ((plucky server)
                #:select (suspendable? make-event event-signal! event-wait
                          request-cancelled? worker-pid log-line))
  #:use-module (plucky db postgresql connection)
  #:use-module (plucky db postgresql types)
  #:use-module (plucky db postgresql listen)
  #:re-export (pg-listen
               pg-unlisten
               pg-listener?
               pg-listener-connected?
               &pg-error
               pg-error?
               pg-error-sqlstate
               pg-error-message
               pg-error-detail
               pg-json
               pg-json?
               pg-notification?
               pg-notification-channel
               pg-notification-payload
               pg-notification-pid)
  #:export (make-pg-pool
            pg-pool?
            pg-pool-stats
            pg-connect
            pg-close
            pg-connection?
            pg-backend-pid
            pg-query
            pg-query-row
            pg-execute
            pg-pipeline
            pg-for-each-row
            pg-copy-from
            pg-wait-notification
            call-with-pg-connection
            call-with-transaction
            with-transaction
            pg-unavailable?
            pg-unavailable-middleware))

;;;
;;; The pool
;;;

(define-record-type <pg-pool>
  (%make-pg-pool url size idle-timeout-ms max-lifetime-ms statement-timeout-ms
                 connect-timeout-ms checkout-timeout-ms)
  pg-pool?
  (url pg-pool-url)
  (size pg-pool-size)                   ; most connections open at once
  (idle-timeout-ms pg-pool-idle-timeout-ms)
  (max-lifetime-ms pg-pool-max-lifetime-ms)
  (statement-timeout-ms pg-pool-statement-timeout-ms) ; SET at connect, or #f
  (connect-timeout-ms pg-pool-connect-timeout-ms)
  (checkout-timeout-ms pg-pool-checkout-timeout-ms)   ; waiting for a free one
  (pid pg-pool-pid set-pg-pool-pid!)    ; the process the connections belong to
  (idle pg-pool-idle set-pg-pool-idle!) ; <pg-conn>s, the last given back first
  (open pg-pool-open set-pg-pool-open!) ; connections open or opening: idle + in use
  ;; waiting requests' events, oldest first; each is signalled with a
  ;; connection, or with #t when a place is free to open one
  (waiters pg-pool-waiters set-pg-pool-waiters!)
  (swept-ms pg-pool-swept-ms set-pg-pool-swept-ms!) ; last look for idle timeouts
  (failures pg-pool-failures set-pg-pool-failures!) ; connects failed in a row
  (retry-ms pg-pool-retry-ms set-pg-pool-retry-ms!) ; no connect before (now-ms)
  (last-error pg-pool-last-error set-pg-pool-last-error!)) ; of the last connect

(define* (make-pg-pool url #:key (size 8) (idle-timeout-ms 60000) (max-lifetime-ms 3600000)
                       (statement-timeout-ms #f) (connect-timeout-ms 10000)
                       (checkout-timeout-ms 30000))
  "Return a pool of at most SIZE connections to URL, a postgresql:// URL
or a libpq key=value string (PG* environment variables fill in what it
leaves out).  No connection is opened until a query needs one.  An idle
connection is closed after IDLE-TIMEOUT-MS, any after MAX-LIFETIME-MS;
STATEMENT-TIMEOUT-MS (#f: the server's) is each connection's
statement_timeout; CONNECT-TIMEOUT-MS bounds a connect and
CHECKOUT-TIMEOUT-MS a request's wait for a free connection.  Raises an
error with libpq's one-line reason if URL is malformed."
  (unless (string? url)
    (raise-exception
     (make-exception (make-error) (make-exception-with-origin 'make-pg-pool)
                     (make-exception-with-message "the database URL is not a string")
                     (make-exception-with-irritants (list url)))))
  (let ((problem (conninfo-check url)))
    (when problem
      ;; the URL itself is not repeated: it may hold a password
      (raise-exception
       (make-exception (make-error) (make-exception-with-origin 'make-pg-pool)
                       (make-exception-with-message
                        (string-append "malformed database URL: " problem))
                       (make-exception-with-irritants '())))))
  (for-each (lambda (name value)
              (unless (and (exact-integer? value) (> value 0))
                (raise-exception
                 (make-exception (make-error) (make-exception-with-origin 'make-pg-pool)
                                 (make-exception-with-message
                                  (string-append "#:" name " must be a positive integer"))
                                 (make-exception-with-irritants (list value))))))
            '("size" "idle-timeout-ms" "max-lifetime-ms" "connect-timeout-ms"
              "checkout-timeout-ms")
            (list size idle-timeout-ms max-lifetime-ms connect-timeout-ms checkout-timeout-ms))
  (let ((pool (%make-pg-pool url size idle-timeout-ms max-lifetime-ms statement-timeout-ms
                             connect-timeout-ms checkout-timeout-ms)))
    (reset-pool! pool)
    pool))

(define (reset-pool! pool)
  (set-pg-pool-pid! pool (worker-pid))
  (set-pg-pool-idle! pool '())
  (set-pg-pool-open! pool 0)
  (set-pg-pool-waiters! pool '())
  (set-pg-pool-swept-ms! pool (now-ms))
  (set-pg-pool-failures! pool 0)
  (set-pg-pool-retry-ms! pool 0)
  (set-pg-pool-last-error! pool #f))

(define (check-pid! pool)
  ;; in a process forked after the pool was used: forget the parent's
  ;; connections (they are its sessions), start afresh
  (unless (= (pg-pool-pid pool) (worker-pid))
    (for-each conn-forget! (pg-pool-idle pool))
    (reset-pool! pool)))

(define (pg-pool-stats pool)
  "Return an alist of POOL's state in this process: open (connections
open or opening), idle (of those, waiting in the pool), waiting
(requests waiting for one)."
  (check-pid! pool)
  `((open . ,(pg-pool-open pool))
    (idle . ,(length (pg-pool-idle pool)))
    (waiting . ,(length (pg-pool-waiters pool)))))

(define (discard! pool conn)
  ;; close CONN, one of POOL's, and let a waiter open another
  (conn-close! conn)
  (set-pg-pool-open! pool (- (pg-pool-open pool) 1))
  (hand-over! pool #t))

(define (hand-over! pool value)
  ;; give VALUE (a connection, or #t: a place to open one) to the oldest
  ;; waiting request; -> #t if one took it
  (let lp ()
    (let ((waiters (pg-pool-waiters pool)))
      (and (pair? waiters)
           (begin
             (set-pg-pool-waiters! pool (cdr waiters))
             ;; 0 woken: that request timed out or was cancelled
             (or (> (event-signal! (car waiters) value) 0)
                 (lp)))))))

(define idle-check-ms 1000)             ; idle longer: poll its socket at checkout

(define (usable? pool conn now)
  ;; CONN was idle and connected when given back (`checkin!'), and libpq
  ;; has not been called on it since: only the time, and the socket of a
  ;; connection idle long enough for the server to have gone, are checked
  (and (< (- now (pg-conn-born-ms conn)) (pg-pool-max-lifetime-ms pool))
       (or (< (- now (pg-conn-idle-since conn)) idle-check-ms)
           (conn-healthy? conn #t))))

(define (open-one! pool)
  ;; -> a new connection of POOL, counted in `open' from the start (the
  ;; connect suspends, and other requests must not overshoot the size)
  (let ((now (now-ms)))
    (when (< now (pg-pool-retry-ms pool))
      (raise-exception (pg-pool-last-error pool))))
  (set-pg-pool-open! pool (+ (pg-pool-open pool) 1))
  (let ((conn (with-exception-handler
                  (lambda (e)
                    (set-pg-pool-open! pool (- (pg-pool-open pool) 1))
                    (when (pg-error? e)
                      (let ((failures (+ 1 (pg-pool-failures pool))))
                        (set-pg-pool-failures! pool failures)
                        (set-pg-pool-retry-ms! pool (+ (now-ms)
                                                       (min 1000 (* 25 (expt 2 (min failures 6))))))
                        (set-pg-pool-last-error! pool e)))
                    (hand-over! pool #t)
                    (raise-exception e))
                (lambda ()
                  (conn-open (pg-pool-url pool)
                           #:connect-timeout-ms (pg-pool-connect-timeout-ms pool)
                           #:statement-timeout-ms (pg-pool-statement-timeout-ms pool)))
                #:unwind? #t)))
    (set-pg-pool-failures! pool 0)
    (set-pg-pool-pool! conn pool)
    conn))

(define (set-pg-pool-pool! conn pool) (set-pg-conn-pool! conn pool))

(define (checkout! pool)
  ;; -> a connection of POOL for the caller alone
  (check-pid! pool)
  (let lp ()
    (let ((idle (pg-pool-idle pool)))
      (cond
       ((pair? idle)
        (let ((conn (car idle)))
          (set-pg-pool-idle! pool (cdr idle))
          (if (usable? pool conn (now-ms))
              conn
              (begin
                (conn-close! conn)
                (set-pg-pool-open! pool (- (pg-pool-open pool) 1))
                (lp)))))
       ((< (pg-pool-open pool) (pg-pool-size pool))
        (open-one! pool))
       ((suspendable?)
        (let* ((event (make-event))
               (_ (set-pg-pool-waiters! pool (append (pg-pool-waiters pool) (list event))))
               (value (with-exception-handler
                          (lambda (e)
                            ;; given up while it waited: out of the queue
                            (set-pg-pool-waiters! pool (delq event (pg-pool-waiters pool)))
                            (raise-exception e))
                        (lambda ()
                          (event-wait event #:timeout-ms (pg-pool-checkout-timeout-ms pool)
                                      #:default #f)))))
          (cond
           ((pg-conn? value)
            (if (usable? pool value (now-ms))
                value
                (begin (discard! pool value) (lp))))
           (value (lp))                 ; a place to open one
           (else
            (set-pg-pool-waiters! pool (delq event (pg-pool-waiters pool)))
            (raise-pg-error "08001" "no free connection in the pool within #:checkout-timeout-ms")))))
       (else
        ;; nobody else runs to give one back
        (raise-pg-error "08001" "all the pool's connections are in use (by this caller)"))))))

(define (checkin! pool conn)
  ;; give CONN back to POOL (in the process that took it out: a request
  ;; does not cross a fork)
  (cond
   ((or (not (pg-conn-open? conn))
        (pg-conn-busy? conn)
        (not (conn-idle? conn)))        ; in a transaction, or broken
    (discard! pool conn))
   (else
    (let ((now (now-ms)))
      (set-pg-conn-idle-since! conn now)
      (unless (hand-over! pool conn)
        (set-pg-pool-idle! pool (cons conn (pg-pool-idle pool))))
      (when (> (- now (pg-pool-swept-ms pool)) 1000)
        (sweep! pool now)))))
  (values))

(define (sweep! pool now)
  ;; close the idle connections past the idle timeout or their lifetime
  (set-pg-pool-swept-ms! pool now)
  (let ((keep (filter (lambda (conn)
                        (or (and (< (- now (pg-conn-idle-since conn)) (pg-pool-idle-timeout-ms pool))
                                 (< (- now (pg-conn-born-ms conn)) (pg-pool-max-lifetime-ms pool)))
                            (begin
                              (conn-close! conn)
                              (set-pg-pool-open! pool (- (pg-pool-open pool) 1))
                              #f)))
                      (pg-pool-idle pool))))
    (set-pg-pool-idle! pool keep)))

(define (call-with-pg-connection pool proc)
  "Return the values of (PROC CONNECTION), CONNECTION taken from POOL
for PROC alone and given back once PROC returns or raises (closed
instead if it broke, or was left in the middle of a statement or a
transaction).  PROC must leave by returning or raising: a connection
escaped from with a continuation is never given back."
  (let ((conn (checkout! pool)))
    (call-with-values
        (lambda ()
          (with-exception-handler
              (lambda (e) (checkin! pool conn) (raise-exception e))
            (lambda () (proc conn))))
      (lambda results
        (checkin! pool conn)
        (apply values results)))))

;;;
;;; Connections of one's own
;;;

(define* (pg-connect url #:key (connect-timeout-ms 10000) (statement-timeout-ms #f))
  "Return a new connection to URL (as `make-pg-pool' takes it), for the
caller alone; close it with `pg-close'."
  (let ((problem (and (string? url) (conninfo-check url))))
    (when problem
      (raise-exception
       (make-exception (make-error) (make-exception-with-origin 'pg-connect)
                       (make-exception-with-message
                        (string-append "malformed database URL: " problem))
                       (make-exception-with-irritants '())))))
  (conn-open url #:connect-timeout-ms connect-timeout-ms
           #:statement-timeout-ms statement-timeout-ms))

(define (pg-connection? x)
  "True if X is a connection (from `pg-connect' or a pool)."
  (pg-conn? x))

(define (pg-close db)
  "Close DB: a connection (once; closing it again does nothing), or a
pool's idle connections (the pool stays usable, opening new ones as
needed; connections in use are closed as they come back).  Return
nothing."
  (if (pg-pool? db)
      (begin
        (check-pid! db)
        (for-each (lambda (conn)
                    (conn-close! conn)
                    (set-pg-pool-open! db (- (pg-pool-open db) 1)))
                  (pg-pool-idle db))
        (set-pg-pool-idle! db '())
        (values))
      (conn-close! db)))

(define (pg-backend-pid conn)
  "Return the PID of the server process serving CONN (for
pg_terminate_backend, pg_stat_activity)."
  (conn-backend-pid conn))

;;;
;;; Queries
;;;

(define-syntax-rule (with-db db conn expression)
  ;; the value of EXPRESSION with CONN bound to DB, a connection, or to
  ;; one taken from DB, a pool (as `call-with-pg-connection', without
  ;; its closure and multiple values: the per-query path)
  (let ((x db))
    (if (pg-pool? x)
        (let* ((conn (checkout! x))
               (value (with-exception-handler
                          (lambda (e) (checkin! x conn) (raise-exception e))
                        (lambda () expression))))
          (checkin! x conn)
          value)
        (let ((conn x)) expression))))

(define (pg-query db sql . params)
  "Return the rows of SQL's result, a list of vectors (a value per
column, in order), SQL run on DB (a pool or a connection) with PARAMS as
$1, $2 ...  Parameters are sent apart from SQL's text, never spliced into
it; SQL is prepared once per connection."
  (with-db db conn (conn-query conn sql params 'rows)))

(define (pg-query-row db sql . params)
  "Return the first row of SQL's result (a vector), or #f if it has none;
as `pg-query'."
  (with-db db conn (conn-query conn sql params 'row)))

(define (pg-execute db sql . params)
  "Return the number of rows SQL (INSERT, UPDATE, DELETE ...) affected;
as `pg-query'."
  (with-db db conn (conn-query conn sql params 'count)))

(define (pg-pipeline db statements)
  "Return the results of STATEMENTS, a list of (SQL PARAM ...), one per
statement in order, each a list of row vectors: all sent at once in
libpq's pipeline mode and answered in one round trip.  The first error
is raised; the statements after a failed one do not run."
  (with-db db conn (conn-pipeline conn statements)))

(define (pg-for-each-row db proc sql . params)
  "Call PROC on each row of SQL's result, a vector, in order; return the
number of rows.  Rows come one at a time (libpq's single-row mode): a
result of any size takes the memory of one row."
  (with-db db conn (conn-for-each-row conn proc sql params)))

(define (pg-copy-from db sql rows)
  "Return the number of rows loaded by SQL, a COPY ... FROM STDIN
statement, ROWS being a list of vectors or a procedure that returns the
next vector, then #f."
  (with-db db conn (conn-copy-from conn sql rows)))

(define* (pg-wait-notification conn #:key (timeout-ms #f))
  "Return the next notification CONN (a connection that ran LISTEN)
received: a record with `pg-notification-channel', `-payload' and
`-pid'; or #f when TIMEOUT-MS milliseconds passed first (#f: no limit).
A handler suspends meanwhile."
  (when (pg-pool? conn)
    (error "pg-wait-notification: needs a connection of its own (pg-connect), not a pool"))
  (conn-wait-notification conn #:timeout-ms timeout-ms))

;;;
;;; Transactions
;;;

(define (call-with-transaction conn thunk)
  "Return the values of THUNK, called inside a transaction on CONN:
BEGIN before, COMMIT after it returns, ROLLBACK if it raises (the
exception is raised on).  Nested, a savepoint instead of BEGIN."
  (when (pg-pool? conn)
    (error "with-transaction: needs a connection (call-with-pg-connection), not a pool"))
  (let* ((depth (pg-conn-depth conn))
         (savepoint (string-append "plucky_sp" (number->string depth))))
    (conn-command conn (if (zero? depth) "BEGIN" (string-append "SAVEPOINT " savepoint)))
    (set-pg-conn-depth! conn (+ depth 1))
    (call-with-values
        (lambda ()
          (with-exception-handler
              (lambda (e)
                (set-pg-conn-depth! conn depth)
                (cond
                 ;; a lost connection has nothing to roll back
                 ((not (pg-conn-open? conn)) #f)
                 ;; a request given up must not wait again: closing the
                 ;; connection rolls back on the server's side
                 ((request-cancelled? e) (pg-close conn))
                 (else                  ; (the rest of a result is read first)
                  (false-if-exception
                   (conn-command conn (if (zero? depth)
                                          "ROLLBACK"
                                          (string-append "ROLLBACK TO SAVEPOINT " savepoint
                                                         "; RELEASE SAVEPOINT " savepoint))))))
                (raise-exception e))
            thunk
            ;; unwound first: the ROLLBACK waits, and may suspend
            #:unwind? #t))
      (lambda results
        (set-pg-conn-depth! conn depth)
        (conn-command conn (if (zero? depth) "COMMIT" (string-append "RELEASE SAVEPOINT " savepoint)))
        (apply values results)))))

(define-syntax-rule (with-transaction conn body ...)
  (call-with-transaction conn (lambda () body ...)))

;;;
;;; The database unavailable: 503, not 500
;;;

(define (pg-unavailable? exception)
  "Return true when EXCEPTION is a &pg-error that says the database cannot
be reached or is not taking work now, rather than that a statement was
wrong: SQLSTATE class 08 (no connection, a connection lost, no free
connection in the pool), 57P01-57P03 (the server shutting down, crashed
or starting up) and 53300 (too many connections)."
  (and (pg-error? exception)
       (let ((sqlstate (pg-error-sqlstate exception)))
         (or (string-prefix? "08" sqlstate)
             (member sqlstate '("57P01" "57P02" "57P03" "53300"))))
       #t))

;; One line a second at most, per process, however many requests fail:
;; while the database is down every request would log one.
(define unavailable-last-log #f)          ; internal real time of the last line, or #f
(define unavailable-unlogged 0)           ; 503s answered since, not logged

(define (log-unavailable! exception request)
  (let ((now (get-internal-real-time)))
    ;; #f at first: internal real time counts from the process's start,
    ;; so a first line compared with 0 was lost in a process's first second.
    (if (and unavailable-last-log
             (< (- now unavailable-last-log) internal-time-units-per-second))
        (set! unavailable-unlogged (+ unavailable-unlogged 1))
        (begin
          (log-line "database unavailable (~a ~a): 503 to ~a ~a~a"
                    (pg-error-sqlstate exception)
                    (one-line (pg-error-message exception))
                    (request-method request) (uri-path (request-uri request))
                    (if (zero? unavailable-unlogged)
                        ""
                        (format #f " and ~a more since the last line"
                                unavailable-unlogged)))
          (set! unavailable-last-log now)
          (set! unavailable-unlogged 0)))))

(define* (pg-unavailable-middleware #:key (retry-after-s 5))
  "Return a middleware (handler -> handler) whose handler answers 503
Service Unavailable, with Retry-After: RETRY-AFTER-S and a short text,
when the handler it wraps raises an error `pg-unavailable?' says is the
database's absence, and logs it in one line (a second at most, with the
count of the others); every other exception passes on untouched, with
its stack (a 500 and its backtrace, from the server).  Put it outside
the middleware that reads the database too (sessions kept in
PostgreSQL)."
  (let ((response (build-response
                   #:code 503
                   #:headers `((content-type text/plain (charset . "utf-8"))
                               (retry-after . ,retry-after-s)
                               (cache-control no-store))))
        (text "The database is unavailable; please try again in a few seconds.\n"))
    (lambda (handler)
      (lambda (request body)
        (let ((tag (make-prompt-tag "pg-unavailable")))
          (call-with-prompt tag
            (lambda ()
              ;; Not an unwinding handler: any other exception goes on
              ;; from where it was raised, its stack whole for the
              ;; server's backtrace.
              (with-exception-handler
                  (lambda (exception)
                    (if (pg-unavailable? exception)
                        (abort-to-prompt tag exception)
                        (raise-continuable exception)))
                (lambda () (handler request body))))
            (lambda (k exception)
              (log-unavailable! exception request)
              (values response text))))))))

;;; (plucky db postgresql) ends here
