;;; tests/server/transport.scm --- the loop moves bytes through a transport

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `run-loop' #:make-transport gives each accepted connection a
;;; transport (plucky server transport); the loop then reads, writes and
;;; closes through it, never on the descriptor itself.  A trivial one,
;;; which upper-cases what it writes and logs its closes, shows it: a TLS
;;; transport will plug in the same way.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (tests lib harness)
             (tests lib server)
             (rnrs bytevectors)
             (web response)
             (plucky sys libc)
             (plucky server transport)
             (plucky server loop)
             (plucky server socket))

(test-begin "server/transport")

(define (hello request body)
  (values '((content-type . (text/plain))) "Hello, World!"))

(define (upper-case! address start count)
  ;; ASCII letters of the body at ADDRESS + START, COUNT bytes (a whole
  ;; response, head and body), made capitals, in place: the head stays
  ;; as it was, for the client to parse.
  (let ((bv ((@ (system foreign) pointer->bytevector)
             ((@ (system foreign) make-pointer) (+ address start)) count)))
    (let lp ((i (+ 4 (or (string-contains (utf8->string bv) "\r\n\r\n") (- count 4)))))
      (when (< i count)
        (let ((b (bytevector-u8-ref bv i)))
          (when (<= 97 b 122)
            (bytevector-u8-set! bv i (- b 32))))
        (lp (+ i 1))))))

(define shouting-transport
  (make-transport
   #:write (lambda (fd address start count)
             (upper-case! address start count)
             (fd-write fd address start count))
   #:close (lambda (fd)
             (format (current-error-port) "transport: closed a connection~%")
             (fd-close fd))))

(define (start-server-with transport handler)
  ;; a server of HANDLER whose connections all go through TRANSPORT
  (start-child
   (lambda (report)
     (let ((listener (open-listener "127.0.0.1" 0)))
       (report (listener-port listener))
       (run-loop (list (port->fdes listener)) handler
                 #:make-transport (lambda (fd) transport))))))

(define (start-shouting-server)
  (start-server-with shouting-transport hello))

(test-group "run-loop #:make-transport"
  (let ((server (start-shouting-server)))
    (dynamic-wind
      (lambda () #t)
      (lambda ()
        (with-client (server-port server)
          (lambda (client)
            (client-send! client (request-text "/" #:headers '("Connection: close")))
            (let ((response body (client-read-response client)))
              (test-equal "the answer went through the transport's write"
                "HELLO, WORLD!" (and body (utf8->string body))))
            (test-assert "then the close"
              (client-eof? client))))
        (test-assert "through the transport's close"
          (wait-until (lambda ()
                        (string-contains (server-log server)
                                         "transport: closed a connection"))
                      #:timeout 10)))
      (lambda () (stop-server server)))))

(test-group "plain-transport"
  (test-assert "a transport" (transport? plain-transport))
  (test-eq "reads with read(2)" fd-read (transport-read plain-transport))
  (test-eq "sends files with sendfile(2)" fd-sendfile (transport-sendfile plain-transport))
  (test-eq "writes a file's head with MSG_MORE" fd-send-more
    (transport-write-more plain-transport)))

(test-group "make-transport #:write-more"
  (test-eq "a transport with its own write writes heads with it too"
    (transport-write shouting-transport) (transport-write-more shouting-transport)))

;; A file body's head goes through the transport's write-more, then the
;; file through its sendfile.
(define file-text "the contents of a file body\n")

(define (file-site request body)
  (let* ((name (string-copy "/tmp/plucky-transport-XXXXXX"))
         (out (mkstemp! name)))
    (display file-text out)
    (close-port out)
    (let ((in (open-input-file name #:binary #t)))
      (delete-file name)
      (values '((content-type . (text/plain))) (make-file-body in)))))

(define logging-transport
  (make-transport
   #:write-more (lambda (fd address start count)
                  (format (current-error-port) "transport: write-more of ~a bytes~%" count)
                  (fd-send-more fd address start count))))

(test-group "a file body's head through write-more"
  (let ((server (start-server-with logging-transport file-site)))
    (dynamic-wind
      (lambda () #t)
      (lambda ()
        (with-client (server-port server)
          (lambda (client)
            (client-send! client (request-text "/" #:headers '("Connection: close")))
            (let ((response body (client-read-response client)))
              (test-equal "the file, whole" file-text (and body (utf8->string body))))))
        (test-assert "the head went through write-more"
          (wait-until (lambda ()
                        (string-contains (server-log server) "transport: write-more of"))
                      #:timeout 10)))
      (lambda () (stop-server server)))))

(test-end "server/transport")
