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
  #:use-module (ice-9 format)
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
;; web json read)).  db (the database clients) is web's sibling: the
;; server's waits through (plucky server), JSON through (plucky web
;; json), its C library through sys; and it fills the store seams of
;; (plucky web session) and (plucky web limit) (records of procedures:
;; web never imports db).  apps use the public web and db
;; modules and (plucky server) only; the drop-in, (plucky server).  The command and
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
                                                    (plucky web json) (plucky web session)
                                                    (plucky web limit) (plucky sys ...))
    (apps    ("apps/")                              (plucky server) (plucky web _) (plucky db _))
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

(define (module-name? x)
  (and (pair? x) (list? x) (every symbol? x)))

(define (spec-module spec)
  ;; (plucky web html) or ((plucky web html) #:select …) -> the name
  (cond ((module-name? spec) spec)
        ((and (pair? spec) (module-name? (car spec))) (car spec))
        (else #f)))

(define (head? form . symbols)
  (and (pair? form) (memq (car form) symbols) (list? form)))

(define (form-imports form)
  ;; -> the module names FORM imports or refers to, outermost first
  (cond
   ((head? form 'define-module)
    (let lp ((options (cddr form)) (found '()))
      (cond
       ((null? options) (reverse found))
       ((and (memq (car options) '(#:use-module #:autoload)) (pair? (cdr options)))
        (lp (cddr options) (cons (spec-module (cadr options)) found)))
       (else (lp (cdr options) found)))))
   ((head? form 'use-modules) (map spec-module (cdr form)))
   ((and (head? form '@ '@@) (= (length form) 3) (module-name? (cadr form)))
    (list (cadr form)))
   ((and (head? form 'resolve-module 'resolve-interface) (pair? (cdr form))
         (head? (cadr form) 'quote) (module-name? (cadr (cadr form))))
    (list (cadr (cadr form))))
   ((head? form 'quote) '())
   ((pair? form)
    (append (form-imports (car form))
            (if (list? (cdr form)) (append-map form-imports (cdr form)) (form-imports (cdr form)))))
   (else '())))

(define (file-imports root file)
  "Return the plucky modules FILE (relative to ROOT) imports, each as
(MODULE . LINE), LINE that of the top-level form naming it."
  (append-map (lambda (read)
                ;; READ: (FORM START-LINE END-LINE)
                (filter-map (lambda (module)
                              (and (pair? module) (eq? (car module) 'plucky)
                                   (cons module (cadr read))))
                            (form-imports (car read))))
              (read-forms (string-append root "/" file))))

(define (layer-violations root)
  "Return each import of a module its file's layer may not use, as
(FILE LINE MODULE), in file order."
  (append-map (lambda (file)
                (let ((layer (file-layer file)))
                  (if (not layer)
                      '()
                      (filter-map (lambda (import)
                                    ;; IMPORT: (MODULE . LINE)
                                    (and (not (may-use? layer (car import)))
                                         (list file (cdr import) (car import))))
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
  (cond
   ((head? form 'quote) '())
   ((symbol? form) (if (memq form ffi-procedures) (list form) '()))
   ((pair? form)
    (append (ffi-uses (car form))
            (if (list? (cdr form)) (append-map ffi-uses (cdr form)) (ffi-uses (cdr form)))))
   (else '())))

(define (ffi-violations root)
  "Return each use of Guile's FFI outside plucky/sys/, as (FILE LINE
WHAT): WHAT an FFI module imported, or an FFI procedure named."
  (append-map
   (lambda (file)
     (if (string-prefix? "plucky/sys/" file)
         '()
         (let ((forms (read-forms (string-append root "/" file))))
           (append
            (filter-map (lambda (read)
                          ;; READ: (FORM START-LINE END-LINE)
                          (let* ((form (car read))
                                 (modules (filter (lambda (m) (member m ffi-modules))
                                                  (form-imports form)))
                                 (procedures (if (head? form 'define-module)
                                                 '()
                                                 (ffi-uses form))))
                            (and (or (pair? modules) (pair? procedures))
                                 (list file (cadr read)
                                       (append modules (delete-duplicates procedures))))))
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
  (cond
   ((and (head? form 'define 'define* 'define-inlinable) (pair? (cdr form))
         (pair? (cadr form)) (symbol? (car (cadr form))))
    (car (cadr form)))
   ((and (head? form 'define 'define*) (= (length form) 3) (symbol? (cadr form))
         (head? (caddr form) 'lambda 'lambda* 'case-lambda))
    (cadr form))
   (else #f)))

(define (longest-procedures root count)
  "Return the COUNT longest top-level procedures under ROOT, each as
(LINES FILE NAME), longest first."
  (let ((sized (append-map
                (lambda (file)
                  (filter-map (lambda (read)
                                ;; READ: (FORM START-LINE END-LINE)
                                (let ((name (procedure-name (car read))))
                                  (and name
                                       (list (+ 1 (- (caddr read) (cadr read))) file name))))
                              (read-forms (string-append root "/" file))))
                (source-files root))))
    (list-head (sort sized (lambda (a b) (> (car a) (car b))))
               (min count (length sized)))))

(define (main args)
  "Print the layer and FFI violations under the root (the first of ARGS,
else the current directory) and the largest modules and procedures;
exit 1 if there is a violation."
  (let* ((root (if (> (length args) 1) (cadr args) (getcwd)))
         (layer (layer-violations root))
         (ffi (ffi-violations root)))
    (for-each (lambda (v)
                ;; V: (FILE LINE MODULE)
                (format #t "~a:~a: imports ~s, which its layer (~a) may not use~%"
                        (car v) (cadr v) (caddr v) (car (file-layer (car v)))))
              layer)
    (for-each (lambda (v)
                ;; V: (FILE LINE WHAT)
                (format #t "~a:~a: FFI outside plucky/sys/: ~s~%" (car v) (cadr v) (caddr v)))
              ffi)
    (format #t "largest modules (lines):~%")
    (for-each (lambda (m) (format #t "  ~6d  ~a~%" (car m) (cdr m)))
              (largest-modules root 5))
    (format #t "longest procedures (lines):~%")
    (for-each (lambda (p) (format #t "  ~6d  ~a  ~a~%" (car p) (cadr p) (caddr p)))
              (longest-procedures root 5))
    (exit (if (and (null? layer) (null? ffi)) 0 1))))

;;; (plucky dev layers) ends here
