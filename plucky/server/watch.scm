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
  #:use-module (rnrs bytevectors)
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
  (%make-watchers epfd handlers objects writing last timers now)
  watchers?
  (epfd watchers-epfd)
  ;; by descriptor: its <handlers> or #f, the object they are called
  ;; with, and 1 where EPOLLOUT was asked for
  (handlers watchers-handlers set-watchers-handlers!)
  (objects watchers-objects set-watchers-objects!)
  (writing watchers-writing set-watchers-writing!)
  (last watchers-last set-watchers-last!) ; the <handlers> made last, or #f
  ;; ((due-ms . <timer>) …), earliest first
  (timers watchers-timers set-watchers-timers!)
  (now watchers-now))                   ; thunk -> the loop's clock, ms

;; The procedures of a watched descriptor.  Descriptors watched with the
;; same procedures and an #:object share one record: an idle descriptor
;; then holds no object of its own here.
(define-record-type <handlers>
  (make-handlers on-read on-write on-stop object?)
  handlers?
  (on-read handlers-on-read)            ; procedures of the object, or thunks
  (on-write handlers-on-write)
  (on-stop handlers-on-stop)
  (object? handlers-object?))           ; called with the descriptor's object

(define (handlers-for w on-read on-write on-stop object?)
  ;; -> the <handlers> of these, the last one made if it is the same
  (let ((last (watchers-last w)))
    (if (and last object? (handlers-object? last)
             (eq? (handlers-on-read last) on-read)
             (eq? (handlers-on-write last) on-write)
             (eq? (handlers-on-stop last) on-stop))
        last
        (let ((handlers (make-handlers on-read on-write on-stop object?)))
          (set-watchers-last! w handlers)
          handlers))))

(define (handlers-of w fd)
  ;; -> the <handlers> of FD in W, or #f
  (let ((table (watchers-handlers w)))
    (and (< fd (vector-length table)) (vector-ref table fd))))

(define (call-handler handlers procedure object)
  (if (handlers-object? handlers)
      (procedure object)
      (procedure)))

(define (set-entry! w fd handlers object)
  ;; FD's entry in W becomes HANDLERS (or #f) and OBJECT, not writing
  (let ((size (vector-length (watchers-handlers w))))
    (when (>= fd size)
      (let* ((new-size (max (+ fd 1) (* 2 size)))
             (grow (lambda (old)
                     (let ((new (make-vector new-size #f)))
                       (vector-move-left! old 0 size new 0)
                       new)))
             (writing (make-bytevector new-size 0)))
        (bytevector-copy! (watchers-writing w) 0 writing 0 size)
        (set-watchers-handlers! w (grow (watchers-handlers w)))
        (set-watchers-objects! w (grow (watchers-objects w)))
        (set-watchers-writing! w writing))))
  (vector-set! (watchers-handlers w) fd handlers)
  (vector-set! (watchers-objects w) fd object)
  (bytevector-u8-set! (watchers-writing w) fd 0))

(define-record-type <timer>
  (make-timer thunk)
  timer?
  (thunk timer-thunk set-timer-thunk!))  ; #f once cancelled

(define (make-watchers epfd now)
  "Return the watchers of a loop whose epoll descriptor is EPFD and whose
clock NOW returns (a thunk, milliseconds)."
  (%make-watchers epfd (make-vector 64 #f) (make-vector 64 #f) (make-bytevector 64 0)
                  #f '() now))

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
(define no-object (list 'no-object))

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
    (set-entry! w fd (handlers-for w on-read on-write on-stop
                                   (not (eq? object no-object)))
                object)
    (epoll-add! (watchers-epfd w) fd EPOLLIN)
    (values)))

(define (loop-want-write! fd want?)
  "Make the loop call FD's ON-WRITE when it is writable (WANT? true), or
stop (WANT? #f); return nothing."
  (let ((w (the-watchers 'loop-want-write!))
        (flag (if want? 1 0)))
    (when (and (handlers-of w fd)
               (not (= flag (bytevector-u8-ref (watchers-writing w) fd))))
      (bytevector-u8-set! (watchers-writing w) fd flag)
      (epoll-modify! (watchers-epfd w) fd
                     (if want? (logior EPOLLIN EPOLLOUT) EPOLLIN)))
    (values)))

(define (loop-unwatch! fd)
  "Stop watching FD (before closing it); return nothing."
  (let ((w (current-watchers)))
    (when (and w (handlers-of w fd))
      (set-entry! w fd #f #f)
      (epoll-remove! (watchers-epfd w) fd))
    (values)))

(define (loop-watching? fd)
  "Return true when the loop of this process watches FD."
  (let ((w (current-watchers)))
    (and w (handlers-of w fd) #t)))

(define (loop-now-ms)
  "Return the loop's clock, in milliseconds of a monotonic clock, as of
the start of its current round."
  ((watchers-now (the-watchers 'loop-now-ms))))

(define (loop-call-after! ms thunk)
  "Call THUNK on the loop's thread MS milliseconds from now (at the
earliest); return a timer for `loop-cancel-timer!'."
  (let* ((w (the-watchers 'loop-call-after!))
         ;; + 1: the clock is in whole milliseconds (see `set-deadline!')
         (due (+ ((watchers-now w)) ms 1))
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
  (let ((handlers (handlers-of w fd)))
    (and handlers
         (let ((object (vector-ref (watchers-objects w) fd)))
           (when (and (= 1 (bytevector-u8-ref (watchers-writing w) fd))
                      (logtest flags EPOLLOUT))
             (call-handler handlers (handlers-on-write handlers) object))
           (when (and (logtest flags (logior EPOLLIN EPOLLERR EPOLLHUP))
                      ;; ON-WRITE may have unwatched it
                      (eq? handlers (handlers-of w fd))
                      (eq? object (vector-ref (watchers-objects w) fd)))
             (call-handler handlers (handlers-on-read handlers) object))
           #t))))

(define (stop-watchers! w)
  "Call every ON-STOP of W, forgetting each watcher first; return
nothing."
  (let* ((table (watchers-handlers w))
         (objects (watchers-objects w))
         (all (let lp ((fd (- (vector-length table) 1)) (all '()))
                (if (< fd 0)
                    all
                    (lp (- fd 1)
                        (let ((handlers (vector-ref table fd)))
                          (if handlers
                              (cons (cons handlers (vector-ref objects fd)) all)
                              all)))))))
    (vector-fill! table #f)
    (vector-fill! objects #f)
    (bytevector-fill! (watchers-writing w) 0)
    (set-watchers-timers! w '())
    (for-each (lambda (entry)
                (call-handler (car entry) (handlers-on-stop (car entry)) (cdr entry)))
              all))
  (values))

;;; (plucky server watch) ends here
