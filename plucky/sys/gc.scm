;;; (plucky sys gc) --- start-up without a garbage collection

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; bin/plucky loads (plucky command), and through it every module a
;;; server needs, inside `call-without-collections'.  Why: every symbol
;;; Guile interns is an entry of a weak table, and libgc runs a full
;;; collection each time its table of such weak references grows past
;;; 4,096 entries (`GC_grow_table' in libgc's finalize.c).  `guile -c 1'
;;; ends with about 3,700 of them; loading plucky's modules adds about
;;; 2,700, so that collection came in the middle of the loading, with
;;; nothing to collect: at that point nearly all the heap is code and
;;; data just loaded.  It cost 8.3M instructions over both threads
;;; (callgrind, `(use-modules (plucky command))': 64.1M -> 55.7M), about
;;; one sixth of plucky's start-up beyond Guile's own (bench/startup).
;;; With collections off the table still grows; the heap grows instead
;;; of being collected (it did not need to: 2.8 MB either way).  They
;;; are back on before the app file is loaded, and the next collection
;;; comes when allocation calls for it, as always.
;;;
;;; libgc counts `GC_disable' calls, so this nests; the dynamic wind
;;; turns collections back on if THUNK raises or escapes.
;;;
;;; Code:

(define-module (plucky sys gc)
  #:use-module (system foreign)
  #:export (call-without-collections))

;; libguile is linked with libgc: its symbols are in the process.
(define gc-disable
  (pointer->procedure void (dynamic-func "GC_disable" (dynamic-link)) '()))
(define gc-enable
  (pointer->procedure void (dynamic-func "GC_enable" (dynamic-link)) '()))

(define (call-without-collections thunk)
  "Call THUNK with libgc's collections off and return its values;
collections are back on when it returns, raises or escapes."
  (dynamic-wind gc-disable thunk gc-enable))

;;; (plucky sys gc) ends here
