;;; tests/db/unavailable.scm --- pg-unavailable-middleware's answer and log line

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A handler whose database cannot be reached (here a connection to a
;;; loopback port where nothing listens: libpq's real message, over two
;;; lines) is answered 503, and the error logged on one line, from the
;;; first failure on: in a new process too (internal real time counts
;;; from the process's start, and a first line once compared with 0 was
;;; lost in a process's first second).  No PostgreSQL server needed.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (ice-9 popen)
             (ice-9 textual-ports)
             (tests lib harness))

(test-begin "db/unavailable")

(define root
  (dirname (dirname (dirname (search-path %load-path "tests/lib/harness.scm")))))

(define program
  '(begin
     (use-modules (web request) (web response) (web uri)
                  (plucky db postgresql))
     (let ((handler ((pg-unavailable-middleware)
                     (lambda (request body)
                       (pg-connect "postgresql://127.0.0.1:1/none?connect_timeout=5")
                       (values '() "connected?")))))
       (call-with-values
           (lambda ()
             (handler (build-request (string->uri "http://127.0.0.1/items")) #f))
         (lambda (response text)
           (format #t "status ~a~%" (response-code response)))))))

(define (run-fresh)
  ;; -> what a new Guile running PROGRAM wrote, standard error included
  (let* ((port (open-pipe* OPEN_READ "sh" "-c"
                           (format #f "exec guile --no-auto-compile -L ~a -C ~a/build -c ~s 2>&1"
                                   root root (object->string program))))
         (text (get-string-all port)))
    (close-pipe port)
    text))

(let* ((out (run-fresh))
       (lines (string-split out #\newline))
       (line (find (lambda (line) (string-contains line "database unavailable")) lines)))
  (test-assert "answered 503" (member "status 503" lines))
  (test-assert "the first failure logged, in the process's first second" line)
  (test-assert "with its SQLSTATE and the request"
    (and line (string-contains line "database unavailable (08001 ")
         (string-contains line "): 503 to GET /items")))
  (test-assert "libpq's two lines on one, without tabs"
    (and line (string-contains line "Connection refused Is the server running")
         (not (string-index out #\tab)))))

(test-end "db/unavailable")
