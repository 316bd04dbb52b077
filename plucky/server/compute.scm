;;; (plucky server compute) --- threads for the calls a handler cannot suspend in

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A handler that must make a call that blocks in C (SQLite, libargon2)
;;; or computes for long wraps it in `blocking' (plucky server suspend):
;;; the handler suspends and the thunk runs here, on one of a bounded set
;;; of threads, as Starlette's `run_in_threadpool'.  When it returns, its
;;; values (or what it raised) go on the done list and the loop is woken
;;; through its pipe; on the loop's thread, `take-compute-done!' hands
;;; each result to the procedure that resumes the handler.
;;;
;;; Threads start as calls wait and none is idle, up to MAX-THREADS; past
;;; that, calls queue, oldest first.  A thread idle for a minute ends.
;;;
;;; Code:

(define-module (plucky server compute)
  #:use-module (srfi srfi-9)
  #:use-module ((srfi srfi-9 gnu) #:select (set-record-type-printer!))
  ;; Loaded when the first call is made (bench/startup).
  #:autoload (ice-9 threads) (make-mutex make-condition-variable lock-mutex
                              unlock-mutex call-with-new-thread
                              signal-condition-variable wait-condition-variable
                              broadcast-condition-variable)
  #:export (make-compute
            compute-submit!
            take-compute-done!
            compute-busy
            stop-compute!))

(define-record-type <compute>
  (%make-compute mutex condition queue done threads idle busy max-threads
                 stopping? wake)
  compute?
  (mutex compute-mutex)
  (condition compute-condition)          ; signalled when a call is queued
  ;; ((thunk . on-done) …), oldest first, waiting for a thread
  (queue compute-queue set-compute-queue!)
  ;; ((on-done . result) …), newest first, finished, for the loop
  (done compute-done set-compute-done!)
  (threads compute-threads set-compute-threads!) ; started
  (idle compute-idle set-compute-idle!)          ; waiting for a call
  (busy compute-busy set-compute-busy!)          ; calls queued or running
  (max-threads compute-max-threads)
  (stopping? compute-stopping? set-compute-stopping!)
  (wake compute-wake))                   ; thunk: make the loop look at done

(set-record-type-printer! <compute>
  (lambda (compute port)
    (format port "#<compute ~a threads>" (compute-threads compute))))

(define* (make-compute #:key (max-threads 32) wake)
  "Return compute threads (none started yet) that run at most
MAX-THREADS calls at once and call WAKE, a thunk, from the thread when a
call is done."
  (%make-compute (make-mutex) (make-condition-variable) '() '() 0 0 0
                 max-threads #f wake))

(define (compute-submit! compute thunk on-done)
  "Queue THUNK to run on a thread of COMPUTE; once it returns, ON-DONE is
handed a thunk that returns its values or raises what it raised, by
`take-compute-done!' on the loop's thread.  Return nothing."
  (lock-mutex (compute-mutex compute))
  (set-compute-queue! compute (append (compute-queue compute)
                                      (list (cons thunk on-done))))
  (set-compute-busy! compute (+ 1 (compute-busy compute)))
  ;; Threads signalled but not yet awake count as idle: compare the
  ;; calls waiting with the threads idle (see (plucky server pool)).
  (when (and (> (length (compute-queue compute)) (compute-idle compute))
             (< (compute-threads compute) (compute-max-threads compute)))
    (set-compute-threads! compute (+ 1 (compute-threads compute)))
    (call-with-new-thread (lambda () (compute-thread compute))))
  (signal-condition-variable (compute-condition compute))
  (unlock-mutex (compute-mutex compute))
  (values))

(define thread-idle-seconds 60)

(define (call->result thunk)
  ;; -> a thunk returning THUNK's values, or raising what it raised
  (call-with-prompt 'compute-failed
    (lambda ()
      (with-exception-handler
          (lambda (exception) (abort-to-prompt 'compute-failed exception))
        (lambda ()
          (call-with-values thunk
            (lambda results (lambda () (apply values results)))))))
    (lambda (k exception)
      (lambda () (raise-exception exception)))))

(define (compute-thread compute)
  (let next ()
    (lock-mutex (compute-mutex compute))
    (let wait ((deadline (+ (current-time) thread-idle-seconds)))
      (when (and (null? (compute-queue compute)) (not (compute-stopping? compute))
                 (< (current-time) deadline))
        (set-compute-idle! compute (+ 1 (compute-idle compute)))
        (wait-condition-variable (compute-condition compute) (compute-mutex compute)
                                 deadline)
        (set-compute-idle! compute (- (compute-idle compute) 1))
        (wait deadline)))
    (if (or (compute-stopping? compute) (null? (compute-queue compute)))
        (begin
          (set-compute-threads! compute (- (compute-threads compute) 1))
          (broadcast-condition-variable (compute-condition compute))
          (unlock-mutex (compute-mutex compute)))
        (let ((call (car (compute-queue compute))))
          (set-compute-queue! compute (cdr (compute-queue compute)))
          (unlock-mutex (compute-mutex compute))
          (let ((result (call->result (car call))))
            (lock-mutex (compute-mutex compute))
            (set-compute-done! compute (cons (cons (cdr call) result)
                                             (compute-done compute)))
            (unlock-mutex (compute-mutex compute))
            ((compute-wake compute)))
          (next)))))

(define (take-compute-done! compute)
  "On the loop's thread: hand each call of COMPUTE finished since the
last time to its ON-DONE, in the order they finished; return nothing."
  (unless (null? (compute-done compute))
    (lock-mutex (compute-mutex compute))
    (let ((done (reverse (compute-done compute))))
      (set-compute-done! compute '())
      (set-compute-busy! compute (- (compute-busy compute) (length done)))
      (unlock-mutex (compute-mutex compute))
      (for-each (lambda (entry) ((car entry) (cdr entry))) done)))
  (values))

(define (stop-compute! compute)
  "Make COMPUTE's threads end once their calls do, dropping the calls
still queued, and wait up to two seconds for them; return nothing."
  (lock-mutex (compute-mutex compute))
  (set-compute-stopping! compute #t)
  (set-compute-queue! compute '())
  (broadcast-condition-variable (compute-condition compute))
  (let ((deadline (+ (current-time) 2)))
    (let wait ()
      (when (and (> (compute-threads compute) 0) (< (current-time) deadline))
        (wait-condition-variable (compute-condition compute) (compute-mutex compute)
                                 deadline)
        (wait))))
  (unlock-mutex (compute-mutex compute))
  (values))

;;; (plucky server compute) ends here
