;;; (plucky server suspend) --- handlers that wait without holding their worker

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A handler runs on its worker's loop thread.  When it must wait (a
;;; socket to another service, a timer, a message from another request,
;;; a C call on a compute thread) it suspends: the loop (plucky server
;;; respond) calls every handler under a prompt, and the procedures here
;;; abort to it with a REGISTER procedure that arranges for the wait to
;;; end.  The loop keeps the continuation with the connection, serves
;;; other connections, and resumes it once REGISTER's RESUME is called.
;;; The handler reads in direct style, as gevent's greenlets or a
;;; goroutine do: no callbacks, no async/await.
;;;
;;;   handler -> (wait-readable fd)  -> suspend -> abort to the loop's prompt
;;;   loop    -> REGISTER watches FD -> ... epoll says FD is readable ...
;;;   loop    -> RESUME -> the continuation runs on, under a new prompt
;;;
;;; RESUME takes a thunk that runs inside the handler where it waited:
;;; its values are what the waiting procedure returns, and what it
;;; raises is raised there (a compute thread's exception; the
;;; cancellation of a request whose client left or whose time ran out),
;;; so that the handler's own exception handlers close what it opened.
;;;
;;; A suspension leaves the handler's dynamic extent through the loop's
;;; prompt and its resumption enters it again, as with Fibers: each
;;; `dynamic-wind' around a wait runs its after thunk as the handler
;;; suspends and its before thunk as it resumes.  Parameters, fluids and
;;; exception handlers are as they were.  So a handler releases what it
;;; holds with an exception handler (`guard', `with-exception-handler'),
;;; never with a `dynamic-wind' around a wait.
;;;
;;; Outside a handler on the loop's thread (a script, the REPL, a pool
;;; thread, a response body written by a procedure) nothing can suspend:
;;; each procedure here then blocks as its name says, with poll(2) or a
;;; sleep, so that library code (plucky web client) works everywhere.
;;;
;;; Guile's suspendable ports call `current-read-waiter' and
;;; `current-write-waiter' when a non-blocking port would block.  The
;;; loop does not set them: a body read as a port (plucky server stream)
;;; sets the read waiter around its handler, and an app that installs
;;; suspendable ports for its own descriptors can make the waiters call
;;; `wait-readable'/`wait-writable' (docs/waiting.md).
;;;
;;; Events and channels are for requests of one worker: its loop runs on
;;; one thread, and they must be used from it (a compute thread passes a
;;; value back by returning it from `blocking').
;;;
;;; Code:

(define-module (plucky server suspend)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 exceptions)
  #:use-module ((plucky sys libc) #:select (fd-wait))
  ;; Loaded when a loop starts or a handler first waits (bench/startup).
  #:autoload (ice-9 threads) (current-thread)
  #:export (suspend-tag
            make-waits
            waits?
            install-waits!
            current-waits
            enter-suspendable!
            leave-suspendable!
            suspendable?

            suspend
            wait-readable
            wait-writable
            release-descriptor!
            sleep-ms
            blocking

            make-event
            event?
            event-signal!
            event-wait

            make-channel
            channel?
            channel-put!
            channel-get

            &request-cancelled
            make-request-cancelled
            request-cancelled?
            request-cancelled-reason))

;;;
;;; The seam with the loop
;;;

;; The prompt every handler call runs under: (plucky server respond)
;; installs it; `suspend' aborts to it with (suspend KIND LABEL
;; REGISTER), and the loop's handler of errors with (failed REQUEST
;; EXCEPTION STACK).
(define suspend-tag (make-prompt-tag "plucky-suspend"))

;; What the loop lends the waiting procedures: each procedure runs on
;; the loop's thread.
(define-record-type <waits>
  (make-waits watch-fd unwatch-fd call-after cancel-timer run-blocking thread)
  waits?
  ;; (fd write? on-ready arg ms timeout-arg) -> _: call (ON-READY ARG)
  ;; once when FD is ready (readable, or writable when WRITE?), in error,
  ;; or hung up, or (ON-READY TIMEOUT-ARG) once MS (#f: never) passed;
  ;; FD stays registered, disarmed, until UNWATCH-FD
  (watch-fd waits-watch-fd)
  (unwatch-fd waits-unwatch-fd)           ; fd -> _: forget FD altogether
  ;; (ms thunk) -> timer, thunk called at the earliest MS from now
  (call-after waits-call-after)
  (cancel-timer waits-cancel-timer)       ; timer -> _
  ;; (thunk on-done) -> _: THUNK on a compute thread; then (ON-DONE
  ;; result-thunk) on the loop's thread
  (run-blocking waits-run-blocking)
  (thread waits-thread))                  ; the loop's thread

;; The loop's <waits>, while a loop runs in this process.
(define current-waits #f)

(define (install-waits! waits)
  "Make WAITS (or #f) the loop's facilities the waiting procedures use;
called by the loop as it starts and stops.  Return nothing."
  (set! current-waits waits)
  (values))

;; True while a handler runs under the loop's prompt.  A variable, not a
;; fluid: the loop sets it twice a request, and a fluid's set is a
;; look-up in the thread's table (bench/instructions).  Other threads
;; may see it true, so `suspendable?' also checks the thread.
(define in-handler? #f)

(define-inlinable (enter-suspendable!) (set! in-handler? #t))
(define-inlinable (leave-suspendable!) (set! in-handler? #f))

(define (suspendable?)
  "Return true when the caller is a handler that may suspend: one the
loop calls on its own thread, under its prompt."
  (and in-handler?
       current-waits
       (eq? (current-thread) (waits-thread current-waits))))

;; The request was given up while it waited: its client left, its
;; handler timeout passed, or the worker stops.  Raised where it waits,
;; so that the handler's exception handlers release what it holds; the
;; loop then drops the request without an answer (client gone) or
;; answers 503.
(define-exception-type &request-cancelled &error
  make-request-cancelled
  request-cancelled?
  (reason request-cancelled-reason))      ; client-gone | timeout | stopping

(define (suspend kind label register)
  "Suspend the calling handler until REGISTER's RESUME is called, and
return the values of the thunk given to RESUME, called where the handler
waits.  REGISTER is called on the loop's thread as (REGISTER RESUME),
once the handler is suspended; it arranges for (RESUME THUNK) to be
called once, later, on the loop's thread.  REGISTER returns a thunk the
loop calls if the request is given up before RESUME is called, to undo
the arrangement.  KIND (timer, socket, thread, event) and LABEL (a
string naming what is waited for, or #f) are what the status page shows
the time as waited for.  Raises an error outside a suspendable handler:
see `suspendable?'."
  (unless (suspendable?)
    (error "suspend: not in a handler the loop runs" kind label))
  ((abort-to-prompt suspend-tag 'suspend kind label register)))

;;;
;;; Waiting for a descriptor, a time
;;;

(define (ms-or-forever ms)
  ;; -> ms for poll(2): -1 for no limit
  (if ms (max 0 (inexact->exact (ceiling ms))) -1))

(define (return-true) #t)
(define (return-false) #f)

(define (wait-fd fd write? timeout-ms kind label)
  (if (suspendable?)
      (suspend kind label
               ;; No closure but these two: RESUME is what the loop
               ;; calls, with `return-true' or `return-false' (time-out).
               (lambda (resume)
                 (let ((waits current-waits))
                   ((waits-watch-fd waits) fd write? resume return-true
                    timeout-ms return-false)
                   (lambda () ((waits-unwatch-fd waits) fd)))))
      (fd-wait fd (if write? 'write 'read) (ms-or-forever timeout-ms))))

(define (release-descriptor! fd)
  "Forget FD, a descriptor its owner is about to close, in the loop's
epoll set, where `wait-readable' and `wait-writable' leave it between
waits; return nothing.  Call it before closing FD (a connection pool
giving a socket up): epoll keeps what it watches by open file, so a
file shared with another process, or a number reused, would otherwise
be reported under the wrong socket.  Does nothing outside the loop's
thread or when no loop runs."
  (let ((waits current-waits))
    (when (and waits (eq? (current-thread) (waits-thread waits)))
      ((waits-unwatch-fd waits) fd))
    (values)))

(define* (wait-readable fd #:key (timeout-ms #f) (label #f) (kind 'socket))
  "Wait until FD, a non-blocking descriptor, is readable, has an error
or hung up; return #t, or #f when TIMEOUT-MS milliseconds passed first.
A handler suspends meanwhile, its worker serving other requests; LABEL
(e.g. \"upstream 127.0.0.1:8080\") and KIND name the wait on the status
page.  Elsewhere it blocks in poll(2)."
  (wait-fd fd #f timeout-ms kind label))

(define* (wait-writable fd #:key (timeout-ms #f) (label #f) (kind 'socket))
  "As `wait-readable', until FD is writable."
  (wait-fd fd #t timeout-ms kind label))

(define (sleep-ms ms)
  "Wait MS milliseconds; return nothing.  A handler suspends meanwhile,
its worker serving other requests; elsewhere the thread sleeps."
  (if (suspendable?)
      (suspend 'timer #f
               (lambda (resume)
                 (let ((timer ((waits-call-after current-waits) ms
                               (lambda () (resume values)))))
                   (lambda () ((waits-cancel-timer current-waits) timer)))))
      (let ((us (inexact->exact (round (* 1000 ms)))))
        (when (> us 0) (usleep us))
        (values))))

;;;
;;; Compute threads
;;;

(define (blocking thunk)
  "Return the values of THUNK, called on one of the worker's compute
threads while the calling handler suspends: for a C call that cannot
suspend (SQLite, libargon2) or a long computation.  What THUNK raises
is raised here.  The threads are bounded (--max-threads); a call waits
for one when all are busy.  Outside a suspendable handler, THUNK is
simply called."
  (if (suspendable?)
      (suspend 'thread #f
               (lambda (resume)
                 (let ((cancelled? #f))
                   ((waits-run-blocking current-waits) thunk
                    (lambda (result)
                      (unless cancelled? (resume result))))
                   ;; The thread cannot be stopped; its result is dropped.
                   (lambda () (set! cancelled? #t)))))
      (thunk)))

;;;
;;; Events and channels between the requests of a worker
;;;

;; Waiters are procedures (value -> _), each called at most once; a
;; waiter that timed out has removed itself.

(define-record-type <event>
  (%make-event waiters)
  event?
  (waiters event-waiters set-event-waiters!))   ; newest first

(define (make-event)
  "Return a new event: requests wait on it (`event-wait') until another
signals it (`event-signal!'), as a long poll waits for a chat message."
  (%make-event '()))

(define (remove-waiter! event waiter)
  (set-event-waiters! event (delq waiter (event-waiters event))))

(define* (event-signal! event #:optional (value #t))
  "Wake every request waiting on EVENT now, their `event-wait' returning
VALUE; return the number woken.  Requests that wait later wait for the
next signal.  Call it from the loop's thread (a handler, a timer)."
  (let ((waiters (reverse (event-waiters event))))
    (set-event-waiters! event '())
    (for-each (lambda (waiter) (waiter value)) waiters)
    (length waiters)))

(define* (wait-for-value add! remove! timeout-ms default #:optional (kind 'event) (label #f))
  ;; Suspend until the waiter given to ADD! is called with a value, and
  ;; return that value; or DEFAULT once TIMEOUT-MS passed, the waiter
  ;; then given to REMOVE!.  The wait of `event-wait' and `channel-get'.
  (suspend kind label
           (lambda (resume)
             (let* ((waits current-waits)
                    (timer #f)
                    (waiter #f))
               (set! waiter
                     (lambda (value)
                       (when timer ((waits-cancel-timer waits) timer))
                       (resume (lambda () value))))
               (add! waiter)
               (when timeout-ms
                 (set! timer ((waits-call-after waits) timeout-ms
                              (lambda ()
                                (remove! waiter)
                                (resume (lambda () default))))))
               (lambda ()
                 (remove! waiter)
                 (when timer ((waits-cancel-timer waits) timer)))))))

(define (sleep-then default timeout-ms)
  ;; Outside a handler nobody else can give a value: wait out the time.
  (sleep-ms (or timeout-ms (* 1000 60 60 24 365)))
  default)

(define* (event-wait event #:key (timeout-ms #f) (default #f) (kind 'event) (label #f))
  "Wait until EVENT is signalled and return the value it was signalled
with, or DEFAULT when TIMEOUT-MS milliseconds passed first.  A handler
suspends meanwhile; elsewhere, as nobody else could signal it, this
waits for the timeout (forever without one).  KIND and LABEL name the
wait on the status page (as `wait-readable''s)."
  (if (suspendable?)
      (wait-for-value (lambda (waiter)
                        (set-event-waiters! event (cons waiter (event-waiters event))))
                      (lambda (waiter) (remove-waiter! event waiter))
                      timeout-ms default kind label)
      (sleep-then default timeout-ms)))

;; A channel: values queued in order, each taken by one request.
(define-record-type <channel>
  (%make-channel head tail getters)
  channel?
  (head channel-head set-channel-head!)       ; values, oldest first
  (tail channel-tail set-channel-tail!)       ; last pair of HEAD, or '()
  (getters channel-getters set-channel-getters!)) ; waiting, oldest first

(define (make-channel)
  "Return a new, empty channel: `channel-put!' queues a value, which one
`channel-get' takes, the requests waiting served oldest first."
  (%make-channel '() '() '()))

(define (channel-put! channel value)
  "Give VALUE to the oldest request waiting on CHANNEL, or queue it for
the next `channel-get'; return nothing.  Never waits.  Call it from the
loop's thread."
  (let ((getters (channel-getters channel)))
    (if (pair? getters)
        (begin
          (set-channel-getters! channel (cdr getters))
          ((car getters) value))
        (let ((cell (list value)))
          (if (null? (channel-head channel))
              (set-channel-head! channel cell)
              (set-cdr! (channel-tail channel) cell))
          (set-channel-tail! channel cell))))
  (values))

(define* (channel-get channel #:key (timeout-ms #f) (default #f))
  "Return the oldest value queued on CHANNEL, waiting for one if there is
none; return DEFAULT when TIMEOUT-MS milliseconds pass first.  A handler
suspends meanwhile."
  (let ((head (channel-head channel)))
    (cond
     ((pair? head)
      (set-channel-head! channel (cdr head))
      (when (null? (cdr head)) (set-channel-tail! channel '()))
      (car head))
     ((suspendable?)
      (wait-for-value (lambda (getter)
                        (set-channel-getters! channel (append (channel-getters channel)
                                                              (list getter))))
                      (lambda (getter)
                        (set-channel-getters! channel
                                              (delq getter (channel-getters channel))))
                      timeout-ms default))
     (else (sleep-then default timeout-ms)))))

;;; (plucky server suspend) ends here
