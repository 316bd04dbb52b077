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
;;; Timers are kept in a binary heap by time: a few per loop for
;;; modules' periodic sweeps, and one per suspended request that sleeps
;;; or waits with a time-out (plucky server suspend).
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
            watchers-timers?
            run-due-timers!
            stop-watchers!
            loop-watch!
            loop-want-write!
            loop-unwatch!
            loop-await-fd!
            loop-registered-count
            loop-watching?
            loop-call-after!
            loop-cancel-timer!
            loop-now-ms))

(define-record-type <watchers>
  (%make-watchers epfd ids objects writing once deadlines handlers timers timer-count now)
  watchers?
  (epfd watchers-epfd)
  ;; by descriptor: the number of its <handlers> (u32, 0 for none), the
  ;; object they are called with, and 1 where EPOLLOUT was asked for
  (ids watchers-ids set-watchers-ids!)
  (objects watchers-objects set-watchers-objects!)
  (writing watchers-writing set-watchers-writing!)
  ;; by descriptor: 0, or in epoll's set with EPOLLONESHOT for
  ;; `loop-await-fd!', 1 disarmed (nobody waits), 2 armed
  (once watchers-once set-watchers-once!)
  ;; by descriptor: #f, or the <fd-wait> of its one-shot waits
  (deadlines watchers-deadlines set-watchers-deadlines!)
  (handlers watchers-handlers)          ; the <handlers> by number (plucky server numbered)
  ;; the timers' heap, a vector of (due-ms . <timer>): see heap-insert!
  (timers watchers-timers set-watchers-timers!)
  (timer-count watchers-timer-count set-watchers-timer-count!)
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
             (writing (make-bytevector new-size 0))
             (once (make-bytevector new-size 0))
             (deadlines (make-vector new-size #f)))
        (vector-move-left! (watchers-objects w) 0 size objects 0)
        (bytevector-copy! (watchers-ids w) 0 ids 0 (* 4 size))
        (bytevector-copy! (watchers-writing w) 0 writing 0 size)
        (bytevector-copy! (watchers-once w) 0 once 0 size)
        (vector-move-left! (watchers-deadlines w) 0 size deadlines 0)
        (set-watchers-objects! w objects)
        (set-watchers-ids! w ids)
        (set-watchers-writing! w writing)
        (set-watchers-once! w once)
        (set-watchers-deadlines! w deadlines))))
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
                  (make-bytevector 64 0) (make-bytevector 64 0)
                  (make-vector 64 #f) (make-numbered #:recent 1)
                  (make-vector 64 #f) 0 now))

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
         (watched? (or (handlers-of w fd) (> (once-of w fd) 0))))
    (forget-once! w fd)
    (set-entry! w fd (handlers-for w on-read on-write on-stop
                                   (not (eq? object no-object)))
                object)
    ;; Watched again: epoll has it, maybe for EPOLLOUT too, which the new
    ;; watcher did not ask for.
    (let ((result (if watched?
                      (let ((result (epoll-modify! (watchers-epfd w) fd EPOLLIN)))
                        ;; a one-shot wait's file, closed since
                        (if (= result (- ENOENT))
                            (epoll-add! (watchers-epfd w) fd EPOLLIN)
                            result))
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
  "Stop watching FD, and remove it from epoll's set, whether a watcher or
`loop-await-fd!' put it there; return nothing.  Call it before FD is
closed: epoll keeps what it watches by open file, not by number, and a
descriptor another process shares, or a number reused at once, would
otherwise be reported under the number of another socket."
  (let ((w (current-watchers)))
    (when (and w (or (handlers-of w fd) (> (once-of w fd) 0)))
      (set-entry! w fd 0 #f)
      (forget-once! w fd)
      (disarm-wait! w fd)
      (epoll-remove! (watchers-epfd w) fd))
    (values)))

;; One-shot waits: a handler that waits for a descriptor (plucky server
;; suspend) leaves it in epoll's set between its waits, disarmed by
;; EPOLLONESHOT once reported, and each wait re-arms it with one
;; EPOLL_CTL_MOD where an ADD and a DEL per wait were two system calls
;; (bench/instructions-proxy, bench/pg-roundtrip).  Disarmed, it reports
;; nothing: no stale event reaches the loop while nobody waits.  Its
;; owner removes it before closing it (`loop-unwatch!', exported as
;; `release-descriptor!'); one that forgets costs nothing worse than a
;; MOD that fails with ENOENT once the file is closed, then an ADD.

(define (once-of w fd)
  (let ((once (watchers-once w)))
    (if (< fd (bytevector-length once)) (bytevector-u8-ref once fd) 0)))

(define (forget-once! w fd)
  (when (< fd (bytevector-length (watchers-once w)))
    (bytevector-u8-set! (watchers-once w) fd 0)))

(define ENOENT 2)
(define EEXIST 17)

;; A descriptor's one-shot waits share one <fd-wait>, made at its first
;; wait: what to call, and the time-out.  A client waits for its socket
;; with a read time-out of a minute and is answered in a millisecond: a
;; heap entry per wait would be pushed, then left there a minute,
;; cancelled (bench/instructions-proxy).  So a descriptor's <fd-wait> is
;; queued in the heap at most once: a wait sets its DUE; when the heap
;; entry comes up before DUE (a later wait moved DUE on) it is queued
;; again for DUE, and only when DUE has passed does the wait time out.
(define-record-type <fd-wait>
  (make-fd-wait fd due queued on-ready object timeout-object timer)
  fd-wait?
  (fd fd-wait-fd)
  (due fd-wait-due set-fd-wait-due!)          ; loop ms, or #f: no time-out
  (queued fd-wait-queued set-fd-wait-queued!) ; due of its heap entry, or #f
  (on-ready fd-wait-on-ready set-fd-wait-on-ready!)
  (object fd-wait-object set-fd-wait-object!)
  (timeout-object fd-wait-timeout-object set-fd-wait-timeout-object!)
  (timer fd-wait-timer set-fd-wait-timer!))   ; its <timer> for the heap

(define (clock-ms)
  (quotient (get-internal-real-time) 1000000))

(define (fd-wait-of w fd due)
  ;; -> FD's <fd-wait>; a new one when its heap entry is due after DUE
  ;; (an entry cannot be moved up)
  (let ((old (and (< fd (vector-length (watchers-deadlines w)))
                  (vector-ref (watchers-deadlines w) fd))))
    (if (and old (not (and due (fd-wait-queued old) (> (fd-wait-queued old) due))))
        old
        (let ((wait (make-fd-wait fd #f #f #f #f #f #f)))
          (set-fd-wait-timer! wait (make-timer (lambda () (fd-wait-due! w wait))))
          (when (>= fd (vector-length (watchers-deadlines w)))
            (set-entry! w fd 0 #f))     ; grows the tables
          (vector-set! (watchers-deadlines w) fd wait)
          wait))))

(define (one-shot-handlers w)
  ;; -> the number of the <handlers> of one-shot waits, kept once more
  (handlers-for w fd-wait-ready! fd-wait-ready! ignore #t))

(define (fd-wait-ready! wait)
  ;; Not called: `watchers-ready!' takes one-shot waits first.
  #f)

(define (disarm-wait! w fd)
  (let ((wait (and (< fd (vector-length (watchers-deadlines w)))
                   (vector-ref (watchers-deadlines w) fd))))
    (when wait
      (set-fd-wait-due! wait #f)
      (set-fd-wait-on-ready! wait #f)
      (set-fd-wait-object! wait #f)
      (set-fd-wait-timeout-object! wait #f))))

(define (fd-wait-due! w wait)
  ;; WAIT's heap entry is due.
  (set-fd-wait-queued! wait #f)
  (let ((due (fd-wait-due wait))
        (fd (fd-wait-fd wait)))
    (when (and due (eq? wait (vector-ref (watchers-deadlines w) fd)))
      (if (< (clock-ms) due)
          (begin
            (set-fd-wait-queued! wait due)
            (heap-insert! w due (fd-wait-timer wait)))
          (let ((on-ready (fd-wait-on-ready wait))
                (object (fd-wait-timeout-object wait)))
            (loop-unwatch! fd)          ; still armed: out of epoll's set
            (on-ready object))))))

(define* (loop-await-fd! fd write? on-ready object
                         #:optional (timeout-ms #f) (timeout-object #f))
  "Call (ON-READY OBJECT) once, on the loop's thread, when FD is readable
(writable when WRITE?), in error or hung up, in place of what watched
FD before (as `loop-watch!' replaces); or, TIMEOUT-MS milliseconds
passed first, forget FD (as `loop-unwatch!') and call (ON-READY
TIMEOUT-OBJECT).  Return nothing.  FD stays in epoll's set, disarmed,
until `loop-unwatch!'.  Raise an error when epoll refuses FD."
  (let* ((w (the-watchers 'loop-await-fd!))
         (epfd (watchers-epfd w))
         (events (logior (if write? EPOLLOUT EPOLLIN) EPOLLONESHOT))
         (registered? (> (once-of w fd) 0))
         (due (and timeout-ms (+ (clock-ms) timeout-ms 1)))
         (wait (fd-wait-of w fd due)))
    (set-fd-wait-on-ready! wait on-ready)
    (set-fd-wait-object! wait object)
    (set-fd-wait-timeout-object! wait timeout-object)
    ;; The shared procedures, and the descriptor's own <fd-wait>: a wait
    ;; allocates nothing here.
    (set-entry! w fd (one-shot-handlers w) wait)
    (when write? (bytevector-u8-set! (watchers-writing w) fd 1))
    (bytevector-u8-set! (watchers-once w) fd 2)
    ;; Registered: re-arm, or, when its file was closed since (the
    ;; kernel then dropped it), add the file that has the number now.
    (let* ((first (if registered?
                      (epoll-modify! epfd fd events)
                      (epoll-add! epfd fd events)))
           (result (cond
                    ((zero? first) 0)
                    ((= first (- ENOENT)) (epoll-add! epfd fd events))
                    ((= first (- EEXIST)) (epoll-modify! epfd fd events))
                    (else first))))
      (unless (zero? result)
        (set-entry! w fd 0 #f)
        (forget-once! w fd)
        (disarm-wait! w fd)
        (error (format #f "loop-await-fd!: descriptor ~a: ~a" fd
                       (errno->string result)))))
    (when due
      (set-fd-wait-due! wait due)
      (unless (fd-wait-queued wait)
        (set-fd-wait-queued! wait due)
        (heap-insert! w due (fd-wait-timer wait))))
    (values)))

(define (loop-registered-count)
  "Return the number of descriptors the loop of this process has in its
epoll set for watchers and one-shot waits (not its HTTP connections)."
  (let* ((w (the-watchers 'loop-registered-count))
         (once (watchers-once w)))
    (let lp ((fd 0) (n 0))
      (if (= fd (bytevector-length once))
          n
          (lp (+ fd 1)
              (if (or (> (bytevector-u8-ref once fd) 0) (> (id-of w fd) 0))
                  (+ n 1)
                  n))))))

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
         ;; + 1: the clock is in whole milliseconds (see `set-deadline!').
         ;; The clock now, not the round's start, which may be long past
         ;; (a round that resumed many handlers: bench/sse).
         (due (+ (quotient (get-internal-real-time) 1000000) ms 1))
         (timer (make-timer thunk)))
    (heap-insert! w due timer)
    timer))

(define (loop-cancel-timer! timer)
  "Make TIMER never fire; return nothing."
  ;; Left in the heap until it is due: removing it would need its index.
  (set-timer-thunk! timer #f)
  (values))

;; The timers are a binary heap by due time, in a vector that doubles
;; as it fills: a suspended request sleeping or waiting with a time-out
;; has one each, ten thousand at once (bench/upstream), where a sorted
;; list would cost each insertion a walk.  Slot I holds (due . <timer>);
;; its children are 2I+1 and 2I+2.

(define (heap-insert! w due timer)
  (let ((heap (let ((heap (watchers-timers w))
                    (count (watchers-timer-count w)))
                (if (< count (vector-length heap))
                    heap
                    (let ((bigger (make-vector (* 2 (vector-length heap)) #f)))
                      (vector-move-left! heap 0 count bigger 0)
                      (set-watchers-timers! w bigger)
                      bigger))))
        (entry (cons due timer)))
    (let up ((i (watchers-timer-count w)))
      (let ((parent (quotient (- i 1) 2)))
        (if (and (> i 0) (< due (car (vector-ref heap parent))))
            (begin
              (vector-set! heap i (vector-ref heap parent))
              (up parent))
            (vector-set! heap i entry))))
    (set-watchers-timer-count! w (+ 1 (watchers-timer-count w)))))

(define (heap-pop! w)
  ;; Remove the earliest entry of W's heap, which is not empty.
  (let* ((heap (watchers-timers w))
         (count (- (watchers-timer-count w) 1))
         (last (vector-ref heap count)))
    (vector-set! heap count #f)
    (set-watchers-timer-count! w count)
    (when (> count 0)
      (let down ((i 0))
        (let* ((left (+ 1 (* 2 i)))
               (right (+ 1 left))
               (child (cond
                       ((>= left count) #f)
                       ((and (< right count)
                             (< (car (vector-ref heap right))
                                (car (vector-ref heap left))))
                        right)
                       (else left))))
          (if (and child (< (car (vector-ref heap child)) (car last)))
              (begin
                (vector-set! heap i (vector-ref heap child))
                (down child))
              (vector-set! heap i last)))))))

(define-inlinable (watchers-timers? w)
  "Return true when W has a timer, due or cancelled, in its heap."
  (> (watchers-timer-count w) 0))

(define (watchers-next-due w)
  "Return the loop's clock when the earliest timer of W is due, or +inf.0."
  (if (zero? (watchers-timer-count w))
      +inf.0
      (car (vector-ref (watchers-timers w) 0))))

(define (run-due-timers! w now)
  "Run the timers of W due at NOW; return nothing."
  (let lp ()
    (when (and (> (watchers-timer-count w) 0)
               (<= (car (vector-ref (watchers-timers w) 0)) now))
      (let ((thunk (timer-thunk (cdr (vector-ref (watchers-timers w) 0)))))
        (heap-pop! w)
        (when thunk (thunk)))
      (lp)))
  (values))

(define (watchers-ready! w fd flags)
  "Call the procedures of the watcher of FD that FLAGS (epoll's) call
for; return #f when nobody watches FD."
  (let ((handlers (handlers-of w fd)))
    (and handlers
         (if (= 2 (once-of w fd))
             ;; A one-shot wait: forgotten before ON-READY, which may
             ;; wait again; epoll disarmed it.
             (let* ((wait (vector-ref (watchers-objects w) fd))
                    (on-ready (fd-wait-on-ready wait))
                    (object (fd-wait-object wait)))
               (bytevector-u8-set! (watchers-once w) fd 1)
               (set-entry! w fd 0 #f)
               (disarm-wait! w fd)
               (on-ready object)
               #t)
         (let ((object (vector-ref (watchers-objects w) fd)))
           (when (and (= 1 (bytevector-u8-ref (watchers-writing w) fd))
                      (logtest flags EPOLLOUT))
             (call-handler handlers (handlers-on-write handlers) object))
           (when (and (logtest flags (logior EPOLLIN EPOLLERR EPOLLHUP))
                      ;; ON-WRITE may have unwatched it
                      (eq? handlers (handlers-of w fd))
                      (eq? object (vector-ref (watchers-objects w) fd)))
             (call-handler handlers (handlers-on-read handlers) object))
           #t)))))

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
        (forget-once! w fd)
        (lp (+ fd 1))))
    (set-watchers-timers! w (make-vector 64 #f))
    (set-watchers-timer-count! w 0)
    (set-watchers-deadlines! w (make-vector (vector-length objects) #f))
    (for-each (lambda (entry)
                (call-handler (car entry) (handlers-on-stop (car entry)) (cdr entry)))
              all))
  (values))

;;; (plucky server watch) ends here
