;;; (plucky sys nghttp2) --- libnghttp2's HPACK coder, for tests and tools

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; libnghttp2 (Debian's libnghttp2-14): its HPACK coder (RFC 7541),
;;; both tables, Huffman coding both ways, for the tests' HTTP/2 client
;;; (tests/lib/h2.scm) and tools that check header blocks: fields as
;;; pairs of strings (`hpack-decode', `hpack-encode').  A coder is freed
;;; by `hpack-free!' (once, never from a finalizer).
;;;
;;; The server does not use it: its frames and its HPACK are its own
;;; (plucky server http2, plucky http hpack).  nghttp2's session API
;;; calls back into Scheme for each field and frame, and its HPACK
;;; coder takes a call per field; a call through the FFI costs more
;;; than the work it carries (bench/instructions-h2).
;;;
;;; Code:

(define-module (plucky sys nghttp2)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module ((system foreign)
                #:select (pointer->procedure make-pointer pointer->bytevector
                          int size_t ssize_t uint64 void))
  #:use-module ((system foreign-library)
                #:select (load-foreign-library foreign-library-pointer))
  #:use-module ((plucky sys libc) #:select (bytevector-address))
  #:export (nghttp2-available?
            nghttp2-version
            nghttp2-error-message

            make-hpack-decoder
            hpack-decode
            hpack-decoder-table
            hpack-decoder-size
            make-hpack-encoder
            hpack-encode
            hpack-free!))

;;;
;;; Constants (nghttp2/nghttp2.h)
;;;

(define NGHTTP2_HD_INFLATE_FINAL 1)
(define NGHTTP2_HD_INFLATE_EMIT 2)

;;;
;;; The library
;;;

(define-syntax-rule (define-calls bind-calls! (name c-name return args) ...)
  ;; Each NAME, #f until the library is opened.
  (begin (define name #f) ...
         (define (bind-calls! fn) (set! name (fn c-name return args)) ...)))

(define-calls bind-calls!
  (%version "nghttp2_version" uint64 (list int))
  (%strerror "nghttp2_strerror" uint64 (list int))
  (%inflate-new "nghttp2_hd_inflate_new" int (list uint64))
  (%inflate-del "nghttp2_hd_inflate_del" void (list uint64))
  (%inflate-change-size "nghttp2_hd_inflate_change_table_size" int (list uint64 size_t))
  (%inflate-hd2 "nghttp2_hd_inflate_hd2" ssize_t (list uint64 uint64 uint64 uint64 size_t int))
  (%inflate-end "nghttp2_hd_inflate_end_headers" int (list uint64))
  (%inflate-entries "nghttp2_hd_inflate_get_num_table_entries" size_t (list uint64))
  (%inflate-entry "nghttp2_hd_inflate_get_table_entry" uint64 (list uint64 size_t))
  (%inflate-size "nghttp2_hd_inflate_get_dynamic_table_size" size_t (list uint64))
  (%deflate-new "nghttp2_hd_deflate_new" int (list uint64 size_t))
  (%deflate-del "nghttp2_hd_deflate_del" void (list uint64))
  (%deflate-bound "nghttp2_hd_deflate_bound" size_t (list uint64 uint64 size_t))
  (%deflate-hd "nghttp2_hd_deflate_hd" ssize_t (list uint64 uint64 size_t uint64 size_t)))

(define library #f)

(define (open-libnghttp2!)
  (unless library
    (let ((lib (load-foreign-library "libnghttp2" #:extensions '(".so.14" ".so"))))
      (bind-calls! (lambda (name return args)
                     (pointer->procedure return (foreign-library-pointer lib name) args)))
      (set! library lib))))

(define (nghttp2-available?)
  "Return true when libnghttp2 can be loaded."
  (and (false-if-exception (begin (open-libnghttp2!) #t)) #t))

(define (nghttp2-version)
  "Return the version of libnghttp2, a string such as \"1.52.0\"."
  (open-libnghttp2!)
  ;; nghttp2_info {int age; int version_num; const char *version_str; …}
  (let ((info (pointer->bytevector (make-pointer (%version 0)) 16)))
    (c-string (bytevector-u64-native-ref info 8))))

(define (c-string address)
  (let lp ((n 0))
    (if (zero? (bytevector-u8-ref (pointer->bytevector (make-pointer (+ address n)) 1) 0))
        (utf8->string (bytevector-copy (pointer->bytevector (make-pointer address) n)))
        (lp (+ n 1)))))

(define (nghttp2-error-message code)
  "Return nghttp2's message for its error CODE, a negative number."
  (open-libnghttp2!)
  (c-string (%strerror code)))

(define (out-pointer)
  ;; -> a bytevector of 8 bytes that a C call stores a pointer into
  (make-bytevector 8 0))

;;;
;;; HPACK coders
;;;

(define-record-type <hpack>
  (make-hpack pointer deflate?)
  hpack?
  (pointer hpack-pointer set-hpack-pointer!)
  (deflate? hpack-deflate?))

(define* (make-hpack-decoder #:optional (table-size 4096))
  "Return an HPACK decoder (RFC 7541) whose dynamic table may hold
TABLE-SIZE bytes, to free with `hpack-free!'."
  (open-libnghttp2!)
  (let ((out (out-pointer)))
    (%inflate-new (bytevector-address out))
    (let ((pointer (bytevector-u64-native-ref out 0)))
      (unless (= table-size 4096)
        (%inflate-change-size pointer table-size))
      (make-hpack pointer #f))))

(define (nv->pair nv)
  ;; NV: a bytevector of an nghttp2_nv.  -> (name . value), strings
  (cons (latin-1 (bytevector-u64-native-ref nv 0) (bytevector-u64-native-ref nv 16))
        (latin-1 (bytevector-u64-native-ref nv 8) (bytevector-u64-native-ref nv 24))))

(define (copy-out address length)
  (if (zero? length)
      (make-bytevector 0)
      (bytevector-copy (pointer->bytevector (make-pointer address) length))))

(define (latin-1 address length)
  (let ((bv (copy-out address length)))
    (list->string (map integer->char (bytevector->u8-list bv)))))

(define (hpack-decode decoder block)
  "Return the header list BLOCK, a bytevector holding one whole header
block, decodes to with DECODER, ((name . value) …) of strings, in
order; raise an error if it is not valid HPACK."
  (let ((pointer (hpack-pointer decoder))
        (nv (make-bytevector 40 0))
        (flags (make-bytevector 4 0))
        (base (bytevector-address block)))
    (let lp ((at 0) (headers '()))
      (bytevector-u32-native-set! flags 0 0)
      (let ((n (%inflate-hd2 pointer (bytevector-address nv) (bytevector-address flags)
                             (+ base at) (- (bytevector-length block) at) 1)))
        (when (< n 0)
          (error "hpack-decode: bad header block" (nghttp2-error-message n)))
        (let* ((f (bytevector-u32-native-ref flags 0))
               (headers (if (logtest f NGHTTP2_HD_INFLATE_EMIT)
                            (cons (nv->pair nv) headers)
                            headers)))
          (if (logtest f NGHTTP2_HD_INFLATE_FINAL)
              (begin
                (%inflate-end pointer)
                (reverse headers))
              (lp (+ at n) headers)))))))

(define (hpack-decoder-table decoder)
  "Return DECODER's dynamic table, newest entry first, ((name . value) …)."
  (let* ((pointer (hpack-pointer decoder))
         ;; counts the 61 entries of the static table too
         (count (%inflate-entries pointer)))
    ;; numbered after the 61 of the static table, 62 the newest
    (let lp ((i count) (entries '()))
      (if (< i 62)
          entries
          (lp (- i 1)
              (cons (nv->pair (pointer->bytevector
                               (make-pointer (%inflate-entry pointer i)) 40))
                    entries))))))

(define (hpack-decoder-size decoder)
  "Return the size of DECODER's dynamic table, as RFC 7541 §4.1 counts it."
  (%inflate-size (hpack-pointer decoder)))

(define* (make-hpack-encoder #:optional (table-size 4096))
  "Return an HPACK encoder whose dynamic table holds at most TABLE-SIZE
bytes, to free with `hpack-free!'."
  (open-libnghttp2!)
  (let ((out (out-pointer)))
    (%deflate-new (bytevector-address out) table-size)
    (make-hpack (bytevector-u64-native-ref out 0) #t)))

(define (name-value-array pairs)
  ;; PAIRS: ((name . value) …) of bytevectors.  -> (values nva blob
  ;; count): an array of nghttp2_nv {uint8_t *name, *value; size_t
  ;; namelen, valuelen; uint8_t flags} (40 bytes each) pointing into
  ;; BLOB, which the caller keeps until the call that takes them returns
  ;; (nghttp2 copies them).
  (let* ((count (length pairs))
         (size (let lp ((pairs pairs) (n 0))
                 (if (null? pairs)
                     n
                     (lp (cdr pairs) (+ n (bytevector-length (caar pairs))
                                        (bytevector-length (cdar pairs)))))))
         (blob (make-bytevector (max 1 size)))
         (base (bytevector-address blob))
         (nva (make-bytevector (* 40 (max 1 count)) 0)))
    (let lp ((pairs pairs) (i 0) (at 0))
      (unless (null? pairs)
        (let ((name (caar pairs))
              (value (cdar pairs)))
          (bytevector-copy! name 0 blob at (bytevector-length name))
          (bytevector-copy! value 0 blob (+ at (bytevector-length name))
                            (bytevector-length value))
          (bytevector-u64-native-set! nva i (+ base at))
          (bytevector-u64-native-set! nva (+ i 8) (+ base at (bytevector-length name)))
          (bytevector-u64-native-set! nva (+ i 16) (bytevector-length name))
          (bytevector-u64-native-set! nva (+ i 24) (bytevector-length value))
          (lp (cdr pairs) (+ i 40)
              (+ at (bytevector-length name) (bytevector-length value))))))
    (values nva blob count)))

(define (hpack-encode encoder headers)
  "Return a bytevector, the header block ENCODER makes of HEADERS
((name . value) …) of strings, Huffman-coding a string where that is
shorter."
  (call-with-values
      (lambda ()
        (name-value-array
         (map (lambda (h)
                (cons (string->latin-1 (car h)) (string->latin-1 (cdr h))))
              headers)))
    (lambda (nva blob count)
      (let* ((pointer (hpack-pointer encoder))
             (bound (%deflate-bound pointer (bytevector-address nva) count))
             (buf (make-bytevector bound))
             (n (%deflate-hd pointer (bytevector-address buf) bound
                             (bytevector-address nva) count)))
        (bytevector-length blob)
        (when (< n 0)
          (error "hpack-encode failed" (nghttp2-error-message n)))
        (bytevector-copy-range buf n)))))

(define (bytevector-copy-range bv n)
  (let ((out (make-bytevector n)))
    (bytevector-copy! bv 0 out 0 n)
    out))

(define (string->latin-1 s)
  (u8-list->bytevector (map char->integer (string->list s))))

(define (hpack-free! coder)
  "Free CODER, an HPACK encoder or decoder; return nothing.  A second
call does nothing."
  (let ((pointer (hpack-pointer coder)))
    (unless (zero? pointer)
      (set-hpack-pointer! coder 0)
      (if (hpack-deflate? coder) (%deflate-del pointer) (%inflate-del pointer))))
  (values))

;;; (plucky sys nghttp2) ends here
