;;; (plucky server probe) --- what the loop tells whoever observes it

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Two listeners may hear about a worker's requests: the access log
;;; (`run-loop''s #:on-response: peer, request, code, bytes) and an
;;; observer (#:observer, a record of hooks of (plucky server hooks),
;;; such as the status page's accounting).  What the loop keeps for them
;;; between the steps of a request is here, in one <probe>, and nowhere
;;; in the loop's own state: the times of the read and parse that
;;; brought the request being timed, the timed answers the next write
;;; carries, the countdown to the next allocation sample.  A loop that
;;; nobody observes has no probe (#f), and every seam below is then one
;;; test of #f.
;;;
;;; The seams, in a request's order:
;;;
;;;   `probe-accepted!'       a connection accepted (counted; timed when
;;;                           the tally says the next request is)
;;;   `timed-read'            around a read(2) of a request's bytes
;;;   `parse-timed'           around the parse: the tally's countdown
;;;                           picks the request to time (the observer
;;;                           sets it: it decides what to sample)
;;;   `handler-start'         around the handler: a start time, or #f
;;;                           when this request is not timed, and
;;;                           `probe-answer!' once it is serialised
;;;   `timed-write'           around the write that carries the answers
;;;   `probe-closed!'         a connection closed
;;;
;;; `probe-response!' tells the access log of every answer.
;;;
;;; Code:

(define-module (plucky server probe)
  #:use-module (srfi srfi-9)
  #:use-module ((plucky sys gc) #:select (gc-total-bytes))
  #:use-module (plucky server hooks)
  #:use-module (plucky server tally)
  #:export (make-probe
            probe?
            probe-observer
            probe-on-response
            probe-tally
            clock
            timed
            timed-read
            timed-write
            parse-timed
            sampling?
            tally-add!
            probe-accepted!
            probe-closed!
            handler-start
            allocation-start
            count-answer!
            probe-response!
            probe-answer!
            probe-refusal!
            observe-untimed!
            forget-timed-request!))

(define-record-type <probe>
  (%make-probe observer tally on-response read-ns parse-ns batch sampled)
  probe?
  (observer probe-observer)             ; #f, or the <observer-hooks>
  (tally probe-tally)                   ; the observer's tally, or #f
  (on-response probe-on-response)       ; #f, or (peer request code bytes) -> _
  (read-ns probe-read-ns set-probe-read-ns!) ; read(2) time not yet reported
  ;; parse time of the request being served when it is timed, else #f
  (parse-ns probe-parse-ns set-probe-parse-ns!)
  (batch probe-batch set-probe-batch!)  ; timed answers the next write carries
  ;; timed requests until the next allocation sample
  (sampled probe-sampled set-probe-sampled!))

(define (make-probe observer on-response)
  "Return the probe of a loop whose OBSERVER (hooks of (plucky server
hooks), or #f) and ON-RESPONSE (the access log's procedure, or #f) hear
about its requests, or #f when both are #f: nobody observes."
  (and (or observer on-response)
       (%make-probe observer (and observer (observer-hooks-tally observer))
                    on-response 0 #f 0 0)))

;;;
;;; Clocks
;;;

(define-syntax-rule (clock)
  ;; Nanoseconds on a monotonic clock: Guile counts internal time in ns.
  (get-internal-real-time))

(define-syntax-rule (timed when? expression record!)
  ;; Evaluate EXPRESSION; when WHEN?, call (RECORD! ns) with its duration
  ;; first.  -> the (single) value of EXPRESSION
  (if when?
      (let* ((start (clock))
             (value expression))
        (record! (- (clock) start))
        value)
      expression))

;;;
;;; Sampling: the observer times one request in N, N of its choosing
;;;

;; The tally's countdown (plucky server tally) picks the requests to
;; time; the others cost a count.  Timing one takes six clock reads and
;; three calls of the observer (bench/instructions, INSTRUCTIONS_MODES).

(define-syntax-rule (sampling? probe)
  ;; Is the next request, or the one being served, to be timed?  For the
  ;; read that brings it, its accept and its close.
  (let ((p probe))
    (and p (probe-observer p)
         (<= (vector-ref (probe-tally p) tally-countdown) 1))))

(define-syntax-rule (tally-add! probe slot n)
  ;; PROBE has an observer
  (let ((tally (probe-tally probe)))
    (vector-set! tally slot (+ n (vector-ref tally slot)))))

(define-syntax-rule (timed-read probe expression)
  ;; -> EXPRESSION's value, a read(2)'s, its time kept when the request
  ;; it brings may be timed
  (let ((p probe))
    (timed (sampling? p) expression
           (lambda (ns) (set-probe-read-ns! p (+ (probe-read-ns p) ns))))))

(define-syntax-rule (parse-timed probe expression)
  ;; -> EXPRESSION's values (the parse of a head), timed when the
  ;; observer's countdown picks this request
  (let ((p probe))
    (if (and p (probe-observer p)
             (let* ((tally (probe-tally p))
                    (countdown (- (vector-ref tally tally-countdown) 1)))
               (vector-set! tally tally-countdown countdown)
               (<= countdown 0)))
        (let ((start-ns (clock)))
          (call-with-values (lambda () expression)
            (lambda (request index)
              (set-probe-parse-ns! p (- (clock) start-ns))
              (values request index))))
        ;; not timed: PARSE-NS is #f since the last timed answer was
        ;; reported (probe-answer!)
        expression)))

(define-syntax-rule (timed-write probe expression)
  ;; -> EXPRESSION's value, a write(2)'s; timed when it carries timed
  ;; answers, which the observer hears of
  (let ((p probe))
    (if (and p (> (probe-batch p) 0))
        (timed #t expression
               (lambda (ns)
                 ((observer-hooks-on-write (probe-observer p)) (probe-batch p) ns)
                 (set-probe-batch! p 0)))
        expression)))

(define (probe-accepted! probe start)
  "Count a connection accepted; START is the clock's ns before its
accept when it was timed (see `sampling?'), else #f.  Return nothing."
  (let ((observer (probe-observer probe)))
    (when observer
      (tally-add! probe tally-accepted 1)
      (when start ((observer-hooks-on-accept observer) (- (clock) start))))))

(define-syntax-rule (probe-closed! probe expression)
  ;; -> EXPRESSION's value (a close), counted and, when sampled, timed
  (let ((p probe))
    (if (and p (probe-observer p))
        (begin
          (tally-add! p tally-closed 1)
          (timed (sampling? p) expression
                 (lambda (ns) ((observer-hooks-on-close (probe-observer p)) ns))))
        expression)))

;;;
;;; Around the handler
;;;

(define-syntax-rule (handler-start probe)
  ;; -> the clock's ns as the handler of a timed request starts, or #f
  ;; when the request is not timed (its parse was not: `parse-timed')
  (let ((p probe))
    (and p (probe-observer p) (probe-parse-ns p) (clock))))

(define (allocation-start probe)
  "Return the collector's count of bytes allocated, on one timed request
in 16 (reading it twice per request would double the cost of
accounting), else #f.  PROBE has an observer."
  (let ((countdown (- (probe-sampled probe) 1)))
    (if (> countdown 0)
        (begin (set-probe-sampled! probe countdown) #f)
        (begin (set-probe-sampled! probe 16) (gc-total-bytes)))))

(define (forget-timed-request! probe)
  "Make the read and parse times kept for the request being served not
be reported as the next one's (its handler waits: it is counted, not
timed, when it answers).  Return nothing."
  (when probe
    (set-probe-parse-ns! probe #f)
    (set-probe-read-ns! probe 0)))

(define-syntax-rule (count-answer! probe code bytes)
  ;; -> the status class of CODE, counted in the tally with BYTES
  (let ((tally (probe-tally probe))
        (class (status-class code)))
    (vector-set! tally class (+ 1 (vector-ref tally class)))
    (vector-set! tally tally-bytes (+ bytes (vector-ref tally tally-bytes)))
    class))

(define (probe-response! probe peer request code bytes)
  "Tell PROBE's access log, if any, of an answer of CODE and BYTES to
REQUEST (#f for one that never reached a handler) from PEER; return
nothing."
  (let ((on-response (and probe (probe-on-response probe))))
    (when on-response
      (on-response peer request code bytes))))

(define (probe-answer! probe request code bytes handler serialise allocated)
  "Count an answer in PROBE's tally; tell the observer of it if it was
timed (HANDLER and SERIALISE are numbers, not #f), or if it is a 5xx,
which the observer always wants (for its error inbox).  PROBE has an
observer.  Return nothing."
  (let ((class (count-answer! probe code bytes))
        (on-request (observer-hooks-on-request (probe-observer probe))))
    (cond
     (handler
      (on-request request code (probe-read-ns probe) (probe-parse-ns probe)
                  handler serialise allocated)
      (set-probe-read-ns! probe 0)
      (set-probe-parse-ns! probe #f)    ; reported: not another's
      (set-probe-batch! probe (+ 1 (probe-batch probe))))
     ((eqv? class 5)
      (on-request request code #f #f #f #f #f)))))

(define (probe-refusal! probe code bytes)
  "Tell PROBE's observer, if any, of an answer of CODE and BYTES to a
request refused before a handler saw it, timed (its handler and
serialising as 0 ns) when its parse was.  Return nothing."
  (when (and probe (probe-observer probe))
    (let ((timed (and (probe-parse-ns probe) 0)))
      (probe-answer! probe #f code bytes timed timed #f))))

(define (observe-untimed! probe request code bytes service)
  "Account for an answer timed apart from the loop's phases (an HTTP/2
stream: SERVICE, the ns from its handler's call to its answer): told to
the observer with no read, parse or write time of its own, and counted.
What an HTTP/1 request being timed meanwhile has counted stays its.
PROBE has an observer.  Return nothing."
  (let ((batch (probe-batch probe))
        (read-ns (probe-read-ns probe))
        (parse-ns (probe-parse-ns probe)))
    (tally-add! probe tally-http2 1)
    (set-probe-read-ns! probe 0)
    (set-probe-parse-ns! probe 0)
    (probe-answer! probe request code bytes service 0 #f)
    (set-probe-read-ns! probe read-ns)
    (set-probe-parse-ns! probe parse-ns)
    (set-probe-batch! probe batch)))

;;; (plucky server probe) ends here
