;;; tests/dev/cli.scm --- `plucky bench' and `plucky profile', run for real

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; (plucky dev cli)'s commands run in a Guile of their own, as bin/plucky
;;; will run them, against apps/hello.scm: `bench' on a URL served by a test
;;; server and on an app file it serves itself, `profile' in-process.  Short
;;; loads (a second or two, a few thousand requests), each process waited for
;;; with a bound and stopped by its PID.  The figures are not checked against
;;; expectations of speed, only for being there and consistent: requests
;;; counted, percentiles in order, a chart with data.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (tests lib harness)
             (tests lib server)
             (ice-9 regex)
             (ice-9 rdelim)
             (plucky dev serve))

(test-begin "dev/cli")

(define root
  (dirname (dirname (dirname (search-path %load-path "tests/lib/harness.scm")))))

(define (run-command command args timeout)
  ;; Run (plucky dev cli)'s COMMAND with ARGS in a new Guile.
  ;; -> (values status stdout stderr)
  (let* ((process (spawn "guile" (append (list "-L" root "-C" (string-append root "/build")
                                               "-c" (format #f "((@ (plucky dev cli) ~a) (cdr (command-line)))"
                                                            command))
                                         args)))
         (deadline (+ (now-seconds) timeout))
         (read-all (lambda (port)
                     (let lp ((lines '()))
                       (let ((line (read-line-before port deadline)))
                         (if (string? line)
                             (lp (cons line lines))
                             (string-join (reverse lines) "\n"))))))
         (out (read-all (process-stdout process)))
         (err (read-all (process-stderr process)))
         (status (or (process-wait process #:timeout (max 1 (- deadline (now-seconds))))
                     (process-stop process))))
    (values status out err)))

(define (field text label)
  ;; the number after "LABEL" on its line of TEXT
  (let ((m (string-match (string-append (regexp-quote label) " *([0-9.]+)") text)))
    (and m (string->number (match:substring m 1)))))

(define (percentile-table text)
  ;; the percentile table's values, in order
  (filter-map (lambda (line)
                (let ((m (string-match "^ +([0-9.]+)% +([0-9.]+)" line)))
                  (and m (string->number (match:substring m 2)))))
              (string-split text #\newline)))

(define svg-file (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-test-bench-"
                                (number->string (getpid)) ".svg"))

(define hello (load-app (string-append root "/apps/hello.scm")))

(test-group "bench URL"
  (call-guarded
   (lambda ()
     (let ((server (start-child (lambda (report)
                                  (serve-app hello #:mode 'off #:on-listen report)))))
       (dynamic-wind
         (lambda () #t)
         (lambda ()
           (let ((status out err
                         (run-command "bench-command"
                                      (list (format #f "http://127.0.0.1:~a/" (server-port server))
                                            "--duration" "2" "--slice" "1" "--warmup" "0"
                                            "--connections" "10" "--svg" svg-file)
                                      60)))
             (test-equal "exit status 0" 0 (status:exit-val status))
             (test-equal "document length" 13 (field out "Document Length:"))
             (test-equal "concurrency" 10 (field out "Concurrency Level:"))
             (test-assert "requests completed" (> (or (field out "Complete requests:") 0) 100))
             (test-equal "no failed request" 0 (field out "Failed requests:"))
             (test-assert "requests per second = requests / time"
               (let ((n (field out "Complete requests:"))
                     (t (field out "Time taken for tests:"))
                     (rps (field out "Requests per second:")))
                 (and n t rps (< (abs (- rps (/ n t))) (* 0.01 rps)))))
             (test-assert "connection times" (string-contains out "Connect:"))
             (let ((table (percentile-table out)))
               (test-equal "ten percentiles" 10 (length table))
               (test-assert "in order" (and (pair? table) (apply <= table))))
             (test-assert "says where the chart went" (string-contains out svg-file))
             (test-assert "the chart has both plots, with data"
               (let ((svg (call-with-input-file svg-file (lambda (p) (read-delimited "" p)))))
                 (and (string-contains svg "Latency by percentile")
                      (string-contains svg "Requests per second")
                      (= 2 (length (list-matches "<path class=\"series\"[^>]* d=\"M[0-9.]+,[0-9.]+L" svg))))))))
         (lambda ()
           (stop-server server)
           (false-if-exception (delete-file svg-file))))))))

(test-group "bench APP.scm --compare URL"
  (call-guarded
   (lambda ()
     (let ((server (start-child (lambda (report)
                                  (serve-app hello #:mode 'off #:on-listen report)))))
       (dynamic-wind
         (lambda () #t)
         (lambda ()
           (let ((status out err
                         (run-command "bench-command"
                                      (list (string-append root "/apps/hello.scm")
                                            "--compare" (format #f "http://127.0.0.1:~a/" (server-port server))
                                            "--duration" "2" "--warmup" "0" "--connections" "10"
                                            "--svg" svg-file)
                                      90)))
             (test-equal "exit status 0" 0 (status:exit-val status))
             (test-assert "served the app itself" (string-contains out "plucky bench: serving"))
             (test-assert "two reports" (and (string-contains out "=== A:") (string-contains out "=== B:")))
             (test-assert "the ratios" (string-match "requests/s +[0-9.]+ +[0-9.]+ +[0-9.]+" out))
             (test-assert "the app's server was stopped"
               (let ((m (string-match "\\(PID ([0-9]+)\\)" out)))
                 (and m (not (false-if-exception (kill (string->number (match:substring m 1)) 0))))))))
         (lambda ()
           (stop-server server)
           (false-if-exception (delete-file svg-file))))))))

(test-group "bench: bad arguments"
  (call-guarded
   (lambda ()
     (let ((status out err (run-command "bench-command" '() 30)))
       (test-equal "no target: status 2" 2 (status:exit-val status))
       (test-assert "says why" (string-contains err "TARGET")))
     (let ((status out err (run-command "bench-command" '("/no/such/file.scm") 30)))
       (test-equal "a target that is neither: status 2" 2 (status:exit-val status))))))

(test-group "profile APP.scm"
  (call-guarded
   (lambda ()
     ;; Enough requests for statprof to sample the loop: 3,000 (0.05 s of
     ;; CPU) left it 0-2 samples, and "Sample count:" missing at times.
     (let ((status out err (run-command "profile-command"
                                        (list (string-append root "/apps/hello.scm")
                                              "--requests" "20000" "--connections" "10")
                                        120)))
       (test-equal "exit status 0" 0 (status:exit-val status))
       (for-each (lambda (phase)
                   (test-assert (string-append "phase row: " phase)
                     (string-match (string-append "[0-9.]+ +[0-9.]+ +" (regexp-quote phase)) out)))
                 '("read(2)" "parse the head" "handler" "serialise the response" "write(2)"))
       (test-assert "wall time per request"
         (string-contains out "wall time / requests"))
       (test-assert "bytes allocated per request"
         (string-match "bytes allocated per request: [0-9]+" out))
       (test-assert "GCs per 1,000 requests"
         (string-match "GCs per 1,000 requests: [0-9.]+" out))
       (test-assert "requests counted" (string-contains out "requests: 20000 in"))
       (test-assert "the flat profile" (string-contains out "Sample count:"))
       (test-assert "the loop in the profile" (string-contains out "serve-rounds"))))))

(test-end "dev/cli")

;;; tests/dev/cli.scm ends here
