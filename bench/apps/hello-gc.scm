;;; bench/apps/hello-gc.scm --- hello world plus a /gc route reporting allocation

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The app bench/rss drives over a long keep-alive run.  A plain handler
;;; file: its last expression is the handler procedure, so that
;;; `bin/plucky serve bench/apps/hello-gc.scm' and Guile's built-in server
;;; (bench/apps/builtin-hello-gc.scm, which loads this very file) run the
;;; same code.
;;;
;;;   GET /gc   -> "heap-total-allocated N\ngc-times M\nheap-size H\n": the
;;;                process's bytes allocated so far, collections so far and
;;;                current GC heap size, from (gc-stats).  bench/rss
;;;                reads it before and after its run to get bytes per
;;;                request and GCs per 1000 requests.
;;;   GET other -> "Hello, World!" as text/plain, like apps/hello.scm.
;;;
;;; Code:

(use-modules (web request)
             (web uri))

(lambda (request body)
  (if (string=? (uri-path (request-uri request)) "/gc")
      (let ((stats (gc-stats)))
        (values '((content-type . (text/plain)))
                (string-append
                 "heap-total-allocated "
                 (number->string (assq-ref stats 'heap-total-allocated))
                 "\ngc-times "
                 (number->string (assq-ref stats 'gc-times))
                 "\nheap-size "
                 (number->string (assq-ref stats 'heap-size))
                 "\n")))
      (values '((content-type . (text/plain)))
              "Hello, World!")))

;;; bench/apps/hello-gc.scm ends here
