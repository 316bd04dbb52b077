;;; (plucky sys inline) --- procedures inlined where they are called, with none left to load

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `plucky serve' loads its modules on every start, and loading runs in
;;; Guile's VM, before any JIT.  A top-level macro costs there: Guile
;;; keeps it in the module, so loading the .go builds every syntax object
;;; its transformer holds and interns the symbols they name, then defines
;;; it; `define-inlinable' makes a macro and a procedure.  A procedure
;;; that is only ever called in the file that defines it needs neither
;;; once the file is compiled.
;;;
;;; (define-inline (NAME FORMAL ...) BODY ...), in a file that imports
;;; this module while it is compiled only,
;;;
;;;   (eval-when (expand) (use-modules (plucky sys inline)))
;;;
;;; makes NAME a macro of the compiler alone: (NAME ARG ...) becomes
;;; ((lambda (FORMAL ...) BODY ...) ARG ...), which evaluates each ARG
;;; once, as a call would, and which the compiler inlines, as it does a
;;; `define-inlinable' procedure's calls.  NAME is not a value: it may
;;; only be called, and only in that file; at run time there is no NAME
;;; and no (plucky sys inline).  (plucky http parse) and (plucky server
;;; loop) use it: a `define-inlinable' costs every start its macro's load
;;; (bench/startup-instructions).
;;;
;;; Code:

(define-module (plucky sys inline)
  #:export (define-inline))

(define-syntax-rule (define-inline (name formal ...) body ...)
  (eval-when (expand)
    (define-syntax name
      (lambda (x)
        (syntax-case x ()
          ((_ arg (... ...))
           #'((lambda (formal ...) body ...) arg (... ...))))))))

;;; (plucky sys inline) ends here
