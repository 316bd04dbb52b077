;;; (plucky http guile-web) --- Guile's (web http) and what (web …) imports, loaded at first use

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; plucky hands handlers genuine (web request) records, so it loads
;;; Guile's (web request) and (web uri), which import (web http), (ice-9
;;; regex), (ice-9 iconv), (ice-9 rdelim), (ice-9 binary-ports) and
;;; (ice-9 textual-ports).  None of those is called before the first
;;; request, nor by a request from curl, wget, ab or a health check and
;;; an answer that plucky parses and writes itself; loading them is dear.
;;; Two things here keep them off the start-up path:
;;;
;;; 1. They load at first use.  Imported before anything that imports
;;;    (web …), this module registers each of them ahead of its code
;;;    (`deferred-modules', unless it is loaded already): a module and
;;;    its public interface in which each name the module defines and
;;;    exports (all procedures, checked when this file is compiled) is
;;;    bound, in a variable of its own, to a procedure that loads the
;;;    code and then calls what the code defined; a name it re-exports
;;;    is bound to the variable of the module it comes from.  Every
;;;    module that imports one of them afterwards, (web request) first,
;;;    shares those variables (with #:select, #:prefix or #:hide too).
;;;    The first call of any of them, or `(@@ NAME private-name)', loads
;;;    the code, into a module of its own, under Guile's lock for loading
;;;    modules; only once it has loaded whole do the shared variables get
;;;    its procedures, and the loaded module and its interface take the
;;;    shared variables as their own (see `register-ahead-of-code!').  So
;;;    from then on every importer sees Guile's own procedures, as it
;;;    would have, and a patch made to one of them before (`module-set!')
;;;    stays, as it would had it come after.  Saved: 3.5M of the 44.3M
;;;    instructions from exec to the first response of `plucky serve
;;;    apps/hello.scm' (bench/startup-instructions; 2.0M of them by (web
;;;    http)).  plucky parses the request line, Host, Content-Length,
;;;    Connection and the opaque headers itself (and Accept: */*, which
;;;    curl and most tools send: see *seeded-values* in (plucky http
;;;    parse)), writes the status line, Content-Type, Content-Length,
;;;    Date and Connection itself, and encodes the head without (ice-9
;;;    iconv).  A request with any other header Guile parses (a
;;;    browser's) loads (web http) then, once.
;;;
;;;    What differs from loading them at start, until a module's code has
;;;    loaded: the load happens in a request, so it can fail there (say,
;;;    with no file descriptor left): that request fails, and the next
;;;    call tries again; a procedure taken out of a variable before (say
;;;    `(define p read-line)') stays the loading one, and calls Guile's
;;;    one call deeper (and is named `call'); code compiled in the
;;;    process before (an app Guile compiles on its first load) gets no
;;;    warning about a wrong number of arguments to these procedures and
;;;    does not inline them; `reload-module' of the module fails.
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
;;; A module already loaded when this module loads is left as it is; if
;;; SRFI-19 is loaded when (web http) loads, (web http) loads in the
;;; ordinary way.  tests/http/guile-web.scm checks that plucky's own
;;; modules, and a request parsed and answered, leave SRFI-19 and the
;;; deferred modules unloaded; that each deferred module has Guile's
;;; names, loads at a first call through a prefixed import and answers
;;; as Guile's does, for threads calling at once too; that a patch made
;;; before the load stays, a failed load is tried again and an exception
;;; thrown into the loading thread leaves the procedures whole; that
;;; every road to (web http) loads it and sees its bindings; and that
;;; dates parsed before and after SRFI-19 loads, and the Expires date,
;;; are SRFI-19 dates that Guile's header writers accept.
;;;
;;; Code:

(define-module (plucky http guile-web)
  #:export (srfi-19-loaded?
            web-http-loaded?
            code-loaded?
            loaded-module
            deferred-modules)
  #:use-module (srfi srfi-1)
  #:use-module (ice-9 match))

(define srfi-19 '(srfi srfi-19))
(define web-http '(web http))

(define (loaded-module name)
  "Return the module NAME (a list of symbols) if it has been loaded in
this process, else #f; load nothing."
  (let ((module (resolve-module name #f #:ensure #f)))
    (and module (module-public-interface module) module)))

(define (make-named-module name)
  ;; -> a new module NAME with an empty public interface, neither
  ;; registered under the name
  (let ((module (make-module))
        (interface (make-module)))
    (set-module-name! module name)
    (set-module-name! interface name)
    (set-module-kind! interface 'interface)
    (set-module-public-interface! module interface)
    module))

(define (srfi-19-loaded?)
  "Return #t if Guile's (srfi srfi-19) has been loaded in this process."
  (and (loaded-module srfi-19) #t))

(define deferred '())    ; ((NAME . module) …) registered, code not yet run

(define (code-loaded? name)
  "Return #t if the code of the module NAME (a list of symbols) has been
loaded in this process; a module this module registered ahead of its
code does not count until the code has run in it."
  (and (loaded-module name) (not (assoc name deferred)) #t))

(define (web-http-loaded?)
  "Return #t if the code of Guile's (web http) has been loaded in this
process (see `code-loaded?')."
  (code-loaded? web-http))

;; This file's macros run while it is compiled and are defined then only
;; (eval-when (expand)): a macro kept in the module is built and defined
;; at every start (see (plucky sys inline)).
(eval-when (expand)
  (define-syntax module-export-names
    ;; (module-export-names NAME): the names the module NAME exports, as
    ;; strings (no symbols to intern at load), read when this file is
    ;; compiled, from the Guile that compiles it: what stands for the
    ;; module must claim exactly these.
    (lambda (x)
      (syntax-case x ()
        ((_ name)
         (datum->syntax
          x
          `(quote ,(sort (module-map (lambda (name variable) (symbol->string name))
                                     (resolve-interface (syntax->datum #'name)))
                         string<?))))))))

(eval-when (expand)
  (define-syntax module-shape
    ;; (module-shape NAME): (OWN . RE-EXPORTS), read when this file is
    ;; compiled: OWN, the names the module NAME defines and exports, which
    ;; must all be procedures (compiling fails otherwise); RE-EXPORTS,
    ;; ((NAME . MODULE) …), the names it exports from the modules it uses.
    (lambda (x)
      (syntax-case x ()
        ((_ name)
         (let* ((name (syntax->datum #'name))
                (module (resolve-module name))
                (own '())
                (re-exports '()))
           (module-for-each
            (lambda (symbol variable)
              (if (eq? variable (module-local-variable module symbol))
                  (if (and (variable-bound? variable) (procedure? (variable-ref variable)))
                      (set! own (cons symbol own))
                      (error "not a procedure; cannot load at its first call" name symbol))
                  (let ((source (find (lambda (interface)
                                        (eq? variable (module-variable interface symbol)))
                                      (module-uses module))))
                    (unless source
                      (error "re-exported from no module it uses" name symbol))
                    (set! re-exports (acons symbol (module-name source) re-exports)))))
            (resolve-interface name))
           (datum->syntax x `(quote (,own . ,re-exports)))))))))

(define exports
  ;; SRFI-19's exported names, needed once (web http)'s code loads
  (delay (map string->symbol (module-export-names (srfi srfi-19)))))

(eval-when (expand)
  (define-syntax srfi-19-date-fields
    ;; The fields of SRFI-19's record type `date', read when this file is
    ;; compiled: the type made here must be the one SRFI-19 would make.
    (lambda (x)
      (syntax-case x ()
        ((_)
         (datum->syntax
          x
          `(quote ,(record-type-fields
                    (module-ref (resolve-module '(srfi srfi-19)) 'date)))))))))

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
         (proxy (make-named-module srfi-19))
         (interface (module-public-interface proxy))
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
    (set-module-binder! interface
                        (lambda (module name define?)
                          (and (not define?)
                               (memq name (force exports))
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

(define (module-file name)
  ;; (ice-9 regex) -> "ice-9/regex", as Guile finds a module's code
  (string-join (map symbol->string name) "/"))

(define (load-code! name)
  ;; Run the compiled code of the module NAME as Guile does when a module
  ;; is first resolved, the name free: its `define-module' makes the
  ;; module.  (web http)'s without SRFI-19.
  (define (load!)
    (save-module-excursion
     (lambda ()
       (with-fluids ((current-reader #f))
         (primitive-load-path (module-file name))))))
  (if (and (equal? name web-http) (not (loaded-module srfi-19)))
      (call-with-lazy-srfi-19 load!)
      (load!)))

(define (register-ahead-of-code! name shape)
  ;; Register the module NAME and its public interface, in which each
  ;; name the module defines and exports is bound, in a variable of its
  ;; own, to a procedure that loads the module's code then calls what
  ;; that code defined; the names it re-exports are bound to the
  ;; variables of the modules it takes them from, as the code would bind
  ;; them.  SHAPE: see `module-shape'.  Importing the module, with or
  ;; without #:select, #:prefix or #:hide, shares those variables.  The
  ;; code loads, at the first call of any of them or at (@@ NAME
  ;; private-name), into a module of its own, while this one steps aside:
  ;; until it has loaded whole, the variables keep the loading procedures
  ;; (a thread that calls one then waits for the load, under Guile's lock
  ;; for loading modules; a load that fails leaves them, and this module
  ;; under the name, for the next call to try again).  Then each variable
  ;; gets the code's procedure, unless it was set to something else
  ;; meanwhile (a patch, which wins, as it would had the code loaded
  ;; first), and the loaded module and its interface take these very
  ;; variables in place of their own, so that the module under the name
  ;; and every importer share them from then on; names defined in this
  ;; module meanwhile go to the loaded one too.
  (let* ((directory (resolve-module (drop-right name 1) #f))
         (leaf (last name))
         (module (make-named-module name))
         (interface (module-public-interface module))
         (own '())                      ; ((symbol variable loader) …)
         (loading? #f))
    (define (adopt! loaded)
      ;; LOADED: the module NAME's code made; it takes our variables
      (let ((loaded-interface (module-public-interface loaded)))
        (for-each (match-lambda
                    ((symbol ours loader)
                     ;; the code's procedure, unless patched meanwhile
                     (when (eq? (variable-ref ours) loader)
                       (variable-set! ours (module-ref loaded symbol)))
                     (hashq-set! (module-obarray loaded) symbol ours)
                     (hashq-set! (module-obarray loaded-interface) symbol ours)))
                  own)
        (hash-for-each (lambda (symbol variable)
                         (unless (assq symbol own)
                           (hashq-set! (module-obarray loaded) symbol variable)))
                       (module-obarray module))))
    (define (load-once!)
      (call-with-module-autoload-lock
       (lambda ()
         (when (and (assoc name deferred) (not loading?))
           (set! loading? #t)
           (hashq-remove! (module-submodules directory) leaf)
           (let ((loaded #f))
             (dynamic-wind
               (lambda () #t)
               (lambda ()
                 (load-code! name)
                 (set! loaded (loaded-module name)))
               (lambda ()
                 (set! loading? #f)
                 (unless loaded
                   ;; This module stands again, the loading procedures in
                   ;; its variables: the next call tries again.
                   (module-define-submodule! directory leaf module))))
             ;; No async may cut this short: half the variables set
             (call-with-blocked-asyncs
              (lambda ()
                (adopt! loaded)
                (set-module-binder! module #f)
                (set! deferred (alist-delete name deferred)))))))))
    (define (loading-procedure symbol variable)
      ;; Arities up to three without a rest list: no allocation per call
      ;; for whoever took the procedure out of its variable before the
      ;; code loaded and calls it ever after.
      (define (real)
        (load-once!)
        (let ((procedure (variable-ref variable)))
          (when (eq? procedure call)
            (error "the module's code did not define it" name symbol))
          procedure))
      (define call
        (case-lambda
          (() ((real)))
          ((a) ((real) a))
          ((a b) ((real) a b))
          ((a b c) ((real) a b c))
          ((a b c . rest) (apply (real) a b c rest))))
      call)
    ;; Straight into the obarrays: `module-add!' would also tell the
    ;; modules' observers, and these new modules have none.
    (for-each (lambda (symbol)
                (let* ((variable (make-undefined-variable))
                       (loader (loading-procedure symbol variable)))
                  (variable-set! variable loader)
                  (set! own (cons (list symbol variable loader) own))
                  (hashq-set! (module-obarray module) symbol variable)
                  (hashq-set! (module-obarray interface) symbol variable)))
              (car shape))
    (for-each (lambda (re-export)
                (hashq-set! (module-obarray interface) (car re-export)
                            (module-variable (resolve-interface (cdr re-export))
                                             (car re-export))))
              (cdr shape))
    ;; (@@ NAME private-name) before the load: load, then look there
    (set-module-binder! module
                        (lambda (_ symbol define?)
                          (and (not define?)
                               (not loading?)
                               (begin
                                 (load-once!)
                                 (let ((loaded (loaded-module name)))
                                   (and loaded (not (eq? loaded module))
                                        (module-local-variable loaded symbol)))))))
    (set! deferred (acons name module deferred))
    (module-define-submodule! directory leaf module)))

(eval-when (expand)
  (define-syntax with-shapes
    ;; (with-shapes NAME …) -> the NAMEs, each with its shape read when
    ;; this file is compiled: ((NAME . SHAPE) …)
    (syntax-rules ()
      ((_ name ...) (list (cons 'name (module-shape name)) ...)))))

;; Guile's modules that (web uri), (web request) and (web http) import,
;; and those, in the order they must be registered in (a module whose
;; names another re-exports comes first); none is called before the
;; first request, nor by a request and answer that plucky handles
;; itself.  Those already loaded are left as they are.
(define deferred-modules
  ;; ((NAME . SHAPE) …): see `module-shape'
  (with-shapes (ice-9 regex) (ice-9 rdelim) (ice-9 binary-ports)
               (ice-9 iconv) (ice-9 textual-ports) (web http)))

(for-each (lambda (entry)
            (unless (loaded-module (car entry))
              (register-ahead-of-code! (car entry) (cdr entry))))
          deferred-modules)

;;; (plucky http guile-web) ends here
