;;; bench/apps/builtin-hello-gc.scm --- hello-gc.scm on Guile's built-in server

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The peer bench/rss measures plucky against: Guile's (web server) with
;;; the 'http implementation (127.0.0.1 by default), serving the handler
;;; that bench/apps/hello-gc.scm evaluates to, so both servers run the
;;; same handler, /gc route included.
;;;
;;; Usage: guile bench/apps/builtin-hello-gc.scm PORT
;;;
;;; Code:

(use-modules (web server))

(define handler
  ;; `load' answers the value of the file's last expression: the handler.
  (load (string-append (dirname (current-filename)) "/hello-gc.scm")))

(define (main args)
  "Serve hello-gc's handler on 127.0.0.1 at the port in ARGS; never returns."
  (let ((port (string->number (cadr args))))
    (format (current-error-port)
            "builtin-hello-gc: listening on http://127.0.0.1:~a/\n" port)
    (run-server handler 'http (list #:port port))))

(main (command-line))

;;; bench/apps/builtin-hello-gc.scm ends here
