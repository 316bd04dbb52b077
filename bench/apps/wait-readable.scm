;;; bench/apps/wait-readable.scm --- a handler that only waits on a ready pipe
;;;
;;; Copyright (C) 2026 the plucky authors
;;; SPDX-License-Identifier: LGPL-3.0-or-later
;;;
;;; Serve it:  bin/plucky serve bench/apps/wait-readable.scm --workers 1
;;;
;;; Each request calls `wait-readable' on the read end of a pipe that
;;; always has a byte in it: the handler suspends and is resumed in the
;;; next round, and nothing else happens.  bench/instructions-real with
;;; APP=bench/apps/wait-readable.scm subtracts apps/hello.scm's figure
;;; to give the cost of one wait (suspension, epoll, resumption).

(use-modules (plucky server))

(define ready
  (let ((p (pipe)))
    (fcntl (car p) F_SETFL (logior O_NONBLOCK (fcntl (car p) F_GETFL)))
    (display "x" (cdr p))
    (force-output (cdr p))
    (car p)))

(lambda (request body)
  (wait-readable (port->fdes ready))
  (values '((content-type . (text/plain))) "Hello, World!"))
