;;; bench/upstream.d/plucky-upstream.scm --- bench/upstream's upstream row on plucky
;;;
;;; Copyright (C) 2026 the plucky authors
;;; SPDX-License-Identifier: LGPL-3.0-or-later
;;;
;;; Serve it:  UPSTREAM_URL=http://127.0.0.1:PORT/ \
;;;              bin/plucky serve bench/upstream.d/plucky-upstream.scm --workers 1
;;;
;;; Each request GETs UPSTREAM_URL with (plucky web client), which
;;; suspends the handler while it waits, and answers with the upstream's
;;; body.  The client's pool keeps the connections alive; its default of
;;; 32 idle connections per origin is raised to 1000, as the Go app's
;;; Transport, lest 500 concurrent requests open a connection each time.

(use-modules (plucky web client))

(define upstream
  (or (getenv "UPSTREAM_URL")
      (error "plucky-upstream.scm: set UPSTREAM_URL")))

(set-pool-limits! #:max-idle 1000)

(lambda (request body)
  (call-with-values (lambda () (http-get upstream #:keep-alive? #t))
    (lambda (response upstream-body)
      (values '((content-type . (text/plain))) upstream-body))))
