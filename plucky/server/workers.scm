;;; (plucky server workers) --- the master: start, watch, reload, retire workers

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; With more than one worker, `run-server' (plucky server) becomes a
;;; master process: it never reads a request, it keeps COUNT worker
;;; processes running, each serving one event loop.  `supervise' is that
;;; master.  Its state is one <master> record, and each thing that can
;;; happen to it is a top-level procedure of that record:
;;;
;;;   start-worker!        fork a worker of a generation for a slot; the
;;;                        worker says on a pipe once it has loaded the
;;;                        app (`in-child'), and the master watches the
;;;                        pipe's read end in its epoll set
;;;   worker-ready!        a worker said so: the first worker's readiness
;;;                        starts the others; a whole generation's makes
;;;                        it serve (READY=1), or promotes a reload's
;;;   worker-exited!       SIGCHLD reaped one: start another in its slot,
;;;                        at once, or a second later if it died before
;;;                        it was ready (an app that fails to load must
;;;                        not fork in a tight loop); give up if the
;;;                        first workers cannot start
;;;   start-generation!    SIGHUP: a new generation of COUNT workers
;;;                        loads the app afresh, the old one serving on
;;;   promote!             every new worker is ready: the old ones retire
;;;   abandon-generation!  a new worker died before it was ready, or the
;;;                        generation took longer than START-TIMEOUT: the
;;;                        new ones retire, the old ones keep serving
;;;   stop!                SIGTERM, SIGINT: pass it on, then wait for the
;;;                        workers; kill those left after the grace period
;;;
;;; The master reads its signals (SIGTERM, SIGINT, SIGCHLD, SIGHUP,
;;; SIGUSR1) from a signalfd (plucky sys signal) in an epoll loop of its
;;; own (`run-master!'), with the pipes of the workers still starting and
;;; a list of timers.  A SIGHUP that comes during a reload, or before the
;;; first workers all serve, is kept and acted upon once they do.
;;;
;;; With a <change-watch> (`plucky serve --reload': (plucky server
;;; reload)) the master also watches a descriptor that says files
;;; changed: once none has changed for its quiet period, and its
;;; `settled' hook agrees, the master reloads as on SIGHUP.
;;;
;;; Retiring a worker takes two steps, a second apart.  A draining loop
;;; closes its idle keep-alive connections at once, and a client that
;;; sent its next request at that moment gets the connection closed in
;;; its face (wrk counts a read error; a browser retries).  So the
;;; master first sends SIGUSR2: the worker accepts no new connection
;;; (its successor on the same sockets takes them) and every answer it
;;; still gives says Connection: close, which busy clients see and
;;; reconnect to another worker; only then SIGTERM, when the connections
;;; left are those that have been quiet for a second.
;;;
;;; Code:

(define-module (plucky server workers)
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-1)
  #:use-module (rnrs bytevectors)
  #:use-module ((ice-9 exceptions) #:select (exception-kind exception-args))
  #:use-module (plucky sys libc)
  #:use-module (plucky sys signal)
  #:use-module (plucky sys epoll)
  #:use-module ((plucky server loop) #:select (log-line))
  #:export (supervise
            supervise-workers
            make-change-watch
            change-watch?
            report-exception
            trace-start-up))


(define (report-exception what exception)
  "Log to standard error that WHAT (a string) failed, with EXCEPTION's
message; return unspecified, never raising in turn."
  (let ((port (current-error-port)))
    (false-if-exception
     (begin
       (display (string-append "plucky: " what ": ") port)
       (print-exception port #f (exception-kind exception) (exception-args exception))))
    (force-output port)))

(define (now)
  (exact->inexact (/ (get-internal-real-time) internal-time-units-per-second)))

;;;
;;; Where start-up time goes
;;;

;; Read once, when this module loads: tracing is for bench/startup.
(define tracing-start-up? (and (getenv "PLUCKY_TRACE_STARTUP") #t))

(define* (trace-start-up step #:optional (time (gettimeofday)))
  "When the environment has PLUCKY_TRACE_STARTUP, write to standard error
the line \"plucky-startup: STEP PID MS\": this process reached STEP (a
string) at MS, the wall clock in milliseconds since the epoch, from TIME
(a pair as `gettimeofday' returns; now by default).  bench/startup reads
them to split exec-to-first-answer into its steps.  Otherwise nothing."
  (when tracing-start-up?
    (let ((port (current-error-port)))
      (format port "plucky-startup: ~a ~a ~a~%" step (getpid)
              (+ (* 1000 (car time)) (/ (cdr time) 1000.)))
      (force-output port))))

;;;
;;; The master's state
;;;

(define-record-type <worker>
  (make-worker pid generation slot ready state)
  worker?
  (pid worker-pid)
  (generation worker-generation)        ; 0, then one more per reload
  (slot worker-slot)                    ; 0 … N-1: its socket, with SO_REUSEPORT
  ;; the read end of the pipe on which it says it has loaded, until it has
  (ready worker-ready set-worker-ready!)
  (state worker-state set-worker-state!)) ; starting | ready | retiring | abandoned

(define-record-type <change-watch>
  (%make-change-watch fd read-changes settled quiet)
  change-watch?
  (fd change-watch-fd)                  ; readable when something changed
  (read-changes change-watch-read-changes) ; thunk -> #t if the app's files changed
  (settled change-watch-settled)        ; thunk -> #t to reload now
  (quiet change-watch-quiet))           ; seconds with no change before `settled'

(define* (make-change-watch #:key fd read-changes settled (quiet 0.2))
  "Return the hooks by which a master (`supervise') reloads when files
change: FD, a descriptor it adds to its epoll set; READ-CHANGES, a thunk
it calls when FD is readable, which reads it and returns true if the
app's files changed; SETTLED, a thunk it calls once QUIET seconds have
passed with no such change, which returns true to reload now (as on
SIGHUP)."
  (%make-change-watch fd read-changes settled quiet))

(define-record-type <master>
  (%make-master count make-child prepare grace on-reopen unblock-in-child?
                retire-delay start-timeout notify status watch
                pid signal-fd epfd events buffer
                workers current next last-generation serving? stopping?
                reload-again? failed? timers settle-timer)
  master?
  ;; What it was asked to do (see `supervise'):
  (count master-count)                  ; workers per generation
  (make-child master-make-child)        ; (generation slot) -> thunk, in the worker
  (prepare master-prepare)              ; thunk or #f, in the worker first
  (grace master-grace)                  ; seconds a draining worker has
  (on-reopen master-on-reopen)          ; thunk or #f, on SIGUSR1
  (unblock-in-child? master-unblock-in-child?)
  (retire-delay master-retire-delay)    ; seconds from SIGUSR2 to SIGTERM
  (start-timeout master-start-timeout)  ; seconds a reload's workers have to load
  (notify master-notify)                ; from `open-service-notifier', or #f
  (status master-status)                ; the STATUS= text with READY=1
  (watch master-watch)                  ; a <change-watch>, or #f
  ;; What it watches with:
  (pid master-pid)
  (signal-fd master-signal-fd)          ; reads `master-signals'
  (epfd master-epfd)                    ; the signalfd, the starting workers' pipes
  (events master-events)                ; epoll_wait's buffer
  (buffer master-buffer)                ; a byte read from a pipe
  ;; What it knows:
  (workers master-workers set-master-workers!) ; <worker>s not yet reaped
  (current master-current set-master-current!) ; the generation that serves
  (next master-next set-master-next!)   ; the generation loading, in a reload; or #f
  (last-generation master-last-generation set-master-last-generation!)
  (serving? master-serving? set-master-serving?!) ; has a whole generation been ready?
  (stopping? master-stopping? set-master-stopping?!)
  (reload-again? master-reload-again? set-master-reload-again?!) ; SIGHUP during a reload
  (failed? master-failed? set-master-failed?!) ; the first workers could not start
  (timers master-timers set-master-timers!) ; ((due . thunk) …)
  (settle-timer master-settle-timer set-master-settle-timer!)) ; a timer, or #f

(define master-signals (list SIGTERM SIGINT SIGCHLD SIGHUP SIGUSR1))

(define* (make-master #:key count make-child prepare grace on-reopen
                      unblock-in-child? retire-delay start-timeout notify status
                      watch)
  ;; -> a master with no worker yet, reading `master-signals' (blocked
  ;; by the caller) from a signalfd of its own.
  (let ((signal-fd (open-signalfd master-signals))
        (epfd (epoll-create)))
    (epoll-add! epfd signal-fd EPOLLIN)
    (when watch
      (epoll-add! epfd (change-watch-fd watch) EPOLLIN))
    (%make-master count make-child prepare grace on-reopen unblock-in-child?
                  retire-delay start-timeout notify status watch
                  (getpid) signal-fd epfd (make-epoll-events 16) (make-bytevector 16)
                  '() 0 #f 0 #f #f #f #f '() #f)))

(define (notify! m . args)
  (let ((notify (master-notify m)))
    (when notify (apply notify args))))

;;;
;;; Timers
;;;

(define (after! m seconds thunk)
  ;; -> the timer, for `cancel!'
  (let ((timer (cons (+ (now) seconds) thunk)))
    (set-master-timers! m (cons timer (master-timers m)))
    timer))

(define (cancel! m timer)
  (set-master-timers! m (delete timer (master-timers m) eq?)))

(define (run-due-timers! m)
  (let* ((t (now))
         (due (filter (lambda (timer) (<= (car timer) t)) (master-timers m))))
    (set-master-timers! m (remove (lambda (timer) (memq timer due)) (master-timers m)))
    (for-each (lambda (timer) ((cdr timer))) due)))

(define (timeout-ms m)
  ;; -> how long epoll may wait: until the next timer is due, or forever
  (let ((timers (master-timers m)))
    (if (null? timers)
        -1
        (let ((due (apply min (map car timers))))
          (max 0 (inexact->exact (ceiling (* 1000 (- due (now))))))))))

;;;
;;; Workers
;;;

;; A draining loop gives up on its connections GRACE seconds in, checked
;; once a second; a worker still there a little later is stuck in the
;; app's code, and is killed.
(define kill-margin 2)

(define (describe-status status)
  (cond ((status:exit-val status) => (lambda (v) (format #f "status ~a" v)))
        ((status:term-sig status) => (lambda (s) (format #f "signal ~a" s)))
        (else "unknown")))

(define ready-byte (make-bytevector 1 1))
(define ready-byte-address (bytevector-address ready-byte))

(define (alive? m w) (memq w (master-workers m)))

(define (signal! m w signal)
  ;; Only a worker not yet reaped: a reaped PID may belong to anyone.
  ;; To its main thread, which reads it from its signalfd: sent to the
  ;; process, a SIGTERM can land on a thread libgc holds stopped, with
  ;; SIGTERM unblocked, and kill the worker undrained (plucky sys signal).
  (when (alive? m w)
    (signal-main-thread! (worker-pid w) signal)))

(define (stop-watching! m w)
  (let ((port (worker-ready w)))
    (when port
      (epoll-remove! (master-epfd m) (port->fdes port))
      (close-port port)
      (set-worker-ready! w #f))))

(define (generation-workers m generation)
  (filter (lambda (w) (eqv? (worker-generation w) generation)) (master-workers m)))

(define (all-ready? m generation)
  (let ((ws (generation-workers m generation)))
    (and (= (length ws) (master-count m))
         (every (lambda (w) (eq? (worker-state w) 'ready)) ws))))

(define (in-child m generation slot ready)
  ;; The new worker.  Never returns: exits, or escapes through a
  ;; continuation MAKE-CHILD's thunk captured (web server plucky).
  (trace-start-up "worker")
  (let ((thunk
         (with-exception-handler
             (lambda (exception)
               (report-exception (format #f "worker ~a could not start" (getpid))
                                 exception)
               (primitive-exit 3))
           (lambda ()
             (fd-close (master-signal-fd m))
             (fd-close (master-epfd m))
             (when (master-watch m)
               (fd-close (change-watch-fd (master-watch m))))
             (notify! m 'close)
             (for-each (lambda (w) (stop-watching! m w)) (master-workers m))
             (close-port (car ready))
             ;; Its own process group: a Ctrl-C at the terminal
             ;; reaches the master alone, which passes it on once.
             ;; And should the master die, the worker drains.
             (setpgid 0 0)
             (set-parent-death-signal! SIGTERM)
             (unless (= (getppid) (master-pid m))
               (primitive-exit 0))
             (when (master-prepare m) ((master-prepare m)))
             (let ((thunk ((master-make-child m) generation slot)))
               (fd-write (port->fdes (cdr ready)) ready-byte-address 0 1)
               (close-port (cdr ready))
               (when (master-unblock-in-child? m)
                 ;; A worker that does not read its signals (the
                 ;; drop-in's): those the master passes on that it
                 ;; has no use for must not end it.
                 (for-each ignore-signal! (list SIGHUP SIGUSR1 SIGUSR2))
                 (unblock-signals! master-signals))
               thunk)))))
    (with-exception-handler
        (lambda (exception)
          (report-exception (format #f "worker ~a failed" (getpid)) exception)
          (primitive-exit 70))
      thunk
      #:unwind? #t)
    (force-output (current-error-port))
    (primitive-exit 0)))

(define (start-worker! m generation slot)
  (let ((ready (pipe)))
    (flush-all-ports)
    (trace-start-up "fork")
    (let ((pid (primitive-fork)))
      (when (zero? pid)
        (in-child m generation slot ready))
      (close-port (cdr ready))
      (fd-set-nonblocking! (port->fdes (car ready)))
      (epoll-add! (master-epfd m) (port->fdes (car ready)) EPOLLIN)
      (set-master-workers! m (cons (make-worker pid generation slot (car ready) 'starting)
                                   (master-workers m))))))

(define (retire! m ws)
  ;; Connection: close on every answer now; drain in RETIRE-DELAY
  ;; seconds; SIGKILL if still there after the grace period.
  (for-each (lambda (w)
              (set-worker-state! w 'retiring)
              (stop-watching! m w)
              (signal! m w SIGUSR2))
            ws)
  (after! m (master-retire-delay m)
          (lambda () (for-each (lambda (w) (signal! m w SIGTERM)) ws)))
  (after! m (+ (master-retire-delay m) (master-grace m) kill-margin)
          (lambda ()
            (for-each (lambda (w)
                        (when (alive? m w)
                          (log-line "worker ~a outlived its grace period; killing it"
                                    (worker-pid w))
                          (signal! m w SIGKILL)))
                      ws))))

;;;
;;; Generations: the first, and one per reload
;;;

(define (start-generation! m)
  ;; Never once stopping: the workers forked then would serve on,
  ;; nobody telling them to drain.
  (unless (master-stopping? m)
    (let ((count (master-count m))
          (generation (+ (master-last-generation m) 1)))
      (notify! m 'reloading)
      (set-master-last-generation! m generation)
      (set-master-next! m generation)
      (log-line "reload: starting ~a worker~a with fresh code" count
                (if (= count 1) "" "s"))
      (for-each (lambda (slot) (start-worker! m generation slot)) (iota count))
      (after! m (master-start-timeout m)
              (lambda ()
                (when (and (eqv? (master-next m) generation) (not (master-stopping? m)))
                  (abandon-generation!
                   m (format #f "the new workers did not load within ~a s"
                             (master-start-timeout m)))))))))

(define (reload-if-asked! m)
  ;; A SIGHUP that came while a generation started, or during a failed
  ;; reload (the code fixed meanwhile, say): its turn now.
  (when (master-reload-again? m)
    (set-master-reload-again?! m #f)
    (start-generation! m)))

(define (abandon-generation! m why)
  (log-line "reload failed: ~a; the workers serving keep their code" why)
  (notify! m 'reload-failed (master-status m))
  (let ((abandoned (generation-workers m (master-next m))))
    (retire! m abandoned)
    (for-each (lambda (w) (set-worker-state! w 'abandoned)) abandoned))
  (set-master-next! m #f)
  (reload-if-asked! m))

(define (promote! m)
  ;; The new generation has loaded: it serves, the others retire.
  (let* ((next (master-next m))
         (old (filter (lambda (w)
                        (and (not (eqv? (worker-generation w) next))
                             (not (memq (worker-state w) '(retiring abandoned)))))
                      (master-workers m))))
    (log-line "reload: new workers ~a serve; old workers ~a drain"
              (map worker-pid (generation-workers m next)) (map worker-pid old))
    (set-master-current! m next)
    (set-master-next! m #f)
    (retire! m old)
    (notify! m 'ready (master-status m))
    (reload-if-asked! m)))

;;;
;;; Events
;;;

(define (worker-ready! m w)
  (set-worker-state! w 'ready)
  (stop-watching! m w)
  (let ((next (master-next m))
        (current (master-current m)))
    (cond
     ;; Stopping: it has had or will have the signal; nothing else
     ;; starts, nothing is promoted, and no READY=1 follows STOPPING=1.
     ((master-stopping? m) #t)
     ((and next (eqv? (worker-generation w) next) (all-ready? m next))
      (promote! m))
     ((and (not (master-serving? m)) (all-ready? m current))
      (set-master-serving?! m #t)
      (notify! m 'ready (master-status m))
      (reload-if-asked! m))
     ((and (not (master-serving? m)) (= (worker-slot w) 0)
           (eqv? (worker-generation w) current))
      ;; The first worker is ready: now the others (see `supervise').
      (trace-start-up "ready")
      (for-each (lambda (slot) (start-worker! m current slot))
                (iota (- (master-count m) 1) 1))))))

(define (ready-event! m fd)
  ;; FD, the pipe of a starting worker, can be read: its byte, or its end.
  (let ((w (find (lambda (w)
                   (and (worker-ready w) (= fd (port->fdes (worker-ready w)))))
                 (master-workers m))))
    (when w
      (let ((n (fd-read fd (bytevector-address (master-buffer m)) 0 1)))
        (cond
         ((= n 1) (worker-ready! m w))
         ((= n (- errno-EAGAIN)) #t)
         ;; End of file without a byte: it is exiting; SIGCHLD says how.
         (else (stop-watching! m w)))))))

(define (worker-exited! m w status)
  (set-master-workers! m (delete w (master-workers m) eq?))
  (stop-watching! m w)
  (let ((pid (worker-pid w))
        (why (describe-status status))
        (next (master-next m)))
    (cond
     ((master-stopping? m) #t)
     ((eq? (worker-state w) 'retiring)
      ;; Its generation is being replaced, so no other takes its place;
      ;; but a retiring worker that a signal ended did not drain: say
      ;; so.  (A worker killed just before a reload can be reaped only
      ;; after the new workers were ready and it was counted among the
      ;; old ones: bench/chaos saw it.)
      (when (status:term-sig status)
        (log-line "worker ~a exited (~a) while retiring; the new workers serve"
                  pid why)))
     ;; One of a generation abandoned before it served, which the
     ;; retiring signal itself may end while it loads: not news.
     ((eq? (worker-state w) 'abandoned) #t)
     ((and next (eqv? (worker-generation w) next))
      (if (eq? (worker-state w) 'starting)
          (abandon-generation!
           m (format #f "new worker ~a exited (~a) before it was ready" pid why))
          (begin
            (log-line "worker ~a exited (~a); starting another" pid why)
            (start-worker! m next (worker-slot w)))))
     ((not (master-serving? m))
      (log-line "worker ~a exited (~a) before it was ready; giving up" pid why)
      (set-master-failed?! m #t)
      (stop! m SIGTERM))
     ((eq? (worker-state w) 'starting)
      ;; A replacement that could not load the app (changed since?):
      ;; try again in a second rather than in a tight loop.
      (log-line "worker ~a exited (~a) before it was ready; starting another in 1 s"
                pid why)
      (let ((generation (worker-generation w))
            (slot (worker-slot w)))
        (after! m 1 (lambda ()
                      (unless (or (master-stopping? m)
                                  (not (eqv? generation (master-current m))))
                        (start-worker! m generation slot))))))
     (else
      (log-line "worker ~a exited (~a); starting another" pid why)
      (start-worker! m (worker-generation w) (worker-slot w))))))

(define (reap! m)
  (let lp ()
    (let ((dead (false-if-exception (waitpid WAIT_ANY WNOHANG))))
      (when (and dead (> (car dead) 0))
        (let ((w (find (lambda (w) (= (worker-pid w) (car dead))) (master-workers m))))
          (when w (worker-exited! m w (cdr dead))))
        (lp)))))

(define (stop! m signal)
  (unless (master-stopping? m)
    (set-master-stopping?! m #t)
    (set-master-reload-again?! m #f)
    (notify! m 'stopping)
    (after! m (+ (master-grace m) kill-margin)
            (lambda ()
              (for-each (lambda (w)
                          (log-line "worker ~a outlived its grace period; killing it"
                                    (worker-pid w))
                          (signal! m w SIGKILL))
                        (master-workers m)))))
  (for-each (lambda (w) (signal! m w signal)) (master-workers m)))

(define (reload! m)
  (cond
   ((master-stopping? m) #t)
   ;; during a reload, or before the first workers all serve: once they do
   ((or (master-next m) (not (master-serving? m)))
    (set-master-reload-again?! m #t))
   (else (start-generation! m))))

(define (calling-hook m what hook)
  ;; -> HOOK's value, or #f once an exception it raised is logged: the
  ;; master must not die of a watch's failure
  (with-exception-handler
      (lambda (exception) (report-exception what exception) #f)
    hook
    #:unwind? #t))

(define (changes! m)
  ;; The watch's descriptor is readable: once no change has come for its
  ;; quiet period (a burst of saves is one reload), reload if it agrees.
  (let ((watch (master-watch m)))
    (when (calling-hook m "reading the changes" (change-watch-read-changes watch))
      (when (master-settle-timer m)
        (cancel! m (master-settle-timer m)))
      (set-master-settle-timer!
       m (after! m (change-watch-quiet watch)
                 (lambda ()
                   (set-master-settle-timer! m #f)
                   (when (calling-hook m "checking the changes"
                                       (change-watch-settled watch))
                     (reload! m))))))))

(define (on-signal! m signal)
  (cond
   ((= signal SIGCHLD) (reap! m))
   ((or (= signal SIGTERM) (= signal SIGINT)) (stop! m signal))
   ((= signal SIGHUP) (reload! m))
   ((= signal SIGUSR1)
    (let ((on-reopen (master-on-reopen m)))
      (when on-reopen
        (with-exception-handler
            (lambda (exception) (report-exception "reopening the logs" exception))
          on-reopen
          #:unwind? #t)))
    (for-each (lambda (w) (signal! m w SIGUSR1)) (master-workers m)))))

(define (run-master! m)
  ;; Wait for events and act on them until stopped with no worker left.
  (let ((events (master-events m))
        (signal-fd (master-signal-fd m)))
    (let loop ()
      (unless (and (master-stopping? m) (null? (master-workers m)))
        (let ((n (epoll-wait (master-epfd m) events (bytevector-address events)
                             (timeout-ms m))))
          (let lp ((i 0))
            (when (< i n)
              (let ((fd (epoll-event-fd events i)))
                (cond
                 ((= fd signal-fd) (on-signal! m (read-signal signal-fd)))
                 ((and (master-watch m) (= fd (change-watch-fd (master-watch m))))
                  (changes! m))
                 (else (ready-event! m fd))))
              (lp (+ i 1))))
          (run-due-timers! m)
          (loop))))))

;;;
;;; Entry points
;;;

(define* (supervise count make-child
                    #:key (prepare #f) (grace 30) (on-reopen #f)
                    (unblock-in-child? #f) (retire-delay 1) (start-timeout 60)
                    (notify #f) (status "serving") (watch #f))
  "Keep COUNT workers running (see the commentary) until they have all
exited after SIGTERM or SIGINT; return #f if the first workers could not
start, else #t.  (MAKE-CHILD generation slot) runs in each new worker,
after (PREPARE), and returns the thunk the worker then runs; if either
raises, the worker logs why and exits before it is ready.  GRACE: the
seconds a draining worker has before it is killed.  ON-REOPEN, a thunk,
runs on SIGUSR1.  UNBLOCK-IN-CHILD?: the thunk runs with the master's
signals unblocked, those it has no use for ignored.  RETIRE-DELAY: the
seconds from SIGUSR2 to SIGTERM for a retiring worker.  START-TIMEOUT:
the seconds a reload's workers have to load.  NOTIFY (from
`open-service-notifier'), if given, hears when the first workers all
serve (with STATUS), when a reload starts and ends, and when the workers
drain.  WATCH, a <change-watch> (`make-change-watch'), if given, reloads
when files change; its descriptor stays the caller's to close."
  (stop-finalizer-thread!)
  (block-signals! master-signals)
  (let ((m (make-master #:count count #:make-child make-child #:prepare prepare
                        #:grace grace #:on-reopen on-reopen
                        #:unblock-in-child? unblock-in-child?
                        #:retire-delay retire-delay #:start-timeout start-timeout
                        #:notify notify #:status status #:watch watch)))
    ;; The first worker alone, the others once it is ready: forked at
    ;; once, the second's fork and start delayed the first's, which
    ;; serves first (its socket alone listens until the others are
    ;; ready: see `open-listeners').  bench/startup's trace, fork ->
    ;; worker running, shows it.
    (start-worker! m 0 0)
    (run-master! m)
    (fd-close (master-epfd m))
    (fd-close (master-signal-fd m))
    (discard-pending-signals! master-signals)
    (unblock-signals! master-signals)
    (not (master-failed? m))))

(define* (supervise-workers workers child #:key (grace 30) (on-reopen #f))
  "Fork WORKERS processes that each run the thunk CHILD, and keep that
many running — a worker that dies is replaced at once and the event
logged — until SIGTERM or SIGINT, which are passed on to the workers.
SIGHUP replaces the workers with new ones, the old ones draining;
SIGUSR1 calls ON-REOPEN, if given, and is passed on.  Return once they
have all exited, #f if the first workers could not start.  CHILD runs
with the signals unblocked that this process reads from a signalfd
(plucky sys signal); if it returns, the worker exits with status 0.
Workers still running GRACE seconds (plus 2) after being told to stop
are killed."
  (supervise workers (lambda (generation slot) child)
             #:grace grace #:on-reopen on-reopen #:unblock-in-child? #t))

;;; (plucky server workers) ends here
