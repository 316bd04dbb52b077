;;; (plucky web timing) --- a handler's own phases, and Server-Timing

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The server times its own phases of a request (read, parse, handler,
;;; serialise: plucky observe); inside the handler, only the app knows
;;; what the time went to.  It says so:
;;;
;;;   (define (item-page request body params)
;;;     (let ((item (with-phase 'db (lambda () (load-item (assq-ref params 'id))))))
;;;       (with-phase 'render (lambda () (html-response (item->sxml item))))))
;;;
;;; or, in straight-line code, `(mark-phase! 'db)' at the end of each
;;; phase: the time since the previous mark (or the start) is the
;;; phase's.  A phase named twice adds up.  Phases are exclusive: a
;;; with-phase inside another (a query made while rendering) counts for
;;; the inner phase only, so that the phases never add up to more than
;;; the handler's time.
;;;
;;; The phases are kept in a <timing> record for the request being
;;; handled, which the middleware `with-server-timing' starts; with no
;;; timing started, with-phase calls its thunk and mark-phase! does
;;; nothing, at the cost of a fluid-ref.  `with-server-timing' adds a
;;; Server-Timing header that browsers' developer tools show
;;; (db;dur=0.12, render;dur=0.30, total;dur=0.45: milliseconds), unless
;;; #:header? #f; #:on-timing, a procedure, is given the request and the
;;; timing record after each request (to log it, or to feed figures per
;;; route).  A fluid, not a global: the server may run handlers on
;;; threads (with-body-port, streamed answers).
;;;
;;; The phases also go to the server's observer, when there is one
;;; (`plucky serve --status'): `with-server-timing' hands them to
;;; `note-handler-phases!' of (plucky server hooks), and the status page
;;; shows them per route beside the server's own phases, the handler's
;;; time they leave unmarked with them.  Without an observer, a header
;;; or an #:on-timing, nobody would read them: then no timing is started
;;; and the phases cost what they cost without the middleware.
;;;
;;; Code:

(define-module (plucky web timing)
  #:use-module (srfi srfi-9)
  #:use-module ((plucky web middleware) #:select (with-response-headers))
  #:use-module ((plucky server)
                #:select (note-handler-phases! handler-phases-wanted?))
  #:export (make-timing
            timing?
            timing-phases
            timing-total
            current-timing
            with-phase
            mark-phase!
            timing->header
            with-server-timing))

(define-record-type <timing>
  (%make-timing start last phases end inner)
  timing?
  (start timing-start)                    ; get-internal-real-time at the start
  (last timing-last set-timing-last!)     ; the time of the last mark
  ;; ticks spent in phases inside the with-phase running, which it does
  ;; not count as its own
  (inner timing-inner set-timing-inner!)
  (phases timing-phases* set-timing-phases!) ; ((name . ticks) …), newest first
  ;; get-internal-real-time at the finish, else #f: ticks, not seconds,
  ;; so that a request whose timing nobody reads divides nothing
  (end timing-end set-timing-end!))

(define (now) (get-internal-real-time))

(define (ticks->seconds ticks)
  (exact->inexact (/ ticks internal-time-units-per-second)))

(define (make-timing)
  "Return a new timing record, started now, with no phases."
  (let ((start (now)))
    (%make-timing start start '() #f 0)))

(define (timing-phases timing)
  "Return the phases of TIMING as an alist ((name . seconds) …) in the
order they were first marked."
  (map (lambda (phase) (cons (car phase) (ticks->seconds (cdr phase))))
       (reverse (timing-phases* timing))))

(define (ticks->ns ticks)
  (if (= internal-time-units-per-second 1000000000)
      ticks
      (quotient (* ticks 1000000000) internal-time-units-per-second)))

(define (timing-phases-ns timing)
  ;; -> ((name . ns) …) in the order first marked, or #f when none.
  ;; Guile's ticks are nanoseconds on Linux: then the entries themselves
  ;; serve, the handler being done with them.
  (let ((phases (timing-phases* timing)))
    (and (pair? phases)
         (if (= internal-time-units-per-second 1000000000)
             (reverse phases)
             (map (lambda (phase) (cons (car phase) (ticks->ns (cdr phase))))
                  (reverse phases))))))

(define (timing-total timing)
  "Return the seconds from TIMING's start to its finish, or to now if it
is not finished."
  (ticks->seconds (- (or (timing-end timing) (now)) (timing-start timing))))

(define current (make-fluid #f))

(define (current-timing)
  "Return the timing record of the request being handled, or #f when no
`with-server-timing' started one."
  (fluid-ref current))

(define (add-phase! timing name ticks)
  (let* ((phases (timing-phases* timing))
         (entry (assq name phases)))
    (if entry
        (set-cdr! entry (+ (cdr entry) ticks))
        (set-timing-phases! timing (acons name ticks phases)))))

(define (mark-phase! name)
  "Account the time since the last mark of the current request (or its
start) to the phase NAME, a symbol.  Return an unspecified value; do
nothing when no timing is started."
  (let ((timing (fluid-ref current)))
    (when timing
      (let ((t (now)))
        (add-phase! timing name (- t (timing-last timing)))
        (set-timing-last! timing t)))))

(define (with-phase name thunk)
  "Call THUNK and return its values, accounting the time it took to the
phase NAME of the current request's timing, if any, less the time of the
phases inside it."
  (let ((timing (fluid-ref current)))
    (if (not timing)
        (thunk)
        (let ((start (now))
              (outer (timing-inner timing)))
          (define (done!)
            (let* ((t (now))
                   (elapsed (- t start)))
              (add-phase! timing name (- elapsed (timing-inner timing)))
              (set-timing-inner! timing (+ outer elapsed))
              (set-timing-last! timing t)))
          (set-timing-inner! timing 0)
          ;; One value, the common case, without the list a rest
          ;; argument would allocate.
          (call-with-values thunk
            (case-lambda
              ((result) (done!) result)
              (results (done!) (apply values results))))))))

(define (duration seconds)
  ;; milliseconds, with up to three decimals
  (let ((ms (/ (round (* seconds 1e6)) 1e3)))
    (number->string (if (integer? ms) (inexact->exact ms) ms))))

(define (timing->header timing)
  "Return the value of a Server-Timing header for TIMING: its phases, then
its total, in milliseconds (\"db;dur=0.12, total;dur=0.45\")."
  (string-join
   (map (lambda (phase)
          (string-append (symbol->string (car phase)) ";dur=" (duration (cdr phase))))
        (append (timing-phases timing) `((total . ,(timing-total timing)))))
   ", "))

(define* (with-server-timing #:key (header? #t) (on-timing #f))
  "Return a middleware that starts a timing record for each request (see
`with-phase' and `mark-phase!') and, when HEADER? is true, adds the
Server-Timing header of its phases to the response.  ON-TIMING, if
given, is called as (ON-TIMING request timing) once the handler has
returned.  The phases also go to the server's observer, if any, for the
status page (see `note-handler-phases!' of (plucky server hooks)).
With HEADER? #f, no ON-TIMING and no observer, requests are not timed
(`current-timing' is #f in the handler).  A streamed body's time is not
counted: its head, with the header, is sent before the body is written."
  (lambda (handler)
    (define (timed request body)
      (let ((timing (make-timing)))
        (call-with-values (lambda () (with-fluids ((current timing))
                                       (handler request body)))
          (lambda (response response-body)
            (set-timing-end! timing (now))
            (note-handler-phases! (timing-phases-ns timing))
            (when on-timing
              (on-timing request timing))
            (values (if header?
                        (with-response-headers
                         response `((server-timing . ,(timing->header timing))))
                        response)
                    response-body)))))
    (if (or header? on-timing)
        timed
        (lambda (request body)
          (if (handler-phases-wanted?)
              (timed request body)
              (handler request body))))))

;;; (plucky web timing) ends here
