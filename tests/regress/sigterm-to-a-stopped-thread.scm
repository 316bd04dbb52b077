;;; tests/regress/sigterm-to-a-stopped-thread.scm --- a worker killed by its drain signal
;;;
;;; A rolling deploy through HAProxy (tests/cluster/faults.py, 16
;;; clients) now and then closed a few requests unanswered, its error
;;; window the drain delay: one worker of the stopped host never drained.
;;; It died at the SIGTERM its master forwarded (its exit status: signal
;;; 15), and the connections queued on its socket waited until the host's
;;; last process exited.  The worker blocks SIGTERM and reads it from a
;;; signalfd, but libgc, while it stops the world for a collection,
;;; holds every other thread (the watchdog, the pool's) in sigsuspend
;;; with a mask that leaves SIGTERM unblocked: a SIGTERM sent to the
;;; process then goes to that thread and its default action ends the
;;; process.  The master now sends its workers' signals to their main
;;; thread (`signal-main-thread!').
;;;
;;; The test makes the hazard deterministic: a child whose main thread
;;; blocks SIGTERM and waits on a signalfd, as a worker's loop does, and
;;; whose second thread does not block it, as a thread stopped by libgc.

(use-modules (srfi srfi-64)
             (ice-9 rdelim)
             (tests lib harness)
             (tests lib command)
             (plucky sys signal))

(define guile-program
  (or (search-path (parse-path (getenv "PATH")) "guile") "guile"))

(define child-script
  "(use-modules (plucky sys signal) (ice-9 threads))
   (block-signals! (list SIGTERM))
   (define fd (open-signalfd (list SIGTERM)))
   (call-with-new-thread
    (lambda ()
      (unblock-signals! (list SIGTERM))   ; as libgc's sigsuspend mask
      (let lp () (sleep 60) (lp))))
   (usleep 100000)                        ; the thread has unblocked it
   (display \"ready\\n\")
   (force-output)
   (when (= (read-signal fd) SIGTERM)
     (primitive-exit 7))
   (primitive-exit 1)")

(define (signalled-child send!)
  ;; -> how a child as above ended once SEND! (of its PID) signalled it:
  ;; (exit N) or (signal N)
  (let* ((out (pipe))
         (pid (launch guile-program
                      (list "-L" source-root "-C" (string-append source-root "/build")
                            "-c" child-script)
                      #:fds (list (cons 1 (port->fdes (cdr out)))))))
    (close-port (cdr out))
    (let ((line (read-line (car out))))
      (close-port (car out))
      (when (equal? line "ready")
        (send! pid))
      (let ((status (cdr (waitpid pid))))
        (cond ((status:exit-val status) => (lambda (n) (list 'exit n)))
              (else (list 'signal (status:term-sig status))))))))

(test-begin "regress/sigterm-to-a-stopped-thread")

(test-equal "SIGTERM to the process: the thread that does not block it dies of it"
  (list 'signal SIGTERM)
  (signalled-child (lambda (pid) (kill pid SIGTERM))))

(test-equal "SIGTERM to its main thread: read from the signalfd"
  '(exit 7)
  (signalled-child (lambda (pid) (signal-main-thread! pid SIGTERM))))

(test-equal "no such process: -ESRCH"
  (- ESRCH)
  (let ((pid (primitive-fork)))
    (when (zero? pid) (primitive-exit 0))
    (waitpid pid)
    (signal-main-thread! pid SIGTERM)))

(test-end "regress/sigterm-to-a-stopped-thread")
