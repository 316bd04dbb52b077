;;; (plucky http guile-web) --- Guile's (web http) without SRFI-19 at start-up

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; plucky hands handlers genuine (web request) records, so it loads
;;; Guile's (web request), (web response) and (web http).  (web http)
;;; imports (srfi srfi-19) for its date headers (Date, If-Modified-Since,
;;; Last-Modified…), and loading SRFI-19 (and the (ice-9 i18n) it
;;; imports) is the largest single cost of `plucky serve''s start-up
;;; that a first request does not need: 5.9M of the 65.1M instructions
;;; callgrind counts from exec to the first response of `plucky serve
;;; apps/hello.scm --workers 1' (`guile -c 1' alone: 24.4M; bench/startup
;;; times the whole).  A request for / never touches a date.  (Alone,
;;; `guile -c '(use-modules (srfi srfi-19))'' costs 13.4M more than
;;; `guile -c 1': its symbols take Guile's weak tables past the 4,096
;;; entries at which libgc grows them with a full collection; in plucky
;;; that collection comes anyway, from its own modules.)
;;;
;;; So this module, imported before anything that imports (web …), loads
;;; (web http) while the name (srfi srfi-19) stands for a proxy, then
;;; gives the name back:
;;;
;;;   - (web http) imports the proxy's interface.  Looking up one of
;;;     SRFI-19's exported names in it (the first call of a procedure of
;;;     (web http) that uses `current-date', `time-utc->date'…) loads
;;;     the real SRFI-19, in the ordinary way, and answers with the real
;;;     variable; any other name is not there, at no cost.
;;;   - Loading (web http) uses two private bindings of SRFI-19, through
;;;     its record macros: `date', the record type, to make the date
;;;     behind `Expires: 0' (`*date-in-the-past*') and read its zone, and
;;;     `%date?-procedure', the validator of every date header.  The
;;;     proxy answers a record type made here exactly as SRFI-19 makes
;;;     its own (name, fields, printer), and a `date?' for that type.
;;;     When SRFI-19 is loaded later, by anyone, its definition of `date'
;;;     adopts that very type: this module puts a `make-record-type' in
;;;     (srfi srfi-9), the module whose `define-record-type' SRFI-19's
;;;     code calls it from, that hands SRFI-19 the type made here, once,
;;;     and passes every other call on to Guile's, then takes itself out.
;;;     So every date (web http) ever makes, before or after SRFI-19 is
;;;     loaded, is a genuine SRFI-19 date.  Any other private name loads
;;;     the real SRFI-19 at once (correct, only not lazy).
;;;   - The rest of (web http)'s code that uses SRFI-19 refers to the
;;;     module (srfi srfi-19) by name when it first runs, after the name
;;;     was given back: Guile loads the real one then.
;;;
;;; Everyone else who imports (srfi srfi-19) (an app, a library, Guile's
;;; (web …) modules loaded later) gets the real module, loaded when they
;;; ask for it: the proxy is only ever in (web http)'s list of imports.
;;; If (web http) or SRFI-19 is already loaded when this module loads,
;;; it does nothing.  tests/http/guile-web.scm checks that SRFI-19 stays
;;; unloaded by plucky's own modules, and that dates parsed before and
;;; after it loads, and the Expires date, are SRFI-19 dates that Guile's
;;; header writers accept.
;;;
;;; Code:

(define-module (plucky http guile-web)
  #:export (srfi-19-loaded?))

(define srfi-19 '(srfi srfi-19))

(define (loaded-module name)
  ;; -> the module NAME if it has been loaded, else #f; loads nothing
  (let ((module (resolve-module name #f #:ensure #f)))
    (and module (module-public-interface module) module)))

(define (srfi-19-loaded?)
  "Return #t if Guile's (srfi srfi-19) has been loaded in this process."
  (and (loaded-module srfi-19) #t))

(define-syntax srfi-19-exports
  ;; SRFI-19's exported names, read when this file is compiled, from the
  ;; Guile that compiles it: the proxy must claim exactly these.
  (lambda (x)
    (syntax-case x ()
      ((_)
       (datum->syntax
        x
        `(quote ,(sort (module-map (lambda (name variable) name)
                                   (resolve-interface '(srfi srfi-19)))
                       (lambda (a b)
                         (string<? (symbol->string a) (symbol->string b))))))))))

(define exports (srfi-19-exports))

(define-syntax srfi-19-date-fields
  ;; The fields of SRFI-19's record type `date', read when this file is
  ;; compiled: the type made here must be the one SRFI-19 would make.
  (lambda (x)
    (syntax-case x ()
      ((_)
       (datum->syntax
        x
        `(quote ,(record-type-fields
                  (module-ref (resolve-module '(srfi srfi-19)) 'date))))))))

(define date-fields (srfi-19-date-fields))

(define (make-date-type-for-srfi-19!)
  ;; -> the record type `date' that SRFI-19 will adopt when it loads
  (let* ((srfi-9 (resolve-module '(srfi srfi-9)))
         (type (make-record-type 'date date-fields
                                 (module-ref srfi-9 'default-record-printer)))
         (unclaimed type))
    ;; SRFI-19's `define-record-type' expands, in (srfi srfi-9)'s scope,
    ;; to (make-record-type 'date '(nanosecond …) default-record-printer):
    ;; a binding of that name in (srfi srfi-9) takes precedence over
    ;; Guile's for the code compiled from it.
    (module-define! srfi-9 'make-record-type
                    (lambda (name fields . rest)
                      (if (and unclaimed
                               (eq? name 'date)
                               (equal? fields date-fields)
                               (equal? (module-name (current-module)) srfi-19))
                          (let ((type unclaimed))
                            (set! unclaimed #f)
                            (module-remove! srfi-9 'make-record-type)
                            type)
                          (apply make-record-type name fields rest))))
    type))

(define (load-web-http/lazy-srfi-19!)
  (let* ((directory (resolve-module '(srfi) #f))
         (proxy (make-module))
         (interface (make-module))
         (date-type (make-date-type-for-srfi-19!))
         (date? (lambda (object)
                  (and (struct? object) (eq? (struct-vtable object) date-type))))
         (standing? #t))
    (define (give-name-back!)
      (when standing?
        (set! standing? #f)
        (hashq-remove! (module-submodules directory) 'srfi-19)))
    (define (real-module)
      ;; Loads SRFI-19, the ordinary way, once the proxy is gone.
      (give-name-back!)
      (resolve-interface srfi-19)
      (resolve-module srfi-19 #f))
    (set-module-name! proxy srfi-19)
    (set-module-name! interface srfi-19)
    (set-module-kind! interface 'interface)
    (set-module-public-interface! proxy interface)
    (set-module-binder! interface
                        (lambda (module name define?)
                          (and (not define?)
                               (memq name exports)
                               (module-local-variable
                                (module-public-interface (real-module)) name))))
    (set-module-binder! proxy
                        (lambda (module name define?)
                          (case (and (not define?) name)
                            ((#f) #f)
                            ((date) (make-variable date-type))
                            ((%date?-procedure) (make-variable date?))
                            (else (module-local-variable (real-module) name)))))
    (module-define-submodule! directory 'srfi-19 proxy)
    (dynamic-wind
      (lambda () #t)
      (lambda () (resolve-interface '(web http)))
      give-name-back!)))

(unless (or (loaded-module '(web http)) (loaded-module srfi-19))
  (load-web-http/lazy-srfi-19!))

;;; (plucky http guile-web) ends here
