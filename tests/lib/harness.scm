;;; (tests lib harness) --- the SRFI-64 runner every plucky test file uses

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Each file under tests/ is a script that does
;;;
;;;   (use-modules (srfi srfi-64) (tests lib harness))
;;;   (test-begin "http/parse")
;;;   ...
;;;   (test-end "http/parse")
;;;
;;; Loading this module installs a runner that prints each failure with
;;; what was expected and what came, then one machine-read line
;;; "plucky-tests: PASS FAIL SKIP" that tests/run adds up, and exits with
;;; status 1 when anything failed.  tests/run treats a file that dies
;;; before that line as one failure.
;;;
;;; Code:

(define-module (tests lib harness)
  #:use-module (srfi srfi-64)
  #:use-module (ice-9 format)
  #:export (plucky-test-runner
            test-data-file
            call-guarded))

(define (test-data-file name)
  "Return the path of NAME under tests/data, found from the load path."
  (let ((dir (dirname (dirname (search-path %load-path "tests/lib/harness.scm")))))
    (string-append dir "/data/" name)))

;; Call THUNK, a group of tests, and record one more test that fails if
;; an exception escaped it (with the exception's text, cut at 400
;; characters), so that a broken group shows as a failure, not a death.
(define (call-guarded thunk)
  (let ((escaped (with-exception-handler
                     (lambda (e) e)
                   (lambda () (thunk) #f)
                   #:unwind? #t)))
    (test-equal "no exception escaped the group" #f
      (and escaped
           (let ((text (call-with-output-string
                         (lambda (port)
                           (print-exception port #f '%exception (list escaped))))))
             (if (> (string-length text) 400)
                 (string-append (substring text 0 400) "…")
                 text))))))

(define (plucky-test-runner)
  "Return a fresh SRFI-64 runner that reports failures and a summary line."
  (let ((runner (test-runner-null)))
    (test-runner-on-test-end!
     runner
     (lambda (runner)
       ;; SRFI-64 has already counted the result; only report failures.
       (let ((kind (test-result-kind runner)))
         (case kind
           ((pass xfail skip) #t)
           (else
            (let ((result (test-result-alist runner)))
              (format #t "FAIL ~a: ~a~%" (string-join (test-runner-group-path runner) "/")
                      (or (test-runner-test-name runner) ""))
              (for-each
               (lambda (key)
                 (let ((entry (assq key result)))
                   (when entry
                     (format #t "     ~a: ~s~%" key (cdr entry)))))
               '(source-file source-line source-form expected-value actual-value
                             actual-error))))))))
    (test-runner-on-final!
     runner
     (lambda (runner)
       (let ((pass (+ (test-runner-pass-count runner) (test-runner-xfail-count runner)))
             (fail (+ (test-runner-fail-count runner) (test-runner-xpass-count runner)))
             (skip (test-runner-skip-count runner)))
         (format #t "plucky-tests: ~a ~a ~a~%" pass fail skip)
         (force-output)
         (exit (if (zero? fail) 0 1)))))
    runner))

(test-runner-factory plucky-test-runner)

;;; (tests lib harness) ends here
