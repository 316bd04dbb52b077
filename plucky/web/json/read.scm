;;; (plucky web json read) --- JSON text (RFC 8259) to Scheme data

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The decoder of (plucky web json), and the pieces the decoders that
;;; (plucky web json schema) generates are made of.  Everything works on
;;; one bytevector with indices: each `json-read-...' procedure takes
;;; (BV I END CONTEXT), I the index of the value's first byte, and
;;; returns two values, what it read and the index just past it.  No
;;; substring is made but the strings the result holds.
;;;
;;; The mapping (the default, 'plucky; it round-trips through
;;; `encode-json'):
;;;
;;;   object  -> alist ((key . value) ...), string keys, document order
;;;              (duplicates kept; `assoc' finds the first); {} -> '()
;;;   array   -> vector
;;;   string  -> string
;;;   number  -> exact integer without fraction or exponent ("-0" is 0),
;;;              else an inexact real, correctly rounded
;;;   true/false -> #t/#f,  null -> the symbol null
;;;
;;; and 'guile-json, guile-json 4's (json->scm with #:ordered #f): the
;;; same, except that an object's alist is in reverse document order and
;;; a number whose fraction is zero and whose exponent is not negative
;;; ("1.0", "2E3") is an exact integer.
;;;
;;; Strict RFC 8259: one value, surrounded by whitespace only; no
;;; trailing commas, comments, leading zeros, "+", bare "." or NaN;
;;; control characters escaped in strings; UTF-8 valid and not overlong,
;;; no encoded surrogates; a \u escape of a lone surrogate is an error
;;; unless the context says 'replace (then U+FFFD).  A number too large
;;; for a double is an error, and so is a number of more than
;;; `max-number-digits' digits: Guile's bignum conversions take time
;;; quadratic in the digits, so a megabyte of them would hold a worker
;;; for seconds.  Each error is a &json-error condition with the byte
;;; offset and what was expected there.
;;;
;;; Speed (bench/json): strings without escapes become a string straight
;;; from their span, their UTF-8 checked by utf8->string itself (what it
;;; refuses, the decode made again names with its offset); integers
;;; accumulate as fixnums; a decimal whose digits fit in 53 bits and
;;; whose power of ten is at most 22 is one IEEE multiplication or
;;; division of two exact doubles (Clinger's fast path, correctly
;;; rounded), and one of up to 18 digits otherwise goes to
;;; (plucky web json decimal) (Eisel-Lemire, in machine words); any
;;; other number goes to exact arithmetic.
;;; Array elements wait on a scratch stack in the context, so an array
;;; costs its vector and no list.
;;;
;;; Code:

(define-module (plucky web json read)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 exceptions)
  #:use-module (plucky web json decimal)
  #:export (&json-error
            json-error?
            json-error-offset
            json-error-expected
            json-error

            make-json-context
            json-context?
            json-context-max-depth
            json-context-top
            json-context-push!
            json-context-pop-vector!

            json-skip-whitespace
            json-read-value
            json-read-string
            max-number-digits
            json-read-number
            json-read-integer
            json-read-real
            json-read-boolean
            json-read-null
            json-null-at?
            json-skip-value
            json-key-at?
            json-read-key
            json-expect-end
            json-decode

            decode-json))

;; `put-utf8!' is a macro, needed while this file is compiled only.
(eval-when (expand)
  (use-modules ((plucky http) #:select (put-utf8!))))

;;;
;;; Errors
;;;

(define-exception-type &json-error &error
  make-json-error-condition
  json-error?
  (offset json-error-offset)            ; byte offset into the input
  (expected json-error-expected))       ; what was expected there, a phrase

(define (json-error offset expected)
  "Raise a &json-error: at byte OFFSET, EXPECTED (a phrase, \"a value\")
was expected.  Does not return."
  (raise-exception
   (make-exception (make-json-error-condition offset expected)
                   (make-exception-with-message
                    (string-append "JSON: expected " expected " at byte "
                                   (number->string offset))))))

;;;
;;; The context: options and scratch space of one decode
;;;

(define-record-type <json-context>
  (%make-json-context max-depth guile-json? replace-surrogates? stack top buffer check-utf8?
                      spans)
  json-context?
  (max-depth json-context-max-depth)              ; nesting allowed, arrays and objects
  (guile-json? context-guile-json?)               ; #t: guile-json's mapping
  (replace-surrogates? context-replace-surrogates?) ; #t: a lone \uD800 is U+FFFD
  (stack context-stack set-context-stack!)        ; array elements waiting, a vector
  (top json-context-top set-context-top!)         ; the stack's first free slot
  (buffer context-buffer set-context-buffer!)     ; a string's bytes once unescaped
  ;; #f: Guile's utf8->string checks each string's UTF-8; #t: it is
  ;; checked first here, for the offset of what it would refuse
  (check-utf8? context-check-utf8? set-context-check-utf8!)
  ;; N -> a bytevector of N bytes, or #f: where a short string's bytes
  ;; wait for utf8->string, which takes a whole bytevector
  (spans context-spans))

;; Strings of fewer bytes than this take their bytes' bytevector from
;; the context's, one per length, rather than a new one each.
(define span-cache-size 64)

(define* (make-json-context #:key (max-depth 512) (mapping 'plucky)
                            (lone-surrogates 'error))
  "Return a fresh decoding context: the options of one decode (at most
MAX-DEPTH nested arrays and objects; MAPPING 'plucky or 'guile-json;
LONE-SURROGATES 'error or 'replace) and its scratch space.  A context is
used by one thread at a time."
  (unless (memq mapping '(plucky guile-json))
    (error "JSON mapping must be 'plucky or 'guile-json:" mapping))
  (unless (memq lone-surrogates '(error replace))
    (error "lone-surrogates must be 'error or 'replace:" lone-surrogates))
  (%make-json-context max-depth (eq? mapping 'guile-json) (eq? lone-surrogates 'replace)
                      (make-vector 64) 0 (make-bytevector 256) #f
                      (make-vector span-cache-size #f)))

;;;
;;; Bytes
;;;

(define-syntax-rule (u8 bv i) (bytevector-u8-ref bv i))

;; Guile 3.0.8 widens a loop counter's range to infinity, so that `+' on
;; it stays a generic call on every iteration; bounding it with a mask
;; (no index reaches 2^48) lets the compiler keep it an unboxed integer
;; and the loop free of calls (bench/json).  Products by 10 are written
;; as shifts for the same reason: `*' is always a call.
(define-syntax-rule (index x) (logand x #xffffffffffff))

(define-syntax-rule (times-ten m)
  (let ((m* (logand m #x1ffffffffffffff)))   ; above 10^17
    (+ (ash m* 3) (ash m* 1))))

(define-syntax-rule (whitespace? b)
  (or (eqv? b 32) (eqv? b 10) (eqv? b 13) (eqv? b 9)))

(define-syntax-rule (digit? b) (and (<= 48 b) (<= b 57)))

(define-inlinable (json-skip-whitespace bv i end)
  "Return the index of the first byte of BV from I (below END) that is
not JSON whitespace, or END."
  ;; Inlined: one comparison when no whitespace is there (compact JSON),
  ;; two for the one space after a colon (indented JSON)
  (if (and (< i end) (<= (u8 bv i) 32))
      (if (and (eqv? (u8 bv i) 32) (< (+ i 1) end) (> (u8 bv (+ i 1)) 32))
          (+ i 1)
          (skip-whitespace-run bv i end))
      i))

;; Eight bytes at a time: one bounds check and a few unboxed operations
;; in place of eight checked byte reads (bench/json; an indented
;; document is mostly runs of spaces).
(define-syntax-rule (all-spaces? bv i)
  (eqv? 0 (logxor (bytevector-u64-native-ref bv i) #x2020202020202020)))

(define (skip-whitespace-run bv i end)
  (let ((limit (- end 8)))
    (let lp ((i (index i)))
      (if (< i end)
          (let ((b (u8 bv i)))
            (cond
             ((eqv? b 32)
              (if (and (<= i limit) (all-spaces? bv i))
                  (lp (index (+ i 8)))
                  (let tail ((i (index (if (and (<= i limit)
                                                (eqv? (bytevector-u32-native-ref bv i) #x20202020))
                                           (+ i 4)
                                           (+ i 1)))))
                    (if (< i end)
                        (let ((b (u8 bv i)))
                          (if (whitespace? b) (tail (index (+ i 1))) i))
                        i))))
             ((whitespace? b) (lp (index (+ i 1))))
             (else i)))
          i))))

(define (plain-ascii-run bv i end)
  ;; -> the index of the first 8-byte block from I that holds a byte a
  ;; string cannot take as it is (a quote, a backslash, a control
  ;; character or a byte of 128 or more), or of the last bytes before END
  ;; (bench/json: strings are scanned eight bytes at a time).  In each
  ;; byte's high bit: at least 32, not 34, not 92, below 128.
  (let ((limit (- (index end) 8)))
    (let lp ((i (index i)))
      (if (<= i limit)
          (let* ((w (bytevector-u64-native-ref bv i))
                 (low (logand w #x7f7f7f7f7f7f7f7f))
                 (plain (logand (+ low #x6060606060606060)
                                (+ (logxor low #x2222222222222222) #x7f7f7f7f7f7f7f7f)
                                (+ (logxor low #x5c5c5c5c5c5c5c5c) #x7f7f7f7f7f7f7f7f)
                                (lognot w)
                                #x8080808080808080)))
            ;; compared unboxed: `eqv?' with 0 would box the word
            (if (= plain #x8080808080808080)
                (lp (index (+ i 8)))
                i))
          i))))

(define (utf8-run bv i end)
  ;; As plain-ascii-run, but bytes of 128 or more pass: the run of a
  ;; string that holds UTF-8, which utf8->string checks.
  (let ((limit (- (index end) 8)))
    (let lp ((i (index i)))
      (if (<= i limit)
          (let* ((w (bytevector-u64-native-ref bv i))
                 (low (logand w #x7f7f7f7f7f7f7f7f))
                 (plain (logand (logior (logand (+ low #x6060606060606060)
                                                (+ (logxor low #x2222222222222222) #x7f7f7f7f7f7f7f7f)
                                                (+ (logxor low #x5c5c5c5c5c5c5c5c) #x7f7f7f7f7f7f7f7f))
                                        w)
                                #x8080808080808080)))
            (if (= plain #x8080808080808080)
                (lp (index (+ i 8)))
                i))
          i))))

(define (describe-byte bv i end)
  (if (< i end)
      (let ((b (u8 bv i)))
        (if (and (< 32 b) (< b 127))
            (string #\" (integer->char b) #\")
            (string-append "byte " (number->string b))))
      "the end"))

(define (expected-error bv i end what)
  (json-error i (string-append what ", not " (describe-byte bv i end))))

;;;
;;; Literals
;;;

(define (literal-at? bv i end bytes)
  ;; BYTES (a bytevector) at I, and no letter or digit right after it
  (let ((n (bytevector-length bytes)))
    (and (<= (+ i n) end)
         (let lp ((k 0))
           (if (< k n)
               (and (eqv? (u8 bv (+ i k)) (u8 bytes k)) (lp (+ k 1)))
               #t)))))

(define true-bytes (string->utf8 "true"))
(define false-bytes (string->utf8 "false"))
(define null-bytes (string->utf8 "null"))

(define (json-read-boolean bv i end ctx)
  "Return #t or #f, the JSON true or false at I in BV, and the index
after it; raise a &json-error if there is neither."
  (cond ((literal-at? bv i end true-bytes) (values #t (+ i 4)))
        ((literal-at? bv i end false-bytes) (values #f (+ i 5)))
        (else (expected-error bv i end "true or false"))))

(define (json-null-at? bv i end)
  "Return #t if the JSON null is at I in BV."
  (literal-at? bv i end null-bytes))

(define (json-read-null bv i end ctx)
  "Return the symbol null and the index after the null at I in BV, or
raise a &json-error."
  (if (literal-at? bv i end null-bytes)
      (values 'null (+ i 4))
      (expected-error bv i end "null")))

;;;
;;; Strings
;;;

(define (span-bytes bv start end ctx)
  ;; -> a bytevector of BV's bytes from START to END: for a short span,
  ;; the context's of that length, written over.  utf8->string takes a
  ;; whole bytevector and copies it: a new one per string would be an
  ;; allocation, and a third of a short string's bytes, for the
  ;; collector (bench/json, allocation per decode).
  (let ((n (- end start)))
    (if (< n span-cache-size)
        (let* ((spans (context-spans ctx))
               (copy (or (vector-ref spans n)
                         (let ((copy (make-bytevector n)))
                           (vector-set! spans n copy)
                           copy))))
          (bytevector-copy! bv start copy 0 n)
          copy)
        (let ((copy (make-bytevector n)))
          (bytevector-copy! bv start copy 0 n)
          copy))))

(define (ascii-span->string bv start end ctx)
  ;; A copy and utf8->string (for ASCII, a check and a memcpy in C) cost
  ;; fewer instructions than a string made char by char, whose
  ;; string-set! is a call into libguile each, even for short strings
  ;; (bench/json, twitter; counted with callgrind).
  (utf8->string (span-bytes bv start end ctx)))

(define (utf8-span->string bv start end ctx)
  ;; Guile's utf8->string refuses what RFC 3629 refuses (overlong forms,
  ;; surrogates, past U+10FFFF, truncated sequences) with a
  ;; decoding-error, which `json-decode' catches once per decode: a
  ;; `catch' per string would cost as much as decoding it.  The decode is
  ;; then made again with the context's check-utf8? set, which finds the
  ;; first bad sequence here first, for its offset.
  (when (context-check-utf8? ctx)
    (let ((bad (first-invalid-utf8 bv start end)))
      (unless (= bad end) (json-error bad "valid UTF-8"))))
  (utf8->string (span-bytes bv start end ctx)))

(define (first-invalid-utf8 bv i end)
  ;; -> the index of the first byte from I that does not start a valid
  ;; UTF-8 sequence ending by END, or END
  (let lp ((i i))
    (cond ((>= i end) end)
          ((< (u8 bv i) 128) (lp (+ i 1)))
          ((utf8-tail bv i end) => (lambda (j) (if (<= j end) (lp j) i)))
          (else i))))

(define (utf8-tail bv i end)
  ;; I: a byte >= #x80 starting a UTF-8 sequence.  -> the index after
  ;; the sequence if it is valid (RFC 3629: shortest form, no surrogate,
  ;; at most U+10FFFF), else #f
  (define-syntax-rule (cont? k lo hi)
    (and (< k end) (let ((c (u8 bv k))) (and (<= lo c) (<= c hi)))))
  (let ((b (u8 bv i)))
    (cond
     ((< b #xc2) #f)
     ((< b #xe0) (and (cont? (+ i 1) #x80 #xbf) (+ i 2)))
     ((< b #xf0)
      (and (cond ((eqv? b #xe0) (cont? (+ i 1) #xa0 #xbf))
                 ((eqv? b #xed) (cont? (+ i 1) #x80 #x9f))
                 (else (cont? (+ i 1) #x80 #xbf)))
           (cont? (+ i 2) #x80 #xbf)
           (+ i 3)))
     ((< b #xf5)
      (and (cond ((eqv? b #xf0) (cont? (+ i 1) #x90 #xbf))
                 ((eqv? b #xf4) (cont? (+ i 1) #x80 #x8f))
                 (else (cont? (+ i 1) #x80 #xbf)))
           (cont? (+ i 2) #x80 #xbf)
           (cont? (+ i 3) #x80 #xbf)
           (+ i 4)))
     (else #f))))

(define (json-read-string bv i end ctx)
  "Return the string whose opening quote is at I in BV, and the index
after its closing quote; raise a &json-error if there is no string."
  (unless (and (< i end) (eqv? (u8 bv i) 34))
    (expected-error bv i end "a string"))
  (let ((start (index (+ i 1)))
        (end (index end)))
    ;; The common case: ASCII without escapes.
    (let ascii ((i (plain-ascii-run bv start end)))
      (if (< i end)
          (let ((b (u8 bv i)))
            (cond
             ((eqv? b 34) (values (ascii-span->string bv start i ctx) (index (+ i 1))))
             ((eqv? b 92) (read-escaped-string bv start i end ctx))
             ((< b 32) (json-error i "a control character escaped (\\n, \\u001f...)"))
             ((< b 128) (ascii (plain-ascii-run bv (index (+ i 1)) end)))
             (else
              ;; UTF-8: found eight bytes at a time, checked and decoded
              ;; by utf8->string in C (bench/json, twitter).
              (let utf8 ((i (utf8-run bv i end)))
                (if (< i end)
                    (let ((b (u8 bv i)))
                      (cond
                       ((eqv? b 34) (values (utf8-span->string bv start i ctx) (index (+ i 1))))
                       ((eqv? b 92) (read-escaped-string bv start i end ctx))
                       ((< b 32) (json-error i "a control character escaped (\\n, \\u001f...)"))
                       (else (utf8 (utf8-run bv (index (+ i 1)) end)))))
                    (json-error i "the closing quote of a string"))))))
          (json-error i "the closing quote of a string")))))

(define (hex-digit bv i end)
  (let ((b (if (< i end) (u8 bv i) 0)))
    (cond ((digit? b) (- b 48))
          ((and (<= 97 b) (<= b 102)) (- b 87))
          ((and (<= 65 b) (<= b 70)) (- b 55))
          (else (json-error i "a hexadecimal digit")))))

(define (hex4 bv i end)
  (+ (* 4096 (hex-digit bv i end)) (* 256 (hex-digit bv (+ i 1) end))
     (* 16 (hex-digit bv (+ i 2) end)) (hex-digit bv (+ i 3) end)))

(define (string-run-end bv i end)
  ;; -> the index of the first quote, backslash or control character
  ;; from I, or END
  (let lp ((i (utf8-run bv i end)))
    (if (< i end)
        (let ((b (u8 bv i)))
          (if (or (eqv? b 34) (eqv? b 92) (< b 32))
              i
              (lp (utf8-run bv (index (+ i 1)) end))))
        i)))

(define (read-escaped-string bv start i end ctx)
  ;; The string from START has an escape at I: its bytes, unescaped, go
  ;; to the context's buffer, then become a string.
  (define (room! buffer o n)
    ;; -> a buffer with room for N more bytes at O
    (if (<= (+ o n) (bytevector-length buffer))
        buffer
        (let ((bigger (make-bytevector (* 2 (+ o n)))))
          (bytevector-copy! buffer 0 bigger 0 o)
          (set-context-buffer! ctx bigger)
          bigger)))
  (define (put-code-point! buffer o cp)
    ;; -> the index after CP written as UTF-8 at O
    (put-utf8! buffer o cp))
  (define (lone-surrogate at)
    (if (context-replace-surrogates? ctx)
        #xfffd
        (json-error at "no lone surrogate in a \\u escape")))
  (define (check-utf8! from to)
    ;; Raw bytes are copied as they are: utf8->string checks them at the
    ;; closing quote (an escape writes whole UTF-8 sequences, which can
    ;; neither complete nor be completed by raw bytes), and when it
    ;; refuses them the decode is made again with check-utf8?, which
    ;; checks here, for the offset.
    (when (context-check-utf8? ctx)
      (let ((bad (first-invalid-utf8 bv from to)))
        (unless (= bad to) (json-error bad "valid UTF-8")))))
  (check-utf8! start i)
  (let* ((buffer (room! (context-buffer ctx) 0 (- i start))))
    (bytevector-copy! bv start buffer 0 (- i start))
    (let lp ((i i) (o (- i start)) (buffer buffer))
      (if (< i end)
          (let ((b (u8 bv i)))
            (cond
             ((eqv? b 34)
              (values (utf8->string (span-bytes buffer 0 o ctx)) (+ i 1)))
             ((eqv? b 92)
              (let ((buffer (room! buffer o 4))
                    (e (if (< (+ i 1) end) (u8 bv (+ i 1)) 0)))
                (define-syntax-rule (put byte)
                  (begin (bytevector-u8-set! buffer o byte) (lp (+ i 2) (+ o 1) buffer)))
                (case e
                  ((34) (put 34))
                  ((92) (put 92))
                  ((47) (put 47))
                  ((98) (put 8))
                  ((102) (put 12))
                  ((110) (put 10))
                  ((114) (put 13))
                  ((116) (put 9))
                  ((117)
                   (let ((cp (hex4 bv (+ i 2) end)))
                     (cond
                      ((and (<= #xd800 cp) (<= cp #xdbff))
                       ;; A high surrogate: a low one must follow.
                       (if (and (< (+ i 11) end)
                                (eqv? (u8 bv (+ i 6)) 92) (eqv? (u8 bv (+ i 7)) 117))
                           (let ((low (hex4 bv (+ i 8) end)))
                             (if (and (<= #xdc00 low) (<= low #xdfff))
                                 (lp (+ i 12)
                                     (put-code-point! buffer o (+ #x10000
                                                                  (ash (- cp #xd800) 10)
                                                                  (- low #xdc00)))
                                     buffer)
                                 (lp (+ i 6) (put-code-point! buffer o (lone-surrogate i))
                                     buffer)))
                           (lp (+ i 6) (put-code-point! buffer o (lone-surrogate i)) buffer)))
                      ((and (<= #xdc00 cp) (<= cp #xdfff))
                       (lp (+ i 6) (put-code-point! buffer o (lone-surrogate i)) buffer))
                      (else
                       (lp (+ i 6) (put-code-point! buffer o cp) buffer)))))
                  (else (json-error (+ i 1) "an escape: \\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\u")))))
             ((< b 32) (json-error i "a control character escaped (\\n, \\u001f...)"))
             (else
              ;; a run of bytes up to the next quote, backslash or
              ;; control character, copied at once (bench/json: twitter's
              ;; texts in Japanese have "\n" escapes)
              (let* ((next (string-run-end bv (index (+ i 1)) end))
                     (buffer (room! buffer o (- next i))))
                (check-utf8! i next)
                (bytevector-copy! bv i buffer o (- next i))
                (lp next (+ o (- next i)) buffer)))))
          (json-error i "the closing quote of a string")))))

;;;
;;; Numbers
;;;

;; 10^0 ... 10^22, the powers of ten a double holds exactly, as doubles
;; in a bytevector so that the compiler keeps them unboxed.
(define exact-powers-of-ten
  (let ((bv (make-bytevector (* 8 23))))
    (let lp ((k 0))
      (when (< k 23)
        (bytevector-ieee-double-native-set! bv (* 8 k) (exact->inexact (expt 10 k)))
        (lp (+ k 1))))
    bv))

(define-syntax-rule (power-of-ten k)
  (bytevector-ieee-double-native-ref exact-powers-of-ten (* 8 k)))

(define (span->latin1-string bv start end)
  (let ((s (make-string (- end start))))
    (let lp ((i start) (j 0))
      (if (< i end)
          (begin (string-set! s j (integer->char (u8 bv i))) (lp (+ i 1) (+ j 1)))
          s))))

;; A number's digits (integer, fraction and exponent together) are
;; refused past this: `string->number' and the bignum arithmetic after
;; it take time quadratic in them (a million digits: seconds).  CPython
;; refuses integers of more digits than this since 3.11, and for the
;; same reason; no double needs more than 767 significant digits.
(define max-number-digits 4300)

;; Mantissas accumulate as fixnums while below this; past it, the
;; number is read again by string->number.
(define mantissa-limit 100000000000000000)   ; 10^17

(define (scan-digits bv i end m)
  ;; The digits from I, accumulated onto M.  -> (values next m count
  ;; all-zero? big?): COUNT the digits that went into M, BIG? if some
  ;; did not fit.
  (let lp ((i i) (m m) (n 0) (zero? #t) (big? #f))
    (let ((b (if (< i end) (u8 bv i) 0)))
      (cond
       ((not (digit? b)) (values i m n zero? big?))
       ((< m mantissa-limit) (lp (+ i 1) (+ (* m 10) (- b 48)) (+ n 1) (and zero? (eqv? b 48)) big?))
       (else (lp (+ i 1) m n (and zero? (eqv? b 48)) #t))))))

(define (scan-exponent bv i end)
  ;; I: past "e" or "E".  -> (values next exponent big?)
  (let* ((s (if (< i end) (u8 bv i) 0))
         (k (if (or (eqv? s 43) (eqv? s 45)) (+ i 1) i)))
    (unless (and (< k end) (digit? (u8 bv k)))
      (expected-error bv k end "a digit of the exponent"))
    (let lp ((k k) (e 0))
      (let ((b (if (< k end) (u8 bv k) 0)))
        (cond
         ((not (digit? b)) (values k (if (eqv? s 45) (- e) e) #f))
         ;; Past 10^8 the value is 0 or infinite whatever the mantissa:
         ;; string->number says which.
         ((< e 100000000) (lp (+ k 1) (+ (* e 10) (- b 48))))
         (else (call-with-values (lambda () (scan-digits bv k end 0))
                 (lambda (k . _) (values k 0 #t)))))))))

(define-inlinable (number-digits bv i0 j k l)
  ;; -> how many digits the number has, whose integer part is [I0, J),
  ;; fraction (after its point) up to K and exponent (after its "e" and
  ;; sign) up to L
  (- l i0
     (if (> k j) 1 0)                   ; the point
     (if (> l k)                        ; "e", and its sign
         (let ((s (u8 bv (+ k 1)))) (if (or (eqv? s 43) (eqv? s 45)) 2 1))
         0)))

(define (scan-number bv i end)
  ;; The number at I.  -> (values next mantissa exponent kind)
  ;; KIND: 'integer (MANTISSA the exact value); 'decimal (the value is
  ;; MANTISSA * 10^EXPONENT, MANTISSA signed and below 10^17, -0.0 for
  ;; a negative zero); 'integral, the same when the fraction is zero
  ;; and the exponent not negative (an integer, for guile-json); 'big,
  ;; when only string->number on [I, NEXT) can say.
  (let* ((neg? (and (< i end) (eqv? (u8 bv i) 45)))
         (i0 (if neg? (+ i 1) i)))
    (unless (and (< i0 end) (digit? (u8 bv i0)))
      (expected-error bv i0 end (if neg? "a digit after \"-\"" "a value")))
    (call-with-values
        (lambda ()
          (if (eqv? (u8 bv i0) 48)
              (if (and (< (+ i0 1) end) (digit? (u8 bv (+ i0 1))))
                  (json-error (+ i0 1) "\".\", an exponent or the end of the number (no leading zeros)")
                  (values (+ i0 1) 0 1 #t #f))
              (scan-digits bv i0 end 0)))
      (lambda (j m _ __ int-big?)
        (call-with-values
            (lambda ()
              (if (and (< j end) (eqv? (u8 bv j) 46))
                  (begin
                    (unless (and (< (+ j 1) end) (digit? (u8 bv (+ j 1))))
                      (expected-error bv (+ j 1) end "a digit after the decimal point"))
                    (scan-digits bv (+ j 1) end m))
                  (values j m 0 #t #f)))
          (lambda (k m frac-digits frac-zero? frac-big?)
            (call-with-values
                (lambda ()
                  (if (and (< k end) (let ((b (u8 bv k))) (or (eqv? b 101) (eqv? b 69))))
                      (scan-exponent bv (+ k 1) end)
                      (values k #f #f)))
              (lambda (l e exp-big?)
                (when (> (number-digits bv i0 j k l) max-number-digits)
                  (json-error i (string-append "a number of at most "
                                               (number->string max-number-digits)
                                               " digits")))
                (cond
                 ((or int-big? frac-big? exp-big?) (values l #f #f 'big))
                 ((and (= k j) (not e)) (values l (if neg? (- m) m) 0 'integer))
                 (else
                  (let ((e (or e 0)))
                    (values l (if neg? (if (eqv? m 0) -0.0 (- m)) m) (- e frac-digits)
                            (if (and frac-zero? (>= e 0)) 'integral 'decimal)))))))))))))

;; 2^0, 2^-1 ... 2^-160 as doubles (exact), for `quotient->real'.
(define negative-powers-of-two
  (let ((bv (make-bytevector (* 8 161))))
    (let lp ((k 0))
      (when (<= k 160)
        (bytevector-ieee-double-native-set! bv (* 8 k) (exact->inexact (expt 2 (- k))))
        (lp (+ k 1))))
    bv))

;; 5^0 ... 5^22: each below 2^52
(define powers-of-five
  (list->vector (map (lambda (k) (expt 5 k)) (iota 23))))

(define (bit-length n) (integer-length n))

(define (quotient->real m k)
  ;; M / 10^K correctly rounded, for 0 < M < 10^18 and 0 < K <= 22, with
  ;; fixnums only: M / 5^K by binary long division in fixnum-sized steps
  ;; to 55 significant bits and a sticky remainder, rounded to 53 bits
  ;; (to nearest, ties to even), then scaled by 2^-K and the bits the
  ;; division shifted in, which is exact.  The numbers of
  ;; bench/json's canada.json have 17 digits and land here rather than
  ;; in string->number.
  (let* ((d (vector-ref powers-of-five k))
         (step (- 61 (bit-length d))))
    (let lp ((q (quotient m d)) (r (remainder m d)) (shift 0))
      (let ((bits (bit-length q)))
        (if (< bits 55)
            (let* ((c (min step (- 55 bits)))
                   (r2 (ash r c)))
              (lp (+ (ash q c) (quotient r2 d)) (remainder r2 d) (+ shift c)))
            (let* ((drop (- bits 53))
                   (kept (ash q (- drop)))
                   (low (- q (ash kept drop)))
                   (half (ash 1 (- drop 1)))
                   (kept (if (or (> low half)
                                 (and (= low half) (or (not (eqv? r 0)) (odd? kept))))
                             (+ kept 1)
                             kept))
                   (scale (+ shift k (- drop))))
              (if (< scale 0)
                  (* (exact->inexact kept) (exact->inexact (ash 1 (- scale))))
                  (* (exact->inexact kept)
                     (bytevector-ieee-double-native-ref negative-powers-of-two (* 8 scale))))))))))

(define (decimal->real m e)
  ;; M * 10^E as a double, correctly rounded, or #f when no fast path
  ;; applies
  (let ((a (abs m)))
    (cond
     ((and (< a 9007199254740992) (<= -22 e 22))
      ;; Clinger: both exact doubles, one rounding
      (let ((x (exact->inexact m)))
        (if (< e 0) (/ x (power-of-ten (- e))) (* x (power-of-ten e)))))
     ((and (< e 0) (<= -22 e) (exact-integer? m))
      (let ((x (quotient->real a (- e))))
        (if (< m 0) (- x) x)))
     (else #f))))

(define (integer-span? bv i j)
  ;; no fraction and no exponent in [I, J)
  (let lp ((k i))
    (or (= k j)
        (let ((b (u8 bv k)))
          (and (or (digit? b) (eqv? b 45)) (lp (+ k 1)))))))

(define (span->real bv i j)
  ;; The number in [I, J), already checked, correctly rounded to a
  ;; double: its digits M and exponent E exact, M * 10^E made only once
  ;; its order of magnitude is known to be a double's, so that an
  ;; exponent of any length costs its reading and no more.  Past the
  ;; largest double, an error; below half the smallest, a zero.
  (let* ((s (span->latin1-string bv i j))
         (neg? (eqv? (string-ref s 0) #\-))
         (e-at (string-index s (lambda (c) (or (eqv? c #\e) (eqv? c #\E)))))
         (mantissa (substring s (if neg? 1 0) (or e-at (string-length s))))
         (point (string-index mantissa #\.))
         (digits (if point
                     (string-append (substring mantissa 0 point) (substring mantissa (+ point 1)))
                     mantissa))
         (m (string->number digits 10))
         (e (- (if e-at (string->number (substring s (+ e-at 1)) 10) 0)
               (if point (- (string-length mantissa) point 1) 0))))
    (if (eqv? m 0)
        (if neg? -0.0 0.0)
        (let ((magnitude (+ e -1 (- (string-length digits)
                                    (or (string-index digits (lambda (c) (not (eqv? c #\0)))) 0)))))
          (cond
           ((> magnitude 308) (json-error i "a number within the range of a double"))
           ((< magnitude -325) (if neg? -0.0 0.0))
           (else
            (let ((x (exact->inexact (* m (expt 10 e)))))
              (when (inf? x) (json-error i "a number within the range of a double"))
              (if neg? (- x) x))))))))

(define-syntax-rule (with-small-integer (bv i end) (m k) small otherwise)
  ;; The integer at I, when it has no fraction nor exponent and fewer
  ;; than 18 digits (most numbers: ids, counts), read in one pass with M
  ;; its value and K the index after it, for SMALL; anything else
  ;; (errors included) goes to OTHERWISE, which reads it again fully.
  ;; All that ends the fast path is one `cond' clause: Guile 3.0.8
  ;; compiles an `and' of those tests shared by two branches as a closure,
  ;; allocated per number (bench/json, allocation per decode).
  (let* ((neg? (and (< i end) (eqv? (u8 bv i) 45)))
         (i0 (index (if neg? (+ i 1) i))))
    (let lp ((k i0) (m 0))
      (let ((b (if (< k end) (u8 bv k) 0)))
        (cond
         ((and (digit? b) (< m mantissa-limit))
          (lp (index (+ k 1)) (logand (+ (times-ten m) (- b 48)) #xfffffffffffffff)))
         ((or (digit? b) (eqv? b 46) (eqv? b 101) (eqv? b 69) (eqv? k i0)
              (and (eqv? (u8 bv i0) 48) (not (eqv? k (+ i0 1)))))
          otherwise)
         (else
          (let ((m (if neg? (- m) m)))
            small)))))))

(define (json-read-number bv i end ctx)
  "Return the number at I in BV (an exact integer, or an inexact real
when it has a fraction or exponent; see the mapping) and the index after
it; raise a &json-error if there is none."
  (with-small-integer (bv i end) (m k)
    (values m k)
    (if (context-guile-json? ctx)
        (read-number bv i end ctx)
        (read-decimal bv i end ctx #f))))

(define (read-decimal bv i end ctx real?)
  ;; The number at I that has a fraction or an exponent, read in one
  ;; pass in machine words, when its digits fit 10^18 (all but rare
  ;; numbers): made a double by Clinger's fast path or else by
  ;; `decimal->flonum' (bench/json, canada).  Anything else, errors
  ;; included, is read again by read-number (REAL? #f) or read-real.
  (define (again)
    (if real? (read-real bv i end ctx) (read-number bv i end ctx)))
  (let* ((end (index end))
         (i (index i))
         (neg? (and (< i end) (eqv? (u8 bv i) 45)))
         (i0 (if neg? (index (+ i 1)) i)))
    (define (finish m q l)
      ;; the value is M 10^Q, its text ends at L
      (cond
       ((> (- l i) max-number-digits) (again))
       ((eqv? m 0) (values (if neg? -0.0 0.0) l))
       ((and (< m 9007199254740992) (<= -22 q) (<= q 22))
        ;; Clinger: M and 10^|Q| are exact doubles, one rounding
        (let* ((x (exact->inexact m))
               (x (if (< q 0) (/ x (power-of-ten (- q))) (* x (power-of-ten q)))))
          (values (if neg? (- x) x) l)))
       ((let ((scratch (context-buffer ctx)))
          (bytevector-u64-native-set! scratch 0 m)
          (bytevector-s32-native-set! scratch 8 q)
          (bytevector-u8-set! scratch 12 (if neg? 1 0))
          (decimal->flonum scratch))
        => (lambda (x) (values x l)))
       (else (again))))
    (define (exponent k m q)
      ;; K: at "e" or "E"
      (let* ((s (if (< (+ k 1) end) (u8 bv (+ k 1)) 0))
             (k0 (if (or (eqv? s 43) (eqv? s 45)) (index (+ k 2)) (index (+ k 1)))))
        (let lp ((l k0) (e 0))
          (let ((b (if (< l end) (u8 bv l) 0)))
            (cond
             ((and (digit? b) (< e 100000000)) (lp (index (+ l 1)) (+ (times-ten e) (- b 48))))
             ((or (digit? b) (eqv? l k0)) (again))
             (else (finish m (+ q (if (eqv? s 45) (- e) e)) l)))))))
    (define (after-digits k m q)
      (let ((b (if (< k end) (u8 bv k) 0)))
        (if (or (eqv? b 101) (eqv? b 69))
            (exponent k m q)
            (finish m q k))))
    (if (and (< (+ i0 1) end) (eqv? (u8 bv i0) 48) (digit? (u8 bv (+ i0 1))))
        (again)                         ; a leading zero: refused there
        (let int ((k i0) (m 0))
          (let ((b (if (< k end) (u8 bv k) 0)))
            (cond
             ((and (digit? b) (< m mantissa-limit))
              (int (index (+ k 1)) (logand (+ (times-ten m) (- b 48)) #xfffffffffffffff)))
             ((or (digit? b) (eqv? k i0)) (again))
             ((eqv? b 46)
              (let frac ((j (index (+ k 1))) (m m) (q 0))
                (let ((b (if (< j end) (u8 bv j) 0)))
                  (cond
                   ((and (digit? b) (< m mantissa-limit))
                    (frac (index (+ j 1)) (logand (+ (times-ten m) (- b 48)) #xfffffffffffffff)
                          (- q 1)))
                   ((or (digit? b) (eqv? j (+ k 1))) (again))
                   (else (after-digits j m q))))))
             ((or (eqv? b 101) (eqv? b 69)) (exponent k m 0))
             (else (again))))))))

(define (read-number bv i end ctx)
  (call-with-values (lambda () (scan-number bv i end))
    (lambda (j m e kind)
      (case kind
        ((integer) (values m j))
        ((big)
         (if (integer-span? bv i j)
             (values (string->number (span->latin1-string bv i j) 10) j)
             (values (span->real bv i j) j)))
        ((integral)
         ;; guile-json's exact integers stop where doubles do: 1E99999999
         ;; is not worth a 40-megabyte bignum
         (if (and (context-guile-json? ctx) (<= e 308))
             (values (* (if (eqv? m -0.0) 0 m) (expt 10 e)) j)
             (values (or (decimal->real m e) (span->real bv i j)) j)))
        (else (values (or (decimal->real m e) (span->real bv i j)) j))))))

(define (json-read-integer bv i end ctx)
  "Return the integer at I in BV (no fraction, no exponent) and the
index after it; raise a &json-error for anything else."
  (with-small-integer (bv i end) (m k)
    (values m k)
    (read-integer bv i end ctx)))

(define (read-integer bv i end ctx)
  (call-with-values (lambda () (scan-number bv i end))
    (lambda (j m e kind)
      (case kind
        ((integer) (values m j))
        ((big)
         (if (integer-span? bv i j)
             (values (string->number (span->latin1-string bv i j) 10) j)
             (json-error i "an integer")))
        (else (json-error i "an integer"))))))

(define (json-read-real bv i end ctx)
  "Return the number at I in BV as an inexact real and the index after
it; raise a &json-error if there is no number."
  (with-small-integer (bv i end) (m k)
    (values (exact->inexact m) k)
    (read-decimal bv i end ctx #t)))

(define (read-real bv i end ctx)
  (call-with-values (lambda () (scan-number bv i end))
    (lambda (j m e kind)
      (case kind
        ((integer) (values (exact->inexact m) j))
        ((big) (values (span->real bv i j) j))
        (else (values (or (decimal->real m e) (span->real bv i j)) j))))))

;;;
;;; Arrays and objects
;;;

(define-inlinable (json-context-push! ctx value)
  "Push VALUE on CTX's stack of array elements."
  (let ((stack (context-stack ctx))
        (top (json-context-top ctx)))
    (if (< top (vector-length stack))
        (vector-set! stack top value)
        (let ((bigger (make-vector (* 2 top))))
          (vector-move-left! stack 0 top bigger 0)
          (vector-set! bigger top value)
          (set-context-stack! ctx bigger)))
    (set-context-top! ctx (+ top 1))))

(define (json-context-pop-vector! ctx base)
  "Return the values pushed on CTX's stack since its top was BASE, as a
vector, and pop them."
  (let* ((top (json-context-top ctx))
         (v (make-vector (- top base))))
    (vector-move-left! (context-stack ctx) base top v 0)
    ;; No reference left behind for the collector to keep alive.
    (vector-fill! (context-stack ctx) #f base top)
    (set-context-top! ctx base)
    v))

(define (read-array bv i end ctx depth)
  ;; I: just past "["
  (let ((base (json-context-top ctx))
        (j (json-skip-whitespace bv i end)))
    (if (and (< j end) (eqv? (u8 bv j) 93))
        (values (vector) (+ j 1))
        (let lp ((j j))
          (call-with-values (lambda () (read-value bv j end ctx depth))
            (lambda (value k)
              (json-context-push! ctx value)
              (let ((k (json-skip-whitespace bv k end)))
                (if (< k end)
                    (case (u8 bv k)
                      ((44) (lp (json-skip-whitespace bv (+ k 1) end)))
                      ((93) (values (json-context-pop-vector! ctx base) (+ k 1)))
                      (else (expected-error bv k end "\",\" or \"]\"")))
                    (expected-error bv k end "\",\" or \"]\"")))))))))

(define (read-member bv j end ctx depth)
  ;; -> (values (key . value) next) for the member at J
  (call-with-values (lambda () (json-read-string bv j end ctx))
    (lambda (key k)
      (let ((k (json-skip-whitespace bv k end)))
        (unless (and (< k end) (eqv? (u8 bv k) 58))
          (expected-error bv k end "\":\""))
        (call-with-values
            (lambda () (read-value bv (json-skip-whitespace bv (+ k 1) end) end ctx depth))
          (lambda (value k)
            (values (cons key value) k)))))))

(define (read-object bv i end ctx depth)
  ;; I: just past "{".  The alist grows at its tail (set-cdr!), so that
  ;; it comes out in document order with no reverse.
  (let ((j (json-skip-whitespace bv i end))
        (reverse? (context-guile-json? ctx)))
    (define (key-expected j)
      (expected-error bv j end "a string key"))
    (cond
     ((and (< j end) (eqv? (u8 bv j) 125)) (values '() (+ j 1)))
     ((not (and (< j end) (eqv? (u8 bv j) 34))) (key-expected j))
     (else
      (let* ((head (list #f)))
        (let lp ((j j) (tail head))
          (call-with-values (lambda () (read-member bv j end ctx depth))
            (lambda (member k)
              (let ((tail (if reverse?
                              (begin (set-cdr! head (cons member (cdr head))) head)
                              (let ((cell (list member)))
                                (set-cdr! tail cell)
                                cell)))
                    (k (json-skip-whitespace bv k end)))
                (if (< k end)
                    (case (u8 bv k)
                      ((44)
                       (let ((j (json-skip-whitespace bv (+ k 1) end)))
                         (if (and (< j end) (eqv? (u8 bv j) 34))
                             (lp j tail)
                             (key-expected j))))
                      ((125) (values (cdr head) (+ k 1)))
                      (else (expected-error bv k end "\",\" or \"}\"")))
                    (expected-error bv k end "\",\" or \"}\"")))))))))))

(define (read-value bv i end ctx depth)
  ;; DEPTH: the arrays and objects open around I
  (if (< i end)
      (case (u8 bv i)
        ((34) (json-read-string bv i end ctx))
        ((123)
         (if (< depth (json-context-max-depth ctx))
             (read-object bv (+ i 1) end ctx (+ depth 1))
             (json-error i (string-append "at most " (number->string (json-context-max-depth ctx))
                                          " nested arrays and objects"))))
        ((91)
         (if (< depth (json-context-max-depth ctx))
             (read-array bv (+ i 1) end ctx (+ depth 1))
             (json-error i (string-append "at most " (number->string (json-context-max-depth ctx))
                                          " nested arrays and objects"))))
        ((116 102) (json-read-boolean bv i end ctx))
        ((110) (json-read-null bv i end ctx))
        (else (json-read-number bv i end ctx)))
      (expected-error bv i end "a value")))

(define (json-read-value bv i end ctx depth)
  "Return the JSON value at I in BV (in the context's mapping), DEPTH
arrays and objects deep, and the index after it; raise a &json-error
for anything else."
  (read-value bv i end ctx depth))

(define (json-skip-value bv i end ctx depth)
  "Return the index after the JSON value at I in BV, checked as
strictly as it would be read; DEPTH as for `json-read-value'."
  ;; Read and dropped: unknown fields are rare enough that a separate
  ;; validator would not pay for itself.
  (call-with-values (lambda () (read-value bv i end ctx depth))
    (lambda (value j) j)))

;;;
;;; Keys, for the schema decoders
;;;

(define-inlinable (json-key-at? bv i end key)
  "Return #t if BV holds at I a string whose bytes are KEY (a
bytevector of ASCII letters, digits and punctuation that need no
escape), quotes included, followed by optional whitespace and \":\";
the index of the value is then json-skip-whitespace past the colon."
  (let ((n (bytevector-length key)))
    (and (< (+ i n 1) end)
         (eqv? (u8 bv i) 34)
         (eqv? (u8 bv (+ i n 1)) 34)
         (let lp ((k 0))
           (if (< k n)
               (and (eqv? (u8 bv (+ i 1 k)) (u8 key k)) (lp (+ k 1)))
               #t)))))

(define (json-read-key bv i end ctx)
  "Return the key of the member at I in BV, a string, and the index of
its value (past the colon and whitespace); raise a &json-error if there
is no key and colon."
  (call-with-values (lambda () (json-read-string bv i end ctx))
    (lambda (key k)
      (let ((k (json-skip-whitespace bv k end)))
        (unless (and (< k end) (eqv? (u8 bv k) 58))
          (expected-error bv k end "\":\""))
        (values key (json-skip-whitespace bv (+ k 1) end))))))

(define (json-expect-end bv i end)
  "Return I if only whitespace follows it in BV before END; else raise
a &json-error."
  (let ((j (json-skip-whitespace bv i end)))
    (if (= j end)
        j
        (json-error j (string-append "the end of the text, not "
                                     (describe-byte bv j end))))))

;;;
;;; The entry points
;;;

(define (json-decode read bv start end ctx)
  "Return the value that READ (a procedure (bv i end ctx depth) ->
(values value next), as `json-read-value') reads from the JSON text in
BV from START to END with the fresh context CTX, whitespace allowed
around it and nothing else; raise a &json-error for anything else."
  (define (decode)
    (call-with-values (lambda () (read bv (json-skip-whitespace bv start end) end ctx 0))
      (lambda (value i)
        (json-expect-end bv i end)
        value)))
  ;; Strings' UTF-8 is checked by utf8->string; what it refuses, the
  ;; decode made again with the check in Scheme names with its offset
  ;; (see utf8-span->string).
  (catch 'decoding-error
    decode
    (lambda _
      (set-context-top! ctx 0)
      (set-context-check-utf8! ctx #t)
      (decode))))

(define* (decode-json bv #:key (start 0) (end (bytevector-length bv))
                      (mapping 'plucky) (max-depth 512) (max-size #f)
                      (lone-surrogates 'error))
  "Return the Scheme value of the JSON text in BV (a bytevector of
UTF-8) from START to END.  Objects become alists with string keys in
document order, arrays vectors, strings strings, numbers exact integers
when they have neither fraction nor exponent and inexact reals
otherwise, true and false #t and #f, null the symbol null; with MAPPING
'guile-json, guile-json's reading instead (objects' members in reverse
order, \"1.0\" an exact 1).  At most MAX-DEPTH nested arrays and
objects and MAX-SIZE bytes (#f: no limit); a \\u escape of a lone
surrogate is an error unless LONE-SURROGATES is 'replace (U+FFFD).
Raises a &json-error, with the byte offset from the start of BV and what
was expected there, for anything that is not one RFC 8259 JSON text."
  (when (and max-size (> (- end start) max-size))
    (json-error (+ start max-size)
                (string-append "at most " (number->string max-size) " bytes")))
  (json-decode read-value bv start end
               (make-json-context #:max-depth max-depth #:mapping mapping
                                  #:lone-surrogates lone-surrogates)))

;;; (plucky web json read) ends here
