;;; tests/dev/layers.scm --- one public module per layer; FFI only in sys

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; (plucky dev layers) over plucky's own tree: no file imports a module
;;; its layer may not use (the rules are `layers' there), and no file
;;; outside plucky/sys/ uses Guile's FFI.  The checker itself is tested
;;; first on a small tree made here, with one violation of each kind, so
;;; that a checker that finds nothing cannot pass.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (ice-9 match)
             (tests lib harness)
             (tests lib command)
             (plucky dev layers))

(test-begin "dev/layers")

;; Imports that another branch removes (branch `apps' rewrites the
;; apps on the toolkit), as (FILE MODULE).  Each must still be there:
;; once it is gone, its line here goes too.
(define pending
  ;; (FILE MODULE): a known violation, being fixed; none now
  '())

(define (write-file root path text)
  (let ((file (string-append root "/" path)))
    (system* "mkdir" "-p" (dirname file))
    (call-with-output-file file (lambda (port) (display text port)))))

(define (make-tree files)
  ;; -> a fresh directory holding FILES, ((PATH TEXT) …)
  (let ((root (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-layers-"
                             (number->string (getpid)))))
    (system* "rm" "-rf" root)
    (for-each (match-lambda ((path text) (write-file root path text))) files)
    root))

(test-group "the checker, on a tree of its own"
  (call-guarded
   (lambda ()
     (let* ((root (make-tree
                   '(("plucky/web/good.scm"
                      "(define-module (plucky web good)\n  #:use-module (plucky server)\n  #:use-module (plucky http)\n  #:use-module (plucky web json))\n")
                     ("plucky/web/bad.scm"
                      ";;; a comment\n(define-module (plucky web bad)\n  #:use-module ((plucky server loop) #:select (log-line))\n  #:autoload (plucky http date) (date-line))\n(define (f) ((@ (plucky observe accounting) declare-route!) \"/\"))\n")
                     ("plucky/observe/deep.scm"
                      "(define-module (plucky observe deep))\n(define m (resolve-interface '(plucky web json read)))\n")
                     ("plucky/db/pg.scm"
                      "(define-module (plucky db pg)\n  #:use-module (plucky server)\n  #:use-module (plucky web json)\n  #:use-module (plucky sys libpq))\n")
                     ("plucky/http/codec.scm"
                      "(define-module (plucky http codec))\n(eval-when (expand) (use-modules (plucky sys inline)))\n(define (g) (use-modules (plucky sys libc)))\n")
                     ("apps/app.scm"
                      "(use-modules (plucky server) (plucky web html) (plucky server loop))\n")
                     ("plucky/web/ffi.scm"
                      "(define-module (plucky web ffi)\n  #:use-module (system foreign))\n(define getpid* (pointer->procedure int (dynamic-func \"getpid\" (dynamic-link)) '()))\n(define (long-one x)\n  (+ x\n     1\n     2))\n")
                     ("plucky/sys/ok.scm"
                      "(define-module (plucky sys ok)\n  #:use-module (plucky sys foreign))\n(define f (pointer->procedure int (symbol-address \"getpid\") '()))\n"))))
            (found (layer-violations root)))
       (test-equal "each import a layer may not use, with its line"
         '(("apps/app.scm" 1 (plucky server loop))
           ("plucky/http/codec.scm" 3 (plucky sys libc))
           ("plucky/observe/deep.scm" 2 (plucky web json read))
           ("plucky/web/bad.scm" 2 (plucky server loop))
           ("plucky/web/bad.scm" 2 (plucky http date))
           ("plucky/web/bad.scm" 5 (plucky observe accounting)))
         found)
       (test-equal "FFI outside sys: the module and the procedures"
         '(("plucky/web/ffi.scm" 1 ((system foreign)))
           ("plucky/web/ffi.scm" 3 (pointer->procedure dynamic-func dynamic-link)))
         (ffi-violations root))
       (test-equal "the largest module first"
         "plucky/web/ffi.scm" (cdr (car (largest-modules root 3))))
       (test-equal "the longest procedure first, with its lines"
         '(4 "plucky/web/ffi.scm" long-one) (car (longest-procedures root 3)))
       (test-equal "a layer is the longest prefix that matches"
         'web (car (file-layer "plucky/web/json/read.scm")))
       (system* "rm" "-rf" root)))))

(test-group "plucky's tree"
  (call-guarded
   (lambda ()
     (let* ((found (layer-violations source-root))
            (key (lambda (v) (list (car v) (caddr v))))
            (new (remove (lambda (v) (member (key v) pending)) found))
            (fixed (remove (lambda (p) (any (lambda (v) (equal? (key v) p)) found)) pending)))
       (test-equal "no import of another layer's insides" '() new)
       (test-equal "each pending import is still there (else drop it from `pending')"
         '() fixed)
       (test-equal "no FFI outside plucky/sys/" '() (ffi-violations source-root))))))

(test-end "dev/layers")
