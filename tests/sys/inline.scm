;;; tests/sys/inline.scm --- (plucky sys inline)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A define-inline procedure must answer as the procedure would, each
;;; argument evaluated once and in a call's scope; and, its reason to be,
;;; compiled, leave nothing at run time: no binding, no module.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (tests lib harness)
             (tests lib command)
             (plucky sys inline))

(test-begin "sys/inline")

(define-inline (add-twice x y) (+ x x y))

(test-equal "called, it answers as the procedure would" 7 (add-twice 2 3))

(test-equal "each argument is evaluated once"
  '(12 1)
  (let* ((count 0)
         (result (add-twice (begin (set! count (+ count 1)) 5) 2)))
    (list result count)))

(test-equal "its formals do not capture the caller's names"
  11
  (let ((x 1) (y 4))
    (add-twice (+ x y) x)))

;; Compiled, the module that uses it holds no binding for it and does not
;; need (plucky sys inline) to run: a fresh Guile loads one and says what
;; it finds.
(test-equal "compiled: works, no binding, (plucky sys inline) not loaded"
  "(7 #f #f)"
  (compiled-in-fresh-guile "
(define-module (inline-test)
  #:export (twice-plus))
(eval-when (expand) (use-modules (plucky sys inline)))
(define-inline (double x) (* 2 x))
(define (twice-plus a b) (+ (double a) b))
"
   (string-append
    "(let ((m (resolve-module '(inline-test))))"
    "  (write (list ((module-ref m 'twice-plus) 3 1)"
    "               (module-variable m 'double)"
    "               (let ((i (resolve-module '(plucky sys inline) #f #:ensure #f)))"
    "                 (and i (module-public-interface i) #t)))))")))

(test-end "sys/inline")
