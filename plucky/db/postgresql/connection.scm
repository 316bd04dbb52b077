;;; (plucky db postgresql connection) --- one libpq connection, non-blocking, that suspends

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A <pg-conn> is a libpq PGconn in non-blocking mode.  libpq does the
;;; protocol; this module does the waiting, with (plucky server)'s
;;; `wait-readable'/`wait-writable' on the connection's socket: inside a
;;; handler the request suspends there and its worker serves others,
;;; elsewhere (a script, the REPL) the thread blocks in poll(2).
;;;
;;;   connect    PQconnectStart -> (wait, PQconnectPoll)* -> SET ... if needed
;;;   statement  prepared once per connection (PQsendPrepare, cached by
;;;              SQL text), then PQsendQueryPrepared -> PQflush until all
;;;              is sent -> wait-readable -> PQconsumeInput while PQisBusy
;;;              -> PQgetResult until NULL, each PGresult decoded and
;;;              PQclear'ed at once
;;;   pipeline   PQenterPipelineMode, every statement sent, PQpipelineSync,
;;;              one flush, the results read in order: one round trip
;;;   rows       single-row mode: one PGresult per row, handed to the
;;;              caller's procedure and cleared before the next is read
;;;   COPY       PQputCopyData of COPY text, 64 KiB at a time
;;;
;;; A statement in flight marks the connection busy until its last
;;; result is read.  Should the caller leave in the middle (an exception,
;;; a request cancelled while it waited), the connection stays busy: the
;;; pool closes such a connection rather than give it to another
;;; request; a connection of one's own reads the rest of the old results
;;; first at its next use.
;;;
;;; Errors are &pg-error conditions: the server's SQLSTATE, message and
;;; detail, or 08006 once the connection is lost, 08001 when no
;;; connection could be made.  A lost connection is closed (PQfinish)
;;; at once, so that its descriptor does not outlive it.
;;;
;;; Code:

(define-module (plucky db postgresql connection)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 exceptions)
  #:use-module (plucky sys libpq)
  #:use-module ((plucky sys libc) #:select (fd-wait))
  #:use-module ((plucky server) #:select (wait-readable wait-writable release-descriptor!
                                          request-cancelled?))
  #:use-module (plucky db postgresql types)
  #:export (one-line
            &pg-error
            make-pg-error
            pg-error?
            pg-error-sqlstate
            pg-error-message
            pg-error-detail
            raise-pg-error

            now-ms
            conninfo-check
            conn-open
            pg-conn?
            pg-conn-open?
            pg-conn-fd
            pg-conn-busy?
            pg-conn-born-ms
            pg-conn-idle-since
            set-pg-conn-idle-since!
            pg-conn-depth
            set-pg-conn-depth!
            pg-conn-pool
            set-pg-conn-pool!
            conn-close!
            conn-forget!
            conn-healthy?
            conn-idle?
            conn-backend-pid
            conn-query
            conn-command
            conn-pipeline
            conn-for-each-row
            conn-copy-from
            conn-wait-notification

            max-statements
            make-pg-notification
            pg-notification?
            pg-notification-channel
            pg-notification-payload
            pg-notification-pid))

;;;
;;; Errors
;;;

(define-exception-type &pg-error &error
  %make-pg-error
  pg-error?
  (sqlstate pg-error-sqlstate)          ; "23505", "08006" ...
  (message pg-error-message)            ; the server's primary message
  (detail pg-error-detail))             ; its detail, or #f

(define (make-pg-error sqlstate message detail)
  ;; with &message too, so that backtraces and `exception-message' say it
  (make-exception (%make-pg-error sqlstate message detail)
                  (make-exception-with-message
                   (string-append "PostgreSQL " sqlstate ": " message))))

(define* (raise-pg-error sqlstate message #:optional (detail #f))
  "Raise a &pg-error of SQLSTATE, MESSAGE and DETAIL."
  (raise-exception (make-pg-error sqlstate message detail)))

(define (one-line s)
  "Return libpq's message S on one line: its messages end in a newline,
and some run over two, the second indented with a tab (\"... failed:
Connection refused\\n\\tIs the server running ...\"); each run of
whitespace becomes one space."
  (string-join (string-tokenize s char-set:graphic) " "))

(define (now-ms)
  (quotient (get-internal-real-time) (quotient internal-time-units-per-second 1000)))

;;;
;;; Connecting
;;;

(define (conninfo-check url)
  "Return #f if libpq reads URL (a postgresql:// URL or a key=value
string) as a connection string, else libpq's one-line reason."
  (open-libpq!)
  (let* ((errmsg (make-bytevector 8 0))
         (url-bv (c-string url))
         (options (PQconninfoParse (bytevector-address url-bv) (bytevector-address errmsg))))
    (if (zero? options)
        (let* ((address (bytevector-u64-native-ref errmsg 0))
               (message (if (zero? address)
                            "out of memory"
                            (one-line (c-string->string address)))))
          (unless (zero? address) (PQfreemem address))
          message)
        (begin (PQconninfoFree options) #f))))

;; A prepared statement of a connection.
(define-record-type <statement>
  (%make-statement name name-address decoders)
  statement?
  (name statement-name)                          ; NUL-terminated bytevector, "p12"
  (name-address statement-name-address)          ; its address, taken once
  (decoders statement-decoders set-statement-decoders!)) ; vector per column, or #f

;; The most statements a connection prepares; past them, statements run
;; unprepared (an app that makes its SQL from data would otherwise grow
;; each connection's cache, and the server's, without end).
(define max-statements 512)

(define (make-statement name decoders)
  (%make-statement name (bytevector-address name) decoders))

(define-record-type <pg-conn>
  (make-pg-conn ptr fd label statements prepared params born-ms)
  pg-conn?
  (ptr pg-conn-ptr set-pg-conn-ptr!)    ; PGconn* address; 0 once closed
  (fd pg-conn-fd)                       ; its socket
  (label pg-conn-label)                 ; what the status page calls its waits
  (statements pg-conn-statements)       ; SQL string -> <statement>
  (prepared pg-conn-prepared set-pg-conn-prepared!) ; statements named so far
  (params pg-conn-params)               ; <param-buffer>, reused by each statement
  (born-ms pg-conn-born-ms)
  (idle-since pg-conn-idle-since set-pg-conn-idle-since!) ; now-ms, in a pool
  (busy? pg-conn-busy? set-pg-conn-busy!)   ; results still to read
  (waiting? pg-conn-waiting? set-pg-conn-waiting!) ; a request waits on it now
  (depth pg-conn-depth set-pg-conn-depth!)  ; transactions open, nested
  (pool pg-conn-pool set-pg-conn-pool!)     ; the pool it belongs to, or #f
  ;; what the last PQsend* read by address (SQL text, bytevector
  ;; parameters): kept reachable here until the call returns
  (keep pg-conn-keep set-pg-conn-keep!)
  ;; the parameter arrays given to libpq: char *values[], int lengths[],
  ;; int formats[], for up to CAPACITY parameters
  (arrays pg-conn-arrays set-pg-conn-arrays!)
  (array-address pg-conn-array-address set-pg-conn-array-address!)
  (capacity pg-conn-capacity set-pg-conn-capacity!)
  ;; the param buffer's bytevector and its address, taken once per
  ;; bytevector (`bytevector-address' registers a weak reference)
  (data pg-conn-data set-pg-conn-data!)
  (data-address pg-conn-data-address set-pg-conn-data-address!))

(define (pg-conn-open? conn)
  "True while CONN has not been closed."
  (not (zero? (pg-conn-ptr conn))))

(define (lost! conn message)
  ;; CONN's connection is gone: free it now, raise 08006
  (conn-close! conn)
  (raise-pg-error "08006" message))

(define (conn-error-message ptr)
  (let ((m (c-string->string (PQerrorMessage ptr))))
    (if (and m (not (string-null? m))) (one-line m) "connection lost")))

(define (check-open conn)
  (when (zero? (pg-conn-ptr conn))
    (raise-pg-error "08003" "the connection is closed")))

(define* (conn-open url #:key (connect-timeout-ms 10000) (statement-timeout-ms #f))
  "Return a new connection to URL, open.  Waits (suspends in a handler)
at most CONNECT-TIMEOUT-MS; raises a &pg-error of SQLSTATE 08001 when no
connection could be made."
  (open-libpq!)
  (let* ((url-bv (c-string url))
         (ptr (PQconnectStart (bytevector-address url-bv))))
    (when (zero? ptr) (raise-pg-error "08001" "out of memory"))
    (when (= (PQstatus ptr) CONNECTION_BAD)
      (let ((message (conn-error-message ptr)))
        (PQfinish ptr)
        (raise-pg-error "08001" message)))
    (with-exception-handler
        (lambda (e) (finish! ptr) (raise-exception e))
      (lambda () (poll-connect ptr (+ (now-ms) connect-timeout-ms)))
      #:unwind? #t)
    (PQsetnonblocking ptr 1)
    (let* ((fd (PQsocket ptr))
           (label (string-append "postgresql " (or (parameter ptr "server_version") "")))
           (conn (make-pg-conn ptr fd label (make-hash-table) 0 (make-param-buffer) (now-ms))))
      (set-pg-conn-busy! conn #f)
      (set-pg-conn-waiting! conn #f)
      (set-pg-conn-depth! conn 0)
      (set-pg-conn-pool! conn #f)
      (set-pg-conn-keep! conn #f)
      (set-pg-conn-idle-since! conn (now-ms))
      (set-pg-conn-capacity! conn 0)
      (set-pg-conn-data! conn #f)
      (grow-arrays! conn 8)
      (let ((setup (session-setup ptr statement-timeout-ms)))
        (when setup
          (with-exception-handler
              (lambda (e) (conn-close! conn) (raise-exception e))
            (lambda () (conn-command conn setup))
            #:unwind? #t)))
      conn)))

(define (poll-connect ptr deadline)
  ;; PQconnectPoll until the connection is made; libpq's manual: wait as
  ;; for PGRES_POLLING_WRITING before the first call.  The socket may
  ;; change from one call to the next (one address after another).
  (let lp ((status PGRES_POLLING_WRITING))
    (cond
     ((= status PGRES_POLLING_OK) #t)
     ((= status PGRES_POLLING_FAILED)
      (raise-pg-error "08001" (conn-error-message ptr)))
     (else
      (let ((left (- deadline (now-ms))))
        (unless (and (> left 0)
                     ((if (= status PGRES_POLLING_READING) wait-readable wait-writable)
                      (PQsocket ptr) #:timeout-ms left #:label "postgresql connect"))
          (raise-pg-error "08001" "no connection within the connect timeout"))
        (lp (PQconnectPoll ptr)))))))

(define (parameter ptr name)
  (let ((bv (c-string name)))
    (c-string->string (PQparameterStatus ptr (bytevector-address bv)))))

(define (session-setup ptr statement-timeout-ms)
  ;; -> the SET commands this session needs, or #f: the decoders read
  ;; dates in DateStyle ISO and text in UTF-8, the defaults that a
  ;; server's or role's settings may have changed
  (let ((sets (append
               (if (string-prefix? "ISO" (or (parameter ptr "DateStyle") ""))
                   '()
                   '("SET DateStyle = 'ISO, YMD'"))
               (if (equal? (parameter ptr "client_encoding") "UTF8")
                   '()
                   '("SET client_encoding = 'UTF8'"))
               (if statement-timeout-ms
                   (list (string-append "SET statement_timeout = "
                                        (number->string statement-timeout-ms)))
                   '()))))
    (and (pair? sets) (string-join sets "; "))))

(define (finish! ptr)
  ;; PQfinish PTR, its socket first out of the loop's epoll set, where
  ;; `wait-readable' leaves a waited descriptor between waits
  (let ((fd (PQsocket ptr)))
    (when (>= fd 0) (release-descriptor! fd)))
  (PQfinish ptr))

(define (conn-close! conn)
  "Close CONN (PQfinish), once; return nothing."
  (let ((ptr (pg-conn-ptr conn)))
    (unless (zero? ptr)
      (set-pg-conn-ptr! conn 0)
      (finish! ptr)))
  (values))

(define (conn-forget! conn)
  "Free CONN without a word to the server: for a connection inherited
from a parent process, whose session is the parent's.  Its descriptor
is first pointed at /dev/null, so PQfinish's goodbye goes nowhere and
the parent's socket stays open there."
  (let ((ptr (pg-conn-ptr conn)))
    (unless (zero? ptr)
      (let ((null (open-fdes "/dev/null" O_RDWR)))
        (dup2 null (pg-conn-fd conn))
        (close-fdes null))
      (conn-close! conn)))
  (values))

(define (conn-healthy? conn check-socket?)
  "True if CONN is open, idle and, as far as libpq knows, connected;
with CHECK-SOCKET?, also if nothing waits to be read on its socket: an
idle connection is sent nothing unasked (a server that closed it sent
its reason, then the end of the stream)."
  (let ((ptr (pg-conn-ptr conn)))
    (and (not (zero? ptr))
         (not (pg-conn-busy? conn))
         (= (PQstatus ptr) CONNECTION_OK)
         (or (not check-socket?)
             (not (fd-wait (pg-conn-fd conn) 'read 0))))))

(define (conn-idle? conn)
  "True if CONN is connected, outside any transaction block, and has no
statement in flight (libpq's transaction status: one FFI call)."
  (= (PQtransactionStatus (pg-conn-ptr conn)) PQTRANS_IDLE))

(define (conn-backend-pid conn)
  "Return the PID of the server process serving CONN."
  (check-open conn)
  (PQbackendPID (pg-conn-ptr conn)))

;;;
;;; Sending and receiving
;;;

(define-syntax-rule (while-waiting conn expression)
  ;; EXPRESSION, a wait (a handler suspends there), with CONN marked as
  ;; waited on, so that another request that takes it meanwhile is told
  ;; (`ready!') rather than given the first one's results.  The mark goes
  ;; with an exception too: a request given up raises where it waits.
  (begin
    (set-pg-conn-waiting! conn #t)
    (let ((value (with-exception-handler
                     (lambda (e) (set-pg-conn-waiting! conn #f) (raise-exception e))
                   (lambda () expression))))
      (set-pg-conn-waiting! conn #f)
      value)))

(define (flush! conn)
  ;; send what libpq holds; while the socket is full, read what comes
  ;; (a server blocked writing to us stops reading).  -> #t if it all
  ;; went at once, #f if input was read meanwhile
  (let ((ptr (pg-conn-ptr conn)))
    (let lp ((first? #t))
      (let ((r (PQflush ptr)))
        (cond
         ((= r 0) first?)
         ((< r 0) (lost! conn (conn-error-message ptr)))
         (else
          (when (zero? (PQconsumeInput ptr)) (lost! conn (conn-error-message ptr)))
          (while-waiting conn (wait-writable (pg-conn-fd conn) #:timeout-ms 1000
                                             #:label (pg-conn-label conn)))
          (lp #f)))))))

(define (await-input! conn)
  ;; wait until the server sent something, and give it to libpq
  (while-waiting conn (wait-readable (pg-conn-fd conn) #:label (pg-conn-label conn)))
  (let ((ptr (pg-conn-ptr conn)))
    (when (zero? (PQconsumeInput ptr)) (lost! conn (conn-error-message ptr)))))

(define (next-result conn)
  ;; -> the next PGresult of the statement in flight, or 0 after its last
  (let ((ptr (pg-conn-ptr conn)))
    (let lp ()
      (if (zero? (PQisBusy ptr))
          (PQgetResult ptr)
          (begin (await-input! conn) (lp))))))

(define (first-result conn)
  ;; -> the first PGresult of a statement just sent: no answer can have
  ;; come before it was, so wait first (saves asking libpq, an FFI call)
  (await-input! conn)
  (next-result conn))

(define (result-error conn result)
  ;; -> the &pg-error a PGRES_FATAL_ERROR result (or 0) stands for
  (let* ((ptr (pg-conn-ptr conn))
         (field (lambda (code)
                  (and (not (zero? result))
                       (c-string->string (PQresultErrorField result code)))))
         (sqlstate (field PG_DIAG_SQLSTATE))
         (message (field PG_DIAG_MESSAGE_PRIMARY)))
    (cond
     (sqlstate (make-pg-error sqlstate (or message "") (field PG_DIAG_MESSAGE_DETAIL)))
     ((and (not (zero? ptr)) (= (PQstatus ptr) CONNECTION_BAD))
      (make-pg-error "08006" (conn-error-message ptr) #f))
     (else
      (make-pg-error "XX000"
                     (one-line (or (and (not (zero? result))
                                        (c-string->string (PQresultErrorMessage result)))
                                   (conn-error-message ptr)))
                     #f)))))

(define (drain! conn)
  ;; read and drop the results of the statement in flight; -> the first
  ;; error among them, or #f
  (let lp ((error #f))
    (let ((r (next-result conn)))
      (if (zero? r)
          (begin (set-pg-conn-busy! conn #f) error)
          (let ((status (PQresultStatus r)))
            (let ((error (or error
                             (and (or (= status PGRES_FATAL_ERROR) (= status PGRES_BAD_RESPONSE))
                                  (result-error conn r)))))
              (PQclear r)
              (cond
               ;; COPY IN left open by a caller gone: end it
               ((= status PGRES_COPY_IN)
                (PQputCopyEnd (pg-conn-ptr conn) (bytevector-address abandoned))
                (flush! conn)
                (lp error))
               (else (lp error)))))))))

(define abandoned (c-string "abandoned by the client"))

(define (ready! conn)
  ;; make CONN ready for a statement: open, its last statement's results
  ;; read.  (A connection that libpq knows is broken fails at the send.)
  (check-open conn)
  (when (pg-conn-waiting? conn)
    (raise-exception
     (make-exception (make-error) (make-exception-with-origin 'pg-query)
                     (make-exception-with-message
                      "the connection is in use by another request (give each its own, or use a pool)")
                     (make-exception-with-irritants '()))))
  (when (pg-conn-busy? conn)
    (drain! conn)))

(define (sent! conn ok)
  ;; after a PQsend*: OK is its return value
  (when (zero? ok)
    (let ((ptr (pg-conn-ptr conn)))
      (if (= (PQstatus ptr) CONNECTION_BAD)
          (lost! conn (conn-error-message ptr))
          (raise-pg-error "08000" (conn-error-message ptr)))))
  (set-pg-conn-busy! conn #t))

;;;
;;; Parameters
;;;

(define (grow-arrays! conn n)
  ;; room for N parameters: values (8 bytes each), lengths, formats (4)
  (when (> n (pg-conn-capacity conn))
    (let ((arrays (make-bytevector (* 16 n) 0)))
      (set-pg-conn-arrays! conn arrays)
      (set-pg-conn-array-address! conn (bytevector-address arrays))
      (set-pg-conn-capacity! conn n))))

(define (load-params! conn params)
  ;; -> the number of PARAMS; their values written into CONN's arrays
  (set-pg-conn-keep! conn params)
  (let* ((n (length params))
         (_ (grow-arrays! conn n))
         (arrays (pg-conn-arrays conn))
         (buffer (pg-conn-params conn))
         (lengths (* 8 (pg-conn-capacity conn)))   ; offsets of the int arrays
         (formats (* 12 (pg-conn-capacity conn))))
    (param-buffer-reset! buffer)
    ;; first pass: values into the buffer, their offsets into the values
    ;; array (the buffer may grow: addresses are set in a second pass)
    (let lp ((params params) (i 0))
      (when (pair? params)
        (let ((x (car params)))
          (if (eq? x 'null)
              (begin
                (bytevector-s64-native-set! arrays (* 8 i) -1)
                (bytevector-s32-native-set! arrays (+ formats (* 4 i)) 0)
                (bytevector-s32-native-set! arrays (+ lengths (* 4 i)) 0))
              (let* ((start (param-buffer-position buffer))
                     (format (encode-param! buffer x)))
                (bytevector-s32-native-set! arrays (+ formats (* 4 i)) format)
                (bytevector-s64-native-set! arrays (* 8 i) start)
                (bytevector-s32-native-set!
                 arrays (+ lengths (* 4 i))
                 (- (param-buffer-position buffer) start (if (= format 1) 0 1))))))
        (lp (cdr params) (+ i 1))))
    (let ((base (let ((data (param-buffer-data buffer)))
                  (unless (eq? data (pg-conn-data conn))
                    (set-pg-conn-data! conn data)
                    (set-pg-conn-data-address! conn (bytevector-address data)))
                  (pg-conn-data-address conn))))
      (let lp ((i 0))
        (when (< i n)
          (let ((offset (bytevector-s64-native-ref arrays (* 8 i))))
            ;; NULL: a null pointer
            (bytevector-u64-native-set! arrays (* 8 i) (if (< offset 0) 0 (+ base offset))))
          (lp (+ i 1)))))
    n))

(define (send-statement! conn sql params)
  ;; send SQL with PARAMS, prepared (preparing it first if new); -> its
  ;; <statement>, or #f if it went unprepared
  (let ((statement (or (hash-ref (pg-conn-statements conn) sql)
                       (prepare! conn sql))))
    (send-query! conn statement sql params)
    statement))

(define (send-query! conn statement sql params)
  ;; send the prepared STATEMENT, or SQL unprepared if it is #f, with PARAMS
  (let* ((ptr (pg-conn-ptr conn))
         (n (load-params! conn params))
         (address (pg-conn-array-address conn))
         (cap (pg-conn-capacity conn))
         (lengths (+ address (* 8 cap)))
         (formats (+ address (* 12 cap))))
    (sent! conn
           (if statement
               (PQsendQueryPrepared ptr (statement-name-address statement) n
                                    address lengths formats 0)
               (let ((sql-bv (c-string sql)))
                 (set-pg-conn-keep! conn (cons sql-bv params))
                 (PQsendQueryParams ptr (bytevector-address sql-bv) n 0
                                    address lengths formats 0))))
    (set-pg-conn-keep! conn #f)))

(define (new-statement conn)
  ;; -> a <statement> of a new name, or #f when CONN has prepared
  ;; `max-statements' already
  (let ((count (pg-conn-prepared conn)))
    (and (< count max-statements)
         (begin
           (set-pg-conn-prepared! conn (+ count 1))
           (make-statement (c-string (string-append "p" (number->string (+ count 1)))) #f)))))

(define (prepare! conn sql)
  ;; -> a new <statement> for SQL, prepared on the server (one round
  ;; trip), or #f (see `new-statement')
  (let ((statement (new-statement conn)))
    (and statement
         (let ((sql-bv (c-string sql)))
           (set-pg-conn-keep! conn sql-bv)
           (sent! conn (PQsendPrepare (pg-conn-ptr conn) (statement-name-address statement)
                                      (bytevector-address sql-bv) 0 0))
           (flush! conn)
           (let ((error (drain! conn)))
             (when error (raise-exception error)))
           (hash-set! (pg-conn-statements conn) sql statement)
           statement))))

;;;
;;; Results
;;;

(define (result-decoders result statement)
  ;; -> a vector of the columns, each (DECODER . MEASURED?): MEASURED?
  ;; when the type's text may be empty (text, bytea...), so that its
  ;; length and NULL must be asked of libpq; other types' text is never
  ;; empty, read to its NUL, and empty means NULL (an FFI call or two
  ;; less per value: bench/pg-roundtrip).  Kept with a prepared statement
  ;; (its columns' types do not change: the server says "cached plan
  ;; must not change result type" if the table's do).
  (or (and statement (statement-decoders statement))
      (let* ((n (PQnfields result))
             (v (make-vector n)))
        (let lp ((i 0))
          (when (< i n)
            (let ((oid (PQftype result i)))
              (vector-set! v i (cons (oid->decoder oid) (not (oid-never-empty? oid)))))
            (lp (+ i 1))))
        (when statement (set-statement-decoders! statement v))
        v)))

(define (nul-index bv i)
  ;; -> the index of the first 0 byte of BV from I
  (if (zero? (bytevector-u8-ref bv i)) i (nul-index bv (+ i 1))))

(define (decode-row result row columns)
  (let* ((n (vector-length columns))
         (v (make-vector n)))
    (let lp ((i 0))
      (when (< i n)
        (let ((column (vector-ref columns i)))
          (vector-set!
           v i
           (if (cdr column)
               (let ((len (PQgetlength result row i)))
                 (if (and (zero? len) (= (PQgetisnull result row i) 1))
                     'null
                     (let ((start (- (PQgetvalue result row i) memory-base)))
                       ((car column) memory start (+ start len)))))
               (let* ((start (- (PQgetvalue result row i) memory-base))
                      (end (nul-index memory start)))
                 (if (= start end) 'null ((car column) memory start end))))))
        (lp (+ i 1))))
    v))

(define (decode-rows result statement n)
  ;; -> the first N rows of RESULT, a list of vectors
  (let ((columns (result-decoders result statement)))
    (let lp ((i (- n 1)) (rows '()))
      (if (< i 0)
          rows
          (lp (- i 1) (cons (decode-row result i columns) rows))))))

(define (affected result)
  (let ((s (c-string->string (PQcmdTuples result))))
    (if (or (not s) (string-null? s)) 0 (string->number s))))

(define (read-results conn statement mode fresh?)
  ;; -> per MODE: rows (a list of vectors), row (the first, or #f), count.
  ;; FRESH?: the statement was just sent and nothing read since (see
  ;; `first-result')
  (let lp ((value (if (eq? mode 'row) #f '())) (error #f) (first? fresh?))
    (let ((r (if first? (first-result conn) (next-result conn))))
      (if (zero? r)
          (begin
            (set-pg-conn-busy! conn #f)
            (if error (raise-exception error) value))
          ;; rows first: only PGRES_TUPLES_OK (and single-row mode's
          ;; results) have any, and their number spares asking the status
          (let* ((rows (PQntuples r))
                 (status (if (> rows 0) PGRES_TUPLES_OK (PQresultStatus r))))
            (cond
             ((= status PGRES_TUPLES_OK)
              (let ((value (case mode
                             ((rows) (decode-rows r statement rows))
                             ((row) (and (> rows 0) (car (decode-rows r statement 1))))
                             (else (affected r)))))
                (PQclear r)
                (lp value error #f)))
             ((= status PGRES_COMMAND_OK)
              (let ((value (if (eq? mode 'count) (affected r) value)))
                (PQclear r)
                (lp value error #f)))
             ((= status PGRES_COPY_IN)
              (PQclear r)
              (PQputCopyEnd (pg-conn-ptr conn) (bytevector-address not-copy))
              (flush! conn)
              (lp value error #f))
             (else
              (let ((error (or error (result-error conn r))))
                (PQclear r)
                (forget-if-stale! conn statement error)
                (lp value error #f)))))))))

(define (forget-if-stale! conn statement error)
  ;; a table's columns changed under a prepared statement ("cached plan
  ;; must not change result type"): prepare it anew next time
  (when (and statement (pg-error? error) (equal? (pg-error-sqlstate error) "0A000"))
    (for-each (lambda (sql) (hash-remove! (pg-conn-statements conn) sql))
              (hash-fold (lambda (sql s stale) (if (eq? s statement) (cons sql stale) stale))
                         '() (pg-conn-statements conn)))))

(define not-copy (c-string "COPY FROM STDIN needs pg-copy-from"))

(define (conn-query conn sql params mode)
  "Run SQL with PARAMS on CONN; return, per MODE, `rows' (a list of row
vectors), `row' (the first row or #f) or `count' (rows affected)."
  (ready! conn)
  (let ((statement (send-statement! conn sql params)))
    (read-results conn statement mode
                  ;; libpq's PQsendQueryPrepared flushes itself outside
                  ;; a pipeline; a message this small fits in the empty
                  ;; send buffer of an idle connection: all of it went
                  ;; (one FFI call less per query: bench/pg-roundtrip)
                  (or (and statement (< (param-buffer-position (pg-conn-params conn)) 4096))
                      (flush! conn)))))

(define (conn-command conn sql)
  "Run SQL, one or more statements without parameters, unprepared (the
simple protocol: BEGIN, SAVEPOINT, SET ...); return nothing."
  (ready! conn)
  (let ((sql-bv (c-string sql)))
    (set-pg-conn-keep! conn sql-bv)
    (sent! conn (PQsendQuery (pg-conn-ptr conn) (bytevector-address sql-bv)))
    (set-pg-conn-keep! conn #f))
  (read-results conn #f 'count (flush! conn))
  (values))

;;;
;;; Pipelines
;;;

(define (conn-pipeline conn statements)
  "Run STATEMENTS, a list of (SQL PARAM ...) lists, in pipeline mode: all
sent, then all results read, one round trip.  Return a list of results,
one per statement, each a list of row vectors.  Raises the first error;
the statements after it did not run (as in a transaction's)."
  (ready! conn)
  (let ((ptr (pg-conn-ptr conn)))
    (unless (= 1 (PQenterPipelineMode ptr))
      (raise-pg-error "08000" (conn-error-message ptr)))
    (set-pg-conn-busy! conn #t)
    (let ((sent (let lp ((statements statements) (sent '()))
                  (if (pair? statements)
                      (lp (cdr statements) (cons (pipeline-send! conn (car statements)) sent))
                      (reverse sent)))))
      (sent! conn (PQpipelineSync ptr))
      (flush! conn)
      (let lp ((sent sent) (results '()) (error #f))
        (if (pair? sent)
            (let* ((sql (car (car sent)))
                   (statement (cadr (car sent)))
                   (new? (caddr (car sent)))
                   (prepare-error
                    (and new?
                         (let ((outcome (read-one conn statement 'prepare)))
                           (and (not (eq? outcome 'ok))
                                ;; not prepared after all: forget it
                                (begin (hash-remove! (pg-conn-statements conn) sql)
                                       (and (pg-error? outcome) outcome))))))
                   (value (read-one conn statement 'rows))
                   (error (or error prepare-error (and (pg-error? value) value))))
              (lp (cdr sent) (if (pg-error? value) results (cons value results)) error))
            (begin
              ;; the PGRES_PIPELINE_SYNC result
              (let ((r (next-result conn)))
                (unless (zero? r) (PQclear r)))
              (PQexitPipelineMode ptr)
              (set-pg-conn-busy! conn #f)
              (if error (raise-exception error) (reverse results))))))))

(define (pipeline-send! conn entry)
  ;; send ENTRY, (SQL PARAM ...), preparing it first (in the pipeline)
  ;; if new; -> (SQL STATEMENT NEW?)
  (let* ((ptr (pg-conn-ptr conn))
         (sql (car entry))
         (known (hash-ref (pg-conn-statements conn) sql))
         (new (and (not known) (new-statement conn)))
         (statement (or known new)))
    (when new
      (let ((sql-bv (c-string sql)))
        (set-pg-conn-keep! conn sql-bv)
        (sent! conn (PQsendPrepare ptr (statement-name-address new)
                                   (bytevector-address sql-bv) 0 0)))
      (hash-set! (pg-conn-statements conn) sql new))
    (send-query! conn statement sql (cdr entry))
    (list sql statement (and new #t))))

(define (read-one conn statement what)
  ;; in a pipeline: the results of one statement up to its NULL; -> for
  ;; WHAT 'rows its rows, for 'prepare the symbol ok; or the &pg-error it
  ;; failed with; #f if the pipeline was aborted before it
  (let lp ((value (if (eq? what 'rows) '() 'ok)))
    (let ((r (next-result conn)))
      (if (zero? r)
          value
          (let* ((status (PQresultStatus r))
                 (value (cond
                         ((pg-error? value) value)
                         ((= status PGRES_TUPLES_OK)
                          (if (eq? what 'rows) (decode-rows r statement (PQntuples r)) value))
                         ((= status PGRES_COMMAND_OK) value)
                         ((= status PGRES_PIPELINE_ABORTED) #f)
                         (else (result-error conn r)))))
            (PQclear r)
            (lp value))))))

;;;
;;; Row by row
;;;

(define (conn-for-each-row conn proc sql params)
  "Call PROC on each row of SQL's result, as a vector, in order, one
row in memory at a time (libpq's single-row mode); return the number of
rows."
  (ready! conn)
  (let ((statement (send-statement! conn sql params)))
    (PQsetSingleRowMode (pg-conn-ptr conn))
    (flush! conn)
    (let lp ((count 0) (error #f))
      (let ((r (next-result conn)))
        (if (zero? r)
            (begin
              (set-pg-conn-busy! conn #f)
              (if error (raise-exception error) count))
            (let ((status (PQresultStatus r)))
              (cond
               ((= status PGRES_SINGLE_TUPLE)
                (let ((row (decode-row r 0 (result-decoders r statement))))
                  (PQclear r)
                  (unless error (proc row))
                  (lp (+ count 1) error)))
               ((or (= status PGRES_TUPLES_OK) (= status PGRES_COMMAND_OK))
                (PQclear r)
                (lp count error))
               (else
                (let ((error (or error (result-error conn r))))
                  (PQclear r)
                  (lp count error))))))))))

;;;
;;; COPY FROM STDIN
;;;

(define copy-chunk 65536)

(define (conn-copy-from conn sql rows)
  "Run SQL, a COPY ... FROM STDIN statement, sending ROWS (a list of
vectors, or a procedure returning the next vector or #f at the end) in
COPY's text format; return the number of rows copied."
  (ready! conn)
  (let ((ptr (pg-conn-ptr conn))
        (buffer (make-param-buffer)))
    (let ((sql-bv (c-string sql)))
      (set-pg-conn-keep! conn sql-bv)
      (sent! conn (PQsendQuery ptr (bytevector-address sql-bv)))
      (set-pg-conn-keep! conn #f))
    (flush! conn)
    (let ((r (next-result conn)))
      (unless (and (not (zero? r)) (= (PQresultStatus r) PGRES_COPY_IN))
        (let ((error (if (and (not (zero? r)) (= (PQresultStatus r) PGRES_FATAL_ERROR))
                         (result-error conn r)
                         (make-pg-error "42601" "not a COPY ... FROM STDIN statement" #f))))
          (unless (zero? r) (PQclear r))
          (drain! conn)
          (raise-exception error)))
      (PQclear r))
    (define (send-buffer!)
      (let ((n (param-buffer-position buffer)))
        (when (> n 0)
          (let lp ()
            (let ((ok (PQputCopyData ptr (bytevector-address (param-buffer-data buffer)) n)))
              (cond
               ((= ok 1) #t)
               ((= ok 0) (flush! conn) (lp))
               (else (lost! conn (conn-error-message ptr))))))
          (param-buffer-reset! buffer))))
    (define (next-row rows)
      ;; -> (values row rest), row #f at the end
      (cond
       ((procedure? rows) (values (rows) rows))
       ((pair? rows) (values (car rows) (cdr rows)))
       (else (values #f '()))))
    (with-exception-handler
        (lambda (e)
          ;; a row that cannot be written: end the COPY with an error, so
          ;; that the server drops what it got, and raise E.  A request
          ;; given up must not wait again: its connection is closed.
          (cond
           ((zero? (pg-conn-ptr conn)) #f)
           ((request-cancelled? e) (conn-close! conn))
           (else
            (PQputCopyEnd ptr (bytevector-address abandoned))
            (false-if-exception (begin (flush! conn) (drain! conn)))))
          (raise-exception e))
      (lambda ()
        (let lp ((rows rows))
          (call-with-values (lambda () (next-row rows))
            (lambda (row rest)
              (when row
                (copy-row-text! buffer row)
                (when (>= (param-buffer-position buffer) copy-chunk)
                  (send-buffer!))
                (lp rest)))))
        (send-buffer!))
      #:unwind? #t)
    (let lp ()
      (let ((ok (PQputCopyEnd ptr 0)))
        (cond
         ((= ok 1) #t)
         ((= ok 0) (flush! conn) (lp))
         (else (lost! conn (conn-error-message ptr))))))
    (flush! conn)
    (read-results conn #f 'count #f)))

;;;
;;; Notifications
;;;

(define-record-type <pg-notification>
  (make-pg-notification channel payload pid)
  pg-notification?
  (channel pg-notification-channel)     ; the channel NOTIFY named
  (payload pg-notification-payload)     ; its payload, "" if none
  (pid pg-notification-pid))            ; the notifying session's server PID

(define (take-notification ptr)
  ;; -> the oldest notification libpq holds, or #f
  (let ((n (PQnotifies ptr)))
    (and (not (zero? n))
         (let ((notification (make-pg-notification (notify-channel n) (notify-payload n)
                                                   (notify-pid n))))
           (PQfreemem n)
           notification))))

(define* (conn-wait-notification conn #:key (timeout-ms #f))
  "Return the next notification CONN received (it ran LISTEN), waiting
for one at most TIMEOUT-MS milliseconds (#f: no limit); #f if none came."
  (ready! conn)
  (let ((ptr (pg-conn-ptr conn))
        (deadline (and timeout-ms (+ (now-ms) timeout-ms))))
    (let lp ()
      (when (zero? (PQconsumeInput ptr)) (lost! conn (conn-error-message ptr)))
      (or (take-notification ptr)
          (let ((left (and deadline (- deadline (now-ms)))))
            (and (or (not left) (> left 0))
                 (while-waiting conn (wait-readable (pg-conn-fd conn) #:timeout-ms left
                                                    #:label (pg-conn-label conn)))
                 (lp)))))))

;;; (plucky db postgresql connection) ends here
