;;; tests/observe/histogram.scm --- (plucky observe histogram)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The buckets are checked against their definition (integer-length and
;;; a shift) over every value below 2^16 and a dense sweep above;
;;; quantiles against the exact order statistics of random data, within
;;; the promised 6.25%; exported Prometheus counts at powers of two
;;; against a plain count.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (tests lib harness)
             (plucky observe histogram))

(test-begin "observe/histogram")

(define (reference-bucket value)
  ;; The definition: 8 buckets per octave above 16, clamped at 2^40 - 1.
  (let ((value (min (max value 0) (- (expt 2 40) 1))))
    (if (< value 16)
        value
        (let ((shift (- (integer-length value) 4)))
          (+ (* 8 shift) (ash value (- shift)))))))

(define (sweep proc)
  ;; Call PROC on 0..65535, then on values up to 2^41 about 1/64 apart
  ;; with each power of two and its neighbours.
  (let lp ((v 0))
    (when (< v 65536)
      (proc v)
      (lp (+ v 1))))
  (let lp ((v 65536))
    (when (< v (expt 2 41))
      (proc v)
      (lp (+ v 1 (quotient v 64)))))
  (for-each (lambda (e)
              (for-each proc (list (- (expt 2 e) 1) (expt 2 e) (+ (expt 2 e) 1))))
            (iota 42)))

(test-group "value->bucket"
  (call-guarded
   (lambda ()
     (let ((wrong '()))
       (sweep (lambda (v)
                (unless (= (value->bucket v) (reference-bucket v))
                  (set! wrong (cons v wrong)))))
       (test-equal "matches the definition everywhere" '() (take wrong (min 5 (length wrong)))))
     (test-equal "negative values count as 0" 0 (value->bucket -5))
     (test-equal "huge values land in the last bucket" (- bucket-count 1)
       (value->bucket (expt 2 50))))))

(test-group "bucket-lower and bucket-upper"
  (call-guarded
   (lambda ()
     (let ((wrong '()))
       (sweep (lambda (v)
                (let* ((v (min v (- (expt 2 40) 1)))
                       (i (value->bucket v)))
                  (unless (and (<= (bucket-lower i) v) (< v (bucket-upper i)))
                    (set! wrong (cons v wrong))))))
       (test-equal "every value lies in its bucket" '() (take wrong (min 5 (length wrong)))))
     (test-assert "buckets tile the line"
       (every (lambda (i) (= (bucket-upper i) (bucket-lower (+ i 1))))
              (iota (- bucket-count 1))))
     (test-assert "a bucket is at most 1/8 of its lower bound wide"
       (every (lambda (i) (<= (* 8 (- (bucket-upper i) (bucket-lower i))) (max 8 (bucket-lower i))))
              (iota bucket-count))))))

(define (exact-quantile sorted q)
  ;; the value of rank ceiling(q * n), as histogram-quantile defines it
  (list-ref sorted (- (max 1 (inexact->exact (ceiling (* q (length sorted))))) 1)))

(test-group "quantiles of random data"
  (call-guarded
   (lambda ()
     (let* ((state (seed->random-state 5))
            ;; log-uniform from 100 ns to 100 ms, like request times
            (values (map (lambda (i)
                           (inexact->exact (round (* 100 (expt 1e6 (random:uniform state))))))
                         (iota 20000)))
            (sorted (sort values <))
            (h (make-histogram)))
       (for-each (lambda (v) (histogram-add! h v)) values)
       (test-equal "count" 20000 (histogram-count h))
       (test-equal "sum" (apply + values) (histogram-sum h))
       (test-equal "max" (last sorted) (histogram-max h))
       (test-equal "mean" (/ (apply + values) 20000) (histogram-mean h))
       (for-each
        (lambda (q)
          (let ((exact (exact-quantile sorted q))
                (estimate (histogram-quantile h q)))
            (test-assert (format #f "p~a within 6.25% (exact ~a, estimate ~a)" (* 100 q) exact estimate)
              (<= (abs (- estimate exact)) (* 0.0625 exact)))))
        '(0.01 0.5 0.9 0.99 0.999 1))
       (test-equal "the top quantile is the maximum" (last sorted) (histogram-quantile h 1))))))

(test-group "small values are exact"
  (let ((h (make-histogram)))
    (for-each (lambda (v) (histogram-add! h v)) '(3 3 3 7 9 12))
    (test-equal "p50" 3 (histogram-quantile h 0.5))
    (test-equal "p100" 12 (histogram-quantile h 1))
    (test-equal "an empty histogram answers 0" 0 (histogram-quantile (make-histogram) 0.5))))

(test-group "histogram-add-n!"
  (let ((h (make-histogram)))
    (histogram-add-n! h 1000 5)
    (histogram-add! h 10)
    (test-equal "count" 6 (histogram-count h))
    (test-equal "sum" 5010 (histogram-sum h))
    (test-equal "p50 is in 1000's bucket" (value->bucket 1000)
      (value->bucket (histogram-quantile h 0.5)))))

(test-group "histogram-count-at-most, at powers of two"
  (call-guarded
   (lambda ()
     (let* ((state (seed->random-state 11))
            (values (map (lambda (i) (random 100000000 state)) (iota 5000)))
            (h (make-histogram)))
       (for-each (lambda (v) (histogram-add! h v)) values)
       (for-each
        (lambda (e)
          (let ((bound (- (expt 2 e) 1)))
            (test-equal (format #f "values <= 2^~a - 1" e)
              (count (lambda (v) (<= v bound)) values)
              (histogram-count-at-most h bound))))
        '(4 10 14 20 26 30))))))

(test-group "merge, copy, reset, fold"
  (let ((a (make-histogram))
        (b (make-histogram)))
    (for-each (lambda (v) (histogram-add! a v)) '(1 100 10000))
    (for-each (lambda (v) (histogram-add! b v)) '(5 500 50000))
    (let ((c (histogram-copy a)))
      (histogram-merge! c b)
      (test-equal "merged count" 6 (histogram-count c))
      (test-equal "merged sum" 60606 (histogram-sum c))
      (test-equal "merged max" 50000 (histogram-max c))
      (test-equal "the copy left A alone" 3 (histogram-count a))
      (test-equal "fold visits the non-empty buckets in order"
        (map (lambda (v) (bucket-lower (value->bucket v))) '(1 5 100 500 10000 50000))
        (reverse (histogram-fold (lambda (lower upper n seed)
                                   (if (= n 1) (cons lower seed) seed))
                                 '() (let ((exact (make-histogram)))
                                       ;; values that are bucket bounds
                                       (for-each (lambda (v) (histogram-add! exact (bucket-lower (value->bucket v))))
                                                 '(1 5 100 500 10000 50000))
                                       exact))))
      (histogram-reset! c)
      (test-equal "reset" '(0 0 0) (list (histogram-count c) (histogram-sum c) (histogram-max c))))))

(test-end "observe/histogram")

;;; tests/observe/histogram.scm ends here
