;;; tests/observe/status.scm --- /_plucky/ on a real server, and the inbox

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A child process serves a small app through (plucky dev serve)
;;; with the accounting and the wrapper on, on a free port of 127.0.0.1;
;;; the tests send it requests, then read /_plucky/status, /metrics and
;;; /status.json and check them against what they sent: the Prometheus
;;; text line by line (HELP and TYPE before samples, cumulative buckets),
;;; the JSON with a small parser of its own.  A failing request goes to
;;; the inbox, is fetched back over HTTP and replayed against a mended
;;; handler.  Access: a second server with a token, and the wrapper
;;; called outside any loop, where the client's address is unknown (the
;;; tests may only use loopback addresses, so a foreign client is
;;; simulated that way).
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-11)
             (srfi srfi-64)
             (srfi srfi-71)
             (tests lib harness)
             (tests lib server)
             (rnrs bytevectors)
             ((ice-9 binary-ports) #:select (get-u8 put-u8))
             (ice-9 regex)
             (ice-9 rdelim)
             (web request)
             (web response)
             (web uri)
             (plucky observe accounting)
             (plucky observe inbox)
             (plucky observe status)
             (plucky web timing)
             ((plucky server) #:select (sleep-ms wait-readable))
             (plucky dev serve))

(test-begin "observe/status")

;;;
;;; The app and its server
;;;

;; What /upstream waits on, as on a socket to another service: /poke
;; writes a byte to it.  Made before the server's process forks.
(define upstream-pipe (pipe))

;; Compiled, not interpreted as the rest of this file is (tests/run
;; turns auto-compilation off), so that a backtrace names its procedures
;; as it would in an app.
(define app
  (compile
   '(begin
      ;; top-level definitions, which the compiler does not inline
      (define (fail-on-purpose path)
        (error "this request fails on purpose:" path))
      ;; a handler that times its own phases, as apps/news does
      (define phased
        ((with-server-timing #:header? #f)
         (lambda (request body)
           (with-phase 'db (lambda () (length (iota 1000))))
           (with-phase 'render
                       (lambda () (values '((content-type . (text/plain))) "phased"))))))
      (define (app request body)
        (let ((path (uri-path (request-uri request))))
          (cond
           ((string=? path "/") (values '((content-type . (text/plain))) "Hello, World!"))
           ((string=? path "/phased") (phased request body))
           ((string=? path "/upstream")
            ;; a timer, then a labelled socket: what the page shows
            (sleep-ms 30)
            (wait-readable (port->fdes (car upstream-pipe)) #:label "upstream test")
            (values '((content-type . (text/plain)))
                    (string #\u (integer->char (get-u8 (car upstream-pipe))))))
           ((string=? path "/poke")
            (put-u8 (cdr upstream-pipe) (char->integer #\p))
            (force-output (cdr upstream-pipe))
            (values '((content-type . (text/plain))) "poked"))
           ((string=? path "/fail")
            ;; not a tail call, so that its frame is in the backtrace
            (fail-on-purpose path)
            (values '((content-type . (text/plain))) "not reached"))
           ((string=? path "/collect")
            ;; two collections in the server's process
            (gc) (gc)
            (values '((content-type . (text/plain))) "collected"))
           ((string=? path "/missing")
            (values (build-response #:code 404 #:headers '((content-type . (text/plain)))) "no"))
           (else (values '((content-type . (text/plain))) path)))))
      app)
   #:env (current-module)
   #:to 'value))

(define* (start-observed #:key (token #f) (workers 1) (mode 'nocatch))
  (start-child
   (lambda (report)
     (let ((observer (make-observer #:workers workers)))
       (serve-app (if token
                      ;; serve-app's wrapper has no token: wrap here
                      (observed-handler app observer #:token token)
                      app)
                  ;; nocatch: what --status runs; the loop reports the
                  ;; handler's exceptions to the observer itself
                  #:mode (if token 'off mode)
                  #:observer observer
                  #:on-listen report)))))

(define* (get server path #:key (headers '()) (method "GET") (body #f))
  ;; -> (values code headers body-string)
  (with-client (server-port server)
    (lambda (client)
      (client-send! client (request-text path #:method method #:headers headers #:body body))
      (let ((response body (client-read-response client)))
        (if response
            (values (response-code response) (response-headers response)
                    (utf8->string body))
            (values #f '() ""))))))

(define (code-of server path . args)
  (let ((code headers body (apply get server path args))) code))

(define (body-of server path . args)
  (let ((code headers body (apply get server path args))) body))

;;;
;;; A small JSON reader: objects become alists with string keys
;;;

(define (read-json port)
  (define (skip) (let ((c (peek-char port)))
                   (when (and (char? c) (char-whitespace? c)) (read-char port) (skip))))
  (define (expect s)
    (string-for-each (lambda (c) (unless (eqv? (read-char port) c) (error "bad JSON at" s))) s))
  (define (read-string*)
    (read-char port)
    (let lp ((acc '()))
      (let ((c (read-char port)))
        (cond
         ((eqv? c #\") (list->string (reverse acc)))
         ((eqv? c #\\)
          (let ((e (read-char port)))
            (case e
              ((#\n) (lp (cons #\newline acc)))
              ((#\t) (lp (cons #\tab acc)))
              ((#\r) (lp (cons #\return acc)))
              ((#\u) (let ((hex (string (read-char port) (read-char port) (read-char port) (read-char port))))
                       (lp (cons (integer->char (string->number hex 16)) acc))))
              (else (lp (cons e acc))))))
         ((eof-object? c) (error "unterminated JSON string"))
         (else (lp (cons c acc)))))))
  (define (value)
    (skip)
    (let ((c (peek-char port)))
      (cond
       ((eqv? c #\{)
        (read-char port) (skip)
        (if (eqv? (peek-char port) #\}) (begin (read-char port) '())
            (let lp ((acc '()))
              (skip)
              (let ((key (read-string*)))
                (skip) (expect ":")
                (let ((v (value)))
                  (skip)
                  (case (read-char port)
                    ((#\,) (lp (cons (cons key v) acc)))
                    ((#\}) (reverse (cons (cons key v) acc)))
                    (else (error "bad JSON object"))))))))
       ((eqv? c #\[)
        (read-char port) (skip)
        (if (eqv? (peek-char port) #\]) (begin (read-char port) #())
            (let lp ((acc '()))
              (let ((v (value)))
                (skip)
                (case (read-char port)
                  ((#\,) (lp (cons v acc)))
                  ((#\]) (list->vector (reverse (cons v acc))))
                  (else (error "bad JSON array")))))))
       ((eqv? c #\") (read-string*))
       ((eqv? c #\t) (expect "true") #t)
       ((eqv? c #\f) (expect "false") #f)
       ((eqv? c #\n) (expect "null") 'null)
       (else
        (let lp ((acc '()))
          (let ((c (peek-char port)))
            (if (and (char? c) (or (char-numeric? c) (memv c '(#\- #\+ #\. #\e #\E))))
                (lp (cons (read-char port) acc))
                (or (string->number (list->string (reverse acc)))
                    (error "bad JSON value" (list->string (reverse acc)))))))))))
  (let ((v (value)))
    (skip)
    (unless (eof-object? (peek-char port)) (error "JSON: trailing text"))
    v))

(define (json-ref value . keys)
  (fold (lambda (key v)
          (cond ((string? key) (assoc-ref v key))
                ((integer? key) (vector-ref v key))))
        value keys))

;;;
;;; Prometheus text, checked line by line
;;;

(define (metric-lines text)
  (filter (lambda (l) (not (string-null? l))) (string-split text #\newline)))

(define sample-rx (make-regexp "^([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{(.*)\\})? (.+)$"))

(define (family-of name)
  ;; a histogram's or summary's samples belong to the family without suffix
  (let ((m (string-match "^(.*)_(bucket|sum|count)$" name)))
    (if m (match:substring m 1) name)))

(define (check-exposition text)
  ;; -> a list of problems, empty when TEXT is well formed
  (let lp ((lines (metric-lines text)) (help '()) (type '()) (problems '()))
    (if (null? lines)
        (reverse problems)
        (let ((line (car lines)))
          (cond
           ((string-prefix? "# HELP " line)
            (lp (cdr lines) (cons (cadr (string-tokenize (substring line 2))) help) type problems))
           ((string-prefix? "# TYPE " line)
            (let ((words (string-tokenize (substring line 2))))
              (lp (cdr lines) help (cons (cadr words) type)
                  (if (member (caddr words) '("counter" "gauge" "histogram" "summary"))
                      problems
                      (cons line problems)))))
           ((regexp-exec sample-rx line)
            => (lambda (m)
                 (let ((name (match:substring m 1))
                       (value (string->number (match:substring m 4))))
                   (lp (cdr lines) help type
                       (if (and value
                                (or (member name type) (member (family-of name) type))
                                (or (member name help) (member (family-of name) help)))
                           problems
                           (cons line problems))))))
           (else (lp (cdr lines) help type (cons line problems))))))))

(define (samples text name)
  ;; -> ((labels-string . value) ...) of the samples called NAME
  (filter-map (lambda (line)
                (let ((m (regexp-exec sample-rx line)))
                  (and m (string=? (match:substring m 1) name)
                       (cons (or (match:substring m 3) "") (string->number (match:substring m 4))))))
              (metric-lines text)))

;;;
;;; The tests
;;;

(define-syntax-rule (with-observed-server (server args ...) body ...)
  (call-guarded
   (lambda ()
     (let ((server (start-observed args ...)))
       (dynamic-wind
         (lambda () #t)
         (lambda () body ...)
         (lambda () (stop-server server)))))))

(test-group "the pages of a server under accounting"
  (with-observed-server (server)
    (for-each (lambda (i) (code-of server "/")) (iota 20))
    ;; three answers over HTTP/2: counted in the route table, and apart
    (for-each (lambda (i)
                (system* "curl" "-s" "-o" "/dev/null" "--max-time" "10"
                         "--http2-prior-knowledge"
                         (format #f "http://127.0.0.1:~a/" (server-port server))))
              (iota 3))
    (code-of server "/missing")
    (code-of server "/other")
    (let ((code headers body (get server "/_plucky/status")))
      (test-equal "status: 200" 200 code)
      (test-equal "status: HTML" 'text/html (car (assq-ref headers 'content-type)))
      (test-assert "status: not cached" (assq-ref headers 'cache-control))
      (test-assert "status: reloads itself" (string-contains body "http-equiv=\"refresh\""))
      (test-assert "status: names the worker"
        (string-contains body (format #f "worker PID ~a" (server-pid server))))
      (test-assert "status: charts with data"
        (string-match "<path class=\"series\"[^>]* d=\"M[0-9.]+,[0-9.]+L" body))
      (test-assert "status: the phase bars"
        (string-contains body "class=\"bar\""))
      (test-assert "status: the route table lists /" (string-contains body "<td class=\"l\">/</td>"))
      (test-assert "status: the answers over HTTP/2 counted"
        (string-contains body "3 answers over HTTP/2"))
      (test-assert "status: 404s as (not found)" (string-contains body "(not found)"))
      (test-assert "status: no external resource"
        (not (string-match "(src|href)=\"(https?:)?//" body)))
      (test-assert "status: no waits shown when no request waited"
        (not (or (string-contains body "Where requests wait")
                 (string-contains body "<th>suspended</th>")))))
    (test-assert "?refresh=0 stops the reloading"
      (not (string-contains (body-of server "/_plucky/status?refresh=0") "http-equiv")))
    (test-equal "/_plucky/ is the status page too" 200 (code-of server "/_plucky/"))
    (test-equal "unknown /_plucky/ page" 404 (code-of server "/_plucky/nothing"))

    (let ((code headers text (get server "/_plucky/metrics")))
      (test-equal "metrics: 200" 200 code)
      (test-equal "metrics: text/plain version 0.0.4" "0.0.4"
        (assq-ref (cdr (assq-ref headers 'content-type)) 'version))
      (test-equal "metrics: well formed" '() (check-exposition text))
      (test-equal "metrics: 23 requests to /, three of them over HTTP/2" '(23)
        (filter-map (lambda (s) (and (string-contains (car s) "route=\"/\"")
                                     (string-contains (car s) "code=\"2xx\"")
                                     (cdr s)))
                    (samples text "plucky_requests_total")))
      (let ((buckets (filter-map (lambda (s) (and (string-contains (car s) "route=\"/\"") (cdr s)))
                                 (samples text "plucky_request_duration_seconds_bucket")))
            (count (filter-map (lambda (s) (and (string-contains (car s) "route=\"/\"") (cdr s)))
                               (samples text "plucky_request_duration_seconds_count"))))
        (test-assert "metrics: buckets are cumulative"
          (and (pair? buckets) (every <= buckets (cdr buckets))))
        (test-equal "metrics: +Inf bucket = count" count (list (last buckets))))
      (test-assert "metrics: every sample says its worker"
        (every (lambda (s) (string-contains (car s) (format #f "worker=\"~a\"" (server-pid server))))
               (samples text "plucky_requests_total"))))

    (let* ((code headers text (get server "/_plucky/status.json"))
           (json (read-json (open-input-string text)))
           (root (find (lambda (r) (equal? (json-ref r "route") "/"))
                       (vector->list (json-ref json "routes")))))
      (test-equal "json: 200" 200 code)
      (test-equal "json: application/json" 'application/json (car (assq-ref headers 'content-type)))
      (test-equal "json: the worker" (server-pid server) (json-ref json "pid"))
      (test-equal "json: / answered 23 times, three over HTTP/2" 23 (and root (json-ref root "requests")))
      (test-assert "json: percentiles in order"
        (and root
             (let ((s (json-ref root "service_ns")))
               (<= (json-ref s "p50") (json-ref s "p90") (json-ref s "p99")
                   (json-ref s "p99.9") (json-ref s "max")))))
      (test-assert "json: phases"
        (and root (every (lambda (p) (json-ref root "phases_ns" p "count"))
                         '("read" "parse" "handler" "serialise" "write"))))
      (test-equal "json: no waits when no request waited" #f (and root (assoc "waits" root)))
      (test-assert "json: a series of requests per second"
        (> (fold + 0 (filter number? (vector->list (json-ref json "series" "requests")))) 20)))

    (code-of server "/collect")
    (let* ((json (read-json (open-input-string (body-of server "/_plucky/status.json"))))
           (minutes (vector->list (json-ref json "gc" "by_minute"))))
      (test-equal "json: collections by minute, five" 5 (length minutes))
      (test-equal "json: the current minute first"
        (* 60 (quotient (current-time) 60)) (json-ref (car minutes) "start"))
      (test-assert "json: the two collections in this minute or the last"
        (>= (+ (json-ref (car minutes) "collections") (json-ref (cadr minutes) "collections")) 2))
      (test-assert "json: p50 <= p99 <= max in each minute"
        (every (lambda (m) (<= (json-ref m "p50_cpu_ns") (json-ref m "p99_cpu_ns")
                               (json-ref m "max_cpu_ns")))
               minutes)))
    (test-assert "status: the collections per minute"
      (string-contains (body-of server "/_plucky/status") "<th class=\"l\">minute (UTC)</th>"))))

(define (route-json json name)
  (find (lambda (r) (equal? (json-ref r "route") name))
        (vector->list (json-ref json "routes"))))

(define (waited-on route kind label)
  ;; -> the entry of status.json's ROUTE for its waits on KIND and LABEL
  (and route (json-ref route "waits")
       (find (lambda (w) (and (equal? (json-ref w "kind") kind)
                              (equal? (json-ref w "label") label)))
             (vector->list (json-ref route "waits" "by")))))

(define (match-all pred samples)
  ;; -> true when SAMPLES is not empty and PRED holds for each
  (and (pair? samples) (every pred samples)))

(test-group "where a request waits: a timer, a labelled socket"
  (with-observed-server (server)
    (let ((waiter (connect-client (server-port server))))
      ;; /upstream sleeps 30 ms, then waits on the pipe until /poke
      (client-send! waiter (request-text "/upstream"))
      (usleep 150000)
      (test-equal "another request is served meanwhile" "poked" (body-of server "/poke"))
      (let ((response body (client-read-response waiter)))
        (test-equal "the waiting request answered after" "up" (and body (utf8->string body))))
      (client-close! waiter))
    (let* ((json (read-json (open-input-string (body-of server "/_plucky/status.json"))))
           (route (route-json json "/upstream"))
           (timer (waited-on route "timer" 'null))
           (socket (waited-on route "socket" "upstream test")))
      (test-equal "json: one request suspended" 1 (and route (json-ref route "waits" "requests")))
      (test-equal "json: and its answer counted" 1 (and route (json-ref route "requests")))
      (test-assert (format #f "json: a timer wait of at least 30 ms (~a ns)" (and timer (json-ref timer "max")))
        (and timer (>= (json-ref timer "mean") 30000000) (>= (json-ref timer "p50") 30000000)))
      (test-assert (format #f "json: the socket wait, labelled, till the poke (~a ns)"
                           (and socket (json-ref socket "mean")))
        (and socket (>= (json-ref socket "mean") 60000000)
             (equal? (json-ref socket "name") "upstream test (socket)")))
      (test-assert "json: waits and computing share the time from the first wait"
        (and timer socket
             (< 0.99 (+ (json-ref timer "share") (json-ref socket "share")
                        (json-ref route "waits" "computing_ns" "share"))
                1.01)
             (> (json-ref socket "share") (json-ref timer "share"))))
      (test-assert "json: all waited, at least both"
        (and route (>= (json-ref route "waits" "waited_ns" "max") 90000000)))
      (test-equal "json: its server time counted, as the requests that did not wait"
        1 (and route (json-ref route "service_ns" "count")))
      (test-assert (format #f "json: its server time holds its waits (~a ns)"
                           (and route (json-ref route "service_ns" "max")))
        (and route (>= (json-ref route "service_ns" "max")
                       (json-ref route "waits" "waited_ns" "max"))))
      (test-equal "json: a route that did not wait has no waits" #f
        (assoc "waits" (route-json json "/poke"))))
    (let ((page (body-of server "/_plucky/status?refresh=0")))
      (test-assert "status: the card of waits" (string-contains page "Where requests wait, by route"))
      (test-assert "status: a row for the timer"
        (string-contains page "<td class=\"l\">/upstream</td><td class=\"l\">timer</td>"))
      (test-assert "status: a row for the labelled socket"
        (string-contains page "<td class=\"l\">/upstream</td><td class=\"l\">upstream test (socket)</td>"))
      (test-assert "status: a row for computing"
        (string-contains page "<td class=\"l\">/upstream</td><td class=\"l\">computing, after the first wait</td>"))
      (test-assert "status: the timer's p50 in ms"
        (string-match "<td class=\"l\">timer</td><td>1</td><td>[0-9.]+ ms</td><td>[0-9.]+%</td><td>(3[0-9]|[4-9][0-9])\\.[0-9] ms</td>"
                      page))
      (test-assert "status: the bars name what was waited on"
        (and (string-contains page "id=\"chart-waits\"")
             (string-contains page ">upstream test (socket)</text>")))
      (test-assert "status: server times for a route whose requests all suspended"
        (string-match "<td class=\"l\">/upstream</td><td>1</td><td>1</td><td>0</td><td>0</td><td>0</td><td>[0-9.]+ ms</td>"
                      page))
      (test-assert "status: the routes table's suspended column"
        (string-match "<td>1 · [0-9.]+% waiting</td>" page)))
    (let ((text (body-of server "/_plucky/metrics")))
      (test-equal "metrics: well formed" '() (check-exposition text))
      (test-equal "metrics: the labelled socket wait, once" '(1)
        (filter-map (lambda (s) (and (string-contains (car s) "route=\"/upstream\"")
                                     (string-contains (car s) "kind=\"socket\"")
                                     (string-contains (car s) "label=\"upstream test\"")
                                     (cdr s)))
                    (samples text "plucky_route_wait_seconds_count")))
      (test-assert "metrics: the timer's wait, at least 0.03 s"
        (match-all (lambda (s) (>= (cdr s) 0.03))
                   (filter (lambda (s) (string-contains (car s) "kind=\"timer\""))
                           (samples text "plucky_route_wait_seconds_sum"))))
      (test-equal "metrics: computing, once" '(1)
        (map cdr (samples text "plucky_route_wait_computing_seconds_count"))))))

(test-group "a failing request in the inbox, fetched and replayed"
  (with-observed-server (server)
    (test-equal "the failure answers 500" 500
      (code-of server "/fail?x=1" #:method "POST" #:body "payload"))
    (let ((code headers text (get server "/_plucky/inbox/1.scm")))
      (test-equal "inbox entry as data" 200 code)
      (let ((failure (sexp->failure (read (open-input-string text)))))
        (test-equal "its code" 500 (failure-code failure))
        (test-equal "its route" "/fail" (failure-route failure))
        (test-equal "its method" 'POST (failure-method failure))
        (test-assert "its head" (string-prefix? "POST /fail?x=1 HTTP/1.1\r\n" (failure-head failure)))
        (test-equal "its body" "payload" (utf8->string (failure-body failure)))
        (test-assert "its message" (string-contains (failure-message failure) "fails on purpose"))
        (test-assert "a backtrace through the handler"
          (and (failure-backtrace failure)
               (string-contains (failure-backtrace failure) "fail-on-purpose")))))
    (test-assert "listed on the status page"
      (string-contains (body-of server "/_plucky/status") "/_plucky/inbox/1"))
    (test-assert "its own page shows the backtrace"
      (string-contains (body-of server "/_plucky/inbox/1") "fail-on-purpose"))
    (test-equal "an unknown entry" 404 (code-of server "/_plucky/inbox/99"))
    (let ((failure (fetch-failure (format #f "http://127.0.0.1:~a" (server-port server)) 1)))
      (test-equal "fetch-failure" "/fail?x=1" (failure-target failure))
      (test-assert "replay against the handler that failed raises again"
        (with-exception-handler (lambda (e) #t)
          (lambda () (replay failure app) #f)
          #:unwind? #t))
      (let ((response body (replay failure
                                   (lambda (request body)
                                     (values (build-response #:code 200)
                                             (string-append (uri-path (request-uri request)) " "
                                                            (utf8->string body)))))))
        (test-equal "replay against a mended handler" '(200 "/fail payload")
          (list (response-code response) (utf8->string body)))))))

(test-group "the wrapper's own catching (#:catch-errors?)"
  (with-observed-server (server #:mode 'full)
    (test-equal "the failure answers 500" 500 (code-of server "/fail"))
    (let ((code headers text (get server "/_plucky/inbox/1.scm")))
      (test-equal "filed" 200 code)
      (test-assert "with a backtrace through the handler"
        (let ((failure (sexp->failure (read (open-input-string text)))))
          (and (failure-backtrace failure)
               (string-contains (failure-backtrace failure) "fail-on-purpose")))))))

(test-group "with a token, the token is required"
  (with-observed-server (server #:token "s3cret")
    (let ((code headers body (get server "/_plucky/status")))
      (test-equal "without it: 401, even from loopback" 401 code)
      (test-assert "says how to authenticate" (assq-ref headers 'www-authenticate)))
    (test-equal "a wrong token" 401 (code-of server "/_plucky/metrics?token=nope"))
    (test-equal "?token=" 200 (code-of server "/_plucky/metrics?token=s3cret"))
    (test-equal "Authorization: Bearer" 200
      (code-of server "/_plucky/status.json" #:headers '("Authorization: Bearer s3cret")))
    (test-equal "other paths need nothing" 200 (code-of server "/"))
    (test-assert "the page's links carry the token"
      (string-contains (body-of server "/_plucky/status?token=s3cret") "metrics?token=s3cret"))))

(test-group "a client that is not on loopback"
  ;; Outside a loop the client's address is unknown, as for a foreign one.
  (let* ((observer (make-observer))
         (handler (observed-handler app observer))
         (request (build-request (string->uri "http://localhost/_plucky/status")
                                 #:headers '((host . ("localhost" . #f))))))
    (let ((response body (handler request #f)))
      (test-equal "403" 403 (response-code response)))
    (test-assert "loopback-address?"
      (and (loopback-address? "127.0.0.1") (loopback-address? "127.3.2.1")
           (loopback-address? "::1") (loopback-address? "::ffff:127.0.0.1")
           (not (loopback-address? "10.0.0.1")) (not (loopback-address? "::2"))
           (not (loopback-address? #f))))))

(test-group "state threads through the wrapper"
  (let* ((observer (make-observer))
         (handler (observed-handler (lambda (request body n)
                                      (values '((content-type . (text/plain))) "counted" (+ n 1)))
                                    observer)))
    (let ((response body n (handler (build-request (string->uri "http://localhost/count")) #f 41)))
      (test-equal "the app's state" 42 n))
    (let ((response body n (handler (build-request (string->uri "http://localhost/_plucky/status")) #f 41)))
      (test-equal "a status page leaves it alone" 41 n))))

(define (start-two-workers)
  ;; What `plucky serve APP --status --workers 2' runs: status-wrap's
  ;; handler and observer, given to run-server, which forks two workers
  ;; listening on the same port (SO_REUSEPORT: the kernel spreads the
  ;; connections between them).
  (start-child
   (lambda (report)
     (let ((handler observe ((@ (plucky dev cli) status-wrap) app #:workers 2)))
       ((@ (plucky server) run-server)
        handler #:host "127.0.0.1" #:port 0 #:workers 2 #:observer observe
        #:on-listen (lambda (sockets)
                      (report ((@ (plucky server) listener-port) (car sockets)))))))))

(define (with-two-workers proc)
  ;; -> what PROC returns, called with a two-worker server, stopped after
  (call-guarded
   (lambda ()
     (let ((server (start-two-workers)))
       (dynamic-wind
         (lambda () #t)
         (lambda () (proc server))
         (lambda () (stop-server server)))))))

(define answered
  ;; the answers the two-worker server has given this test so far
  0)

(define roots
  ;; the requests for / the two-worker test made
  0)

(define (ask server path)
  ;; -> the body of PATH, counted in `answered'
  (let ((body (body-of server path)))
    (set! answered (+ answered 1))
    body))

(define (settled-total server path total-of)
  ;; Ask for PATH until the total it shows counts every answer given
  ;; before it: the workers that did not answer share their figures
  ;; about once a second, so the first pages may lag.  TOTAL-OF: the
  ;; page's body -> the total it shows.  -> (values total expected), the
  ;; last page's total and the answers before it; they differ after 10 s
  (let ((deadline (+ (now-seconds) 10)))
    (let lp ()
      (let* ((expected answered)
             (total (total-of (ask server path))))
        (if (or (= total expected) (> (now-seconds) deadline))
            (values total expected)
            (begin (usleep 100000) (lp)))))))

(define (json-total body)
  (json-ref (read-json (open-input-string body)) "requests"))

(define (metrics-total body)
  (fold + 0 (map cdr (samples body "plucky_responses_total"))))

(test-group "two workers: the pages show the whole server"
  (with-two-workers
   (lambda (server)
     ;; a connection each: both workers get some (the kernel hands each
     ;; to whichever accepts first: on a busy machine, more may be needed)
     (for-each (lambda (i) (ask server (if (< i 39) "/" "/missing"))) (iota 40))
     (set! roots 39)
     (let ((deadline (+ (now-seconds) 10)))
       (let lp ()
         (let ((workers (json-ref (read-json (open-input-string
                                              (ask server "/_plucky/status.json")))
                                  "per_worker")))
           (when (and (< (vector-length workers) 2) (< (now-seconds) deadline))
             (for-each (lambda (i) (ask server "/")) (iota 20))
             (set! roots (+ roots 20))
             (usleep 100000)
             (lp)))))
     (let ((total expected (settled-total server "/_plucky/status.json" json-total)))
       (test-equal "status.json: every answer of both workers" expected total))
     (let ((total expected (settled-total server "/_plucky/metrics" metrics-total)))
       (test-equal "metrics: every answer of both workers" expected total))
     (let* ((json (read-json (open-input-string (ask server "/_plucky/status.json"))))
            (workers (vector->list (json-ref json "per_worker")))
            (root (find (lambda (r) (equal? (json-ref r "route") "/"))
                        (vector->list (json-ref json "routes")))))
       (test-equal "status.json: two workers" 2 (length workers))
       (test-assert "status.json: both answered some"
         (every (lambda (w) (> (json-ref w "requests") 0)) workers))
       (test-equal "status.json: both running" '("running" "running")
         (map (lambda (w) (json-ref w "state")) workers))
       (test-assert "status.json: each worker's recent collections"
         (every (lambda (w) (exact-integer? (json-ref w "gc_recent_cpu_ns" "count"))) workers))
       (test-equal "status.json: per worker adds up to the total"
         (json-ref json "requests")
         (fold + 0 (map (lambda (w) (json-ref w "requests")) workers)))
       (test-equal "status.json: route / of both" roots (and root (json-ref root "requests")))
       (test-equal "status.json: the 404 counted" 1 (json-ref json "responses" "4xx")))
     (let ((text (ask server "/_plucky/metrics")))
       (test-equal "metrics: well formed" '() (check-exposition text))
       (test-assert "metrics: labelled worker=\"all\""
         (every (lambda (s) (string-contains (car s) "worker=\"all\""))
                (samples text "plucky_responses_total")))
       (test-equal "metrics: a line per worker" 2
         (length (samples text "plucky_worker_responses_total"))))
     (let ((page (ask server "/_plucky/status")))
       (test-assert "status: says it adds up 2 workers"
         (string-contains page "all 2 worker processes added up"))
       (test-assert "status: a table of the workers" (string-contains page "<h2>Workers</h2>"))
       (test-assert "status: their collections" (string-contains page "<th>GC p99</th>"))))))

(test-group "two workers: the handlers' own phases, per route"
  (set! answered 0)
  (with-two-workers
   (lambda (server)
     ;; a connection each: both workers answer some
     (for-each (lambda (i) (ask server (if (even? i) "/phased" "/"))) (iota 40))
     (settled-total server "/_plucky/status.json" json-total)
     (let* ((json (read-json (open-input-string (ask server "/_plucky/status.json"))))
            (route (lambda (name)
                     (find (lambda (r) (equal? (json-ref r "route") name))
                           (vector->list (json-ref json "routes")))))
            (phased (route "/phased")))
       (test-equal "status.json: each phase of both workers' requests"
         '(20 20 20)
         (and phased
              (map (lambda (phase) (json-ref phased "app_phases_ns" phase "count"))
                   '("db" "render" "unmarked"))))
       (test-assert "status.json: per request, the phases within the handler's mean"
         (and phased
              (let ((shares (map (lambda (phase)
                                   (json-ref phased "app_phases_ns_per_request" phase))
                                 '("db" "render" "unmarked")))
                    (handler (json-ref phased "phases_ns" "handler" "mean")))
                (and (every number? shares)
                     (> (car shares) 0)
                     (<= (abs (- (fold + 0 shares) handler)) 3)))))
       (test-equal "status.json: a route without phases has none" #f
         (assoc "app_phases_ns" (route "/"))))
     (let ((page (ask server "/_plucky/status")))
       (test-assert "status: the table of the handlers' own phases"
         (string-contains page "The handlers' own phases, by route"))
       (test-assert "status: db and render rows of /phased"
         (and (string-match "<td class=\"l\">/phased</td><td class=\"l\">db</td>" page)
              (string-match "<td class=\"l\">/phased</td><td class=\"l\">render</td>" page)
              (string-match "<td class=\"l\">/phased</td><td class=\"l\">unmarked</td>" page)))
       (test-assert "status: the bars' legend names them"
         (and (string-contains page ">db</text>")
              (string-contains page ">handler, unmarked</text>"))))
     (let ((text (ask server "/_plucky/metrics")))
       (test-equal "metrics: well formed" '() (check-exposition text))
       (test-equal "metrics: db of /phased" '(20)
         (filter-map (lambda (s) (and (string-contains (car s) "route=\"/phased\"")
                                      (string-contains (car s) "phase=\"db\"")
                                      (cdr s)))
                     (samples text "plucky_route_app_phase_requests_total")))))))

(define (inbox-ids page)
  ;; -> the failure ids the status PAGE's error inbox links to
  (map (lambda (m) (match:substring m 1))
       (list-matches "/_plucky/inbox/([0-9.]+)" page)))

(define (worker-of id)
  (car (string-split id #\.)))

(test-group "two workers: the inbox holds every worker's failures"
  (with-two-workers
   (lambda (server)
     ;; a connection each: both workers fail some
     (for-each (lambda (i) (code-of server "/fail")) (iota 10))
     ;; the workers that did not answer share about once a second
     (let* ((deadline (+ (now-seconds) 10))
            (ids (let lp ()
                   (let ((ids (inbox-ids (body-of server "/_plucky/status"))))
                     (if (or (= (length ids) 10) (> (now-seconds) deadline))
                         ids
                         (begin (usleep 100000) (lp)))))))
       (test-equal "all ten failures listed" 10 (length ids))
       (test-equal "of both workers" 2
         (length (delete-duplicates (map worker-of ids))))
       (test-assert "each named PID.N"
         (every (lambda (id) (string-match "^[0-9]+\\.[0-9]+$" id)) ids))
       ;; whichever worker answers, each failure is found
       (test-equal "every one's page found" (map (const 200) ids)
         (map (lambda (id) (code-of server (string-append "/_plucky/inbox/" id)))
              ids))
       (test-assert "every one's data names its path"
         (every (lambda (id)
                  (string-contains (body-of server (string-append "/_plucky/inbox/" id ".scm"))
                                   "this request fails on purpose"))
                ids))))))

(test-end "observe/status")

;;; tests/observe/status.scm ends here
