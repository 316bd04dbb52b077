;;; tests/db/postgresql.scm --- (plucky db postgresql) against a real PostgreSQL
;;;
;;; The file starts its own server with scripts/pg-temp in a scratch
;;; directory and stops it at the end, by the PID in its postmaster.pid,
;;; failures or not.  Without Debian's PostgreSQL server installed the
;;; tests are skipped, except under CI (CI set), where that is a failure:
;;; scripts/install-deps check installs it.
;;;
;;; Covered: every type both ways (NULL, arrays); SQL injection payloads
;;; through every parameter type; transactions and savepoints; pipelines;
;;; the pool (its size, reuse, one per process, broken connections
;;; dropped, the health check, the wait for a free one); SQLSTATEs;
;;; statement timeouts; single-row mode over a million rows in bounded
;;; memory; COPY; LISTEN/NOTIFY; malformed URLs; the limits; and inside
;;; a real plucky server: queries that suspend rather than block, a
;;; request given up in the middle of a query, and PostgreSQL restarted
;;; under load (503s, then recovery, no hung worker, no descriptor leak).

(use-modules (srfi srfi-1)
             (srfi srfi-11)
             (srfi srfi-19)
             (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (ice-9 exceptions)
             (ice-9 format)
             (ice-9 rdelim)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (tests lib server)
             (tests lib command)
             (tests lib postgresql)
             (plucky server)
             (plucky db postgresql))

(test-runner-current (plucky-test-runner))
(test-begin "db/postgresql")

;;;
;;; The server
;;;

(define scratch (and (postgresql-installed?) (temporary-directory)))
(define url (and scratch (start-postgresql scratch)))
(check-postgresql-or-skip url)

(define-syntax-rule (when-postgresql name body ...)
  (if url
      (test-group name (call-guarded (lambda () body ...)))
      (begin (test-skip 1) (test-assert name #f))))

(define (sqlstate-of thunk)
  ;; -> the SQLSTATE of the &pg-error THUNK raises, or 'no-error
  (guard (e ((pg-error? e) (pg-error-sqlstate e)))
    (thunk)
    'no-error))

(define (error-message-of thunk)
  ;; -> the message of the error THUNK raises (not a &pg-error), or #f
  (guard (e ((and (not (pg-error? e)) (exception-with-message? e)) (exception-message e)))
    (thunk)
    #f))

(define (descriptors pid)
  (let ((dir (opendir (format #f "/proc/~a/fd" pid))))
    (let lp ((n 0))
      (let ((entry (readdir dir)))
        (cond
         ((eof-object? entry) (closedir dir) n)
         ((member entry '("." "..")) (lp n))
         (else (lp (+ n 1))))))))

(define (rss-kib)
  (let ((field (process-status-field (getpid) "VmRSS")))
    (string->number (car (string-split field #\space)))))

;;;
;;; The server the tests of handlers run: started before this process
;;; opens any connection, so that it inherits none
;;;

(define (text code . parts)
  (values (build-response #:code code #:headers '((content-type . (text/plain))))
          (string-concatenate parts)))

(define sleep-pool (and url (make-pg-pool url #:size 10)))
(define small-pool (and url (make-pg-pool (string-append url "?application_name=plucky-small")
                                          #:size 2 #:checkout-timeout-ms 300)))
(define fault-pool (and url (make-pg-pool url #:size 4 #:connect-timeout-ms 2000)))

(define (query-of request) (or (uri-query (request-uri request)) ""))

;; one connection shared by requests (a mistake the module reports)
(define shared #f)

(define (handler request body)
  (let ((path (uri-path (request-uri request))))
    (guard (e ((pg-error? e) (text 503 (pg-error-sqlstate e) " " (pg-error-message e))))
      (cond
       ((string=? path "/sleep")
        (pg-query sleep-pool "SELECT pg_sleep($1::float8)" (string->number (query-of request)))
        (text 200 "slept"))
       ((string=? path "/small")
        (pg-query small-pool "SELECT pg_sleep($1::float8)" (string->number (query-of request)))
        (text 200 "slept"))
       ((string=? path "/fault")
        (text 200 (number->string
                   (vector-ref (pg-query-row fault-pool "SELECT $1::int FROM pg_sleep(0.2)" 7) 0))))
       ((string=? path "/stats")
        ;; each pool's stats, then the shared connection's (open . 0 or 1)
        (text 200 (format #f "~s" (append (map (lambda (pool) (pg-pool-stats pool))
                                               (list sleep-pool small-pool fault-pool))
                                          (list (list (cons 'open (if shared 1 0))))))))
       ((string=? path "/listen")
        (let* ((c (pg-connect url))
               (n (with-exception-handler
                      (lambda (e) (pg-close c) (raise-exception e))
                    (lambda ()
                      (pg-execute c "LISTEN web")
                      (pg-wait-notification c #:timeout-ms 5000)))))
          (pg-close c)
          (text 200 (if n (pg-notification-payload n) "none"))))
       ((string=? path "/shared")
        (unless shared (set! shared (pg-connect url)))
        (pg-query shared "SELECT pg_sleep($1::float8)" (string->number (query-of request)))
        (text 200 "slept"))
       ((string=? path "/hello") (text 200 "hello"))
       (else (text 404 "no"))))))

(define (get port path)
  (car (get-all port (list path) #:timeout 20)))

(define (stats port)
  (with-input-from-string (cdr (get port "/stats")) read))

(define (pools-open port)
  ;; the connections the server counts as open: its pools', its own
  (apply + (map (lambda (stats) (assq-ref stats 'open)) (stats port))))

(define (socket-inodes pid)
  ;; -> the inodes of PID's socket descriptors
  (let ((dir (format #f "/proc/~a/fd" pid)))
    (filter-map (lambda (entry)
                  (let ((target (false-if-exception (readlink (string-append dir "/" entry)))))
                    (and target (string-prefix? "socket:[" target)
                         (string->number (substring target 8 (- (string-length target) 1))))))
                (let ((stream (opendir dir)))
                  (let lp ((entries '()))
                    (let ((entry (readdir stream)))
                      (if (eof-object? entry)
                          (begin (closedir stream) entries)
                          (lp (if (member entry '("." "..")) entries (cons entry entries))))))))))

(define (postgresql-sockets pid)
  ;; -> how many of PID's sockets are TCP connections to PostgreSQL's port
  (let* ((pg-port (string->number (car (string-split (caddr (string-split url #\:)) #\/))))
         (remote (string-upcase (format #f ":~4,'0x" pg-port)))
         (inodes (socket-inodes pid)))
    (call-with-input-file (format #f "/proc/~a/net/tcp" pid)
      (lambda (port)
        (read-line port)                ; the heading
        (let lp ((count 0))
          (let ((line (read-line port)))
            (if (eof-object? line)
                count
                (let ((fields (string-tokenize line)))
                  ;; 2: rem_address IP:PORT, 9: inode
                  (lp (if (and (string-suffix? remote (list-ref fields 2))
                               (memv (string->number (list-ref fields 9)) inodes))
                          (+ count 1)
                          count))))))))))

(define (check-sockets when pid)
  ;; the worker's sockets to PostgreSQL are the connections it counts as
  ;; open; if not, the sessions are shown, to tell which
  (let ((open (pools-open port))
        (sockets (postgresql-sockets pid)))
    (test-equal (string-append when ": the worker's sockets to PostgreSQL are its open connections")
      open sockets)
    (unless (= open sockets)
      (format #t "stats: ~s~%sessions: ~s~%" (stats port)
              (false-if-exception
               (pg-query other "SELECT client_port, state, query FROM pg_stat_activity
                                WHERE backend_type = 'client backend' ORDER BY backend_start"))))))

(define (sessions application-name state)
  (vector-ref (pg-query-row other "SELECT count(*) FROM pg_stat_activity
                                    WHERE application_name = $1 AND state = $2"
                            application-name state)
              0))

(define server
  (and url (guard (e (#t (test-assert "the test server starts" #f) #f))
             (start-server handler #:options '(#:handler-timeout 5)))))
(define port (and server (server-port server)))

;; The connections of this process's tests.
(define conn (and url (pg-connect url)))
(define other (and url (pg-connect url)))

;;;
;;; Types
;;;

(define (round-trip type value)
  (vector-ref (pg-query-row conn (string-append "SELECT $1::" type) value) 0))

(define (same-instant? a b)
  (and (date? a) (date? b)
       (time=? (date->time-utc a) (date->time-utc b))))

(define all-bytes (u8-list->bytevector (iota 256)))

;; (type value expected): expected is what comes back (#:same: value)
(define type-cases
  `(("int2" 0 #:same) ("int2" 32767 #:same) ("int2" -32768 #:same)
    ("int4" 2147483647 #:same) ("int4" -2147483648 #:same)
    ("int8" 9223372036854775807 #:same) ("int8" -9223372036854775808 #:same)
    ("float4" 1.5 #:same) ("float4" -0.25 #:same)
    ("float8" 3.141592653589793 #:same) ("float8" 1e300 #:same) ("float8" -2.5e-300 #:same)
    ("float8" +inf.0 #:same) ("float8" -inf.0 #:same) ("float8" 7 7.0)
    ("numeric" 1/8 #:same) ("numeric" -5/2 #:same)
    ("numeric" 123456789012345678901234567890 #:same)
    ("numeric" 0.5 1/2) ("numeric" "12.340" 1234/100)
    ("text" "" #:same) ("text" "héllo ✓ 𝄞" #:same) ("text" "tab\there\nline\r\\ 'q' \"qq\"" #:same)
    ("varchar" "abc" #:same) ("bpchar" "x" #:same)
    ("bool" #t #:same) ("bool" #f #:same)
    ("bytea" #vu8() #:same) ("bytea" #vu8(0 1 2 255) #:same) ("bytea" ,all-bytes #:same)
    ("json" ,(pg-json '(("a" . 1) ("b" . #(#t null "x")))) (("a" . 1) ("b" . #(#t null "x"))))
    ("jsonb" ,(pg-json '(("k" . 1.5))) (("k" . 1.5)))
    ("jsonb" "[1, \"two\"]" #(1 "two"))
    ("uuid" "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" #:same)
    ("int4[]" #(1 2 null 4) #:same)
    ("int8[]" #() #:same)
    ("int4[][]" #(#(1 2) #(3 4)) #:same)
    ("text[]" #("a" "b,c" "\"q\"" "back\\slash" null "NULL" "" " sp " "{}") #:same)
    ("bool[]" #(#t #f null) #:same)
    ("float8[]" #(1.5 -inf.0) #:same)
    ("numeric[]" #(1/4 100) #:same)
    ("bytea[]" #(#vu8(1 2) null #vu8()) #:same)
    ("uuid[]" #("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11") #:same)
    ("jsonb[]" #("{\"a\": [1]}" null) #((("a" . #(1))) null))
    ("varchar[]" #("x y") #:same)))

(when-postgresql "types both ways"
  (for-each
   (lambda (case)
     (let ((type (car case)) (value (cadr case)) (expected (caddr case)))
       (test-equal (format #f "~a ~s" type value)
         (if (eq? expected #:same) value expected)
         (round-trip type value))))
   type-cases)
  (test-assert "float8 NaN" (nan? (round-trip "float8" +nan.0)))
  (test-assert "numeric NaN" (nan? (round-trip "numeric" "NaN")))
  (for-each
   (lambda (type)
     (test-equal (string-append "NULL as " type) 'null (round-trip type 'null)))
   (delete-duplicates (map car type-cases)))
  (test-equal "date"
    (make-date 0 0 0 0 29 2 2024 0)
    (round-trip "date" (make-date 0 0 0 0 29 2 2024 0)))
  (test-equal "timestamp, microseconds"
    (make-date 123456000 5 4 3 2 1 2024 0)
    (round-trip "timestamp" (make-date 123456000 5 4 3 2 1 2024 0)))
  (test-assert "timestamptz: the same instant from another zone"
    (same-instant? (make-date 0 1 2 3 4 5 2024 19800)
                   (round-trip "timestamptz" (make-date 0 1 2 3 4 5 2024 19800))))
  (test-equal "a year BC"
    -43 (date-year (round-trip "date" "0044-03-15 BC")))
  (test-equal "infinity dates" (list +inf.0 -inf.0)
    (list (round-trip "timestamp" "infinity") (round-trip "date" "-infinity")))
  (test-equal "date[]"
    (vector (make-date 0 0 0 0 1 1 2000 0) 'null)
    (round-trip "date[]" (vector (make-date 0 0 0 0 1 1 2000 0) 'null)))
  (test-equal "a type without a decoder comes as its text"
    "1 day 02:00:00" (round-trip "interval" "1 day 2 hours"))
  (test-equal "several columns, in order"
    #(1 "two" null #t)
    (pg-query-row conn "SELECT 1, 'two', NULL::int, true"))
  (test-equal "rows, in order"
    '(#(1) #(2) #(3))
    (pg-query conn "SELECT i FROM generate_series(1, $1) i ORDER BY i" 3))
  (test-equal "no row: pg-query-row is #f" #f (pg-query-row conn "SELECT 1 WHERE false"))
  (test-equal "no row: pg-query is ()" '() (pg-query conn "SELECT 1 WHERE false"))
  ;; through a table's columns, each type stored and read back
  (pg-execute conn "CREATE TABLE typed (i2 int2, i4 int4, i8 int8, f4 float4, f8 float8,
                    n numeric, t text, v varchar(20), b bool, by bytea, j jsonb, d date,
                    ts timestamp, tz timestamptz, u uuid, ai int4[], at text[])")
  (let ((row (vector 1 2 3 0.5 0.25 12/5 "t" "v" #t #vu8(9) (pg-json '(("x" . "y")))
                     (make-date 0 0 0 0 3 4 2025 0) (make-date 0 6 5 4 3 4 2025 0)
                     (make-date 0 6 5 4 3 4 2025 0) "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
                     #(1 null) #("a" null))))
    (test-equal "INSERT of every type" 1
      (apply pg-execute conn "INSERT INTO typed VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17)"
             (vector->list row)))
    (let ((back (pg-query-row conn "SELECT * FROM typed"))
          (strip (lambda (v)
                   ;; without the jsonb and timestamptz columns, compared apart
                   (let ((v (vector-copy v)))
                     (vector-set! v 10 #f)
                     (vector-set! v 13 #f)
                     v))))
      (test-equal "read back" (strip row) (strip back))
      (test-equal "jsonb column" '(("x" . "y")) (vector-ref back 10))
      (test-assert "timestamptz column" (same-instant? (vector-ref row 13) (vector-ref back 13))))
    (test-equal "NULL in every column" 1
      (pg-execute conn "INSERT INTO typed VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17)"
                  'null 'null 'null 'null 'null 'null 'null 'null 'null 'null 'null 'null 'null 'null 'null 'null 'null))
    (test-equal "read back as null"
      (make-vector 17 'null)
      (pg-query-row conn "SELECT * FROM typed WHERE i2 IS NULL")))
  (pg-execute conn "DROP TABLE typed"))

;;;
;;; SQL injection
;;;

(define payloads
  '("'; DROP TABLE victims; --"
    "' OR '1'='1"
    "\" OR 1=1 --"
    "1; DELETE FROM victims"
    "Robert'); DROP TABLE victims;--"
    "$1"
    "\\'; DROP TABLE victims; --"
    "'); TRUNCATE victims; SELECT ('"
    "1' UNION SELECT version() --"
    "{1,2}'); DROP TABLE victims; --"
    "\\x41'; --"
    "E'\\\\'; DROP TABLE victims; --"
    "/* */ DROP TABLE victims"
    "''''''"))

(when-postgresql "SQL injection through every parameter type"
  (pg-execute conn "CREATE TABLE victims (id serial PRIMARY KEY, t text, v varchar(200), i int,
                    f float8, n numeric, b bool, by bytea, j jsonb, d date, u uuid, a text[])")
  (for-each
   (lambda (payload)
     (test-equal (string-append "text, varchar, bytea, jsonb, text[] verbatim: " payload)
       (vector payload payload (string->utf8 payload) payload (vector payload "x"))
       (let ((id (vector-ref (pg-query-row conn "INSERT INTO victims (t, v, by, j, a) VALUES ($1, $2, $3, $4, $5) RETURNING id"
                                           payload payload (string->utf8 payload) (pg-json payload)
                                           (vector payload "x"))
                             0)))
         (pg-query-row conn "SELECT t, v, by, j, a FROM victims WHERE id = $1" id)))
     (test-equal (string-append "found by it, as a value: " payload) 1
       (length (pg-query conn "SELECT id FROM victims WHERE t = $1 AND v = $1" payload)))
     (for-each
      (lambda (column)
        (test-assert (format #f "~a refuses it as a value (class 22): ~a" column payload)
          (string-prefix? "22" (sqlstate-of
                                (lambda ()
                                  (pg-execute conn (format #f "INSERT INTO victims (~a) VALUES ($1)" column)
                                              payload))))))
      '("i" "f" "n" "b" "d" "u")))
   payloads)
  (test-equal "the table is whole: one row per payload"
    (length payloads)
    (vector-ref (pg-query-row conn "SELECT count(*) FROM victims") 0))
  (test-equal "the payloads are not identifiers either: the table still exists"
    "victims" (vector-ref (pg-query-row conn "SELECT to_regclass('victims')::text") 0))
  (pg-execute conn "DROP TABLE victims"))

;;;
;;; Errors
;;;

(when-postgresql "errors carry SQLSTATE, message, detail"
  (pg-execute conn "CREATE TABLE uniq (id int PRIMARY KEY)")
  (pg-execute conn "INSERT INTO uniq VALUES (1)")
  (let ((e (guard (e ((pg-error? e) e)) (pg-execute conn "INSERT INTO uniq VALUES ($1)" 1) #f)))
    (test-equal "unique violation" "23505" (and e (pg-error-sqlstate e)))
    (test-assert "its message" (and e (string-contains (pg-error-message e) "duplicate key")))
    (test-assert "its detail" (and e (pg-error-detail e) (string-contains (pg-error-detail e) "already exists")))
    (test-assert "an &error, with a message" (and e (error? e) (exception-with-message? e))))
  (test-equal "syntax error" "42601" (sqlstate-of (lambda () (pg-query conn "SELEC 1"))))
  (test-equal "the same mistake again (not cached as prepared)"
    "42601" (sqlstate-of (lambda () (pg-query conn "SELEC 1"))))
  (test-equal "division by zero" "22012" (sqlstate-of (lambda () (pg-query conn "SELECT 1/$1::int" 0))))
  (test-equal "too few parameters" "08P01" (sqlstate-of (lambda () (pg-query conn "SELECT $1::int, $2::int" 1))))
  (test-equal "undefined table" "42P01" (sqlstate-of (lambda () (pg-query conn "SELECT * FROM nowhere"))))
  (test-equal "the connection serves on" #(2) (pg-query-row conn "SELECT 2"))
  (pg-execute conn "DROP TABLE uniq")
  (pg-execute conn "CREATE TABLE altered (a int)")
  (pg-execute conn "INSERT INTO altered VALUES (1)")
  (test-equal "a prepared statement" '(#(1)) (pg-query conn "SELECT * FROM altered"))
  (pg-execute conn "ALTER TABLE altered ADD COLUMN b int DEFAULT 2")
  (test-equal "its table changed: 0A000 once" "0A000"
    (sqlstate-of (lambda () (pg-query conn "SELECT * FROM altered"))))
  (test-equal "then prepared anew" '(#(1 2)) (pg-query conn "SELECT * FROM altered"))
  (pg-execute conn "DROP TABLE altered"))

(when-postgresql "parameters that cannot be sent"
  (test-assert "a string with NUL: an error naming it"
    (let ((m (error-message-of (lambda () (pg-query conn "SELECT $1::text" (string #\a #\nul #\b))))))
      (and m (string-contains m "NUL"))))
  (test-assert "a symbol other than null"
    (error-message-of (lambda () (pg-query conn "SELECT $1::text" 'nope))))
  (test-assert "a fraction with no decimal form"
    (error-message-of (lambda () (pg-query conn "SELECT $1::numeric" 1/3))))
  (test-equal "and the connection serves on" #(3) (pg-query-row conn "SELECT 3")))

(when-postgresql "malformed URLs: one line naming what is wrong, no password"
  (for-each
   (lambda (bad expected)
     (let ((m (error-message-of (lambda () (make-pg-pool bad)))))
       (test-assert (format #f "~s: ~a" bad m)
         (and m
              (string-contains m expected)
              (not (string-index m #\newline))
              (not (string-contains m "secretpw"))))))
   '("postgresql://u:secretpw@%zz/db"
     "postgresql://u:secretpw@localhost/db?bogus=1"
     "host=localhost port"
     "postgresql://[::1/db")
   '("percent" "bogus" "\"port\"" "IPv6"))
  (test-assert "not a string" (error-message-of (lambda () (make-pg-pool 42))))
  (test-assert "a size of 0" (error-message-of (lambda () (make-pg-pool url #:size 0)))))

(when-postgresql "a server that never answers: 08001 after #:connect-timeout-ms"
  ;; a listening socket nobody accepts on: the kernel completes the
  ;; handshake, then nothing answers libpq's startup message
  (let ((silent (socket AF_INET SOCK_STREAM 0)))
    (bind silent AF_INET INADDR_LOOPBACK 0)
    (listen silent 8)
    (let* ((pool (make-pg-pool (format #f "postgresql://plucky@127.0.0.1:~a/postgres"
                                       (sockaddr:port (getsockname silent)))
                               #:connect-timeout-ms 200))
           (start (now-seconds))
           (state (sqlstate-of (lambda () (pg-query pool "SELECT 1"))))
           (took (- (now-seconds) start)))
      (test-equal "08001" "08001" state)
      (test-assert (format #f "after about 0.2 s: ~,3f s" took) (< 0.15 took 2))
      (test-equal "nothing left open" 0 (assq-ref (pg-pool-stats pool) 'open)))
    (close silent)))

(when-postgresql "no server there: 08001, at once"
  (let* ((dead (string-append "postgresql://plucky@127.0.0.1:" (number->string (free-port)) "/postgres"))
         (pool (make-pg-pool dead)))
    (test-equal "first" "08001" (sqlstate-of (lambda () (pg-query pool "SELECT 1"))))
    (test-equal "again (backing off)" "08001" (sqlstate-of (lambda () (pg-query pool "SELECT 1"))))
    (test-equal "nothing left open" 0 (assq-ref (pg-pool-stats pool) 'open))))

;;;
;;; Transactions
;;;

(define (names db)
  (map (lambda (row) (vector-ref row 0)) (pg-query db "SELECT name FROM tx ORDER BY name")))

(when-postgresql "transactions"
  (pg-execute conn "CREATE TABLE tx (name text)")
  (test-equal "commit: the body's value"
    'done
    (with-transaction conn
      (pg-execute conn "INSERT INTO tx VALUES ($1)" "a")
      'done))
  (test-equal "committed: seen from another connection" '("a") (names other))
  (let ((raised (make-exception-with-message "give up")))
    (test-eq "rollback on raise: the exception goes on"
      raised
      (guard (e (#t e))
        (with-transaction conn
          (pg-execute conn "INSERT INTO tx VALUES ($1)" "b")
          (raise-exception raised)))))
  (test-equal "rolled back" '("a") (names conn))
  (with-transaction conn
    (pg-execute conn "INSERT INTO tx VALUES ($1)" "c")
    (guard (e ((exception-with-message? e) #f))
      (with-transaction conn
        (pg-execute conn "INSERT INTO tx VALUES ($1)" "d")
        (with-transaction conn
          (pg-execute conn "INSERT INTO tx VALUES ($1)" "e"))
        (error "inner gives up")))
    (with-transaction conn
      (pg-execute conn "INSERT INTO tx VALUES ($1)" "f")))
  (test-equal "nested: savepoints; the failed inner one rolled back, with its own inner"
    '("a" "c" "f") (names conn))
  (test-equal "a server error inside: rolled back, raised"
    "22012"
    (sqlstate-of (lambda ()
                   (with-transaction conn
                     (pg-execute conn "INSERT INTO tx VALUES ($1)" "g")
                     (pg-query conn "SELECT 1/0")))))
  (test-equal "and the connection is out of the transaction" '("a" "c" "f") (names other))
  (test-equal "a raise in the middle of a result: read, then rolled back"
    '(stop #(0))
    (list (guard (e ((eq? e 'stop) e))
            (with-transaction conn
              (pg-execute conn "INSERT INTO tx VALUES ($1)" "h")
              (pg-for-each-row conn (lambda (row) (raise-exception 'stop))
                               "SELECT generate_series(1, 10000)")))
          (pg-query-row conn "SELECT count(*) FROM tx WHERE name = 'h'")))
  (test-equal "usable" #(1) (pg-query-row conn "SELECT 1"))
  (test-assert "with-transaction wants a connection, not a pool"
    (error-message-of (lambda () (with-transaction (make-pg-pool url) #t))))
  (pg-execute conn "DROP TABLE tx"))

;;;
;;; Pipelines
;;;

(when-postgresql "pipelines"
  (pg-execute conn "CREATE TABLE pipe (n int)")
  (test-equal "results in order, one list per statement"
    '((#(2)) (#("x") #("y")) () ())
    (pg-pipeline conn (list (list "SELECT $1::int + 1" 1)
                            (list "SELECT unnest($1::text[])" #("x" "y"))
                            (list "INSERT INTO pipe VALUES ($1)" 1)
                            (list "SELECT n FROM pipe WHERE n > $1" 5))))
  (test-equal "an empty pipeline" '() (pg-pipeline conn '()))
  (test-equal "a failing statement: its error"
    "22012"
    (sqlstate-of (lambda ()
                   (pg-pipeline conn (list (list "INSERT INTO pipe VALUES ($1)" 2)
                                           (list "SELECT 1/$1::int" 0)
                                           (list "INSERT INTO pipe VALUES ($1)" 3))))))
  (test-equal "none of it took effect: a pipeline is one transaction"
    '(#(1)) (pg-query conn "SELECT n FROM pipe ORDER BY n"))
  (test-equal "a statement that does not prepare"
    "42601"
    (sqlstate-of (lambda () (pg-pipeline conn (list (list "SELEC 2") (list "SELECT 3"))))))
  (test-equal "is not taken for prepared afterwards"
    "42601" (sqlstate-of (lambda () (pg-query conn "SELEC 2"))))
  (test-equal "nor is the one aborted after it"
    '((#(3))) (pg-pipeline conn (list (list "SELECT 3"))))
  (test-equal "500 statements"
    (map (lambda (i) (list (vector i))) (iota 500))
    (pg-pipeline conn (map (lambda (i) (list "SELECT $1::int" i)) (iota 500))))
  (let ((pool (make-pg-pool url #:size 1)))
    (test-equal "a pool" '((#(7))) (pg-pipeline pool (list (list "SELECT 7"))))
    (pg-close pool))
  (pg-execute conn "DROP TABLE pipe"))

;;;
;;; The pool, outside a server
;;;

(define (backend db) (vector-ref (pg-query-row db "SELECT pg_backend_pid()") 0))

(define (backend-gone? pid)
  (zero? (vector-ref (pg-query-row other "SELECT count(*) FROM pg_stat_activity WHERE pid = $1" pid) 0)))

(when-postgresql "the pool"
  (let ((pool (make-pg-pool url #:size 2)))
    (test-equal "opens nothing until used" 0 (assq-ref (pg-pool-stats pool) 'open))
    (let ((first (backend pool)))
      (test-equal "reuses its connection" first (backend pool))
      (test-equal "one open, idle" '((open . 1) (idle . 1) (waiting . 0)) (pg-pool-stats pool))
      (test-equal "call-with-pg-connection: the connection is the pool's"
        first (call-with-pg-connection pool backend))
      (test-equal "nested, a second connection"
        2 (call-with-pg-connection pool
            (lambda (a) (call-with-pg-connection pool
                          (lambda (b) (length (delete-duplicates (list (backend a) (backend b)))))))))
      (test-equal "past its size, outside a server: 08001 at once"
        "08001"
        (sqlstate-of (lambda ()
                       (call-with-pg-connection pool
                         (lambda (a) (call-with-pg-connection pool
                                       (lambda (b) (call-with-pg-connection pool backend))))))))
      (test-equal "two open" 2 (assq-ref (pg-pool-stats pool) 'open))
      ;; a child process: its own connections, and the parent's left alone
      (let* ((channel (pipe))
             (child (primitive-fork)))
        (if (zero? child)
            (begin
              (close-port (car channel))
              (write (guard (e (#t 'failed)) (backend pool)) (cdr channel))
              (close-port (cdr channel))
              (primitive-_exit 0))
            (begin
              (close-port (cdr channel))
              (let ((child-backend (read (car channel))))
                (close-port (car channel))
                (waitpid child)
                (test-assert "a child process opens its own"
                  (and (integer? child-backend) (not (= child-backend first))))
                (test-assert "and leaves the parent's open"
                  (memv (backend pool) (list first (backend pool))))
                (test-assert "the parent's first connection serves on"
                  (not (backend-gone? first)))))))
      ;; a connection the server dropped, found at checkout after a second idle
      (pg-close pool)
      (let ((victim (backend pool)))
        (pg-query other "SELECT pg_terminate_backend($1)" victim)
        (test-assert "terminated" (wait-until (lambda () (backend-gone? victim)) #:timeout 5))
        (usleep 1100000)              ; past idle-check-ms: checkout polls the socket
        (let ((next (backend pool)))
          (test-assert "an idle connection found dead is replaced unseen"
            (not (= next victim)))
          (test-equal "and counted once" 1 (assq-ref (pg-pool-stats pool) 'open))
          ;; dropped while just given back: the query fails, the next is served
          (pg-query other "SELECT pg_terminate_backend($1)" next)
          (wait-until (lambda () (backend-gone? next)) #:timeout 5)
          (test-assert "a query on a broken connection: a &pg-error (57P01 or 08006)"
            (member (sqlstate-of (lambda () (pg-query pool "SELECT 1"))) '("57P01" "08006" "no-error")))
          (test-assert "the next one gets a new connection"
            (not (= next (backend pool))))
          (test-equal "the broken one is gone from the pool" 1 (assq-ref (pg-pool-stats pool) 'open)))))
    (test-equal "pg-close: the idle ones closed" 0
      (begin (pg-close pool) (assq-ref (pg-pool-stats pool) 'open)))
    (test-equal "and usable again" #(1) (pg-query-row pool "SELECT 1"))
    (pg-close pool))
  (let ((pool (make-pg-pool url #:size 1 #:max-lifetime-ms 1)))
    (let ((a (backend pool)))
      (usleep 2000)
      (test-assert "past its lifetime, a connection is replaced" (not (= a (backend pool))))
      (pg-close pool)))
  (let ((pool (make-pg-pool url #:size 1 #:idle-timeout-ms 1)))
    (backend pool)
    (usleep 1100000)                ; the sweep runs at most once a second
    (backend pool)
    (test-equal "idle past its timeout: closed as the pool is used" 1
      (assq-ref (pg-pool-stats pool) 'open))
    (pg-close pool))
  (let ((pool (make-pg-pool url #:size 1)))
    (test-equal "a connection left in a transaction is not given back"
      1 (let ((a (call-with-pg-connection pool
                   (lambda (c) (pg-execute c "BEGIN") (backend c)))))
          (if (= a (backend pool)) 0 1)))
    (test-equal "a connection left in the middle of a statement is closed"
      '(raised 1)
      (list (guard (e ((eq? e 'stop) 'raised))
              (pg-for-each-row pool (lambda (row) (raise-exception 'stop))
                               "SELECT generate_series(1, 100000)"))
            (vector-ref (pg-query-row pool "SELECT 1") 0)))
    (pg-close pool)))

(when-postgresql "statement timeout"
  (let ((pool (make-pg-pool url #:size 1 #:statement-timeout-ms 100))
        (start (now-seconds)))
    (test-equal "57014" "57014" (sqlstate-of (lambda () (pg-query pool "SELECT pg_sleep(5)"))))
    (test-assert "within the timeout, not the sleep" (< (- (now-seconds) start) 3))
    (test-equal "the connection serves on" #(1) (pg-query-row pool "SELECT 1"))
    (test-equal "still one" 1 (assq-ref (pg-pool-stats pool) 'open))
    (pg-close pool)))

(when-postgresql "the statement cache is bounded"
  (let ((c (pg-connect url)))
    (test-equal "600 different statements, 512 prepared, all answered"
      (iota 600)
      (map (lambda (i) (vector-ref (pg-query-row c (format #f "SELECT ~a" i)) 0)) (iota 600)))
    (test-equal "prepared on the server: at most 512"
      512 (vector-ref (pg-query-row c "SELECT count(*) FROM pg_prepared_statements") 0))
    (pg-close c)))

(when-postgresql "descriptors: connections closed, none left"
  (let ((before (descriptors (getpid))))
    (for-each (lambda (i)
                (let ((c (pg-connect url)))
                  (pg-query c "SELECT 1")
                  (pg-close c)
                  (pg-close c)))              ; twice: nothing
              (iota 30))
    (test-equal "30 connects and closes" before (descriptors (getpid)))
    (test-equal "a closed connection: 08003" "08003"
      (let ((c (pg-connect url))) (pg-close c) (sqlstate-of (lambda () (pg-query c "SELECT 1")))))))

;;;
;;; Single-row mode, COPY, notifications
;;;

(when-postgresql "a million rows, one at a time, in bounded memory"
  (gc)
  (let* ((before (rss-kib))
         (sum 0)
         (count (pg-for-each-row conn
                                 (lambda (row) (set! sum (+ sum (vector-ref row 0))))
                                 "SELECT i, repeat('x', 100) FROM generate_series(1, $1) i"
                                 1000000))
         (grown (- (rss-kib) before)))
    (test-equal "every row" 1000000 count)
    (test-equal "each once, in order" 500000500000 sum)
    ;; the rows' text alone is over 100 MB
    (test-assert (format #f "memory grew by ~a KiB < 64 MiB" grown) (< grown (* 64 1024))))
  (test-equal "an error in the middle: raised, the connection serves on"
    '("22012" #(1))
    (list (sqlstate-of (lambda ()
                         (pg-for-each-row conn (lambda (row) #t)
                                          "SELECT 1/(1000 - i) FROM generate_series(1, 2000) i")))
          (pg-query-row conn "SELECT 1")))
  (test-equal "PROC raises: raised; the rest drained at the next use"
    '(stop #(1))
    (list (guard (e ((eq? e 'stop) e))
            (pg-for-each-row conn (lambda (row) (raise-exception 'stop)) "SELECT generate_series(1, 50000)"))
          (pg-query-row conn "SELECT 1"))))

(when-postgresql "COPY FROM STDIN"
  (pg-execute conn "CREATE TABLE bulk (id int, t text, b bytea, a int[])")
  (let ((rows (map (lambda (i)
                     (vector i
                             (if (zero? (remainder i 7)) 'null (format #f "r\t~a\n\\N \\ é" i))
                             (u8-list->bytevector (list (remainder i 256) 0 92))
                             (vector i 'null)))
                   (iota 20000))))
    (test-equal "20000 rows from a list" 20000 (pg-copy-from conn "COPY bulk FROM STDIN" rows))
    (test-equal "read back verbatim" rows (pg-query conn "SELECT * FROM bulk ORDER BY id")))
  (let ((i 0))
    (test-equal "from a procedure" 3
      (pg-copy-from conn "COPY bulk (id) FROM STDIN"
                    (lambda () (and (< i 3) (begin (set! i (+ i 1)) (vector (+ 100000 i))))))))
  (test-assert "a row that cannot be sent: raised"
    (error-message-of (lambda () (pg-copy-from conn "COPY bulk (id) FROM STDIN"
                                               (list (vector 1) (vector 'nope))))))
  (test-equal "a row the server refuses: its SQLSTATE" "22P02"
    (sqlstate-of (lambda () (pg-copy-from conn "COPY bulk (id) FROM STDIN" (list (vector "x"))))))
  (test-equal "and nothing of either copied" 20003
    (vector-ref (pg-query-row conn "SELECT count(*) FROM bulk") 0))
  (test-equal "not a COPY" "42601"
    (sqlstate-of (lambda () (pg-copy-from conn "SELECT 1" '()))))
  (test-equal "COPY through pg-execute: refused, the connection serves on"
    '(#t #(1))
    (list (string? (sqlstate-of (lambda () (pg-execute conn "COPY bulk (id) FROM STDIN"))))
          (pg-query-row conn "SELECT 1")))
  (pg-execute conn "DROP TABLE bulk"))

(when-postgresql "LISTEN/NOTIFY"
  (let ((listener (pg-connect url)))
    (pg-execute listener "LISTEN news")
    (pg-query other "SELECT pg_notify($1, $2)" "news" "hello 'there'")
    (let ((n (pg-wait-notification listener #:timeout-ms 5000)))
      (test-equal "channel" "news" (and n (pg-notification-channel n)))
      (test-equal "payload" "hello 'there'" (and n (pg-notification-payload n)))
      (test-equal "the notifier's backend" (backend other) (and n (pg-notification-pid n))))
    (pg-execute other "NOTIFY news")
    (pg-execute other "NOTIFY news, 'two'")
    (test-equal "queued ones, in order"
      '("" "two")
      (map (lambda (_) (pg-notification-payload (pg-wait-notification listener #:timeout-ms 5000)))
           '(1 2)))
    (let ((start (now-seconds)))
      (test-equal "none: #f after the timeout" #f (pg-wait-notification listener #:timeout-ms 100))
      (test-assert "after about the timeout" (< 0.09 (- (now-seconds) start) 2)))
    (test-assert "a pool is refused"
      (error-message-of (lambda () (pg-wait-notification (make-pg-pool url)))))
    (pg-close listener)))

;;;
;;; Inside a server
;;;

(define-syntax-rule (when-server name body ...)
  (when-postgresql name (when server body ...)))

(when-server "queries suspend the request, not the worker"
  (get port "/sleep?0")                 ; a connection made
  (let* ((start (now-seconds))
         (replies (get-all port (make-list 10 "/sleep?0.2")))
         (took (- (now-seconds) start)))
    (test-equal "ten answered" (make-list 10 '(200 . "slept")) replies)
    ;; one after the other they would take two seconds
    (test-assert (format #f "ten 0.2 s queries on one worker in ~,3f s < 1 s" took) (< took 1)))
  (let* ((start (now-seconds))
         (listener (connect-client port)))
    (client-send! listener (request-text "/listen"))
    (test-assert "a request waits for a notification"
      (wait-until (lambda () (> (vector-ref (pg-query-row other "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN web' AND state = 'idle'") 0) 0))
                  #:timeout 5))
    (test-equal "while the worker serves others" '(200 . "hello") (get port "/hello"))
    (pg-query other "SELECT pg_notify('web', 'to the request')")
    (let ((response body (client-read-response listener #:timeout 10)))
      (test-equal "the notification reaches it" "to the request" (and body (utf8->string body))))
    (client-close! listener)
    (test-assert "in time" (< (- (now-seconds) start) 5))))

(when-server "a connection of one's own used by two requests at once"
  (test-equal "connected" '(200 . "slept") (get port "/shared?0"))
  (test-equal "the second is refused (500), the first served"
    '(200 500 500)
    (map car (get-all port (list "/shared?0.3" "/shared?0" "/shared?0"))))
  (test-assert "the refusal is logged with its reason"
    (string-contains (server-log server) "in use by another request"))
  (test-equal "the connection serves on" '(200 . "slept") (get port "/shared?0")))

(when-server "the pool's size bounds a worker's connections"
  (let* ((start (now-seconds))
         (clients (send-requests port (make-list 4 "/small?0.2"))))
    (test-assert "two sessions at work"
      (wait-until (lambda () (= 2 (sessions "plucky-small" "active"))) #:timeout 5))
    (test-assert "never more"
      (<= (+ (sessions "plucky-small" "active") (sessions "plucky-small" "idle")) 2))
    (let ((replies (read-responses clients)))
      (test-equal "four served by two connections" (make-list 4 '(200 . "slept")) replies)
      (test-assert "in two waves" (>= (- (now-seconds) start) 0.4))))
  (test-equal "waiting longer than #:checkout-timeout-ms: 503 (08001)"
    '(200 200 503)
    (map (lambda (reply) (car reply))
         (get-all port (list "/small?1" "/small?1" "/small?0")))))

(when-postgresql "a request given up in the middle of a query"
  (let ((slow (make-pg-pool (string-append url "?application_name=plucky-given-up"))))
    (pg-execute other "CREATE TABLE given_up (n int)")
    (let* ((server (start-server
                    (lambda (request body)
                      (if (string=? (uri-path (request-uri request)) "/tx")
                          (call-with-pg-connection slow
                            (lambda (c)
                              (with-transaction c
                                (pg-execute c "INSERT INTO given_up VALUES (1)")
                                (sleep-ms 3000))))
                          (pg-query slow "SELECT pg_sleep(3)"))
                      (text 200 (format #f "~s" (pg-pool-stats slow))))
                    #:options '(#:handler-timeout 1)))
           (start (now-seconds))
           (reply (get (server-port server) "/")))
      (test-equal "the server answers 503 at its handler timeout" 503 (car reply))
      (test-assert "without waiting for the query" (< (- (now-seconds) start) 2.5))
      (test-equal "given up inside a transaction: 503" 503 (car (get (server-port server) "/tx")))
      (test-assert "its transaction does not stay open: the connection was closed"
        (wait-until (lambda () (zero? (sessions "plucky-given-up" "idle in transaction")))
                    #:timeout 5))
      (test-equal "nothing of it committed" #(0) (pg-query-row other "SELECT count(*) FROM given_up"))
      (test-assert "the server lives on" (server-alive? server))
      (stop-server server))
    (pg-execute other "DROP TABLE given_up")))

(when-server "PostgreSQL restarted under load"
  (get-all port (make-list 4 "/fault"))  ; four connections open
  (let* ((pid (server-pid server))
         (fds-before (- (descriptors pid) (pools-open port)))
         (_ (check-sockets "before" pid))
         (clients (send-requests port (make-list 4 "/fault"))))
    (test-assert "queries in flight"
      (wait-until (lambda () (>= (vector-ref (pg-query-row other "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(0.2)%' AND state = 'active' AND pid <> pg_backend_pid()") 0) 1))
                  #:timeout 5))
    (pg-close other)
    (pg-close conn)
    (stop-postgresql scratch)
    (let ((codes (map (lambda (reply) (and reply (car reply))) (read-responses clients))))
      (test-assert (format #f "in-flight queries: 503 (or done before): ~a" codes)
        (and (every (lambda (code) (memv code '(200 503))) codes)
             (memv 503 codes))))
    (let ((start (now-seconds)))
      (test-equal "while the database is down: 503 at once"
        (make-list 4 503)
        (map car (get-all port (make-list 4 "/fault"))))
      (test-assert "no request hangs" (< (- (now-seconds) start) 5)))
    (test-assert "PostgreSQL back" (start-postgresql scratch))
    (test-assert "the pool reconnects: 200 within 5 s"
      (wait-until (lambda () (equal? (get port "/fault") '(200 . "7"))) #:timeout 5))
    (test-equal "all served again" (make-list 8 '(200 . "7")) (get-all port (make-list 8 "/fault")))
    (check-sockets "after" pid)
    (test-assert "no other descriptor left behind"
      ;; the server closes the test's client connections as it sees them go
      (wait-until (lambda () (<= (- (descriptors pid) (pools-open port)) fds-before)) #:timeout 5))
    (test-equal "the worker serves on" '(200 . "hello") (get port "/hello"))))

(when-postgresql "clients that leave with requests queued for the pool lose no connection"
  ;; A pool of two, many requests queued for it, their clients leaving
  ;; all at once: a request the loop resumed (handed a connection, or its
  ;; query's answer come) and that is given up before it runs is dropped
  ;; at its next wait without unwinding; its connection must still come
  ;; back to the pool (closed, its place freed).
  (let* ((tiny (make-pg-pool url #:size 2 #:checkout-timeout-ms 3000))
         (server (start-server
                  (lambda (request body)
                    (if (string=? (uri-path (request-uri request)) "/stats")
                        (text 200 (format #f "~s" (pg-pool-stats tiny)))
                        (begin
                          (do ((i 0 (+ i 1))) ((= i 20))
                            (pg-query tiny "SELECT $1::int" i))
                          (text 200 "ok"))))))
         (port (server-port server))
         (stats (lambda () (with-input-from-string (cdr (get port "/stats")) read))))
    (test-equal "served" '(200 . "ok") (get port "/"))
    (do ((round 0 (+ round 1))) ((= round 10))
      (let ((clients (send-requests port (make-list 60 "/"))))
        (wait-until (lambda () (> (assq-ref (stats) 'waiting) 10)) #:timeout 5)
        (for-each client-close! clients)))
    (let ((start (now-seconds)))
      (test-equal "a request afterwards is served" '(200 . "ok")
        (car (get-all port (list "/") #:timeout 5)))
      (test-assert "within the bound" (< (- (now-seconds) start) 5)))
    (test-assert "every connection back in the pool"
      (wait-until (lambda ()
                    (let ((s (stats)))
                      (and (= (assq-ref s 'open) (assq-ref s 'idle))
                           (= 0 (assq-ref s 'waiting)))))
                  #:timeout 5))
    (stop-server server)))

(when server (stop-server server))
(when url
  (stop-postgresql scratch)
  (test-assert "PostgreSQL stopped" (not (postgresql-pid scratch)))
  (remove-tree scratch))

(test-end "db/postgresql")
