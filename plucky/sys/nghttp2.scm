;;; (plucky sys nghttp2) --- HPACK, HTTP/2's header compression, by libnghttp2

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; libnghttp2 (Debian's libnghttp2-14) gives HTTP/2's header
;;; compression, HPACK (RFC 7541): both tables, Huffman coding both
;;; ways, and the checks against bad blocks (a dynamic table larger than
;;; allowed, integers and strings that overrun).  Frames, streams and
;;; flow control are plucky's own (plucky server http2): nghttp2's
;;; session API called back into Scheme once per field and per frame,
;;; and each callback from C cost more than the work it carried
;;; (bench/instructions-h2).  Here each header block is one loop of
;;; calls out (`hpack-inflate!', one nghttp2_hd_inflate_hd2 per field,
;;; no callback), and each response's fields one call
;;; (`hpack-deflate-response!', nghttp2_hd_deflate_hd), its fields
;;; given as spans of a buffer, without a copy.
;;;
;;; `hpack-decode' and `hpack-encode' do the same with fields as pairs
;;; of strings, for tests and tools.  A coder is freed by `hpack-free!'
;;; (once, never from a finalizer).
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
            hpack-free!
            hpack-inflate!
            hpack-deflate-response!
            hpack-encoder-table-size!))

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
  (%deflate-change-size "nghttp2_hd_deflate_change_table_size" int (list uint64 size_t))
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

;;;
;;; HPACK on the hot path
;;;

;; Views of the memory nghttp2 hands over (a field's name and value),
;; kept by address: a field indexed in HPACK's static or dynamic table
;; comes from the same address request after request, so a view is
;; mostly found, not made (a view is two objects to allocate; a memcpy
;; through the FFI costs more: bench/instructions-h2).  A view may be
;; longer than the bytes at its address now: only LENGTH bytes are
;; read, during the call that gets it.  Direct-mapped, a slot per
;; address hash; the loop's thread only.
(define view-slots 64)
(define view-addresses (make-vector view-slots 0))
(define views (make-vector view-slots #f))

(define (view address length)
  (let* ((slot (logand (ash address -3) (- view-slots 1)))
         (view (vector-ref views slot)))
    (if (and (eqv? (vector-ref view-addresses slot) address)
             (<= length (bytevector-length view)))
        view
        (let ((view (pointer->bytevector (make-pointer address) (max length 1))))
          (vector-set! views slot view)
          (vector-set! view-addresses slot address)
          view))))

;; What nghttp2_hd_inflate_hd2 fills: one nghttp2_nv {uint8_t *name,
;; *value; size_t namelen, valuelen; uint8_t flags} and an int of flags,
;; kept with their addresses; the loop's thread only.
(define inflate-nv #f)
(define inflate-nv-address #f)
(define inflate-flags #f)
(define inflate-flags-address #f)

(define (hpack-inflate! decoder bv start end emit)
  "Decode the header block BV [START, END), whole, with DECODER, calling
(EMIT name name-length value value-length) for each field in order: the
first NAME-LENGTH bytes of the bytevector NAME, and of VALUE, valid
during the call only.  Return 0, or a negative nghttp2 error code when
the block is not valid HPACK (the decoder is then unusable: a
connection error, COMPRESSION_ERROR)."
  (unless inflate-nv
    (set! inflate-nv (make-bytevector 40 0))
    (set! inflate-nv-address (bytevector-address inflate-nv))
    (set! inflate-flags (make-bytevector 4 0))
    (set! inflate-flags-address (bytevector-address inflate-flags)))
  (let ((pointer (hpack-pointer decoder))
        (nv inflate-nv)
        (flags inflate-flags)
        (base (bytevector-address bv)))
    (let lp ((at start))
      (bytevector-u32-native-set! flags 0 0)
      (let ((n (%inflate-hd2 pointer inflate-nv-address inflate-flags-address
                             (+ base at) (- end at) 1)))
        (if (< n 0)
            n
            (let ((f (bytevector-u32-native-ref flags 0)))
              (when (logtest f NGHTTP2_HD_INFLATE_EMIT)
                (let ((name-length (bytevector-u64-native-ref nv 16))
                      (value-length (bytevector-u64-native-ref nv 24)))
                  (emit (view (bytevector-u64-native-ref nv 0) name-length) name-length
                        (view (bytevector-u64-native-ref nv 8) value-length) value-length)))
              (if (logtest f NGHTTP2_HD_INFLATE_FINAL)
                  (begin (%inflate-end pointer) 0)
                  (lp (+ at n)))))))))

;;; A response's fields go to nghttp2's deflater as an array of
;;; nghttp2_nv kept here and grown as needed, its :status from a table
;;; of the codes' digits: no allocation per response.

(define response-nva (make-bytevector (* 40 16) 0))
(define response-nva-address #f)
(define status-name (string->utf8 ":status"))
(define status-name-address #f)
(define status-digits (make-vector 1000 #f)) ; code -> (bytevector . address)

(define (status-field code)
  (or (vector-ref status-digits code)
      (let* ((bv (string->utf8 (number->string code)))
             (entry (cons bv (bytevector-address bv))))
        (vector-set! status-digits code entry)
        entry)))

(define (hpack-deflate-response! encoder code base spans count out out-start out-size)
  "Encode with ENCODER the header block of a response of status CODE
(CODE #f: a trailer block, no :status), its other fields COUNT spans of
the bytes at the address BASE: SPANS is a bytevector of native u32s,
four per field (name start and end, value start and end, from BASE),
each name in lower case.  The block goes to the bytevector OUT from
OUT-START, OUT-SIZE bytes at most.  Return its length, or a negative
nghttp2 error code (NGHTTP2_ERR_INSUFF_BUFSIZE: too little room)."
  (unless status-name-address
    (set! status-name-address (bytevector-address status-name)))
  (when (or (not response-nva-address)
            (> (* 40 (+ count 1)) (bytevector-length response-nva)))
    (set! response-nva (make-bytevector (* 40 (max 16 (* 2 (+ count 1)))) 0))
    (set! response-nva-address (bytevector-address response-nva)))
  (let ((nva response-nva)
        (first (if code 1 0)))
    (when code
      (let ((status (status-field code)))
        (bytevector-u64-native-set! nva 0 status-name-address)
        (bytevector-u64-native-set! nva 8 (cdr status))
        (bytevector-u64-native-set! nva 16 (bytevector-length status-name))
        (bytevector-u64-native-set! nva 24 (bytevector-length (car status)))))
    (let lp ((k 0) (i (* 40 first)))
      (when (< k count)
        (let* ((s (* 16 k))
               (name-start (bytevector-u32-native-ref spans s))
               (name-end (bytevector-u32-native-ref spans (+ s 4)))
               (value-start (bytevector-u32-native-ref spans (+ s 8)))
               (value-end (bytevector-u32-native-ref spans (+ s 12))))
          (bytevector-u64-native-set! nva i (+ base name-start))
          (bytevector-u64-native-set! nva (+ i 8) (+ base value-start))
          (bytevector-u64-native-set! nva (+ i 16) (- name-end name-start))
          (bytevector-u64-native-set! nva (+ i 24) (- value-end value-start))
          (bytevector-u8-set! nva (+ i 32) 0)
          (lp (+ k 1) (+ i 40)))))
    (%deflate-hd (hpack-pointer encoder) (+ (bytevector-address out) out-start) out-size
                 response-nva-address (+ count first))))

(define (hpack-encoder-table-size! encoder size)
  "Make ENCODER's dynamic table at most SIZE bytes (the client's
SETTINGS_HEADER_TABLE_SIZE, at most the size ENCODER was made with);
return 0 or a negative nghttp2 error code."
  (%deflate-change-size (hpack-pointer encoder) size))

;;;
;;; HPACK alone
;;;

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
