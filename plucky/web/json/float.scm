;;; (plucky web json float) --- doubles as their shortest decimal, in machine words

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `put-flonum!' writes a finite double as ASCII into a bytevector: the
;;; shortest decimal that reads back to the same double and, of those,
;;; the closest to it (ties to an even last digit) -- the digits of
;;; CPython's repr, of JavaScript, of Ryu.  Guile's `number->string'
;;; finds the same digits with bignums and a string per call, and was
;;; most of the time of encoding bench/json's canada.json, which is
;;; mostly coordinates.
;;;
;;; The method is Raffaello Giulietti's Schubfach ("The Schubfach way to
;;; render doubles", 2020).  A double v = c 2^q has a rounding interval
;;; [vl, vr] (both ends included when c is even).  For k = floor(log10
;;; 2^q), the interval scaled by 10^-k is between 1 and 10 long, so it
;;; holds at most one multiple of 10 -- when it does, that decimal is
;;; the shortest -- and else one or both of s = floor(v 10^-k) and s + 1,
;;; 16 or 17 digits: the closer wins.  The scaled values come from one
;;; product each with g, 10^-k to 144 bits: 4 v 10^-k rounded to odd,
;;; which keeps both its integer part and whether it had a fraction, all
;;; the comparisons need.  Schubfach's analysis bounds how close a
;;; scaled value that is not an integer comes to one; g's error is far
;;; below that bound, so a fraction under 2^-64 is g's error alone, and
;;; counts as none.
;;;
;;; The products are made of 29-bit limbs (g in five, the scaled
;;; significand in two), whose column sums stay under 2^63: every value
;;; is a machine word, and every one Guile can tell is (it comes from a
;;; bytevector or through a mask), Guile keeps unboxed and multiplies
;;; inline; nothing allocates.  The tables (g for each k in [-324, 292],
;;; k and h for each exponent) are bytevectors computed from exact
;;; integers as the module is compiled.
;;;
;;; Layout: positional for 1e-4 <= |v| < 1e16 (as CPython's repr),
;;; otherwise d.ddde[-]x; always with a point and a digit after it
;;; (1.0, 1.0e23, 5.0e-324), as Guile writes reals.
;;;
;;; Code:

(define-module (plucky web json float)
  #:use-module (rnrs bytevectors)
  #:export (put-flonum!
            flonum-digits))

;;;
;;; Tables, computed when the module is compiled
;;;

(eval-when (expand load eval)
  ;; floor(e log10 2), floor(log10 (3/4 2^e)) and floor(e log2 10),
  ;; exact for the exponents of doubles (the tests check them against
  ;; exact integer logarithms)
  (define (flog10-pow2 e) (ash (* e 661971961083) -41))
  (define (flog10-three-quarters-pow2 e) (ash (- (* e 661971961083) 274743187321) -41))
  (define (flog2-pow10 e) (ash (* e 913124641741) -38))

  (define k-min -324)                   ; (flog10-pow2 -1074)
  (define k-max 292)                    ; (flog10-pow2 971)

  (define (g-of k)
    ;; -> g = floor(10^-k 2^-r) + 1, r chosen so that 2^143 <= g < 2^144
    (let* ((r (- (flog2-pow10 (- k)) 143))
           (num (* (if (<= k 0) (expt 10 (- k)) 1) (if (< r 0) (ash 1 (- r)) 1)))
           (den (* (if (> k 0) (expt 10 k) 1) (if (> r 0) (ash 1 r) 1))))
      (+ (quotient num den) 1)))

  (define (k+h q asymmetric?)
    ;; -> k and h for the double c 2^q, as the commentary has them
    (let ((k (if asymmetric? (flog10-three-quarters-pow2 q) (flog10-pow2 q))))
      (values k (+ q (flog2-pow10 (- k)) 2))))

  (define (make-g-table)
    ;; k - k-min -> at 20 (k - k-min), g's five 29-bit limbs as u32,
    ;; the least significant first
    (let ((bv (make-bytevector (* 20 (+ (- k-max k-min) 1)))))
      (let lp ((k k-min))
        (when (<= k k-max)
          (let ((g (g-of k)))
            (let limbs ((i 0))
              (when (< i 5)
                (bytevector-u32-native-set! bv (+ (* 20 (- k k-min)) (* 4 i))
                                            (logand (ash g (* -29 i)) #x1fffffff))
                (limbs (+ i 1)))))
          (lp (+ k 1))))
      bv))

  (define (make-k-table)
    ;; the biased exponent E of a double (0, subnormal, as 1) -> at 4E,
    ;; as u32, h in bits 0-2, k - k-min in bits 6-15, and the same for
    ;; the asymmetric interval of a significand 2^52 in bits 3-5 and
    ;; 16-25
    (let ((bv (make-bytevector (* 4 2047))))
      (let lp ((e 0))
        (when (< e 2047)
          (let ((q (- (max e 1) 1075)))
            (call-with-values (lambda () (k+h q #f))
              (lambda (k h)
                (call-with-values (lambda () (k+h q #t))
                  (lambda (ka ha)
                    (bytevector-u32-native-set!
                     bv (* 4 e)
                     (logior h (ash ha 3) (ash (- k k-min) 6) (ash (- ka k-min) 16))))))))
          (lp (+ e 1))))
      bv))

  (define (u32-list->bytevector l)
    (let ((bv (make-bytevector (* 4 (length l)))))
      (let lp ((l l) (i 0))
        (unless (null? l)
          (bytevector-u32-native-set! bv i (car l))
          (lp (cdr l) (+ i 4))))
      bv))

  (define (make-pairs)
    ;; 2i -> the two ASCII digits of i < 100
    (let ((bv (make-bytevector 200)))
      (let lp ((i 0))
        (when (< i 100)
          (bytevector-u8-set! bv (* 2 i) (+ 48 (quotient i 10)))
          (bytevector-u8-set! bv (+ (* 2 i) 1) (+ 48 (remainder i 10)))
          (lp (+ i 1))))
      bv)))

(define-syntax compile-time
  ;; the value of EXPR, a bytevector, computed as the module is expanded
  (lambda (x)
    (syntax-case x ()
      ((_ expr) (datum->syntax x (primitive-eval (syntax->datum #'expr)))))))

(define g-table (compile-time (make-g-table)))
(define k-table (compile-time (make-k-table)))
(define pairs (compile-time (make-pairs)))

;; At 0, as u32, 1374389535: v / 100 is (v 1374389535) >> 37 for v < 2^32.
;; Guile multiplies in machine words only what it reads from memory or
;; masks, not a constant.
(define magic (compile-time (u32-list->bytevector '(1374389535))))

;;;
;;; Digits
;;;

;; Values Guile knows are below 2^64 (read from a bytevector, or
;; masked) it computes on unboxed, inline (umul, uadd, ursh), where
;; arithmetic on values of unknown type calls into libguile: this is
;; most of the speed of put-flonum! (bench/json, canada encode).

;; rop: g cp / 2^145 rounded to odd, a fraction under 2^-64 counting as
;; none.  CP < 2^62 is split into a0 (29 bits) and a1 (33); each column
;; of the product is at most two products under 2^62 plus a carry.  G0
;; to G4 are masked to 29 bits, so that Guile can tell.
(define-syntax-rule (rop g0 g1 g2 g3 g4 cp)
  (let* ((a0 (logand cp #x1fffffff))
         (a1 (ash cp -29))
         (t0 (* g0 a0))
         (t1 (+ (* g1 a0) (* g0 a1) (ash t0 -29)))
         (t2 (+ (* g2 a0) (* g1 a1) (ash t1 -29)))
         (t3 (+ (* g3 a0) (* g2 a1) (ash t2 -29)))
         (t4 (+ (* g4 a0) (* g3 a1) (ash t3 -29)))
         (vb (+ (* g4 a1) (ash t4 -29))))
    ;; the fraction, limbs 2 to 4 of the low 145 bits, is >= 2^-64 when
    ;; limb 4 or 3 is not zero or limb 2 reaches 2^23
    (if (or (not (eqv? 0 (logand t4 #x1fffffff)))
            (not (eqv? 0 (logand t3 #x1fffffff)))
            (not (eqv? 0 (logand t2 #x1fc00000))))
        (logior vb 1)
        vb)))

(define (flonum-digits bytes o)
  "Return two values, D and K: the shortest decimal D 10^K that reads
back to the positive finite double stored in native byte order at
offset O of BYTES and, of those, the closest to it, ties to an even D; D may end in
zeros."
  ;; Everything is read from BYTES and the tables, so that Guile knows
  ;; it below 2^64.
  (let* ((bits (bytevector-u64-native-ref bytes o))
         (be (logand (ash bits -52) #x7ff))
         (m (logand bits #xfffffffffffff))
         (c (if (eqv? be 0) m (logior m #x10000000000000)))
         (asymmetric? (and (eqv? m 0) (> be 1)))
         (entry (bytevector-u32-native-ref k-table (* 4 be)))
         (kk (if asymmetric? (logand (ash entry -16) #x3ff) (logand (ash entry -6) #x3ff)))
         (h (if asymmetric? (logand (ash entry -3) 7) (logand entry 7)))
         (out (logand c 1))
         (cb (ash c 2))
         (cbr (+ cb 2))
         (cbl (if asymmetric? (- cb 1) (- cb 2)))
         (base (+ (ash kk 4) (ash kk 2)))   ; 20 kk, in machine words
         (g0 (logand (bytevector-u32-native-ref g-table base) #x1fffffff))
         (g1 (logand (bytevector-u32-native-ref g-table (+ base 4)) #x1fffffff))
         (g2 (logand (bytevector-u32-native-ref g-table (+ base 8)) #x1fffffff))
         (g3 (logand (bytevector-u32-native-ref g-table (+ base 12)) #x1fffffff))
         (g4 (logand (bytevector-u32-native-ref g-table (+ base 16)) #x1fffffff))
         (vb (rop g0 g1 g2 g3 g4 (ash cb h)))
         (vbl (rop g0 g1 g2 g3 g4 (ash cbl h)))
         (vbr (rop g0 g1 g2 g3 g4 (ash cbr h)))
         (k (+ kk k-min))
         (s (ash vb -2))
         (sp10 (* 10 (quotient s 10)))
         (tp10 (+ sp10 10))
         (upin (<= (+ vbl out) (ash sp10 2)))
         (wpin (<= (+ (ash tp10 2) out) vbr)))
    (if (not (eq? upin wpin))
        ;; one multiple of 10 in the interval: one digit fewer, at least
        (values (if upin sp10 tp10) k)
        (let* ((t (+ s 1))
               (uin (<= (+ vbl out) (ash s 2)))
               (win (<= (+ (ash t 2) out) vbr)))
          (if (not (eq? uin win))
              (values (if uin s t) k)
              ;; both in: the closer, ties to even
              (let ((cmp (- vb (ash (+ s t) 1))))
                (values (if (or (< cmp 0) (and (eqv? cmp 0) (even? s))) s t)
                        k)))))))

;;;
;;; Writing
;;;

(define-syntax-rule (index i)
  ;; I, an offset or count, which Guile then knows is a small integer:
  ;; arithmetic on it is inline, not a call into libguile
  (logand i #xffffffffffff))

(define-inlinable (put-small-digits! bytes end v m)
  ;; write the M last digits of V < 2^32 to BYTES, the last at END - 1,
  ;; two at a time (v / 100 as a product and a shift); the test and the
  ;; masks tell Guile that V is an integer that fits a machine word
  (let lp ((v (logand (if (exact-integer? v) v 0) #xffffffff))
           (end (index end))
           (m (index m)))
    (let ((v (logand v #xffffffff)))
      (cond
       ((>= m 2)
        (let* ((q (ash (* v (bytevector-u32-native-ref magic 0)) -37))
               (r (ash (- v (+ (ash q 6) (ash q 5) (ash q 2))) 1))) ; 2 (v - 100 q)
          (bytevector-u8-set! bytes (- end 2) (bytevector-u8-ref pairs r))
          (bytevector-u8-set! bytes (- end 1) (bytevector-u8-ref pairs (+ r 1)))
          (lp q (- end 2) (- m 2))))
       ((eqv? m 1)
        (bytevector-u8-set! bytes (- end 1) (+ 48 (logand v 15))))))))

(define (put-digits! bytes end d n)
  ;; write the N digits of D < 10^17 to BYTES, the last at END - 1
  (if (> (index n) 8)
      (let* ((high (quotient d 100000000))
             (low (- d (* high 100000000))))
        (put-small-digits! bytes end low 8)
        (put-small-digits! bytes (- end 8) high (- n 8)))
      (put-small-digits! bytes end d n)))

(define powers-of-10
  ;; i -> 10^i, for i up to 17
  (list->vector (map (lambda (i) (expt 10 i)) (iota 18))))

(define (digit-count d)
  ;; -> the number of decimal digits of 0 < D < 10^17
  (let lp ((n 17))
    (if (and (> n 1) (< d (vector-ref powers-of-10 (- n 1)))) (lp (- n 1)) n)))

(define (put-zeros! bytes start n)
  (let lp ((o start))
    (when (< o (+ start n))
      (bytevector-u8-set! bytes o 48)
      (lp (+ o 1)))))

(define (strip-zeros d k)
  ;; -> D and K, D without its trailing zeros
  (if (eqv? 1 (logand d 1))
      (values d k)
      (let ((q (quotient d 10)))
        (if (eqv? d (* q 10))
            (strip-zeros q (+ k 1))
            (values d k)))))

(define (put-decimal! bytes o d k)
  ;; write D 10^K (D > 0) to BYTES from O in the layout of the
  ;; commentary; -> the offset after it
  (call-with-values (lambda () (strip-zeros d k))
    (lambda (d k)
      (let* ((o (index o))
             (n (digit-count d))
             (e (+ k n -1)))          ; d.ddd x 10^e
        (cond
         ((and (>= e 0) (< e 16))
          (if (>= k 0)
              ;; an integer: digits, zeros, ".0"
              (let ((end (+ o n k)))
                (put-digits! bytes (+ o n) d n)
                (put-zeros! bytes (+ o n) k)
                (bytevector-u8-set! bytes end 46)
                (bytevector-u8-set! bytes (+ end 1) 48)
                (+ end 2))
              ;; the digits from O + 1, the first e + 1 moved one left
              ;; and the point after them
              (let ((point (+ o e 1)))
                (put-digits! bytes (+ o n 1) d n)
                (let lp ((i o))
                  (when (< i point)
                    (bytevector-u8-set! bytes i (bytevector-u8-ref bytes (+ i 1)))
                    (lp (+ i 1))))
                (bytevector-u8-set! bytes point 46)
                (+ o n 1))))
         ((and (< e 0) (>= e -4))
          ;; 0.000ddd
          (bytevector-u8-set! bytes o 48)
          (bytevector-u8-set! bytes (+ o 1) 46)
          (put-zeros! bytes (+ o 2) (- -1 e))
          (let ((end (+ o 2 (- -1 e) n)))
            (put-digits! bytes end d n)
            end))
         (else
          ;; d.ddde[-]x
          (put-digits! bytes (+ o n 1) d n)
          (bytevector-u8-set! bytes o (bytevector-u8-ref bytes (+ o 1)))
          (bytevector-u8-set! bytes (+ o 1) 46)
          (let* ((o (if (eqv? n 1)
                        (begin (bytevector-u8-set! bytes (+ o 2) 48) (+ o 3))
                        (+ o n 1)))
                 (_ (bytevector-u8-set! bytes o 101))
                 (o (if (< e 0)
                        (begin (bytevector-u8-set! bytes (+ o 1) 45) (+ o 2))
                        (+ o 1)))
                 (e (abs e))
                 (m (cond ((< e 10) 1) ((< e 100) 2) (else 3))))
            (put-small-digits! bytes (+ o m) e m)
            (+ o m))))))))

(define (put-flonum! bytes o x)
  "Write the finite double X to BYTES from offset O, as the shortest
decimal that reads back to X (the closest of those, ties to even), and
return the offset after it.  BYTES needs 32 bytes of room from O (its
first eight are written as scratch before the text).  Raises an error
if X is infinite or not a number."
  ;; X's bits, through the room the text will take
  (bytevector-ieee-double-native-set! bytes o x)
  (let* ((bits (bytevector-u64-native-ref bytes o))
         (negative? (> bits #x7fffffffffffffff))
         (be (logand (ash bits -52) #x7ff))
         (m (logand bits #xfffffffffffff)))
    (define-syntax-rule (after-sign o)
      (if negative?
          (begin (bytevector-u8-set! bytes o 45) (+ o 1))
          o))
    (cond
     ((and (eqv? be 0) (eqv? m 0))
      (let ((o (after-sign o)))
        (bytevector-u8-set! bytes o 48)
        (bytevector-u8-set! bytes (+ o 1) 46)
        (bytevector-u8-set! bytes (+ o 2) 48)
        (+ o 3)))
     ((eqv? be #x7ff)
      (error "JSON has no infinities nor NaN:" x))
     ((and (>= be 1023) (<= be 1075)
           (eqv? 0 (logand m (- (ash 1 (logand (- 1075 be) 63)) 1))))
      ;; an integer below 2^53, so of 16 digits at most: they are the
      ;; shortest
      (let* ((n (ash (logior m #x10000000000000) (- (logand (- 1075 be) 63))))
             (digits (digit-count n))
             (end (+ (after-sign o) digits)))
        (put-digits! bytes end n digits)
        (bytevector-u8-set! bytes end 46)
        (bytevector-u8-set! bytes (+ end 1) 48)
        (+ end 2)))
     (else
      (call-with-values (lambda () (flonum-digits bytes o))
        (lambda (d k) (put-decimal! bytes (after-sign o) d k)))))))

;;; (plucky web json float) ends here
