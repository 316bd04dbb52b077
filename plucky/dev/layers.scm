;;; (plucky dev layers) --- who may import whom, FFI only in sys, and sizes

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The layers of STYLE.md, as data, and a reader of plucky's sources
;;; that checks them (tests/dev/layers.scm runs it over the tree):
;;;
;;;   source-files     every Scheme file under plucky/, web/, apps/ and
;;;                    bin/plucky
;;;   file-imports     the plucky modules a file names: #:use-module and
;;;                    #:autoload of `define-module', `use-modules' (also
;;;                    inside `eval-when'), `@', `@@', `resolve-module' and
;;;                    `resolve-interface' of a quoted name
;;;   layer-violations each import of a module that the file's layer may
;;;                    not use (`layers' below), as (FILE LINE MODULE)
;;;   ffi-violations   each use of Guile's FFI outside plucky/sys/, as
;;;                    (FILE LINE WHAT)
;;;   largest-modules, longest-procedures: the sizes STYLE.md asks to
;;;                    keep an eye on, in lines
;;;
;;; Adding a layer is one line of `layers'.  Run as a script it prints
;;; the violations and the sizes:
;;;
;;;   guile -L . -c '((@ (plucky dev layers) main) (command-line))' [ROOT]
;;;
;;; Code:

(define-module (plucky dev layers)
  #:use-module (srfi srfi-1)
  #:use-module (ice-9 match)
  #:use-module (ice-9 ftw)
  #:export (layers
            source-files
            file-layer
            file-imports
            layer-violations
            ffi-violations
            largest-modules
            longest-procedures
            main))

;;;
;;; The rules
;;;

;; (LAYER (FILE-PREFIX …) MAY-USE …): a file belongs to the layer of
;; the longest prefix of its path (relative to the root) that matches;
;; it may import the modules MAY-USE names.  A pattern is a module name,
;; matched exactly, or one ending in `...' (that name and any module
;; under it) or `_' (any module one level under it).  Guile's own
;; modules are not checked.
;;
;; http depends on nothing else in plucky but (plucky sys inline), a
;; macro of the compiler alone (nothing of it is loaded at run time: see
;; there).  web uses http through (plucky http), the server through
;; (plucky server), and the C libraries through their bindings in sys
;; (each sys module is the face of one library; the FFI itself, (plucky
;; sys foreign), is for sys alone: `ffi-violations'); observe likewise,
;; and the public web modules (one level: (plucky web json), not (plucky
;; web json read)).  apps and the drop-in
;; use the public web modules and (plucky server) only.  The command and
;; the developers' tools wire everything together.
(define layers
  '((sys     ("plucky/sys/")                        (plucky sys ...))
    (http    ("plucky/http/" "plucky/http.scm")     (plucky http ...) (plucky sys inline))
    (server  ("plucky/server/" "plucky/server.scm") (plucky server ...) (plucky http ...)
                                                    (plucky sys ...))
    (web     ("plucky/web/")                        (plucky web ...) (plucky http) (plucky server)
                                                    (plucky sys ...))
    (observe ("plucky/observe/")                    (plucky observe ...) (plucky http)
                                                    (plucky server) (plucky web _) (plucky sys ...))
    (db      ("plucky/db/")                         (plucky db ...) (plucky server)
                                                    (plucky web json) (plucky sys libpq))
    (apps    ("apps/")                              (plucky server) (plucky web _))
    (drop-in ("web/server/")                        (plucky server))
    (tools   ("plucky/dev/" "plucky/command.scm" "plucky/launch.scm" "bin/")
             (plucky ...))))

(define (pattern-matches? pattern module)
  (let lp ((p pattern) (m module))
    (cond
     ((equal? p '(...)) #t)
     ((equal? p '(_)) (and (pair? m) (null? (cdr m))))
     ((null? p) (null? m))
     (else (and (pair? m) (eq? (car p) (car m)) (lp (cdr p) (cdr m)))))))

(define (file-layer file)
  "Return the entry of `layers' FILE (a path relative to the root)
belongs to, or #f."
  (let ((found (filter-map (lambda (layer)
                             (let ((prefix (find (lambda (prefix) (string-prefix? prefix file))
                                                 (cadr layer))))
                               (and prefix (cons (string-length prefix) layer))))
                           layers)))
    (and (pair? found)
         (cdr (reduce (lambda (a b) (if (> (car a) (car b)) a b)) #f found)))))

(define (may-use? layer module)
  (any (lambda (pattern) (pattern-matches? pattern module)) (cddr layer)))

;;;
;;; Reading the sources
;;;

(define (source-files root)
  "Return the Scheme files under ROOT's plucky/, web/ and apps/, and
bin/plucky, as paths relative to ROOT, sorted."
  (define (under dir)
    (let ((top (string-append root "/" dir)))
      (if (file-exists? top)
          (file-system-fold
           (const #t)
           (lambda (path stat acc)
             (if (string-suffix? ".scm" path)
                 (cons (substring path (+ 1 (string-length root))) acc)
                 acc))
           (lambda (path stat acc) acc) (lambda (path stat acc) acc)
           (lambda (path stat acc) acc) (lambda (path stat errno acc) acc)
           '() top)
          '())))
  (sort (append (under "plucky") (under "web") (under "apps")
                (if (file-exists? (string-append root "/bin/plucky")) '("bin/plucky") '()))
        string<?))

(define (read-forms file)
  ;; -> ((FORM START-LINE END-LINE) …), lines counted from 1
  (call-with-input-file file
    (lambda (port)
      (let lp ((forms '()))
        (let* ((_ (skip-blank port))
               (start (+ 1 (port-line port)))
               (form (read port)))
          (if (eof-object? form)
              (reverse forms)
              (lp (cons (list form start (+ 1 (port-line port))) forms))))))))

(define (skip-blank port)
  ;; past whitespace and ; comments, so that a form's line is its own
  (let ((c (peek-char port)))
    (cond
     ((eof-object? c) #t)
     ((char-whitespace? c) (read-char port) (skip-blank port))
     ((char=? c #\;)
      (let lp () (let ((c (read-char port))) (unless (or (eof-object? c) (char=? c #\newline)) (lp))))
      (skip-blank port))
     (else #t))))

(define (spec-module spec)
  ;; (plucky web html) or ((plucky web html) #:select …) -> the name
  (match spec
    (((? symbol?) ...) spec)
    ((((? symbol?) ...) . _) (car spec))
    (_ #f)))

(define (form-imports form)
  ;; -> the module names FORM imports or refers to, outermost first
  (match form
    (('define-module name . options)
     (let lp ((options options) (found '()))
       (match options
         (((or #:use-module #:autoload) spec . rest)
          (lp rest (cons (spec-module spec) found)))
         ((_ . rest) (lp rest found))
         (() (reverse found)))))
    (('use-modules specs ...) (map spec-module specs))
    (((or '@ '@@) (? pair? module) (? symbol?)) (list module))
    (((or 'resolve-module 'resolve-interface) ('quote (? pair? module)) . _) (list module))
    (('quote _) '())
    ((a . b) (append (form-imports a) (if (list? b) (append-map form-imports b) (form-imports b))))
    (_ '())))

(define (file-imports root file)
  "Return the plucky modules FILE (relative to ROOT) imports, each as
(MODULE . LINE), LINE that of the top-level form naming it."
  (append-map (match-lambda
                ((form start end)
                 (filter-map (lambda (module)
                               (and (pair? module) (eq? (car module) 'plucky)
                                    (cons module start)))
                             (form-imports form))))
              (read-forms (string-append root "/" file))))

(define (layer-violations root)
  "Return each import of a module its file's layer may not use, as
(FILE LINE MODULE), in file order."
  (append-map (lambda (file)
                (let ((layer (file-layer file)))
                  (if (not layer)
                      '()
                      (filter-map (match-lambda
                                    ((module . line)
                                     (and (not (may-use? layer module))
                                          (list file line module))))
                                  (file-imports root file)))))
              (source-files root)))

;;;
;;; FFI outside sys
;;;

;; Guile's FFI: its modules, plucky's own door to it, and the procedures
;; that make a foreign call or find a C symbol.
(define ffi-modules
  '((system foreign) (system foreign-library) (plucky sys foreign)))

(define ffi-procedures
  '(pointer->procedure dynamic-func dynamic-link dynamic-pointer
    foreign-library-function foreign-library-pointer load-foreign-library
    symbol-address libc-procedure))

(define (ffi-uses form)
  ;; -> what of the FFI FORM uses
  (match form
    (('quote _) '())
    ((? symbol? s) (if (memq s ffi-procedures) (list s) '()))
    ((a . b) (append (ffi-uses a) (if (list? b) (append-map ffi-uses b) (ffi-uses b))))
    (_ '())))

(define (ffi-violations root)
  "Return each use of Guile's FFI outside plucky/sys/, as (FILE LINE
WHAT): WHAT an FFI module imported, or an FFI procedure named."
  (append-map
   (lambda (file)
     (if (string-prefix? "plucky/sys/" file)
         '()
         (let ((forms (read-forms (string-append root "/" file))))
           (append
            (filter-map (match-lambda
                          ((form start end)
                           (let ((modules (filter (lambda (m) (member m ffi-modules))
                                                  (form-imports form)))
                                 (procedures (if (and (pair? form) (eq? (car form) 'define-module))
                                                 '()
                                                 (ffi-uses form))))
                             (and (or (pair? modules) (pair? procedures))
                                  (list file start (append modules (delete-duplicates procedures)))))))
                        forms)))))
   (source-files root)))

;;;
;;; Sizes
;;;

(define (line-count file)
  (call-with-input-file file
    (lambda (port)
      (let lp ((n 0))
        (let ((c (read-char port)))
          (cond ((eof-object? c) n)
                ((char=? c #\newline) (lp (+ n 1)))
                (else (lp n))))))))

(define (largest-modules root count)
  "Return the COUNT largest files of `source-files' under ROOT, each as
(LINES . FILE), largest first."
  (let ((sized (map (lambda (file) (cons (line-count (string-append root "/" file)) file))
                    (source-files root))))
    (list-head (sort sized (lambda (a b) (> (car a) (car b))))
               (min count (length sized)))))

(define (procedure-name form)
  ;; the name FORM defines, if it is a top-level procedure
  (match form
    (((or 'define 'define* 'define-inlinable) ((? symbol? name) . _) . _) name)
    (((or 'define 'define*) (? symbol? name) ((or 'lambda 'lambda* 'case-lambda) . _)) name)
    (_ #f)))

(define (longest-procedures root count)
  "Return the COUNT longest top-level procedures under ROOT, each as
(LINES FILE NAME), longest first."
  (let ((sized (append-map
                (lambda (file)
                  (filter-map (match-lambda
                                ((form start end)
                                 (let ((name (procedure-name form)))
                                   (and name (list (+ 1 (- end start)) file name)))))
                              (read-forms (string-append root "/" file))))
                (source-files root))))
    (list-head (sort sized (lambda (a b) (> (car a) (car b))))
               (min count (length sized)))))

(define (main args)
  "Print the layer and FFI violations under the root (the first of ARGS,
else the current directory) and the largest modules and procedures;
exit 1 if there is a violation."
  (let ((root (match args ((_ root . _) root) (_ (getcwd)))))
    (let ((layer (layer-violations root))
          (ffi (ffi-violations root)))
      (for-each (match-lambda
                  ((file line module)
                   (format #t "~a:~a: imports ~s, which its layer (~a) may not use~%"
                           file line module (car (file-layer file)))))
                layer)
      (for-each (match-lambda
                  ((file line what)
                   (format #t "~a:~a: FFI outside plucky/sys/: ~s~%" file line what)))
                ffi)
      (format #t "largest modules (lines):~%")
      (for-each (match-lambda ((lines . file) (format #t "  ~6d  ~a~%" lines file)))
                (largest-modules root 5))
      (format #t "longest procedures (lines):~%")
      (for-each (match-lambda ((lines file name) (format #t "  ~6d  ~a  ~a~%" lines file name)))
                (longest-procedures root 5))
      (exit (if (and (null? layer) (null? ffi)) 0 1)))))

;;; (plucky dev layers) ends here
