;;; (plucky server tally) --- the exact counts the loop keeps for its observer

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; An observer (plucky observe accounting) gives the event loop (plucky
;;; server loop) a tally: a vector of exact counts, which the loop adds
;;; to for every answer, accept and close, whether or not it times them.
;;; One slot, the countdown, goes the other way: the observer sets it to
;;; one in how many requests it wants timed, and the loop counts it down
;;; and times the request that brings it to zero (and the read before
;;; it, its write, and the accept or close next to it).  So a request the
;;; observer does not want costs the loop a few vector operations and no
;;; clock read nor call; the totals stay exact.
;;;
;;;   slot 0..5  answers by status class: 0 other, 1 1xx … 5 5xx
;;;   slot 6     bytes of the answers, head and body
;;;   slot 7     the countdown: requests until the next timed one
;;;   slot 8     connections accepted
;;;   slot 9     connections closed
;;;   slot 10    answers over HTTP/2 (of those of slots 0..5)
;;;
;;; Code:

(define-module (plucky server tally)
  #:export (make-tally
            tally-bytes
            tally-countdown
            tally-accepted
            tally-closed
            tally-http2
            tally-size
            status-class))

(define-syntax tally-bytes (identifier-syntax 6))
(define-syntax tally-countdown (identifier-syntax 7))
(define-syntax tally-accepted (identifier-syntax 8))
(define-syntax tally-closed (identifier-syntax 9))
(define-syntax tally-http2 (identifier-syntax 10))
(define-syntax tally-size (identifier-syntax 11))

(define (make-tally)
  "Return a new tally, every count 0 and the countdown 1 (the next
request is timed)."
  (let ((tally (make-vector tally-size 0)))
    (vector-set! tally tally-countdown 1)
    tally))

(define-inlinable (status-class code)
  "Return the tally slot of status CODE: 1 for 1xx … 5 for 5xx, 0 for
anything else."
  ;; comparisons, not `quotient': a call into C
  (cond ((< code 100) 0) ((< code 200) 1) ((< code 300) 2)
        ((< code 400) 3) ((< code 500) 4) ((< code 600) 5) (else 0)))

;;; (plucky server tally) ends here
