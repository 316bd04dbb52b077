;;; tests/sys/gc.scm --- (plucky sys gc)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; libgc's settings are the process's: each case runs in a fresh Guile
;;; (`fresh-guile-value'), which reads libgc's free-space divisor back
;;; after `collect-less-often!', with and without GC_FREE_SPACE_DIVISOR
;;; in its environment.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (tests lib harness)
             (tests lib command))

(test-begin "sys/gc")

(define divisor
  "(define (divisor)
     (((@ (system foreign) pointer->procedure) (@ (system foreign) unsigned-long)
       (dynamic-func \"GC_get_free_space_divisor\" (dynamic-link)) '())))")

(test-group "collect-less-often!"
  (test-equal "a divisor of 1" '(3 1)
    (fresh-guile-value
     divisor
     "(use-modules (plucky sys gc))"
     "(let ((before (divisor))) (collect-less-often!) (list before (divisor)))"))
  (test-equal "GC_FREE_SPACE_DIVISOR in the environment: as it says" 5
    (fresh-guile-value
     "(setenv \"GC_FREE_SPACE_DIVISOR\" \"5\")"
     divisor
     "(use-modules (plucky sys gc))"
     "(((@ (system foreign) pointer->procedure) (@ (system foreign) void)
        (dynamic-func \"GC_set_free_space_divisor\" (dynamic-link))
        (list (@ (system foreign) unsigned-long))) 5)"
     "(collect-less-often!)"
     "(divisor)")))

(test-end "sys/gc")
