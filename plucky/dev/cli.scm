;;; (plucky dev cli) --- the `bench' and `profile' commands, --status

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; What (plucky command) calls for the parts of the `plucky' command
;;; that explain performance:
;;;
;;;   plucky bench TARGET …     -> (bench-command args)
;;;   plucky profile APP.scm …  -> (profile-command args)
;;;   plucky serve … --status [--status-token T]
;;;                             -> (status-wrap handler #:workers n #:token t)
;;;                                gives the handler and the #:observer
;;;                                hooks to pass on to run-loop
;;;
;;; Options are parsed by hand, as (plucky command) does; each command
;;; prints its usage with --help and exits with status 2 on a bad
;;; argument.
;;;
;;; Code:

(define-module (plucky dev cli)
  #:use-module (srfi srfi-1)
  #:use-module (ice-9 format)
  #:use-module (plucky observe accounting)
  #:use-module (plucky observe status)
  #:use-module (plucky dev bench)
  #:use-module (plucky dev profile)
  #:export (bench-command
            profile-command
            status-wrap
            bench-usage
            profile-usage))

(define bench-usage "\
Usage: plucky bench TARGET [OPTION…]

Drive load at TARGET with wrk and print an ApacheBench-style report:
requests per second, transfer rate, connection times and the table of
latency percentiles; write an SVG chart of the latency percentiles and
of throughput over time.  TARGET is a URL, or an app file, which is
served with `plucky serve' on a free port of 127.0.0.1 for the run.

Options:
  --duration S      seconds of measured load per target (default 10)
  --connections N   concurrent connections, wrk -c (default 100)
  --threads N       wrk threads, wrk -t (default 1)
  --slice S         seconds of each wrk run; the load runs in slices, and
                    throughput over time is per slice (default 1)
  --warmup S        seconds of load before measuring, per target (default 1)
  --compare TARGET2 measure TARGET2 as well, slices alternating with
                    TARGET's, and print the ratios TARGET2 / TARGET
  --header 'K: V'   a header to send with each request (repeatable)
  --svg FILE        where to write the chart (default plucky-bench.svg)
")

(define profile-usage "\
Usage: plucky profile APP.scm [OPTION…]

Serve APP.scm in this process under wrk load (keep-alive) and print
where the time goes: a table of microseconds per request in each phase
(accept, read, parse, handler, serialise, write, close), bytes
allocated per request and collections per 1,000 requests, measured
with accounting only; then the flat profile of a second pass under
Guile's statprof.

Options:
  --requests N      requests per pass (default 100000)
  --connections N   wrk's concurrent connections (default 100)
  --hz N            statprof samples per second (default 1000)
  --gc              profile where collections are triggered (gcprof)
                    instead of sampling time
")

(define (fail fmt . args)
  (apply format (current-error-port) (string-append "plucky: " fmt "~%") args)
  (exit 2))

(define (parse-options args names flags usage)
  ;; -> (values positional-arguments alist); options in NAMES take a
  ;; value (repeatable ones accumulate), FLAGS do not.
  (let lp ((args args) (positional '()) (options '()))
    (cond
     ((null? args) (values (reverse positional) (reverse options)))
     ((member (car args) '("-h" "--help")) (display usage) (exit 0))
     ((member (car args) names)
      (when (null? (cdr args)) (fail "~a needs a value" (car args)))
      (lp (cddr args) positional (acons (car args) (cadr args) options)))
     ((member (car args) flags)
      (lp (cdr args) positional (acons (car args) #t options)))
     ((string-prefix? "-" (car args))
      (fail "unknown option ~a (see --help)" (car args)))
     (else (lp (cdr args) (cons (car args) positional) options)))))

(define (number-option options name default)
  (let ((value (assoc-ref options name)))
    (if (not value)
        default
        (let ((n (string->number value)))
          (unless (and n (real? n) (> n 0))
            (fail "~a expects a positive number, not ~s" name value))
          n))))

(define (url? target)
  (or (string-prefix? "http://" target) (string-prefix? "https://" target)))

(define (bench-command args)
  "Run `plucky bench' with ARGS, the arguments after \"bench\"."
  (call-with-values
      (lambda ()
        (parse-options args '("--duration" "--connections" "--threads" "--slice" "--warmup"
                              "--compare" "--header" "--svg")
                       '() bench-usage))
    (lambda (positional options)
      (unless (= 1 (length positional))
        (fail "bench needs one TARGET, a URL or an app file (see plucky bench --help)"))
      (unless (wrk-version)
        (fail "bench needs wrk, which is not installed (apt-get install wrk)"))
      (let* ((targets (cons (car positional)
                            (let ((b (assoc-ref options "--compare"))) (if b (list b) '()))))
             (started '()))
        (for-each (lambda (target)
                    (unless (or (url? target) (file-exists? target))
                      (fail "~a is neither a URL nor an app file" target)))
                  targets)
        (dynamic-wind
          (lambda () #t)
          (lambda ()
            (let* ((urls (map (lambda (target)
                                (if (url? target)
                                    target
                                    (let ((server (start-app-server target)))
                                      (set! started (cons (car server) started))
                                      (format #t "plucky bench: serving ~a at ~a (PID ~a)~%"
                                              target (cdr server) (car server))
                                      (cdr server))))
                              targets))
                   (duration (number-option options "--duration" 10))
                   (connections (inexact->exact (number-option options "--connections" 100)))
                   (threads (inexact->exact (number-option options "--threads" 1)))
                   (slice (number-option options "--slice" 1))
                   (warmup (let ((w (assoc-ref options "--warmup")))
                             (if (equal? w "0") 0 (number-option options "--warmup" 1))))
                   (headers (filter-map (lambda (o) (and (string=? (car o) "--header") (cdr o)))
                                        options))
                   (svg (or (assoc-ref options "--svg") "plucky-bench.svg")))
              (format #t "plucky bench: ~a; ~a s per target in slices of ~a s, ~a connections, ~a thread~a~%"
                      (wrk-version) duration slice connections threads (if (= threads 1) "" "s"))
              (format #t "wrk -t~a -c~a -d~as -s bench-report.lua~a URL, repeated~%~%"
                      threads connections slice
                      (string-concatenate (map (lambda (h) (format #f " -H '~a'" h)) headers)))
              (let ((results (run-bench urls #:duration duration #:connections connections
                                        #:threads threads #:slice slice #:warmup warmup
                                        #:headers headers
                                        #:progress (lambda (line)
                                                     (format (current-error-port) "  ~a~%" line)))))
                (define labels
                  (map (lambda (target url)
                         (if (url? target) url (format #f "~a (~a)" target url)))
                       targets urls))
                (for-each (lambda (result letter label)
                            (when (> (length results) 1)
                              (format #t "~%=== ~a: ~a~%~%" letter label))
                            (print-bench-report result))
                          results '("A" "B") labels)
                (when (> (length results) 1)
                  (newline)
                  (print-comparison (first results) (second results) #:labels labels))
                (call-with-output-file svg
                  (lambda (port) (display (bench-svg results #:labels labels) port)))
                (format #t "~%Chart written to ~a~%" svg))))
          (lambda ()
            (for-each stop-app-server started)))))))

(define (profile-command args)
  "Run `plucky profile' with ARGS, the arguments after \"profile\"."
  (call-with-values
      (lambda ()
        (parse-options args '("--requests" "--connections" "--hz") '("--gc") profile-usage))
    (lambda (positional options)
      (unless (= 1 (length positional))
        (fail "profile needs one APP.scm (see plucky profile --help)"))
      (unless (file-exists? (car positional))
        (fail "no such file: ~a" (car positional)))
      (unless (wrk-version)
        (fail "profile needs wrk, which is not installed (apt-get install wrk)"))
      (profile-app (car positional)
                   #:requests (inexact->exact (number-option options "--requests" 100000))
                   #:connections (inexact->exact (number-option options "--connections" 100))
                   #:hz (inexact->exact (number-option options "--hz" 1000))
                   #:gc? (assoc-ref options "--gc")))))

(define* (status-wrap handler #:key (workers 1) (token #f) (catch-errors? #f))
  "Return two values: HANDLER wrapped to serve /_plucky/… (see
(plucky observe status)) and the hooks to pass as run-loop's
#:observer, both sharing one new observer.  WORKERS is the number of
worker processes, for the page to say; TOKEN, if a string, is the
--status-token.  CATCH-ERRORS? makes the wrapper catch the handler's
exceptions for the inbox's backtraces, for a loop that does not send
the observer of failures (plucky's does: #:on-failure)."
  (let ((observer (make-observer #:workers workers)))
    (values (observed-handler handler observer #:token token
                              #:catch-errors? catch-errors?)
            (observer->hooks observer))))

;;; (plucky dev cli) ends here
