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
;;; Here each accessor and modifier is a plain procedure.  Guile inlines
;;; a small procedure of a declarative module where the same module calls
;;; it, so inside the module the code is the same as with SRFI-9: a
;;; vtable check and a struct-ref (the check raises with `throw', which
;;; the compiler knows does not return, so later checks of the same
;;; object are dropped as SRFI-9's are).  Another module that calls them
;;; makes a procedure call: use these for records whose accessors stay
;;; in their module, SRFI-9 for those whose accessors are exported to a
;;; hot path.  With (plucky server loop)'s records: 443 KB, 3.54M
;;; instructions to load, the request path's code unchanged in size.
;;;
;;; Code:

(define-module (plucky sys record)
  #:export (define-record-type/lean))

(define-syntax define-record-type/lean
  (lambda (form)
    "Define a record type as SRFI-9's `define-record-type' does:
(define-record-type/lean <type> (constructor field ...) predicate
  (field accessor [modifier]) ...), the constructor taking any of the
fields (the others start as #f).  The accessors and modifiers are plain
procedures (see the commentary)."
    (define (field-index field fields)
      (let loop ((fields fields) (i 0))
        (cond ((null? fields)
               (syntax-violation 'define-record-type/lean "unknown field" form field))
              ((bound-identifier=? field (car fields)) i)
              (else (loop (cdr fields) (+ i 1))))))
    (define (exists pred list)
      (and (pair? list) (or (pred (car list)) (exists pred (cdr list)))))
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
                               (if (exists (lambda (a) (bound-identifier=? a field)) arguments)
                                   field
                                   #'#f))
                             fields))
                       ((index ...) (map (lambda (field) (field-index field fields)) fields)))
           #'(begin
               (define type (make-record-type 'name '(field ...)))
               (define (constructor argument ...)
                 (make-struct/simple type init ...))
               (define (predicate object)
                 (and (struct? object) (eq? (struct-vtable object) type)))
               (define-record-field type index accessor . modifier)
               ...)))))))

(define-syntax define-record-field
  (syntax-rules ()
    ((_ type index accessor)
     (define (accessor object)
       (if (eq? (struct-vtable object) type)
           (struct-ref object index)
           (throw 'wrong-type-arg 'accessor "Wrong type argument: ~S"
                  (list object) (list object)))))
    ((_ type index accessor modifier)
     (begin
       (define-record-field type index accessor)
       (define (modifier object value)
         (if (eq? (struct-vtable object) type)
             (struct-set! object index value)
             (throw 'wrong-type-arg 'modifier "Wrong type argument: ~S"
                    (list object) (list object))))))))

;;; (plucky sys record) ends here
