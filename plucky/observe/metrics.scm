;;; (plucky observe metrics) --- the accounting as Prometheus text and JSON

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; What /_plucky/metrics and /_plucky/status.json answer, made from an
;;; observer (plucky observe accounting) when asked, never on the hot
;;; path.
;;;
;;; Prometheus text format (version 0.0.4): a HELP and a TYPE line per
;;; metric family, then its samples.  Histograms are exported with
;;; buckets at powers of two nanoseconds (1.024 µs, 4.096 µs, … 17.2 s,
;;; one per two octaves): those are boundaries of the accounting's own
;;; buckets, so the cumulative counts are exact, not interpolated.  Every
;;; sample carries a worker="PID" label: with several workers a scrape
;;; reaches one of them, and the label keeps their series apart.
;;;
;;; JSON: `status->json-value' builds the value as nested alists (objects)
;;; and vectors (arrays); `json->string' writes it with the encoder of
;;; (plucky web json).
;;;
;;; Code:

(define-module (plucky observe metrics)
  #:use-module (srfi srfi-1)
  #:use-module (ice-9 format)
  #:use-module (ice-9 match)
  #:use-module ((ice-9 textual-ports) #:select (put-string put-char))
  #:use-module ((rnrs bytevectors) #:select (utf8->string))
  #:use-module ((plucky web json) #:select (encode-json))
  #:use-module (plucky observe histogram)
  #:use-module (plucky observe accounting)
  #:use-module (plucky observe inbox)
  #:export (metrics-text
            status->json-value
            write-json
            json->string
            histogram-summary
            all-routes-histogram
            app-routes
            status-route?
            phase-names
            route-phase-histogram
            route-app-phase-shares
            wait-name
            route-wait-shares
            any-route-waited?))

(define phase-names '(read parse handler serialise write))

(define (route-phase-histogram route phase)
  "Return the histogram of PHASE (a symbol of `phase-names', or
'service or 'allocated) of ROUTE."
  (case phase
    ((read) (route-stats-read route))
    ((parse) (route-stats-parse route))
    ((handler) (route-stats-handler route))
    ((serialise) (route-stats-serialise route))
    ((write) (route-stats-write route))
    ((service) (route-stats-service route))
    ((allocated) (route-stats-allocated route))
    (else (error "no such phase" phase))))

(define (route-app-phase-shares route)
  "Return what each phase ROUTE's handler timed itself costs a request of
ROUTE on average, and what it left unmarked: an alist ((NAME . NS) …
(unmarked . NS)) whose values add up to the handler's mean, or '() when
the handler timed no phase.  A phase some requests skip (a cache hit
renders nothing) weighs for its share of the requests."
  (let ((phases (route-stats-app-phases route))
        (handler (route-stats-handler route)))
    (if (or (null? phases) (zero? (histogram-count handler)))
        '()
        (let* ((n (histogram-count handler))
               (shares (map (lambda (phase)
                              (cons (car phase) (/ (histogram-sum (cdr phase)) n 1.)))
                            phases))
               (marked (fold + 0 (map cdr shares))))
          (append shares
                  `((unmarked . ,(max 0 (- (histogram-mean handler) marked)))))))))

(define (status-route? route)
  "Return #t if ROUTE counts the requests for the status pages
themselves (/_plucky/…), which the figures of the app leave out."
  (string-prefix? "/_plucky" (route-stats-name route)))

(define (app-routes observer)
  "Return OBSERVER's routes but those of the status pages, busiest first."
  (remove status-route? (observer-all-routes observer)))

(define (all-routes-histogram observer phase)
  "Return a new histogram of PHASE merged over the routes of OBSERVER,
the status pages' routes (/_plucky/…) left out."
  (fold (lambda (route h) (histogram-merge! h (route-phase-histogram route phase)))
        (make-histogram)
        (app-routes observer)))

;;;
;;; Waits
;;;

(define (wait-name key)
  "Return how the status page names KEY, a (KIND . LABEL) of
`route-stats-waits': the label and the kind in parentheses when the
handler named the wait (\"upstream 127.0.0.1:8080 (socket)\"), else the
kind (\"timer\", \"thread pool\", …)."
  (let ((kind (case (car key)
                ((thread) "thread pool")
                (else (symbol->string (car key))))))
    (if (cdr key)
        (string-append (cdr key) " (" kind ")")
        kind)))

(define (route-wait-shares route)
  "Return the share of each thing the suspended requests of ROUTE waited
on, and of the computing their handler did after its first wait, in
their time from that first wait to their answer: an alist (((KIND .
LABEL) . FRACTION) … (computing . FRACTION)) whose fractions add up to
1, or '() when no request of ROUTE suspended (or none took any time)."
  (let* ((waits (route-stats-waits route))
         (computing (histogram-sum (route-stats-computing route)))
         (total (+ computing (histogram-sum (route-stats-waited route)))))
    (if (or (null? waits) (zero? total))
        '()
        (append (map (lambda (wait)
                       (cons (car wait) (/ (histogram-sum (cdr wait)) total 1.)))
                     waits)
                `((computing . ,(/ computing total 1.)))))))

(define (any-route-waited? routes)
  "Return true when a request of one of ROUTES (<route-stats>) suspended."
  (any (lambda (route) (> (route-stats-suspended route) 0)) routes))

;;;
;;; Prometheus
;;;

(define bucket-bounds
  ;; ns: 2^10, 2^12, … 2^34
  (map (lambda (e) (expt 2 e)) (iota 13 10 2)))

(define (write-label-value value port)
  ;; VALUE between quotes, with \\, \" and newlines escaped
  (string-for-each
   (lambda (c)
     (case c
       ((#\\) (put-string port "\\\\"))
       ((#\") (put-string port "\\\""))
       ((#\newline) (put-string port "\\n"))
       (else (put-char port c))))
   value))

(define (seconds ns)
  ;; exact ns -> a decimal number of seconds, as Prometheus reads it
  (number->string (exact->inexact (/ ns 1000000000))))

(define (family port name type help)
  (put-string port "# HELP ") (put-string port name) (put-char port #\space)
  (put-string port help) (put-string port "\n# TYPE ") (put-string port name)
  (put-char port #\space) (put-string port type) (put-char port #\newline))

(define (sample port name label-alist value)
  ;; NAME{label="value",…} VALUE, written piece by piece: a scrape makes
  ;; hundreds of lines, and a string port per piece would be megabytes.
  (put-string port name)
  (put-char port #\{)
  (let lp ((labels label-alist) (first? #t))
    (unless (null? labels)
      (unless first? (put-char port #\,))
      (put-string port (symbol->string (caar labels)))
      (put-string port "=\"")
      (write-label-value (cdar labels) port)
      (put-char port #\")
      (lp (cdr labels) #f)))
  (put-string port "} ")
  (put-string port (if (string? value) value (number->string value)))
  (put-char port #\newline))

(define (histogram-samples port name label-alist histogram value->text)
  ;; The _bucket, _sum and _count samples of one histogram.
  (for-each
   (lambda (bound)
     (sample port (string-append name "_bucket")
             (append label-alist `((le . ,(value->text bound))))
             (histogram-count-at-most histogram (- bound 1))))
   bucket-bounds)
  (sample port (string-append name "_bucket") (append label-alist '((le . "+Inf")))
          (histogram-count histogram))
  (sample port (string-append name "_sum") label-alist
          (value->text (histogram-sum histogram)))
  (sample port (string-append name "_count") label-alist (histogram-count histogram)))

(define class-names #("other" "1xx" "2xx" "3xx" "4xx" "5xx"))

(define (metrics-text observer)
  "Return OBSERVER's figures in the Prometheus text exposition format."
  (observer-advance! observer)
  (let* ((members (observer-members observer))
         ;; the figures of all workers added up are labelled worker="all"
         (worker `((worker . ,(if members "all" (number->string (getpid))))))
         (routes (observer-all-routes observer))
         (memory (observer-memory observer))
         (out (open-output-string)))
    (family out "plucky_worker_info" "gauge"
            "The worker(s) these figures are of: a PID, or all (label worker), and how many workers serve (label workers).")
    (sample out "plucky_worker_info"
            (append worker `((workers . ,(number->string (observer-workers observer)))))
            1)
    (family out "plucky_responses_total" "counter"
            "Answers given, by class of status code: exact, every request counted (the per-route figures are estimates from the requests timed).")
    (for-each (lambda (class)
                (sample out "plucky_responses_total"
                        (append worker `((code . ,(vector-ref class-names class))))
                        (observer-answered-by-class observer class)))
              (iota 6))
    (family out "plucky_response_bytes_total" "counter"
            "Bytes of the answers given, heads and bodies: exact.")
    (sample out "plucky_response_bytes_total" worker (observer-bytes observer))
    (when members
      (family out "plucky_worker_responses_total" "counter"
              "Answers given, per worker process (label worker: its PID; exited: 1 for a worker no longer running).")
      (for-each (lambda (member)
                  (sample out "plucky_worker_responses_total"
                          `((worker . ,(number->string (assq-ref member 'pid)))
                            (exited . ,(if (assq-ref member 'exited?) "1" "0")))
                          (assq-ref member 'requests)))
                members))
    (family out "plucky_start_time_seconds" "gauge"
            "When accounting started (seconds since the epoch).")
    (sample out "plucky_start_time_seconds" worker (observer-started observer))
    (family out "plucky_requests_total" "counter"
            "Requests answered, by route and class of status code: on a busy server an estimate, from one request in N, each timed request weighing for those answered since the last.")
    (for-each
     (lambda (route)
       (let ((codes (route-stats-codes route)))
         (for-each
          (lambda (class)
            (let ((n (vector-ref codes class)))
              (when (> n 0)
                (sample out "plucky_requests_total"
                        (append worker `((route . ,(route-stats-name route))
                                         (code . ,(vector-ref class-names class))))
                        n))))
          (iota 6))))
     routes)
    (family out "plucky_request_duration_seconds" "histogram"
            "Server time of a request: reading, parsing, handler and serialising (not writing), by route.")
    (for-each
     (lambda (route)
       (histogram-samples out "plucky_request_duration_seconds"
                          (append worker `((route . ,(route-stats-name route))))
                          (route-stats-service route) seconds))
     routes)
    (family out "plucky_request_phase_seconds" "histogram"
            "Time of one phase of a request (read, parse, handler, serialise; write per answer), all routes but /_plucky/.")
    (for-each
     (lambda (phase)
       (histogram-samples out "plucky_request_phase_seconds"
                          (append worker `((phase . ,(symbol->string phase))))
                          (all-routes-histogram observer phase) seconds))
     phase-names)
    (family out "plucky_route_phase_seconds_total" "counter"
            "Total time spent in each phase, by route: divide by the route's requests for the mean.")
    (for-each
     (lambda (route)
       (for-each
        (lambda (phase)
          (sample out "plucky_route_phase_seconds_total"
                  (append worker `((route . ,(route-stats-name route))
                                   (phase . ,(symbol->string phase))))
                  (seconds (histogram-sum (route-phase-histogram route phase)))))
        phase-names))
     routes)
    (let ((app-phases
           ;; ((labels . histogram) …) of every route's own phases
           (append-map
            (lambda (route)
              (let ((phases (route-stats-app-phases route)))
                (if (null? phases)
                    '()
                    (map (match-lambda
                           ((phase . h)
                            (cons (append worker `((route . ,(route-stats-name route))
                                                   (phase . ,(symbol->string phase))))
                                  h)))
                         (append phases `((unmarked . ,(route-stats-unmarked route))))))))
            routes)))
      (unless (null? app-phases)
        (family out "plucky_route_app_phase_seconds_total" "counter"
                "Total time the handler spent in each phase it timed itself (plucky web timing), by route; phase=\"unmarked\": the rest of its time in the requests that timed any.")
        (for-each (match-lambda
                    ((labels . h)
                     (sample out "plucky_route_app_phase_seconds_total" labels
                             (seconds (histogram-sum h)))))
                  app-phases)
        (family out "plucky_route_app_phase_requests_total" "counter"
                "Requests that had each phase of plucky_route_app_phase_seconds_total.")
        (for-each (match-lambda
                    ((labels . h)
                     (sample out "plucky_route_app_phase_requests_total" labels
                             (histogram-count h))))
                  app-phases)))
    (let ((waiting (filter (lambda (route) (> (route-stats-suspended route) 0)) routes)))
      (unless (null? waiting)
        (family out "plucky_route_wait_seconds" "histogram"
                "Time the requests whose handler suspended waited, by route and by what: kind (timer, socket, thread, event; other past 8 a route) and the label the handler gave the wait (\"\" for none); a request that waited several times on one thing counts their sum once.")
        (for-each
         (lambda (route)
           (for-each
            (match-lambda
              (((kind . label) . h)
               (histogram-samples out "plucky_route_wait_seconds"
                                  (append worker `((route . ,(route-stats-name route))
                                                   (kind . ,(symbol->string kind))
                                                   (label . ,(or label ""))))
                                  h seconds)))
            (route-stats-waits route)))
         waiting)
        (family out "plucky_route_wait_computing_seconds" "histogram"
                "Time the handler of a request that suspended ran after its first wait, by route (its count: the route's requests that suspended).")
        (for-each
         (lambda (route)
           (histogram-samples out "plucky_route_wait_computing_seconds"
                              (append worker `((route . ,(route-stats-name route))))
                              (route-stats-computing route) seconds))
         waiting)))
    (family out "plucky_request_allocated_bytes" "summary"
            "Bytes allocated by the handler and serialising, measured on one request in 16, by route.")
    (for-each
     (lambda (route)
       (let ((h (route-stats-allocated route))
             (l (append worker `((route . ,(route-stats-name route))))))
         (for-each (lambda (q)
                     (sample out "plucky_request_allocated_bytes"
                             (append l `((quantile . ,(number->string q))))
                             (histogram-quantile h q)))
                   '(0.5 0.9 0.99))
         (sample out "plucky_request_allocated_bytes_sum" l (histogram-sum h))
         (sample out "plucky_request_allocated_bytes_count" l (histogram-count h))))
     routes)
    (family out "plucky_connections_accepted_total" "counter" "Connections accepted.")
    (sample out "plucky_connections_accepted_total" worker (observer-accepted observer))
    (family out "plucky_connections_closed_total" "counter" "Connections closed.")
    (sample out "plucky_connections_closed_total" worker (observer-closed observer))
    (family out "plucky_accept_seconds" "histogram" "Time in accept4(2) and setting up a connection.")
    (histogram-samples out "plucky_accept_seconds" worker (observer-accept observer) seconds)
    (family out "plucky_close_seconds" "histogram" "Time in close(2).")
    (histogram-samples out "plucky_close_seconds" worker (observer-close observer) seconds)
    (family out "plucky_gc_collections_total" "counter" "Garbage collections in this worker.")
    (sample out "plucky_gc_collections_total" worker (observer-gc-count observer))
    (family out "plucky_gc_pause_seconds" "histogram"
            "GC CPU time per collection (gc-stats gc-time-taken; CPU time of all marker threads).")
    (histogram-samples out "plucky_gc_pause_seconds" worker (observer-gc-pause observer) seconds)
    (family out "plucky_heap_bytes" "gauge" "Size of the GC heap.")
    (sample out "plucky_heap_bytes" worker (assq-ref memory 'heap-size))
    (family out "plucky_heap_free_bytes" "gauge" "Free bytes in the GC heap.")
    (sample out "plucky_heap_free_bytes" worker (assq-ref memory 'heap-free-size))
    (family out "plucky_allocated_bytes_total" "counter" "Bytes allocated since the worker started.")
    (sample out "plucky_allocated_bytes_total" worker (assq-ref memory 'heap-total-allocated))
    (when (assq-ref memory 'rss)
      (family out "plucky_resident_bytes" "gauge" "Resident set size of this worker.")
      (sample out "plucky_resident_bytes" worker (assq-ref memory 'rss)))
    (family out "plucky_failures_total" "counter" "Requests answered 5xx (filed in the error inbox): exact.")
    (sample out "plucky_failures_total" worker (observer-answered-by-class observer 5))
    (get-output-string out)))

;;;
;;; JSON
;;;

(define (histogram-summary h)
  "Return an alist summarising histogram H: count, mean, p50, p90, p99,
p99.9 and max (exact integers, in H's unit)."
  `((count . ,(histogram-count h))
    (mean . ,(round (histogram-mean h)))
    (p50 . ,(histogram-quantile h 0.5))
    (p90 . ,(histogram-quantile h 0.9))
    (p99 . ,(histogram-quantile h 0.99))
    (p99.9 . ,(histogram-quantile h 0.999))
    (max . ,(histogram-max h))))

(define (app-phases-json route)
  ;; The phases ROUTE's handler timed itself, if any: each phase's
  ;; figures over the requests that had it, and its mean share of a
  ;; request of the route
  (let ((phases (route-stats-app-phases route)))
    (if (null? phases)
        '()
        `((app_phases_ns
           . ,(map (match-lambda
                     ((phase . h) (cons phase (histogram-summary h))))
                   (append phases `((unmarked . ,(route-stats-unmarked route))))))
          (app_phases_ns_per_request
           . ,(map (match-lambda ((phase . ns) (cons phase (round ns))))
                   (route-app-phase-shares route)))))))

(define (waits-json route)
  ;; Where the suspended requests of ROUTE waited, if any did: all
  ;; their waits, each thing waited on, and the computing after the
  ;; first wait; each with its share of their time from the first wait
  (let ((n (route-stats-suspended route)))
    (if (zero? n)
        '()
        (let ((shares (route-wait-shares route)))
          `((waits
             . ((requests . ,n)
                (waited_ns . ,(histogram-summary (route-stats-waited route)))
                (computing_ns
                 . ,(append (histogram-summary (route-stats-computing route))
                            `((share . ,(or (assq-ref shares 'computing) 0)))))
                (by
                 . ,(list->vector
                     (map (match-lambda
                            ((key . h)
                             `((kind . ,(car key))
                               (label . ,(cdr key))
                               (name . ,(wait-name key))
                               (share . ,(or (assoc-ref shares key) 0))
                               (per_request_ns . ,(round (/ (histogram-sum h) n)))
                               ,@(histogram-summary h))))
                          (route-stats-waits route)))))))))))

(define (status->json-value observer)
  "Return OBSERVER's figures as a JSON value (alists and vectors) for
/_plucky/status.json.  Times are in nanoseconds, sizes in bytes.  A
route some of whose requests suspended has `waits': where they waited."
  (observer-advance! observer)
  (let* ((series (observer-series observer))
         (now (series-now series))
         (length (series-seconds series))
         (seconds (iota length (- now length -1)))
         (column (lambda (vector) (list->vector (map (lambda (s) (vector-ref vector (modulo s length)))
                                                     seconds))))
         (memory (observer-memory observer))
         (members (observer-members observer)))
    `((pid . ,(getpid))
      (workers . ,(observer-workers observer))
      (note . ,(if members
                   "figures of all the workers added up, those of the others as of a second ago at most; the error inbox is the answering worker's (pid)"
                   "figures of the one worker"))
      ,@(if members
            `((per_worker
               . ,(list->vector
                   (map (lambda (member)
                          `((pid . ,(assq-ref member 'pid))
                            (requests . ,(assq-ref member 'requests))
                            (as_of . ,(assq-ref member 'time))
                            (rss . ,(assq-ref (assq-ref member 'memory) 'rss))
                            (gc_recent_cpu_ns . ,(or (assq-ref member 'gc-recent) '()))
                            (state . ,(if (assq-ref member 'exited?) "exited" "running"))))
                        members))))
            '())
      (started . ,(observer-started observer))
      (now . ,now)
      ;; exact: every answer of the loop, /_plucky/ pages included
      (requests . ,(observer-answered observer))
      (responses . ,(map (lambda (class)
                           (cons (vector-ref class-names class)
                                 (observer-answered-by-class observer class)))
                         (iota 6)))
      (bytes . ,(observer-bytes observer))
      ;; the routes' requests added up: an estimate on a busy server
      (requests_in_routes . ,(observer-requests observer))
      (sampling_one_in . ,(observer-sampling observer))
      (routes
       . ,(list->vector
           (map (lambda (route)
                  (let ((codes (route-stats-codes route)))
                    `((route . ,(route-stats-name route))
                      (requests . ,(route-stats-requests route))
                      (codes . ,(filter-map (lambda (class)
                                              (and (> (vector-ref codes class) 0)
                                                   (cons (vector-ref class-names class)
                                                         (vector-ref codes class))))
                                            (iota 6)))
                      (service_ns . ,(histogram-summary (route-stats-service route)))
                      (phases_ns
                       . ,(map (lambda (phase)
                                 (cons phase (histogram-summary (route-phase-histogram route phase))))
                               phase-names))
                      (allocated_bytes . ,(histogram-summary (route-stats-allocated route)))
                      ,@(app-phases-json route)
                      ,@(waits-json route))))
                (observer-all-routes observer))))
      (connections
       . ((accepted . ,(observer-accepted observer))
          (closed . ,(observer-closed observer))
          (accept_ns . ,(histogram-summary (observer-accept observer)))
          (close_ns . ,(histogram-summary (observer-close observer)))))
      (write_ns_per_answer . ,(histogram-summary (observer-write observer)))
      (gc . ((collections . ,(observer-gc-count observer))
             (cpu_ns_per_collection . ,(histogram-summary (observer-gc-pause observer)))
             ;; newest first: the current minute, then the ones before
             (by_minute
              . ,(list->vector
                  (map (lambda (minute)
                         (let ((h (cdr minute)))
                           `((start . ,(car minute))
                             (collections . ,(histogram-count h))
                             (p50_cpu_ns . ,(histogram-quantile h 0.5))
                             (p99_cpu_ns . ,(histogram-quantile h 0.99))
                             (max_cpu_ns . ,(histogram-max h)))))
                       (observer-gc-minutes observer))))))
      (memory . ((heap_size . ,(assq-ref memory 'heap-size))
                 (heap_free . ,(assq-ref memory 'heap-free-size))
                 (allocated_total . ,(assq-ref memory 'heap-total-allocated))
                 (rss . ,(assq-ref memory 'rss))))
      (series
       . ((first_second . ,(- now length -1))
          (requests . ,(column (series-requests series)))
          (errors . ,(column (series-errors series)))
          (p50_ns . ,(list->vector (map (lambda (s) (series-latency-quantile series s 0.5)) seconds)))
          (p99_ns . ,(list->vector (map (lambda (s) (series-latency-quantile series s 0.99)) seconds)))
          (gc_ns . ,(column (series-gc-ns series)))
          (heap_size . ,(column (series-heap series)))
          (rss . ,(column (series-rss series)))))
      (inbox
       . ,(list->vector
           (map (lambda (f)
                  `((id . ,(failure-id f))
                    (time . ,(failure-time f))
                    (code . ,(failure-code f))
                    (route . ,(failure-route f))
                    (method . ,(if (failure-method f) (symbol->string (failure-method f)) #nil))
                    (target . ,(failure-target f))
                    (message . ,(failure-message f))))
                (inbox-failures (observer-inbox observer))))))))

(define (json-mapped value)
  ;; -> VALUE in the mapping of (plucky web json): #f, #nil and reals
  ;; that are not finite as null, symbols as strings, anything else that
  ;; has no JSON form as the string `write' gives
  (cond
   ((or (eq? value #nil) (eq? value #f)) 'null)
   ((or (eq? value #t) (string? value) (exact-integer? value)) value)
   ((symbol? value) (symbol->string value))
   ((real? value) (if (finite? value) value 'null))
   ((vector? value) (list->vector (map json-mapped (vector->list value))))
   ((or (null? value) (pair? value))
    (map (match-lambda ((key . v) (cons key (json-mapped v)))) value))
   (else (object->string value))))

(define (write-json value port)
  "Write VALUE as JSON to the textual PORT: an alist is an object (keys
symbols or strings), a vector an array, #t true, #f, #nil and reals
that are not finite null.  Written by (plucky web json write)."
  (put-string port (json->string value)))

(define (json->string value)
  "Return VALUE (see `write-json') as JSON text."
  (utf8->string (encode-json (json-mapped value))))

;;; (plucky observe metrics) ends here
