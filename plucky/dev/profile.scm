;;; (plucky dev profile) --- `plucky profile': where a request's time goes

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `plucky profile APP.scm' answers the 2012 profile's questions for any
;;; app, in one command: microseconds per phase of a request, bytes
;;; allocated per request, collections per 1,000 requests, and which
;;; procedures the time goes to.  The app runs in this process, in the
;;; event loop (plucky dev serve), while wrk, in a process of its
;;; own, loads it over keep-alive connections.  Two passes, each of N
;;; requests, after which the loop stops by itself:
;;;
;;;   1. accounting only: the loop's per-phase timers and the observer
;;;      (plucky observe accounting), the process's CPU time, and the
;;;      collector's counters (gc-stats) before and after -> the phase
;;;      table, bytes per request, GCs per 1,000 requests
;;;   2. the same load under statprof (or, with --gc, gcprof: samples
;;;      taken where collections happen) -> the flat profile
;;;
;;; The passes are apart because sampling costs time and allocates: the
;;; phase table is measured without a profiler running.
;;;
;;; wrk is started (by fork and exec) before the profiler, which starts a
;;; thread for signal delivery: forking after it would fork a process with
;;; threads.  wrk is stopped by its PID once the loop has served N
;;; requests (SIGINT, which makes it print its report and exit).
;;;
;;; Code:

(define-module (plucky dev profile)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-11)
  #:use-module (ice-9 format)
  #:use-module (ice-9 regex)
  #:use-module ((system vm program) #:select (program? program-code primitive-code?))
  #:use-module (statprof)
  #:use-module (plucky server)
  #:use-module (plucky observe histogram)
  #:use-module (plucky observe accounting)
  #:use-module (plucky observe metrics)
  #:use-module (plucky dev serve)
  #:use-module (plucky dev bench)
  #:export (profile-app
            print-phase-table))

(define (cpu-seconds)
  ;; this process's CPU time, all threads
  (let ((t (times)))
    (/ (+ (tms:utime t) (tms:stime t)) 1. internal-time-units-per-second)))

(define (start-wrk port connections requests)
  ;; -> pid.  Bounded: -d is generous, and we stop it ourselves.
  (car (spawn-process "wrk" (list "-t1" "-c" (number->string connections)
                                  "-d" (format #f "~as" (max 60 (quotient requests 1000)))
                                  (format #f "http://127.0.0.1:~a/" port))
                      #:output "/dev/null")))

(define (stop-wrk pid)
  (false-if-exception (kill pid SIGINT))
  (wait-process pid 10))

(define* (run-pass handler requests connections #:key (wrap (lambda (thunk) (thunk))) (mode 'account))
  ;; Serve REQUESTS requests of HANDLER under wrk; WRAP runs the loop
  ;; (the profiler).  -> (values observer wall-seconds cpu-seconds gc-before gc-after)
  (let* ((socket (open-listener "127.0.0.1" 0))
         (wrk (start-wrk (listener-port socket) connections requests))
         ;; every request accounted for: the table is exact, not sampled
         (observer (and (not (eq? mode 'off)) (make-observer #:samples-per-second #f))))
    (dynamic-wind
      (lambda () #t)
      (lambda ()
        (gc)
        (let* ((gc-before (gc-stats))
               (wall (get-internal-real-time))
               (cpu (cpu-seconds)))
          (wrap (lambda ()
                  (serve-app handler #:socket socket #:mode mode #:observer observer
                             #:requests requests)))
          (let ((wall (/ (- (get-internal-real-time) wall) 1e9))
                (cpu (- (cpu-seconds) cpu))
                (gc-after (gc-stats)))
            (values observer wall cpu gc-before gc-after))))
      (lambda ()
        (when observer (observer-detach! observer))
        (stop-wrk wrk)
        (close-port socket)))))

(define (phase-total observer phase)
  (histogram-sum (all-routes-histogram observer phase)))

(define (round* x) (inexact->exact (round x)))

(define* (print-phase-table observer requests wall cpu gc-before gc-after
                            #:optional (port (current-output-port)))
  "Print the per-phase table of a pass of REQUESTS requests taking WALL
seconds and CPU seconds: µs per request in each phase, as the loop's
clock measured it around the phase, against the wall time per request."
  (let* ((n requests)
         (us (lambda (ns) (/ ns 1000. n)))
         (total-us (/ (* wall 1e6) n))
         (rows `(("accept4(2) and set-up" ,(histogram-sum (observer-accept observer))
                  ,(histogram-count (observer-accept observer)))
                 ("read(2)" ,(phase-total observer 'read) ,n)
                 ("parse the head" ,(phase-total observer 'parse) ,n)
                 ("handler" ,(phase-total observer 'handler) ,n)
                 ("serialise the response" ,(phase-total observer 'serialise) ,n)
                 ("write(2)" ,(histogram-sum (observer-write observer))
                  ,(histogram-count (observer-write observer)))
                 ("close(2)" ,(histogram-sum (observer-close observer))
                  ,(histogram-count (observer-close observer)))))
         (accounted (fold + 0 (map second rows)))
         (allocated (- (assq-ref gc-after 'heap-total-allocated)
                       (assq-ref gc-before 'heap-total-allocated)))
         (gcs (- (assq-ref gc-after 'gc-times) (assq-ref gc-before 'gc-times)))
         (gc-time (- (assq-ref gc-after 'gc-time-taken) (assq-ref gc-before 'gc-time-taken)))
         (row (lambda (value percent name per-request)
                (format port "~10,2f  ~9a  ~42a ~a~%" value
                        (if percent (format #f "~9,1f" percent) "")
                        name per-request))))
    (format port "~10@a  ~9@a  ~42a ~a~%" "µs/request" "% of wall" "phase" "events/request")
    (row total-us 100. "wall time / requests (1 / throughput)" "")
    (for-each (lambda (r)
                (row (us (second r)) (* 100 (/ (us (second r)) total-us)) (first r)
                     (format #f "~,2f" (/ (third r) n))))
              rows)
    (row (- total-us (us accounted)) (* 100 (/ (- total-us (us accounted)) total-us))
         "the rest: epoll_wait, the loop, accounting" "")
    (row (/ (* cpu 1e6) n) #f "CPU time / requests (user+system, threads)" "")
    (newline port)
    (format port "requests: ~a in ~,2f s (~a requests/s); CPU ~,2f s~%"
            n wall (round* (/ n wall)) cpu)
    (format port "bytes allocated per request: ~a (~a; gc-stats heap-total-allocated over the pass)~%"
            (round* (/ allocated n)) (format-bytes-short (/ allocated n)))
    (format port "GCs per 1,000 requests: ~,2f (~a collections, ~,2f ms of GC CPU time each)~%"
            (/ (* 1000. gcs) n) gcs (if (> gcs 0) (/ gc-time gcs 1e6) 0))
    (let ((service (all-routes-histogram observer 'service)))
      (format port "server time per request, read to serialised: p50 ~,1f µs, p99 ~,1f µs, p99.9 ~,1f µs, max ~,1f µs~%"
              (/ (histogram-quantile service 0.5) 1e3) (/ (histogram-quantile service 0.99) 1e3)
              (/ (histogram-quantile service 0.999) 1e3) (/ (histogram-max service) 1e3)))
    (format port "(phases are wall-clock intervals the loop measures around each step, so time the~%~
                  process spends preempted lands in them; \"the rest\" is mostly epoll_wait.)~%")))

(define (format-bytes-short bytes)
  (if (>= bytes 1024)
      (format #f "~,1f KB" (/ bytes 1024.))
      (format #f "~a B" (round* bytes))))

(define* (profile-app file #:key (requests 100000) (connections 100) (gc? #f) (hz 1000)
                      (port (current-output-port)))
  "Profile the app FILE under wrk load: print the per-phase table of
REQUESTS requests measured with accounting only, then the flat profile
of as many under statprof at HZ samples a second (with GC? true, gcprof:
where collections happen)."
  (unless (wrk-version)
    (error "plucky profile needs wrk (apt-get install wrk)"))
  (let ((handler (load-app file)))
    (format port "plucky profile ~a: ~a requests, ~a keep-alive connections (wrk -t1), in this process (PID ~a)~%~%"
            file requests connections (getpid))
    ;; A first short pass lets Guile's JIT compile the hot procedures.
    (run-pass handler (min requests 10000) connections)
    (let-values (((observer wall cpu gc-before gc-after)
                  (run-pass handler requests connections)))
      (format port "Per-phase breakdown (accounting on, no profiler):~%~%")
      (print-phase-table observer requests wall cpu gc-before gc-after port))
    (newline port)
    (if gc?
        (format port "Where collections are triggered (gcprof, ~a requests):~%~%" requests)
        (format port "Flat profile (statprof, ~a requests, ~a samples/s):~%~%" requests hz))
    (let ((text (call-with-output-string
                  (lambda (out)
                    (run-pass handler requests connections
                              #:mode 'off
                              #:wrap (lambda (thunk)
                                       (if gc?
                                           (gcprof thunk #:port out)
                                           (statprof thunk #:hz hz #:display-style 'flat
                                                     #:port out))))))))
      (display (name-foreign-frames text) port))))

;;;
;;; Naming the C functions in a profile
;;;

;; statprof names a frame by its procedure's debug info; a C function
;; called through the FFI (pointer->procedure) has none, and shows as
;; "anon #xADDRESS", the address being in the small stub Guile makes for
;; that one function.  The stubs of the foreign procedures plucky's
;; modules bind ("%write", "gc-total-bytes"...) are found here by their
;; code addresses, so that the profile says write(2) where it is.

(define stub-size 64)

(define (foreign-stubs)
  ;; -> ((code-address . "name") ...)
  (append-map
   (lambda (module-name)
     (let ((module (false-if-exception (resolve-module module-name #:ensure #f))))
       (if (not module)
           '()
           (filter-map
            (lambda (entry)
              (let ((name (car entry)) (variable (cdr entry)))
                (and (variable-bound? variable)
                     (let ((value (variable-ref variable)))
                       (and (procedure? value)
                            (not (procedure-name value))
                            (program? value)
                            (primitive-code? (program-code value))
                            (cons (program-code value)
                                  (string-trim (symbol->string name) #\%)))))))
            (module-map cons module)))))
   '((plucky sys libc) (plucky sys epoll) (plucky sys signal) (plucky server loop))))

(define (name-foreign-frames text)
  "Replace each \"anon #xADDRESS\" in TEXT, a statprof report, that lies
in the stub of a foreign procedure of plucky's modules by that
procedure's name and \"(C, via the FFI)\"."
  (let ((stubs (foreign-stubs)))
    (regexp-substitute/global
     #f "anon #x([0-9a-f]+)" text
     'pre
     (lambda (m)
       (let* ((address (string->number (match:substring m 1) 16))
              (stub (find (lambda (s) (and (<= (car s) address) (< address (+ (car s) stub-size))))
                          stubs)))
         (if stub
             (string-append (cdr stub) " (C, via the FFI)")
             (match:substring m 0))))
     'post)))

;;; (plucky dev profile) ends here
