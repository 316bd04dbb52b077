;;; tests/apps/tfb.scm --- apps/tfb.scm against TechEmpower's verification rules

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The real thing end to end: a PostgreSQL of our own (scripts/pg-temp,
;;; with pg_stat_statements to count the queries the app runs), TFB's
;;; tables (scripts/tfb-db), `bin/plucky serve apps/tfb.scm' with
;;; DATABASE_URL, and curl or a raw socket as the client.  Each test type
;;; is checked as TFB's toolset verifies it (toolset/test_types/*,
;;; verifications.py): the Server, Date, Content-Type and Content-Length
;;; headers; the JSON shapes; queries and count clamped to 1..500, a
;;; non-integer counting as 1; the fortunes page (the added fortune,
;;; sorted, escaped, UTF-8, <!DOCTYPE html>); plaintext pipelined 16
;;; deep.  Beyond what TFB looks at: the rows served are the database's,
;;; each row is read by a query of its own (pg_stat_statements' counts),
;;; and what /updates answers is what the table holds afterwards.  Last,
;;; a missing or malformed DATABASE_URL stops the start with one line and
;;; status 2.  The server is stopped by its PID at the end.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-19)
             (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 match)
             (ice-9 popen)
             (ice-9 rdelim)
             (ice-9 regex)
             (ice-9 textual-ports)
             (rnrs bytevectors)
             (tests lib harness)
             (tests lib command)
             (tests lib server)
             ((plucky web json) #:select (decode-json))
             (plucky db postgresql))

(test-begin "apps/tfb")

;;;
;;; PostgreSQL and the data
;;;

(define pg-dir (temporary-directory))   ; under /tmp, open to pg-temp's user

(define (run-command . args)
  ;; -> (values exit-status first-line-of-output); standard error is ours
  (let* ((port (apply open-pipe* OPEN_READ args))
         (line (read-line port))
         (rest (get-string-all port)))
    (values (status:exit-val (close-pipe port)) line)))

(define database-url
  (let ((status url (run-command (string-append source-root "/scripts/pg-temp") "start" pg-dir
                                 "-c" "shared_preload_libraries=pg_stat_statements")))
    (unless (and (zero? status) (string? url) (string-prefix? "postgresql://" url))
      (error "scripts/pg-temp did not start PostgreSQL" status url))
    url))

(define (stop-database)
  (run-command (string-append source-root "/scripts/pg-temp") "stop" pg-dir)
  (remove-tree pg-dir))

(define (environment-with url)
  ;; this process's environment, DATABASE_URL set to URL (#f: unset)
  (append (if url (list (string-append "DATABASE_URL=" url)) '())
          (remove (lambda (entry) (string-prefix? "DATABASE_URL=" entry)) (environ))))

(test-equal "scripts/tfb-db loads the tables" 0
  (let ((port (open-pipe* OPEN_READ "env" (string-append "DATABASE_URL=" database-url)
                          (string-append source-root "/scripts/tfb-db"))))
    (get-string-all port)
    (status:exit-val (close-pipe port))))

(define db (pg-connect database-url))   ; the test's own, to check what the app did
(pg-execute db "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")

(define (world-row id)
  ;; -> #(id randomnumber); not the app's statement, which
  ;; pg_stat_statements counts (the columns the other way round)
  (let ((row (pg-query-row db "SELECT randomnumber, id FROM world WHERE id = $1" id)))
    (and row (vector (vector-ref row 1) (vector-ref row 0)))))

(test-group "the data is TFB's"
  (test-equal "World: 10,000 rows, ids 1..10000, numbers in 1..10000" #(10000 1 10000 #t)
    (pg-query-row db "SELECT count(*)::int, min(id), max(id),
                             bool_and(randomnumber BETWEEN 1 AND 10000) FROM world"))
  (test-equal "Fortune: 12 rows" 12
    (vector-ref (pg-query-row db "SELECT count(*)::int FROM fortune") 0))
  (test-equal "the Japanese fortune, as UTF-8" "フレームワークのベンチマーク"
    (vector-ref (pg-query-row db "SELECT message FROM fortune WHERE id = 12") 0)))

(define (statement-calls prefix)
  ;; -> the executions pg_stat_statements counted of statements whose text
  ;; starts with PREFIX since the last reset
  (vector-ref (pg-query-row db "SELECT coalesce(sum(calls), 0)::int FROM pg_stat_statements WHERE query LIKE $1"
                            (string-append prefix "%"))
              0))

(define (reset-statement-counts!)
  (pg-query db "SELECT pg_stat_statements_reset()"))

(define world-select "SELECT id, randomnumber FROM world WHERE id = $1")

;;;
;;; The client
;;;

(define (curl url)
  ;; -> (values status headers body): HEADERS an alist of lower-case
  ;; names and raw values, BODY the body's text (UTF-8)
  (let* ((port (open-pipe* OPEN_READ "curl" "-s" "-i" "--max-time" "20" url))
         (text (begin (set-port-encoding! port "UTF-8") (get-string-all port))))
    (close-pipe port)
    (let* ((end (or (string-contains text "\r\n\r\n") (string-length text)))
           (lines (string-split (string-delete #\return (substring text 0 end)) #\newline))
           (status (and (pair? lines) (string-match "^HTTP/1\\.1 ([0-9]+)" (car lines)))))
      (values (and status (string->number (match:substring status 1)))
              (filter-map (lambda (line)
                            (let ((colon (string-index line #\:)))
                              (and colon
                                   (cons (string-downcase (substring line 0 colon))
                                         (string-trim-both (substring line (+ colon 1)))))))
                          (if (pair? lines) (cdr lines) '()))
              (if (< end (string-length text)) (substring text (+ end 4)) "")))))

(define date-rx
  ;; TFB's strptime format "%a, %d %b %Y %H:%M:%S %Z"
  (make-regexp "^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$"))

(define content-type-rx
  ;; TFB's verify_headers
  `((json . ,(make-regexp "^application/json(; ?charset=(UTF|utf)-8)?$"))
    (html . ,(make-regexp "^text/html; ?charset=(UTF|utf)-8$"))
    (plaintext . ,(make-regexp "^text/plain(; ?charset=(UTF|utf)-8)?$"))))

(define (check-headers what headers kind)
  ;; TFB's verify_headers, and the Date is now's, not a cached one
  (let ((date (assoc-ref headers "date"))
        (type (assoc-ref headers "content-type")))
    (test-assert (string-append what ": Server") (assoc-ref headers "server"))
    (test-assert (string-append what ": Date in TFB's format") (and date (regexp-exec date-rx date)))
    (test-assert (string-append what ": Date is now")
      (and date
           (let ((then (time-second (date->time-utc (string->date date "~a, ~d ~b ~Y ~H:~M:~S GMT")))))
             ;; the Date string has no zone: string->date takes the local one
             (< (abs (- (+ then (date-zone-offset (current-date))) (current-time-seconds))) 5))))
    (test-assert (string-append what ": Content-Type " (or type "(none)"))
      (and type (regexp-exec (assq-ref content-type-rx kind) type)))
    (test-assert (string-append what ": Content-Length or Transfer-Encoding")
      (or (assoc-ref headers "content-length") (assoc-ref headers "transfer-encoding")))))

(define (current-time-seconds) (time-second (current-time time-utc)))

;;;
;;; The server
;;;

(define plucky
  (start-plucky (string-append source-root "/apps/tfb.scm")
                (append '("--port" "0" "--workers" "2") allow-root)
                #:environment (environment-with database-url)))

(test-assert "plucky serves apps/tfb.scm" (plucky-port plucky))

(define (url path)
  (format #f "http://127.0.0.1:~a~a" (plucky-port plucky) path))

(define (get-json path)
  ;; -> (values status headers value)
  (let ((status headers body (curl (url path))))
    (values status headers (false-if-exception (decode-json (string->utf8 body))))))

(define (world-object? x)
  ;; {"id": 1..10000, "randomNumber": 1..10000}, those two keys only
  (and (list? x) (every pair? x) (= (length x) 2)
       (let ((id (assoc-ref x "id"))
             (n (assoc-ref x "randomNumber")))
         (and (exact-integer? id) (exact-integer? n)
              (<= 1 id 10000) (<= 1 n 10000)))))

(define (worlds-in-table? worlds)
  ;; each object's randomNumber is its row's
  (every (lambda (w) (equal? (world-row (assoc-ref w "id"))
                             (vector (assoc-ref w "id") (assoc-ref w "randomNumber"))))
         worlds))

;; TFB's cases for queries, updates and cached-queries, and a few more:
;; the parameter's value -> how many objects
(define count-cases
  '(("2" . 2) ("0" . 1) ("foo" . 1) ("501" . 500) ("" . 1) (#f . 1)
    ("-3" . 1) ("2.5" . 1) ("%2B7" . 7) ("20" . 20) ("500" . 500)
    ("99999999999999999999999" . 500)))

(define (count-path path name value)
  (if value (string-append path "?" name "=" value) path))

;;;
;;; The test types
;;;

(test-group "/json"
  (let ((status headers value (get-json "/json")))
    (test-equal "200" 200 status)
    (check-headers "/json" headers 'json)
    (test-equal "{\"message\":\"Hello, World!\"}" '(("message" . "Hello, World!")) value)))

(test-group "/plaintext"
  (let ((status headers body (curl (url "/plaintext"))))
    (test-equal "200" 200 status)
    (check-headers "/plaintext" headers 'plaintext)
    (test-equal "Hello, World!, and nothing more" "Hello, World!" body)))

(test-group "/plaintext pipelined 16 deep"
  (with-client (plucky-port plucky)
    (lambda (client)
      (client-send! client (string-concatenate
                            (make-list 16 (request-text "/plaintext"
                                                        #:headers '("Accept: text/plain")))))
      (let ((replies (client-read-responses client 16 #:timeout 20)))
        (test-equal "16 responses to 16 requests sent at once" 16 (length replies))
        (test-assert "each Hello, World!"
          (every (lambda (reply) (equal? (reply-body-string reply) "Hello, World!")) replies))))))

(test-group "/db"
  (reset-statement-counts!)
  (let ((status headers value (get-json "/db")))
    (test-equal "200" 200 status)
    (check-headers "/db" headers 'json)
    (test-assert "an object {id, randomNumber}, not an array" (world-object? value))
    (test-assert "the row of World" (and (world-object? value) (worlds-in-table? (list value))))
    (test-equal "one query" 1 (statement-calls world-select))))

(test-group "/queries"
  (for-each
   (match-lambda
     ((value . n)
      (let* ((path (count-path "/queries" "queries" value))
             (_ (reset-statement-counts!))
             (status headers worlds (get-json path)))
        (test-equal (string-append path ": 200") 200 status)
        (test-equal (format #f "~a: an array of ~a" path n) n
          (and (vector? worlds) (vector-length worlds)))
        (test-assert (string-append path ": of {id, randomNumber}")
          (and (vector? worlds) (every world-object? (vector->list worlds))))
        (test-assert (string-append path ": World's rows")
          (and (vector? worlds) (every world-object? (vector->list worlds))
               (worlds-in-table? (vector->list worlds))))
        (test-equal (format #f "~a: ~a queries, one per row" path n) n
          (statement-calls world-select)))))
   count-cases)
  (let ((status headers worlds (get-json "/queries?queries=3")))
    (check-headers "/queries" headers 'json)))

(test-group "/cached-queries"
  ;; before /updates: the cache is World as it was at start
  (reset-statement-counts!)
  (for-each
   (match-lambda
     ((value . n)
      (let* ((path (count-path "/cached-queries" "count" value))
             (status headers worlds (get-json path)))
        (test-equal (string-append path ": 200") 200 status)
        (test-equal (format #f "~a: an array of ~a" path n) n
          (and (vector? worlds) (vector-length worlds)))
        (test-assert (string-append path ": World's rows")
          (and (vector? worlds) (every world-object? (vector->list worlds))
               (worlds-in-table? (vector->list worlds)))))))
   count-cases)
  (test-equal "from memory: no query of World" 0 (statement-calls world-select))
  (let ((status headers worlds (get-json "/cached-queries?count=3")))
    (check-headers "/cached-queries" headers 'json)))

(define (entity-decode text)
  ;; what an HTML parser reads in TEXT: the character references
  ;; (named ones of TFB's page, decimal and hexadecimal) replaced
  (regexp-substitute/global
   #f "&(#[0-9]+|#[xX][0-9a-fA-F]+|[a-z]+);" text
   'pre
   (lambda (m)
     (let ((ref (match:substring m 1)))
       (cond ((string-prefix? "#x" (string-downcase ref))
              (string (integer->char (string->number (substring ref 2) 16))))
             ((string-prefix? "#" ref)
              (string (integer->char (string->number (substring ref 1) 10))))
             (else (or (assoc-ref '(("amp" . "&") ("lt" . "<") ("gt" . ">")
                                    ("quot" . "\"") ("apos" . "'"))
                                  ref)
                       (match:substring m 0))))))
   'post))

(define fortune-row-rx (make-regexp "<tr><td>([^<]*)</td><td>([^<]*)</td></tr>"))

(test-group "/fortunes"
  (let* ((status headers page (curl (url "/fortunes")))
         (rows (map (lambda (m) (cons (string->number (match:substring m 1))
                                      (entity-decode (match:substring m 2))))
                    (list-matches fortune-row-rx page)))
         (expected (sort (cons '(0 . "Additional fortune added at request time.")
                               (map (lambda (row) (cons (vector-ref row 0) (vector-ref row 1)))
                                    (pg-query db "SELECT id, message FROM fortune")))
                         (lambda (a b) (string<? (cdr a) (cdr b))))))
    (test-equal "200" 200 status)
    (check-headers "/fortunes" headers 'html)
    (test-assert "<!DOCTYPE html> first" (string-prefix? "<!doctype html>" (string-downcase page)))
    (test-assert "a title and a table with its heading row"
      (string-contains page "<title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>"))
    (test-equal "the 12 fortunes and the one added at request time, sorted by message, as the text read"
      expected rows)
    (test-assert "the <script> fortune is text, escaped: no script element"
      (and (not (string-contains page "<script"))
           (string-contains page "&lt;script&gt;alert(")))
    (test-assert "the Japanese fortune in UTF-8" (string-contains page "<td>フレームワークのベンチマーク</td>"))
    (test-assert "ends the document" (string-suffix? "</table></body></html>" page))))

(test-group "/updates"
  (for-each
   (match-lambda
     ((value . n)
      (let* ((path (count-path "/updates" "queries" value))
             (_ (reset-statement-counts!))
             (status headers worlds (get-json path))
             (list (if (vector? worlds) (vector->list worlds) '()))
             (ids (map (lambda (w) (and (pair? w) (assoc-ref w "id"))) list))
             ;; an id drawn twice in one request may be written with
             ;; either of its numbers: check those drawn once
             (once (filter (lambda (w) (= 1 (count (lambda (id) (eqv? id (assoc-ref w "id"))) ids)))
                           list)))
        (test-equal (string-append path ": 200") 200 status)
        (test-equal (format #f "~a: an array of ~a" path n) n (length list))
        (test-assert (string-append path ": of {id, randomNumber}") (every world-object? list))
        (test-assert (string-append path ": each new number is in the table now")
          (and (every world-object? list) (worlds-in-table? once)))
        (test-equal (format #f "~a: ~a reads, one per row" path n) n (statement-calls world-select))
        (test-equal (string-append path ": written back in one UPDATE") 1
          (statement-calls "UPDATE world")))))
   count-cases)
  (let* ((before (pg-query db "SELECT id, randomnumber FROM world ORDER BY id"))
         (status headers worlds (get-json "/updates?queries=500"))
         (after (pg-query db "SELECT id, randomnumber FROM world ORDER BY id"))
         (changed (count (lambda (a b) (not (equal? a b))) before after)))
    (check-headers "/updates" headers 'json)
    ;; TFB's verify_updates: more than 90% of the 500 rows changed (a row
    ;; may be drawn twice, or given the number it had)
    (test-assert (format #f "/updates?queries=500 changed ~a rows of World" changed)
      (> changed 450))))

(test-group "after all that, the server logged no error"
  (test-assert "no backtrace" (not (string-contains (plucky-log plucky) "Backtrace")))
  (test-assert "no 500" (not (string-contains (plucky-log plucky) "handler failed"))))

(stop-plucky plucky)

;;;
;;; DATABASE_URL wrong
;;;

(define (start-failure url)
  ;; -> (values exit-status log) of `plucky serve apps/tfb.scm' with
  ;; DATABASE_URL=URL (#f: unset)
  (let ((p (start-plucky (string-append source-root "/apps/tfb.scm")
                         (append '("--port" "0") allow-root)
                         #:environment (environment-with url))))
    (let ((status (wait-until (lambda () (plucky-exit-status p)) #:timeout 30)))
      (unless status (stop-plucky p))
      (values (and status (status:exit-val status)) (plucky-log p)))))

(define (one-line? text)
  (= 1 (length (filter (lambda (line) (not (string-null? line)))
                       (string-split text #\newline)))))

(for-each
 (match-lambda
   ((what url . words)
    (test-group what
      (let ((status log (start-failure url)))
        (test-equal (string-append what ": exit status 2") 2 status)
        (test-assert (string-append what ": one line: " log) (one-line? log))
        (for-each (lambda (word)
                    (test-assert (string-append what ": names " word) (string-contains log word)))
                  words)))))
 `(("DATABASE_URL unset" #f "DATABASE_URL" "not set")
   ("DATABASE_URL empty" "" "DATABASE_URL" "not set")
   ("DATABASE_URL malformed" "postgresql://[::1" "DATABASE_URL" "malformed")
   ("DATABASE_URL with a port that is not a number"
    ,(string-append "postgresql://plucky@127.0.0.1:notaport/postgres") "DATABASE_URL" "notaport")
   ("DATABASE_URL naming a database that does not exist"
    ,(string-append database-url "_missing") "DATABASE_URL" "postgres_missing")))

(pg-close db)
(stop-database)

(test-end "apps/tfb")
