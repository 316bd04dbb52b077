;;; (news sql) --- the news site's database: SQLite or PostgreSQL, migrations

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; (news db) writes its SQL once, with `?' for parameters, and this
;;; module runs it on either backend:
;;;
;;;   a file name          SQLite (sqlite3): one connection per process,
;;;                        WAL mode, a busy timeout; every write
;;;                        transaction BEGIN IMMEDIATE, so writers queue
;;;   postgresql://…       PostgreSQL ((plucky db postgresql)): a pool per
;;;                        process; `?' become $1, $2 …;
;;;                        NULL comes back as #f, as from SQLite; a
;;;                        handler's query suspends the request
;;;
;;; A transaction (`call-with-transaction') raises the data's version as
;;; it commits: the row of the table meta on both backends, and on
;;; PostgreSQL a NOTIFY on the channel news_changes too.  The page caches
;;; of (news site) are keyed by `data-version': on SQLite, that row, read
;;; again each time (an indexed read in the process); on PostgreSQL, a
;;; counter of the process that its listener (`pg-listen', started at the
;;; first request a worker handles on its loop) raises at each
;;; notification, at its own commits, and at each connect (it may have
;;; missed some meanwhile): no round trip a request.  Without a listener
;;; (a script, a test calling the app directly, a listener whose
;;; connection is lost) the row is read, as on SQLite.  Another host's
;;; change shows here once its notification has arrived: milliseconds
;;; after its commit on one network.
;;;
;;; Migrations (`migrate!') are numbered; each is applied once, in
;;; order, recorded in the table schema_migrations, all in one
;;; transaction that holds a lock first (`call-with-exclusive-transaction':
;;; PostgreSQL's pg_advisory_xact_lock, SQLite's BEGIN IMMEDIATE), so
;;; that two hosts (or workers) starting at once apply each exactly once:
;;; the second waits, then finds them recorded.
;;;
;;; Code:

(define-module (news sql)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 match)
  #:use-module (sqlite3)
  #:use-module ((plucky server) #:select (suspendable? log-line))
  ;; Loaded at the first call, so that a site on SQLite never maps
  ;; PostgreSQL's modules, whose compiled data every collection scans
  ;; (bench/demo-gc's ".go roots"); tests/apps/lazy.scm checks it.  Its
  ;; call-with-transaction, which this module's own name hides, is
  ;; reached with `@', resolved at the first call too.
  #:autoload (plucky db postgresql) (make-pg-pool pg-close pg-query pg-execute
                                     pg-listen pg-unlisten pg-listener-connected?
                                     call-with-pg-connection pg-error?)
  #:use-module ((plucky web timing) #:select (with-phase))
  #:use-module ((plucky web files) #:select (private-file!))
  #:export (database-url?
            open-sql
            close-sql
            sql?
            sql-backend
            sql-location
            sql-handle
            query
            query-1
            query-value
            execute!
            call-with-transaction
            call-with-exclusive-transaction
            data-version
            migrate!))

(define (database-url? location)
  "Return true if LOCATION (a string) names a PostgreSQL database
(postgresql:// or postgres://) rather than an SQLite file."
  (or (string-prefix? "postgresql:" location) (string-prefix? "postgres:" location)))

(define-record-type <sql>
  (make-sql backend location handle)
  sql?
  (backend sql-backend)                 ; 'sqlite or 'postgresql
  (location sql-location)               ; the file, or the URL
  (handle sql-handle)                   ; the (sqlite3) connection, or a pg pool
  (in-transaction? sql-in-transaction? set-sql-in-transaction!) ; SQLite's
  (version sql-local-version set-sql-local-version!) ; PostgreSQL: see commentary
  (listener sql-listener set-sql-listener!)           ; PostgreSQL: or #f
  (listen-after sql-listen-after set-sql-listen-after!)) ; no try before (seconds)

;; SQLITE_BUSY, as guile-sqlite3 raises it
(define sqlite-busy 5)

(define (set-wal-mode! handle)
  ;; Switching a new file to WAL takes an exclusive lock without calling
  ;; the busy handler: two processes opening a new file at once can get
  ;; SQLITE_BUSY ("database is locked").  Try again, within the busy
  ;; time-out of `open-sql'.  (A file in WAL mode stays in it: only its
  ;; first opening switches.)
  (let retry ((waited-ms 0))
    (catch 'sqlite-error
      (lambda () (sqlite-exec handle "PRAGMA journal_mode=WAL"))
      (lambda (key who code . rest)
        (if (and (eqv? code sqlite-busy) (< waited-ms 10000))
            (begin (usleep 5000) (retry (+ waited-ms 5)))
            (apply throw key who code rest))))))

(define* (open-sql location #:key (pool #f))
  "Return a connection to LOCATION: an SQLite file (made readable by the
server's user alone, created if missing) or a PostgreSQL URL, through
POOL (of `make-pg-pool' on LOCATION) or a pool of its own."
  (let ((sql (if (database-url? location)
                 (make-sql 'postgresql location (or pool (make-pg-pool location)))
                 (begin
                   (private-file! location)
                   (let ((handle (sqlite-open location (logior SQLITE_OPEN_READWRITE
                                                               SQLITE_OPEN_CREATE))))
                     (sqlite-busy-timeout handle 10000)
                     (set-wal-mode! handle)
                     (sqlite-exec handle "PRAGMA synchronous=NORMAL")
                     (sqlite-exec handle "PRAGMA foreign_keys=ON")
                     (make-sql 'sqlite location handle))))))
    (set-sql-in-transaction! sql #f)
    (set-sql-local-version! sql 0)
    (set-sql-listener! sql #f)
    (set-sql-listen-after! sql 0)
    sql))

(define (close-sql sql)
  "Close SQL's connection (or its pool's, and its listener); return
unspecified."
  (case (sql-backend sql)
    ((sqlite) (sqlite-close (sql-handle sql)))
    (else
     (when (sql-listener sql)
       (pg-unlisten (sql-listener sql))
       (set-sql-listener! sql #f))
     (pg-close (sql-handle sql)))))

;;; Statements.  SQLite's are prepared once per connection and reset
;;; after use, so that no read transaction stays open between requests
;;; (an open one would pin the WAL and show this worker stale data);
;;; PostgreSQL's client prepares each text once per connection.  Each
;;; is the request's phase 'db (plucky web timing).

;; The connection of the PostgreSQL transaction in progress, as (SQL .
;; CONN): the queries made inside it go there.
(define current-transaction (make-parameter #f))

(define (pg-target sql)
  (let ((t (current-transaction)))
    (if (and t (eq? (car t) sql)) (cdr t) (sql-handle sql))))

(define (numbered-sql text)
  ;; TEXT with each `?' outside a string literal made $1, $2 …: made
  ;; afresh each time (no table for the threads of a pool to share),
  ;; a pass over a short string beside the query's round trip
  (call-with-output-string
    (lambda (port)
      (let lp ((i 0) (n 1) (quoted? #f))
        (when (< i (string-length text))
          (let ((c (string-ref text i)))
            (cond
             ((and (char=? c #\?) (not quoted?))
              (format port "$~a" n)
              (lp (+ i 1) (+ n 1) quoted?))
             (else
              (write-char c port)
              (lp (+ i 1) n (if (char=? c #\') (not quoted?) quoted?))))))))))

(define (pg-arguments args)
  ;; #f is SQL NULL, as (sqlite3) binds it
  (map (lambda (x) (if (eq? x #f) 'null x)) args))

(define (pg-row row)
  ;; NULL comes back as #f, as from (sqlite3)
  (let ((n (vector-length row)))
    (let lp ((i 0))
      (when (< i n)
        (when (eq? (vector-ref row i) 'null) (vector-set! row i #f))
        (lp (+ i 1))))
    row))

(define (query sql text . args)
  "Return the rows of TEXT (`?' for each of ARGS) on SQL, as a list of
vectors; NULL is #f."
  (with-phase 'db
    (lambda ()
      (case (sql-backend sql)
        ((sqlite)
         (let ((stmt (sqlite-prepare (sql-handle sql) text #:cache? #t)))
           (apply sqlite-bind-arguments stmt args)
           (let ((rows (reverse! (sqlite-fold cons '() stmt))))
             (sqlite-reset stmt)
             rows)))
        (else
         (map pg-row (apply pg-query (pg-target sql) (numbered-sql text) (pg-arguments args))))))))

(define (query-1 sql text . args)
  "Return the first row of TEXT with ARGS on SQL, or #f."
  (match (apply query sql text args)
    ((row . _) row)
    (() #f)))

(define (query-value sql text . args)
  "Return the first column of the first row of TEXT with ARGS, or #f."
  (let ((row (apply query-1 sql text args)))
    (and row (vector-ref row 0))))

(define (execute! sql text . args)
  "Run TEXT with ARGS on SQL for its effect; return unspecified."
  (apply query sql text args)
  (if #f #f))

;;; Transactions.

(define lock-key 7203945)               ; pg_advisory_xact_lock's: the news site's

(define* (transaction sql thunk #:key exclusive? (bump? #t))
  ;; THUNK's values, in a transaction of SQL; the data's version raised
  ;; at its commit when BUMP?
  (case (sql-backend sql)
    ((sqlite)
     (if (sql-in-transaction? sql)
         (thunk)
         (begin
           (execute! sql "BEGIN IMMEDIATE")
           (set-sql-in-transaction! sql #t)
           (with-exception-handler
               (lambda (e)
                 (set-sql-in-transaction! sql #f)
                 (execute! sql "ROLLBACK")
                 (raise-exception e))
             (lambda ()
               (call-with-values thunk
                 (lambda results
                   (set-sql-in-transaction! sql #f)
                   (when bump?
                     (execute! sql "UPDATE meta SET version = version + 1"))
                   (execute! sql "COMMIT")
                   (apply values results))))
             #:unwind? #t))))
    (else
     (let ((t (current-transaction)))
       (if (and t (eq? (car t) sql))
           (thunk)
           (call-with-values
               (lambda ()
                 (call-with-pg-connection (sql-handle sql)
                   (lambda (conn)
                     (parameterize ((current-transaction (cons sql conn)))
                       ((@ (plucky db postgresql) call-with-transaction) conn
                         (lambda ()
                           (when exclusive?
                             (pg-execute conn "SELECT pg_advisory_xact_lock($1)" lock-key))
                           (call-with-values thunk
                             (lambda results
                               (when bump?
                                 (pg-execute conn "UPDATE meta SET version = version + 1")
                                 (pg-execute conn "SELECT pg_notify('news_changes', '')"))
                               (apply values results)))))))))
             (lambda results
               ;; committed: this process's own pages change at once
               (when bump? (raise-local-version! sql))
               (apply values results))))))))

(define (call-with-transaction sql thunk)
  "Call THUNK inside a write transaction of SQL and return its values,
committed before this returns; roll back if it raises.  The data's
version is raised as it commits.  Inside a transaction of SQL already,
THUNK becomes part of it (the seeder makes thousands of items in one)."
  (transaction sql thunk))

(define (call-with-exclusive-transaction sql thunk)
  "As `call-with-transaction', holding the news site's lock first: one
such transaction at a time, across every process and host using SQL's
database (seeding, migrations)."
  (transaction sql thunk #:exclusive? #t))

;;; The data's version: what the page caches are keyed by.

(define (raise-local-version! sql)
  (set-sql-local-version! sql (+ 1 (sql-local-version sql))))

(define listen-retry-seconds 5)

(define (listening? sql)
  ;; -> true when SQL's listener is connected; starts it from a request
  ;; on a worker's loop (`pg-listen' watches its socket there)
  (let ((listener (sql-listener sql)))
    (cond
     (listener (pg-listener-connected? listener))
     ((and (suspendable?) (>= (current-time) (sql-listen-after sql)))
      (set-sql-listen-after! sql (+ (current-time) listen-retry-seconds))
      (with-exception-handler
          (lambda (e)
            (log-line "news: no LISTEN news_changes (~a); the version is read from the table"
                      (if (pg-error? e) "the database refused" e))
            #f)
        (lambda ()
          (set-sql-listener!
           sql
           (pg-listen (sql-location sql) "news_changes"
                      (lambda (notification) (raise-local-version! sql))
                      ;; notifications sent while it was away are lost
                      #:on-connect (lambda () (raise-local-version! sql))))
          #t)
        #:unwind? #t))
     (else #f))))

(define (data-version sql)
  "Return a value, compared with `equal?', that changes whenever any
process (on any host) commits a transaction of SQL (see the
commentary)."
  (case (sql-backend sql)
    ((sqlite) (query-value sql "SELECT version FROM meta"))
    (else
     (if (listening? sql)
         (sql-local-version sql)
         (cons 'row (query-value sql "SELECT version FROM meta"))))))

;;; Migrations.

(define (migrate! sql migrations)
  "Apply to SQL those of MIGRATIONS not applied yet, in order, and
record them in schema_migrations; return the numbers applied (by this
call).  Each migration is (NUMBER NAME (sqlite STATEMENT …) (postgresql
STATEMENT …)), NUMBER a positive integer, larger than its predecessor's.
All of it is one transaction under the site's lock: two processes
starting at once apply each migration once."
  (call-with-exclusive-transaction* sql
    (lambda ()
      (when (eq? (sql-backend sql) 'postgresql)
        ;; no NOTICE on stderr for each IF NOT EXISTS that finds the table
        (execute! sql "SET LOCAL client_min_messages = warning"))
      (execute! sql "CREATE TABLE IF NOT EXISTS schema_migrations (
                       version INTEGER PRIMARY KEY,
                       name TEXT NOT NULL,
                       applied BIGINT NOT NULL)")
      (let ((done (map (lambda (row) (vector-ref row 0))
                       (query sql "SELECT version FROM schema_migrations"))))
        (let lp ((migrations migrations) (applied '()))
          (match migrations
            (() (reverse applied))
            (((number name . statements) . rest)
             (if (memv number done)
                 (lp rest applied)
                 (begin
                   (for-each (lambda (text) (execute-script! sql text))
                             (or (assq-ref statements (sql-backend sql))
                                 (error "migrate!: no statements for this backend:"
                                        number (sql-backend sql))))
                   (execute! sql "INSERT INTO schema_migrations (version, name, applied)
                                  VALUES (?, ?, ?)" number name (current-time))
                   (lp rest (cons number applied)))))))))))

(define (call-with-exclusive-transaction* sql thunk)
  ;; exclusive, without raising the data's version: meta may not be
  ;; there yet
  (transaction sql thunk #:exclusive? #t #:bump? #f))

(define (execute-script! sql text)
  ;; SQLite runs a script of several statements; PostgreSQL's prepared
  ;; statements are one each (the migrations give them one by one)
  (case (sql-backend sql)
    ((sqlite) (sqlite-exec (sql-handle sql) text))
    (else (execute! sql text))))

;;; (news sql) ends here
