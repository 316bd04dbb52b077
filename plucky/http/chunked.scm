;;; (plucky http chunked) --- the chunked transfer coding, decoded incrementally

;; Copyright (C) 2026 the plucky authors
;; (No header names with a colon in these first lines: Guile reads a
;; "coding:" here as the file's character set.)
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A request body sent chunked (RFC 9112 §7.1; the header says so)
;;; arrives as
;;;
;;;   chunk-size [;ext] CRLF  chunk-data CRLF  ...  0 [;ext] CRLF
;;;   trailer-field CRLF ...  CRLF
;;;
;;; split across reads at any byte.  A <chunked-decoder> keeps where it
;;; is between calls, so each byte is looked at once however the body is
;;; split: `decode-chunked!' takes the bytes that have arrived, hands the
;;; chunk data to a sink as slices of the input (no copy here), and says
;;; whether it needs more, is done (and where the next request starts), or
;;; found an error.
;;;
;;; Strict where a lenient reading would let two parsers disagree on where
;;; a body ends (request smuggling): line ends must be CRLF, a chunk's
;;; data must be followed by exactly CRLF, sizes are hexadecimal digits
;;; only and at most 16 of them, and extensions follow their grammar
;;; (RFC 9112 §7.1.1):
;;;
;;;   chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
;;;   chunk-ext-name = token     chunk-ext-val = token / quoted-string
;;;
;;; so `5;', `5;bad[=x' and `5 ' (whitespace before the CRLF) are 400:
;;; a proxy that reads them differently would frame the body differently.
;;; Extension names and values are checked and dropped.  Limits bound the size line, the trailer section and
;;; the decoded total (413).  Trailer fields are checked and dropped.
;;;
;;; Code:

(define-module (plucky http chunked)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module (plucky http error)
  #:export (make-chunked-decoder
            chunked-decoder?
            chunked-decoder-total
            chunked-decoder-done?
            decode-chunked!
            encode-chunk!))

(define-record-type <chunked-decoder>
  (%make-chunked-decoder state size digits line total max-total max-line max-trailer)
  chunked-decoder?
  ;; size | ext-semi | ext-name-start | ext-name | ext-after-name
  ;; | ext-value-start | ext-token | ext-quoted | ext-quoted-pair
  ;; | ext-after-quoted | size-lf | data | data-cr | data-lf
  ;; | trailer | trailer-lf | done
  (state decoder-state set-decoder-state!)
  (size decoder-size set-decoder-size!)       ; size being read, or data left
  (digits decoder-digits set-decoder-digits!) ; hex digits read in this size
  (line decoder-line set-decoder-line!)       ; bytes in the current size or trailer line
  (total chunked-decoder-total set-decoder-total!) ; data bytes decoded so far
  (max-total decoder-max-total)
  (max-line decoder-max-line)
  (max-trailer decoder-max-trailer))

(define* (make-chunked-decoder #:key (max-total (* 64 1024 1024))
                               (max-line 4096) (max-trailer 16384))
  "Return a decoder for one chunked body.  MAX-TOTAL bounds the decoded
size (beyond it: 413), MAX-LINE a chunk-size line with its extensions,
MAX-TRAILER the trailer section (beyond either: 400)."
  (%make-chunked-decoder 'size 0 0 0 0 max-total max-line max-trailer))

(define (chunked-decoder-done? decoder)
  "True once DECODER has seen the whole body, trailer section included."
  (eq? (decoder-state decoder) 'done))

(define-inlinable (hex-value byte)
  (cond ((<= 48 byte 57) (- byte 48))
        ((<= 97 byte 102) (- byte 87))
        ((<= 65 byte 70) (- byte 55))
        (else #f)))

(define-inlinable (whitespace? byte)
  (or (= byte 32) (= byte 9)))

(define (token-byte? byte)
  ;; tchar (RFC 9110 §5.6.2): ALPHA, DIGIT and !#$%&'*+-.^_`|~
  (or (<= 97 byte 122) (<= 65 byte 90) (<= 48 byte 57)
      (memv byte '(33 35 36 37 38 39 42 43 45 46 94 95 96 124 126))))

(define-inlinable (quoted-byte? byte)
  ;; qdtext (RFC 9110 §5.6.4): HTAB, SP, visible ASCII but DQUOTE and
  ;; backslash, obs-text.
  (or (= byte 9) (= byte 32) (= byte 33) (<= 35 byte 91) (<= 93 byte 126)
      (>= byte 128)))

(define-inlinable (quoted-pair-byte? byte)
  ;; What may follow a backslash: HTAB, SP, VCHAR, obs-text.
  (or (= byte 9) (and (>= byte 32) (not (= byte 127)))))

(define (extension-state state byte)
  ;; The state after BYTE in the chunk extensions, or #f if BYTE cannot
  ;; come there.  A CR can end the line only right after a name or a
  ;; value: not after ";" nor after whitespace.
  (define (after-word state)
    (cond ((= byte 13) 'size-lf)
          ((= byte 59) 'ext-name-start)
          ((whitespace? byte) 'ext-semi)
          (else #f)))
  (case state
    ((ext-semi)                         ; BWS, then ";"
     (cond ((= byte 59) 'ext-name-start)
           ((whitespace? byte) 'ext-semi)
           (else #f)))
    ((ext-name-start)                   ; BWS, then a token
     (cond ((whitespace? byte) 'ext-name-start)
           ((token-byte? byte) 'ext-name)
           (else #f)))
    ((ext-name)
     (cond ((token-byte? byte) 'ext-name)
           ((= byte 61) 'ext-value-start)
           ((whitespace? byte) 'ext-after-name)
           (else (after-word state))))
    ((ext-after-name)                   ; BWS, then "=" or ";"
     (cond ((= byte 61) 'ext-value-start)
           ((= byte 59) 'ext-name-start)
           ((whitespace? byte) 'ext-after-name)
           (else #f)))
    ((ext-value-start)                  ; BWS, then a token or a quoted-string
     (cond ((whitespace? byte) 'ext-value-start)
           ((= byte 34) 'ext-quoted)
           ((token-byte? byte) 'ext-token)
           (else #f)))
    ((ext-token)
     (if (token-byte? byte) 'ext-token (after-word state)))
    ((ext-quoted)
     (cond ((= byte 34) 'ext-after-quoted)
           ((= byte 92) 'ext-quoted-pair)
           ((quoted-byte? byte) 'ext-quoted)
           (else #f)))
    ((ext-quoted-pair)
     (and (quoted-pair-byte? byte) 'ext-quoted))
    ((ext-after-quoted) (after-word state))
    (else #f)))

(define (decode-chunked! decoder bv start end sink)
  "Decode the bytes BV [START, END) of a chunked body with DECODER,
calling (SINK bv start count) for each run of chunk data.  Return two
values: 'more and END when every byte was used and the body goes on;
'done and the index just past the body's last CRLF; or an &http-error
(400, or 413 past the decoder's MAX-TOTAL) and the index of the byte at
fault."
  (define (fail status reason i)
    (values (make-http-error status reason i) i))
  (let lp ((i start))
    (let ((state (decoder-state decoder)))
      (cond
       ((eq? state 'done) (values 'done i))
       ((and (eq? state 'data) (< i end))
        ;; The bulk: hand over as much data as has arrived.
        (let* ((left (decoder-size decoder))
               (n (min left (- end i))))
          (sink bv i n)
          (set-decoder-size! decoder (- left n))
          (when (= n left)
            (set-decoder-state! decoder 'data-cr))
          (lp (+ i n))))
       ((>= i end) (values 'more end))
       (else
        (let ((byte (bytevector-u8-ref bv i)))
          (case state
            ((size)
             (let ((digit (hex-value byte)))
               (cond
                (digit
                 (if (>= (decoder-digits decoder) 16)
                     (fail 400 "chunk size too large" i)
                     (begin
                       (set-decoder-size! decoder (+ (* 16 (decoder-size decoder)) digit))
                       (set-decoder-digits! decoder (+ 1 (decoder-digits decoder)))
                       (set-decoder-line! decoder (+ 1 (decoder-line decoder)))
                       (lp (+ i 1)))))
                ((zero? (decoder-digits decoder))
                 (fail 400 "chunk size expected" i))
                ((= byte 13)
                 (set-decoder-state! decoder 'size-lf)
                 (lp (+ i 1)))
                ((or (= byte 59) (whitespace? byte)) ; ";" or BWS before it
                 (set-decoder-state! decoder 'ext-semi)
                 (lp i))
                (else (fail 400 "invalid chunk size" i)))))
            ((ext-semi ext-name-start ext-name ext-after-name ext-value-start
              ext-token ext-quoted ext-quoted-pair ext-after-quoted)
             (if (> (decoder-line decoder) (decoder-max-line decoder))
                 (fail 400 "chunk extension too long" i)
                 (let ((next (extension-state state byte)))
                   (cond
                    ((not next) (fail 400 "invalid chunk extension" i))
                    (else
                     (set-decoder-state! decoder next)
                     (set-decoder-line! decoder (+ 1 (decoder-line decoder)))
                     (lp (+ i 1)))))))
            ((size-lf)
             (if (not (= byte 10))
                 (fail 400 "chunk size line must end in CRLF" i)
                 (let ((size (decoder-size decoder)))
                   (set-decoder-line! decoder 0)
                   (set-decoder-digits! decoder 0)
                   (cond
                    ((zero? size)
                     (set-decoder-state! decoder 'trailer)
                     (lp (+ i 1)))
                    ((> (+ size (chunked-decoder-total decoder))
                        (decoder-max-total decoder))
                     (fail 413 "request body too large" i))
                    (else
                     (set-decoder-total! decoder (+ size (chunked-decoder-total decoder)))
                     (set-decoder-state! decoder 'data)
                     (lp (+ i 1)))))))
            ((data-cr)
             (if (= byte 13)
                 (begin (set-decoder-state! decoder 'data-lf) (lp (+ i 1)))
                 (fail 400 "chunk data must be followed by CRLF" i)))
            ((data-lf)
             (if (= byte 10)
                 (begin
                   (set-decoder-state! decoder 'size)
                   (set-decoder-size! decoder 0)
                   (lp (+ i 1)))
                 (fail 400 "chunk data must be followed by CRLF" i)))
            ((trailer)
             ;; DIGITS counts the bytes of the whole trailer section, LINE
             ;; those of the current field line.
             (cond
              ((> (decoder-digits decoder) (decoder-max-trailer decoder))
               (fail 400 "trailer section too large" i))
              ((= byte 13)
               (set-decoder-state! decoder 'trailer-lf)
               (lp (+ i 1)))
              ((or (= byte 10) (= byte 0)
                   (and (< byte 32) (not (= byte 9))) (= byte 127))
               (fail 400 "invalid byte in trailer" i))
              ((and (zero? (decoder-line decoder)) (or (= byte 32) (= byte 9)))
               (fail 400 "obsolete line folding in trailer" i))
              (else
               (set-decoder-line! decoder (+ 1 (decoder-line decoder)))
               (set-decoder-digits! decoder (+ 1 (decoder-digits decoder)))
               (lp (+ i 1)))))
            ((trailer-lf)
             (cond
              ((not (= byte 10))
               (fail 400 "trailer line must end in CRLF" i))
              ((zero? (decoder-line decoder))
               ;; The empty line: the body is over.
               (set-decoder-state! decoder 'done)
               (values 'done (+ i 1)))
              (else
               (set-decoder-line! decoder 0)
               (set-decoder-state! decoder 'trailer)
               (lp (+ i 1)))))
            (else (error "chunked decoder in unknown state" state)))))))))

(define hex-digits (string->utf8 "0123456789abcdef"))

(define (encode-chunk! bv start count put!)
  "Write one chunk holding BV [START, START+COUNT) by calling PUT! with
bytevector slices (put! bv start count): the size line, the data, CRLF.
A COUNT of 0 writes the last chunk and the empty trailer section."
  (let* ((digits (let lp ((n count) (d 1)) (if (< n 16) d (lp (quotient n 16) (+ d 1)))))
         (line (make-bytevector (+ digits 2))))
    (let lp ((n count) (i (- digits 1)))
      (bytevector-u8-set! line i (bytevector-u8-ref hex-digits (remainder n 16)))
      (when (> i 0) (lp (quotient n 16) (- i 1))))
    (bytevector-u8-set! line digits 13)
    (bytevector-u8-set! line (+ digits 1) 10)
    (put! line 0 (bytevector-length line))
    (if (zero? count)
        (put! #vu8(13 10) 0 2)
        (begin
          (put! bv start count)
          (put! #vu8(13 10) 0 2)))))

;;; (plucky http chunked) ends here
