;;; (plucky sys record) --- define-record-type/lean, a synonym of SRFI-9's define-record-type

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; plucky's records are SRFI-9 records, one idiom.
;;; `define-record-type/lean' is SRFI-9's `define-record-type' under
;;; another name, kept while modules still use it; write
;;; `define-record-type' in new code.  Its users import this module
;;; while they are compiled only,
;;;
;;;   (eval-when (expand) (use-modules (plucky sys record)))
;;;
;;; and the records they define are SRFI-9's, whose accessors and
;;; modifiers Guile inlines where they are called.
;;;
;;; Code:

(define-module (plucky sys record)
  #:use-module (srfi srfi-9)
  #:export (define-record-type/lean))

(define-syntax-rule (define-record-type/lean type constructor predicate field ...)
  (define-record-type type constructor predicate field ...))

;;; (plucky sys record) ends here
