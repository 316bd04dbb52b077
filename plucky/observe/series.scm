;;; (plucky observe series) --- the observer's time series: a slot a second

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The time series of (plucky observe accounting): for each of the last
;;; SERIES-SECONDS seconds, in rings indexed by the second modulo their
;;; length, the requests and 5xx answered, GC count and CPU time, memory
;;; sampled once a second (GC heap, resident set, bytes allocated), and
;;; a coarse latency histogram from which `series-latency-quantile'
;;; gives p50/p99 per second.  The accounting writes the current
;;; second's slot for each request it accounts for and calls
;;; `advance-series!' when the second changes; the status pages read the
;;; rings; `series-merge!' adds a worker's rings into a server's.
;;;
;;; Code:

(define-module (plucky observe series)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 rdelim)
  #:use-module ((plucky sys libc) #:select (page-size))
  #:use-module (plucky observe histogram)
  #:export (now-second
            coarse-base
            coarse-buckets
            make-series
            series?
            series-seconds
            series-now
            set-series-now!
            series-slot
            set-series-slot!
            series-requests
            series-errors
            series-gc-ns
            series-gc-count
            series-heap
            series-heap-free
            series-rss
            series-allocated
            series-latency
            advance-series!
            series-latency-quantile
            series->data
            series-merge!
            process-memory))


;; The series count seconds since the epoch by `current-time', cheaper a
;; call than get-internal-real-time (micro-benchmarked), and it is read
;; for every request.  Should the system's clock jump, the slots
;; in between are cleared or, going back, written again: no harm done.
(define-inlinable (now-second)
  (current-time))


;; Latency over time is kept per second in a coarse histogram: two
;; buckets per octave (the histogram's buckets, four by four), so that
;; p50/p99 per second cost 76 counters a second.  A second's counters
;; start at a multiple of 128, found by a shift: a multiplication by 76
;; would be a call into C on every request (Guile's JIT does not inline
;; `*'; bench/instructions counts it).
(define coarse-buckets 76)              ; (bucket-count - 1) / 4 + 1
(define coarse-shift 7)
(define-inlinable (coarse-base slot) (ash slot coarse-shift))

(define-record-type <series>
  (%make-series seconds now slot requests errors gc-ns gc-count heap heap-free rss
                allocated latency last-allocated)
  series?
  (seconds series-seconds)                 ; length of the rings
  (now series-now set-series-now!)         ; the current second, or #f
  (slot series-slot set-series-slot!)      ; its index in the rings
  (requests series-requests)               ; vectors indexed by second mod length
  (errors series-errors)                   ; answers >= 500
  (gc-ns series-gc-ns)                     ; GC CPU time in the second
  (gc-count series-gc-count)
  (heap series-heap)                       ; GC heap bytes, -1 when unsampled
  (heap-free series-heap-free)
  (rss series-rss)                         ; resident bytes, -1 when unsampled
  (allocated series-allocated)             ; bytes allocated in the second, or -1
  (latency series-latency)                 ; per second, 128 slots, coarse-buckets used
  ;; heap-total-allocated when the current second began
  (last-allocated series-last-allocated set-series-last-allocated!))

(define (make-series seconds)
  "Return a new time series of SECONDS seconds, empty, with no current
second."
  (%make-series seconds #f 0
                (make-vector seconds 0) (make-vector seconds 0)
                (make-vector seconds 0) (make-vector seconds 0)
                (make-vector seconds -1) (make-vector seconds -1)
                (make-vector seconds -1) (make-vector seconds -1)
                (make-vector (ash seconds coarse-shift) 0)
                #f))

(define (clear-slot! series slot)
  (vector-set! (series-requests series) slot 0)
  (vector-set! (series-errors series) slot 0)
  (vector-set! (series-gc-ns series) slot 0)
  (vector-set! (series-gc-count series) slot 0)
  (vector-set! (series-heap series) slot -1)
  (vector-set! (series-heap-free series) slot -1)
  (vector-set! (series-rss series) slot -1)
  (vector-set! (series-allocated series) slot -1)
  (let ((base (coarse-base slot)))
    (vector-fill! (series-latency series) 0 base (+ base coarse-buckets))))

(define (process-memory)
  "Return this process's memory as an alist: heap-size, heap-free-size,
heap-total-allocated (bytes, from `gc-stats') and rss (resident bytes,
from /proc/self/status, or #f where there is none)."
  (let ((stats (gc-stats)))
    `((heap-size . ,(assq-ref stats 'heap-size))
      (heap-free-size . ,(assq-ref stats 'heap-free-size))
      (heap-total-allocated . ,(assq-ref stats 'heap-total-allocated))
      (rss . ,(resident-bytes)))))

;; Read once a second by the time series: /proc/self/statm is one short
;; line where /proc/self/status is some fifty, a cost that shows per
;; request under callgrind, where a second holds few requests
;; (bench/instructions).
(define page-bytes (false-if-exception (page-size)))

(define (resident-bytes)
  ;; the resident set, in bytes, or #f
  (false-if-exception
   (let ((line (call-with-input-file "/proc/self/statm" read-line)))
     (* page-bytes (string->number (cadr (string-tokenize line)))))))

(define (advance-series! series second)
  "Return nothing useful; make SECOND the current second of SERIES: clear
the slots of the seconds in between, and sample memory into the new
slot."
  (let ((now (series-now series))
        (length (series-seconds series)))
    (unless (eqv? now second)
      (let ((from (if now (max (+ now 1) (- second length -1)) second)))
        (let lp ((s from))
          (when (<= s second)
            (clear-slot! series (modulo s length))
            (lp (+ s 1)))))
      (set-series-now! series second)
      (set-series-slot! series (modulo second length))
      (let* ((memory (process-memory))
             (slot (modulo second length))
             (total (assq-ref memory 'heap-total-allocated))
             (last (series-last-allocated series)))
        (vector-set! (series-heap series) slot (assq-ref memory 'heap-size))
        (vector-set! (series-heap-free series) slot (assq-ref memory 'heap-free-size))
        (vector-set! (series-rss series) slot (or (assq-ref memory 'rss) -1))
        ;; What was allocated since the previous sample, charged to the
        ;; second that just ended when it is the one before.
        (when (and last now (= now (- second 1)))
          (vector-set! (series-allocated series) (modulo now length) (- total last)))
        (set-series-last-allocated! series total)))))

(define (series-latency-quantile series second q)
  "Return the service time (ns) below which a fraction Q of the requests
answered during SECOND fell, to within a factor of 1.42, or #f when
none was answered then or SECOND is out of the ring."
  (let* ((length (series-seconds series))
         (now (series-now series)))
    (and now (<= second now) (> second (- now length))
         (let* ((base (coarse-base (modulo second length)))
                (latency (series-latency series))
                (n (let lp ((i 0) (n 0))
                     (if (= i coarse-buckets) n
                         (lp (+ i 1) (+ n (vector-ref latency (+ base i))))))))
           (and (> n 0)
                (let ((rank (max 1 (inexact->exact (ceiling (* q n))))))
                  (let lp ((i 0) (seen 0))
                    (let ((seen (+ seen (vector-ref latency (+ base i)))))
                      (if (or (>= seen rank) (= i (- coarse-buckets 1)))
                          ;; the geometric middle of the four buckets
                          (let ((lower (bucket-lower (* 4 i)))
                                (upper (bucket-upper (min (- bucket-count 1)
                                                          (+ 3 (* 4 i))))))
                            (inexact->exact (round (sqrt (* lower upper)))))
                          (lp (+ i 1) seen))))))))))

;; The rings as data, for a worker's share file, and back.
(define series-vectors
  (list series-requests series-errors series-gc-ns series-gc-count series-heap
        series-heap-free series-rss series-allocated series-latency))
(define series-defaults '(0 0 0 0 -1 -1 -1 -1 0))

(define (series->data series sparse)
  "Return the rings of SERIES as a list of data, each vector made data by
SPARSE, a procedure (SPARSE vector default); `series-merge!' reads it."
  (map (lambda (get default) (sparse (get series) default))
       series-vectors series-defaults))

(define (series-merge! series data their-now unsparse)
  "Add to SERIES, whose current second is set, the rings DATA (from
`series->data', made vectors again by UNSPARSE) of a worker whose current
second was THEIR-NOW: a slot counts for a second of SERIES's window only
if the worker had reached that second.  Return SERIES."
  (let ((seconds (series-seconds series))
        (now (series-now series)))
    (for-each
     (lambda (get-vector default data)
       (let ((into (get-vector series))
             (from (unsparse data))
             (latency? (eq? get-vector series-latency)))
         (let lp ((age 0))
           (when (< age seconds)
             (let ((second (- now age)))
               (when (<= second their-now)
                 (let ((slot (modulo second seconds)))
                   (if latency?
                       (let ((base (coarse-base slot)))
                         (let lp ((i 0))
                           (when (< i coarse-buckets)
                             (vector-set! into (+ base i)
                                          (+ (vector-ref into (+ base i))
                                             (vector-ref from (+ base i))))
                             (lp (+ i 1)))))
                       (let ((v (vector-ref from slot)))
                         (unless (eqv? v default)
                           (vector-set! into slot
                                        (if (eqv? (vector-ref into slot) default)
                                            v
                                            (+ v (vector-ref into slot))))))))))
             (lp (+ age 1))))))
     series-vectors series-defaults data)
    series))

;;; (plucky observe series) ends here
