;;; (plucky sys signal) --- blocked signals read from a signalfd

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; plucky's processes react to signals (SIGTERM, SIGINT, SIGHUP, SIGCHLD)
;;; without Guile's `sigaction', for two reasons found the hard way:
;;;  - Guile delivers signals through a pipe and a thread it starts once
;;;    per process.  A child forked later inherits the pipe and the
;;;    "already started" flag but not the thread: its signals are either
;;;    never delivered or read by the parent's thread, which then runs the
;;;    parent's handler (a master forwarding SIGTERM to its workers did
;;;    so forever).  A master must fork replacement workers at any time.
;;;  - A Scheme handler runs as an async on the main thread, which spends
;;;    its time inside epoll_wait, a C call asyncs cannot interrupt: the
;;;    handler would wait for the next epoll timeout.
;;; Instead each process blocks the signals it cares about and reads them,
;;; one struct signalfd_siginfo at a time, from a signalfd(2): a plain
;;; descriptor that a worker watches in its epoll set like any other and
;;; a master reads in a plain loop.
;;;
;;; A blocked signal is blocked for the calling thread only, and a signal
;;; sent to the process goes to any thread that does not block it, where
;;; its default action ends the process.  Guile starts a finalizer thread
;;; on demand, after some collection finds objects to finalize; started
;;; before the signals were blocked, it would take SIGTERM and die with
;;; it.  So a process that reads signals this way first stops that thread
;;; (`stop-finalizer-thread!') and runs finalizers itself, once a second
;;; from the event loop (`run-finalizers!').
;;;
;;; libgc opens the same door in every thread but the one collecting:
;;; while the world is stopped for a collection, each other thread waits
;;; in sigsuspend with libgc's mask, which leaves SIGINT, SIGQUIT, SIGABRT
;;; and SIGTERM unblocked (so that a stopped process can still be
;;; killed).  A SIGTERM sent to the process at that moment goes to such a
;;; thread (a worker's watchdog, a thread of its pool) and ends the
;;; process at once, without a drain: a rolling deploy saw a worker
;;; vanish so, and the connections queued on its socket with it.  So a
;;; master sends its workers' signals to their main thread, the one that
;;; blocks them and reads its signalfd (`signal-main-thread!'): a signal
;;; sent to a thread waits for that thread alone.
;;;
;;; Timers go the same way: a POSIX timer (timer_create) raises a
;;; real-time signal, blocked and read from the same signalfd, so that a
;;; worker's epoll loop, which offers no timer of its own, hears from it
;;; like from any signal (plucky server flushes its access log so).  A
;;; real-time signal, not SIGALRM, leaves `alarm' to whoever else uses it.
;;;
;;; Code:

(define-module (plucky sys signal)
  #:use-module (plucky sys foreign)
  #:use-module (rnrs bytevectors)
  #:use-module (plucky sys libc)
  #:export (block-signals!
            unblock-signals!
            open-signalfd
            read-signal
            ignore-signal!
            signal-main-thread!
            stop-finalizer-thread!
            run-finalizers!
            real-time-signal
            discard-pending-signals!
            make-signal-timer
            set-signal-timer!
            delete-signal-timer!))

(define %sigemptyset (libc-procedure int "sigemptyset" (list uintptr_t)))
(define %sigaddset (libc-procedure int "sigaddset" (list uintptr_t int)))
(define %sigprocmask (libc-procedure int "sigprocmask" (list int uintptr_t uintptr_t)))
(define %signalfd (libc-procedure int "signalfd" (list int uintptr_t int)))

(define %signal (libc-procedure uintptr_t "signal" (list int uintptr_t)))

(define %tgkill (libc-procedure int "tgkill" (list int int int)))

(define (signal-main-thread! pid signal)
  "Send SIGNAL to the main thread of process PID (the thread whose id is
PID), not to any thread of the process: it stays pending for that thread
until it unblocks it or reads it from a signalfd (see the Commentary).
Return 0, or the negated errno (-ESRCH when there is no such process)."
  (call-with-values (lambda () (%tgkill pid pid signal))
    (lambda (result errno)
      (if (< result 0) (- errno) 0))))

(define (ignore-signal! signal)
  "Ignore SIGNAL (SIGPIPE, say) with libc's signal(2).  Guile's own
`sigaction' would start Guile's signal thread, whose state a forked
child inherits half of (see the Commentary)."
  (%signal signal 1))                   ; SIG_IGN is (void (*)(int)) 1

;; libguile's own functions, found in the program's global namespace (the
;; guile executable links libguile): see (plucky sys foreign).

(define %set-automatic-finalization-enabled
  (pointer->procedure int (symbol-address "scm_set_automatic_finalization_enabled")
                      (list int)))
(define %run-finalizers
  (pointer->procedure int (symbol-address "scm_run_finalizers") '()))

(define (stop-finalizer-thread!)
  "Stop Guile's finalizer thread, if it runs, and keep it from starting;
finalizers then run only when `run-finalizers!' is called."
  (%set-automatic-finalization-enabled 0))

(define (run-finalizers!)
  "Run the finalizers of objects the collector has found unreachable, on
the calling thread.  Return how many ran."
  (%run-finalizers))

(define SIG_BLOCK 0)
(define SIG_UNBLOCK 1)
(define SFD_CLOEXEC #o2000000)
(define sigset-size 128)
(define siginfo-size 128)

(define (make-sigset signals)
  (let* ((set (make-bytevector sigset-size 0))
         (address (bytevector-address set)))
    (%sigemptyset address)
    (for-each (lambda (signal) (%sigaddset address signal)) signals)
    set))

(define (sigprocmask! how signals)
  (let ((set (make-sigset signals)))
    (call-with-values (lambda () (%sigprocmask how (bytevector-address set) 0))
      (lambda (result errno)
        (when (< result 0)
          (scm-error 'system-error "sigprocmask" "~A" (list (strerror errno))
                     (list errno)))))))

(define (block-signals! signals)
  "Block SIGNALS (a list of signal numbers) for the calling thread, so
that they wait for `read-signal' instead of being delivered."
  (sigprocmask! SIG_BLOCK signals))

(define (unblock-signals! signals)
  "Unblock SIGNALS for the calling thread."
  (sigprocmask! SIG_UNBLOCK signals))

(define (open-signalfd signals)
  "Return a close-on-exec descriptor from which the blocked SIGNALS are
read with `read-signal'."
  (let ((set (make-sigset signals)))
    (call-with-values (lambda () (%signalfd -1 (bytevector-address set) SFD_CLOEXEC))
      (lambda (fd errno)
        (if (< fd 0)
            (scm-error 'system-error "signalfd" "~A" (list (strerror errno))
                       (list errno))
            fd)))))

(define info (make-bytevector siginfo-size 0))
(define info-address (bytevector-address info))

(define (read-signal fd)
  "Wait for the next signal on the signalfd FD and return its number."
  (let retry ()
    (let ((n (fd-read fd info-address 0 siginfo-size)))
      (if (= n siginfo-size)
          (bytevector-u32-native-ref info 0)
          (retry)))))

;;;
;;; Pending signals
;;;

(define %sigtimedwait
  (libc-procedure int "sigtimedwait" (list uintptr_t uintptr_t uintptr_t)))

(define (discard-pending-signals! signals)
  "Take every pending instance of the blocked SIGNALS without acting on
it, so that unblocking them afterwards does not run their default action
(which, for most, ends the process).  Return how many were discarded."
  (let ((set (make-sigset signals))
        (timeout (make-bytevector 16 0))) ; struct timespec: zero, do not wait
    (let lp ((count 0))
      (call-with-values
          (lambda ()
            (%sigtimedwait (bytevector-address set) 0 (bytevector-address timeout)))
        (lambda (result errno)
          (cond
           ((> result 0) (lp (+ count 1)))
           ((= errno EINTR) (lp count))
           (else count)))))))

;;;
;;; Timers that raise a signal
;;;

(define %current-sigrtmin
  (pointer->procedure int (symbol-address "__libc_current_sigrtmin") '()))

(define (real-time-signal n)
  "Return the number of the real-time signal SIGRTMIN + N, as the C
library numbers them (it keeps the first few for itself)."
  (+ (%current-sigrtmin) n))

(define %timer-create
  (libc-procedure int "timer_create" (list int uintptr_t uintptr_t)))
(define %timer-settime
  (libc-procedure int "timer_settime" (list uintptr_t int uintptr_t uintptr_t)))
(define %timer-delete
  (libc-procedure int "timer_delete" (list uintptr_t)))

(define CLOCK_MONOTONIC 1)
(define SIGEV_SIGNAL 0)
(define sigevent-size 64)               ; struct sigevent on Linux
(define word-size (sizeof uintptr_t))

;; A macro of the compiler only: see (plucky sys inline) for why.
(eval-when (expand)
  (define-syntax-rule (check-result name call)
    (let retry ()
      (call-with-values (lambda () call)
        (lambda (result errno)
          (cond
           ((>= result 0) result)
           ((= errno EINTR) (retry))
           (else (scm-error 'system-error name "~A" (list (strerror errno))
                            (list errno)))))))))

(define (make-signal-timer signal)
  "Return a new POSIX timer, on the monotonic clock and disarmed, that
raises SIGNAL each time it expires (see `set-signal-timer!')."
  (let ((event (make-bytevector sigevent-size 0))
        (timer (make-bytevector word-size 0)))
    ;; struct sigevent: sigev_value (one word), sigev_signo, sigev_notify
    (bytevector-s32-native-set! event word-size signal)
    (bytevector-s32-native-set! event (+ word-size 4) SIGEV_SIGNAL)
    (check-result "timer_create"
                  (%timer-create CLOCK_MONOTONIC (bytevector-address event)
                                 (bytevector-address timer)))
    timer))

(define (seconds->timespec! bv offset seconds)
  (let* ((whole (inexact->exact (floor seconds)))
         (nanoseconds (inexact->exact (round (* 1e9 (- seconds whole))))))
    (bytevector-s64-native-set! bv offset whole)
    (bytevector-s64-native-set! bv (+ offset 8) (min nanoseconds 999999999))))

(define* (set-signal-timer! timer first #:optional (interval 0))
  "Arm TIMER to expire FIRST seconds from now (a real number; 0
disarms it), then every INTERVAL seconds (0: once)."
  (let ((spec (make-bytevector 32 0)))  ; struct itimerspec
    (seconds->timespec! spec 0 interval)
    (seconds->timespec! spec 16 first)
    (check-result "timer_settime"
                  (%timer-settime (bytevector-uint-ref timer 0 (native-endianness)
                                                       word-size)
                                  0 (bytevector-address spec) 0))
    *unspecified*))

(define (delete-signal-timer! timer)
  "Disarm and free TIMER."
  (check-result "timer_delete"
                (%timer-delete (bytevector-uint-ref timer 0 (native-endianness)
                                                    word-size)))
  *unspecified*)

;;; (plucky sys signal) ends here
