;;; (plucky sys record) --- records whose accessors cost nothing to load

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `define-record-type/lean' takes the form of SRFI-9's
;;; `define-record-type' and makes the same records: Guile record types,
;;; whose values are `record?', print as records, take
;;; `set-record-type-printer!'.  What differs is what the module that
;;; defines them carries when it loads.
;;;
;;; Guile 3.0's SRFI-9 defines every accessor and modifier twice: as a
;;; procedure, and as a macro that inlines it where it is called, across
;;; modules too.  Each macro's transformer holds the syntax objects of
;;; its expansion, and the lexical context of those names the whole
;;; record definition: for a record of N fields that is N macros each
;;; holding some 2N names, built as constants when the module loads.
;;; (plucky server loop)'s five records (88 fields) made its compiled
;;; file 1.56 MB, of which a 420 KB procedure that builds those constants;
;;; loading the module cost 7.25M instructions (bench/startup-modules),
;;; a sixth of everything `plucky serve' adds to Guile's own start-up.
;;;
;;; Here the type, the constructor and the predicate are what the module
;;; holds at run time.  Each accessor and modifier is a macro of the
;;; compile-time environment only, defined in (eval-when (expand) ...):
;;; a call expands where it is written to SRFI-9's inlined code, a
;;; vtable check and a struct-ref (the check raises with `throw', which
;;; the compiler knows does not return, so later checks of the same
;;; object are dropped as SRFI-9's are); used as a value, an accessor
;;; is a lambda.  The compiled module has no binding for them, and the
;;; expansion names only (guile)'s bindings, so this module need not be
;;; loaded at run time either: import it with
;;;
;;;   (eval-when (expand) (use-modules (plucky sys record)))
;;;
;;; The price: accessors and modifiers cannot be exported, there being
;;; none at run time.  Use these records where they stay in their module,
;;; SRFI-9's where other modules read them.  (plucky server loop)'s
;;; records: 330 KB compiled, 2.58M instructions to load, the request
;;; path's code unchanged in size.
;;;
;;; Code:

(define-module (plucky sys record)
  #:use-module ((srfi srfi-1) #:select (any))
  #:export (define-record-type/lean))

(define-syntax define-record-type/lean
  (lambda (form)
    "Define a record type as SRFI-9's `define-record-type' does:
(define-record-type/lean <type> (constructor field ...) predicate
  (field accessor [modifier]) ...), the constructor taking any of the
fields (the others start as #f).  The accessors and modifiers exist only
while the module is compiled (see the commentary)."
    (define (field-index field fields)
      (let loop ((fields fields) (i 0))
        (cond ((null? fields)
               (syntax-violation 'define-record-type/lean "unknown field" form field))
              ((bound-identifier=? field (car fields)) i)
              (else (loop (cdr fields) (+ i 1))))))
    (define (record-name type)
      ;; <connection> -> connection, as SRFI-9 names its types
      (let ((name (symbol->string (syntax->datum type))))
        (datum->syntax type
                       (string->symbol
                        (if (and (> (string-length name) 2)
                                 (string-prefix? "<" name) (string-suffix? ">" name))
                            (substring name 1 (- (string-length name) 1))
                            name)))))
    (syntax-case form ()
      ((_ type (constructor argument ...) predicate (field accessor . modifier) ...)
       (let ((fields #'(field ...))
             (arguments #'(argument ...)))
         (for-each (lambda (argument) (field-index argument fields)) arguments)
         (with-syntax ((name (record-name #'type))
                       ((init ...)
                        (map (lambda (field)
                               (if (any (lambda (a) (bound-identifier=? a field)) arguments)
                                   field
                                   #'#f))
                             fields))
                       ((index ...) (map (lambda (field) (field-index field fields)) fields)))
           #'(begin
               (define type ((@ (guile) make-record-type) 'name '(field ...)))
               (define (constructor argument ...)
                 ((@ (guile) make-struct/simple) type init ...))
               (define (predicate object)
                 (and ((@ (guile) struct?) object)
                      ((@ (guile) eq?) ((@ (guile) struct-vtable) object) type)))
               (define-record-field type index accessor . modifier)
               ...)))))))

(define-syntax checked-struct-op
  ;; (checked-struct-op type name (op object argument ...)): OP (a
  ;; struct-ref or struct-set! with its index) on OBJECT if it is of
  ;; TYPE, else a wrong-type-arg error that names NAME.  Expanded while
  ;; the record's module is compiled: nothing of it is left at run time.
  ;; NAME is in the compiled code as a string, made a symbol only when
  ;; the error is raised: a quoted symbol is interned when the module
  ;; loads, some 1,000 instructions each (a name per accessor and
  ;; modifier used: (plucky server loop) interned 378 symbols, now 275).
  (lambda (form)
    (syntax-case form ()
      ((_ type name (op object argument ...))
       (with-syntax ((name-string (symbol->string (syntax->datum #'name))))
         #'(let ((value object))
             (if ((@ (guile) eq?) ((@ (guile) struct-vtable) value) type)
                 (op value argument ...)
                 ((@ (guile) throw) 'wrong-type-arg
                  ;; string-copy: the compiler would fold (string->symbol "…")
                  ;; back into a symbol constant
                  ((@ (guile) string->symbol) ((@ (guile) string-copy) name-string))
                  "Wrong type argument: ~S"
                  ((@ (guile) list) value) ((@ (guile) list) value)))))))))

(define-syntax define-field-macro
  ;; NAME, a macro of the compile-time environment only, called as
  ;; (NAME object argument ...): OP on the object, checked.  Used as a
  ;; value, NAME is a lambda.
  (syntax-rules ()
    ((_ type name (op index) argument ...)
     (eval-when (expand)
       (define-syntax name
         (lambda (form)
           (syntax-case form ()
             ((_ object argument ...)
              #'(checked-struct-op type name (op object index argument ...)))
             (_
              (identifier? form)
              #'(lambda (value argument ...) (name value argument ...))))))))))

(define-syntax define-record-field
  ;; ACCESSOR (and MODIFIER) as macros of the compile-time environment
  ;; only: see the commentary.
  (syntax-rules ()
    ((_ type index accessor)
     (define-field-macro type accessor ((@ (guile) struct-ref) index)))
    ((_ type index accessor modifier)
     (begin
       (define-field-macro type accessor ((@ (guile) struct-ref) index))
       (define-field-macro type modifier ((@ (guile) struct-set!) index) new)))))

;;; (plucky sys record) ends here
