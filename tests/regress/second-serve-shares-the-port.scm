;;; tests/regress/second-serve-shares-the-port.scm --- a served port is refused

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; With more than one worker (the default: one per CPU), plucky binds a
;;; socket per worker with SO_REUSEPORT, which lets any socket of the
;;; same user with that option bind the same address.  A second `plucky
;;; serve' on a port a first one served therefore said
;;;
;;;   plucky: listening on http://127.0.0.1:8080/ (2 workers, a socket
;;;   each with SO_REUSEPORT)
;;;
;;; and took part of the first one's new connections, serving whatever
;;; app it was given (issue 13, defect 5c); with --workers 1 it was
;;; refused, but with Guile's "Address already in use", naming no
;;; address.  Now every combination exits with status 2 and one line
;;; naming the address, and the first server alone answers.  A port left
;;; with connections in TIME_WAIT by a server that stopped is not in
;;; use: a new server binds it.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (tests lib harness)
             (tests lib server)
             (tests lib command))

(test-begin "regress/second-serve-shares-the-port")

(define dir (temporary-directory))
(define first-app (write-text-app dir "first"))

(define (answer port)
  ;; -> the body of a GET / on PORT with Connection: close: the server
  ;; closes first, and leaves the connection in TIME_WAIT
  (with-client port
    (lambda (client)
      (client-send! client (request-text "/" #:headers '("Connection: close")))
      (let* ((bytes closed? (client-read-until-close client #:timeout 10))
             (text (if (bytevector? bytes) (utf8->string bytes) ""))
             (end (string-contains text "\r\n\r\n")))
        (if end (substring text (+ end 4)) text)))))

(define (second-serve port workers)
  ;; -> (values exit-status log) of a second `plucky serve' on PORT with
  ;; WORKERS (a string); exit-status #f if it did not exit by itself
  (call-with-plucky
   first-app (append (list "--port" (number->string port) "--workers" workers)
                     allow-root)
   (lambda (second)
     (let ((status (wait-until (lambda () (plucky-exit-status second)) #:timeout 10)))
       (values (and status (status:exit-val status)) (plucky-log second))))
   #:wait? #f))

(define-syntax-rule (test-refused name port workers)
  (let ((status log (second-serve port workers)))
    (test-equal (string-append name ": exit status 2") 2 status)
    (test-assert (string-append name ": one line naming the address")
      (string-contains log (format #f "plucky: 127.0.0.1:~a: address in use" port)))
    (test-assert (string-append name ": never says it listens")
      (not (string-contains log "listening")))))

(call-guarded
 (lambda ()
   (for-each
    (lambda (first-workers)
      (call-with-plucky
       first-app (append (list "--port" "0" "--workers" first-workers) allow-root)
       (lambda (first)
         (let ((port (plucky-port first))
               (name (lambda (workers)
                       (string-append first-workers " worker(s) serve, a second with "
                                      workers))))
           (test-refused (name "2") port "2")
           (test-refused (name "1") port "1")
           (test-equal (string-append first-workers " worker(s): the first alone answers")
             "first" (answer port))))))
    '("2" "1"))

   ;; A port whose server stopped, its connections in TIME_WAIT.
   (let ((port (call-with-plucky
                first-app (append '("--port" "0" "--workers" "2") allow-root)
                (lambda (first)
                  (answer (plucky-port first))
                  (stop-plucky first)
                  (plucky-port first)))))
     (call-with-plucky
      first-app (append (list "--port" (number->string port) "--workers" "2") allow-root)
      (lambda (again)
        (test-equal "after the first stopped, a new server listens on its port"
          port (plucky-port again)))))))

(remove-tree dir)

(test-end "regress/second-serve-shares-the-port")

;;; tests/regress/second-serve-shares-the-port.scm ends here
