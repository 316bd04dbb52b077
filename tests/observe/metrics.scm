;;; tests/observe/metrics.scm --- (plucky observe metrics): status.json's writer

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (ice-9 regex)
             (tests lib harness)
             (web request)
             (web uri)
             (plucky server hooks)
             (plucky observe accounting)
             (plucky observe metrics))

(test-runner-current (plucky-test-runner))
(test-begin "observe/metrics")

(define-syntax-rule (test-json name value text)
  (test-equal name text (json->string value)))

(test-group "json->string"
  ;; status->json-value's mapping, written by (plucky web json write)
  (test-json "an object of symbols" '((pid . 12) (note . "a \"b\"")) "{\"pid\":12,\"note\":\"a \\\"b\\\"\"}")
  (test-json "an empty alist is {}" '() "{}")
  (test-json "#f and #nil are null" '((a . #f) (b . #nil)) "{\"a\":null,\"b\":null}")
  (test-json "#t is true" '((ok . #t)) "{\"ok\":true}")
  (test-json "reals, shortest; not finite as null" (vector 0.5 1e23 (/ 1.0 0.0) (/ 0.0 0.0) 1/4)
             "[0.5,1.0e23,null,null,0.25]")
  (test-json "symbols as strings" #(running 4xx) "[\"running\",\"4xx\"]")
  (test-json "nested" '((series . ((requests . #(1 2)) (p50_ns . #(#f 3)))))
             "{\"series\":{\"requests\":[1,2],\"p50_ns\":[null,3]}}")
  (test-json "non-ASCII as UTF-8, controls escaped" "é\n\x01" "\"é\\n\\u0001\"")
  (test-assert "anything else as its written form"
    (string-prefix? "[\"#<procedure" (json->string (vector car))))
  (test-equal "write-json writes the same to a port" "{\"a\":[1,null]}"
    (call-with-output-string (lambda (port) (write-json '((a . #(1 #f))) port)))))

(define (request path)
  (build-request (string->uri (string-append "http://localhost" path))
                 #:headers '((host . ("localhost" . #f)))))

(define (sample-values text name . fragments)
  ;; -> the values of the samples NAME{…} of TEXT whose labels hold
  ;; every one of FRAGMENTS
  (filter-map
   (lambda (line)
     (let ((m (string-match "^([a-z_]+)\\{(.*)\\} (.+)$" line)))
       (and m (string=? (match:substring m 1) name)
            (every (lambda (f) (string-contains (match:substring m 2) f)) fragments)
            (string->number (match:substring m 3)))))
   (string-split text #\newline)))

(test-group "waits in the metrics and status.json"
  (call-guarded
   (lambda ()
     (let* ((obs (make-observer))
            (hooks (observer->hooks obs))
            (on-wait (observer-hooks-on-wait hooks)))
       ((observer-hooks-on-request hooks) (request "/plain") 200 1 1 1 1 #f)
       (let ((text (metrics-text obs)))
         (test-equal "no family of waits before any request waited" #f
           (string-contains text "plucky_route_wait")))
       (on-wait (request "/up") 200 '(((timer . #f) . 30000000) ((socket . "pg \"main\"") . 10000000))
                10000000 50000000)
       (on-wait (request "/up") 200 '(((socket . "pg \"main\"") . 50000000)) 0 50000000)
       (let ((text (metrics-text obs)))
         (test-assert "a histogram family" (string-contains text "# TYPE plucky_route_wait_seconds histogram"))
         (test-equal "the labelled socket: its count, the label escaped" '(2)
           (sample-values text "plucky_route_wait_seconds_count"
                          "route=\"/up\"" "kind=\"socket\"" "label=\"pg \\\"main\\\"\""))
         (test-equal "its sum in seconds" '(0.06)
           (sample-values text "plucky_route_wait_seconds_sum" "kind=\"socket\""))
         (test-equal "the timer: no label" '(1)
           (sample-values text "plucky_route_wait_seconds_count" "kind=\"timer\"" "label=\"\""))
         (test-equal "cumulative buckets: the timer in (16.8 ms, 67.1 ms]" '(0 1)
           (list (car (sample-values text "plucky_route_wait_seconds_bucket" "kind=\"timer\""
                                     "le=\"0.016777216\""))
                 (car (sample-values text "plucky_route_wait_seconds_bucket" "kind=\"timer\""
                                     "le=\"0.067108864\""))))
         (test-equal "computing, per route" '(2 0.01)
           (append (sample-values text "plucky_route_wait_computing_seconds_count" "route=\"/up\"")
                   (sample-values text "plucky_route_wait_computing_seconds_sum" "route=\"/up\"")))
         (test-equal "a route that did not wait: none" '()
           (sample-values text "plucky_route_wait_seconds_count" "route=\"/plain\"")))
       (let* ((json (status->json-value obs))
              (route (lambda (name)
                       (find (lambda (r) (equal? (assq-ref r 'route) name))
                             (vector->list (assq-ref json 'routes)))))
              (waits (assq-ref (route "/up") 'waits))
              (by (vector->list (assq-ref waits 'by))))
         (test-equal "json: requests that suspended" 2 (assq-ref waits 'requests))
         (test-equal "json: each kind and label, named" '((timer #f "timer") (socket "pg \"main\"" "pg \"main\" (socket)"))
           (map (lambda (w) (list (assq-ref w 'kind) (assq-ref w 'label) (assq-ref w 'name))) by))
         (test-equal "json: shares of the 100 ms from the first waits" '(0.3 0.6 0.1)
           (append (map (lambda (w) (assq-ref w 'share)) by)
                   (list (assq-ref (assq-ref waits 'computing_ns) 'share))))
         (test-equal "json: per request, over the requests that suspended" '(15000000 30000000)
           (map (lambda (w) (assq-ref w 'per_request_ns)) by))
         (test-equal "json: none for a route that did not wait" #f
           (assq 'waits (route "/plain")))
         (test-assert "json: writes" (string-contains (json->string json) "\"name\":\"pg \\\"main\\\" (socket)\"")))
       (observer-detach! obs)))))

(test-end "observe/metrics")
