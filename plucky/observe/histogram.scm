;;; (plucky observe histogram) --- log-bucketed histograms of bounded size

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The accounting (plucky observe accounting) records, for every request,
;;; nanoseconds per phase and sampled bytes allocated.  Keeping every
;;; value would grow without bound; keeping only a mean hides the tail
;;; the 2012 profile was about (GC pauses in the 99th percentile).
;;; A histogram with logarithmic buckets keeps both at a fixed size:
;;;
;;;   values 0..15 each have a bucket of their own; above, every power of
;;;   two is cut into 8 buckets, so a bucket is 1/8 of its octave wide
;;;   and a percentile read back from it is within 6.25% of the truth
;;;   (it answers the bucket's midpoint, never more than the maximum
;;;   seen).  Values are clamped to 2^40 - 1 (18 minutes in ns, 1 TB in
;;;   bytes): 304 buckets, in one vector of 2.5 KB.
;;;
;;; Recording a value is a handful of fixnum operations and one vector
;;; increment; it never allocates, so it can sit on the hot path.  This
;;; is the idea of HdrHistogram with a coarser, fixed precision.
;;;
;;; Code:

(define-module (plucky observe histogram)
  #:export (make-histogram
            histogram?
            histogram-add!
            histogram-add-n!
            histogram-count
            histogram-sum
            histogram-max
            histogram-mean
            histogram-quantile
            histogram-merge!
            histogram-reset!
            histogram-copy
            histogram-buckets
            histogram-count-at-most
            histogram-fold

            value->bucket
            bucket-lower
            bucket-upper
            bucket-count))

;;;
;;; Buckets
;;;

;; Constants as macros: `histogram-add!' is inlined into other modules,
;; where a variable of this module would be looked up at each use.
(define-syntax max-value                 ; 2^40 - 1
  (identifier-syntax 1099511627775))
(define-syntax bucket-count              ; the index of max-value, plus one
  (identifier-syntax 304))

(define-syntax large-value->bucket
  ;; The index of VALUE, 16 <= VALUE < 2^40: a binary search on its
  ;; length in bits, unrolled at expansion time so that each leaf shifts
  ;; by a constant.  (integer-length and a variable shift are calls into
  ;; C: this is about three times faster; bench/overhead shows it.)
  (lambda (stx)
    (syntax-case stx ()
      ((_ value)
       (let build ((low 5) (high 40))   ; value's length in bits is in [low, high]
         (if (= low high)
             (let ((shift (- low 4)))
               #`(+ #,(* 8 shift) (ash value #,(- shift))))
             (let ((middle (quotient (+ low high) 2)))
               #`(if (< value #,(expt 2 middle))
                     #,(build low middle)
                     #,(build (+ middle 1) high)))))))))

(define (clamp-slowly value)
  ;; VALUE, not an exact integer in [0, max-value], as one
  (cond
   ((not (real? value)) 0)
   ((<= value 0) 0)
   ((>= value max-value) max-value)
   (else (inexact->exact (round value)))))

(define-syntax-rule (let-clamped ((v value)) body ...)
  ;; Bind V to VALUE as an exact integer in [0, max-value] (clamped,
  ;; rounded) and run BODY.  The test is repeated after clamping so that
  ;; the compiler knows V is a small integer in BODY: the shifts and adds
  ;; on it are then machine operations, not calls into C.
  (let ((v (if (and (exact-integer? value) (<= 0 value max-value))
               value
               (clamp-slowly value))))
    (if (and (exact-integer? v) (<= 0 v max-value))
        (begin body ...)
        (error "unreachable: a clamped value out of range" v))))

(define-inlinable (value->bucket value)
  ;; -> the index of VALUE's bucket.  Below 16 a value is its own
  ;; index; above, the index is 8 * (octave - 3) plus the three bits
  ;; after the leading one.  Values are clamped to [0, max-value]
  ;; (negative ones come from a clock that went back).
  (let-clamped ((v value))
    (if (< v 16) v (large-value->bucket v))))

(define (bucket-lower index)
  "Return the smallest value that falls in bucket INDEX."
  (if (< index 16)
      index
      (let ((shift (- (quotient index 8) 1)))
        (ash (- index (* 8 shift)) shift))))

(define (bucket-upper index)
  "Return the smallest value above bucket INDEX (its exclusive upper
bound)."
  (if (< index 16)
      (+ index 1)
      (+ (bucket-lower index) (ash 1 (- (quotient index 8) 1)))))

;;;
;;; Histograms
;;;

;; A histogram is one vector: the 304 bucket counts, then the count, the
;; sum and the largest value recorded.  Not a record: recording a value
;; then touches one object with no type checks beyond the vector's
;; bounds, which a micro-benchmark shows cheaper than a record or a
;; bytevector of u64 counters.
(define-syntax count-slot (identifier-syntax 304))
(define-syntax sum-slot (identifier-syntax 305))
(define-syntax max-slot (identifier-syntax 306))
(define-syntax histogram-size (identifier-syntax 307))

(define-syntax-rule (slot-ref histogram slot)
  (vector-ref histogram slot))
(define-syntax-rule (slot-set! histogram slot value)
  (vector-set! histogram slot value))

(define (make-histogram)
  "Return an empty histogram."
  (make-vector histogram-size 0))

(define (histogram? object)
  "Return #t if OBJECT is a histogram."
  (and (vector? object) (= (vector-length object) histogram-size)))

(define (histogram-count histogram)
  "Return how many values HISTOGRAM holds."
  (slot-ref histogram count-slot))

(define (histogram-sum histogram)
  "Return the sum of the values HISTOGRAM holds."
  (slot-ref histogram sum-slot))

(define (histogram-max histogram)
  "Return the largest value HISTOGRAM holds, or 0."
  (slot-ref histogram max-slot))

(define (histogram-buckets histogram)
  "Return a fresh vector of HISTOGRAM's bucket counts, by bucket index."
  (let ((buckets (make-vector bucket-count)))
    (let lp ((i 0))
      (when (< i bucket-count)
        (vector-set! buckets i (slot-ref histogram i))
        (lp (+ i 1))))
    buckets))

(define-inlinable (histogram-add-n! histogram value n)
  "Record VALUE N times in HISTOGRAM.  Return unspecified."
  (let-clamped ((value value))
    (let ((index (if (< value 16) value (large-value->bucket value))))
      (slot-set! histogram index (+ n (slot-ref histogram index)))
      (slot-set! histogram count-slot (+ n (slot-ref histogram count-slot)))
      (slot-set! histogram sum-slot (+ (* n value) (slot-ref histogram sum-slot)))
      (when (> value (slot-ref histogram max-slot))
        (slot-set! histogram max-slot value)))))

(define-inlinable (histogram-add! histogram value)
  "Record VALUE, a non-negative exact integer, once in HISTOGRAM (a
value out of range is clamped, a real rounded).  Return unspecified."
  ;; Not (histogram-add-n! histogram value 1), whose (* n value) would
  ;; stay a multiplication.
  (let-clamped ((value value))
    (let ((index (if (< value 16) value (large-value->bucket value))))
      (slot-set! histogram index (+ 1 (slot-ref histogram index)))
      (slot-set! histogram count-slot (+ 1 (slot-ref histogram count-slot)))
      (slot-set! histogram sum-slot (+ value (slot-ref histogram sum-slot)))
      (when (> value (slot-ref histogram max-slot))
        (slot-set! histogram max-slot value)))))

(define (histogram-mean histogram)
  "Return the mean of the values recorded in HISTOGRAM (exact), or 0
when it is empty."
  (let ((n (histogram-count histogram)))
    (if (zero? n) 0 (/ (histogram-sum histogram) n))))

(define (histogram-quantile histogram q)
  "Return the value below which a fraction Q (0 < Q <= 1) of the values
recorded in HISTOGRAM fall, to within 6.25%: the midpoint of the bucket
holding that rank, capped by the largest value seen; for Q = 1, the
largest value seen.  Return 0 when the histogram is empty."
  (let ((n (histogram-count histogram))
        (counts histogram))
    (cond
     ((zero? n) 0)
     ((>= q 1) (histogram-max histogram))      ; the top rank is known exactly
     (else
      (let ((rank (max 1 (inexact->exact (ceiling (* q n))))))
        (let lp ((i 0) (seen 0))
          (let ((seen (+ seen (slot-ref counts i))))
            (if (or (>= seen rank) (= i (- bucket-count 1)))
                (min (histogram-max histogram)
                     (if (< i 16)
                         i
                         (quotient (+ (bucket-lower i) (bucket-upper i)) 2)))
                (lp (+ i 1) seen)))))))))

(define (histogram-count-at-most histogram bound)
  "Return how many values recorded in HISTOGRAM are at most BOUND.
Exact when BOUND + 1 is a bucket boundary (any power of two, say);
otherwise the count of the whole buckets below BOUND + 1."
  (let ((counts histogram))
    (let lp ((i 0) (seen 0))
      (if (or (= i bucket-count) (> (bucket-upper i) (+ bound 1)))
          seen
          (lp (+ i 1) (+ seen (slot-ref counts i)))))))

(define (histogram-fold proc seed histogram)
  "Call (PROC lower upper count seed) for each non-empty bucket of
HISTOGRAM, in increasing order, threading SEED; return the result.
LOWER and UPPER bound the bucket's values: LOWER <= value < UPPER."
  (let ((counts histogram))
    (let lp ((i 0) (seed seed))
      (if (= i bucket-count)
          seed
          (let ((n (slot-ref counts i)))
            (lp (+ i 1)
                (if (zero? n)
                    seed
                    (proc (bucket-lower i) (bucket-upper i) n seed))))))))

(define (histogram-merge! into from)
  "Add the values recorded in FROM to INTO.  Return INTO."
  (let lp ((i 0))
    (when (< i max-slot)
      (slot-set! into i (+ (slot-ref into i) (slot-ref from i)))
      (lp (+ i 1))))
  (slot-set! into max-slot (max (histogram-max into) (histogram-max from)))
  into)

(define (histogram-reset! histogram)
  "Forget every value recorded in HISTOGRAM."
  (vector-fill! histogram 0))

(define (histogram-copy histogram)
  "Return a new histogram holding the values recorded in HISTOGRAM."
  (vector-copy histogram))

;;; (plucky observe histogram) ends here
