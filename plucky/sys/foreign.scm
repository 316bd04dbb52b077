;;; (plucky sys foreign) --- Guile's FFI primitives, without loading (system foreign)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; plucky's system calls Guile lacks (epoll, accept4, writev, signalfd…)
;;; are C functions called through Guile's FFI: `pointer->procedure' on
;;; a function's address.  The procedures that do it are C primitives of
;;; libguile, which two of Guile's modules put in their scope at load by
;;; running an initialiser of libguile's: (system foreign) runs
;;; "scm_init_foreign" (`pointer->procedure', the C types, `sizeof'…),
;;; (system foreign-library) "scm_init_system_foreign_library" (`dlopen',
;;; `dlsym').  The rest of those modules, Scheme code plucky does not
;;; use (C structs, wrapped pointer types, the search of library paths),
;;; cost each start instructions and time from exec to the first
;;; response (bench/startup-instructions, and paired starts in
;;; "The FFI without (system foreign)" of bench/RESULTS.md as of 04b0095:
;;; `git show 04b0095:bench/RESULTS.md').
;;;
;;; This module runs the two initialisers itself, with `load-extension'
;;; (libguile registers them under those names, so nothing is searched
;;; or opened), into a module of its own that nobody imports, and takes
;;; the primitives from there: the C functions and type codes (system
;;; foreign) exports, in procedure objects of their own.  Should this
;;; Guile not have those initialisers, or should (system foreign) be
;;; loaded already, the primitives come from Guile's modules instead
;;; (`foreign-source' says which).  The one object "scm_init_foreign"
;;; makes rather than finds, the null pointer, is not exported: a later (system foreign), which
;;; runs the initialiser again, makes the null pointer libguile returns
;;; from then on, and an app comparing with its `%null-pointer' gets the
;;; same answers as without plucky.
;;;
;;; `symbol-address' finds a function in the program's global namespace:
;;; the C library, and libguile and libgc, which the guile executable
;;; links (no library is opened by name; a machine without Guile's
;;; development files has no unversioned libguile-3.0.so).
;;;
;;; Code:

(define-module (plucky sys foreign)
  #:export (pointer->procedure
            bytevector->pointer
            pointer-address
            make-pointer
            pointer->bytevector
            sizeof
            void int unsigned-int long unsigned-long unsigned-short
            size_t ssize_t uintptr_t
            symbol-address
            libc-procedure
            foreign-source))

(define (extension-module init)
  ;; -> a fresh module holding what libguile's extension INIT defines,
  ;; or #f if libguile has no extension of that name
  (let ((module (make-module)))
    (and (false-if-exception
          (save-module-excursion
           (lambda ()
             (set-current-module module)
             (load-extension (string-append "libguile-" (effective-version)) init)
             #t)))
         module)))

(define (loaded-module name)
  ;; the module NAME if its code has run in this process, else #f
  (let ((module (resolve-module name #f #:ensure #f)))
    (and module (module-public-interface module) module)))

(define (primitive-modules foreign-init library-init)
  ;; -> (values FOREIGN LIBRARY SOURCE): a module holding (system
  ;; foreign)'s primitives, one holding (system foreign-library)'s dlopen
  ;; and dlsym, and where FOREIGN came from: 'extensions when libguile's
  ;; initialiser FOREIGN-INIT ran here, 'modules when it is (system
  ;; foreign) itself, loaded already or loaded now for want of the
  ;; initialiser.  LIBRARY likewise, from LIBRARY-INIT.
  (let ((foreign (and (not (loaded-module '(system foreign)))
                      (extension-module foreign-init)))
        (library (or (loaded-module '(system foreign-library))
                     (extension-module library-init)
                     (resolve-module '(system foreign-library)))))
    (values (or foreign (resolve-module '(system foreign)))
            library
            (if foreign 'extensions 'modules))))

(define-values (foreign foreign-library source)
  (primitive-modules "scm_init_foreign" "scm_init_system_foreign_library"))

(define (foreign-source)
  "Return where this module took Guile's FFI primitives from: the symbol
`extensions' (libguile's initialiser, run here) or `modules' ((system
foreign), loaded)."
  source)

;; What (system foreign) exports under these names: the same C functions
;; and type codes (the procedure objects are its own if it was loaded
;; first, equivalent ones made by the initialiser otherwise).
(define pointer->procedure (module-ref foreign 'pointer->procedure))
(define bytevector->pointer (module-ref foreign 'bytevector->pointer))
(define pointer-address (module-ref foreign 'pointer-address))
(define make-pointer (module-ref foreign 'make-pointer))
(define pointer->bytevector (module-ref foreign 'pointer->bytevector))
(define sizeof (module-ref foreign 'sizeof))
(define void (module-ref foreign 'void))
(define int (module-ref foreign 'int))
(define unsigned-int (module-ref foreign 'unsigned-int))
(define long (module-ref foreign 'long))
(define unsigned-long (module-ref foreign 'unsigned-long))
(define unsigned-short (module-ref foreign 'unsigned-short))
(define size_t (module-ref foreign 'size_t))
(define ssize_t (module-ref foreign 'ssize_t))
(define uintptr_t (module-ref foreign 'uintptr_t))

(define program
  ;; the program's global namespace, as `(dynamic-link)' opens it
  ((module-ref foreign-library 'dlopen) #f
   (logior (module-ref foreign-library 'RTLD_LAZY)
           (module-ref foreign-library 'RTLD_LOCAL))))

(define dlsym (module-ref foreign-library 'dlsym))

(define (symbol-address name)
  "Return a pointer to the function or variable NAME (a string) of the
program: the C library's, libguile's or libgc's.  Raise an error if there
is none."
  (dlsym program name))

(define (libc-procedure return name args)
  "Return a procedure that calls the program's C function NAME (see
`symbol-address'), of argument types ARGS and return type RETURN, and
returns two values: the C result and errno."
  (pointer->procedure return (symbol-address name) args #:return-errno? #t))

;;; (plucky sys foreign) ends here
