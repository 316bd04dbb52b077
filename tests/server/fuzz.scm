;;; tests/server/fuzz.scm --- a short fuzz campaign against a real server
;;;
;;; Starts a server with tests/fuzz/app.scm's handler and short timeouts
;;; (2 s for a head, a stalled body and an idle connection), then runs
;;; tests/fuzz/http-fuzz.py against it: 20,000 mutated requests
;;; (PLUCKY_FUZZ_MUTANTS), each behind a few unmutated ones, pipelined,
;;; split and paced; see that file for what is checked.  The seed is new
;;; each run unless PLUCKY_FUZZ_SEED is set; a failure names it, and the
;;; connections that broke a rule are saved (the path is in the failure).
;;; The full campaign (1,000,000 inputs and more) is the same driver with
;;; --serve; its figures are in bench/RESULTS.md.

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 rdelim)
             (ice-9 regex)
             (web response)
             (tests lib harness)
             (tests lib server)
             (plucky server))

(define (source-file name)
  (search-path %load-path name))

(define fuzz-echo (primitive-load (source-file "tests/fuzz/app.scm")))

(define mutants
  (or (and=> (getenv "PLUCKY_FUZZ_MUTANTS") string->number) 20000))

(define seed
  (or (getenv "PLUCKY_FUZZ_SEED")
      (number->string (random (expt 2 32) (random-state-from-platform)))))

(define save-dir
  (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-fuzz-" seed))

;; -> (values summary-line-or-#f exit-status output-lines)
(define (run-driver port pid)
  (let* ((command (string-join
                   (map (lambda (arg) (string-append "'" arg "'"))
                        (list "python3" (source-file "tests/fuzz/http-fuzz.py")
                              "--port" (number->string port) "--pid" (number->string pid)
                              "--inputs" "100000000" "--mutants" (number->string mutants)
                              "--max-seconds" "120" "--check-every" "5000"
                              "--seed" seed "--save-dir" save-dir
                              "--progress-seconds" "1000"))
                   " "))
         (process (spawn "sh" (list "-c" (string-append "exec " command " 2>&1"))))
         (deadline (+ (now-seconds) 200)))
    (let lp ((lines '()))
      (let ((line (read-line-before (process-stdout process) deadline)))
        (if (string? line)
            (lp (cons line lines))
            (let ((status (process-wait process #:timeout 5)))
              (unless status (process-stop process))
              (values (and (pair? lines) (string-prefix? "{" (car lines)) (car lines))
                      (and status (status:exit-val status))
                      (reverse lines))))))))

(define (field summary name)
  ;; The integer NAME in the driver's JSON summary, or #f.
  (let ((m (and summary
                (string-match (string-append "\"" name "\": (-?[0-9]+)") summary))))
    (and m (string->number (match:substring m 1)))))

(test-begin "server/fuzz")

(call-guarded
 (lambda ()
   (call-with-server
    fuzz-echo
    (lambda (server)
      (let ((summary status lines (run-driver (server-port server) (server-pid server))))
        (define-syntax-rule (test-field name expected)
          (test-equal (string-append name " (seed " seed ", saved under " save-dir ")")
            expected (field summary name)))
        (unless (and summary (eqv? status 0))
          ;; What the driver said: the first lines name what broke.
          (for-each (lambda (line) (format #t "  | ~a~%" line))
                    (list-head lines (min 40 (length lines)))))
        (test-assert "the driver finished and printed its summary" summary)
        (test-assert (string-append "every mutant was sent within the time bound: "
                                    (number->string mutants))
          (>= (or (field summary "inputs_mutated") 0) mutants))
        (test-field "crashes" 0)
        (test-field "hangs" 0)
        (test-field "violations" 0)
        (test-field "control_failures" 0)
        (test-assert "the unmutated requests were checked answer by answer"
          (> (or (field summary "oracle_answers") 0) 0))
        (test-assert "RSS grew by less than 100 MiB"
          (let ((before (field summary "rss_before_kib"))
                (after (field summary "rss_after_kib")))
            (and before after (< (- after before) (* 100 1024)))))
        (test-equal "the driver's exit status" 0 status)
        (test-assert "the server is alive after the campaign" (server-alive? server))
        (let ((response body (http-get (server-port server) "/after")))
          (test-equal "and answers" 200 (and response (response-code response))))
        (test-equal "no backtrace in the server's log" #f
          (string-contains (server-log server) "Backtrace"))))
    #:settings (make-loop-settings #:header-timeout 2 #:body-timeout 2
                                   #:keep-alive-timeout 2 #:write-timeout 5
                                   #:max-body (* 1024 1024)))))

(test-end "server/fuzz")
