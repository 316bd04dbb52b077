;;; (plucky observe status) --- /_plucky/: the status page, metrics, JSON

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `observed-handler' wraps an app's handler.  How a request flows
;;; through the wrapper:
;;;
;;;   path under /_plucky/ -> allowed?  (a loopback client, or, with a
;;;        token, ?token=T or "Authorization: Bearer T" from anyone)
;;;        -> /_plucky/status       the HTML page, SVG charts drawn here
;;;           /_plucky/metrics      Prometheus text (plucky observe metrics)
;;;           /_plucky/status.json  the same figures as JSON
;;;           /_plucky/inbox/N      one failed request: head, backtrace
;;;           /_plucky/inbox/N.scm  the same as data, for `fetch-failure'
;;;   any other path -> the app's handler; its exceptions reach the
;;;        error inbox (plucky observe inbox) through the loop, which
;;;        tells the observer of each with its stack (#:on-failure).  With
;;;        #:catch-errors? the wrapper catches them itself instead, in an
;;;        exception handler that does not unwind, and re-raises them.
;;;
;;; The figures come from the observer (plucky observe accounting) that
;;; the loop calls; wire both with the same observer:
;;;
;;;   (define obs (make-observer #:workers 1))
;;;   (run-loop … (observed-handler handler obs) … #:observer (observer->hooks obs))
;;;
;;; With several workers, each keeps its own figures and shares them
;;; through files (`observer-whole-server'): the pages and metrics show
;;; the whole server, the sum of all the workers, and a table per worker.
;;;
;;; Code:

(define-module (plucky observe status)
  #:use-module (srfi srfi-1)
  #:use-module (ice-9 format)
  #:use-module (ice-9 match)
  #:use-module (rnrs bytevectors)
  #:use-module (sxml simple)
  #:use-module (web request)
  #:use-module (web response)
  #:use-module (web uri)
  #:use-module ((plucky server) #:select (current-request-peer))
  #:use-module (plucky observe histogram)
  #:use-module (plucky observe accounting)
  #:use-module (plucky observe inbox)
  #:use-module (plucky observe metrics)
  #:use-module (plucky observe chart)
  #:export (observed-handler
            status-page
            loopback-address?
            status-path-prefix))

(define status-path-prefix "/_plucky/")

;;;
;;; The wrapper
;;;

(define-inlinable (status-path? path)
  ;; "/_plucky" or under "/_plucky/"; the second byte decides fast.
  (and (>= (string-length path) 8)
       (eqv? (string-ref path 1) #\_)
       (or (string=? path "/_plucky")
           (string-prefix? status-path-prefix path))))

(define* (observed-handler handler observer #:key (token #f) (catch-errors? #f))
  "Return a handler that serves /_plucky/… from OBSERVER's figures and
passes every other request to HANDLER (which may thread state, as under
Guile's `run-server').  The /_plucky/ pages go to loopback clients only
or, when TOKEN (a string) is given, to any client that presents it as
?token=TOKEN or \"Authorization: Bearer TOKEN\", and only to those.
The loop tells the observer of each exception a handler raises, with its
stack (#:on-failure), and the inbox keeps it; for a server that does not,
CATCH-ERRORS? makes this wrapper catch them itself, with their
backtrace, and re-raise them (the server still answers 500), at the
cost of an exception handler per request."
  (let ((inbox (observer-inbox observer)))
    (define (call request body state)
      (note-request-body! request body)
      (if catch-errors?
          (begin
            ;; The exception handler and the thunk are procedures made
            ;; once; what they need for this request is in variables,
            ;; and so are the handler's values: a thunk returning two
            ;; values through with-exception-handler's extent would have
            ;; them gathered in a fresh list on every request, and the
            ;; collections it costs (bench/instructions, mode full).
            (set! current-inbox inbox)
            (set! current-handler handler)
            (set! current-state state)
            (with-exception-handler note-and-raise call-current-handler)
            (let ((response current-response)
                  (body current-body)
                  (state current-state))
              (set! current-response #f)
              (set! current-body #f)
              (if (null? state)
                  (values response body)
                  (apply values response body state))))
          (if (null? state)
              (handler request body)
              (apply handler request body state))))
    (case-lambda
      ((request body)
       (let ((path (uri-path (request-uri request))))
         (if (status-path? path)
             (serve-status observer request path token '())
             (call request body '()))))
      ((request body . state)
       (let ((path (uri-path (request-uri request))))
         (if (status-path? path)
             (serve-status observer request path token state)
             (call request body state)))))))

;; The request being handled under `observed-handler': one loop runs per
;; process, on one thread.  The request and its body are those
;; `note-request-body!' noted.
(define current-inbox #f)
(define current-handler #f)
(define current-state '())          ; the state in, then the state out
(define current-response #f)        ; the handler's values
(define current-body #f)

(define (call-current-handler)
  ;; -> nothing useful: the handler's values are left in variables
  (let ((request (noted-request))
        (body (noted-body))
        (state current-state))
    (call-with-values
        (lambda ()
          (if (null? state)
              (current-handler request body)
              (apply current-handler request body state)))
      (lambda (response body . state)
        (set! current-response response)
        (set! current-body body)
        (set! current-state state)))))

(define (note-and-raise exception)
  (inbox-note-exception! current-inbox (noted-request) exception)
  (raise-exception exception))

;;;
;;; Who may look
;;;

(define (loopback-address? address)
  "Return #t if ADDRESS (a string, as `current-request-peer' gives) is a
loopback address: 127.0.0.0/8, ::1, or ::ffff:127.x.y.z."
  (and (string? address)
       (or (string-prefix? "127." address)
           (string=? address "::1")
           (string-prefix? "::ffff:127." address))))

(define (query-alist request)
  ;; "a=1&b=2" -> (("a" . "1") ("b" . "2")), decoded
  (let ((query (uri-query (request-uri request))))
    (if (not query)
        '()
        (filter-map (lambda (part)
                      (let ((i (string-index part #\=)))
                        (and (not (string-null? part))
                             (if i
                                 (cons (uri-decode (substring part 0 i))
                                       (uri-decode (substring part (+ i 1))))
                                 (cons (uri-decode part) "")))))
                    (string-split query #\&)))))

(define (bearer-token request)
  ;; The token of "Authorization: Bearer T", as Guile's parser leaves it
  ;; (a symbol), or as a raw string when plucky kept the value raw.
  (let ((value (assq-ref (request-headers request) 'authorization)))
    (cond
     ((and (pair? value) (eq? (car value) 'bearer)
           (pair? (cdr value)) (symbol? (cadr value)) (null? (cddr value)))
      (symbol->string (cadr value)))
     ((string? value)
      (let ((words (string-tokenize value)))
        (and (= 2 (length words))
             (string-ci=? (car words) "bearer")
             (cadr words))))
     (else #f))))

(define (allowed? request token)
  (if token
      (or (equal? (assoc-ref (query-alist request) "token") token)
          (equal? (bearer-token request) token))
      (loopback-address? (current-request-peer))))

;;;
;;; Dispatch
;;;

(define (respond code content-type body state)
  (apply values
         (build-response #:code code
                         #:headers `((content-type . ,content-type)
                                     (cache-control . (no-store))))
         body
         state))

(define (serve-status observer request path token state)
  (let ((query (query-alist request)))
    (cond
     ((not (allowed? request token))
      (if token
          (apply values
                 (build-response #:code 401
                                 #:headers '((content-type . (text/plain (charset . "utf-8")))
                                             (www-authenticate . ((bearer (realm . "plucky"))))))
                 "401 Unauthorized: give the status token as ?token=T or Authorization: Bearer T\n"
                 state)
          (respond 403 '(text/plain (charset . "utf-8"))
                   "403 Forbidden: the status pages are served to loopback clients only; start the server with a status token to serve them to others\n"
                   state)))
     ((member path '("/_plucky" "/_plucky/" "/_plucky/status"))
      (respond 200 '(text/html (charset . "utf-8"))
               (status-page (observer-whole-server observer)
                            #:refresh (let ((r (assoc-ref query "refresh")))
                                        (if r (or (string->number r) 0) 5))
                            #:token (assoc-ref query "token"))
               state))
     ((string=? path "/_plucky/status.json")
      (respond 200 '(application/json)
               (json->string (status->json-value (observer-whole-server observer)))
               state))
     ((string=? path "/_plucky/metrics")
      (respond 200 '(text/plain (version . "0.0.4") (charset . "utf-8"))
               (metrics-text (observer-whole-server observer))
               state))
     ((string-prefix? "/_plucky/inbox/" path)
      (let* ((name (substring path (string-length "/_plucky/inbox/")))
             (data? (string-suffix? ".scm" name))
             (name (if data? (string-drop-right name 4) name))
             (id (string->number name))
             ;; N: this worker's failure N; PID.N: worker PID's
             (failure (cond
                       ((and id (exact-integer? id))
                        (failure-ref id (observer-inbox observer)))
                       ((and id (string-index name #\.))
                        (failure-ref name (observer-inbox (observer-whole-server observer))))
                       (else #f))))
        (cond
         ((not failure)
          (respond 404 '(text/plain (charset . "utf-8"))
                   "No such failure in the inbox (it keeps the last few only).\n"
                   state))
         (data?
          (respond 200 '(text/plain (charset . "utf-8"))
                   (call-with-output-string
                     (lambda (port) (write (failure->sexp failure) port) (newline port)))
                   state))
         (else
          (respond 200 '(text/html (charset . "utf-8"))
                   (failure-page failure (assoc-ref query "token"))
                   state)))))
     (else
      (respond 404 '(text/plain (charset . "utf-8"))
               "Not found.  Under /_plucky/: status, status.json, metrics, inbox/N\n"
               state)))))

;;;
;;; The page
;;;

(define style "
body { font-family: system-ui, sans-serif; margin: 0; background: #f4f5f7; color: #1d1f23; }
header { background: #1d2b3a; color: #fff; padding: 14px 24px; }
header h1 { margin: 0; font-size: 20px; font-weight: 600; }
header p { margin: 4px 0 0; color: #c5d0dc; font-size: 13px; }
main { padding: 16px 24px 32px; max-width: 1400px; }
.note { background: #fff8e0; border-left: 4px solid #e6a700; padding: 8px 12px; font-size: 13px; }
.tiles { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: 12px; margin: 16px 0; }
.tile { background: #fff; border-radius: 8px; padding: 12px 14px; box-shadow: 0 1px 2px rgba(0,0,0,.08); }
.tile .v { font-size: 24px; font-weight: 600; }
.tile .k { font-size: 12px; color: #5b6470; text-transform: uppercase; letter-spacing: .04em; }
.tile .s { font-size: 12px; color: #5b6470; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(600px, 1fr)); gap: 16px; }
.card { background: #fff; border-radius: 8px; padding: 12px 14px; box-shadow: 0 1px 2px rgba(0,0,0,.08); overflow-x: auto; }
.card h2 { font-size: 15px; margin: 0 0 8px; }
.card p.hint { font-size: 12px; color: #5b6470; margin: 4px 0 0; }
svg.chart { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: 13px; width: 100%; }
th, td { padding: 4px 8px; border-bottom: 1px solid #eceef1; text-align: right; white-space: nowrap; }
th { color: #5b6470; font-weight: 600; }
td.l, th.l { text-align: left; }
tr.bad td { color: #b3261e; }
pre { background: #f6f8fa; padding: 10px; overflow-x: auto; font-size: 12px; }
footer { font-size: 12px; color: #5b6470; padding: 0 24px 24px; }
a { color: #0b63b6; }
")

(define phase-colours
  '((read "#56B4E9") (parse "#009E73") (handler "#0072B2") (serialise "#E69F00")
    (write "#CC79A7")))

(define (µs ns) (/ ns 1000.))

(define (duration seconds)
  (let* ((s (inexact->exact (floor seconds)))
         (d (quotient s 86400)) (h (quotient (remainder s 86400) 3600))
         (m (quotient (remainder s 3600) 60)) (sec (remainder s 60)))
    (cond ((> d 0) (format #f "~ad ~ah" d h))
          ((> h 0) (format #f "~ah ~2,'0dm" h m))
          ((> m 0) (format #f "~am ~2,'0ds" m sec))
          (else (format #f "~as" sec)))))

(define (time-string seconds)
  (strftime "%Y-%m-%d %H:%M:%S UTC" (gmtime (inexact->exact (floor seconds)))))

(define (tile key value sub)
  `(div (@ (class "tile")) (div (@ (class "k")) ,key) (div (@ (class "v")) ,value)
        (div (@ (class "s")) ,sub)))

(define (with-token href token)
  (if token
      (string-append href (if (string-index href #\?) "&" "?") "token=" (uri-encode token))
      href))

(define (series-points series vector seconds scale)
  ;; ((x . y) …) for the last SECONDS seconds, x relative to now
  (let* ((now (series-now series))
         (length (series-seconds series)))
    (map (lambda (age)
           (let ((v (vector-ref vector (modulo (- now age) length))))
             (cons (- age) (and (>= v 0) (scale v)))))
         (iota (min seconds length) (- (min seconds length) 1) -1))))

(define* (status-page observer #:key (refresh 5) (token #f))
  "Return the HTML text of the status page of OBSERVER.  REFRESH is the
number of seconds after which the page reloads itself (0: never); TOKEN,
if given, is carried in the page's links."
  (observer-advance! observer)
  (let* ((series (observer-series observer))
         (now (series-now series))
         ;; a minute at least, five at most: a young server's data
         ;; should not hug the right edge
         (window (min (series-seconds series) 300
                      (max 60 (+ 1 (- (current-time) (observer-started observer))))))
         (routes (observer-all-routes observer))
         (app (app-routes observer))
         ;; the routes with server times: timed requests, or requests
         ;; that suspended (their time from the handler's call)
         (timed (filter (lambda (route) (> (histogram-count (route-stats-service route)) 0))
                        app))
         ;; of those, the routes with phases: those whose requests all
         ;; suspended have none (see the card of waits)
         (phased (filter (lambda (route) (> (histogram-count (route-stats-handler route)) 0))
                         timed))
         (all-service (all-routes-histogram observer 'service))
         (all-allocated (all-routes-histogram observer 'allocated))
         (requests (histogram-count all-service))
         (memory (observer-memory observer))
         (members (observer-members observer))
         (uptime (- (current-time) (observer-started observer)))
         (recent (let ((rs (series-requests series)))
                   ;; the last 10 complete seconds
                   (/ (fold + 0 (map (lambda (age) (vector-ref rs (modulo (- now age) (series-seconds series))))
                                     (iota 10 1)))
                      10.)))
         (failures (observer-answered-by-class observer 5))
         (gc-h (observer-gc-pause observer))
         (workers (observer-workers observer))
         (pid (getpid)))
    (string-append
     "<!DOCTYPE html>\n"
     (call-with-output-string
       (lambda (port)
         (sxml->xml
          `(html
            (@ (lang "en"))
            (head
             (meta (@ (charset "utf-8")))
             ,@(if (and refresh (> refresh 0))
                   `((meta (@ (http-equiv "refresh") (content ,(number->string refresh)))))
                   '())
             (meta (@ (name "viewport") (content "width=device-width, initial-scale=1")))
             (title ,(if members
                         (format #f "plucky status — ~a workers" workers)
                         (format #f "plucky status — worker ~a" pid)))
             (style ,style))
            (body
             (header
              (h1 "plucky — how this server spends its time")
              (p ,(format #f "~a · accounting for ~a · ~a · ~a"
                          (if members
                              (format #f "~a workers, page by PID ~a" workers pid)
                              (format #f "worker PID ~a" pid))
                          (duration uptime) (time-string (current-time))
                          (if (and refresh (> refresh 0))
                              (format #f "reloads every ~a s (?refresh=0 stops)" refresh)
                              "does not reload"))))
             (main
              ,(if members
                   `(p (@ (class "note"))
                       ,(format #f "These are the figures of all ~a worker processes added up (and of workers that have exited since the server started): worker ~a's as of now, the others' as each wrote them, a second ago at most (see Workers below).  The error inbox holds every worker's failures, named PID.N.  The request count is exact; per-route figures and percentiles come from the requests timed: on a busy server one in N, each weighing for the N."
                                workers pid))
                   `(p (@ (class "note"))
                       "One worker process serves: these are all the server's figures.  Times are measured inside the server (from the read that brought a request to its answer being serialised, plus the write), so they leave out time queued in the kernel.  The request count is exact and includes these pages; the charts and phase table leave out the requests for these pages (/_plucky/…), the route table lists them.  On a busy server one request in N is timed, weighing for the N."))
              (div (@ (class "tiles"))
                   ,(tile "requests" (format-number (observer-answered observer))
                          (format #f "~a answered 5xx · one in ~a timed" failures
                                  (observer-sampling observer)))
                   ,(tile "requests / s" (format-number recent) "mean of the last 10 s")
                   ,(tile "p50 server time" (format-ns (histogram-quantile all-service 0.5))
                          (format #f "p99 ~a · p99.9 ~a"
                                  (format-ns (histogram-quantile all-service 0.99))
                                  (format-ns (histogram-quantile all-service 0.999))))
                   ,(tile "allocated / request"
                          (if (> (histogram-count all-allocated) 0)
                              (format-bytes (histogram-mean all-allocated))
                              "-")
                          (format #f "~a requests sampled" (histogram-count all-allocated)))
                   ,(tile "garbage collections" (format-number (observer-gc-count observer))
                          (if (> requests 0)
                              (format #f "~,2f per 1,000 requests · mean ~a"
                                      (/ (* 1000. (observer-gc-count observer)) requests)
                                      (format-ns (histogram-mean gc-h)))
                              (format #f "mean ~a" (format-ns (histogram-mean gc-h)))))
                   ,(tile "memory" (if (assq-ref memory 'rss) (format-bytes (assq-ref memory 'rss)) "-")
                          (format #f "resident · GC heap ~a"
                                  (format-bytes (assq-ref memory 'heap-size))))
                   ,(tile "connections" (format-number (observer-accepted observer))
                          (format #f "accepted · ~a closed · ~a answers over HTTP/2"
                                  (observer-closed observer)
                                  (format-number (observer-http2-answers observer)))))
              (div (@ (class "grid"))
                   (div (@ (class "card"))
                        (h2 "Throughput")
                        ,(line-chart
                          `(("requests/s" "#0072B2"
                             ,(series-points series (series-requests series) window identity))
                            ("5xx/s" "#D55E00"
                             ,(series-points series (series-errors series) window identity)))
                          #:id "chart-throughput"
                          #:x-label "seconds ago" #:y-label "per second" #:area? #t
                          #:x-min (- 1 window) #:x-max 0 #:y-min 0
                          #:x-tick-label (lambda (x) (format-number (- x)))))
                   (div (@ (class "card"))
                        (h2 "Latency over time")
                        ,(line-chart
                          (map (lambda (q colour name)
                                 (list name colour
                                       (map (lambda (age)
                                              (cons (- age)
                                                    (let ((v (series-latency-quantile series (- now age) q)))
                                                      (and v (µs v)))))
                                            (iota window (- window 1) -1))))
                               '(0.5 0.9 0.99) '("#009E73" "#E69F00" "#D55E00") '("p50" "p90" "p99"))
                          #:id "chart-latency-time"
                          #:y-log? #t #:x-label "seconds ago" #:y-label "server time µs"
                          #:x-min (- 1 window) #:x-max 0
                          #:x-tick-label (lambda (x) (format-number (- x))))
                        (p (@ (class "hint")) "Per second, from a histogram with two buckets per octave: within a factor of 1.4.")))
              (div (@ (class "grid"))
                   (div (@ (class "card"))
                        (h2 "Where a request's time goes, by route (mean µs per phase)")
                        (p (@ (class "hint")) "Each bar is one route, stretched to the full width so that the shares show whatever the route's total; the total is at its end.")
                        ,(call-with-values
                             (lambda () (phase-bars (take phased (min 12 (length phased)))))
                           (lambda (rows segments)
                             (stacked-bar-chart rows segments
                                                #:id "chart-phases" #:unit " µs" #:normalise? #t)))
                        (p (@ (class "hint")) "read: read(2) of the bytes that completed the head (0 for a pipelined request); write: write(2) per answer, shared among the answers of one write.  A handler that times its own phases (db, render…: plucky web timing) has its bar cut into them, at their mean per request of the route; \"handler, unmarked\" is the rest of its time."))
                   (div (@ (class "card"))
                        (h2 "Latency distribution (server time)")
                        ,(line-chart
                          (map (lambda (route colour)
                                 (list (route-stats-name route) colour
                                       (map (lambda (q)
                                              (cons q (µs (histogram-quantile (route-stats-service route) q))))
                                            '(0 0.25 0.5 0.75 0.9 0.95 0.99 0.995 0.999 0.9999))))
                               (take timed (min 5 (length timed)))
                               (take palette (min 5 (length timed))))
                          #:id "chart-percentiles"
                          #:x-scale 'percentile #:y-log? #t #:x-min 0 #:x-max 0.9999
                          #:x-ticks '(0 0.9 0.99 0.999 0.9999)
                          #:x-tick-label format-percentile
                          #:x-label "percentile" #:y-label "µs")))
              (div (@ (class "card"))
                   (h2 "Routes")
                   ,(routes-table routes))
              ,@(if (any-route-waited? app)
                    `((div (@ (class "card"))
                           (h2 "Where requests wait, by route")
                           ,(waits-card-body app)))
                    '())
              (div (@ (class "card"))
                   (h2 "Phases, all routes")
                   ,(phases-table observer))
              ,@(if (any (lambda (route) (pair? (route-stats-app-phases route))) app)
                    `((div (@ (class "card"))
                           (h2 "The handlers' own phases, by route")
                           ,(app-phases-table app)
                           (p (@ (class "hint")) "Phases a handler timed itself with (plucky web timing).  per request: the phase's time over all the route's requests timed (a phase some skip weighs for its share); the other columns: over the requests that had it.  unmarked: the handler's time its phases left out.")))
                    '())
              (div (@ (class "grid"))
                   (div (@ (class "card"))
                        (h2 "Garbage collection (CPU ms per second)")
                        ,(line-chart
                          `(("GC ms/s" "#CC79A7"
                             ,(series-points series (series-gc-ns series) window (lambda (ns) (/ ns 1e6)))))
                          #:id "chart-gc" #:area? #t
                          #:x-label "seconds ago" #:y-label "ms" #:x-min (- 1 window) #:x-max 0 #:y-min 0
                          #:x-tick-label (lambda (x) (format-number (- x))))
                        (p (@ (class "hint"))
                           ,(format #f "~a collections; CPU time per collection p50 ~a, p99 ~a, max ~a (gc-stats gc-time-taken: CPU time, marker threads included)."
                                    (observer-gc-count observer)
                                    (format-ns (histogram-quantile gc-h 0.5))
                                    (format-ns (histogram-quantile gc-h 0.99))
                                    (format-ns (histogram-max gc-h))))
                        ,(gc-minutes-table (observer-gc-minutes observer))
                        (p (@ (class "hint")) "Per minute, newest first: the collections and the CPU time of each (a collection stops the worker that runs it for about as long, more on a busy machine)."))
                   (div (@ (class "card"))
                        (h2 ,(if members
                                 (format #f "Memory of the ~a workers" workers)
                                 (format #f "Memory of worker ~a" pid)))
                        ,(line-chart
                          `(("resident" "#0072B2"
                             ,(series-points series (series-rss series) window (lambda (b) (/ b 1048576.))))
                            ("GC heap" "#E69F00"
                             ,(series-points series (series-heap series) window (lambda (b) (/ b 1048576.))))
                            ("heap free" "#009E73"
                             ,(series-points series (series-heap-free series) window (lambda (b) (/ b 1048576.)))))
                          #:id "chart-memory"
                          #:x-label "seconds ago" #:y-label "MiB" #:x-min (- 1 window) #:x-max 0 #:y-min 0
                          #:x-tick-label (lambda (x) (format-number (- x))))
                        (p (@ (class "hint")) "Sampled once a second while requests arrive.")))
              ,@(if members
                    `((div (@ (class "card"))
                           (h2 "Workers")
                           ,(workers-table members)
                           (p (@ (class "hint")) "Collections: this minute and the one before; GC p50/p99/max: the CPU time of each of them.")))
                    '())
              (div (@ (class "card"))
                   (h2 "Connections")
                   ,(connections-table observer))
              (div (@ (class "card"))
                   (h2 "Error inbox")
                   ,(inbox-table (inbox-failures (observer-inbox observer)) token)))
             (footer
              (p "Also as "
                 (a (@ (href ,(with-token "/_plucky/metrics" token))) "Prometheus metrics")
                 " and "
                 (a (@ (href ,(with-token "/_plucky/status.json" token))) "JSON")
                 ,(format #f ".  Percentiles come from log-bucketed histograms (8 buckets per octave: within 6.25%).  Bytes allocated are measured on one timed request in 16.  Accounting started ~a."
                          (time-string (observer-started observer)))))))
          port))))))

(define app-phase-colours
  ;; after the server's phases' colours (Paul Tol's muted scheme)
  '("#882255" "#DDCC77" "#44AA99" "#AA4499" "#999933" "#332288" "#117733" "#888888"
    "#661100"))

(define (phase-bars routes)
  ;; -> (values rows segments) for `stacked-bar-chart': each route's mean
  ;; µs per server phase, the handler's cut into the phases it timed
  ;; itself (all routes' phases, in the order first seen) and the rest
  (let* ((shares (map route-app-phase-shares routes))
         (app (delete-duplicates
               (append-map (lambda (shares)
                             (remove (lambda (name) (eq? name 'unmarked)) (map car shares)))
                           shares))))
    (values
     (map (lambda (route shares)
            (cons (route-stats-name route)
                  (append-map
                   (lambda (phase)
                     (let ((mean (µs (histogram-mean (route-phase-histogram route phase)))))
                       (if (and (eq? phase 'handler) (pair? app))
                           (append (map (lambda (name) (µs (or (assq-ref shares name) 0))) app)
                                   (list (if (null? shares) mean (µs (assq-ref shares 'unmarked)))))
                           (list mean))))
                   phase-names)))
          routes shares)
     (append-map
      (lambda (phase)
        (let ((colour (cadr (assq phase phase-colours))))
          (if (and (eq? phase 'handler) (pair? app))
              (append (map (lambda (name i)
                             (list (symbol->string name)
                                   (list-ref app-phase-colours
                                             (modulo i (length app-phase-colours)))))
                           app (iota (length app)))
                      `(("handler, unmarked" ,colour)))
              `((,(symbol->string phase) ,colour)))))
      phase-names))))

(define (app-phases-table routes)
  `(table
    (tr (th (@ (class "l")) "route") (th (@ (class "l")) "phase") (th "requests")
        (th "per request") (th "mean") (th "p50") (th "p90") (th "p99") (th "p99.9") (th "max"))
    ,@(append-map
       (lambda (route)
         (let ((shares (route-app-phase-shares route)))
           (map (match-lambda
                  ((phase . h)
                   `(tr (td (@ (class "l")) ,(route-stats-name route))
                        (td (@ (class "l")) ,(symbol->string phase))
                        (td ,(number->string (histogram-count h)))
                        (td ,(format-ns (or (assq-ref shares phase) 0)))
                        (td ,(format-ns (histogram-mean h)))
                        ,@(percentile-cells h format-ns)
                        (td ,(format-ns (histogram-max h))))))
                (if (null? shares)
                    '()
                    (append (route-stats-app-phases route)
                            `((unmarked . ,(route-stats-unmarked route))))))))
       routes)))

(define (percentile-cells h format)
  (map (lambda (q) `(td ,(format (histogram-quantile h q)))) '(0.5 0.9 0.99 0.999)))

(define (routes-table routes)
  ;; A column of the requests that suspended, when any did
  (define waited? (any-route-waited? routes))
  `(table
    (tr (th (@ (class "l")) "route") (th "requests") (th "2xx") (th "3xx") (th "4xx") (th "5xx")
        (th "mean") (th "p50") (th "p90") (th "p99") (th "p99.9") (th "max")
        (th "bytes/request")
        ,@(if waited? '((th "suspended")) '()))
    ,@(map (lambda (route)
             (let ((codes (route-stats-codes route))
                   (h (route-stats-service route)))
               `(tr (@ ,@(if (> (vector-ref codes 5) 0) '((class "bad")) '()))
                    (td (@ (class "l")) ,(route-stats-name route))
                    (td ,(number->string (route-stats-requests route)))
                    ,@(map (lambda (class) `(td ,(number->string (vector-ref codes class))))
                           '(2 3 4 5))
                    ,@(if (zero? (histogram-count h))
                          ;; none timed: untimed 5xx only
                          (make-list 6 '(td "-"))
                          `((td ,(format-ns (histogram-mean h)))
                            ,@(percentile-cells h format-ns)
                            (td ,(format-ns (histogram-max h)))))
                    (td ,(let ((b (route-stats-allocated-per-request route)))
                           (if b (format-bytes b) "-")))
                    ,@(if waited? `((td ,(suspended-cell route))) '()))))
           routes)))

(define (suspended-cell route)
  ;; "N · x% waiting": the requests that suspended, and the share of
  ;; their time from the first wait spent waiting
  (let ((n (route-stats-suspended route)))
    (if (zero? n)
        "-"
        (let ((computing (assq-ref (route-wait-shares route) 'computing)))
          (if computing
              (format #f "~a · ~a waiting" (format-number n) (percent (- 1 computing)))
              (format-number n))))))

(define (percent fraction)
  (format #f "~,1f%" (* 100. fraction)))

;;;
;;; Where requests wait
;;;

(define (waits-card-body routes)
  ;; -> SXML: a bar per route that waited, cut into what it waited on and
  ;; its computing, and a table of the same with percentiles
  (let ((routes (filter (lambda (route) (> (route-stats-suspended route) 0)) routes)))
    `(div
      (p (@ (class "hint")) "The requests whose handler suspended (sleep-ms, wait-readable, blocking, event-wait, channel-get…), each accounted for: the time from their first wait to their answer, cut into what they waited on (by kind and by the label the handler gave, as in (wait-readable fd #:label \"postgres\")) and what the handler computed meanwhile.  Each bar is stretched to the full width; its total, the mean per request, is at its end.")
      ,(call-with-values (lambda () (wait-bars (take routes (min 12 (length routes)))))
         (lambda (rows segments)
           (stacked-bar-chart rows segments #:id "chart-waits" #:unit " ms" #:normalise? #t
                              #:width 900)))
      ,(waits-table routes)
      (p (@ (class "hint")) "per request: over all the route's requests that suspended; p50, p99, max: over those that had the wait, a request's waits on one thing added up; share: of the time from the first wait to the answer.  The handler's time before its first wait, and reading and parsing, are not in these figures."))))

(define wait-colours
  ;; kinds first, in Paul Tol's muted scheme; computing in the handler's
  '("#882255" "#DDCC77" "#44AA99" "#AA4499" "#999933" "#332288" "#117733" "#888888"
    "#661100" "#CC6677"))

(define (wait-bars routes)
  ;; -> (values rows segments) for `stacked-bar-chart': per route, the
  ;; mean ms per suspended request of each wait (all routes' waits, in
  ;; the order first seen) and of its computing
  (let ((keys (delete-duplicates
               (append-map (lambda (route) (map car (route-stats-waits route))) routes))))
    (values
     (map (lambda (route)
            (let ((n (route-stats-suspended route))
                  (waits (route-stats-waits route)))
              (cons (route-stats-name route)
                    (append
                     (map (lambda (key)
                            (let ((h (assoc-ref waits key)))
                              (if h (/ (histogram-sum h) n 1e6) 0)))
                          keys)
                     (list (/ (histogram-sum (route-stats-computing route)) n 1e6))))))
          routes)
     (append (map (lambda (key i)
                    (list (wait-name key) (list-ref wait-colours (modulo i (length wait-colours)))))
                  keys (iota (length keys)))
             `(("computing" ,(cadr (assq 'handler phase-colours))))))))

(define (waits-table routes)
  `(table
    (tr (th (@ (class "l")) "route") (th (@ (class "l")) "waited on") (th "requests")
        (th "per request") (th "share") (th "p50") (th "p99") (th "max"))
    ,@(append-map
       (lambda (route)
         (let ((n (route-stats-suspended route))
               (shares (route-wait-shares route)))
           (map (match-lambda
                  ((key . h)
                   `(tr (td (@ (class "l")) ,(route-stats-name route))
                        (td (@ (class "l")) ,(if (eq? key 'computing)
                                                 "computing, after the first wait"
                                                 (wait-name key)))
                        (td ,(format-number (histogram-count h)))
                        (td ,(format-ns (/ (histogram-sum h) n)))
                        (td ,(let ((share (if (eq? key 'computing)
                                              (assq-ref shares 'computing)
                                              (assoc-ref shares key))))
                               (if share (percent share) "-")))
                        (td ,(format-ns (histogram-quantile h 0.5)))
                        (td ,(format-ns (histogram-quantile h 0.99)))
                        (td ,(format-ns (histogram-max h))))))
                (append (route-stats-waits route)
                        `((computing . ,(route-stats-computing route)))))))
       routes)))

(define (phases-table observer)
  (let* ((hs (map (lambda (phase) (cons phase (all-routes-histogram observer phase)))
                  (append phase-names '(service))))
         (total (fold (lambda (p sum) (if (memq (car p) phase-names)
                                          (+ sum (histogram-mean (cdr p)))
                                          sum))
                      0 hs)))
    `(table
      (tr (th (@ (class "l")) "phase") (th "count") (th "mean") (th "share")
          (th "p50") (th "p90") (th "p99") (th "p99.9") (th "max"))
      ,@(map (match-lambda
               ((phase . h)
                `(tr (td (@ (class "l")) ,(if (eq? phase 'service)
                                              "server time (read to serialise)"
                                              (symbol->string phase)))
                     (td ,(number->string (histogram-count h)))
                     (td ,(format-ns (histogram-mean h)))
                     (td ,(if (and (memq phase phase-names) (> total 0))
                              (format #f "~,1f%" (* 100. (/ (histogram-mean h) total)))
                              ""))
                     ,@(percentile-cells h format-ns)
                     (td ,(format-ns (histogram-max h))))))
             hs))))

(define (ns-cell ns)
  `(td ,(if ns (format-ns ns) "-")))

(define (workers-table members)
  `(table
    (tr (th (@ (class "l")) "worker PID") (th "requests") (th "resident") (th "GC heap")
        (th "collections, 2 min") (th "GC p50") (th "GC p99") (th "GC max")
        (th (@ (class "l")) "figures as of"))
    ,@(map (lambda (member)
             (let ((memory (assq-ref member 'memory))
                   (gc (or (assq-ref member 'gc-recent) '())))
               `(tr (td (@ (class "l")) ,(number->string (assq-ref member 'pid)))
                    (td ,(format-number (assq-ref member 'requests)))
                    (td ,(if (assq-ref memory 'rss) (format-bytes (assq-ref memory 'rss)) "-"))
                    (td ,(format-bytes (assq-ref memory 'heap-size)))
                    (td ,(format-number (or (assq-ref gc 'count) 0)))
                    ,(ns-cell (assq-ref gc 'p50))
                    ,(ns-cell (assq-ref gc 'p99))
                    ,(ns-cell (assq-ref gc 'max))
                    (td (@ (class "l"))
                        ,(if (assq-ref member 'exited?)
                             (format #f "~a (exited)" (time-string (assq-ref member 'time)))
                             (time-string (assq-ref member 'time)))))))
           members)))

(define (gc-minutes-table minutes)
  ;; MINUTES: (start . histogram), newest first, as `observer-gc-minutes'
  `(table
    (tr (th (@ (class "l")) "minute (UTC)") (th "collections")
        (th "p50") (th "p99") (th "max"))
    ,@(map (lambda (minute)
             (let* ((h (cdr minute))
                    (n (histogram-count h)))
               `(tr (td (@ (class "l")) ,(strftime "%H:%M" (gmtime (car minute))))
                    (td ,(format-number n))
                    ,(ns-cell (and (> n 0) (histogram-quantile h 0.5)))
                    ,(ns-cell (and (> n 0) (histogram-quantile h 0.99)))
                    ,(ns-cell (and (> n 0) (histogram-max h))))))
           minutes)))

(define (connections-table observer)
  `(table
    (tr (th (@ (class "l")) "event") (th "timed") (th "mean") (th "p50") (th "p90") (th "p99")
        (th "p99.9") (th "max"))
    ,@(map (match-lambda
             ((name h)
              `(tr (td (@ (class "l")) ,name)
                   (td ,(number->string (histogram-count h)))
                   (td ,(format-ns (histogram-mean h)))
                   ,@(percentile-cells h format-ns)
                   (td ,(format-ns (histogram-max h))))))
           `(("accept (accept4 and set-up)" ,(observer-accept observer))
             ("write(2), per answer" ,(observer-write observer))
             ("close(2)" ,(observer-close observer))))))

(define (inbox-table failures token)
  (if (null? failures)
      '(p "No failed request kept.  Requests answered 5xx land here: the request, its backtrace and the time.")
      `(table
        (tr (th (@ (class "l")) "#") (th (@ (class "l")) "time") (th "code")
            (th (@ (class "l")) "request") (th (@ (class "l")) "what happened"))
        ,@(map (lambda (f)
                 `(tr (td (@ (class "l"))
                          (a (@ (href ,(with-token (format #f "/_plucky/inbox/~a" (failure-id f)) token)))
                             ,(format #f "~a" (failure-id f))))
                      (td (@ (class "l")) ,(time-string (failure-time f)))
                      (td ,(number->string (failure-code f)))
                      (td (@ (class "l")) ,(format #f "~a ~a" (or (failure-method f) "-")
                                                   (failure-target f)))
                      (td (@ (class "l")) ,(let ((m (string-trim-both (failure-message f))))
                                             (if (> (string-length m) 120)
                                                 (string-append (substring m 0 119) "…")
                                                 m)))))
               failures))))

(define (failure-page failure token)
  (string-append
   "<!DOCTYPE html>\n"
   (call-with-output-string
     (lambda (port)
       (sxml->xml
        `(html (@ (lang "en"))
               (head (meta (@ (charset "utf-8")))
                     (title ,(format #f "plucky failure ~a" (failure-id failure)))
                     (style ,style))
               (body
                (header (h1 ,(format #f "Failure ~a: ~a ~a → ~a" (failure-id failure)
                                     (or (failure-method failure) "-") (failure-target failure)
                                     (failure-code failure)))
                        (p ,(format #f "~a · route ~a · worker ~a" (time-string (failure-time failure))
                                    (failure-route failure)
                                    (let ((id (failure-id failure)))
                                      (if (string? id)
                                          (car (string-split id #\.))
                                          (getpid))))))
                (main
                 (div (@ (class "card"))
                      (h2 "What happened")
                      (pre ,(failure-message failure)))
                 (div (@ (class "card"))
                      (h2 "Backtrace")
                      (pre ,(or (failure-backtrace failure) "(none taken)")))
                 (div (@ (class "card"))
                      (h2 "Request head")
                      (pre ,(failure-head failure)))
                 (div (@ (class "card"))
                      (h2 "Body")
                      (pre ,(let ((body (failure-body failure)))
                              (cond
                               ((not body) "(none)")
                               (else (format #f "~a bytes~%~a" (bytevector-length body)
                                             (bytevector->display-string body)))))))
                 (div (@ (class "card"))
                      (h2 "Replay it at a REPL")
                      (pre ,(format #f "(use-modules (plucky observe inbox))
;; in this server's process:
(replay ~a my-handler)
;; from another process:
(replay (fetch-failure \"http://HOST:PORT\" ~a~a) my-handler)"
                                    (failure-id failure) (failure-id failure)
                                    (if token " #:token \"…\"" ""))))
                 (p (a (@ (href ,(with-token "/_plucky/status" token))) "back to the status page")))))
        port)))))

(define (bytevector->display-string bv)
  ;; The body as text when it is printable UTF-8, else its first bytes in hex.
  (let ((text (false-if-exception (utf8->string bv))))
    (if (and text (string-every (lambda (c) (or (char>=? c #\space) (memv c '(#\newline #\return #\tab))))
                                text))
        text
        (string-join (map (lambda (b) (format #f "~2,'0x" b))
                          (bytevector->u8-list
                           (if (> (bytevector-length bv) 256)
                               (let ((cut (make-bytevector 256)))
                                 (bytevector-copy! bv 0 cut 0 256)
                                 cut)
                               bv)))
                     " "))))

;;; (plucky observe status) ends here
