;;; (plucky server hooks) --- what the event loop tells an observer

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The event loop (plucky server loop) can tell someone where the time
;;; goes: an observer, such as (plucky observe accounting), which builds
;;; a record of these hooks and hands it to `run-loop' as #:observer.
;;; The server never imports the observer's modules: this record is the
;;; whole seam between them.  Every hook is called on the loop's thread
;;; and must not block.
;;;
;;; The loop counts every answer, accept and close in the TALLY, a vector
;;; of (plucky server tally), and times only the requests the tally's
;;; countdown picks; the hooks hear about those, and about failures.
;;; Each hook's default below documents when it is called and with what.
;;;
;;; A handler may also have timed its own phases (db, render, …: with
;;; (plucky web timing)); it tells them with `note-handler-phases!' and
;;; the observer takes them with `take-handler-phases!' when it accounts
;;; for the request.  That pair lives here so that a web module can say
;;; it through what the server exports and the observer can hear it,
;;; neither importing the other.  The name of the route that answers a
;;; request (a router's pattern, "/post/:id") goes the same way:
;;; `note-request-route!', `take-request-route!'.
;;;
;;; Code:

(define-module (plucky server hooks)
  #:use-module (srfi srfi-9)
  #:use-module ((plucky server tally) #:select (make-tally))
  #:export (make-observer-hooks
            ;; Procedures, not the record's macros: see <observer-hooks>.
            (%observer-hooks? . observer-hooks?)
            (%observer-hooks-tally . observer-hooks-tally)
            (%observer-hooks-on-request . observer-hooks-on-request)
            (%observer-hooks-on-failure . observer-hooks-on-failure)
            (%observer-hooks-on-write . observer-hooks-on-write)
            (%observer-hooks-on-accept . observer-hooks-on-accept)
            (%observer-hooks-on-close . observer-hooks-on-close)
            (%observer-hooks-on-tick . observer-hooks-on-tick)
            (%observer-hooks-on-wait . observer-hooks-on-wait)
            ignore-request
            ignore-failure
            ignore-write
            ignore-accept
            ignore-close
            ignore-tick
            ignore-wait
            note-handler-phases!
            take-handler-phases!
            want-handler-phases!
            handler-phases-wanted?
            note-request-route!
            take-request-route!))

;; A record private to this module, read through the procedures below:
;; the loop reads it when it times a request, not on every request.

(define-record-type <observer-hooks>
  (%make-observer-hooks tally on-request on-failure on-write on-accept on-close
                        on-tick on-wait)
  observer-hooks?
  (tally observer-hooks-tally)              ; vector of (plucky server tally)
  (on-request observer-hooks-on-request)
  (on-failure observer-hooks-on-failure)
  (on-write observer-hooks-on-write)
  (on-accept observer-hooks-on-accept)
  (on-close observer-hooks-on-close)
  (on-tick observer-hooks-on-tick)
  (on-wait observer-hooks-on-wait))

(eval-when (expand)
  (define-syntax-rule (define-readers (name accessor documentation) ...)
    (begin (define (name object) documentation (accessor object)) ...)))

(define-readers
  (%observer-hooks? observer-hooks?
                    "Return true when OBJECT is a record of observer hooks.")
  (%observer-hooks-tally observer-hooks-tally "Return the tally of the hooks OBJECT.")
  (%observer-hooks-on-request observer-hooks-on-request
                              "Return the #:on-request hook of OBJECT (see `ignore-request').")
  (%observer-hooks-on-failure observer-hooks-on-failure
                              "Return the #:on-failure hook of OBJECT (see `ignore-failure').")
  (%observer-hooks-on-write observer-hooks-on-write
                            "Return the #:on-write hook of OBJECT (see `ignore-write').")
  (%observer-hooks-on-accept observer-hooks-on-accept
                             "Return the #:on-accept hook of OBJECT (see `ignore-accept').")
  (%observer-hooks-on-close observer-hooks-on-close
                            "Return the #:on-close hook of OBJECT (see `ignore-close').")
  (%observer-hooks-on-tick observer-hooks-on-tick
                           "Return the #:on-tick hook of OBJECT (see `ignore-tick').")
  (%observer-hooks-on-wait observer-hooks-on-wait
                           "Return the #:on-wait hook of OBJECT (see `ignore-wait')."))

(define (ignore-request request code read parse handler serialise allocated)
  "Return nothing; the default #:on-request hook.  Called after each
timed answer: REQUEST as the handler saw it (#f if refused before a
handler saw it), the status CODE, the nanoseconds in read(2) that brought
its head (0 for a request that came pipelined behind another), in
parsing, in the handler and in serialising; ALLOCATED is the bytes the
handler and serialising allocated, measured on one timed request in 16
and #f on the others.  The hook resets the tally's countdown.  An answer
of 5xx that was not timed is told too, its times #f."
  #f)

(define (ignore-failure request exception stack)
  "Return nothing; the default #:on-failure hook.  Called when the
handler of REQUEST raised EXCEPTION, STACK being where it was raised (or
#f); the 500 is reported to #:on-request after."
  #f)

(define (ignore-write answers ns)
  "Return nothing; the default #:on-write hook.  Called after a write(2)
that carried ANSWERS timed answers, with the nanoseconds it took."
  #f)

(define (ignore-accept ns)
  "Return nothing; the default #:on-accept hook.  Called with the
nanoseconds an accept took, for the accepts that are timed (when the
tally's countdown is at 1 or below)."
  #f)

(define (ignore-close ns)
  "Return nothing; the default #:on-close hook.  Called with the
nanoseconds a close(2) took, for the closes that are timed (when the
tally's countdown is at 1 or below)."
  #f)

(define (ignore-tick)
  "Return nothing; the default #:on-tick hook.  Called about once a
second, from the loop's sweep of its timeouts."
  #f)

(define (ignore-wait request code waited computing service)
  "Return nothing; the default #:on-wait hook.  Called, for every request
whose handler suspended (plucky server suspend), once it is answered
with CODE: WAITED lists where it waited, (((KIND . LABEL) . NS) …), KIND
being timer, socket, thread or event, LABEL #f or what the handler named
(\"upstream 127.0.0.1:8080\"), NS the nanoseconds it waited so, all its
waits of that kind and label added up; COMPUTING is the nanoseconds its
handler ran after its first wait (the part before is the handler time
#:on-request reports, for the requests it times); SERVICE is the
nanoseconds from its handler's call to its answer serialised (from its
first wait for a request that was not timed), the server time of a
request that waited, which #:on-request never reports."
  #f)

(define* (make-observer-hooks #:key (tally (make-tally))
                              (on-request ignore-request)
                              (on-failure ignore-failure)
                              (on-write ignore-write)
                              (on-accept ignore-accept)
                              (on-close ignore-close)
                              (on-tick ignore-tick)
                              (on-wait ignore-wait))
  "Return the hooks an observer hands to `run-loop' as #:observer.
TALLY is the vector of (plucky server tally) the loop counts in and
reads its countdown from (by default a new one, whose countdown nobody
resets: every request is timed).  Each ON-… procedure is called as the
`ignore-…' procedure of the same name documents: ON-REQUEST after a
timed answer or a 5xx, ON-FAILURE when a handler raised, ON-WRITE after a
write(2) of timed answers, ON-ACCEPT and ON-CLOSE after a timed accept
or close, ON-TICK about once a second, ON-WAIT after the answer of a
request whose handler suspended."
  (%make-observer-hooks tally on-request on-failure on-write on-accept on-close
                        on-tick on-wait))

;; The phases the running handler timed: ((name . ns) …) or #f.  One
;; loop runs per process on one thread, and the observer takes them as
;; the loop tells it of the request (#:on-request), right after the
;; handler returned: a variable is enough.  (A handler the loop runs on
;; a pool thread, for a body read as a port, notes them from there; one
;; overlapping another's may then lend it its phases: figures, never
;; answers, are at stake.)
(define handler-phases #f)

(define (note-handler-phases! phases)
  "Return nothing useful; keep PHASES, the phases the handler of the
request being answered timed, for the observer: a list ((NAME . NS) …),
NAME a symbol and NS the exact nanoseconds spent in it, or #f for none.
(plucky web timing)'s `with-server-timing' calls it."
  (set! handler-phases phases))

(define (take-handler-phases!)
  "Return the phases last given to `note-handler-phases!' (or #f) and
forget them, so that they are accounted for once and never under
another request."
  (let ((phases handler-phases))
    (when phases (set! handler-phases #f))
    phases))

;; Whether anyone takes the phases: an observer says so when it is made
;; into hooks.  Without one, `with-server-timing' times nothing — a
;; timing record, a fluid and four clock reads per request nobody would
;; read (bench/blog).
(define phases-wanted? #f)

(define (want-handler-phases! wanted?)
  "Say whether an observer takes the phases handlers note (WANTED?
true) or not; return nothing useful."
  (set! phases-wanted? (and wanted? #t)))

(define (handler-phases-wanted?)
  "Return #t when an observer takes the phases handlers note with
`note-handler-phases!', else #f."
  phases-wanted?)

;; The route named for the request being answered, or #f.  One loop
;; runs per process, on one thread: a variable is enough.
(define request-route #f)

(define (note-request-route! name)
  "Return nothing useful; keep NAME (a string, such as the pattern
\"/post/:id\" a router matched) as the route of the request being
answered, for the observer to account it under rather than its path.
(plucky web router) calls it for each request it routes."
  (set! request-route name))

(define (take-request-route!)
  "Return the name last given to `note-request-route!' (or #f) and forget
it, so that it names one request only."
  (let ((name request-route))
    (when name (set! request-route #f))
    name))

;;; (plucky server hooks) ends here
