;;; (plucky web memfile) --- bytes kept in an anonymous file, sent with sendfile

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; An app that caches rendered pages (apps/blog) answers each hit with
;;; the same bytes.  Sent as a bytevector, a 50 KB page is copied from
;;; the heap into the socket by every writev(2); kept in a memfd
;;; (memfd_create(2)) and sent as a file body, it leaves through
;;; sendfile(2) as nginx's static file does, from pages the kernel
;;; already holds (bench/blog's index).
;;;
;;; A <memfile> is shared by the responses that send from it, on any
;;; thread, and by the cache that keeps it.  Its count of holders (an
;;; atomic box) starts at one, the cache's; each body taken adds one and
;;; its release removes it; `memfile-drop!' removes the cache's.  The
;;; last one out closes the descriptor, so that a number is never reused
;;; for another file while a response still sends from it.  Once the
;;; count has reached zero no body can be taken: `memfile-body' returns
;;; #f, and the caller renders afresh.
;;;
;;; Code:

(define-module (plucky web memfile)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 atomic)
  #:use-module ((plucky sys libc)
                #:select (fd-memfd-create fd-write fd-close bytevector-address))
  #:use-module ((plucky server) #:select (make-file-body))
  #:export (bytevector->memfile
            memfile?
            memfile-size
            memfile-body
            memfile-drop!))

(define-record-type <memfile>
  (%make-memfile fd size holders release)
  memfile?
  (fd memfile-fd)
  (size memfile-size)
  (holders memfile-holders)             ; atomic box: the cache (1) + bodies
  (release memfile-release set-memfile-release!)) ; thunk: one holder less

(define (bytevector->memfile bv)
  "Return a <memfile> holding the bytes of BV, or #f when the system
cannot make one (no memfd_create, no descriptor left)."
  (let ((fd (fd-memfd-create "plucky-page")))
    (and (>= fd 0)
         (if (write-all fd bv)
             (let ((memfile (%make-memfile fd (bytevector-length bv) (make-atomic-box 1) #f)))
               (set-memfile-release! memfile (lambda () (let-go! memfile)))
               memfile)
             (begin (fd-close fd) #f)))))

(define (write-all fd bv)
  ;; -> #t once all of BV is in FD (a memfd: writes block on nothing)
  (let ((address (bytevector-address bv))
        (count (bytevector-length bv)))
    (let lp ((at 0))
      (or (= at count)
          (let ((n (fd-write fd address at (- count at))))
            (and (> n 0) (lp (+ at n))))))))

(define (let-go! memfile)
  ;; One holder less; the last closes the descriptor.
  (let* ((box (memfile-holders memfile))
         (old (atomic-box-ref box)))
    (if (eqv? (atomic-box-compare-and-swap! box old (- old 1)) old)
        (when (= old 1)
          (fd-close (memfile-fd memfile)))
        (let-go! memfile))))

(define (hold! memfile)
  ;; -> #t with one holder more, or #f if the descriptor is closed
  (let* ((box (memfile-holders memfile))
         (old (atomic-box-ref box)))
    (and (> old 0)
         (or (eqv? (atomic-box-compare-and-swap! box old (+ old 1)) old)
             (hold! memfile)))))

(define (memfile-body memfile)
  "Return a file body (`make-file-body') that sends all of MEMFILE's
bytes, holding MEMFILE open until it is sent; or #f when MEMFILE was
dropped and its last body has been sent."
  (and (hold! memfile)
       (make-file-body (memfile-fd memfile) #:length (memfile-size memfile)
                       #:release (memfile-release memfile))))

(define (memfile-drop! memfile)
  "Give up the cache's hold on MEMFILE: its descriptor is closed now, or
when the last body sending from it is sent.  Return nothing."
  (let-go! memfile))

;;; (plucky web memfile) ends here
