;;; (plucky http bytes) --- byte and word scanning shared by the parsers

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The request parser (plucky http parse) and the multipart parser
;;; (plucky http multipart) scan bytevectors a byte, or eight bytes, at a
;;; time; the HTML writer and the JSON reader write UTF-8 (`put-utf8!').  The pieces both use are macros, expanded where they are used,
;;; so that the compiler sees the arithmetic inside the callers' loops
;;; and keeps it in untagged registers (bench/parse.scm).
;;;
;;; Everything here is a macro, `*little-endian?*' too (the answer is the
;;; compiling machine's, and compiled code is built for one byte order
;;; anyway), so the parsers import this module while they are compiled
;;; only, `(eval-when (expand) (use-modules (plucky http bytes)))', and
;;; it is not loaded when they are, which saves its load on every start
;;; (bench/startup-modules, bench/startup-instructions).
;;;
;;; Code:

(define-module (plucky http bytes)
  #:use-module (rnrs bytevectors)
  #:export (u8
            index-hint
            lanes-equal
            *little-endian?*
            lowest-lane
            put-utf8!
            bytevector-copy-range
            bytevector-concatenate))

(define-syntax-rule (u8 bv i) (bytevector-u8-ref bv i))

;; Telling the compiler that an index is below 2^32 lets it keep loop
;; counters as untagged integers: without it `(+ i 1)' is a call into the
;; runtime and a byte loop runs several times slower (bench/parse.scm).
;; The callers check every index against the bytevector at entry, so
;; this is a no-op on every value that reaches it.
(define-syntax-rule (index-hint i) (logand i #xffffffff))

;; Bit 7 of each byte lane of the result is set exactly when that byte of
;; the 64-bit word X equals the byte repeated in PATTERN.  Lanes are
;; masked to 7 bits before the addition, so no lane carries into the next.
(define-syntax-rule (lanes-equal x pattern)
  (let ((y (logxor x pattern)))
    (logxor (logand (logior (+ (logand y #x7f7f7f7f7f7f7f7f) #x7f7f7f7f7f7f7f7f) y)
                    #x8080808080808080)
            #x8080808080808080)))

(define-syntax *little-endian?*
  ;; #t or #f, a literal: the compiler drops the branch not taken.
  (lambda (form)
    (syntax-case form ()
      (id (identifier? #'id)
          (datum->syntax #'id (eq? (native-endianness) (endianness little)))))))

(define-syntax-rule (lowest-lane t)
  ;; T: a word of lane flags (bit 7 of each byte), not 0 -> the index of
  ;; its first flagged byte on a little-endian machine: a binary search on
  ;; lanes, cheaper than going back to a byte loop for up to 7 bytes.
  (if (= 0 (logand t #x80808080))
      (if (= 0 (logand t #x808000000000))
          (if (= 0 (logand t #x80000000000000)) 7 6)
          (if (= 0 (logand t #x8000000000)) 5 4))
      (if (= 0 (logand t #x8080))
          (if (= 0 (logand t #x800000)) 3 2)
          (if (= 0 (logand t #x80)) 1 0))))

;; Code point CP written as UTF-8 into BV at AT -> the index after it
;; (no room check: the caller made room for four bytes).  The HTML
;; writer and the JSON reader both write text this way.
(define-syntax-rule (put-utf8! bv at cp)
  (let ((o at) (n cp))
    (cond
     ((< n #x80) (bytevector-u8-set! bv o n) (+ o 1))
     ((< n #x800)
      (bytevector-u8-set! bv o (logior #xC0 (ash n -6)))
      (bytevector-u8-set! bv (+ o 1) (logior #x80 (logand n #x3F)))
      (+ o 2))
     ((< n #x10000)
      (bytevector-u8-set! bv o (logior #xE0 (ash n -12)))
      (bytevector-u8-set! bv (+ o 1) (logior #x80 (logand (ash n -6) #x3F)))
      (bytevector-u8-set! bv (+ o 2) (logior #x80 (logand n #x3F)))
      (+ o 3))
     (else
      (bytevector-u8-set! bv o (logior #xF0 (ash n -18)))
      (bytevector-u8-set! bv (+ o 1) (logior #x80 (logand (ash n -12) #x3F)))
      (bytevector-u8-set! bv (+ o 2) (logior #x80 (logand (ash n -6) #x3F)))
      (bytevector-u8-set! bv (+ o 3) (logior #x80 (logand n #x3F)))
      (+ o 4)))))

(define (bytevector-copy-range bv start end)
  "Return a new bytevector of the bytes of BV in [START, END)."
  (let ((copy (make-bytevector (- end start))))
    (bytevector-copy! bv start copy 0 (- end start))
    copy))

(define (bytevector-concatenate bvs)
  "Return a fresh bytevector of the bytes of BVS, a list of bytevectors,
one after the other."
  (let ((all (make-bytevector (apply + (map bytevector-length bvs)))))
    (let lp ((bvs bvs) (at 0))
      (if (null? bvs)
          all
          (begin
            (bytevector-copy! (car bvs) 0 all at (bytevector-length (car bvs)))
            (lp (cdr bvs) (+ at (bytevector-length (car bvs)))))))))

;;; (plucky http bytes) ends here
