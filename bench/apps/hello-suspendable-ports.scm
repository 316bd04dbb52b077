;;; bench/apps/hello-suspendable-ports.scm --- hello, with suspendable ports installed
;;;
;;; Copyright (C) 2026 the plucky authors
;;; SPDX-License-Identifier: LGPL-3.0-or-later
;;;
;;; Serve it:  bin/plucky serve bench/apps/hello-suspendable-ports.scm --workers 1
;;;
;;; apps/hello.scm, with Guile's suspendable ports installed as the first
;;; request body read as a port (`with-body-port') installs them.
;;; bench/instructions-real with APP=bench/apps/hello-suspendable-ports.scm
;;; beside apps/hello.scm's figure is what they cost requests that never
;;; read a body as a port, once an app has (docs/waiting.md).

(use-modules (ice-9 suspendable-ports))

(install-suspendable-ports!)

(define (hello request body)
  (values '((content-type . (text/plain)))
          "Hello, World!"))

hello
