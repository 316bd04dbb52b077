;;; (plucky sys shared-memory) --- memory the worker processes share

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A bytevector over an anonymous shared mapping (mmap(2), MAP_SHARED),
;;; made by the master before it forks its workers: each worker, and
;;; each worker a reload starts, sees the same bytes.  The TLS session
;;; cache lives there (plucky server tls-cache).
;;;
;;; Code:

(define-module (plucky sys shared-memory)
  #:use-module (plucky sys foreign)
  #:export (make-shared-bytevector))

(define %mmap (libc-procedure uintptr_t "mmap" (list uintptr_t size_t int int int long)))

(define PROT_READ+WRITE 3)
(define MAP_SHARED+ANONYMOUS #x21)
(define MAP_FAILED (- (expt 2 (* 8 (sizeof uintptr_t))) 1))

(define (make-shared-bytevector size)
  "Return a bytevector of SIZE zero bytes that the processes this one
forks from now on share: what one writes, the others read.  It is never
unmapped.  Raise an error if mmap(2) fails."
  (call-with-values
      (lambda () (%mmap 0 size PROT_READ+WRITE MAP_SHARED+ANONYMOUS -1 0))
    (lambda (address errno)
      (when (= address MAP_FAILED)
        (scm-error 'system-error "make-shared-bytevector" "~a"
                   (list (strerror errno)) (list errno)))
      (pointer->bytevector (make-pointer address) size))))

;;; (plucky sys shared-memory) ends here
