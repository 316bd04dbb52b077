;;; (plucky sys zlib) --- gzip streams through libz, with flushes

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Debian's guile-zlib writes nothing on `force-output' (its port
;;; compresses only when closed or full), and a server-sent event must
;;; leave when the handler flushes.  So plucky calls libz itself:
;;; deflate(3) with Z_SYNC_FLUSH where the handler flushes, Z_FINISH at
;;; the end.  A <deflater> owns a z_stream in a bytevector (the collector
;;; does not move it) and zlib's state, which `deflater-end!' frees: call
;;; it exactly once, never from a finalizer.  libz is opened the first
;;; time a deflater is made.
;;;
;;; Code:

(define-module (plucky sys zlib)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module ((system foreign)
                #:select (pointer->procedure pointer-address make-pointer
                          pointer->string int void uint64 %null-pointer))
  #:use-module ((system foreign-library) #:select (load-foreign-library foreign-library-pointer))
  #:use-module ((plucky sys libc) #:select (bytevector-address))
  #:export (make-deflater
            deflater?
            deflate!
            deflater-reset!
            deflater-end!))

;; struct z_stream on LP64 (zlib.h): 112 bytes.
(define z-stream-size 112)
(define offset-next-in 0)
(define offset-avail-in 8)
(define offset-next-out 24)
(define offset-avail-out 32)

(define Z_NO_FLUSH 0)
(define Z_SYNC_FLUSH 2)
(define Z_FINISH 4)
(define Z_STREAM_END 1)
(define Z_BUF_ERROR -5)

(define library #f)
(define %deflate-init #f)
(define %deflate #f)
(define %deflate-reset #f)
(define %deflate-end #f)
(define version #f)

(define (open-libz!)
  (unless library
    (let* ((lib (load-foreign-library "libz" #:extensions '(".so.1" ".so")))
           (fn (lambda (name return args)
                 (pointer->procedure return (foreign-library-pointer lib name) args))))
      (set! %deflate-init (fn "deflateInit2_" int (list uint64 int int int int int uint64 int)))
      (set! %deflate (fn "deflate" int (list uint64 int)))
      (set! %deflate-reset (fn "deflateReset" int (list uint64)))
      (set! %deflate-end (fn "deflateEnd" int (list uint64)))
      (set! version (string->utf8 (string-append
                                   (pointer->string ((fn "zlibVersion" '* '())))
                                   "\x00")))
      (set! library lib))))

(define-record-type <deflater>
  (%make-deflater stream address out out-address)
  deflater?
  (stream deflater-stream)              ; bytevector: the z_stream
  (address deflater-address)            ; its address
  (out deflater-out)                    ; bytevector: where deflate writes
  (out-address deflater-out-address))

(define out-size 16384)

(define* (make-deflater #:key (level 6))
  "Return a new deflater that writes the gzip format (RFC 1952) at
compression LEVEL (1-9)."
  (open-libz!)
  (let* ((stream (make-bytevector z-stream-size 0))
         (address (bytevector-address stream))
         (out (make-bytevector out-size)))
    (let ((status (%deflate-init address level 8 31 8 0 (bytevector-address version)
                                 z-stream-size)))
      (unless (zero? status)
        (error "deflateInit2 failed" status))
      (%make-deflater stream address out (bytevector-address out)))))

(define (deflate! deflater bv start end mode)
  "Feed the bytes [START, END) of BV to DEFLATER and return the list of
bytevectors it produced, in order.  MODE is none (keep what deflate
holds back), flush (Z_SYNC_FLUSH: all input so far can be decoded) or
finish (the end of the stream)."
  (let ((stream (deflater-stream deflater))
        (flush (case mode ((none) Z_NO_FLUSH) ((flush) Z_SYNC_FLUSH) (else Z_FINISH))))
    (bytevector-u64-native-set! stream offset-next-in (+ (bytevector-address bv) start))
    (bytevector-u32-native-set! stream offset-avail-in (- end start))
    (let lp ((chunks '()))
      (bytevector-u64-native-set! stream offset-next-out (deflater-out-address deflater))
      (bytevector-u32-native-set! stream offset-avail-out out-size)
      (let* ((status (%deflate (deflater-address deflater) flush))
             (left (bytevector-u32-native-ref stream offset-avail-out))
             (made (- out-size left))
             (chunks (if (> made 0)
                         (let ((chunk (make-bytevector made)))
                           (bytevector-copy! (deflater-out deflater) 0 chunk 0 made)
                           (cons chunk chunks))
                         chunks)))
        (cond
         ((and (< status 0) (not (= status Z_BUF_ERROR)))
          (error "deflate failed" status))
         ;; Output space ran out: there may be more.
         ((zero? left) (lp chunks))
         ((and (= flush Z_FINISH) (not (= status Z_STREAM_END))) (lp chunks))
         (else
          ;; BV must stay alive until here: deflate read it by address.
          (bytevector-length bv)
          (reverse chunks)))))))

(define (deflater-reset! deflater)
  "Make DEFLATER ready for a new stream, keeping its memory; return it."
  (%deflate-reset (deflater-address deflater))
  deflater)

(define (deflater-end! deflater)
  "Free zlib's state of DEFLATER; return nothing.  Call it once."
  (%deflate-end (deflater-address deflater))
  (if #f #f))

;;; (plucky sys zlib) ends here
