;;; (plucky server) --- run a handler: listening sockets, workers, the loop

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The entry point of plucky's own API:
;;;
;;;   (run-server handler #:host "127.0.0.1" #:port 8080 #:workers 2)
;;;
;;; HANDLER has the contract of Guile's (web server): it is called as
;;; (HANDLER request body . state) and returns (values response body
;;; . state).  `run-server' opens the listening socket(s), then either
;;; runs the event loop (plucky server loop) itself, with one worker (on
;;; SIGHUP it then loads the app again in place: requests wait meanwhile,
;;; and a crash ends the server), or becomes a master process that forks
;;; the workers, each running one loop, and watches over them:
;;;
;;;   master   never reads a request.  Starts the first worker, and the
;;;            others once it is ready.  Reads its signals from a
;;;            signalfd (plucky sys signal) in an epoll loop of its own,
;;;            with a pipe per starting worker and a few timers:
;;;              SIGCHLD          a worker died: start another at once
;;;              SIGTERM, SIGINT  pass it on; wait for the workers
;;;              SIGHUP           reload: start a new generation of
;;;                               workers; once every one of them has
;;;                               loaded the app and said so on its pipe,
;;;                               retire the old ones; if one fails, the
;;;                               old ones stay and the error is logged
;;;              SIGUSR1          reopen the log files, tell the workers
;;;            Under systemd's Type=notify (NOTIFY_SOCKET), it says READY=1
;;;            once the workers serve, RELOADING=1 and READY=1 around a
;;;            reload, STOPPING=1 (plucky server notify); so does a lone
;;;            process, for itself.
;;;   worker   drops privileges, loads the app (a reload), says "ready",
;;;            serves.  Its loop reads SIGTERM (drain), SIGINT (drain,
;;;            then stop), SIGUSR2 (retire: accept no new connection and
;;;            answer each connection's next request with Connection:
;;;            close), SIGUSR1 (reopen logs) and a timer's signal (flush
;;;            the access log) from a signalfd.
;;;
;;; The listening sockets stay open in the master the whole time, so a
;;; worker's death or a reload loses no connection waiting to be
;;; accepted.  With more than one worker, plucky opens one socket per
;;; worker on the same port with SO_REUSEPORT and worker I accepts on
;;; socket I (a replacement or the next generation's worker I takes the
;;; same socket): on this machine the kernel's spread over the sockets is
;;; even, where waking one of several processes on a shared socket
;;; (EPOLLEXCLUSIVE) gave one worker 57-68% of new connections and once
;;; all 100 of a keep-alive run (figures in README, "Workers").  Sockets
;;; given by the caller or a service manager, and Unix-domain sockets,
;;; are shared by all workers instead.
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

(define-module (plucky server)
  #:use-module (srfi srfi-1)
  #:use-module (rnrs bytevectors)
  #:use-module ((ice-9 exceptions) #:select (exception-kind exception-args))
  ;; Before any (web …) module: (web http) loads at first use, without SRFI-19.
  #:use-module (plucky http guile-web)
  ;; (web response) is loaded only when needed: see (plucky http response).
  #:use-module ((plucky http response) #:select (response-record?))
  #:use-module (plucky sys libc)
  #:use-module (plucky sys signal)
  #:use-module (plucky sys epoll)
  #:use-module (plucky http parse)
  #:use-module (plucky server loop)
  #:use-module (plucky server socket)
  ;; Loaded only when asked for: every module is start-up time.
  #:autoload (plucky server log) (open-access-log
                                  access-log-response!
                                  access-log-flush!
                                  access-log-reopen!
                                  access-log-close!
                                  open-error-log!)
  #:autoload (plucky server privileges) (resolve-identity drop-privileges!)
  #:use-module ((plucky server watchdog) #:select (start-watchdog!))
  #:re-export (make-loop-settings
               make-parse-limits
               with-body-port
               body-port-handler?
               with-connect
               connect-handler?
               stop-loop!
               drain-loop!
               open-listener
               listener-port)
  #:export (supervise-workers
            run-server
            trace-start-up))

;; <worker>'s accessors are macros of the compiler only: see (plucky sys
;; record).  SRFI-9's kept a macro per accessor in the module, whose
;; syntax objects were built at every start (bench/startup-instructions).
(eval-when (expand)
  (use-modules (plucky sys record)))

(define (report-exception what exception)
  ;; Log WHAT failed and why; never fail in turn.
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
;;; A worker: one loop in this process
;;;

;; The signal of the timer that flushes the access log.
(define tick-signal (real-time-signal 1))

(define (worker-signals)
  (list SIGTERM SIGINT SIGHUP SIGUSR1 SIGUSR2 tick-signal))

(define (closing-response response)
  ;; RESPONSE (a record or a header alist) with Connection: close added.
  (if (response-record? response)
      ((@ (web response) build-response)
       #:version ((@ (web response) response-version) response)
       #:code ((@ (web response) response-code) response)
       #:reason-phrase ((@ (web response) response-reason-phrase) response)
       #:headers (cons '(connection close) ((@ (web response) response-headers) response))
       #:port ((@ (web response) response-port) response))
      (cons '(connection close) response)))

(define (closing response body . state)
  (apply values (closing-response response) body state))

(define (handler-from reload)
  (let ((handler (reload)))
    (unless (procedure? handler)
      (error "the reload procedure did not return a handler procedure" handler))
    handler))

(define (logging-errors what thunk)
  ;; -> THUNK's value, or #f once an exception it raised is logged
  (with-exception-handler
      (lambda (exception) (report-exception what exception) #f)
    thunk
    #:unwind? #t))

(define* (serve-in-this-process sockets handler state settings
                                #:key (worker? #f) (grace 30) (reload #f)
                                (access-log #f) (error-log #f) (connections '())
                                (observer #f) (notify #f) (status "serving")
                                (handler-timeout 30))
  ;; Run the loop on SOCKETS (or CONNECTIONS) until it drains or stops;
  ;; -> the handler's final state.  WORKER? says a master started this
  ;; process (it shares the sockets: EPOLLEXCLUSIVE).  With RELOAD (a
  ;; single process, no master), SIGHUP loads the app again here; the old
  ;; handler serves until the new one is loaded, and on if it fails to
  ;; load.  NOTIFY (from `open-service-notifier'), if given, hears that
  ;; this process serves (with STATUS), reloads and drains.
  (stop-finalizer-thread!)
  (block-signals! (worker-signals))
  (let ((signal-fd (open-signalfd (worker-signals)))
        (timer (and access-log (make-signal-timer tick-signal)))
        (served 0)
        (retiring? #f)
        (interrupted? #f))
    (define counting-handler
      ;; Counts requests (logged at exit: how evenly workers share the
      ;; load) and, once the worker retires, closes each connection after
      ;; its answer.  The two-argument case makes no list: the loop calls
      ;; it so when there is no state.
      (case-lambda
        ((request body)
         (set! served (+ served 1))
         (if retiring?
             (call-with-values (lambda () (handler request body)) closing)
             (handler request body)))
        ((request body . state)
         (set! served (+ served 1))
         (if retiring?
             (call-with-values (lambda () (apply handler request body state)) closing)
             (apply handler request body state)))))
    (define (on-signal signal)
      (cond
       ((= signal SIGTERM)
        (when notify (notify 'stopping))
        (drain-loop! grace))
       ((= signal SIGINT)
        (if interrupted?
            (stop-loop!)
            (begin
              (set! interrupted? #t)
              (when notify (notify 'stopping))
              (drain-loop! grace))))
       ((= signal SIGUSR2)
        ;; Retire: say Connection: close on every answer from now on, and
        ;; take no new connection, which the new worker on the same
        ;; sockets takes instead.  A lone process has no successor.
        (if worker?
            (begin
              (set! retiring? #t)
              (stop-accepting!))
            (log-line "SIGUSR2 ignored: it retires a worker, and this process has no master")))
       ((= signal tick-signal)
        (when access-log (access-log-flush! access-log)))
       ((= signal SIGHUP)
        (if reload
            (let ((new (begin
                         (when notify (notify 'reloading))
                         (logging-errors
                          "reload failed, the old code keeps serving; the new code"
                          (lambda () (handler-from reload))))))
              (when notify
                (notify (if new 'ready 'reload-failed) status))
              (when new
                (unless (eq? (body-port-handler? new) (body-port-handler? handler))
                  (log-line "reload: the new code ~a with-body-port; bodies stay ~a \
until a restart"
                            (if (body-port-handler? new) "uses" "drops")
                            (if (body-port-handler? handler) "ports" "bytevectors")))
                (set! handler new)
                (log-line "reload: new code serves")))
            ;; A worker's reloads are its master's business.
            (unless worker?
              (log-line "SIGHUP ignored: nothing to reload"))))
       ((= signal SIGUSR1)
        (logging-errors "reopening the logs"
                        (lambda ()
                          (when access-log (access-log-reopen! access-log))
                          (when error-log (open-error-log! error-log)))))))
    (when timer
      (set-signal-timer! timer 1 1))
    (when (and handler-timeout (> handler-timeout 0))
      ;; A stuck handler: a 503, or a new worker (see (plucky server watchdog))
      (start-watchdog! handler-timeout #:peer current-request-peer #:exit? worker?))
    (trace-start-up "serving")
    (when notify (notify 'ready status))
    (let ((state (run-loop (map port->fdes sockets)
                           ;; CONNECT as the app answers it (issue 13 5g)
                           (if (connect-handler? handler)
                               (with-connect counting-handler)
                               counting-handler)
                           #:body-port? (body-port-handler? handler)
                           #:state state #:settings settings
                           #:exclusive? worker?
                           #:connections connections
                           #:exit-when-idle? (pair? connections)
                           #:on-response
                           (and access-log
                                (lambda (peer request code bytes)
                                  (access-log-response! access-log peer request
                                                        code bytes)))
                           #:signal-fd signal-fd #:on-signal on-signal
                           #:observer observer)))
      (when timer
        (delete-signal-timer! timer))
      (when access-log
        (access-log-flush! access-log))
      (when (null? connections)
        (log-line "worker ~a served ~a requests" (getpid) served))
      (fd-close signal-fd)
      ;; A SIGHUP or a tick that came late must not run its default
      ;; action (ending the process) once unblocked.
      (discard-pending-signals! (worker-signals))
      (unblock-signals! (worker-signals))
      state)))

;;;
;;; The master
;;;

(define-record-type/lean <worker>
  (make-worker pid generation slot ready state)
  worker?
  (pid worker-pid)
  (generation worker-generation)        ; 0, then one more per reload
  (slot worker-slot)                    ; 0 … N-1: its socket, with SO_REUSEPORT
  ;; the read end of the pipe on which it says it has loaded, until it has
  (ready worker-ready set-worker-ready!)
  (state worker-state set-worker-state!)) ; starting | ready | retiring | abandoned

(define master-signals (list SIGTERM SIGINT SIGCHLD SIGHUP SIGUSR1))

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

(define* (supervise count make-child
                    #:key (prepare #f) (grace 30) (on-reopen #f)
                    (unblock-in-child? #f) (retire-delay 1) (start-timeout 60)
                    (notify #f) (status "serving"))
  ;; Keep COUNT workers running (see the Commentary).  (MAKE-CHILD
  ;; generation slot) runs in each new worker, after (PREPARE), and
  ;; returns the thunk the worker then runs; if either raises, the worker
  ;; logs why and exits before it is ready.  -> #f if the first workers
  ;; could not start, else #t.  NOTIFY (from `open-service-notifier'), if
  ;; given, hears when the first workers all serve (with STATUS), when a
  ;; reload starts and ends, and when the workers drain.
  (stop-finalizer-thread!)
  (block-signals! master-signals)
  (let ((signal-fd (open-signalfd master-signals))
        (epfd (epoll-create))
        (events (make-epoll-events 16))
        (buffer (make-bytevector 16))
        (master (getpid))
        (workers '())                   ; <worker>s not yet reaped
        (current 0)                     ; the generation that serves
        (next #f)                       ; the generation loading, in a reload
        (last-generation 0)
        (serving? #f)                   ; has a whole generation been ready?
        (stopping? #f)
        (reload-again? #f)              ; SIGHUP during a reload
        (failed? #f)
        (timers '()))                   ; ((due . thunk) …)

    (define (after! seconds thunk)
      (set! timers (cons (cons (+ (now) seconds) thunk) timers)))

    (define (run-due-timers!)
      (let* ((t (now))
             (due (filter (lambda (timer) (<= (car timer) t)) timers)))
        (set! timers (remove (lambda (timer) (memq timer due)) timers))
        (for-each (lambda (timer) ((cdr timer))) due)))

    (define (timeout-ms)
      (if (null? timers)
          -1
          (let ((due (apply min (map car timers))))
            (max 0 (inexact->exact (ceiling (* 1000 (- due (now)))))))))

    (define (alive? w) (memq w workers))

    (define (signal! w signal)
      ;; Only a worker not yet reaped: a reaped PID may belong to anyone.
      (when (alive? w)
        (false-if-exception (kill (worker-pid w) signal))))

    (define (stop-watching! w)
      (let ((port (worker-ready w)))
        (when port
          (epoll-remove! epfd (port->fdes port))
          (close-port port)
          (set-worker-ready! w #f))))

    (define (in-child generation slot ready)
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
                 (fd-close signal-fd)
                 (fd-close epfd)
                 (when notify (notify 'close))
                 (for-each stop-watching! workers)
                 (close-port (car ready))
                 ;; Its own process group: a Ctrl-C at the terminal
                 ;; reaches the master alone, which passes it on once.
                 ;; And should the master die, the worker drains.
                 (setpgid 0 0)
                 (set-parent-death-signal! SIGTERM)
                 (unless (= (getppid) master)
                   (primitive-exit 0))
                 (when prepare (prepare))
                 (let ((thunk (make-child generation slot)))
                   (fd-write (port->fdes (cdr ready)) ready-byte-address 0 1)
                   (close-port (cdr ready))
                   (when unblock-in-child?
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

    (define (start-worker! generation slot)
      (let ((ready (pipe)))
        (flush-all-ports)
        (trace-start-up "fork")
        (let ((pid (primitive-fork)))
          (when (zero? pid)
            (in-child generation slot ready))
          (close-port (cdr ready))
          (fd-set-nonblocking! (port->fdes (car ready)))
          (epoll-add! epfd (port->fdes (car ready)) EPOLLIN)
          (set! workers (cons (make-worker pid generation slot (car ready) 'starting)
                              workers)))))

    (define (generation-workers generation)
      (filter (lambda (w) (eqv? (worker-generation w) generation)) workers))

    (define (all-ready? generation)
      (let ((ws (generation-workers generation)))
        (and (= (length ws) count)
             (every (lambda (w) (eq? (worker-state w) 'ready)) ws))))

    (define (retire! ws)
      ;; Connection: close on every answer now; drain in RETIRE-DELAY
      ;; seconds; SIGKILL if still there after the grace period.
      (for-each (lambda (w)
                  (set-worker-state! w 'retiring)
                  (stop-watching! w)
                  (signal! w SIGUSR2))
                ws)
      (after! retire-delay
              (lambda () (for-each (lambda (w) (signal! w SIGTERM)) ws)))
      (after! (+ retire-delay grace kill-margin)
              (lambda ()
                (for-each (lambda (w)
                            (when (alive? w)
                              (log-line "worker ~a outlived its grace period; killing it"
                                        (worker-pid w))
                              (signal! w SIGKILL)))
                          ws))))

    (define (start-generation!)
      ;; Never once stopping: the workers forked then would serve on,
      ;; nobody telling them to drain.
      (unless stopping?
        (when notify (notify 'reloading))
        (set! last-generation (+ last-generation 1))
        (set! next last-generation)
        (log-line "reload: starting ~a worker~a with fresh code" count
                  (if (= count 1) "" "s"))
        (for-each (lambda (slot) (start-worker! next slot)) (iota count))
        (let ((generation next))
          (after! start-timeout
                  (lambda ()
                    (when (and (eqv? next generation) (not stopping?))
                      (abandon-generation!
                       (format #f "the new workers did not load within ~a s"
                               start-timeout))))))))

    (define (abandon-generation! why)
      (log-line "reload failed: ~a; the workers serving keep their code" why)
      (when notify
        (notify 'reload-failed status))
      (let ((abandoned (generation-workers next)))
        (retire! abandoned)
        (for-each (lambda (w) (set-worker-state! w 'abandoned)) abandoned))
      (set! next #f)
      ;; A SIGHUP that came during the failed reload (the code fixed
      ;; meanwhile, say): its turn now.
      (when reload-again?
        (set! reload-again? #f)
        (start-generation!)))

    (define (promote!)
      ;; The new generation has loaded: it serves, the others retire.
      (let ((old (filter (lambda (w)
                           (and (not (eqv? (worker-generation w) next))
                                (not (memq (worker-state w) '(retiring abandoned)))))
                         workers)))
        (log-line "reload: new workers ~a serve; old workers ~a drain"
                  (map worker-pid (generation-workers next)) (map worker-pid old))
        (set! current next)
        (set! next #f)
        (retire! old)
        (when notify (notify 'ready status))
        (when reload-again?
          (set! reload-again? #f)
          (start-generation!))))

    (define (worker-ready! w)
      (set-worker-state! w 'ready)
      (stop-watching! w)
      (cond
       ;; Stopping: it has had or will have the signal; nothing else
       ;; starts, nothing is promoted, and no READY=1 follows STOPPING=1.
       (stopping? #t)
       ((and next (eqv? (worker-generation w) next) (all-ready? next))
        (promote!))
       ((and (not serving?) (all-ready? current))
        (set! serving? #t)
        (when notify (notify 'ready status))
        (when reload-again?
          ;; a SIGHUP that came while they started
          (set! reload-again? #f)
          (start-generation!)))
       ((and (not serving?) (= (worker-slot w) 0)
             (eqv? (worker-generation w) current))
        ;; The first worker is ready: now the others (see below).
        (trace-start-up "ready")
        (for-each (lambda (slot) (start-worker! current slot))
                  (iota (- count 1) 1)))))

    (define (ready-event! fd)
      (let ((w (find (lambda (w)
                       (and (worker-ready w) (= fd (port->fdes (worker-ready w)))))
                     workers)))
        (when w
          (let ((n (fd-read fd (bytevector-address buffer) 0 1)))
            (cond
             ((= n 1) (worker-ready! w))
             ((= n (- errno-EAGAIN)) #t)
             ;; End of file without a byte: it is exiting; SIGCHLD says how.
             (else (stop-watching! w)))))))

    (define (worker-exited! w status)
      (set! workers (delete w workers eq?))
      (stop-watching! w)
      (let ((pid (worker-pid w))
            (why (describe-status status)))
        (cond
         (stopping? #t)
         ((eq? (worker-state w) 'retiring)
          ;; Its generation is being replaced, so no other takes its place;
          ;; but a retiring worker that a signal ended did not drain: say
          ;; so.  (A worker killed just before a reload can be reaped only
          ;; after the new workers were ready and it was counted among the
          ;; old ones: bench/chaos saw it, bench/RESULTS.md 2026-11-22.)
          (when (status:term-sig status)
            (log-line "worker ~a exited (~a) while retiring; the new workers serve"
                      pid why)))
         ;; One of a generation abandoned before it served, which the
         ;; retiring signal itself may end while it loads: not news.
         ((eq? (worker-state w) 'abandoned) #t)
         ((and next (eqv? (worker-generation w) next))
          (if (eq? (worker-state w) 'starting)
              (abandon-generation!
               (format #f "new worker ~a exited (~a) before it was ready" pid why))
              (begin
                (log-line "worker ~a exited (~a); starting another" pid why)
                (start-worker! next (worker-slot w)))))
         ((not serving?)
          (log-line "worker ~a exited (~a) before it was ready; giving up" pid why)
          (set! failed? #t)
          (stop! SIGTERM))
         ((eq? (worker-state w) 'starting)
          ;; A replacement that could not load the app (changed since?):
          ;; try again in a second rather than in a tight loop.
          (log-line "worker ~a exited (~a) before it was ready; starting another in 1 s"
                    pid why)
          (let ((generation (worker-generation w))
                (slot (worker-slot w)))
            (after! 1 (lambda ()
                        (unless (or stopping? (not (eqv? generation current)))
                          (start-worker! generation slot))))))
         (else
          (log-line "worker ~a exited (~a); starting another" pid why)
          (start-worker! (worker-generation w) (worker-slot w))))))

    (define (reap!)
      (let lp ()
        (let ((dead (false-if-exception (waitpid WAIT_ANY WNOHANG))))
          (when (and dead (> (car dead) 0))
            (let ((w (find (lambda (w) (= (worker-pid w) (car dead))) workers)))
              (when w (worker-exited! w (cdr dead))))
            (lp)))))

    (define (stop! signal)
      (unless stopping?
        (set! stopping? #t)
        (set! reload-again? #f)
        (when notify (notify 'stopping))
        (after! (+ grace kill-margin)
                (lambda ()
                  (for-each (lambda (w)
                              (log-line "worker ~a outlived its grace period; killing it"
                                        (worker-pid w))
                              (signal! w SIGKILL))
                            workers))))
      (for-each (lambda (w) (signal! w signal)) workers))

    (define (on-signal signal)
      (cond
       ((= signal SIGCHLD) (reap!))
       ((or (= signal SIGTERM) (= signal SIGINT)) (stop! signal))
       ((= signal SIGHUP)
        (cond
         (stopping? #t)
         ;; during a reload, or before the first workers all serve: once
         ;; they do
         ((or next (not serving?)) (set! reload-again? #t))
         (else (start-generation!))))
       ((= signal SIGUSR1)
        (when on-reopen
          (with-exception-handler
              (lambda (exception) (report-exception "reopening the logs" exception))
            on-reopen
            #:unwind? #t))
        (for-each (lambda (w) (signal! w SIGUSR1)) workers))))

    (epoll-add! epfd signal-fd EPOLLIN)
    ;; The first worker alone, the others once it is ready: forked at
    ;; once, the second's fork and start delayed the first's, which
    ;; serves first (its socket alone listens until the others are
    ;; ready: see open-listeners).  bench/startup's trace, fork -> worker
    ;; running: 1.4-1.5 ms forked together, 0.9-1.0 ms so.
    (start-worker! 0 0)
    (let loop ()
      (unless (and stopping? (null? workers))
        (let ((n (epoll-wait epfd events (bytevector-address events) (timeout-ms))))
          (let lp ((i 0))
            (when (< i n)
              (let ((fd (epoll-event-fd events i)))
                (if (= fd signal-fd)
                    (on-signal (read-signal signal-fd))
                    (ready-event! fd)))
              (lp (+ i 1))))
          (run-due-timers!)
          (loop))))
    (fd-close epfd)
    (fd-close signal-fd)
    (discard-pending-signals! master-signals)
    (unblock-signals! master-signals)
    (not failed?)))

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

;;;
;;; run-server
;;;

(define* (run-server handler #:key
                     (host "127.0.0.1")
                     (port 8080)
                     (workers 1)
                     (state '())
                     (settings (make-loop-settings))
                     (sockets #f)
                     (connections '())
                     (grace 30)
                     (on-listen #f)
                     (reload #f)
                     (access-log #f)
                     (log-format 'common)
                     (error-log #f)
                     (observer #f)
                     (user #f)
                     (group #f)
                     (notify 'environment)
                     (handler-timeout 30))
  "Serve HTTP with HANDLER until SIGINT or SIGTERM.  HANDLER is called as
(HANDLER request body . STATE) and returns (values response body
. STATE), as under Guile's `run-server'.

Where: HOST and PORT (an address, a name, or \"unix:PATH\"; port 0 picks
a free one), or SOCKETS, a list of listening sockets to use instead, or
CONNECTIONS, a list of connections already accepted (descriptors, or
pairs (input . output) such as (0 . 1) for inetd): the server then
returns once they are done.  ON-LISTEN, if given, is called with the
list of listening sockets once they listen.

How: WORKERS is the number of processes serving.  With 1, this process
serves and returns the final state.  With more, it becomes a master that
forks the workers, replaces any that dies, and returns when they have
all exited: #t, or #f if none could start.  RELOAD, a thunk returning a
handler, gives the workers of each reload (SIGHUP) their handler: a
worker whose RELOAD raises or returns something else is not started, and
the old workers keep serving.  With one worker, SIGHUP calls RELOAD in
this process, which serves on with the old handler if it fails.  HANDLER
may be #f when RELOAD is given: then every worker, the first ones
included, calls RELOAD after dropping privileges.  SETTINGS holds limits and timeouts
(`make-loop-settings').  On SIGTERM or SIGINT the server drains: it
stops accepting, finishes the requests in flight and exits within GRACE
seconds; a second SIGINT stops it at once.  A handler call that runs
past HANDLER-TIMEOUT seconds (0 or #f: no limit) is interrupted and
answered with a 503; one blocked in C is logged and, with WORKERS over 1,
its worker replaced.  NOTIFY, a procedure from
`open-service-notifier' (plucky server notify), hears when the server
serves, reloads and drains, for systemd's Type=notify; by default
(environment), one is opened if the environment has NOTIFY_SOCKET, which
then leaves the environment; #f: none.

Logs: ACCESS-LOG, a file name or \"-\" for standard output, gets a line
per answer in LOG-FORMAT (common, combined or json).  ERROR-LOG, a file
name, becomes standard error.  SIGUSR1 reopens both.  OBSERVER, if given,
is told where each request's time goes (see `run-loop' and (plucky
observe accounting)).

Privileges: with USER (and GROUP, by default USER's group), the workers
become that user before they load the app or read a request; the log
files are created for that user.  Refusing to serve as root is the
caller's policy (see `plucky serve')."
  (ignore-signal! SIGPIPE)
  (let* ((identity (and user (resolve-identity user group)))
         (_ (when error-log (open-error-log! error-log #:owner identity)))
         (log (and access-log (open-access-log access-log log-format #:owner identity)))
         (inetd? (pair? connections))
         (master? (and (not inetd?) (> workers 1)))
         (own-sockets? (and (not sockets) (not inetd?)))
         (sockets (cond (inetd? '())
                        (sockets sockets)
                        (else (open-listeners host port (if master? workers 1)))))
         ;; one socket per worker (SO_REUSEPORT), or all shared
         (per-worker? (and own-sockets? (> (length sockets) 1)))
         ;; the addresses served, each once (the workers' sockets share one)
         (addresses (if per-worker? (list (car sockets)) sockets)))
    (when (and identity own-sockets?)
      ;; A Unix-domain socket bound as root: connecting takes write
      ;; permission on its file, so give it to the user who serves (a
      ;; proxy in front typically runs as that user or its group).
      (for-each (lambda (sock)
                  (let ((path (unix-listener-path sock)))
                    (when path
                      (chown path (car identity) (cdr identity)))))
                sockets))
    (unless inetd?
      (for-each (lambda (sock)
                  (log-line "listening on ~a (~a worker~a~a)" (listener-url sock)
                            workers (if (= workers 1) "" "s")
                            (if per-worker? ", a socket each with SO_REUSEPORT" "")))
                addresses))
    (trace-start-up "listening")
    (when on-listen (on-listen sockets))
    (let* ((notify (if (eq? notify 'environment)
                       (and (not inetd?) (getenv "NOTIFY_SOCKET")
                            ;; loaded only then: an #:autoload costs every
                            ;; start (bench/startup-instructions)
                            ((@ (plucky server notify) open-service-notifier)))
                       notify))
           (status (and notify
                        (format #f "serving ~a with ~a worker~a"
                                (string-join (map listener-url addresses) " ")
                                workers (if (= workers 1) "" "s"))))
           (result
            (if (not master?)
                (begin
                  (when identity (drop-privileges! identity))
                  (serve-in-this-process sockets (or handler (handler-from reload))
                                         state settings
                                         #:grace grace #:reload reload #:access-log log
                                         #:error-log error-log #:observer observer
                                         #:connections connections
                                         #:notify notify #:status status
                                         #:handler-timeout handler-timeout))
                (supervise
                 workers
                 (lambda (generation slot)
                   (let ((handler (if (and handler (or (zero? generation) (not reload)))
                                      handler
                                      (handler-from reload)))
                         (sockets (if per-worker? (list (list-ref sockets slot)) sockets)))
                     (when per-worker?
                       ;; ready to accept: connections may come to this socket now
                       (start-listening! (car sockets)))
                     (lambda ()
                       (serve-in-this-process sockets handler state settings
                                              #:worker? #t #:grace grace
                                              #:access-log log #:error-log error-log
                                              #:observer observer
                                              #:handler-timeout handler-timeout))))
                 #:prepare (and identity (lambda () (drop-privileges! identity)))
                 #:grace grace
                 #:notify notify #:status status
                 #:on-reopen (lambda ()
                               (when error-log (open-error-log! error-log #:owner identity))
                               (when log (access-log-reopen! log #:owner identity)))))))
      (when notify (notify 'close))
      (for-each (if own-sockets? close-listener close-port) sockets)
      (when log (access-log-close! log))
      result)))

;;; (plucky server) ends here
