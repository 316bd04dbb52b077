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
;;; websocket) live here: ten thousand idle ones cost rows of numbers
;;; and no thread.
;;;
;;; The loop (plucky server loop) looks a ready descriptor up in its own
;;; table of HTTP connections first, then here (`watchers-ready!'); it
;;; sleeps no later than the earliest timer (`watchers-next-due') and runs
;;; the timers due (`run-due-timers!'); when it stops it calls each
;;; watcher's ON-STOP (`stop-watchers!'), which closes the descriptor.
;;; Watched descriptors are not HTTP connections: a drain does not wait
;;; for them.
;;;
;;; What is watched is kept in tables indexed by descriptor, and a
;;; watcher may carry the object its procedures are called with (#:object)
;;; rather than closures over it: every collection marks what an idle
;;; descriptor holds, and the worker's HTTP clients wait through that
;;; (bench/websocket, idle: a hash table's entry is two objects more, a
;;; closure one each).  Descriptors watched with the same procedures share
;;; one <handlers>, and keep its number, not a pointer to it: a number in
;;; a bytevector is not scanned at all.
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
  #:use-module ((plucky sys libc) #:select (errno->string))
  #:use-module (plucky server numbered)
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
  (%make-watchers epfd ids objects writing handlers timers now)
  watchers?
  (epfd watchers-epfd)
  ;; by descriptor: the number of its <handlers> (u32, 0 for none), the
  ;; object they are called with, and 1 where EPOLLOUT was asked for
  (ids watchers-ids set-watchers-ids!)
  (objects watchers-objects set-watchers-objects!)
  (writing watchers-writing set-watchers-writing!)
  (handlers watchers-handlers)          ; the <handlers> by number (plucky server numbered)
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
  ;; -> the number of the <handlers> of these, the last one made if it is
  ;; the same, else a new one; counted as kept once more
  (numbered-take! (watchers-handlers w)
                  (lambda (last)
                    (and object? (handlers-object? last)
                         (eq? (handlers-on-read last) on-read)
                         (eq? (handlers-on-write last) on-write)
                         (eq? (handlers-on-stop last) on-stop)))
                  (lambda () (make-handlers on-read on-write on-stop object?))))

(define (id-of w fd)
  ;; -> the number of FD's <handlers> in W, 0 for none
  (let ((ids (watchers-ids w)))
    (if (< (* 4 fd) (bytevector-length ids))
        (bytevector-u32-native-ref ids (* 4 fd))
        0)))

(define (handlers-of w fd)
  ;; -> the <handlers> of FD in W, or #f
  (let ((id (id-of w fd)))
    (and (> id 0) (numbered-ref (watchers-handlers w) id))))

(define (call-handler handlers procedure object)
  (if (handlers-object? handlers)
      (procedure object)
      (procedure)))

(define (set-entry! w fd id object)
  ;; FD's entry in W becomes handlers number ID (0: none) and OBJECT, not
  ;; writing; the number it had is released
  (let ((size (vector-length (watchers-objects w))))
    (when (>= fd size)
      (let* ((new-size (max (+ fd 1) (* 2 size)))
             (objects (make-vector new-size #f))
             (ids (make-bytevector (* 4 new-size) 0))
             (writing (make-bytevector new-size 0)))
        (vector-move-left! (watchers-objects w) 0 size objects 0)
        (bytevector-copy! (watchers-ids w) 0 ids 0 (* 4 size))
        (bytevector-copy! (watchers-writing w) 0 writing 0 size)
        (set-watchers-objects! w objects)
        (set-watchers-ids! w ids)
        (set-watchers-writing! w writing))))
  (let ((old (id-of w fd)))
    (unless (zero? old) (numbered-release! (watchers-handlers w) old)))
  (bytevector-u32-native-set! (watchers-ids w) (* 4 fd) id)
  (vector-set! (watchers-objects w) fd object)
  (bytevector-u8-set! (watchers-writing w) fd 0))

(define-record-type <timer>
  (make-timer thunk)
  timer?
  (thunk timer-thunk set-timer-thunk!))  ; #f once cancelled

(define (make-watchers epfd now)
  "Return the watchers of a loop whose epoll descriptor is EPFD and whose
clock NOW returns (a thunk, milliseconds)."
  (%make-watchers epfd (make-bytevector (* 4 64) 0) (make-vector 64 #f)
                  (make-bytevector 64 0) (make-numbered #:recent 1) '() now))

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
rather than closures over it.  Watching FD again replaces its watcher.
Return nothing; raise an error, FD not watched, when epoll refuses it (a
regular file).  Call it from the loop's own thread (a takeover's
procedure, or a watcher's callback)."
  (unless (and (exact-integer? fd) (>= fd 0))
    (scm-error 'wrong-type-arg "loop-watch!" "not a descriptor: ~s" (list fd) (list fd)))
  (let* ((w (the-watchers 'loop-watch!))
         (watched? (handlers-of w fd)))
    (set-entry! w fd (handlers-for w on-read on-write on-stop
                                   (not (eq? object no-object)))
                object)
    ;; Watched again: epoll has it, maybe for EPOLLOUT too, which the new
    ;; watcher did not ask for.
    (let ((result (if watched?
                      (epoll-modify! (watchers-epfd w) fd EPOLLIN)
                      (epoll-add! (watchers-epfd w) fd EPOLLIN))))
      (unless (zero? result)
        (set-entry! w fd 0 #f)
        (error (format #f "loop-watch!: descriptor ~a: ~a" fd
                       (errno->string result)))))
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
      (set-entry! w fd 0 #f)
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
  (let* ((objects (watchers-objects w))
         (all (let lp ((fd (- (vector-length objects) 1)) (all '()))
                (if (< fd 0)
                    all
                    (lp (- fd 1)
                        (let ((handlers (handlers-of w fd)))
                          (if handlers
                              (cons (cons handlers (vector-ref objects fd)) all)
                              all)))))))
    (let lp ((fd 0))
      (when (< fd (vector-length objects))
        (set-entry! w fd 0 #f)
        (lp (+ fd 1))))
    (set-watchers-timers! w '())
    (for-each (lambda (entry)
                (call-handler (car entry) (handlers-on-stop (car entry)) (cdr entry)))
              all))
  (values))

;;; (plucky server watch) ends here
