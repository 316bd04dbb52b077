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
;;; time a deflater is made.  A body the caller holds whole goes through
;;; `deflate-bytevector': one deflate(3) call into a buffer of
;;; deflateBound(3) bytes that the deflater keeps, and one copy out.
;;;
;;; WebSocket's permessage-deflate (RFC 7692) wants raw deflate (no gzip
;;; or zlib wrapper) with a window of its own size, each message ended by
;;; a sync flush whose empty stored block's tail (00 00 FF FF) is left
;;; off the wire: `make-deflater #:format 'raw' and `deflate-message',
;;; and on the way in an <inflater> (`inflate-message' puts the tail
;;; back) whose output is bounded, so that a small message that inflates
;;; to gigabytes stops at the bound instead of filling memory.
;;;
;;; Code:

(define-module (plucky sys zlib)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module ((system foreign)
                #:select (pointer->procedure pointer-address make-pointer
                          pointer->string int void uint32 uint64 %null-pointer))
  #:use-module ((system foreign-library) #:select (load-foreign-library foreign-library-pointer))
  #:use-module ((plucky sys libc) #:select (bytevector-address))
  #:export (make-deflater
            deflater?
            deflate!
            deflate-bytevector
            gzip-bytevector
            deflater-reset!
            deflater-end!
            deflate-message
            make-inflater
            inflater?
            inflate!
            inflate-message
            inflater-reset!
            inflater-end!))

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
(define Z_NEED_DICT 2)

(define library #f)
(define %deflate-init #f)
(define %deflate #f)
(define %deflate-reset #f)
(define %deflate-bound #f)
(define %deflate-end #f)
(define %inflate-init #f)
(define %inflate #f)
(define %inflate-reset #f)
(define %inflate-end #f)
(define version #f)

(define (open-libz!)
  (unless library
    (let* ((lib (load-foreign-library "libz" #:extensions '(".so.1" ".so")))
           (fn (lambda (name return args)
                 (pointer->procedure return (foreign-library-pointer lib name) args))))
      (set! %deflate-init (fn "deflateInit2_" int (list uint64 int int int int int uint64 int)))
      (set! %deflate (fn "deflate" int (list uint64 int)))
      (set! %deflate-reset (fn "deflateReset" int (list uint64)))
      (set! %deflate-bound (fn "deflateBound" uint64 (list uint64 uint64)))
      (set! %deflate-end (fn "deflateEnd" int (list uint64)))
      (set! %inflate-init (fn "inflateInit2_" int (list uint64 int uint64 int)))
      (set! %inflate (fn "inflate" int (list uint64 int)))
      (set! %inflate-reset (fn "inflateReset" int (list uint64)))
      (set! %inflate-end (fn "inflateEnd" int (list uint64)))
      (set! version (string->utf8 (string-append
                                   (pointer->string ((fn "zlibVersion" '* '())))
                                   "\x00")))
      (set! library lib))))

(define-record-type <deflater>
  (%make-deflater level format stream address out out-address whole)
  deflater?
  (level deflater-level)
  (format deflater-format)              ; gzip or raw
  (stream deflater-stream)              ; bytevector: the z_stream
  (address deflater-address)            ; its address
  (out deflater-out)                    ; bytevector: where deflate writes
  (out-address deflater-out-address)
  ;; bytevector: where `deflate-bytevector' writes a whole stream, at
  ;; most whole-limit bytes, grown to the largest bound asked for
  (whole deflater-whole set-deflater-whole!))

(define out-size 16384)

;; `deflate-bytevector' keeps its output buffer between calls up to
;; this size; a larger body gets a buffer of its own each time.
(define whole-limit (* 1024 1024))

(define* (make-deflater #:key (level 6) (format 'gzip) (window-bits 15)
                        (mem-level 8))
  "Return a new deflater at compression LEVEL (1-9) that writes FORMAT:
gzip (RFC 1952) or raw (RFC 1951, no header nor trailer).  WINDOW-BITS
(9-15) and MEM-LEVEL (1-9) trade memory for ratio, as in deflateInit2(3)."
  (open-libz!)
  (let* ((stream (make-bytevector z-stream-size 0))
         (address (bytevector-address stream))
         (out (make-bytevector out-size))
         (bits (case format
                 ((gzip) (+ 16 window-bits))
                 ((raw) (- window-bits))
                 (else (error "unknown deflate format" format)))))
    (let ((status (%deflate-init address level 8 bits mem-level 0
                                 (bytevector-address version) z-stream-size)))
      (unless (zero? status)
        (error "deflateInit2 failed" status))
      (%make-deflater level format stream address out (bytevector-address out) #vu8()))))

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

(define* (deflate-bytevector deflater bv #:optional (start 0) (end (bytevector-length bv)))
  "Return the bytes [START, END) of BV compressed by DEFLATER as one
whole stream, in a fresh bytevector.  DEFLATER is reset first, so that
a stream it was left in the middle of (an error, an abandoned body) is
dropped; one call of deflate(3) writes the stream into a buffer of
deflateBound(3) bytes that DEFLATER keeps for the next call.  DEFLATER
is left at the end of that stream: `deflater-reset!' it before
`deflate!'."
  (deflate-whole deflater bv start end 0 0))

(define (deflate-whole deflater bv start end head tail)
  ;; -> a fresh bytevector: HEAD bytes left for the caller, the stream
  ;; of BV's [START, END), TAIL bytes left for the caller
  (let* ((address (deflater-address deflater))
         (stream (deflater-stream deflater))
         (n (- end start)))
    (%deflate-reset address)
    (let* ((bound (%deflate-bound address n))
           (whole (let ((kept (deflater-whole deflater)))
                    (cond ((<= bound (bytevector-length kept)) kept)
                          ((<= bound whole-limit)
                           (let ((new (make-bytevector bound)))
                             (set-deflater-whole! deflater new)
                             new))
                          (else (make-bytevector bound))))))
      (bytevector-u64-native-set! stream offset-next-in (+ (bytevector-address bv) start))
      (bytevector-u32-native-set! stream offset-avail-in n)
      (bytevector-u64-native-set! stream offset-next-out (bytevector-address whole))
      (bytevector-u32-native-set! stream offset-avail-out bound)
      (let ((status (%deflate address Z_FINISH)))
        ;; BV and WHOLE must stay alive until here: deflate used them
        ;; by address.
        (bytevector-length bv)
        (unless (= status Z_STREAM_END)
          ;; deflateBound promises room for the whole stream
          (%deflate-reset address)
          (error "deflate failed" status))
        (let* ((made (- bound (bytevector-u32-native-ref stream offset-avail-out)))
               (out (make-bytevector (+ head made tail))))
          (bytevector-copy! whole 0 out head made)
          out)))))

;;; gzip around raw deflate, for whole bodies.  zlib's own gzip wrapper
;;; computes the CRC-32 with its table-driven crc32 (most of what a
;;; response costs beside deflate itself: bench/instructions-gzip);
;;; libdeflate's crc32 uses the CPU's carry-less multiply and costs far
;;; less.  When libdeflate is installed the wrapper is written
;;; here, byte for byte what zlib writes (RFC 1952: no name, mtime 0,
;;; the XFL zlib derives from the level, OS Unix); zlib's crc32 serves
;;; when it is not.

(define crc32 #f)                        ; (crc32 crc address length) -> crc

(define (open-crc32!)
  (unless crc32
    (set! crc32
          (let ((lib (false-if-exception
                      (load-foreign-library "libdeflate" #:extensions '(".so.0" ".so")))))
            (if lib
                (pointer->procedure uint32 (foreign-library-pointer lib "libdeflate_crc32")
                                    (list uint32 uint64 uint64))
                (pointer->procedure uint64 (foreign-library-pointer library "crc32_z")
                                    (list uint64 uint64 uint64)))))))

(define (gzip-extra-flags level)
  ;; XFL as zlib's deflate.c sets it: 2 for the slowest, 4 for the
  ;; fastest (-1 is zlib's default, 6)
  (cond ((= level 9) 2)
        ((<= 0 level 1) 4)
        (else 0)))

(define* (gzip-bytevector deflater bv #:optional (start 0) (end (bytevector-length bv)))
  "Return the bytes [START, END) of BV as one gzip member (RFC 1952)
compressed by DEFLATER, a raw deflater (see `make-deflater'), in a
fresh bytevector: the same bytes as a gzip deflater of the same level,
window and memory makes of them, as `deflate-bytevector' makes them."
  (unless (eq? (deflater-format deflater) 'raw)
    (error "gzip-bytevector: a raw deflater" deflater))
  (open-crc32!)
  (let* ((out (deflate-whole deflater bv start end 10 8))
         (n (bytevector-length out))
         (crc (crc32 0 (+ (bytevector-address bv) start) (- end start))))
    ;; BV must stay alive until here: crc32 read it by address.
    (bytevector-length bv)
    (bytevector-u32-set! out 0 #x1f8b0800 (endianness big)) ; magic, deflate, no flags
    (bytevector-u32-set! out 4 0 (endianness little))      ; mtime
    (bytevector-u8-set! out 8 (gzip-extra-flags (deflater-level deflater)))
    (bytevector-u8-set! out 9 3)                            ; OS: Unix
    (bytevector-u32-set! out (- n 8) crc (endianness little))
    (bytevector-u32-set! out (- n 4) (logand (- end start) #xFFFFFFFF) (endianness little))
    out))

(define (deflater-reset! deflater)
  "Make DEFLATER ready for a new stream, keeping its memory; return it."
  (%deflate-reset (deflater-address deflater))
  deflater)

(define (deflater-end! deflater)
  "Free zlib's state of DEFLATER; return nothing.  Call it once."
  (%deflate-end (deflater-address deflater))
  (if #f #f))

;; The tail of the empty stored block that ends a sync flush.
(define sync-tail #vu8(0 0 #xFF #xFF))

(define (join chunks)
  ;; CHUNKS, in order -> one bytevector
  (let ((whole (make-bytevector (apply + (map bytevector-length chunks)))))
    (let lp ((chunks chunks) (at 0))
      (if (null? chunks)
          whole
          (let ((n (bytevector-length (car chunks))))
            (bytevector-copy! (car chunks) 0 whole at n)
            (lp (cdr chunks) (+ at n)))))))

(define (deflate-message deflater bv)
  "Return the bytevector that carries BV, a whole message, compressed by
DEFLATER, a raw deflater, as permessage-deflate sends it (RFC 7692,
7.2.1): flushed, without the sync flush's final 00 00 FF FF."
  (let* ((whole (join (deflate! deflater bv 0 (bytevector-length bv) 'flush)))
         (n (bytevector-length whole)))
    (if (and (>= n 4)
             (= (bytevector-u32-ref whole (- n 4) (endianness big)) #x0000FFFF))
        (let ((cut (make-bytevector (- n 4))))
          (bytevector-copy! whole 0 cut 0 (- n 4))
          cut)
        whole)))

(define-record-type <inflater>
  (%make-inflater stream address out out-address)
  inflater?
  (stream inflater-stream)              ; bytevector: the z_stream
  (address inflater-address)
  (out inflater-out)                    ; bytevector: where inflate writes
  (out-address inflater-out-address))

(define* (make-inflater #:key (window-bits 15))
  "Return a new inflater of raw deflate data (RFC 1951) made with a
window of at most 2^WINDOW-BITS bytes."
  (open-libz!)
  (let* ((stream (make-bytevector z-stream-size 0))
         (address (bytevector-address stream))
         (out (make-bytevector out-size)))
    (let ((status (%inflate-init address (- window-bits)
                                 (bytevector-address version) z-stream-size)))
      (unless (zero? status)
        (error "inflateInit2 failed" status))
      (%make-inflater stream address out (bytevector-address out)))))

(define (inflate! inflater bv start end limit)
  "Feed the bytes [START, END) of BV to INFLATER; return the list of
bytevectors it produced, in order, the symbol too-big as soon as they
pass LIMIT bytes (inflating stops there), or the symbol invalid when
the data is not deflate."
  (let ((stream (inflater-stream inflater)))
    (bytevector-u64-native-set! stream offset-next-in (+ (bytevector-address bv) start))
    (bytevector-u32-native-set! stream offset-avail-in (- end start))
    (let lp ((chunks '()) (total 0))
      (bytevector-u64-native-set! stream offset-next-out (inflater-out-address inflater))
      (bytevector-u32-native-set! stream offset-avail-out out-size)
      (let* ((status (%inflate (inflater-address inflater) Z_SYNC_FLUSH))
             (left (bytevector-u32-native-ref stream offset-avail-out))
             (made (- out-size left))
             (total (+ total made)))
        (cond
         ((or (and (< status 0) (not (= status Z_BUF_ERROR)))
              (= status Z_NEED_DICT))
          'invalid)
         ((> total limit) 'too-big)
         (else
          (let ((chunks (if (> made 0)
                            (let ((chunk (make-bytevector made)))
                              (bytevector-copy! (inflater-out inflater) 0 chunk 0 made)
                              (cons chunk chunks))
                            chunks)))
            (if (and (zero? left) (not (= status Z_STREAM_END)))
                ;; Output space ran out: there may be more.
                (lp chunks total)
                (begin
                  ;; BV must stay alive until here: inflate read it by address.
                  (bytevector-length bv)
                  (when (= status Z_STREAM_END)
                    ;; A final block ends the stream; a next message
                    ;; starts a new one.
                    (%inflate-reset (inflater-address inflater)))
                  (reverse chunks))))))))))

(define (inflate-message inflater bv limit)
  "Return the message that BV, a payload of permessage-deflate (RFC
7692, 7.2.2), inflates to with INFLATER, as a bytevector; the symbol
too-big when it passes LIMIT bytes, invalid when BV is not deflate."
  (let ((head (inflate! inflater bv 0 (bytevector-length bv) limit)))
    (if (symbol? head)
        head
        (let ((tail (inflate! inflater sync-tail 0 4
                              (- limit (apply + (map bytevector-length head))))))
          (if (symbol? tail)
              tail
              (join (append head tail)))))))

(define (inflater-reset! inflater)
  "Make INFLATER ready for a new stream, keeping its memory; return it."
  (%inflate-reset (inflater-address inflater))
  inflater)

(define (inflater-end! inflater)
  "Free zlib's state of INFLATER; return nothing.  Call it once."
  (%inflate-end (inflater-address inflater))
  (if #f #f))

;;; (plucky sys zlib) ends here
