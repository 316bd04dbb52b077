;;; (plucky http guile-web) --- Guile's (web http) loaded at first use, without SRFI-19

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; plucky hands handlers genuine (web request) records, so it loads
;;; Guile's (web request), which imports (web http).  Loading (web http)
;;; is dear, and a request from curl, wget, ab or a health check does
;;; not need it.  Two things here keep it off the start-up path:
;;;
;;; 1. (web http) loads at first use.  Imported before anything that
;;;    imports (web …), this module registers the module (web http)
;;;    ahead of its code: a module and its public interface in which
;;;    each of the 25 names (web http) exports (all procedures) is bound,
;;;    in a variable of its own, to a procedure that loads the code and
;;;    then calls what the code put in that variable.  Every module that
;;;    imports (web http) afterwards, (web request) first, shares those
;;;    variables (with #:select, #:prefix or #:hide too).  The code's
;;;    `define-module' takes the registered module as the one named (web
;;;    http), and each of its definitions sets the variable already
;;;    there; so from the first call on, every importer sees Guile's own
;;;    procedures.  `(@@ (web http) name)' of a name not exported loads
;;;    the code too.  A procedure taken out of a variable before (say
;;;    `(define p header->string)') stays the loading one: it calls
;;;    Guile's, one call deeper.  Saved: 2.0M of the 44.3M instructions
;;;    from exec to the first response of `plucky serve apps/hello.scm'
;;;    (bench/startup-instructions), when neither the request nor the
;;;    answer needs Guile's parsers or writers: plucky parses the request
;;;    line, Host, Content-Length, Connection and the opaque headers
;;;    itself (and Accept: */*, which curl and most tools send: see
;;;    *seeded-values* in (plucky http parse)), and writes the status
;;;    line, Content-Type, Content-Length, Date and Connection itself.
;;;    A request with any other header Guile parses (a browser's) loads
;;;    it then, once.
;;;
;;; 2. (web http) imports (srfi srfi-19) for its date headers (Date,
;;;    If-Modified-Since, Last-Modified…), and loading SRFI-19 (and the
;;;    (ice-9 i18n) it imports) costs 5.9M instructions more; a request
;;;    for / never touches a date.  (Alone, `guile -c '(use-modules (srfi
;;;    srfi-19))'' costs 13.4M more than `guile -c 1': its symbols take
;;;    Guile's weak tables past the 4,096 entries at which libgc grows
;;;    them with a full collection.)  So (web http), when it loads, loads
;;;    while the name (srfi srfi-19) stands for a proxy, then gets the
;;;    name back:
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
;;; If (web http) is already loaded when this module loads, it does
;;; nothing; if SRFI-19 is when (web http) loads, (web http) loads in
;;; the ordinary way.  tests/http/guile-web.scm checks that plucky's own
;;; modules, and a request parsed and answered, leave both unloaded;
;;; that every road to (web http) loads it and sees its bindings; and
;;; that dates parsed before and after SRFI-19 loads, and the Expires
;;; date, are SRFI-19 dates that Guile's header writers accept.
;;;
;;; Code:

(define-module (plucky http guile-web)
  #:export (srfi-19-loaded?
            web-http-loaded?))

(define srfi-19 '(srfi srfi-19))
(define web-http '(web http))

(define (loaded-module name)
  ;; -> the module NAME if it has been loaded, else #f; loads nothing
  (let ((module (resolve-module name #f #:ensure #f)))
    (and module (module-public-interface module) module)))

(define (srfi-19-loaded?)
  "Return #t if Guile's (srfi srfi-19) has been loaded in this process."
  (and (loaded-module srfi-19) #t))

(define stand-in #f)            ; the module (web http) until its code runs

(define (web-http-loaded?)
  "Return #t if the code of Guile's (web http) has been loaded in this
process (the module this module registers ahead of the code does not
count until the code runs in it)."
  (and (loaded-module web-http) (not stand-in) #t))

(define-syntax module-exports
  ;; (module-exports NAME [procedures]): the names the module NAME
  ;; exports, read when this file is compiled, from the Guile that
  ;; compiles it: what stands for the module must claim exactly these.
  ;; With `procedures', compiling fails unless each is a procedure.
  (lambda (x)
    (define (exports name procedures?)
      (let ((interface (resolve-interface name)))
        (when procedures?
          (module-for-each (lambda (name variable)
                             (unless (procedure? (variable-ref variable))
                               (error "not a procedure; cannot load at its first call"
                                      name)))
                           interface))
        (sort (module-map (lambda (name variable) name) interface)
              (lambda (a b)
                (string<? (symbol->string a) (symbol->string b))))))
    (syntax-case x (procedures)
      ((_ name)
       (datum->syntax x `(quote ,(exports (syntax->datum #'name) #f))))
      ((_ name procedures)
       (datum->syntax x `(quote ,(exports (syntax->datum #'name) #t)))))))

(define exports (module-exports (srfi srfi-19)))
(define web-http-exports (module-exports (web http) procedures))

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

(define (call-with-lazy-srfi-19 thunk)
  ;; Call THUNK, which loads (web http)'s code, while the name (srfi
  ;; srfi-19) stands for the proxy (see the Commentary).
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
      thunk
      give-name-back!)))

;;;
;;; (web http) at first use
;;;

(define (load-web-http-code!)
  ;; Run (web http)'s compiled code, as Guile does when a module is first
  ;; resolved; its `define-module' finds the module registered ahead
  ;; (see below) and fills it.
  (define (load!)
    (save-module-excursion
     (lambda ()
       (with-fluids ((current-reader #f))
         (primitive-load-path "web/http")))))
  (if (loaded-module srfi-19)
      (load!)
      (call-with-lazy-srfi-19 load!)))

(define (register-web-http-ahead-of-its-code!)
  ;; Register the module (web http) and its public interface, in which
  ;; each name (web http) exports is bound, in a variable of its own, to
  ;; a procedure that loads (web http)'s code then calls what that code
  ;; put in the variable.  Importing the module, with or without
  ;; #:select, #:prefix or #:hide, shares those variables; so the code
  ;; loads at the first call of any of them, and from then on every
  ;; importer sees Guile's own procedures in them: the code's
  ;; `define-module' takes this module as the one named (web http), and
  ;; each of its definitions sets the variable already there.  (@@ (web
  ;; http) NAME) of a name not exported loads the code too.
  (let* ((directory (resolve-module '(web) #f))
         (module (make-module))
         (interface (make-module))
         (loading? #f))
    (define (load-code!)
      (when (and (eq? stand-in module) (not loading?))
        (set! loading? #t)
        (set-module-binder! module #f)
        (dynamic-wind
          (lambda () #t)
          load-web-http-code!
          (lambda () (set! loading? #f)))
        (set! stand-in #f)))
    (define (loading-procedure name variable)
      (define (call . args)
        (load-code!)
        (let ((procedure (variable-ref variable)))
          (when (eq? procedure call)
            (error "(web http) did not define" name))
          (apply procedure args)))
      call)
    (set-module-name! module web-http)
    (set-module-name! interface web-http)
    (set-module-kind! interface 'interface)
    (set-module-public-interface! module interface)
    (for-each (lambda (name)
                (let ((variable (make-undefined-variable)))
                  (variable-set! variable (loading-procedure name variable))
                  (module-add! module name variable)
                  (module-add! interface name variable)))
              web-http-exports)
    (set-module-binder! module
                        (lambda (_ name define?)
                          (and (not define?)
                               (not loading?)
                               (begin
                                 (load-code!)
                                 (hashq-ref (module-obarray module) name)))))
    (set! stand-in module)
    (module-define-submodule! directory 'http module)))

(unless (loaded-module web-http)
  (register-web-http-ahead-of-its-code!))

;;; (plucky http guile-web) ends here
