;;; tests/observe/accounting.scm --- (plucky observe accounting), fed by hand

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The observer hands the loop a record of hooks (plucky server hooks);
;;; these tests call them as the loop does, with figures chosen so that every sum and every route can
;;; be checked exactly.  tests/observe/status.scm runs it under a real
;;; loop.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (ice-9 exceptions)
             (tests lib harness)
             (web request)
             (web uri)
             (plucky server hooks)
             (plucky observe histogram)
             (plucky observe accounting)
             (plucky observe inbox))

(test-begin "observe/accounting")

(define (request path)
  (build-request (string->uri (string-append "http://localhost" path))
                 #:headers '((host . ("localhost" . #f)))))

;; The hooks of `observer->hooks', called by the name of the event:
;; (observe 'request …), (observe 'failure …), (observe 'write …),
;; (observe 'accept ns), (observe 'close ns), (observe 'wait …).
(define (observer-procedure obs)
  (let ((hooks (observer->hooks obs)))
    (lambda (event . arguments)
      (apply (case event
               ((request) (observer-hooks-on-request hooks))
               ((failure) (observer-hooks-on-failure hooks))
               ((write) (observer-hooks-on-write hooks))
               ((accept) (observer-hooks-on-accept hooks))
               ((close) (observer-hooks-on-close hooks))
               ((wait) (observer-hooks-on-wait hooks)))
             arguments))))

(define (route-count obs name)
  (let ((route (observer-route obs name)))
    (if route (route-stats-requests route) 0)))

;; What the loop does with the observer's tally (plucky server tally):
;; count every answer, accept and close; count the countdown down on each
;; request and time it, that is tell the observer, when it reaches 0 (or
;; the answer is a 5xx, told untimed); time only the writes of timed
;; answers.  -> for 'request, #t if timed
(define (as-the-loop obs)
  (let ((observe (observer-procedure obs))
        (tally (observer-tally obs))
        (batch 0))                      ; timed answers not yet written
    (define (bump! slot) (vector-set! tally slot (+ 1 (vector-ref tally slot))))
    (case-lambda
      ((event request code read parse handler serialise allocated)
       (let ((countdown (- (vector-ref tally 7) 1)))
         (vector-set! tally 7 countdown)
         (bump! (quotient code 100))
         (cond
          ((<= countdown 0)
           (observe event request code read parse handler serialise allocated)
           (set! batch (+ batch 1))
           #t)
          ((>= code 500)
           (observe event request code #f #f #f #f #f)
           #f)
          (else #f))))
      ((event request code waited computing service)
       ;; 'wait: a request whose handler suspended, answered; a 5xx is
       ;; told to #:on-request first, untimed
       (bump! (quotient code 100))
       (when (>= code 500)
         (observe 'request request code #f #f #f #f #f))
       (observe event request code waited computing service))
      ((event answers ns)
       ;; only writes that carry a timed answer are timed
       (when (> batch 0)
         (observe event batch ns)
         (set! batch 0)))
      ((event ns)
       (bump! (if (eq? event 'accept) 8 9))
       (observe event ns)))))

(test-group "phases per route"
  (call-guarded
   (lambda ()
     (let* ((obs (make-observer))
            (observe (observer-procedure obs)))
       (observe 'request (request "/") 200 1000 200 3000 400 #f)
       (observe 'request (request "/") 200 0 100 1000 200 512)
       (observe 'request (request "/b?x=1") 201 2000 300 5000 600 #f)
       (let ((root (observer-route obs "/")))
         (test-equal "requests of /" 2 (route-stats-requests root))
         (test-equal "read sum" 1000 (histogram-sum (route-stats-read root)))
         (test-equal "parse sum" 300 (histogram-sum (route-stats-parse root)))
         (test-equal "handler sum" 4000 (histogram-sum (route-stats-handler root)))
         (test-equal "serialise sum" 600 (histogram-sum (route-stats-serialise root)))
         (test-equal "service = read + parse + handler + serialise" (+ 4600 1300)
           (histogram-sum (route-stats-service root)))
         (test-equal "service max" 4600 (histogram-max (route-stats-service root)))
         (test-equal "allocation counted when sampled only" '(1 512)
           (list (histogram-count (route-stats-allocated root))
                 (histogram-sum (route-stats-allocated root))))
         (test-equal "2xx" 2 (vector-ref (route-stats-codes root) 2)))
       (test-equal "a query is not part of the route" 1 (route-count obs "/b"))
       (test-equal "total requests" 3 (observer-requests obs))
       (test-equal "busiest route first" '("/" "/b")
         (map route-stats-name (observer-all-routes obs)))))))

(define (app-phase-sums route)
  ;; -> ((name count sum) …) of ROUTE's own phases, unmarked last
  (map (lambda (phase)
         (list (car phase) (histogram-count (cdr phase)) (histogram-sum (cdr phase))))
       (append (route-stats-app-phases route)
               `((unmarked . ,(route-stats-unmarked route))))))

(test-group "the handler's own phases (take-handler-phases!)"
  (call-guarded
   (lambda ()
     (let* ((obs (make-observer))
            (observe (observer-procedure obs)))
       ;; what (plucky web timing) tells, then the loop's report
       (note-handler-phases! '((db . 1000) (render . 500)))
       (observe 'request (request "/item") 200 0 100 2000 100 #f)
       (note-handler-phases! '((db . 3000)))
       (observe 'request (request "/item") 200 0 100 4000 100 #f)
       (observe 'request (request "/plain") 200 0 100 4000 100 #f)
       (let ((item (observer-route obs "/item")))
         (test-equal "per phase: count and sum; unmarked: the handler's rest"
           '((db 2 4000) (render 1 500) (unmarked 2 1500))
           (app-phase-sums item))
         (test-equal "taken once: a route without phases has none" '()
           (route-stats-app-phases (observer-route obs "/plain"))))
       (test-equal "taken: nothing left" #f (take-handler-phases!))
       ;; phases of a request not accounted for do not reach the next
       (note-handler-phases! '((db . 7)))
       (note-request-body! (request "/plain") #f)
       (observe 'request (request "/plain") 200 0 100 4000 100 #f)
       (test-equal "dropped at the next request" '()
         (route-stats-app-phases (observer-route obs "/plain")))
       (observer-detach! obs)))))

(test-group "at most max-app-phases phases per route"
  (call-guarded
   (lambda ()
     (let* ((obs (make-observer))
            (observe (observer-procedure obs)))
       (note-handler-phases! (map (lambda (i) (cons (string->symbol (format #f "p~a" i)) 10))
                                  (iota (+ max-app-phases 2))))
       (observe 'request (request "/many") 200 0 100 4000 100 #f)
       (let ((phases (route-stats-app-phases (observer-route obs "/many"))))
         (test-equal "the first kept, then 'other" (+ max-app-phases 1) (length phases))
         (test-equal "'other holds the rest, a sample per phase folded in" '(2 20)
           (let ((h (assq-ref phases 'other)))
             (list (histogram-count h) (histogram-sum h)))))
       (observer-detach! obs)))))

(test-group "routes that are not paths"
  (call-guarded
   (lambda ()
     (let* ((obs (make-observer))
            (observe (observer-procedure obs)))
       (observe 'request (request "/no/such/page") 404 10 10 10 10 #f)
       (observe 'request (request "/another/missing") 404 10 10 10 10 #f)
       (observe 'request #f 400 10 10 0 0 #f)
       (declare-route! "/post/:id")
       (observe 'request (request "/post/17") 200 10 10 10 10 #f)
       (observe 'request (request "/post/18") 200 10 10 10 10 #f)
       (test-equal "404s share one route" 2 (route-count obs "(not found)"))
       (test-equal "refused requests" 1 (route-count obs "(refused)"))
       (test-equal "a declared name" 1 (route-count obs "/post/:id"))
       (test-equal "the name lasts one request" 1 (route-count obs "/post/18"))
       (test-equal "4xx of refused" 1 (vector-ref (route-stats-codes (observer-route obs "(refused)")) 4))))))

(test-group "#:route names requests"
  (let* ((obs (make-observer #:route (lambda (request)
                                       (let ((path (uri-path (request-uri request))))
                                         (and (string-prefix? "/user/" path) "/user/*")))))
         (observe (observer-procedure obs)))
    (observe 'request (request "/user/1") 200 1 1 1 1 #f)
    (observe 'request (request "/user/2") 200 1 1 1 1 #f)
    (observe 'request (request "/other") 200 1 1 1 1 #f)
    (test-equal "grouped" 2 (route-count obs "/user/*"))
    (test-equal "#f falls back to the path" 1 (route-count obs "/other"))))

(test-group "at most MAX-ROUTES routes"
  (let* ((obs (make-observer #:max-routes 3))
         (observe (observer-procedure obs)))
    (for-each (lambda (i)
                (observe 'request (request (format #f "/page/~a" i)) 200 1 1 1 1 #f))
              (iota 10))
    (test-equal "3 routes and (other)" 4 (length (observer-all-routes obs)))
    (test-equal "the rest under (other)" 7 (route-count obs "(other)"))
    (test-equal "every request counted" 10 (observer-requests obs))))

(test-group "writes, accepts, closes"
  (let* ((obs (make-observer))
         (observe (as-the-loop obs)))
    (observe 'accept 5000)
    (observe 'request (request "/a") 200 1 1 1 1 #f)
    (observe 'write 1 7000)
    (observe 'request (request "/b") 200 1 1 1 1 #f)
    (observe 'request (request "/b") 200 1 1 1 1 #f)
    (observe 'write 2 3000)
    (observe 'close 800)
    (test-equal "accepted" 1 (observer-accepted obs))
    (test-equal "accept time" 5000 (histogram-sum (observer-accept obs)))
    (test-equal "closed" 1 (observer-closed obs))
    (test-equal "write per answer, all routes" '(3 10000)
      (list (histogram-count (observer-write obs)) (histogram-sum (observer-write obs))))
    (test-equal "a write goes to the route answered last" 7000
      (histogram-sum (route-stats-write (observer-route obs "/a"))))
    (test-equal "a write of 2 answers is shared" '(2 3000)
      (let ((h (route-stats-write (observer-route obs "/b"))))
        (list (histogram-count h) (histogram-sum h))))))

(test-group "the time series"
  (call-guarded
   (lambda ()
     (let* ((obs (make-observer))
            (observe (observer-procedure obs))
            (series (observer-series obs)))
       (for-each (lambda (i) (observe 'request (request "/") (if (< i 3) 500 200) 10 10 1000 10 #f))
                 (iota 50))
       (let* ((now (series-now series))
              (sum (lambda (vector)
                     ;; this second and the one before: the loop above may
                     ;; have crossed a second
                     (+ (vector-ref vector (modulo now (series-seconds series)))
                        (vector-ref vector (modulo (- now 1) (series-seconds series)))))))
         (test-equal "requests per second" 50 (sum (series-requests series)))
         (test-equal "errors per second" 3 (sum (series-errors series)))
         (test-assert "memory sampled"
           (> (vector-ref (series-rss series) (modulo now (series-seconds series))) 0))
         (test-assert "p50 of the second within a factor 1.42 of 1030 ns"
           (let ((p50 (or (series-latency-quantile series now 0.5)
                          (series-latency-quantile series (- now 1) 0.5))))
             (and p50 (< (/ 1030 1.42) p50 (* 1030 1.42))))))))))

(test-group "garbage collections"
  (call-guarded
   (lambda ()
     (let ((obs (make-observer)))
       (gc) (gc) (gc)
       ;; after-gc-hook runs as an async, at the next safe point: a call
       ;; to a procedure is one.
       (identity #t)
       (test-assert "counted" (>= (observer-gc-count obs) 3))
       (test-equal "a pause per collection" (observer-gc-count obs)
         (histogram-count (observer-gc-pause obs)))
       (test-assert "pauses take time" (> (histogram-sum (observer-gc-pause obs)) 0))
       (let ((minutes (observer-gc-minutes obs)))
         (test-equal "a minute per minute of the series" 5 (length minutes))
         (test-equal "minutes newest first, a minute apart"
           (map (lambda (age) (* 60 (- (quotient (current-time) 60) age))) (iota 5))
           (map car minutes))
         ;; the collections may straddle a minute: this one and the last
         (test-equal "each collection in its minute" (observer-gc-count obs)
           (+ (histogram-count (cdr (first minutes)))
              (histogram-count (cdr (second minutes)))))
         (let ((recent (gc-recent-summary minutes)))
           (test-equal "recent: the count" (observer-gc-count obs) (assq-ref recent 'count))
           (test-assert "recent: p50 <= p99 <= max"
             (<= 0 (assq-ref recent 'p50) (assq-ref recent 'p99) (assq-ref recent 'max))))
         (test-equal "minutes long gone are not shown"
           0 (fold + 0 (map (lambda (minute) (histogram-count (cdr minute)))
                            (observer-gc-minutes obs (+ (current-time) 600))))))))))

(test-group "gc-recent-summary"
  (test-equal "no collection" '((count . 0) (p50 . #f) (p99 . #f) (max . #f))
    (gc-recent-summary '()))
  (let ((a (make-histogram)) (b (make-histogram)) (c (make-histogram)))
    (histogram-add! a 1000) (histogram-add! b 3000) (histogram-add! c 99999)
    ;; only the first two minutes count: C is older
    (test-equal "this minute and the last" '(2 3000)
      (let ((recent (gc-recent-summary (list (cons 120 a) (cons 60 b) (cons 0 c)))))
        (list (assq-ref recent 'count) (assq-ref recent 'max))))))

(test-group "failures go to the inbox"
  (let* ((obs (make-observer #:inbox-size 2))
         (observe (observer-procedure obs))
         (r (request "/broken")))
    (note-request-body! r #vu8(1 2 3))
    (observe 'request r 500 1 1 1 1 #f)
    (let ((f (car (inbox-failures (observer-inbox obs)))))
      (test-equal "route" "/broken" (failure-route f))
      (test-equal "code" 500 (failure-code f))
      (test-equal "body kept" #vu8(1 2 3) (failure-body f))
      (test-equal "the request itself" r (failure-request f))
      (test-assert "head" (string-prefix? "GET /broken HTTP/1.1\r\n" (failure-head f))))
    (observe 'request (request "/x") 503 1 1 1 1 #f)
    (observe 'request (request "/y") 500 1 1 1 1 #f)
    (test-equal "only the last INBOX-SIZE kept, newest first" '("/y" "/x")
      (map failure-route (inbox-failures (observer-inbox obs))))
    (test-equal "ids keep counting" '(3 2)
      (map failure-id (inbox-failures (observer-inbox obs))))
    (test-equal "a body noted for another request is not taken" #f
      (failure-body (car (inbox-failures (observer-inbox obs)))))))

(test-group "the loop's 'failure event brings the backtrace"
  (call-guarded
   (lambda ()
     (let* ((obs (make-observer))
            (observe (observer-procedure obs))
            (r (request "/raise"))
            (caught #f))
       ;; As the loop does: a handler that does not unwind takes the
       ;; stack where the exception was raised.
       (with-exception-handler
           (lambda (e) (set! caught (cons e (make-stack #t))) #f)
         (lambda () (raise-continuable (make-exception-with-message "broken on purpose")))
         #:unwind? #f)
       (observe 'failure r (car caught) (cdr caught))
       (observe 'request r 500 1 1 1 1 #f)
       (let ((f (car (inbox-failures (observer-inbox obs)))))
         (test-assert "a backtrace" (string? (failure-backtrace f)))
         (test-assert "the message" (string-contains (failure-message f) "broken on purpose")))
       ;; A failure without a stack (the loop took none) keeps its message.
       (observe 'failure r (car caught) #f)
       (observe 'request r 500 1 1 1 1 #f)
       (let ((f (car (inbox-failures (observer-inbox obs)))))
         (test-equal "no stack, no backtrace" #f (failure-backtrace f))
         (test-assert "but the message" (string-contains (failure-message f) "broken on purpose")))))))

(test-group "sampling keeps totals exact"
  (call-guarded
   (lambda ()
     (let* ((obs (make-observer #:sample-every 4))
            (observe (as-the-loop obs))
            (timed 0))
       (for-each (lambda (i)
                   (when (observe 'request (request "/") (if (= i 50) 500 200) 10 10 1000 10 #f)
                     (set! timed (+ timed 1)))
                   (observe 'write 1 2000))
                 ;; the first request is timed, then one in 4: the
                 ;; 97th is, and leaves none unaccounted for
                 (iota 97))
       (let ((root (observer-route obs "/")))
         (test-equal "the loop timed one in 4" 25 timed)
         (test-equal "every answer counted" 97 (observer-answered obs))
         (test-equal "every 2xx" 96 (observer-answered-by-class obs 2))
         (test-equal "the 5xx, exactly" 1 (observer-answered-by-class obs 5))
         (test-equal "weights add up to the answers" 97 (route-stats-requests root))
         (test-equal "the route's 5xx" 1 (vector-ref (route-stats-codes root) 5))
         (test-equal "times are weighed (the 5xx has none)" (* 96 1030)
           (histogram-sum (route-stats-service root)))
         (test-equal "writes are weighed" 96 (histogram-count (observer-write obs))))
       (test-equal "the failure is in the inbox" 1
         (length (inbox-failures (observer-inbox obs))))))))

(test-group "an untimed 5xx: counted and filed, no times"
  (let* ((obs (make-observer #:sample-every 1000))
         (observe (as-the-loop obs)))
    (for-each (lambda (i) (observe 'request (request "/x") (if (= i 5) 503 200) 10 10 10 10 #f))
              (iota 10))
    (test-equal "answers" 10 (observer-answered obs))
    (test-equal "the 5xx in the route" 1 (vector-ref (route-stats-codes (observer-route obs "/x")) 5))
    (test-equal "in the inbox" 1 (length (inbox-failures (observer-inbox obs))))
    (test-equal "only the first request timed" 1
      (histogram-count (route-stats-service (observer-route obs "/x"))))))

(define (wait-sums route)
  ;; -> (((kind . label) count sum) …) of where ROUTE's requests waited
  (map (lambda (wait)
         (list (car wait) (histogram-count (cdr wait)) (histogram-sum (cdr wait))))
       (route-stats-waits route)))

(define (count-and-sum h)
  (list (histogram-count h) (histogram-sum h)))

(test-group "where requests wait (#:on-wait)"
  (call-guarded
   (lambda ()
     (let* ((obs (make-observer))
            (observe (as-the-loop obs)))
       ;; as the loop tells it: (((kind . label) . ns) …), computing and
       ;; the server time from the handler's call
       (observe 'wait (request "/up") 200
                '(((timer . #f) . 30000000) ((socket . "upstream test") . 2000000)) 5000
                32010000)
       (observe 'wait (request "/up") 200
                '(((socket . "upstream test") . 4000000) ((thread . #f) . 1000)) 7000
                4020000)
       (observe 'wait (request "/up?q=1") 201 '() 100 300)
       (let ((up (observer-route obs "/up")))
         (test-equal "each (kind . label) apart, in the order first seen"
           '(((timer . #f) 1 30000000) ((socket . "upstream test") 2 6000000)
             ((thread . #f) 1 1000))
           (wait-sums up))
         (test-equal "suspended requests" 3 (route-stats-suspended up))
         (test-equal "all waited, per request" '(3 36001000)
           (count-and-sum (route-stats-waited up)))
         (test-equal "their p99: the longest request's waits, within 6.25%" #t
           (< (* 32000000 0.9375) (histogram-quantile (route-stats-waited up) 0.99)
              (* 32000000 1.0625)))
         (test-equal "computing after the first wait" '(3 12100)
           (count-and-sum (route-stats-computing up)))
         (test-equal "their answers counted under the route, exactly" '(3 3)
           (list (route-stats-requests up) (vector-ref (route-stats-codes up) 2)))
         (test-equal "their server time, each request" '(3 36030300)
           (count-and-sum (route-stats-service up)))
         (test-equal "no times of the server's phases" 0
           (histogram-count (route-stats-handler up))))
       (test-equal "a route that never waited has no waits" '()
         (begin
           (observe 'request (request "/plain") 200 1 1 1 1 #f)
           (route-stats-waits (observer-route obs "/plain"))))
       (test-equal "the next timed request does not weigh for them" 1
         (route-stats-requests (observer-route obs "/plain")))
       (observer-detach! obs)))))

(test-group "a waited 5xx: counted once, under the route #:on-request found"
  (call-guarded
   (lambda ()
     (let* ((obs (make-observer))
            (observe (observer-procedure obs)))
       ;; the loop tells #:on-request of a 5xx (untimed), then #:on-wait
       (declare-route! "/named")
       (observe 'request (request "/raise") 500 #f #f #f #f #f)
       (observe 'wait (request "/raise") 500 '(((timer . #f) . 10000000)) 10 10000100)
       (let ((named (observer-route obs "/named")))
         (test-equal "once, a 5xx" '(1 1)
           (list (route-stats-requests named) (vector-ref (route-stats-codes named) 5)))
         (test-equal "its wait" '(((timer . #f) 1 10000000)) (wait-sums named)))
       (test-equal "no route of its path" #f (observer-route obs "/raise"))
       (observer-detach! obs)))))

(test-group "waits kept apart: at most max-waits a route, labels cut"
  (call-guarded
   (lambda ()
     (let* ((obs (make-observer))
            (observe (observer-procedure obs))
            (long (make-string 100 #\u)))
       (observe 'wait (request "/many") 200
                (map (lambda (i) (cons (cons 'socket (format #f "db ~a" i)) 10))
                     (iota (+ max-waits 2)))
                0 100)
       (let ((waits (route-stats-waits (observer-route obs "/many"))))
         (test-equal "the first kept, then (other)" (+ max-waits 1) (length waits))
         (test-equal "(other) holds the rest, their ns" '(2 20)
           (count-and-sum (assoc-ref waits '(other . #f)))))
       (observe 'wait (request "/long") 200 `(((socket . ,long) . 5)) 0 5)
       (observe 'wait (request "/long") 200 `(((socket . ,(string-copy long)) . 7)) 0 7)
       (observe 'wait (request "/long") 200
                `(((socket . ,(string-append (make-string 99 #\u) "v")) . 9)) 0 9)
       (let ((waits (route-stats-waits (observer-route obs "/long"))))
         (test-equal "a long label cut to max-wait-label-length, marked"
           (string-append (make-string (- max-wait-label-length 1) #\u) "…")
           (cdar (car waits)))
         (test-equal "labels alike in their first characters share it" '((3 21))
           (map (lambda (wait) (count-and-sum (cdr wait))) waits)))
       (observer-detach! obs)))))

(test-group "waits allocate nothing once a route has seen them"
  (call-guarded
   (lambda ()
     (let* ((obs (make-observer))
            (on-wait (observer-hooks-on-wait (observer->hooks obs)))
            (r (request "/up"))
            (waited '(((timer . #f) . 30000000) ((socket . "upstream test") . 2000000)))
            (long `(((socket . ,(make-string 100 #\u)) . 5))))
       (on-wait r 200 waited 5000 32005000)
       (on-wait r 200 long 5000 5005)
       (let ((allocated
              (lambda (on-wait)
                ;; -> bytes allocated by 2000 calls of ON-WAIT
                (let ((before (assq-ref (gc-stats) 'heap-total-allocated)))
                  (let lp ((i 0))
                    (when (< i 1000)
                      (on-wait r 200 waited 5000 32005000)
                      (on-wait r 200 long 5000 5005)
                      (lp (+ i 1))))
                  (- (assq-ref (gc-stats) 'heap-total-allocated) before)))))
         (allocated (lambda args #f))     ; warm up
         ;; this file is interpreted: its loop and calls allocate by
         ;; themselves; the hook adds nothing to that
         (let ((baseline (allocated (lambda (request code waited computing service) #f)))
               (hook (allocated on-wait)))
           (test-assert (format #f "~a bytes for 2000 requests, ~a without the hook" hook baseline)
             (< hook (+ baseline 4096)))))
       (observer-detach! obs)))))

(test-group "waits survive the snapshots shared between workers"
  (call-guarded
   (lambda ()
     (let* ((obs (make-observer #:workers 2))
            (observe (observer-procedure obs)))
       (observe 'wait (request "/up") 200
                '(((timer . #f) . 30000000) ((socket . "upstream test") . 2000000)) 5000
                32010000)
       (let* ((whole (observer-whole-server obs))
              (up (observer-route whole "/up")))
         (test-equal "each wait" '(((timer . #f) 1 30000000) ((socket . "upstream test") 1 2000000))
           (wait-sums up))
         (test-equal "all waited, computing, server time" '((1 32000000) (1 5000) (1 32010000))
           (list (count-and-sum (route-stats-waited up))
                 (count-and-sum (route-stats-computing up))
                 (count-and-sum (route-stats-service up)))))
       (observer-detach! obs)))))

(test-end "observe/accounting")

;;; tests/observe/accounting.scm ends here
