;;; bench/builtin-hello.scm --- the 2012 hello world on Guile's built-in server

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The peer plucky is measured against in bench/hello: Guile's own
;;; (web server) with the 'http implementation, serving the handler from
;;; the 2012 profile that started the project (see
;;; /work/shared/seeds/001_7a683e9054ac2813.txt).  The handler returns an
;;; alist of headers and a string, and leaves sanitize-response to build
;;; the response and encode the body, exactly as in that profile.
;;;
;;; Usage: guile bench/builtin-hello.scm PORT
;;;
;;; The 'http implementation binds 127.0.0.1 unless told otherwise.
;;;
;;; Code:

(use-modules (web server))

(define (handler request body)
  "Return a text/plain response whose body is \"Hello, World!\"."
  (values '((content-type . (text/plain)))
          "Hello, World!"))

(define (main args)
  "Serve the hello handler on 127.0.0.1 at the port in ARGS; never returns."
  (let ((port (string->number (cadr args))))
    (format (current-error-port)
            "builtin-hello: listening on http://127.0.0.1:~a/\n" port)
    (run-server handler 'http (list #:port port))))

(main (command-line))

;;; bench/builtin-hello.scm ends here
