;;; (plucky http guile-web) --- Guile's (web …) modules and what they import, loaded at first use

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; plucky hands handlers genuine (web request) records, which needs
;;; Guile's (web request) and (web uri), which import (web http), (ice-9
;;; regex), (ice-9 iconv), (ice-9 rdelim), (ice-9 binary-ports) and
;;; (ice-9 textual-ports).  None of their procedures is called before
;;; the first request, nor by a request from curl, wget, ab or a health
;;; check and an answer that plucky parses and writes itself; loading
;;; them is dear.  Three things here keep them off the start-up path:
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
;;; ordinary way.
;;;
;;; 3. (web uri) and (web request) wait for their code too, though every
;;;    request is a <request> holding a <uri>: those record types are
;;;    made here, ahead, and claimed for the code (`claim-record-type!',
;;;    the way of SRFI-19's `date' above), so that the records plucky
;;;    makes before the code runs are the code's records after.  Their
;;;    other exports are SRFI-9's macros, the predicate and the
;;;    accessors, which a procedure that loads the code cannot stand
;;;    for: each is made here as a macro that expands as SRFI-9's does,
;;;    naming the type and its procedure by their private names in the
;;;    module (`record-macro'), which the module registered here binds
;;;    as Guile's module does (`record-ahead!').  So code compiled against
;;;    either module runs with either: plucky's, built while its modules
;;;    wait, and an app Guile compiles in plucky's process and later runs
;;;    without plucky.  The first call of one of their procedures (say
;;;    `uri->string', `build-request') loads them; a module that imports
;;;    them after that gets Guile's own macros.  A record type stays
;;;    claimed until its module's code has loaded whole, so a load that
;;;    fails halfway hands the same type to the next.  What differs:
;;;    the functional setters of (srfi srfi-9 gnu), `set-field' and
;;;    `set-fields', do not know the accessors made here, so code that
;;;    uses them on requests or URIs fails to compile while the modules
;;;    wait for their code, and, in a module that imported them before
;;;    the code loaded, after too.  Saved: 1.75M of the 38.3M
;;;    instructions from exec to the first response (bench/startup-
;;;    instructions).
;;;
;;; tests/http/guile-web.scm checks that plucky's own
;;; modules, and a request parsed and answered, leave SRFI-19 and the
;;; deferred modules unloaded; that each deferred module has Guile's
;;; names, loads at a first call through a prefixed import and answers
;;; as Guile's does, for threads calling at once too; that a patch made
;;; before the load stays, a failed load is tried again and an exception
;;; thrown into the loading thread leaves the procedures whole; that
;;; every road to (web http) loads it and sees its bindings; and that
;;; dates parsed before and after SRFI-19 loads, and the Expires date,
;;; are SRFI-19 dates that Guile's header writers accept; that a request
;;; parsed before (web request) loads is its record after, that its
;;; accessors raise what Guile's do, and that code compiled against the
;;; registered modules runs with Guile's, and the other way round.
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
    ;; (module-shape NAME): (OWN RE-EXPORTS RECORD), read when this file
    ;; is compiled: OWN, the names the module NAME defines and exports
    ;; that are procedures; RE-EXPORTS, ((NAME . MODULE) …), the names it
    ;; exports from the modules it uses; RECORD, #f, or, for a module
    ;; whose other exports are the macros of its one SRFI-9 record type,
    ;; (TYPE-BINDING TYPE-NAME FIELDS CONSTRUCTOR-BINDING (MACRO . KIND)
    ;; …): the record type's binding, name and fields, the binding of its
    ;; constructor's procedure, and each exported macro with what it is,
    ;; `predicate' or the index of the field it reads (found by calling
    ;; its procedure on a record).  Any other export fails the compile.
    (lambda (x)
      (syntax-case x ()
        ((_ name)
         (let* ((name (syntax->datum #'name))
                (module (resolve-module name))
                (own '())
                (re-exports '())
                (macros '()))
           (module-for-each
            (lambda (symbol variable)
              (if (eq? variable (module-local-variable module symbol))
                  (cond
                   ((not (variable-bound? variable))
                    (error "unbound; cannot load at its first call" name symbol))
                   ((procedure? (variable-ref variable))
                    (set! own (cons symbol own)))
                   ((macro? (variable-ref variable))
                    (set! macros (cons symbol macros)))
                   (else
                    (error "not a procedure; cannot load at its first call" name symbol)))
                  (let ((source (find (lambda (interface)
                                        (eq? variable (module-variable interface symbol)))
                                      (module-uses module))))
                    (unless source
                      (error "re-exported from no module it uses" name symbol))
                    (set! re-exports (acons symbol (module-name source) re-exports)))))
            (resolve-interface name))
           (datum->syntax
            x
            `(quote (,own ,re-exports
                          ,(and (pair? macros) (record-shape name module macros)))))))))))

(eval-when (expand load eval)
  (define (inlinable-procedure-name macro)
    ;; SRFI-9's inlinable macro MACRO keeps its procedure under this name
    (symbol-append '% macro '-procedure)))

(eval-when (expand)
  (define (record-shape name module macros)
    ;; RECORD of `module-shape', MACROS being the exported macros
    (define (procedure-of macro)
      (let ((variable (module-local-variable module (inlinable-procedure-name macro))))
        (unless (and variable (procedure? (variable-ref variable)))
          (error "an exported macro that is not a SRFI-9 record's" name macro))
        (variable-ref variable)))
    (let ((types (filter-map (lambda (entry)
                               (and (variable-bound? (cdr entry))
                                    (record-type? (variable-ref (cdr entry)))
                                    (cons (car entry) (variable-ref (cdr entry)))))
                             (hash-map->list cons (module-obarray module)))))
      (unless (= 1 (length types))
        (error "exported macros, and not exactly one record type" name types))
      (let* ((type (cdar types))
             (fields (record-type-fields type))
             ;; SRFI-9 keeps the constructor in the type (what
             ;; record-type-constructor answers): its binding's name
             (constructor
              (let ((procedure (struct-ref type (+ 2 vtable-offset-user))))
                (find (lambda (symbol)
                        (let ((variable (module-local-variable module symbol)))
                          (and variable (variable-bound? variable)
                               (eq? procedure (variable-ref variable))
                               (string-suffix? "-procedure" (symbol->string symbol)))))
                      (hash-map->list (lambda (k v) k) (module-obarray module)))))
             (procedure (and constructor
                             (variable-ref (module-local-variable module constructor))))
             (record (and procedure
                          (equal? (procedure-minimum-arity procedure)
                                  (list (length fields) 0 #f))
                          (let ((record (apply procedure (iota (length fields)))))
                            ;; its arguments are the fields, in order
                            (and (every (lambda (i) (eqv? i (struct-ref record i)))
                                        (iota (length fields)))
                                 record)))))
        (unless record
          (error "no constructor taking every field, in order" name))
        (list (caar types) (record-type-name type) fields constructor
              (map (lambda (macro)
                     (let* ((procedure (procedure-of macro))
                            (value (procedure record)))
                       (cons macro
                             (cond ((and (eq? value #t) (not (procedure 'other))) 'predicate)
                                   ((and (exact-integer? value) (< value (length fields))) value)
                                   (else (error "an exported macro neither predicate nor accessor"
                                                name macro))))))
                   macros))))))

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

;;; Record types made ahead of the code that defines them.  A SRFI-9
;;; `define-record-type' expands, in (srfi srfi-9)'s scope, to
;;; (make-record-type 'NAME '(FIELD …) default-record-printer): a binding
;;; of that name in (srfi srfi-9) takes precedence over Guile's for the
;;; code compiled from it.  While a claim is pending, the one here hands
;;; the module that claims it the type made ahead, once.

(define claims '())      ; ((MODULE-NAME TYPE-NAME FIELDS . TYPE) …) pending

(define (release-claims! owner)
  (set! claims (remove (lambda (claim) (equal? (car claim) owner)) claims))
  (when (null? claims)
    (let ((srfi-9 (resolve-module '(srfi srfi-9))))
      (when (module-local-variable srfi-9 'make-record-type)
        (module-remove! srfi-9 'make-record-type)))))

(define (pending-claim owner type-name fields)
  ;; the pending claim (OWNER TYPE-NAME FIELDS . TYPE), or #f
  (find (lambda (claim)
          (and (equal? (car claim) owner) (eq? (cadr claim) type-name)
               (equal? (caddr claim) fields)))
        claims))

(define (claim-record-type! owner type-name fields)
  "Return a record type TYPE-NAME with FIELDS, made as SRFI-9 makes one,
that the `define-record-type' of TYPE-NAME with those FIELDS in the module
OWNER (a module name) will adopt when its code runs, in place of a type
of its own; the same one if it is claimed already and not yet adopted."
  (let ((srfi-9 (resolve-module '(srfi srfi-9))))
    (define (make-record-type* name fields . rest)
      ;; the current module's name read without naming an anonymous one
      (let* ((owner ((record-accessor module-type 'name) (current-module)))
             (claim (and owner (pending-claim owner name fields))))
        (if claim
            (begin
              ;; a module loaded here keeps its claim until its load succeeds
              (unless (assoc (car claim) deferred)
                (release-claims! (car claim)))
              (cdddr claim))
            (apply make-record-type name fields rest))))
    (or (let ((pending (pending-claim owner type-name fields)))
          (and pending (cdddr pending)))
        (let ((type (make-record-type type-name fields
                                      (module-ref srfi-9 'default-record-printer))))
          (when (null? claims)
            (module-define! srfi-9 'make-record-type make-record-type*))
          (set! claims (cons (cons* owner type-name fields type) claims))
          type))))

(define (call-with-lazy-srfi-19 thunk)
  ;; Call THUNK, which loads (web http)'s code, while the name (srfi
  ;; srfi-19) stands for the proxy (see the Commentary).
  (let* ((directory (resolve-module '(srfi) #f))
         (proxy (make-named-module srfi-19))
         (interface (module-public-interface proxy))
         ;; the record type `date' that SRFI-19 will adopt when it loads
         (date-type (claim-record-type! srfi-19 'date date-fields))
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
  ;; module meanwhile go to the loaded one too.  A module whose other
  ;; exports are its record type's macros gets those ahead of its code
  ;; too (see `record-ahead!'); once the code has loaded, they are its.
  (let* ((directory (resolve-module (drop-right name 1) #f))
         (leaf (last name))
         (module (make-named-module name))
         (interface (module-public-interface module))
         (own '())                      ; ((symbol variable loader) …)
         (ahead '())                    ; names the code's own replace: see record-ahead!
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
                         (unless (or (assq symbol own) (memq symbol ahead))
                           (hashq-set! (module-obarray loaded) symbol variable)))
                       (module-obarray module))
        ;; the record's macros: the code's own, in the interface that
        ;; importers share too
        (for-each (lambda (symbol)
                    (let ((variable (module-local-variable loaded-interface symbol)))
                      (when (and variable (module-local-variable interface symbol))
                        (hashq-set! (module-obarray interface) symbol variable))))
                  ahead)))
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
                (set! deferred (alist-delete name deferred))
                (release-claims! name))))))))
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
              (cadr shape))
    (when (caddr shape)
      (set! ahead (record-ahead! name module interface (caddr shape))))
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

(define (record-constructor-procedure type n)
  ;; a procedure of N arguments that makes a record of TYPE: fixed
  ;; arities for those of (web uri) and (web request), made per request
  (case n
    ((6) (lambda (a b c d e f) (make-struct/simple type a b c d e f)))
    ((7) (lambda (a b c d e f g) (make-struct/simple type a b c d e f g)))
    (else (lambda fields
            (unless (= n (length fields))
              (scm-error 'wrong-number-of-args #f
                         "Wrong number of arguments to constructor of ~A" (list type) #f))
            (apply make-struct/simple type fields)))))

(define (record-macro name type-binding macro kind)
  ;; MACRO, an export of the module NAME's SRFI-9 record type, as a macro
  ;; that expands as SRFI-9's does: a call, to the type check and the
  ;; struct-ref (or, KIND being `predicate', the check alone); a
  ;; reference, to its procedure.  The expansion names the record type
  ;; and the procedure by their private names in NAME, which Guile's
  ;; module binds as this module does (see `record-ahead!'): code
  ;; compiled against either runs with either.
  (define (private symbol)
    `(@@ ,name ,symbol))
  (make-syntax-transformer
   macro 'macro
   (lambda (form)
     (syntax-case form ()
       ((_ object)
        (with-syntax ((type (datum->syntax #'here (private type-binding)))
                      (who (datum->syntax form macro)))
          (if (eq? kind 'predicate)
              #'(let ((o object))
                  (and (struct? o) (eq? (struct-vtable o) type)))
              (with-syntax ((index (datum->syntax form kind)))
                #'(let ((s object))
                    (if (eq? (struct-vtable s) type)
                        (struct-ref s index)
                        ((@@ (srfi srfi-9) throw-bad-struct) s 'who)))))))
       ((_ argument ...)
        (syntax-violation macro "Wrong number of arguments" form))
       (id
        (identifier? #'id)
        (datum->syntax #'here (private (inlinable-procedure-name macro))))))))

(define (named procedure name)
  ;; PROCEDURE, which prints and shows in backtraces as NAME, as
  ;; SRFI-9's procedures do under their %NAME-procedure names
  (set-procedure-property! procedure 'name name)
  procedure)

(define (record-ahead! name module interface record)
  ;; The module NAME's one SRFI-9 record type, which its code has not yet
  ;; made: RECORD, from `module-shape'.  The type is claimed ahead (see
  ;; `claim-record-type!'), so records made now are the code's records
  ;; once it has run.  Bound in MODULE under the code's private names:
  ;; the type, its constructor's procedure, and the procedures of the
  ;; exported macros (predicate and accessors, with SRFI-9's checks and
  ;; errors), which code compiled against Guile's module, plucky's own,
  ;; looks up; and the exported macros themselves (`record-macro').  None
  ;; of these loads the code.  -> the private names bound, which the
  ;; code's own bindings replace when it loads.
  (match record
    ((type-binding type-name fields constructor-binding macros)
     (let ((type (claim-record-type! name type-name fields)))
       (define bound '())
       (define (bind! symbol value)
         ;; -> the variable bound to SYMBOL in MODULE
         (let ((variable (make-variable value)))
           (hashq-set! (module-obarray module) symbol variable)
           (set! bound (cons symbol bound))
           variable))
       (let ((constructor (named (record-constructor-procedure type (length fields))
                                 constructor-binding)))
         ;; what record-type-constructor answers, as SRFI-9 sets it
         (struct-set! type (+ 2 vtable-offset-user) constructor)
         (bind! type-binding type)
         (bind! constructor-binding constructor))
       (for-each (match-lambda
                   ((macro . kind)
                    (let ((procedure-name (inlinable-procedure-name macro)))
                      (hashq-set! (module-obarray interface) macro
                                  (bind! macro (record-macro name type-binding macro kind)))
                      (bind! procedure-name
                             (named
                              (if (eq? kind 'predicate)
                                  (lambda (object)
                                    (and (struct? object) (eq? (struct-vtable object) type)))
                                  (lambda (s)
                                    (if (eq? (struct-vtable s) type)
                                        (struct-ref s kind)
                                        ((@@ (srfi srfi-9) throw-bad-struct) s macro))))
                              procedure-name)))))
                 macros)
       bound))))

(eval-when (expand)
  (define-syntax with-shapes
    ;; (with-shapes NAME …) -> the NAMEs, each with its shape read when
    ;; this file is compiled: ((NAME . SHAPE) …)
    (syntax-rules ()
      ((_ name ...) (list (cons 'name (module-shape name)) ...)))))

;; (web uri), (web request) and (web http), and Guile's modules they
;; import, in the order they must be registered in (a module whose names
;; another re-exports comes first); no procedure of theirs is called
;; before the first request, nor by a request and answer that plucky
;; handles itself.  Those already loaded are left as they are.
(define deferred-modules
  ;; ((NAME . SHAPE) …): see `module-shape'
  (with-shapes (ice-9 regex) (ice-9 rdelim) (ice-9 binary-ports)
               (ice-9 iconv) (ice-9 textual-ports) (web http)
               (web uri) (web request)))

(for-each (lambda (entry)
            (unless (loaded-module (car entry))
              (register-ahead-of-code! (car entry) (cdr entry))))
          deferred-modules)

;;; (plucky http guile-web) ends here
