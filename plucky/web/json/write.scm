;;; (plucky web json write) --- Scheme data to JSON text (RFC 8259)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The encoder of (plucky web json), and the pieces the encoders that
;;; (plucky web json schema) generates are made of.  Text goes as UTF-8
;;; bytes into a sink, a bytevector that doubles when full, and from
;;; there to a port in one `put-bytevector' or out as a bytevector: a
;;; string is written char by char, an integer digit by digit, with no
;;; intermediate string; a real as its shortest decimal that reads back
;;; to the same double, written in place by (plucky web json float).
;;;
;;; The mapping is the decoder's (see (plucky web json read)):
;;;
;;;   alist ((key . value) ...), keys strings or symbols -> object
;;;   '() -> {}       vector -> array       string -> string
;;;   exact integer -> integer     other real -> number (finite only;
;;;   an exact fraction is written as its nearest double)
;;;   #t/#f -> true/false          the symbol null -> null
;;;
;;; Anything else raises an error naming the value.  Strings are escaped
;;; as little as RFC 8259 allows: quote, backslash and control
;;; characters; everything else is written as UTF-8.
;;;
;;; Code:

(define-module (plucky web json write)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 binary-ports)
  #:use-module (ice-9 atomic)
  #:use-module (plucky web json float)
  #:export (make-json-sink
            json-sink-bytes
            json-sink-flush!
            sink-put-byte!
            sink-put-bytes!
            sink-put-string!
            sink-put-integer!
            sink-put-real!
            sink-put-boolean!
            sink-put-null!
            sink-put-value!
            encode-json
            write-json))

;;;
;;; The sink
;;;

(define-record-type <json-sink>
  (%make-json-sink bytes fill)
  json-sink?
  (bytes sink-bytes set-sink-bytes!)    ; the buffer, a bytevector
  (fill sink-fill set-sink-fill!))      ; the bytes written so far

(define* (make-json-sink #:optional (size 4096))
  "Return an empty sink, a growing buffer of UTF-8 that starts at SIZE
bytes."
  (%make-json-sink (make-bytevector size) 0))

(define (json-sink-bytes sink)
  "Return the bytes written to SINK, as a bytevector of their own."
  (let* ((n (sink-fill sink))
         (out (make-bytevector n)))
    (bytevector-copy! (sink-bytes sink) 0 out 0 n)
    out))

(define (json-sink-flush! sink port)
  "Write the bytes in SINK to PORT and empty SINK; return nothing
useful."
  (put-bytevector port (sink-bytes sink) 0 (sink-fill sink))
  (set-sink-fill! sink 0))

(define (room! sink n)
  ;; -> the buffer, with room for N more bytes
  (let ((bytes (sink-bytes sink))
        (fill (sink-fill sink)))
    (if (<= (+ fill n) (bytevector-length bytes))
        bytes
        (let ((bigger (make-bytevector (max (* 2 (bytevector-length bytes)) (+ fill n 64)))))
          (bytevector-copy! bytes 0 bigger 0 fill)
          (set-sink-bytes! sink bigger)
          bigger))))

(define-inlinable (sink-put-byte! sink byte)
  "Append BYTE to SINK."
  (let ((bytes (room! sink 1))
        (fill (sink-fill sink)))
    (bytevector-u8-set! bytes fill byte)
    (set-sink-fill! sink (+ fill 1))))

(define (sink-put-bytes! sink bv)
  "Append the bytevector BV to SINK."
  (let* ((n (bytevector-length bv))
         (bytes (room! sink n))
         (fill (sink-fill sink)))
    (bytevector-copy! bv 0 bytes fill n)
    (set-sink-fill! sink (+ fill n))))

;;;
;;; Strings
;;;

(define hex-digits (string->utf8 "0123456789abcdef"))

(define (sink-put-string! sink s)
  "Append the string S to SINK as a JSON string, quotes included."
  (let* ((n (string-length s))
         ;; The most a char can take: \u001f, or four bytes of UTF-8.
         (bytes (room! sink (+ 2 (* 6 n)))))
    (define-syntax-rule (put! o byte) (bytevector-u8-set! bytes o byte))
    (put! (sink-fill sink) 34)
    (let lp ((k 0) (o (+ (sink-fill sink) 1)))
      (if (< k n)
          (let ((c (char->integer (string-ref s k))))
            (cond
             ((< c 128)
              (cond
               ((and (>= c 32) (not (eqv? c 34)) (not (eqv? c 92)))
                (put! o c)
                (lp (+ k 1) (+ o 1)))
               ((eqv? c 34) (put! o 92) (put! (+ o 1) 34) (lp (+ k 1) (+ o 2)))
               ((eqv? c 92) (put! o 92) (put! (+ o 1) 92) (lp (+ k 1) (+ o 2)))
               ((eqv? c 10) (put! o 92) (put! (+ o 1) 110) (lp (+ k 1) (+ o 2)))
               ((eqv? c 13) (put! o 92) (put! (+ o 1) 114) (lp (+ k 1) (+ o 2)))
               ((eqv? c 9) (put! o 92) (put! (+ o 1) 116) (lp (+ k 1) (+ o 2)))
               (else
                (put! o 92) (put! (+ o 1) 117) (put! (+ o 2) 48) (put! (+ o 3) 48)
                (put! (+ o 4) (bytevector-u8-ref hex-digits (ash c -4)))
                (put! (+ o 5) (bytevector-u8-ref hex-digits (logand c 15)))
                (lp (+ k 1) (+ o 6)))))
             ((< c #x800)
              (put! o (logior #xc0 (ash c -6)))
              (put! (+ o 1) (logior #x80 (logand c #x3f)))
              (lp (+ k 1) (+ o 2)))
             ((< c #x10000)
              (put! o (logior #xe0 (ash c -12)))
              (put! (+ o 1) (logior #x80 (logand (ash c -6) #x3f)))
              (put! (+ o 2) (logior #x80 (logand c #x3f)))
              (lp (+ k 1) (+ o 3)))
             (else
              (put! o (logior #xf0 (ash c -18)))
              (put! (+ o 1) (logior #x80 (logand (ash c -12) #x3f)))
              (put! (+ o 2) (logior #x80 (logand (ash c -6) #x3f)))
              (put! (+ o 3) (logior #x80 (logand c #x3f)))
              (lp (+ k 1) (+ o 4)))))
          (begin
            (put! o 34)
            (set-sink-fill! sink (+ o 1)))))))

;;;
;;; Numbers and literals
;;;

(define (sink-put-ascii! sink s)
  (let* ((n (string-length s))
         (bytes (room! sink n))
         (fill (sink-fill sink)))
    (let lp ((k 0))
      (when (< k n)
        (bytevector-u8-set! bytes (+ fill k) (char->integer (string-ref s k)))
        (lp (+ k 1))))
    (set-sink-fill! sink (+ fill n))))

(define (sink-put-integer! sink n)
  "Append the exact integer N to SINK in decimal."
  (if (and (> n -1000000000000000000) (< n 1000000000000000000))
      ;; Digits written from the right, into the room 20 bytes make.
      (let* ((bytes (room! sink 20))
             (fill (sink-fill sink))
             (neg? (< n 0))
             (m (abs n))
             (digits (let count ((m (quotient m 10)) (d 1))
                       (if (eqv? m 0) d (count (quotient m 10) (+ d 1)))))
             (start (if neg? (+ fill 1) fill)))
        (when neg? (bytevector-u8-set! bytes fill 45))
        (let lp ((m m) (o (+ start digits -1)))
          (bytevector-u8-set! bytes o (+ 48 (remainder m 10)))
          (when (>= o (+ start 1))
            (lp (quotient m 10) (- o 1))))
        (set-sink-fill! sink (+ start digits)))
      (sink-put-ascii! sink (number->string n))))

(define (sink-put-real! sink x)
  "Append the real number X to SINK: an exact integer as such, anything
else as the shortest decimal that reads back to its nearest double.
Raises an error if X is infinite or not a number."
  (if (and (exact? x) (integer? x))
      (sink-put-integer! sink x)
      (let ((bytes (room! sink 32)))
        (set-sink-fill! sink (put-flonum! bytes (sink-fill sink) (exact->inexact x))))))

(define true-bytes (string->utf8 "true"))
(define false-bytes (string->utf8 "false"))
(define null-bytes (string->utf8 "null"))

(define (sink-put-boolean! sink b)
  "Append true or false to SINK, as B is true or #f."
  (sink-put-bytes! sink (if b true-bytes false-bytes)))

(define (sink-put-null! sink)
  "Append null to SINK."
  (sink-put-bytes! sink null-bytes))

;;;
;;; Values
;;;

(define (put-object! sink alist depth)
  (sink-put-byte! sink 123)
  (let lp ((members alist) (first? #t))
    (cond
     ((null? members) (sink-put-byte! sink 125))
     ((and (pair? members) (pair? (car members)))
      (let ((key (caar members)))
        (unless first? (sink-put-byte! sink 44))
        (cond ((string? key) (sink-put-string! sink key))
              ((symbol? key) (sink-put-string! sink (symbol->string key)))
              (else (error "a JSON object's key must be a string or symbol:" key)))
        (sink-put-byte! sink 58)
        (put-value! sink (cdar members) depth)
        (lp (cdr members) #f)))
     (else (error "not an alist, so not a JSON object:" alist)))))

(define (put-array! sink v depth)
  (sink-put-byte! sink 91)
  (let ((n (vector-length v)))
    (let lp ((k 0))
      (when (< k n)
        (unless (eqv? k 0) (sink-put-byte! sink 44))
        (put-value! sink (vector-ref v k) depth)
        (lp (+ k 1)))))
  (sink-put-byte! sink 93))

(define (put-value! sink x depth)
  (cond
   ((string? x) (sink-put-string! sink x))
   ((and (exact-integer? x)) (sink-put-integer! sink x))
   ((real? x) (sink-put-real! sink x))
   ((or (pair? x) (null? x))
    (when (> depth 10000) (error "JSON value nested too deep (a cycle?):" depth))
    (put-object! sink x (+ depth 1)))
   ((vector? x)
    (when (> depth 10000) (error "JSON value nested too deep (a cycle?):" depth))
    (put-array! sink x (+ depth 1)))
   ((eq? x #t) (sink-put-bytes! sink true-bytes))
   ((eq? x #f) (sink-put-bytes! sink false-bytes))
   ((eq? x 'null) (sink-put-bytes! sink null-bytes))
   (else (error "not a JSON value:" x))))

(define (sink-put-value! sink x)
  "Append the JSON text of X, a Scheme value in the mapping of
(plucky web json), to SINK."
  (put-value! sink x 0))

(define (encode-json x)
  "Return the JSON text of X as a bytevector of UTF-8: alists are
objects (keys strings or symbols; '() is {}), vectors arrays, strings
strings, exact integers integers, other reals numbers (finite), #t/#f
true/false, and the symbol null null.  Raises an error naming the first
part of X that has no JSON form."
  (let ((sink (or (atomic-box-swap! spare-sink #f) (make-json-sink))))
    (set-sink-fill! sink 0)
    (put-value! sink x 0)
    (let ((bytes (json-sink-bytes sink)))
      (give-back-sink! sink)
      bytes)))

;; One buffer is kept between calls of `encode-json' and reused, as
;; (plucky web html) does: a 4 KiB buffer fewer for each answer.  Taken
;; by an atomic swap, it is never shared: a compute thread, or a call
;; that raised (the buffer then not given back), makes its own.
;; Encoding never suspends.
(define spare-sink (make-atomic-box #f))

(define (give-back-sink! sink)
  ;; a buffer grown past 1 MiB for one huge value is not kept
  (when (<= (bytevector-length (sink-bytes sink)) (* 1024 1024))
    (atomic-box-set! spare-sink sink)))

(define (write-json x port)
  "Write the JSON text of X, as `encode-json' makes it, to the binary
PORT; return nothing useful."
  (let ((sink (make-json-sink)))
    (put-value! sink x 0)
    (json-sink-flush! sink port)))

;;; (plucky web json write) ends here
