;;; bench/phases.scm --- the steps of a hello request, each alone, for callgrind

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; What bench/instructions-phases runs under callgrind: each step a
;;; keep-alive hello request takes through plucky (what ab -k sends),
;;; N times between two getpgrp(2) calls, where callgrind
;;; --dump-before=getpgrp cuts its profile, after 5,000 runs not counted
;;; (Guile's JIT compiles meanwhile) and a collection.  The steps:
;;;
;;;   parse        plucky http parse: ab's head (Host, User-Agent, Accept,
;;;                Connection: Keep-Alive)
;;;   keep-alive?  request-keep-alive?, asked once a request
;;;   handler      apps/hello.scm's handler
;;;   serialise    write-response! of its answer (a kept head, the Date
;;;                line, the body)
;;;   ffi          one read(2) of /dev/null through (plucky sys libc):
;;;                what each system call of a request costs in the FFI
;;;   empty        the loop around the others, to subtract
;;;
;;;   guile -L . -C build bench/phases.scm N   (prints the steps' names)
;;;
;;; Code:

(use-modules (rnrs bytevectors)
             (plucky http parse)
             (plucky http response)
             ((plucky sys libc) #:select (fd-read bytevector-address)))

(define ab-head
  (string->utf8 (string-append "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n"
                               "Host: 127.0.0.1:8080\r\nUser-Agent: ApacheBench/2.3\r\n"
                               "Accept: */*\r\n\r\n")))

(define request
  (call-with-values (lambda () (parse-request-head ab-head 0 (bytevector-length ab-head)))
    (lambda (request index) request)))

(define headers '((content-type . (text/plain))))
(define (hello request body) (values headers "Hello, World!"))
(define out (make-output))
(define scratch (make-bytevector 64))
(define scratch-address (bytevector-address scratch))
(define null-fd (open-fdes "/dev/null" O_RDONLY))

(define steps
  `(("parse" . ,(lambda () (parse-request-head ab-head 0 (bytevector-length ab-head))))
    ("keep-alive?" . ,(lambda () (request-keep-alive? request)))
    ("handler" . ,(lambda () (hello request #f)))
    ("serialise" . ,(lambda ()
                      (output-reset! out)
                      (write-response! out request headers "Hello, World!" #f)))
    ("ffi" . ,(lambda () (fd-read null-fd scratch-address 0 64)))
    ("empty" . ,(lambda () #f))))

(define (run-times thunk k)
  (let loop ((i 0))
    (when (< i k)
      (thunk)
      (loop (+ i 1)))))

(let ((n (string->number (cadr (command-line)))))
  (for-each (lambda (step)
              (run-times (cdr step) 5000)
              (gc)
              (getpgrp)
              (run-times (cdr step) n)
              (getpgrp))
            steps)
  (for-each (lambda (step) (display (car step)) (newline)) steps))

;;; bench/phases.scm ends here
