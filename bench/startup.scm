;;; bench/startup.scm --- time from exec to the first 200 response

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; What bench/startup runs (see there).  Usage:
;;;
;;;   guile bench/startup.scm RUNS COMMAND ARG…
;;;
;;; COMMAND ARG… is a server command line in which the word PORT stands
;;; for a free port of 127.0.0.1 (a fresh one each run), say
;;;
;;;   guile bench/startup.scm 20 bin/plucky serve apps/hello.scm --port PORT
;;;
;;; Each run forks, execs COMMAND, and polls: every 100 us it tries to
;;; connect to 127.0.0.1:PORT; once connected it sends a GET / and
;;; reads the status line.  The time is from the exec to the moment a
;;; "200" status line has arrived: the child reads the clock just before
;;; it calls execve and passes the reading up a pipe, so that forking
;;; this Guile process and preparing the child (some 1-2 ms here, more
;;; than a shell or posix_spawn would take) are not counted.  Then the
;;; server gets SIGTERM (SIGKILL after 5 s) and is reaped.  Interleaved
;;; with those runs, as many runs of bare `guile -c 1' (exec to its exit,
;;; seen by a blocking waitpid) measure what Guile itself costs, timed
;;; the same way in the same conditions.  One run of each comes first and
;;; is not counted: it fills the page cache and, for the server, lets
;;; Guile compile the app file into its cache.
;;;
;;; The polling is done by a process of its own, forked before the
;;; server and run under SCHED_IDLE (sched(7)), while this process sleeps
;;; until it reports: an idle process gets a CPU when no other process
;;; wants one, and preempts none, so the poller rarely takes a CPU from
;;; the server.  Polled from this process at the normal priority, as
;;; before 2026-11-22, a poll every 100 us on this machine of two CPUs
;;; took the server's CPU whenever the scheduler put the two on the same
;;; one: the two-worker median then moved by 2.6-6.0 ms with whether the
;;; machine slept or spun just before each start ("The poller's priority"
;;; in `git show 04b0095:bench/RESULTS.md'), and `guile -c 1', timed with a blocking waitpid,
;;; never had a poller beside it.  For the same progress of the server,
;;; an idle poller sees the 200 no sooner than one at the normal priority
;;; would, and later when both CPUs are busy.
;;;
;;; A third run in each round has the server trace its start-up
;;; (PLUCKY_TRACE_STARTUP: see `trace-start-up' in (plucky server)): the
;;; time from exec at which it reached each step, the earliest process
;;; for the steps of workers.  These runs are not in the figures above;
;;; tracing costs a line to standard error per step.
;;;
;;; Paired comparison (bench/startup-compare uses it):
;;;
;;;   guile bench/startup.scm --compare RUNS COMMAND-A ARG… -- COMMAND-B ARG…
;;;
;;; times RUNS pairs, A then B or B then A in turn, each pair beside one
;;; `guile -c 1', and prints the summaries of A, B and guile -c 1 and,
;;; as "startup-paired: MEDIAN MEAN A-SLOWER RUNS", the median and mean of
;;; the differences A - B within pairs and how many pairs A lost: on a
;;; shared machine whose load drifts by milliseconds over a run, the two
;;; of a pair see the same load, so a difference of a fraction of a
;;; millisecond shows there long before it shows between two medians.
;;;
;;; Prints one line per run and then, for both, the median, p90, min and
;;; max in milliseconds, as lines "startup: LABEL median P90 MIN MAX"
;;; that bench/startup reads, and the median of each traced step, as
;;; lines "startup-step: STEP median".  Every wait is bounded: a server that does
;;; not answer 200 within 10 s counts as a failed run (exit status 1).
;;;
;;; Code:

(use-modules (ice-9 format)
             (ice-9 rdelim)
             (ice-9 match)
             (srfi srfi-1)
             (rnrs bytevectors)
             (system foreign))

(define (now-ms)
  ;; the wall clock, which the child's reading before exec shares
  (let ((t (gettimeofday)))
    (+ (* 1000. (car t)) (/ (cdr t) 1000.))))

(define (free-port)
  (let ((sock (socket AF_INET SOCK_STREAM 0)))
    (bind sock AF_INET INADDR_LOOPBACK 0)
    (let ((port (sockaddr:port (getsockname sock))))
      (close-port sock)
      port)))

(define* (spawn program args log #:key trace?)
  ;; fork + exec PROGRAM with stdout and stderr to the file LOG, tracing
  ;; its start-up if TRACE?
  ;; -> (values pid exec-ms): EXEC-MS is the clock just before execve
  (let* ((clock (pipe))
         (pid (begin
                ;; a child that fails to exec must not write our output again
                (force-output (current-output-port))
                (primitive-fork))))
    (if (zero? pid)
        (catch #t
          (lambda ()
            (let ((null (open-input-file "/dev/null"))
                  (out (open-file log (if trace? "w" "a"))))
              (when trace?
                (setenv "PLUCKY_TRACE_STARTUP" "1"))
              (close-port (car clock))
              (dup2 (port->fdes null) 0)
              (dup2 (port->fdes out) 1)
              (dup2 (port->fdes out) 2)
              (fcntl (cdr clock) F_SETFD FD_CLOEXEC)
              (write (now-ms) (cdr clock))
              (newline (cdr clock))
              (force-output (cdr clock))
              (apply execlp program program args)))
          (lambda _ (primitive-_exit 127)))
        (begin
          (close-port (cdr clock))
          (let ((exec-ms (read (car clock))))
            (close-port (car clock))
            (values pid (and (real? exec-ms) exec-ms)))))))

(define (wait-exit pid timeout-ms)
  ;; -> status, or #f if PID still runs after TIMEOUT-MS
  (let ((deadline (+ (now-ms) timeout-ms)))
    (let lp ()
      (match (waitpid pid WNOHANG)
        ((0 . _) (and (< (now-ms) deadline) (begin (usleep 1000) (lp))))
        ((_ . status) status)))))

(define (stop pid)
  ;; SIGTERM, then SIGKILL after 5 s; reap PID (reaped already: nothing)
  (false-if-exception (kill pid SIGTERM))
  (catch 'system-error
    (lambda ()
      (unless (wait-exit pid 5000)
        (false-if-exception (kill pid SIGKILL))
        (waitpid pid)))
    (lambda args
      (unless (= ECHILD (system-error-errno args))
        (apply throw args)))))

(define request
  (string->utf8 "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"))

(define (try-get port)
  ;; -> #t when 127.0.0.1:PORT answers GET / with a 200, #f when nothing
  ;; listens yet or the answer is not a 200
  (let ((sock (socket AF_INET SOCK_STREAM 0)))
    (catch 'system-error
      (lambda ()
        (connect sock AF_INET INADDR_LOOPBACK port)
        (send sock request)
        (let ((buf (make-bytevector 64)))
          ;; at most 2 s for the status line once connected
          (let lp ((have 0) (deadline (+ (now-ms) 2000)))
            (if (or (>= have 12) (> (now-ms) deadline))
                (begin
                  (close-port sock)
                  (and (>= have 12)
                       (string=? (utf8->string
                                  (let ((bv (make-bytevector 12)))
                                    (bytevector-copy! buf 0 bv 0 12)
                                    bv))
                                 "HTTP/1.1 200")))
                (match (select (list sock) '() '() 0 100000)
                  (((_) () ())
                   (let ((n (recv! sock buf)))
                     (if (zero? n)
                         (lp 64 deadline) ; closed early: judged below
                         (lp (+ have n) deadline))))
                  (_ (lp have deadline)))))))
      (lambda args
        (close-port sock)
        #f))))

(define SCHED_IDLE 5)                   ; <sched.h>

(define set-idle-priority!
  ;; -> #t once this process runs under SCHED_IDLE, #f if it could not
  (let ((setscheduler (pointer->procedure int (dynamic-func "sched_setscheduler" (dynamic-link))
                                          (list int int '*))))
    (lambda ()
      (let ((param (make-bytevector 8 0))) ; struct sched_param, priority 0
        (zero? (setscheduler 0 SCHED_IDLE (bytevector->pointer param)))))))

(define (spawn-poller)
  ;; Fork the poller: it waits for a port number on a pipe, then polls
  ;; it under SCHED_IDLE until a 200 (or 10 s), writes the clock at the
  ;; 200 (or #f) on another pipe, and exits.
  ;; -> (values pid go-port result-port)
  (let* ((go (pipe))
         (result (pipe))
         (pid (begin
                ;; the child ends with _exit, writing none of our output
                (force-output (current-output-port))
                (primitive-fork))))
    (if (zero? pid)
        (catch #t
          (lambda ()
            (close-port (cdr go))
            (close-port (car result))
            (unless (set-idle-priority!)
              (format (current-error-port) "startup: the poller could not take SCHED_IDLE~%"))
            (let ((port (read (car go)))
                  (deadline (+ (now-ms) 10000)))
              (write (let lp ()
                       (cond
                        ((try-get port) (now-ms))
                        ((> (now-ms) deadline) #f)
                        (else (usleep 100) (lp))))
                     (cdr result))
              (force-output (cdr result))
              (primitive-_exit 0)))
          (lambda _ (primitive-_exit 1)))
        (begin
          (close-port (car go))
          (close-port (cdr result))
          ;; not inherited by the server, forked next
          (fcntl (cdr go) F_SETFD FD_CLOEXEC)
          (fcntl (car result) F_SETFD FD_CLOEXEC)
          (values pid (cdr go) (car result))))))

(define* (time-server command log #:key trace?)
  ;; -> milliseconds from exec to a 200, or #f; with TRACE?, a list
  ;; ((STEP . MS-FROM-EXEC) … ("answer" . MS)) instead
  (let ((port (free-port)))
    (call-with-values spawn-poller
      (lambda (poller go result)
        (call-with-values
            (lambda ()
              (spawn (car command)
                     (map (lambda (a) (if (string=? a "PORT") (number->string port) a))
                          (cdr command))
                     log #:trace? trace?))
          (lambda (pid start)
            (write port go)
            (newline go)
            (force-output go)
            (close-port go)
            ;; Wait for the poller's report (12 s at most: the poller
            ;; gives up after 10), looking every 100 ms whether the
            ;; server died meanwhile; a server reaped here is not stopped.
            (let* ((deadline (+ (now-ms) 12000))
                   (reaped? #f)
                   (answered
                    (let lp ()
                      (match (select (list result) '() '() 0 100000)
                        (((_) () ()) (let ((at (read result))) (and (real? at) at)))
                        (_ (cond
                            ((match (waitpid pid WNOHANG) ((0 . _) #f) (_ #t))
                             (set! reaped? #t)
                             #f)
                            ((> (now-ms) deadline) #f)
                            (else (lp))))))))
              (close-port result)
              (stop poller)
              (unless reaped? (stop pid))
              (and start answered
                   (let ((elapsed (- answered start)))
                     (if trace?
                         (append (traced-steps log start) (list (cons "answer" elapsed)))
                         elapsed))))))))))

(define (traced-steps log start)
  ;; -> ((STEP . MS-FROM-START) …) from the "plucky-startup: STEP PID MS"
  ;; lines of LOG, in their order; a step that several processes reached
  ;; (the workers') at the first of them
  (call-with-input-file log
    (lambda (port)
      (let lp ((steps '()))
        (let ((line (read-line port)))
          (if (eof-object? line)
              (reverse steps)
              (match (string-split line #\space)
                (("plucky-startup:" step pid ms)
                 (let ((at (- (string->number ms) start)))
                   (lp (if (assoc step steps) steps (acons step at steps)))))
                (_ (lp steps)))))))))

(define (time-guile log)
  ;; -> milliseconds from exec to the exit of `guile -c 1', or #f
  (call-with-values (lambda () (spawn "guile" '("-c" "1") log))
    (lambda (pid start)
      (match (waitpid pid)              ; bounded: bench/startup's timeout
        ((_ . status)
         (let ((end (now-ms)))
           (and start (zero? (or (status:exit-val status) 1))
                (- end start))))))))

(define (percentile sorted p)
  ;; nearest-rank percentile of a sorted list
  (list-ref sorted (max 0 (- (inexact->exact (ceiling (* p (length sorted)))) 1))))

(define (summary label times)
  (let ((sorted (sort times <)))
    (format #t "startup: ~a ~,1f ~,1f ~,1f ~,1f~%" label
            (percentile sorted 0.5) (percentile sorted 0.9)
            (first sorted) (last sorted))))

(define (step-summary traces)
  ;; TRACES: a list per run of ((STEP . MS) …); print each step's median,
  ;; earliest first (two processes write their steps to one log, so the
  ;; order of its lines may differ from run to run)
  (unless (null? traces)
    (for-each (match-lambda
                ((step . median) (format #t "startup-step: ~a ~,1f~%" step median)))
              (sort (map (lambda (step)
                           (let ((times (filter-map (lambda (trace) (assoc-ref trace step))
                                                    traces)))
                             (cons step (percentile (sort times <) 0.5))))
                         (map car (last traces)))
                    (lambda (a b) (< (cdr a) (cdr b)))))))

(define (split-commands words)
  ;; (A … "--" B …) -> (values (A …) (B …))
  (let ((tail (member "--" words)))
    (values (list-head words (- (length words) (length tail))) (cdr tail))))

(define (compare runs a b)
  (let ((log (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-startup-"
                            (number->string (getpid)) ".log")))
    (format #t "warm-up: A ~a ms, B ~a ms~%"
            (or (time-server a log) "FAILED") (or (time-server b log) "FAILED"))
    (let lp ((i 0) (pairs '()) (guile '()) (failed 0))
      (if (< i runs)
          ;; A first in even pairs, B first in odd ones
          (let* ((first (time-server (if (even? i) a b) log))
                 (second (time-server (if (even? i) b a) log))
                 (ta (if (even? i) first second))
                 (tb (if (even? i) second first))
                 (g (time-guile log)))
            (format #t "pair ~3d: A ~a ms, B ~a ms, guile -c 1 ~a ms~%" (+ i 1)
                    (if ta (format #f "~,1f" ta) "FAILED")
                    (if tb (format #f "~,1f" tb) "FAILED")
                    (if g (format #f "~,1f" g) "FAILED"))
            (lp (+ i 1) (if (and ta tb) (cons (cons ta tb) pairs) pairs)
                (if g (cons g guile) guile)
                (+ failed (if (and ta tb g) 0 1))))
          (begin
            (unless (null? pairs)
              (summary "A" (map car pairs))
              (summary "B" (map cdr pairs))
              (let ((d (sort (map (lambda (p) (- (car p) (cdr p))) pairs) <)))
                (format #t "startup-paired: ~,2f ~,2f ~a ~a~%"
                        (percentile d 0.5) (/ (apply + d) (length d))
                        (count positive? d) (length d))))
            (unless (null? guile) (summary "guile-c-1" guile))
            (when (> failed 0)
              (format #t "startup: ~a failed pairs; the servers' output is in ~a~%"
                      failed log))
            (when (zero? failed)
              (false-if-exception (delete-file log)))
            (exit (if (zero? failed) 0 1)))))))

(define (main args)
  (match args
    ((_ "--compare" runs words ...)
     (call-with-values (lambda () (split-commands words))
       (lambda (a b) (compare (string->number runs) a b))))
    ((_ runs command ...)
     (let* ((runs (string->number runs))
            (log (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-startup-"
                                (number->string (getpid)) ".log"))
            (trace-log (string-append log ".trace")))
       (format #t "warm-up: server ~a ms, guile -c 1 ~a ms~%"
               (let ((t (time-server command log))) (if t (format #f "~,1f" t) "FAILED"))
               (let ((t (time-guile log))) (if t (format #f "~,1f" t) "FAILED")))
       (let lp ((i 0) (server '()) (guile '()) (traces '()) (failed 0))
         (if (< i runs)
             (let* ((s (time-server command log))
                    (g (time-guile log))
                    (t (time-server command trace-log #:trace? #t)))
               (format #t "run ~2d: server ~a ms, guile -c 1 ~a ms~%" (+ i 1)
                       (if s (format #f "~,1f" s) "FAILED")
                       (if g (format #f "~,1f" g) "FAILED"))
               (lp (+ i 1) (if s (cons s server) server) (if g (cons g guile) guile)
                   (if t (cons t traces) traces)
                   (+ failed (if (and s g t) 0 1))))
             (begin
               (unless (null? server) (summary "server" server))
               (unless (null? guile) (summary "guile-c-1" guile))
               (step-summary traces)
               (when (> failed 0)
                 (format #t "startup: ~a failed runs; the server's output is in ~a~%"
                         failed log))
               (when (zero? failed)
                 (false-if-exception (delete-file log))
                 (false-if-exception (delete-file trace-log)))
               (exit (if (zero? failed) 0 1)))))))
    (_
     (format (current-error-port) "usage: guile bench/startup.scm RUNS COMMAND ARG…
       guile bench/startup.scm --compare RUNS COMMAND-A ARG… -- COMMAND-B ARG…~%")
     (exit 2))))

(main (command-line))

;;; bench/startup.scm ends here
