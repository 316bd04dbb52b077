;;; (plucky server loop) --- one worker's epoll event loop

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; One worker process runs one `run-loop': a single thread that asks
;;; epoll which descriptors are ready, and says so to whom they belong.
;;; It knows nothing of HTTP: what a connection does when its descriptor
;;; is ready, its deadline passes or a thread gives it back is decided
;;; by (plucky server http1), every transition of its state there.  A
;;; request flows through these modules, in this order:
;;;
;;;   here: epoll_wait -> accept-ready! (a listener): accept4, then
;;;                       `connection-accepted!'
;;;                    -> `connection-ready!' (a connection's descriptor)
;;;                    -> `watchers-ready!' (a descriptor a handler or a
;;;                       takeover waits on: plucky server watch)
;;;   (plucky server http1)       reads, parses each request (plucky
;;;                               http parse), calls `respond!' and does
;;;                               what its answer calls for
;;;   (plucky server respond)     calls the handler (which may suspend:
;;;                               plucky server suspend) and appends its
;;;                               answer to the loop's output buffer
;;;                               (plucky http response)
;;;   (plucky server output)      sends it: one write(2) for the answers
;;;                               one read produced
;;;
;;; (plucky server pool) serves on threads what cannot be answered
;;; without blocking (bodies read from ports, streamed answers that
;;; block), and gives the connection back here (`job-done!').
;;;
;;; Here also are the timers.  Every connection has a deadline, in
;;; milliseconds of a monotonic clock: idle keep-alive connections, heads
;;; that take too long to arrive, bodies that stall, answers the client
;;; does not read.  epoll_wait sleeps until the loop's next sweep, which
;;; is no later than the earliest deadline set (see `set-deadline!') nor a
;;; second away; the sweep closes the connections whose deadline passed
;;; and finds the next earliest.  So a timeout fires within milliseconds
;;; of its setting, and a busy loop sweeps only when a deadline is due.
;;;
;;; Code:

(define-module (plucky server loop)
  #:use-module (srfi srfi-9)
  #:use-module (rnrs bytevectors)
  #:use-module (web request)
  #:use-module ((web uri) #:select (uri-path))
  #:use-module (plucky sys libc)
  #:use-module (plucky sys epoll)
  #:use-module ((plucky sys signal) #:select (read-signal run-finalizers!))
  #:use-module ((plucky http date) #:select (refresh-date-line!))
  #:use-module ((plucky http response) #:select (make-output))
  #:use-module (plucky server hooks)
  #:use-module ((plucky server probe)
                #:select (sampling? probe-accepted! probe-on-response))
  #:use-module (plucky server transport)
  #:use-module (plucky server connection)
  #:use-module (plucky server pool)
  #:use-module (plucky server respond)
  #:use-module (plucky server http1)
  #:use-module (plucky server watch)
  #:use-module (plucky server suspend)
  #:use-module (plucky server compute)
  ;; Loaded by the first HTTP/2 connection (bench/startup).
  #:autoload (plucky server http2) (http2-drain! http2-stop!)
  #:autoload (ice-9 threads) (current-thread)
  #:re-export (loop-watch!
               loop-want-write!
               loop-unwatch!
               loop-registered-count
               loop-watching?
               loop-call-after!
               loop-cancel-timer!
               loop-now-ms
               make-loop-settings
               loop-settings?
               %default-loop-settings
               with-body-port
               body-port-handler?
               with-connect
               connect-handler?
               make-file-body
               file-body?
               make-takeover
               takeover?)
  #:export (run-loop
            stop-loop!
            drain-loop!
            stop-accepting!
            log-line
            current-request-peer
            current-request-scheme
            worker-pid
            close-loop-connections!))

;;;
;;; Asking the loop of this process
;;;


;; What only the loop's own rounds read, apart from the state the
;; connections are served with (<loop>, plucky server connection),
;; private to this module.
(define-record-type <poller>
  (%make-poller loop listeners events events-address running? paused?
                exclusive? exit-when-idle? drain-request peer-buffer signal-fd
                on-signal accept-resume make-transport)
  poller?
  (loop poller-loop)                         ; the <loop>
  (listeners poller-listeners)               ; list of listening descriptors
  (events poller-events)                     ; epoll_event buffer
  (events-address poller-events-address)
  (running? poller-running? set-poller-running!)
  (paused? poller-paused? set-poller-paused!) ; listeners unwatched: at capacity
  (exclusive? poller-exclusive?)             ; listeners watched with EPOLLEXCLUSIVE
  (exit-when-idle? poller-exit-when-idle?)   ; return once no connection is left
  ;; seconds of grace asked for by drain-loop!, not yet acted on, or #f
  (drain-request poller-drain-request set-poller-drain-request!)
  (peer-buffer poller-peer-buffer)           ; (sockaddr . its address) for accept4
  (signal-fd poller-signal-fd)               ; #f or a signalfd, watched by epoll
  (on-signal poller-on-signal)               ; signal number -> _, on the loop's thread
  (accept-resume poller-accept-resume set-poller-accept-resume!) ; ms to accept again
  ;; #f, or fd -> <transport>, or ((listener . #f or fd -> <transport>) …)
  (make-transport poller-make-transport))

(define* (make-poller #:key loop listeners events exclusive? exit-when-idle?
                      signal-fd on-signal make-transport)
  (let ((peer-buffer (make-bytevector 136 0)))
    (%make-poller loop listeners events (bytevector-address events) #t #f
                  exclusive? exit-when-idle? #f
                  (cons peer-buffer (bytevector-address peer-buffer))
                  signal-fd on-signal 0 make-transport)))

(define (transport-for p listener fd)
  ;; The transport of FD, accepted on LISTENER: by MAKE-TRANSPORT, for
  ;; every listener or this one (a server with HTTP and HTTPS ports).
  (let ((make (poller-make-transport p)))
    (cond
     ((not make) plain-transport)
     ((procedure? make) (make fd))
     ((assv-ref make listener) => (lambda (make) (make fd)))
     (else plain-transport))))

(define max-events 256)

;; The <poller> running in this process, if any.
(define current-poller #f)

;; This process's PID while a loop runs in it, read once as the loop
;; starts (a worker's, after its fork); #f otherwise.
(define loop-pid #f)

(define (worker-pid)
  "Return the PID of this process: while a loop runs in it (a worker,
which starts its loop once forked), the PID read as the loop started,
without a system call; elsewhere getpid's.  For what a process must not
share with its parent (a connection pool, a random state), checked once
a request."
  (or loop-pid (getpid)))

(define (stop-loop!)
  "Ask the loop running in this process to close its connections and
return.  Safe to call from a signal handler."
  (let ((p current-poller))
    (when p
      (set-poller-running! p #f)
      (wake! (poller-loop p)))))

(define (current-connection)
  ;; -> the connection whose request the calling handler answers, or #f
  (or (fluid-ref thread-connection)     ; on a thread (see run-job!)
      (let ((p current-poller))
        (and p (loop-serving (poller-loop p))))))

(define (current-request-scheme)
  "Return the scheme of the request the calling handler is answering:
https when its connection speaks TLS, http otherwise, or #f outside a
handler.  A server with HTTP and HTTPS listeners tells them apart so."
  (let ((conn (current-connection)))
    (and conn
         (if (eq? (connection-transport conn) plain-transport) 'http 'https))))

(define (current-request-peer)
  "Return the address of the client whose request the calling handler is
answering, as a string (\"127.0.0.1\", \"::1\", \"unix\"), or #f outside
a handler or when the connection's socket has no peer (inetd's standard
input may be a pipe)."
  (let* ((conn (current-connection))
         (peer (and conn (connection-peer conn))))
    (cond
     ;; an IPv4 address kept as a number (see sockaddr->peer)
     ((integer? peer)
      (let ((text (inet-ntop AF_INET peer)))
        (set-connection-peer! conn text)
        text))
     (peer peer)
     ;; Learnt at accept only when the loop has an ON-RESPONSE or
     ;; OBSERVER (see `run-loop'): ask the socket (a proxy's
     ;; X-Forwarded-For, plucky web proxy), once a connection.
     (conn (let ((peer (fd-peer-address (connection-fd conn))))
             (when peer (set-connection-peer! conn peer))
             peer))
     (else #f))))

(define (drain-loop! grace)
  "Ask the loop running in this process to drain: stop accepting, close
idle connections, answer the requests in flight (with Connection: close),
and return once no connection is left or GRACE seconds have passed.  Safe
to call from a signal handler."
  (let ((p current-poller))
    (when p
      (set-poller-drain-request! p grace)
      (wake! (poller-loop p)))))

(define (stop-accepting!)
  "Make the loop running in this process stop accepting connections, for
good, and serve on those it has; for a worker that retires while its
successor, on the same listening sockets, takes every new connection
(once the master has said a reload is over, no new connection may reach
the old code).  Call it from the loop's own turn: a signal it reads from
its signalfd, or a handler the loop runs itself (not one on a thread, as
a `with-body-port' handler is)."
  (let ((p current-poller))
    (when p
      (pause-accepting! p)
      ;; never resumed: see the end of a round in `serve-rounds'
      (set-poller-accept-resume! p +inf.0))))

;;;
;;; Logging
;;;

(define (log-line fmt . args)
  "Write \"plucky: \" and FMT formatted with ARGS (as `format') to the
current error port, as one line, and flush it."
  (let ((port (current-error-port)))
    (apply format port (string-append "plucky: " fmt "~%") args)
    (force-output port)))

;;;
;;; Accepting
;;;

(define (sockaddr->peer sockaddr)
  ;; The client's address for the observer, who asks for it only on its
  ;; own pages (current-request-peer): an IPv4 address as its number,
  ;; made a string when asked: inet-ntop on every connection is a large
  ;; share of accounting's cost (bench/instructions, load close).
  (if (= (bytevector-u16-native-ref sockaddr 0) AF_INET)
      (bytevector-u32-ref sockaddr 4 (endianness big))
      (sockaddr->string sockaddr)))

(define (accept-ready! p listener)
  (let* ((loop (poller-loop p))
         (settings (loop-settings loop)))
    (let lp ((n 0))
      (when (and (< n 64) (not (poller-paused? p)))
        (when (>= (loop-count loop) (settings-max-connections settings))
          ;; At capacity: stop watching the listeners (a level-triggered
          ;; listener would wake us in a busy loop) until some close.
          (pause-accepting! p))
        (let* ((start (and (sampling? (loop-probe loop)) (clock)))
               (fd (cond
                   ((poller-paused? p) (- errno-EAGAIN))
                   ((loop-probe loop)
                    ;; Someone logs or watches requests: learn who the
                    ;; client is.
                    (let ((buffer (poller-peer-buffer p)))
                      (bytevector-u32-native-set! (car buffer) 128 128)
                      (fd-accept/peer listener (car buffer) (cdr buffer)
                                      (+ (cdr buffer) 128))))
                   (else (fd-accept listener)))))
          (cond
           ((>= fd 0)
            (let ((conn (make-connection
                         #:fd fd
                         #:deadline never
                         #:transport (transport-for p listener fd)
                         #:peer (let ((probe (loop-probe loop)))
                                  (cond
                                   ((not probe) #f)
                                   ((probe-on-response probe)
                                    (sockaddr->string (car (poller-peer-buffer p))))
                                   (else
                                    (sockaddr->peer (car (poller-peer-buffer p)))))))))
              (set-deadline! loop conn (settings-header-ms settings))
              (register-connection! loop conn)
              (let ((probe (loop-probe loop)))
                (when probe (probe-accepted! probe start)))
              (connection-accepted! loop conn))
            (lp (+ n 1)))
           ((= fd (- errno-EAGAIN)) #t)
           ((or (= fd (- errno-EMFILE)) (= fd (- errno-ENFILE)))
            ;; Out of descriptors: the pending connection stays queued in
            ;; the kernel and the listener stays readable, so watching it
            ;; would spin (tests/regress/out-of-descriptors-spins).  Stop
            ;; watching it for a second; the sweep after that resumes.
            (log-line "accept: ~a; not accepting for a second" (errno->string fd))
            (pause-accepting! p)
            (set-poller-accept-resume! p (+ (loop-now loop) 1000)))
           (else
            ;; ECONNABORTED and friends concern one client only.
            (lp (+ n 1)))))))))

(define (pause-accepting! p)
  (unless (poller-paused? p)
    (for-each (lambda (fd) (epoll-remove! (loop-epfd (poller-loop p)) fd))
              (poller-listeners p))
    (set-poller-paused! p #t)))

;;;
;;; Connections back from the pool
;;;

(define (expire-queued-jobs! loop)
  ;; A request that waits for a thread longer than the body time-out
  ;; (every thread busy: slow uploads, long streams) is answered 503
  ;; rather than kept waiting without end.
  (let ((pool (loop-pool loop)))
    (when pool
      (let ((oldest (- (loop-now loop)
                       (settings-body-ms (loop-settings loop)))))
        (for-each (lambda (job)
                    (log-line "no thread for ~a ~a in ~a s: 503"
                              (request-method (job-request job))
                              (uri-path (request-uri (job-request job)))
                              (/ (settings-body-ms (loop-settings loop)) 1000))
                    (job-expired! loop job))
                  (take-expired-jobs! pool oldest))))))

(define (finish-jobs! loop)
  ;; On the loop's thread: take back the connections threads are done
  ;; with.
  (let ((pool (loop-pool loop)))
    (when pool
      (for-each (lambda (job) (job-done! loop job)) (take-done-jobs! pool)))))

;;;
;;; What suspended handlers wait with
;;;

(define (loop-waits loop)
  ;; -> the <waits> (plucky server suspend) of LOOP, on this thread
  (make-waits
   loop-await-fd!
   loop-unwatch!
   loop-call-after!
   loop-cancel-timer!
   (lambda (thunk on-done)
     (let ((tasks (loop-tasks loop)))
       (compute-submit!
        (or (tasks-compute tasks)
            (let ((compute (make-compute
                            #:max-threads (settings-max-threads (loop-settings loop))
                            #:wake (lambda () (wake! loop)))))
              (set-tasks-compute! tasks compute)
              compute))
        thunk on-done)))
   (current-thread)))

;;;
;;; Timeouts
;;;

(define sweep-slack
  ;; ms: a sweep is O(connections), so the next one is at least this far
  ;; off, whatever the deadlines; a timeout fires at most this late.
  50)

(define (sweep! loop now cap)
  ;; Close every connection whose deadline has passed, and make the next
  ;; sweep the earliest deadline left, CAP (ms) at the latest.
  (set-loop-next-sweep! loop cap)
  (let ((table (loop-connections loop)))
    (let lp ((fd 0))
      (when (< fd (vector-length table))
        (let ((conn (vector-ref table fd)))
          (when conn
            (let ((deadline (connection-deadline conn)))
              (if (> deadline now)
                  (when (< deadline (loop-next-sweep loop))
                    (set-loop-next-sweep! loop deadline))
                  (connection-expired! loop conn)))))
        (lp (+ fd 1)))))
  (set-loop-next-sweep! loop (max (loop-next-sweep loop) (+ now sweep-slack))))

(define (tick! loop)
  ;; About once a second: run the finalizers Guile's finalizer thread
  ;; would run, had we not stopped it (see (plucky sys signal)); answer
  ;; the jobs that waited too long for a thread; tell the observer.
  (run-finalizers!)
  (expire-queued-jobs! loop)
  (let ((observer (loop-observer loop)))
    (when observer ((observer-hooks-on-tick observer)))))

;;;
;;; The loop
;;;

(define (watch-listeners! p)
  (for-each (lambda (fd)
              (epoll-add! (loop-epfd (poller-loop p)) fd
                          (if (poller-exclusive? p)
                              (logior EPOLLIN EPOLLEXCLUSIVE)
                              EPOLLIN)))
            (poller-listeners p)))

(define* (run-loop listeners handler #:key (state '())
                   (settings %default-loop-settings)
                   (exclusive? #f)
                   (connections '())
                   (exit-when-idle? #f)
                   (on-response #f)
                   (signal-fd #f)
                   (on-signal #f)
                   (observer #f)
                   (make-transport #f)
                   (handler-timeout #f)
                   (body-port? (body-port-handler? handler)))
  "Serve connections arriving on LISTENERS (a list of listening,
non-blocking socket descriptors) with HANDLER until `stop-loop!' is
called or a drain (`drain-loop!') completes.  HANDLER is called as
(HANDLER request body . STATE) and returns (values response body
. STATE), as with Guile's `run-server'.  Return the final state.

EXCLUSIVE? asks epoll to wake only one of several processes waiting on
the same listener.  CONNECTIONS are connections already accepted, each a
descriptor or a pair (input-descriptor . output-descriptor), as inetd
passes stdin and stdout.  EXIT-WHEN-IDLE? returns as soon as no
connection is left.  ON-RESPONSE, if given, is called after each answer
as (ON-RESPONSE peer request code bytes): PEER the client's address,
REQUEST #f for a request refused before it reached the handler, BYTES
the size of the whole answer.  SIGNAL-FD, a signalfd (plucky sys
signal), is watched with the connections; ON-SIGNAL is called on the
loop's thread with each signal number read from it, and may call
`drain-loop!' or `stop-loop!'.

BODY-PORT? (by default: whether HANDLER was made by `with-body-port')
makes the loop call HANDLER with each request body that is not empty as
an input port, on a thread (see `with-body-port').

OBSERVER, if given, is a record of hooks (plucky server hooks) told
where the time goes, on the loop's thread: see `make-observer-hooks'.

MAKE-TRANSPORT, if given, is called with each accepted descriptor and
returns the transport (plucky server transport) the loop reads, writes
and closes it through; by default, `plain-transport'.  It may also be an
alist of listeners' descriptors and such procedures (or #f for plain),
when the listeners do not all speak the same protocol.

A handler may suspend (plucky server suspend): its worker serves other
requests until its wait ends.  HANDLER-TIMEOUT, seconds or #f, gives up
a request that has not answered that long after it first suspended
(503); the watchdog (plucky server watchdog) bounds the time it runs."
  (let* ((epfd (epoll-create))
         (events (make-epoll-events max-events))
         (input (make-bytevector input-size))
         (wake-ports (pipe))
         (loop (make-loop #:epfd epfd #:connections (make-vector 1024 #f)
                          #:input input #:output (make-output)
                          #:handler handler #:state state #:settings settings
                          #:now (clock-ms) #:on-response on-response
                          #:wake-ports wake-ports #:observer observer
                          #:body-port? body-port?
                          #:tasks (make-tasks #:handler-timeout handler-timeout)))
         (p (make-poller #:loop loop #:listeners listeners #:events events
                         #:exclusive? exclusive? #:exit-when-idle? exit-when-idle?
                         #:signal-fd signal-fd #:on-signal on-signal
                         #:make-transport make-transport)))
    (for-each (lambda (port)
                (fcntl port F_SETFL (logior O_NONBLOCK (fcntl port F_GETFL))))
              (list (car wake-ports) (cdr wake-ports)))
    (epoll-add! epfd (port->fdes (car wake-ports)) EPOLLIN)
    (when signal-fd
      (epoll-add! epfd signal-fd EPOLLIN))
    (watch-listeners! p)
    (for-each (lambda (spec)
                (let* ((in (if (pair? spec) (car spec) spec))
                       (out (if (pair? spec) (cdr spec) spec))
                       (conn (make-connection #:fd in #:out-fd out #:deadline never)))
                  (set-deadline! loop conn (settings-header-ms settings))
                  (fd-set-nonblocking! in)
                  (fd-set-nonblocking! out)
                  (register-connection! loop conn)
                  (watch! loop conn EPOLLIN)))
              connections)
    (set! current-poller p)
    (set! loop-pid (getpid))
    (set-current-watchers! (make-watchers epfd (lambda () (loop-now loop))))
    (install-waits! (loop-waits loop))
    (with-handler-errors-caught loop
      (lambda ()
        (serve-rounds p)
        ;; Still under the handler of handlers' errors: the requests
        ;; given up here unwind, and may raise as they do.
        (cancel-all-tasks! loop)))
    (close-all! loop)
    (loop-state loop)))

(define (start-drain! p grace)
  ;; Stop accepting, close the connections that wait for a request, and
  ;; give the others GRACE seconds to finish.
  (let ((loop (poller-loop p)))
    (set-poller-drain-request! p #f)
    (unless (loop-drain-deadline loop)
      (pause-accepting! p)
      ;; + 1: the clock is in whole milliseconds (see `set-deadline!')
      (set-loop-drain-deadline! loop (+ (loop-now loop) (* 1000 grace) 1))
      (let ((table (loop-connections loop)))
        (let lp ((fd 0))
          (when (< fd (vector-length table))
            (let ((conn (vector-ref table fd)))
              (when conn
                (cond ((connection-idle? conn) (close-connection! loop conn))
                      ((connection-http2? conn) (http2-drain! loop conn)))))
            (lp (+ fd 1))))))))

(define (refresh-date! now)
  ;; Remake the Date line for the wall clock's second.  -> the loop
  ;; clock's ms when that second ends: the wall clock is asked once a
  ;; second, not every round (bench/instructions).
  (let ((time (gettimeofday)))
    (refresh-date-line! (car time))
    (+ now (- 1000 (quotient (cdr time) 1000)))))

(define (serve-rounds p)
  (let* ((loop (poller-loop p))
         (epfd (loop-epfd loop))
         (events (poller-events p))
         (listeners (poller-listeners p))
         (wake-fd (port->fdes (car (loop-wake-ports loop)))))
    (let round ((last-tick (loop-now loop)) (next-date 0))
      (when (poller-running? p)
        (let* ((timeout (if (tasks-waiting? loop)
                            0
                            ;; With timers, from the clock now, not the
                            ;; round's start: a long round (one that resumed
                            ;; many streams) would make every timer late by
                            ;; its length (bench/sse, its period column).
                            ;; Without, the round's start: a clock read a
                            ;; round less (bench/instructions-real).
                            (- (loop-next-sweep loop)
                               (if (watchers-timers? (current-watchers))
                                   (clock-ms)
                                   (loop-now loop)))))
               (n (epoll-wait epfd events (poller-events-address p)
                              (if (< timeout 0) 0 timeout)))
               (now (clock-ms))
               (next-date (if (>= now next-date) (refresh-date! now) next-date)))
          (set-loop-now! loop now)
          (let ((grace (poller-drain-request p)))
            (when grace (start-drain! p grace)))
          (let lp ((i 0))
            (when (< i n)
              (let ((fd (epoll-event-fd events i))
                    (flags (epoll-event-flags events i)))
                (cond
                 ((memv fd listeners)
                  (accept-ready! p fd))
                 ((= fd wake-fd)
                  ;; Whoever woke us set a flag or finished a job; empty
                  ;; the pipe.
                  (fd-read wake-fd (loop-input-address loop) 0 input-size)
                  (finish-jobs! loop)
                  (let ((compute (tasks-compute (loop-tasks loop))))
                    (when compute (take-compute-done! compute))))
                 ((eqv? fd (poller-signal-fd p))
                  ((poller-on-signal p) (read-signal fd))
                  (let ((grace (poller-drain-request p)))
                    (when grace (start-drain! p grace))))
                 (else
                  (let ((conn (connection-ref loop fd)))
                    (if conn
                        (connection-ready! loop conn flags)
                        ;; a takeover's descriptor (plucky server watch)
                        (watchers-ready! (current-watchers) fd flags))))))
              (lp (+ i 1))))
          (cond
           ((loop-drain-deadline loop)
            (when (or (zero? (loop-count loop))
                      (>= now (loop-drain-deadline loop)))
              (set-poller-running! p #f)))
           ((and (poller-exit-when-idle? p) (zero? (loop-count loop)))
            (set-poller-running! p #f))
           ((and (poller-paused? p)
                 (< (loop-count loop)
                    (settings-max-connections (loop-settings loop)))
                 (>= now (poller-accept-resume p)))
            (set-poller-paused! p #f)
            (watch-listeners! p)))
          (let* ((tick? (>= now (+ last-tick 1000)))
                 (last-tick (if tick? now last-tick))
                 (watchers (current-watchers)))
            (when tick? (tick! loop))
            (when (>= now (watchers-next-due watchers))
              (run-due-timers! watchers now))
            ;; Handlers whose waits ended this round (a descriptor, a
            ;; timer, a compute thread, another request's signal).
            (run-ready-tasks! loop)
            (when (>= now (loop-next-sweep loop))
              (sweep! loop now (+ last-tick 1000)))
            ;; Sleep no later than the earliest timer of a takeover.
            (when (< (watchers-next-due watchers) (loop-next-sweep loop))
              (set-loop-next-sweep! loop (watchers-next-due watchers)))
            (round last-tick next-date)))))))

(define (stop-threads! loop pool)
  ;; Make the threads give their connections back: shut the sockets down
  ;; under them (their reads and writes fail at once), then wait for them
  ;; to finish (see `stop-pool!').
  (let ((table (loop-connections loop)))
    (let lp ((fd 0))
      (when (< fd (vector-length table))
        (let ((conn (vector-ref table fd)))
          (when (and conn (connection-handed-off? conn))
            (fd-shutdown (connection-fd conn))
            (fd-shutdown (connection-out-fd conn))))
        (lp (+ fd 1)))))
  (stop-pool! pool)
  (set-loop-pool! loop #f))

(define (cancel-all-tasks! loop)
  ;; Give up the requests whose handlers wait, unwinding each (see
  ;; `cancel-task!'), which closes their connections.
  (let ((table (loop-connections loop)))
    (let lp ((fd 0))
      (when (< fd (vector-length table))
        (let* ((conn (vector-ref table fd))
               (task (and conn (connection-waiting-task conn))))
          (when task
            (cancel-task! loop task 'stopping))
          (when (and conn (connection-http2? conn))
            (http2-stop! loop conn)))
        (lp (+ fd 1)))))
  (run-ready-tasks! loop))

(define (close-all! loop)
  ;; Close every connection the loop holds, and its epoll descriptor.
  (cancel-all-tasks! loop)
  (let ((compute (tasks-compute (loop-tasks loop))))
    (when compute
      (stop-compute! compute)
      (set-tasks-compute! (loop-tasks loop) #f)))
  (let ((pool (loop-pool loop)))
    (when pool (stop-threads! loop pool)))
  (let ((table (loop-connections loop)))
    (let lp ((fd 0))
      (when (< fd (vector-length table))
        (let ((conn (vector-ref table fd)))
          (when conn (close-connection! loop conn)))
        (lp (+ fd 1)))))
  (let ((watchers (current-watchers)))
    (when watchers
      (stop-watchers! watchers)
      (set-current-watchers! #f)))
  (install-waits! #f)
  (fd-close (loop-epfd loop))
  (close-port (car (loop-wake-ports loop)))
  (close-port (cdr (loop-wake-ports loop)))
  (set! current-poller #f)
  (set! loop-pid #f))

(define (close-loop-connections!)
  "Close every connection and the epoll descriptor of the loop of this
process, for a loop that was suspended rather than stopped (see (web
server plucky))."
  (when current-poller
    (close-all! (poller-loop current-poller))))

;;; (plucky server loop) ends here
