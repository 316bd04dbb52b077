;;; (plucky sys zstd) --- zstd streams through libzstd, with flushes

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; As (plucky sys zlib), for zstd (RFC 8878): Debian's guile-zstd port
;;; does not flush, so plucky calls ZSTD_compressStream2 itself with
;;; ZSTD_e_flush where the handler flushes and ZSTD_e_end at the end.  A
;;; <zstd-encoder> owns a ZSTD_CCtx, freed by `zstd-encoder-end!' (once,
;;; never from a finalizer).  libzstd is opened the first time an encoder
;;; is made.
;;;
;;; Code:

(define-module (plucky sys zstd)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module ((system foreign)
                #:select (pointer->procedure pointer-address int unsigned-int size_t uint64))
  #:use-module ((system foreign-library) #:select (load-foreign-library foreign-library-pointer))
  #:use-module ((plucky sys libc) #:select (bytevector-address))
  #:export (make-zstd-encoder
            zstd-encoder?
            zstd-compress!
            zstd-encoder-reset!
            zstd-encoder-end!))

(define ZSTD_c_compressionLevel 100)
(define ZSTD_e_continue 0)
(define ZSTD_e_flush 1)
(define ZSTD_e_end 2)
(define ZSTD_reset_session_only 1)

(define library #f)
(define %create #f)
(define %free #f)
(define %set-parameter #f)
(define %compress-stream2 #f)
(define %is-error #f)
(define %reset #f)

(define (open-libzstd!)
  (unless library
    (let* ((lib (load-foreign-library "libzstd" #:extensions '(".so.1" ".so")))
           (fn (lambda (name return args)
                 (pointer->procedure return (foreign-library-pointer lib name) args))))
      (set! %create (fn "ZSTD_createCCtx" uint64 '()))
      (set! %free (fn "ZSTD_freeCCtx" size_t (list uint64)))
      (set! %set-parameter (fn "ZSTD_CCtx_setParameter" size_t (list uint64 int int)))
      (set! %compress-stream2 (fn "ZSTD_compressStream2" size_t (list uint64 uint64 uint64 int)))
      (set! %is-error (fn "ZSTD_isError" unsigned-int (list size_t)))
      (set! %reset (fn "ZSTD_CCtx_reset" size_t (list uint64 int)))
      (set! library lib))))

(define-record-type <zstd-encoder>
  (%make-zstd-encoder cctx buffers buffers-address out out-address)
  zstd-encoder?
  (cctx zstd-encoder-cctx)
  ;; bytevector: ZSTD_outBuffer {dst size pos} then ZSTD_inBuffer {src size pos}
  (buffers zstd-encoder-buffers)
  (buffers-address zstd-encoder-buffers-address)
  (out zstd-encoder-out)
  (out-address zstd-encoder-out-address))

(define out-size 16384)

(define* (make-zstd-encoder #:key (level 3))
  "Return a new zstd encoder at compression LEVEL."
  (open-libzstd!)
  (let ((cctx (%create)))
    (when (zero? cctx) (error "ZSTD_createCCtx failed"))
    (%set-parameter cctx ZSTD_c_compressionLevel level)
    (let ((buffers (make-bytevector 48 0))
          (out (make-bytevector out-size)))
      (%make-zstd-encoder cctx buffers (bytevector-address buffers)
                          out (bytevector-address out)))))

(define (zstd-compress! encoder bv start end mode)
  "Feed the bytes [START, END) of BV to ENCODER and return the list of
bytevectors it produced, in order.  MODE is none, flush (all input so
far can be decoded) or finish (the end of the frame)."
  (let ((buffers (zstd-encoder-buffers encoder))
        (op (case mode ((none) ZSTD_e_continue) ((flush) ZSTD_e_flush) (else ZSTD_e_end))))
    (bytevector-u64-native-set! buffers 24 (+ (bytevector-address bv) start))
    (bytevector-u64-native-set! buffers 32 (- end start))
    (bytevector-u64-native-set! buffers 40 0)
    (let lp ((chunks '()))
      (bytevector-u64-native-set! buffers 0 (zstd-encoder-out-address encoder))
      (bytevector-u64-native-set! buffers 8 out-size)
      (bytevector-u64-native-set! buffers 16 0)
      (let* ((address (zstd-encoder-buffers-address encoder))
             (left (%compress-stream2 (zstd-encoder-cctx encoder) address (+ address 24) op))
             (made (bytevector-u64-native-ref buffers 16))
             (chunks (if (> made 0)
                         (let ((chunk (make-bytevector made)))
                           (bytevector-copy! (zstd-encoder-out encoder) 0 chunk 0 made)
                           (cons chunk chunks))
                         chunks)))
        (cond
         ((not (zero? (%is-error left))) (error "ZSTD_compressStream2 failed" left))
         ((= op ZSTD_e_continue)
          (if (< (bytevector-u64-native-ref buffers 40) (- end start))
              (lp chunks)
              (begin (bytevector-length bv) (reverse chunks))))
         ((> left 0) (lp chunks))
         (else (bytevector-length bv) (reverse chunks)))))))

(define (zstd-encoder-reset! encoder)
  "Make ENCODER ready for a new frame, keeping its memory; return it."
  (%reset (zstd-encoder-cctx encoder) ZSTD_reset_session_only)
  encoder)

(define (zstd-encoder-end! encoder)
  "Free ENCODER's ZSTD_CCtx; return nothing.  Call it once."
  (%free (zstd-encoder-cctx encoder))
  (if #f #f))

;;; (plucky sys zstd) ends here
