;;; (plucky web json decimal) --- decimals to doubles, correctly rounded, in machine words

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `decimal->flonum' turns W 10^Q (W below 2^64, as the decoder of
;;; (plucky web json read) accumulates a number's digits) into the
;;; nearest double, ties to even, or says it cannot: the caller then
;;; takes the exact path (bignums).  It is what made bench/json's
;;; canada.json, all coordinates of 17 digits, cost thousands of
;;; instructions a number: past 2^53 or 10^22, Clinger's fast path does
;;; not apply and the division had been made with Guile's generic
;;; arithmetic.
;;;
;;; The method is Eisel and Lemire's ("Number Parsing at a Gigabyte per
;;; Second", 2021; Lemire's fast_float): W, shifted so that its top bit
;;; is set, times the 128 first bits of 5^Q (from a table) gives, in its
;;; high 64 bits, the double's 53 bits and a rounding bit, with an error
;;; below one unit in the low word; when the low bits of the product are
;;; all ones, a second product with the next 64 bits of 5^Q settles it.
;;; Cases still ambiguous (a product whose low word stays all ones
;;; outside the exponents where that is proved exact, overflow) answer
;;; #f.  Exact halfway cases exist only for -4 <= Q <= 23 and are
;;; detected.
;;;
;;; The 64 x 64 -> 128 bit products are made of 32-bit halves, each
;;; partial product below 2^64, with every value masked so that Guile
;;; keeps it an unboxed machine word (as in (plucky web json float)).
;;;
;;; Code:

(define-module (plucky web json decimal)
  #:use-module (rnrs bytevectors)
  #:export (decimal->flonum))

;; The powers of five, 5^q for q in [-342, 308]: at 16 (q + 342), the
;; 128 most significant bits of 5^q (of 2^b / 5^-q for q < 0, rounded
;; up where that is exact, else truncated), high word first, as u64.
(define smallest-q -342)
(define largest-q 308)

(define powers-of-five
  (let ((bv (make-bytevector (* 16 (+ 1 (- largest-q smallest-q))))))
    (define (put! q c)
      (let ((o (* 16 (- q smallest-q))))
        (bytevector-u64-native-set! bv o (ash c -64))
        (bytevector-u64-native-set! bv (+ o 8) (logand c #xffffffffffffffff))))
    (let lp ((q smallest-q))
      (when (<= q largest-q)
        (put! q
              (if (< q 0)
                  (let* ((p (expt 5 (- q)))
                         (z (integer-length (- p 1)))  ; 2^z >= p
                         (b (if (>= q -27) (+ z 127) (+ (* 2 z) 128)))
                         (c (+ (quotient (ash 1 b) p) 1)))
                    (ash c (- 128 (integer-length c))))
                  (let ((p (expt 5 q)))
                    (ash p (- 128 (integer-length p))))))
        (lp (+ q 1))))
    bv))

;; At 2 (q + 342), as s16: floor(q log2 10) + 63 + 1023, the biased
;; binary exponent that goes with the table's entry for q (read, not
;; computed: a product by Q would be a call into libguile).
(define binary-exponents
  (let ((bv (make-bytevector (* 2 (+ 1 (- largest-q smallest-q))))))
    (let lp ((q smallest-q))
      (when (<= q largest-q)
        (bytevector-s16-native-set! bv (* 2 (- q smallest-q))
                                    (+ (ash (* 217706 q) -16) 63 1023))
        (lp (+ q 1))))
    bv))

(define-syntax-rule (u64 x) (logand x #xffffffffffffffff))

(define-syntax-rule (with-product (a b) (hi lo) body ...)
  ;; HI and LO, the high and low words of the product of the words A
  ;; and B, from four products of 32-bit halves
  (let* ((a0 (logand a #xffffffff)) (a1 (ash a -32))
         (b0 (logand b #xffffffff)) (b1 (ash b -32))
         (p00 (* a0 b0)) (p01 (* a0 b1)) (p10 (* a1 b0)) (p11 (* a1 b1))
         (mid (+ (ash p00 -32) (logand p01 #xffffffff) (logand p10 #xffffffff)))
         (lo (logior (logand p00 #xffffffff) (ash (logand mid #xffffffff) 32)))
         (hi (u64 (+ p11 (ash p01 -32) (ash p10 -32) (ash mid -32)))))
    body ...))

(define-inlinable (bits->flonum scratch m e)
  ;; the double whose biased exponent is E and significand's 52 bits M,
  ;; negative if SCRATCH's sign byte says so
  (bytevector-u64-native-set! scratch 0 (logior (ash (logand (bytevector-u8-ref scratch 12) 1) 63)
                                                (ash (logand e #x7ff) 52)
                                                m))
  (bytevector-ieee-double-native-ref scratch 0))

(define-syntax-rule (with-sum (a b) (sum carry?) body ...)
  ;; SUM, A + B modulo 2^64, and CARRY?, whether it wrapped, from 32-bit
  ;; halves: (logand (+ a b) #xffffffffffffffff) was boxed here
  (let* ((low (+ (logand a #xffffffff) (logand b #xffffffff)))
         (high (+ (ash a -32) (ash b -32) (ash low -32)))
         (sum (logior (ash (logand high #xffffffff) 32) (logand low #xffffffff)))
         (carry? (> high #xffffffff)))
    body ...))

(define (decimal->flonum scratch)
  "Return the double nearest W 10^Q, ties to even, where W is the word
stored in native byte order at offset 0 of the bytevector SCRATCH (0 < W
< 2^64) and Q the signed 32-bit integer at offset 8, negated if the byte
at offset 12 is 1 (0: positive); or #f when this method cannot tell, or
the value is past the largest double.  SCRATCH is written over."
  ;; The sign is applied here, to the bits: negating the boxed result
  ;; would allocate a second double (bench/json, canada).
  ;; W and Q come from the bytevector, so that Guile knows they are
  ;; words and keeps every value below unboxed: no call into libguile,
  ;; no bignum.
  ;; Each shift is by a constant (Guile 3.0.8 miscompiled a shift of a
  ;; word to the left by a variable amount).
  (define q (bytevector-s32-native-ref scratch 8))
  (cond
   ((< q smallest-q) (bits->flonum scratch 0 0))
   ((> q largest-q) #f)
   (else
    (let* ((w0 (bytevector-u64-native-ref scratch 0))
           ;; W normalized: shifted left until its top bit is set, by LZ
           (s32? (< w0 #x100000000))
           (w1 (if s32? (ash (logand w0 #xffffffff) 32) w0))
           (s16? (< w1 #x1000000000000))
           (w2 (if s16? (ash (logand w1 #xffffffffffff) 16) w1))
           (s8? (< w2 #x100000000000000))
           (w3 (if s8? (ash (logand w2 #xffffffffffffff) 8) w2))
           (s4? (< w3 #x1000000000000000))
           (w4 (if s4? (ash (logand w3 #xfffffffffffffff) 4) w3))
           (s2? (< w4 #x4000000000000000))
           (w5 (if s2? (ash (logand w4 #x3fffffffffffffff) 2) w4))
           (s1? (< w5 #x8000000000000000))
           (w (if s1? (ash (logand w5 #x7fffffffffffffff) 1) w5))
           (lz (+ (if s32? 32 0) (if s16? 16 0) (if s8? 8 0) (if s4? 4 0) (if s2? 2 0) (if s1? 1 0)))
           (o (logand (ash (- q smallest-q) 4) #xffff))
           (t-hi (bytevector-u64-native-ref powers-of-five o))
           (t-lo (bytevector-u64-native-ref powers-of-five (+ o 8))))
      (with-product (w t-hi) (hi1 lo1)
        (with-product (w t-lo) (hi2 _)
          ;; the next 64 bits of 5^Q count when they may carry into HI1
          (with-sum (lo1 hi2) (lo* carry?)
           (with-sum (hi1 1) (hi1+1 _)
            (let* ((second? (= (logand hi1 #x1ff) #x1ff))
                   (hi (if (and second? carry?) hi1+1 hi1))
                   (lo (if second? lo* lo1)))
            (if (and (= lo #xffffffffffffffff) (not (and (<= -27 q) (<= q 55))))
                #f
                (let* ((upper? (>= hi #x8000000000000000))
                       (m (if upper? (ash hi -10) (ash hi -9)))
                       (low-bits (if upper? (logand hi #x3ff) (logand hi #x1ff)))
                       (power2 (- (+ (bytevector-s16-native-ref binary-exponents (ash o -3))
                                      (if upper? 1 0))
                                   lz)))
                  (cond
                   ((<= power2 0)
                    ;; subnormal, or zero
                    (if (>= (- 1 power2) 64)
                        (bits->flonum scratch 0 0)
                        (let* ((m (ash m (- power2 1)))
                               (m (ash (+ m (logand m 1)) -1)))
                          (bits->flonum scratch (logand m #xfffffffffffff)
                                        (if (< m #x10000000000000) 0 1)))))
                   (else
                    (let* ((m (if (and (<= lo 1) (<= -4 q) (<= q 23) (= (logand m 3) 1)
                                       (= low-bits 0))
                                  ;; exactly halfway: to even
                                  (logand m #x7ffffffffffffe)
                                  m))
                           (m (ash (+ m (logand m 1)) -1))
                           (carry? (>= m #x20000000000000))
                           (power2 (if carry? (+ power2 1) power2)))
                      (and (< power2 2047)
                           (bits->flonum scratch (if carry? 0 (logand m #xfffffffffffff))
                                         power2))))))))))))))))

;;; (plucky web json decimal) ends here
