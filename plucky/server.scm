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
;;;   master   never reads a request: starts the workers, replaces any
;;;            that dies, reloads them on SIGHUP (a new generation loads
;;;            the app; once all of it is ready the old one retires),
;;;            passes SIGTERM, SIGINT and SIGUSR1 on, and tells systemd
;;;            (Type=notify) how it goes: (plucky server workers).  A
;;;            lone process tells systemd for itself.
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
;;; same socket): the kernel spreads connections over the sockets
;;; evenly, where waking one of several processes on a shared socket
;;; (EPOLLEXCLUSIVE) gave most of them to one worker (bench/balance;
;;; figures in bench/RESULTS.md).  Sockets
;;; given by the caller or a service manager, and Unix-domain sockets,
;;; are shared by all workers instead.
;;;
;;; Code:

(define-module (plucky server)
  ;; (web response) is loaded only when needed: see (plucky http response).
  #:use-module ((srfi srfi-1) #:select (any every concatenate))
  #:use-module ((plucky http response) #:select (response-record? raw-response?
                                                 raw-response-closing))
  #:use-module (plucky sys libc)
  #:use-module (plucky sys signal)
  #:use-module ((plucky sys gc) #:select (set-free-space-divisor!))
  #:use-module (plucky http parse)
  #:use-module (plucky server loop)
  #:use-module (plucky server suspend)
  #:use-module ((plucky server respond) #:select (stream-on-thread
                                                  wait-stream-drained))
  #:use-module (plucky server socket)
  #:use-module (plucky server workers)
  ;; Loaded only when asked for: every module is start-up time.
  #:autoload (plucky server log) (open-access-log
                                  access-log-response!
                                  access-log-flush!
                                  access-log-reopen!
                                  access-log-close!
                                  open-error-log!)
  #:autoload (plucky server privileges) (resolve-identity drop-privileges!)
  #:autoload (plucky server health) (with-health)
  #:use-module ((plucky server watchdog) #:select (start-watchdog!))
  #:use-module (plucky server settings)
  ;; What the layers above use, re-exported: web/, observe/ and apps/
  ;; import this module, never the ones below (tests/dev/layers.scm).
  #:use-module ((plucky server hooks)
                #:select (make-observer-hooks note-handler-phases! take-handler-phases!
                          want-handler-phases! handler-phases-wanted?
                          note-request-route! take-request-route!))
  #:use-module ((plucky server tally)
                #:select (make-tally tally-bytes tally-countdown tally-accepted
                          tally-closed tally-http2 tally-size status-class))
  #:use-module ((plucky server transport)
                #:select (transport-read transport-write transport-close plain-transport))
  #:use-module ((plucky server numbered)
                #:select (make-numbered numbered-ref numbered-take! numbered-release!))
  #:re-export (;; the loop of this process: run-loop serves sockets in
               ;; this process, as the drop-in (web server plucky) does
               run-loop
               close-loop-connections!
               log-line
               ;; a descriptor watched by the loop, and timers, for
               ;; connections taken over from it (websockets) or a
               ;; handler's own descriptors
               loop-watch!
               loop-unwatch!
               loop-want-write!
               loop-call-after!
               loop-cancel-timer!
               loop-now-ms
               make-takeover
               takeover?
               transport-read
               transport-write
               transport-close
               plain-transport
               ;; a body the loop sends from a descriptor with sendfile(2)
               make-file-body
               file-body?
               ;; small-integer names for objects (upgrades, …)
               make-numbered
               numbered-ref
               numbered-take!
               numbered-release!
               ;; the observer's seam (plucky server hooks), and the
               ;; loop's counts (plucky server tally)
               make-observer-hooks
               note-handler-phases!
               take-handler-phases!
               want-handler-phases!
               handler-phases-wanted?
               note-request-route!
               take-request-route!
               make-tally
               tally-bytes
               tally-countdown
               tally-accepted
               tally-closed
               tally-http2
               tally-size
               status-class
               ignore-signal!
               make-loop-settings
               make-parse-limits
               ;; handlers that wait: (plucky server suspend)
               suspendable?
               wait-readable
               wait-writable
               release-descriptor!
               sleep-ms
               blocking
               make-event
               event?
               event-signal!
               event-wait
               make-channel
               channel?
               channel-put!
               channel-get
               &request-cancelled
               request-cancelled?
               request-cancelled-reason
               stream-on-thread
               wait-stream-drained
               with-body-port
               body-port-handler?
               with-connect
               connect-handler?
               stop-loop!
               drain-loop!
               current-request-scheme
               current-request-peer
               worker-pid
               open-listener
               listener-port
               supervise-workers
               trace-start-up)
  #:export (run-server
            make-server-settings))

;;;
;;; A worker: one loop in this process
;;;

;; The signal of the timer that flushes the access log.
(define tick-signal (real-time-signal 1))
;; The signal of the timer that ends the drain delay (--drain-delay-s).
(define drain-signal (real-time-signal 2))

(define (worker-signals)
  (list SIGTERM SIGINT SIGHUP SIGUSR1 SIGUSR2 tick-signal drain-signal))

(define (closing-response response)
  ;; RESPONSE (a record, a raw response or a header alist) with
  ;; Connection: close added.
  (cond
   ((raw-response? response) (raw-response-closing response))
   ((response-record? response)
      ((@ (web response) build-response)
       #:version ((@ (web response) response-version) response)
       #:code ((@ (web response) response-code) response)
       #:reason-phrase ((@ (web response) response-reason-phrase) response)
       #:headers (cons '(connection close) ((@ (web response) response-headers) response))
       #:port ((@ (web response) response-port) response)))
   (else (cons '(connection close) response))))

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
                                #:key (worker? #f) (grace (default-of 'grace-s)) (reload #f)
                                (access-log #f) (error-log #f) (connections '())
                                (observer #f) (notify #f) (status "serving")
                                (make-transport #f)
                                (handler-timeout (default-of 'handler-timeout-s))
                                (health-path #f) (drain-delay 0))
  ;; Run the loop on SOCKETS (or CONNECTIONS) until it drains or stops;
  ;; -> the handler's final state.  WORKER? says a master started this
  ;; process (it shares the sockets: EPOLLEXCLUSIVE).  With RELOAD (a
  ;; single process, no master), SIGHUP loads the app again here; the old
  ;; handler serves until the new one is loaded, and on if it fails to
  ;; load.  NOTIFY (from `open-service-notifier'), if given, hears that
  ;; this process serves (with STATUS), reloads and drains.  With
  ;; DRAIN-DELAY seconds, SIGTERM first makes HEALTH-PATH answer 503 and
  ;; every answer say Connection: close while the loop accepts on, so
  ;; that a load balancer's checks take the host out before it stops
  ;; accepting; the drain (GRACE) starts when the delay is over.
  (stop-finalizer-thread!)
  (block-signals! (worker-signals))
  (let ((signal-fd (open-signalfd (worker-signals)))
        (timer (and access-log (make-signal-timer tick-signal)))
        (served 0)
        (retiring? #f)
        (draining? #f)                  ; SIGTERM came, the drain delay runs
        (drain-timer #f)
        (interrupted? #f))
    (define counting-handler
      ;; Counts requests (logged at exit: how evenly workers share the
      ;; load) and, once the worker retires, closes each connection after
      ;; its answer.  The two-argument case makes no list: the loop calls
      ;; it so when there is no state.
      (case-lambda
        ((request body)
         (set! served (+ served 1))
         (if (or retiring? draining?)
             (call-with-values (lambda () (handler request body)) closing)
             (handler request body)))
        ((request body . state)
         (set! served (+ served 1))
         (if (or retiring? draining?)
             (call-with-values (lambda () (apply handler request body state)) closing)
             (apply handler request body state)))))
    (define (on-signal signal)
      (cond
       ((= signal SIGTERM)
        (cond
         ((and (> drain-delay 0) (not draining?) (not interrupted?))
          (when notify (notify 'stopping))
          (log-line "SIGTERM: ~a draining in ~a s" (if health-path
                                                       (string-append health-path
                                                                      " answers 503,")
                                                       "serving on,")
                    drain-delay)
          (set! draining? #t)
          (set! drain-timer (make-signal-timer drain-signal))
          (set-signal-timer! drain-timer drain-delay))
         (draining? #t)                 ; the delay runs: it ends in a drain
         (else
          (when notify (notify 'stopping))
          (drain-loop! grace))))
       ((= signal drain-signal)
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
                           (let ((handler
                                  ;; CONNECT as the app answers it
                                  (if (connect-handler? handler)
                                      (with-connect counting-handler)
                                      counting-handler)))
                             (if health-path
                                 (with-health handler health-path (lambda () draining?))
                                 handler))
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
                           #:observer observer
                           #:handler-timeout handler-timeout
                           #:make-transport make-transport)))
      (when timer
        (delete-signal-timer! timer))
      (when drain-timer
        (delete-signal-timer! drain-timer))
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
;;; run-server
;;;

(define (open-groups listen count)
  ;; -> the sockets of each address of LISTEN, COUNT each where
  ;; SO_REUSEPORT spreads them; those opened are closed if one fails
  (let lp ((listen listen) (groups '()))
    (if (null? listen)
        (reverse groups)
        (lp (cdr listen)
            (cons (with-exception-handler
                      (lambda (exception)
                        (for-each (lambda (g) (for-each close-listener g)) groups)
                        (raise-exception exception))
                    (lambda ()
                      (open-listeners (car (car listen)) (cadr (car listen)) count)))
                  groups)))))

(define (settings->loop-settings setting)
  ;; -> the <loop-settings> of the settings SETTING gives (a procedure of
  ;; a setting's name, see `keyword-settings'), in make-loop-settings'
  ;; seconds
  (make-loop-settings
   #:parse-limits (make-parse-limits
                   #:max-request-line (setting 'max-request-line-bytes)
                   #:max-header-bytes (setting 'max-header-bytes)
                   #:max-header-count (setting 'max-header-count))
   #:max-body (setting 'max-body-bytes)
   #:max-connections (setting 'max-connections)
   #:max-threads (setting 'max-threads)
   #:keep-alive-timeout (setting 'keep-alive-timeout-s)
   #:header-timeout (setting 'header-timeout-s)
   #:body-timeout (setting 'body-timeout-s)
   #:write-timeout (setting 'write-timeout-s)))

(define (make-server-settings . arguments)
  "Return the settings of a worker loop (its limits and timeouts, for
`run-loop' or `run-server''s #:settings) that ARGUMENTS give: keywords of
the settings of (plucky server settings) whose scope is loop or parse
(#:max-body-bytes, #:keep-alive-timeout-s …), each other one its default.
A keyword that names no such setting, or a value out of range, raises an
error naming both."
  (settings->loop-settings
   (keyword-settings 'make-server-settings arguments #:scopes '(loop parse))))

;; The keywords of `run-server' that are not settings: what to serve and
;; with what, not how.
(define plumbing-keywords
  '(#:state #:settings #:sockets #:connections #:on-listen #:reload #:observer
    #:notify #:tls #:listen #:watch))

(define (run-server-settings arguments settings)
  ;; -> the procedure of a setting's name that gives its value in
  ;; ARGUMENTS, `run-server''s, or its default (see `keyword-settings');
  ;; an error if SETTINGS, a record, is given with limits or timeouts
  (when (and settings
             (let lp ((rest arguments))
               (and (pair? rest) (pair? (cdr rest))
                    (or (let ((s (and (not (memq (car rest) plumbing-keywords))
                                      (find-setting (keyword->symbol (car rest))))))
                          (and s (memq (setting-scope s) '(loop parse)) #t))
                        (lp (cddr rest))))))
    (error "run-server: give #:settings or the limits and timeouts by keyword, not both"))
  (keyword-settings 'run-server arguments #:except plumbing-keywords))

(define* (run-server handler #:key
                     (state '())
                     (settings #f)
                     (sockets #f)
                     (connections '())
                     (on-listen #f)
                     (reload #f)
                     (observer #f)
                     (notify 'environment)
                     (tls #f)
                     (listen #f)
                     (watch #f)
                     #:allow-other-keys
                     #:rest arguments)
  "Serve HTTP with HANDLER until SIGINT or SIGTERM.  HANDLER is called as
(HANDLER request body . STATE) and returns (values response body
. STATE), as under Guile's `run-server'.

Settings: every setting of (plucky server settings) whose scope is
server, loop or parse, by its keyword: #:host, #:port, #:workers,
#:grace-s, #:handler-timeout-s, #:gc-free-space-divisor, #:user, #:group, #:access-log,
#:log-format, #:error-log, and the limits and timeouts, #:max-body-bytes,
#:keep-alive-timeout-s … (`plucky serve --help' lists them with their
defaults and ranges; the names before units were added, #:grace,
#:max-body …, are accepted too).  A keyword that names no setting, or a
value out of its setting's range, raises an error naming both.  SETTINGS,
a record of `make-loop-settings', replaces the loop's settings (the
limits and timeouts) as a whole.

Where: HOST and PORT (an address, a name, or \"unix:PATH\"; port 0 picks
a free one), or LISTEN, a list of addresses (HOST PORT TLS?) to listen
on each, or SOCKETS, a list of listening sockets to use instead, or
CONNECTIONS, a list of connections already accepted (descriptors, or
pairs (input . output) such as (0 . 1) for inetd): the server then
returns once they are done.  ON-LISTEN, if given, is called with the
list of listening sockets once they listen.

How: WORKERS is the number of processes serving.  With 1, this process
serves and returns the final state.  With more, it becomes a master that
forks the workers, replaces any that dies, and returns when they have
all exited: #t, or #f if none could start.  WATCH, a <change-watch>
(see `make-change-watch' in (plucky server workers)), makes it a master
even with one worker, which reloads when WATCH says files changed.  RELOAD, a thunk returning a
handler, gives the workers of each reload (SIGHUP) their handler: a
worker whose RELOAD raises or returns something else is not started, and
the old workers keep serving.  With one worker, SIGHUP calls RELOAD in
this process, which serves on with the old handler if it fails.  HANDLER
may be #f when RELOAD is given: then every worker, the first ones
included, calls RELOAD after dropping privileges.  On SIGTERM or SIGINT
the server drains: it stops accepting, finishes the requests in flight
and exits within GRACE-S seconds; a second SIGINT stops it at once.
HEALTH-PATH, a path, is answered by the server itself: 200 while it
serves, 503 from SIGTERM on; DRAIN-DELAY-S seconds after SIGTERM the
server keeps accepting (every answer saying Connection: close) before it
drains, for a load balancer's checks to take it out first.  A
handler call that runs past HANDLER-TIMEOUT-S seconds (0 or #f: no
limit) is interrupted and
answered with a 503; one blocked in C is logged and, with WORKERS over 1,
its worker replaced.  NOTIFY, a procedure from
`open-service-notifier' (plucky server notify), hears when the server
serves, reloads and drains, for systemd's Type=notify; by default
(environment), one is opened if the environment has NOTIFY_SOCKET, which
then leaves the environment; #f: none.

Logs: ACCESS-LOG, a file name or \"-\" for standard output, gets a line
per answer in LOG-FORMAT (combined, common or json).  ERROR-LOG, a file
name, becomes standard error.  SIGUSR1 reopens both.  OBSERVER, if given,
is told where each request's time goes (see `run-loop' and (plucky
observe accounting)).

TLS: TLS, if given, is a thunk returning the procedure of a connection's
descriptor that gives its transport (see `tls-transport-maker' in
(plucky server tls)): every connection is then HTTPS, or, with LISTEN,
those of the addresses whose TLS? is true.  Each worker calls
it as it starts, after dropping privileges, so that the workers of a
reload read the certificates afresh.

Privileges: with USER (and GROUP, by default USER's group), the workers
become that user before they load the app or read a request; the log
files are created for that user.  Refusing to serve as root is the
caller's policy (see `plucky serve')."
  (define setting (run-server-settings arguments settings))
  (ignore-signal! SIGPIPE)
  (let* ((host (setting 'host))
         (port (setting 'port))
         (workers (setting 'workers))
         (grace (setting 'grace-s))
         (health-path (setting 'health-path))
         (drain-delay (setting 'drain-delay-s))
         (handler-timeout (setting 'handler-timeout-s))
         ;; before the workers fork: they inherit libgc's settings
         (_ (let ((divisor (setting 'gc-free-space-divisor)))
              (when divisor (set-free-space-divisor! divisor))))
         (user (setting 'user))
         (group (setting 'group))
         (access-log (setting 'access-log))
         (log-format (setting 'log-format))
         (error-log (setting 'error-log))
         (settings (or settings (settings->loop-settings setting)))
         (identity (and user (resolve-identity user group)))
         (_ (when error-log (open-error-log! error-log #:owner identity)))
         (log (and access-log (open-access-log access-log log-format #:owner identity)))
         (inetd? (pair? connections))
         (master? (and (not inetd?) (or (> workers 1) (and watch #t))))
         (own-sockets? (and (not sockets) (not inetd?)))
         ;; (HOST PORT TLS?) each; TLS? #t: HTTPS when TLS is given
         (listen (or listen (list (list host port #t))))
         ;; the sockets of each address: one per worker (SO_REUSEPORT),
         ;; or one shared
         (groups (cond (inetd? '())
                       (sockets (list sockets))
                       (else (open-groups listen (if master? workers 1)))))
         (sockets (concatenate groups))
         (per-worker? (and own-sockets? (any (lambda (g) (> (length g) 1)) groups)))
         ;; the addresses served, each once (the workers' sockets share one)
         (addresses (if own-sockets? (map car groups) sockets))
         (secure? (lambda (sock)
                    (and tls (or (not own-sockets?)
                                 (let lp ((groups groups) (listen listen))
                                   (if (memq sock (car groups))
                                       (caddr (car listen))
                                       (lp (cdr groups) (cdr listen))))))))
         (make-transport
          ;; for `run-loop', given the worker's sockets: the maker for all,
          ;; or, when only some speak TLS, a maker per listener
          (lambda (sockets maker)
            (cond
             ((not maker) #f)
             ((every secure? sockets) maker)
             (else (map (lambda (sock) (cons (port->fdes sock) (and (secure? sock) maker)))
                        sockets)))))
         (worker-sockets (lambda (slot)
                           (if per-worker?
                               (map (lambda (g) (if (> (length g) 1) (list-ref g slot) (car g)))
                                    groups)
                               sockets))))
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
                  (log-line "listening on ~a (~a worker~a~a)"
                            (let ((url (listener-url sock)))
                              (if (and (secure? sock) (string-prefix? "http:" url))
                                  (string-append "https:" (substring url 5))
                                  url))
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
                                         #:make-transport (make-transport
                                                           sockets (and tls (tls)))
                                         #:grace grace #:reload reload #:access-log log
                                         #:error-log error-log #:observer observer
                                         #:connections connections
                                         #:notify notify #:status status
                                         #:handler-timeout handler-timeout
                                         #:health-path health-path
                                         #:drain-delay drain-delay))
                (supervise
                 workers
                 (lambda (generation slot)
                   (let ((handler (if (and handler (or (zero? generation) (not reload)))
                                      handler
                                      (handler-from reload)))
                         (sockets (worker-sockets slot))
                         (make-transport (make-transport (worker-sockets slot)
                                                         (and tls (tls)))))
                     (when per-worker?
                       ;; ready to accept: connections may come to these sockets now
                       (for-each start-listening! sockets))
                     (lambda ()
                       (serve-in-this-process sockets handler state settings
                                              #:worker? #t #:grace grace
                                              #:access-log log #:error-log error-log
                                              #:observer observer
                                              #:make-transport make-transport
                                              #:handler-timeout handler-timeout
                                              #:health-path health-path
                                              #:drain-delay drain-delay))))
                 #:prepare (and identity (lambda () (drop-privileges! identity)))
                 ;; the master kills a worker still there after this
                 #:grace (+ grace drain-delay)
                 #:notify notify #:status status #:watch watch
                 #:on-reopen (lambda ()
                               (when error-log (open-error-log! error-log #:owner identity))
                               (when log (access-log-reopen! log #:owner identity)))))))
      (when notify (notify 'close))
      (for-each (if own-sockets? close-listener close-port) sockets)
      (when log (access-log-close! log))
      result)))

;;; (plucky server) ends here
