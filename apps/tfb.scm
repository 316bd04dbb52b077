;;; apps/tfb.scm --- the TechEmpower Framework Benchmarks' test types on plucky
;;;
;;; Serve it:
;;;   scripts/pg-temp start /tmp/pg        # prints the URL, or any server
;;;   DATABASE_URL=postgresql://… scripts/tfb-db      # World and Fortune
;;;   DATABASE_URL=postgresql://… bin/plucky serve apps/tfb.scm --port 8080
;;;
;;; The seven test types, as TFB's rules (its wiki's "Framework Tests
;;; Overview" and its toolset's verifications) ask for them:
;;;
;;;   /plaintext                 "Hello, World!", text/plain (pipelined)
;;;   /json                      {"message":"Hello, World!"}, made per request
;;;   /db                        one random World row, read by a query
;;;   /queries?queries=N         N rows, each read by its own query
;;;   /fortunes                  every Fortune plus one added at request
;;;                              time, sorted by message, as an HTML page
;;;                              (escaped, UTF-8)
;;;   /updates?queries=N         N rows, each read by its own query, each
;;;                              given a new random number, written back
;;;                              in one UPDATE (a batch, which the rules
;;;                              allow)
;;;   /cached-queries?count=N    N rows from a copy of World held in memory
;;;
;;; N is clamped to 1..500; anything but an integer counts as 1.  Every
;;; response carries Server and Date (the server adds Date).  Ids and
;;; random numbers are drawn in 1..10000.
;;;
;;; The database is DATABASE_URL's, by convention, read at start: a
;;; missing or malformed URL, or a server that cannot be reached, ends
;;; the start with one line naming what is wrong (`plucky serve' exits
;;; with status 2).  The pool is made here, before the server forks its
;;; workers; each worker opens its own connections at its first query
;;; (see docs/postgresql.md).  DATABASE_POOL_SIZE sets the connections
;;; per worker (default 8).

(use-modules (srfi srfi-1)
             (ice-9 exceptions)
             (rnrs bytevectors)
             (plucky web router)
             (plucky web json)
             (plucky web html)
             ((plucky server) #:select (worker-pid))
             (plucky db postgresql))

;;;
;;; The database
;;;

(define (start-failure what)
  ;; Ends the start: `plucky serve' prints "plucky: WHAT" and exits 2.
  (error what))

(define (condition-text e)
  ;; -> what exception E says, on one line
  (let ((text (cond ((pg-error? e) (pg-error-message e))
                    ((exception-with-message? e) (exception-message e))
                    (else (call-with-output-string (lambda (port) (write e port)))))))
    ;; libpq's messages end lines with "\n" and indent hints with "\t"
    (string-join (string-tokenize text (char-set-complement char-set:whitespace)) " ")))

(define database-url
  (let ((url (getenv "DATABASE_URL")))
    (when (or (not url) (string-null? url))
      (start-failure "apps/tfb.scm: DATABASE_URL is not set (e.g. postgresql://user@127.0.0.1:5432/db)"))
    url))

(define pool-size
  (let* ((text (getenv "DATABASE_POOL_SIZE"))
         (n (and text (string->number text))))
    (cond ((not text) 8)
          ((and (exact-integer? n) (<= 1 n 1000)) n)
          (else (start-failure (string-append "apps/tfb.scm: DATABASE_POOL_SIZE must be an integer in 1..1000, not "
                                              (object->string text)))))))

(define db
  (with-exception-handler
      (lambda (e)
        (start-failure (string-append "apps/tfb.scm: DATABASE_URL: " (condition-text e))))
    (lambda () (make-pg-pool database-url #:size pool-size))
    #:unwind? #t))

(define world-sql "SELECT id, randomnumber FROM world WHERE id = $1")
(define fortune-sql "SELECT id, message FROM fortune")

(define (world->json-object row)
  ;; ROW: #(id randomnumber) -> the object TFB expects
  `(("id" . ,(vector-ref row 0)) ("randomNumber" . ,(vector-ref row 1))))

;; World, read once at start (a connection of its own, closed before the
;; workers fork): cached-queries' copy, by id - 1.  Reading it also tells
;; at start whether DATABASE_URL reaches a server that has the tables.
(define world-cache
  (with-exception-handler
      (lambda (e)
        (start-failure (string-append "apps/tfb.scm: reading World from DATABASE_URL: "
                                      (condition-text e))))
    (lambda ()
      (let* ((conn (pg-connect database-url))
             (rows (pg-query conn "SELECT id, randomnumber FROM world ORDER BY id")))
        (pg-close conn)
        (list->vector (map world->json-object rows))))
    #:unwind? #t))

;;;
;;; Requests
;;;

;; Header alists: literals, so that the server renders each one once
;; (see (plucky http response)).
(define text-headers '((content-type . (text/plain)) (server . "plucky")))
(define json-headers '((content-type . (application/json)) (server . "plucky")))
(define html-headers '((content-type . (text/html (charset . "utf-8"))) (server . "plucky")))

(define hello (string->utf8 "Hello, World!"))

(define (json-answer value)
  (values json-headers (encode-json value)))

(define (count-parameter request name)
  ;; -> the query parameter NAME as an integer clamped to 1..500; 1 when
  ;; absent or not an integer ("foo", "", "2.5")
  (let* ((text (or (query-ref request name) ""))
         (start (if (and (positive? (string-length text))
                          (memv (string-ref text 0) '(#\+ #\-)))
                     1 0)))
    (if (and (< start (string-length text))
             (string-every (lambda (c) (char<=? #\0 c #\9)) text start))
        (max 1 (min 500 (string->number text 10)))
        1)))

;; Each worker draws its own numbers: the state is made afresh in each
;; process (the workers are forks of one), checked once a request by the
;; worker's PID, which the server read once as the worker started.
(define random-pid #f)
(define random-state* #f)
(define (worker-random-state)
  (let ((pid (worker-pid)))
    (unless (eqv? random-pid pid)
      (set! random-state* (random-state-from-platform))
      (set! random-pid pid)))
  random-state*)

(define (random-id state)
  ;; -> an integer in 1..10000
  (+ 1 (random 10000 state)))

(define (read-world conn state)
  ;; -> the row #(id randomnumber) of a random World, by its own query
  (pg-query-row conn world-sql (random-id state)))

(define (plaintext request body params)
  (values text-headers hello))

(define (json request body params)
  (json-answer '(("message" . "Hello, World!"))))

(define (single-query request body params)
  (json-answer (world->json-object (read-world db (worker-random-state)))))

(define (queries request body params)
  (let ((n (count-parameter request "queries"))
        (state (worker-random-state)))
    (call-with-pg-connection db
      (lambda (conn)
        (let ((worlds (make-vector n)))
          (do ((i 0 (+ i 1))) ((= i n))
            (vector-set! worlds i (world->json-object (read-world conn state))))
          (json-answer worlds))))))

;; The UPDATE of N rows, made once for each N:
;;   UPDATE world SET randomnumber = v.r
;;   FROM (VALUES ($1::int, $2::int), …) AS v(id, r) WHERE world.id = v.id
(define update-statements (make-vector 501 #f))
(define (update-statement n)
  (or (vector-ref update-statements n)
      (let ((sql (string-append
                  "UPDATE world SET randomnumber = v.r FROM (VALUES "
                  (string-join (map (lambda (i)
                                      (format #f "($~a::int, $~a::int)" (+ (* 2 i) 1) (+ (* 2 i) 2)))
                                    (iota n))
                               ", ")
                  ") AS v(id, r) WHERE world.id = v.id")))
        (vector-set! update-statements n sql)
        sql)))

(define (updates request body params)
  (let ((n (count-parameter request "queries"))
        (state (worker-random-state)))
    (call-with-pg-connection db
      (lambda (conn)
        (let ((worlds (map (lambda (i)
                             (vector (vector-ref (read-world conn state) 0) (random-id state)))
                           (iota n))))
          ;; In id order, so that concurrent batches lock rows in one order.
          (apply pg-execute conn (update-statement n)
                 (append-map (lambda (world) (list (vector-ref world 0) (vector-ref world 1)))
                             (sort worlds (lambda (a b) (< (vector-ref a 0) (vector-ref b 0))))))
          (json-answer (list->vector (map world->json-object worlds))))))))

(define extra-fortune #(0 "Additional fortune added at request time."))

(define (fortunes request body params)
  (let ((rows (sort (cons extra-fortune (pg-query db fortune-sql))
                    (lambda (a b) (string<? (vector-ref a 1) (vector-ref b 1))))))
    (html-response
     `(html (head (title "Fortunes"))
            (body (table (tr (th "id") (th "message"))
                         ,(map (lambda (row)
                                 `(tr (td ,(vector-ref row 0)) (td ,(vector-ref row 1))))
                               rows))))
     #:headers html-headers)))

(define (cached-queries request body params)
  (let* ((n (count-parameter request "count"))
         (state (worker-random-state))
         (worlds (make-vector n)))
    (do ((i 0 (+ i 1))) ((= i n))
      (vector-set! worlds i (vector-ref world-cache (- (random-id state) 1))))
    (json-answer worlds)))

(router-handler
 (make-router
  (list (route 'GET "/plaintext" plaintext)
        (route 'GET "/json" json)
        (route 'GET "/db" single-query)
        (route 'GET "/queries" queries)
        (route 'GET "/fortunes" fortunes)
        (route 'GET "/updates" updates)
        (route 'GET "/cached-queries" cached-queries))))
