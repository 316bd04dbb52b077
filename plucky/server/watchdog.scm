;;; (plucky server watchdog) --- a handler that runs too long ends in a 503

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A worker runs one handler call at a time on its loop thread; while a
;;; handler loops forever, the worker accepts nothing and its share of
;;; new connections waits unanswered.  The watchdog bounds that:
;;;
;;;   - the loop notes each handler call it starts and ends in
;;;     `handler-call': a store in a vector each, which the loop's
;;;     (plucky server respond) inlines (bench/instructions), no clock,
;;;     no syscall on the request path;
;;;   - a thread of the worker (`start-watchdog!') looks at that vector a
;;;     few times each 100 ms and times each call from when it first saw
;;;     it.  Past the timeout it interrupts the loop thread with
;;;     `system-async-mark': at its next safe point the handler raises a
;;;     &handler-timeout, which the loop's handler-call wrapper answers
;;;     with a 503 and a backtrace, logged by the watchdog's thread once
;;;     the 503 is on its way (`watchdog-log!'), and the worker carries on;
;;;   - the time a handler waits for its client (a body read as a port,
;;;     plucky server stream) is the client's: bounded by the body
;;;     time-out, not counted here.  A handler that reads on the loop
;;;     suspends then, out of `handler-call'; one blocked in C on a body
;;;     that a thread fills has that thread name it in slot 1 of
;;;     `handler-call' while the thread waits for the socket, and the
;;;     watchdog does not count those ticks;
;;;   - a handler blocked in C (a foreign call that waits: asyncs run
;;;     only in Scheme) cannot be interrupted.  After a further grace the
;;;     watchdog logs the request (method, target, peer, how long) and
;;;     exits the worker, which its master replaces.  The listening
;;;     sockets stay open in the master, so the connections queued on
;;;     them are served by the replacement.
;;;
;;; The interruption is raised only if the call the watchdog timed is
;;; still the one running when the loop thread gets to it: a call that
;;; ended in between is left alone, and the loop's own code never sees
;;; the exception.
;;;
;;; Code:

(define-module (plucky server watchdog)
  #:use-module (ice-9 exceptions)
  #:use-module (ice-9 threads)
  #:use-module ((web request) #:select (request-method request-uri))
  #:use-module ((web uri) #:select (uri->string))
  #:export (handler-call
            watchdog-log!
            start-watchdog!
            handler-timeout?
            handler-timeout-seconds))

(define-exception-type &handler-timeout &error
  make-handler-timeout
  handler-timeout?
  (seconds handler-timeout-seconds))

;; The loop thread's handler call: slot 0 holds the request whose
;; handler runs, or #f between calls.  A request is parsed afresh each
;; time, so the request in the slot tells one call from the next.
;; Slot 1 holds a request whose handler waits for its client (set by
;; another thread, plucky server stream): while it is the one in slot 0,
;; its time is not counted.
(define handler-call (vector #f #f))

;; Log thunks the loop thread handed over (`watchdog-log!'), newest
;; first, under their mutex.  Not an atomic box: (ice-9 atomic) loads
;; Guile's tree-il modules, start-up time for every server
;; (bench/startup-modules), where a handler's failure is rare and the
;; lock is taken each tick only by the watchdog's thread.
(define pending-logs '())
(define pending-logs-mutex (make-mutex))

(define (watchdog-log! thunk)
  "Have the watchdog's thread call THUNK soon, to log what the loop
thread must not wait for; return unspecified.  Printing a backtrace
reads the debugging information of each frame: tens of milliseconds the
503 of a timed-out call would otherwise wait."
  (with-mutex pending-logs-mutex
    (set! pending-logs (cons thunk pending-logs))))

(define (run-pending-logs!)
  (let ((thunks (with-mutex pending-logs-mutex
                  (let ((thunks pending-logs))
                    (set! pending-logs '())
                    thunks))))
    (for-each (lambda (thunk) (false-if-exception (thunk))) (reverse thunks))))

;; How often the watchdog looks: a call is timed from when it was first
;; seen, so it ends at most two ticks after its timeout.
(define tick-us 10000)

(define (now-seconds)
  (/ (get-internal-real-time) internal-time-units-per-second 1.))

(define (interrupt! request timeout)
  ;; Runs on the loop thread (an async): raise inside the handler call
  ;; the watchdog timed, if it is still running.
  (when (eq? request (vector-ref handler-call 0))
    (raise-exception
     (make-exception (make-handler-timeout timeout)
                     (make-exception-with-message
                      (format #f "handler ran past --handler-timeout ~a" timeout))))))

(define (describe request peer)
  (format #f "~a ~a from ~a"
          (request-method request)
          (let ((uri (request-uri request))) (if uri (uri->string uri) ""))
          (or (false-if-exception (peer)) "an unknown peer")))

(define (call-with-collections-off thunk)
  (dynamic-wind gc-disable thunk gc-enable))

(define (watch loop-thread timeout grace peer exit? port)
  ;; The watchdog thread's loop: -> never, or exits the process.  SINCE
  ;; is when the call TIMED began, moved on by the time it waited for
  ;; its client; LAST when the watchdog last looked.
  (let watch* ((timed #f) (since 0.) (last 0.) (interrupted? #f) (logged? #f))
    (usleep tick-us)
    (run-pending-logs!)
    (let* ((now (now-seconds))
           (request (vector-ref handler-call 0))
           (since (if (and request (eq? request (vector-ref handler-call 1)))
                      (+ since (- now last))
                      since)))
      (define (watch timed since interrupted? logged?)
        (watch* timed since now interrupted? logged?))
      (cond
       ((or (not request) (not (eq? request timed)))
        (watch request now #f #f))
       ((< (- now since) timeout)
        (watch timed since interrupted? logged?))
       ((not interrupted?)
        (system-async-mark (lambda () (interrupt! timed timeout)) loop-thread)
        (watch timed since #t logged?))
       ((< (- now since) (+ timeout grace))
        (watch timed since #t logged?))
       (logged?
        (watch timed since #t #t))
       (else
        (false-if-exception
         (begin
           (format port "plucky: handler stuck for ~a s on ~a, not interruptible~a~%"
                   (/ (round (* 10 (- now since))) 10) (describe request peer)
                   (if exit? ": worker exits, its master starts another" ""))
           (force-output port)))
        (when exit?
          (primitive-_exit 70))
        (watch timed since #t #t))))))

(define* (start-watchdog! timeout #:key (grace (max 1 timeout))
                          (peer (lambda () #f)) (exit? #t))
  "Start a thread that ends the calling thread's handler calls that run
past TIMEOUT seconds (a 503, see the commentary) and return it.  A call
still running GRACE seconds later is logged, naming the request and
PEER (a thunk giving the client's address, or #f); then, with EXIT?, the
process exits with status 70 so that its master replaces it."
  (let ((loop-thread (current-thread))
        (port (current-error-port)))
    ;; With collections off while it starts: the first thread a process
    ;; starts with them on sets off a full collection (libgc as Guile
    ;; 3.0.8 uses it), on each worker's way to its first answer
    ;; (bench/startup-instructions; tests/server/startup.scm checks).
    ;; Later collections come as allocation calls for them.
    (call-with-collections-off
     (lambda ()
       (call-with-new-thread
        (lambda () (watch loop-thread timeout grace peer exit? port)))))))

;;; (plucky server watchdog) ends here
