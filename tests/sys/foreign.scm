;;; tests/sys/foreign.scm --- (plucky sys foreign)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; (plucky sys foreign) takes Guile's FFI primitives from libguile's
;;; initialisers rather than from (system foreign), unless that is loaded
;;; already.  Which modules are loaded is a property of the process, so
;;; the cases run in a fresh Guile (`fresh-guile-value'): plucky's
;;; modules leave (system foreign) and (system foreign-library) unloaded;
;;; the primitives work (a C function called, a missing symbol an error);
;;; their type codes are (system foreign)'s; without libguile's
;;; initialisers, Guile's modules serve; with (system foreign) loaded
;;; first, its very procedures are used.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (tests lib harness)
             (tests lib command))

(test-begin "sys/foreign")

(define loaded?
  ;; which of Guile's FFI modules a fresh Guile has loaded
  "(map (lambda (name)
          (let ((module (resolve-module name #f #:ensure #f)))
            (and module (module-public-interface module) #t)))
        '((system foreign) (system foreign-library)))")

(test-group "without (system foreign)"
  (test-equal "plucky's modules take the primitives from libguile's initialisers, and leave Guile's FFI modules unloaded"
    '(extensions (#f #f))
    (fresh-guile-value "(use-modules (plucky command))"
                       "(list ((@ (plucky sys foreign) foreign-source))" loaded? ")"))
  (test-equal "a C function called through them: getpid"
    #t
    (fresh-guile-value "(use-modules (plucky sys foreign))"
                       "(= ((pointer->procedure int (symbol-address \"getpid\") '())) (getpid))"))
  (test-equal "a C function with errno: close(-1) is EBADF"
    (list -1 EBADF)
    (fresh-guile-value "(use-modules (plucky sys foreign))"
                       "(call-with-values (lambda () ((pointer->procedure int (symbol-address \"close\") (list int) #:return-errno? #t) -1)) list)"))
  (test-equal "a symbol the program lacks is an error"
    'error
    (fresh-guile-value "(use-modules (plucky sys foreign))"
                       "(catch #t (lambda () (symbol-address \"plucky_no_such_function\")) (lambda _ 'error))"))
  (test-equal "a missing initialiser: none"
    #f
    (fresh-guile-value "(use-modules (plucky sys foreign))"
                       "((@@ (plucky sys foreign) extension-module) \"scm_init_plucky_no_such\")"))
  (test-equal "the type codes and sizes are (system foreign)'s, loaded afterwards"
    #t
    (fresh-guile-value
     "(use-modules ((plucky sys foreign) #:prefix p:))"
     "(and (equal? (list p:void p:int p:unsigned-int p:long p:unsigned-long p:unsigned-short p:size_t p:ssize_t p:uintptr_t)
                   (map (lambda (name) (module-ref (resolve-interface '(system foreign)) name))
                        '(void int unsigned-int long unsigned-long unsigned-short size_t ssize_t uintptr_t)))
           (= (p:sizeof p:long) ((@ (system foreign) sizeof) (@ (system foreign) long))))"))
  (test-equal "pointers made here and there are alike: an address round trip"
    #t
    (fresh-guile-value
     "(use-modules ((plucky sys foreign) #:prefix p:) (rnrs bytevectors))"
     "(define bv (make-bytevector 8 7))"
     "(define address (p:pointer-address (p:bytevector->pointer bv)))"
     "(use-modules (system foreign))"
     "(= 7 (bytevector-u8-ref (pointer->bytevector (make-pointer address) 8) 3))")))

(test-group "without libguile's initialisers"
  ;; `primitive-modules' given initialisers libguile lacks: Guile's modules
  (test-equal "no \"scm_init_foreign\": (system foreign), whose pointer->procedure works"
    '(modules #t #t)
    (fresh-guile-value
     "(use-modules (plucky sys foreign))"
     "(call-with-values (lambda () ((@@ (plucky sys foreign) primitive-modules) \"scm_init_plucky_no_such\" \"scm_init_system_foreign_library\"))
        (lambda (foreign library source)
          (list source
                (eq? foreign (resolve-module '(system foreign)))
                (= (((module-ref foreign 'pointer->procedure) int (symbol-address \"getpid\") '()))
                   (getpid)))))"))
  (test-equal "no dlopen initialiser: (system foreign-library), whose dlsym works"
    '(#t #t)
    (fresh-guile-value
     "(use-modules (plucky sys foreign) (rnrs bytevectors))"
     "(call-with-values (lambda () ((@@ (plucky sys foreign) primitive-modules) \"scm_init_foreign\" \"scm_init_plucky_no_such\"))
        (lambda (foreign library source)
          (list (eq? library (resolve-module '(system foreign-library)))
                (= (pointer-address ((module-ref library 'dlsym) ((module-ref library 'dlopen) #f 1) \"getpid\"))
                   (pointer-address (symbol-address \"getpid\"))))))")))

(test-group "with (system foreign) loaded first"
  (test-equal "its own procedures are used, nothing initialised again"
    '(modules #t #t)
    (fresh-guile-value
     "(use-modules (system foreign) ((plucky sys foreign) #:prefix p:))"
     "(list (p:foreign-source)
            (eq? p:pointer->procedure pointer->procedure)
            (eq? (make-pointer 0) (@ (system foreign) %null-pointer)))")))

(test-end "sys/foreign")
