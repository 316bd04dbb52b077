;;; (plucky server watch) --- descriptors and timers of a takeover on the loop

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A takeover (see `make-takeover') gets a socket on the loop's thread.
;;; Rather than a thread each, it can stay on the loop: `loop-watch!'
;;; enters the descriptor in the loop's epoll set with procedures to call
;;; when it is readable or writable, and `loop-call-after!' runs a thunk
;;; later, on the same thread.  WebSocket connections (plucky web
;;; websocket) live here: ten thousand idle ones cost their records and
;;; no thread.
;;;
;;; The loop (plucky server loop) looks a ready descriptor up in its own
;;; table of HTTP connections first, then here (`watchers-ready!'); it
;;; sleeps no later than the earliest timer (`watchers-next-due') and runs
;;; the timers due (`run-due-timers!'); when it stops it calls each
;;; watcher's ON-STOP (`stop-watchers!'), which closes the descriptor.
;;; Watched descriptors are not HTTP connections: a drain does not wait
;;; for them.
;;;
;;; What is watched is kept in a vector indexed by descriptor, and a
;;; watcher may carry the object its procedures are called with (#:object)
;;; rather than closures over it: every collection marks what an idle
;;; descriptor holds, and the worker's HTTP clients wait through that
;;; (bench/websocket, idle: a hash table's entry is two objects more, a
;;; closure one each).
;;;
;;; Timers are kept in a list sorted by time: meant for a few per loop
;;; (a module's periodic sweep of its own connections), not one per
;;; connection.
;;;
;;; Code:

(define-module (plucky server watch)
  #:use-module (srfi srfi-9)
  #:use-module (plucky sys epoll)
  #:export (make-watchers
            current-watchers
            set-current-watchers!
            watchers-ready!
            watchers-next-due
            run-due-timers!
            stop-watchers!
            loop-watch!
            loop-want-write!
            loop-unwatch!
            loop-watching?
            loop-call-after!
            loop-cancel-timer!
            loop-now-ms))

(define-record-type <watchers>
  (%make-watchers epfd table timers now)
  watchers?
  (epfd watchers-epfd)
  (table watchers-table set-watchers-table!) ; vector: fd -> <watcher> or #f
  ;; ((due-ms . <timer>) …), earliest first
  (timers watchers-timers set-watchers-timers!)
  (now watchers-now))                   ; thunk -> the loop's clock, ms

(define-record-type <watcher>
  (make-watcher on-read on-write on-stop write? object)
  watcher?
  (on-read watcher-on-read)             ; procedures of OBJECT, or thunks
  (on-write watcher-on-write)
  (on-stop watcher-on-stop)
  (write? watcher-write? set-watcher-write!) ; EPOLLOUT asked for
  (object watcher-object))              ; or `no-object'

(define no-object (list 'no-object))

(define-inlinable (call-watcher watcher procedure)
  (let ((object (watcher-object watcher)))
    (if (eq? object no-object)
        (procedure)
        (procedure object))))

(define (watcher-of w fd)
  ;; -> the <watcher> of FD in W, or #f
  (let ((table (watchers-table w)))
    (and (< fd (vector-length table)) (vector-ref table fd))))

(define (set-watcher-of! w fd watcher)
  ;; FD's entry in W becomes WATCHER (or #f)
  (let ((table (watchers-table w)))
    (when (>= fd (vector-length table))
      (let ((bigger (make-vector (max (+ fd 1) (* 2 (vector-length table))) #f)))
        (vector-move-left! table 0 (vector-length table) bigger 0)
        (set-watchers-table! w bigger)))
    (vector-set! (watchers-table w) fd watcher)))

(define-record-type <timer>
  (make-timer thunk)
  timer?
  (thunk timer-thunk set-timer-thunk!))  ; #f once cancelled

(define (make-watchers epfd now)
  "Return the watchers of a loop whose epoll descriptor is EPFD and whose
clock NOW returns (a thunk, milliseconds)."
  (%make-watchers epfd (make-vector 64 #f) '() now))

;; The <watchers> of the loop running in this process, or #f.
(define %current-watchers #f)

(define (current-watchers)
  "Return the watchers of the loop running in this process, or #f."
  %current-watchers)

(define (set-current-watchers! w)
  "Make W the watchers of the loop running in this process (#f: none);
return nothing."
  (set! %current-watchers w)
  (values))

(define (the-watchers who)
  (or (current-watchers)
      (error (string-append (symbol->string who) ": no loop runs here"))))

(define (ignore . _) #f)

(define* (loop-watch! fd #:key on-read (on-write ignore) (on-stop ignore)
                      (object no-object))
  "Watch FD on the loop of this process, on its thread: call ON-READ when
FD is readable or the peer is gone, ON-WRITE when it is writable and
`loop-want-write!' asked for that, and ON-STOP when the loop stops (it
must close FD).  Each is a thunk, or, when OBJECT is given, a procedure
called with OBJECT: shared procedures and one object per descriptor
rather than closures over it.  Return nothing.  Call it from the loop's
own thread (a takeover's procedure, or a watcher's callback)."
  (let ((w (the-watchers 'loop-watch!)))
    (set-watcher-of! w fd (make-watcher on-read on-write on-stop #f object))
    (epoll-add! (watchers-epfd w) fd EPOLLIN)
    (values)))

(define (loop-want-write! fd want?)
  "Make the loop call FD's ON-WRITE when it is writable (WANT? true), or
stop (WANT? #f); return nothing."
  (let* ((w (the-watchers 'loop-want-write!))
         (watcher (watcher-of w fd)))
    (when (and watcher (not (eq? (watcher-write? watcher) (and want? #t))))
      (set-watcher-write! watcher (and want? #t))
      (epoll-modify! (watchers-epfd w) fd
                     (if want? (logior EPOLLIN EPOLLOUT) EPOLLIN)))
    (values)))

(define (loop-unwatch! fd)
  "Stop watching FD (before closing it); return nothing."
  (let ((w (current-watchers)))
    (when (and w (watcher-of w fd))
      (set-watcher-of! w fd #f)
      (epoll-remove! (watchers-epfd w) fd))
    (values)))

(define (loop-watching? fd)
  "Return true when the loop of this process watches FD."
  (let ((w (current-watchers)))
    (and w (watcher-of w fd) #t)))

(define (loop-now-ms)
  "Return the loop's clock, in milliseconds of a monotonic clock, as of
the start of its current round."
  ((watchers-now (the-watchers 'loop-now-ms))))

(define (loop-call-after! ms thunk)
  "Call THUNK on the loop's thread MS milliseconds from now (at the
earliest); return a timer for `loop-cancel-timer!'."
  (let* ((w (the-watchers 'loop-call-after!))
         (due (+ ((watchers-now w)) ms))
         (timer (make-timer thunk)))
    (set-watchers-timers!
     w (let insert ((timers (watchers-timers w)))
         (if (or (null? timers) (< due (caar timers)))
             (cons (cons due timer) timers)
             (cons (car timers) (insert (cdr timers))))))
    timer))

(define (loop-cancel-timer! timer)
  "Make TIMER never fire; return nothing."
  (set-timer-thunk! timer #f)
  (values))

(define (watchers-next-due w)
  "Return the loop's clock when the earliest timer of W is due, or +inf.0."
  (let ((timers (watchers-timers w)))
    (if (null? timers) +inf.0 (caar timers))))

(define (run-due-timers! w now)
  "Run the timers of W due at NOW; return nothing."
  (let lp ()
    (let ((timers (watchers-timers w)))
      (when (and (pair? timers) (<= (caar timers) now))
        (set-watchers-timers! w (cdr timers))
        (let ((thunk (timer-thunk (cdar timers))))
          (when thunk (thunk)))
        (lp))))
  (values))

(define (watchers-ready! w fd flags)
  "Call the procedures of the watcher of FD that FLAGS (epoll's) call
for; return #f when nobody watches FD."
  (let ((watcher (watcher-of w fd)))
    (and watcher
         (begin
           (when (and (watcher-write? watcher) (logtest flags EPOLLOUT))
             (call-watcher watcher (watcher-on-write watcher)))
           (when (and (logtest flags (logior EPOLLIN EPOLLERR EPOLLHUP))
                      ;; ON-WRITE may have unwatched it
                      (eq? watcher (watcher-of w fd)))
             (call-watcher watcher (watcher-on-read watcher)))
           #t))))

(define (stop-watchers! w)
  "Call every ON-STOP of W, forgetting each watcher first; return
nothing."
  (let* ((table (watchers-table w))
         (all (let lp ((fd (- (vector-length table) 1)) (all '()))
                (if (< fd 0)
                    all
                    (lp (- fd 1) (let ((watcher (vector-ref table fd)))
                                   (if watcher (cons watcher all) all)))))))
    (vector-fill! table #f)
    (set-watchers-timers! w '())
    (for-each (lambda (watcher) (call-watcher watcher (watcher-on-stop watcher))) all))
  (values))

;;; (plucky server watch) ends here
