;;; (plucky server loop) --- one worker's epoll event loop

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; One worker process runs one `run-loop': a single thread that asks
;;; epoll which descriptors are ready and serves them.  How a request
;;; flows through it:
;;;
;;;   epoll_wait -> accept-ready! (listener)   accept4, TCP_NODELAY, watch
;;;              -> read-ready!  (connection)  read(2) into a buffer
;;;   -> serve-input!   parse every complete request in the bytes
;;;                     (plucky http parse), in order (pipelining)
;;;   -> respond!       call the handler; (plucky http response) appends
;;;                     the answer to the worker's one output buffer
;;;   -> flush!         one write(2) (or writev(2) with a large body) for
;;;                     all the answers that one read produced
;;;
;;; Memory, the seed profile's first complaint (13.5 KB and two 4 KB port
;;; buffers per request): a connection owns no buffer while it is idle or
;;; its last read ended on a request boundary, which is the usual case
;;; for keep-alive clients.  Reads go into the worker's shared input
;;; buffer and answers into its shared output buffer; only the bytes of
;;; an incomplete request, a body that has not fully arrived, or an answer
;;; the socket would not take are copied into storage of the
;;; connection's own.  A slow or stalled client therefore costs its own
;;; few bytes and never holds up the loop: nothing here blocks.
;;;
;;; Descriptors are closed by `close-connection!' and nowhere else; the
;;; connection table (a vector indexed by descriptor) is the only owner.
;;;
;;; Timeouts are checked by a sweep once a second: idle keep-alive
;;; connections, heads that take too long to arrive, bodies that stall,
;;; answers the client does not read.
;;;
;;; Code:

(define-module (plucky server loop)
  #:use-module (rnrs bytevectors)
  #:use-module ((srfi srfi-9 gnu) #:select (set-record-type-printer!))
  #:use-module ((plucky sys foreign) #:select (pointer->procedure size_t symbol-address))
  #:use-module (ice-9 match)
  #:use-module ((ice-9 exceptions) #:select (exception-kind exception-args))
  #:use-module (web request)
  ;; Threads serve only handed-off connections: loaded when one is.
  #:autoload (ice-9 threads) (make-mutex make-condition-variable lock-mutex
                              unlock-mutex call-with-new-thread
                              signal-condition-variable wait-condition-variable
                              broadcast-condition-variable)
  #:use-module (plucky sys libc)
  #:use-module (plucky sys epoll)
  #:use-module ((plucky sys signal) #:select (read-signal run-finalizers!))
  #:use-module (plucky http error)
  #:use-module (plucky http parse)
  #:use-module (plucky http date)
  #:use-module (plucky http response)
  ;; Loaded by the first chunked request body, not at start-up (bench/startup).
  #:autoload (plucky http chunked) (make-chunked-decoder decode-chunked!)
  ;; Loaded by the first connection handed to a thread (bench/startup).
  #:autoload (plucky server stream) (make-body-reader body-reader-port
                                     body-reader-complete? body-reader-leftover
                                     body-reader-finish! write-all!
                                     open-stream-writer connection-lost?
                                     body-error? body-error-status)
  #:use-module ((srfi srfi-1) #:select (every filter))
  #:use-module (plucky server watchdog)  ; issue 13 5d
  #:use-module ((web uri) #:select (uri-path))
  #:export (make-loop-settings
            loop-settings?
            %default-loop-settings
            run-loop
            stop-loop!
            drain-loop!
            stop-accepting!
            log-line
            current-request-peer
            with-body-port
            body-port-handler?
            with-connect
            connect-handler?
            close-loop-connections!))

;; Its records' accessors and modifiers are macros that exist while this
;; file is compiled, and (plucky sys record) with them: see there; so are
;; its inlined procedures (`define-inline', (plucky sys inline)) and its
;; other macros (in `eval-when (expand)').  What
;; (plucky server tally) gives is macros too (slot numbers, `status-class'
;; inlined), so neither module is loaded at run time: 0.7M instructions
;; of start-up (bench/startup-modules).
(eval-when (expand)
  (use-modules (plucky sys record)
               (plucky sys inline)
               (plucky server tally)))

;;;
;;; Settings
;;;

(define-record-type/lean <loop-settings>
  (%make-loop-settings parse-limits max-body max-connections
                       keep-alive-timeout header-timeout body-timeout
                       write-timeout max-threads)
  loop-settings?
  (parse-limits settings-parse-limits)            ; <parse-limits>
  (max-body settings-max-body)                    ; bytes; larger -> 413
  (max-connections settings-max-connections)      ; per worker
  (keep-alive-timeout settings-keep-alive-timeout) ; seconds idle between requests
  (header-timeout settings-header-timeout)        ; seconds for a whole head
  (body-timeout settings-body-timeout)            ; seconds without body progress
  (write-timeout settings-write-timeout)          ; seconds without write progress
  (max-threads settings-max-threads))             ; threads for handed-off connections

(define* (make-loop-settings #:key
                             (parse-limits %default-parse-limits)
                             (max-body (* 64 1024 1024))
                             (max-connections 10000)
                             (keep-alive-timeout 60)
                             (header-timeout 10)
                             (body-timeout 30)
                             (write-timeout 30)
                             (max-threads 32))
  "Return the settings of a worker loop.  Sizes are in bytes, timeouts in
seconds.  MAX-THREADS bounds the threads that serve connections handed
off by the loop (request bodies read as ports, streamed answers); past
it, such connections wait for a thread."
  (%make-loop-settings parse-limits max-body max-connections
                       keep-alive-timeout header-timeout body-timeout
                       write-timeout max-threads))

(define %default-loop-settings (make-loop-settings))

;;;
;;; Connections
;;;

(define-record-type/lean <connection>
  (%make-connection fd out-fd peer state input input-address start end
                    request body body-fill body-length pending close-after? deadline
                    watched?)
  connection?
  (fd connection-fd)                    ; read from it; a socket, or stdin
  (out-fd connection-out-fd)            ; write to it; the socket, or stdout
  (peer connection-peer)                ; "address" of the client, or #f
  ;; idle | head | body | chunked | writing | lingering | handed-off
  (state connection-state set-connection-state!)
  ;; #f, or a bytevector of the connection's own holding bytes not yet
  ;; served, in [start, end)
  (input connection-input set-connection-input!)
  (input-address connection-input-address set-connection-input-address!)
  (start connection-start set-connection-start!)
  (end connection-end set-connection-end!)
  ;; in state body: the request whose body is arriving, the bytevector
  ;; of its Content-Length being filled, and how much is filled; in state
  ;; chunked, BODY is (decoder . output collecting the data)
  (request connection-request set-connection-request!)
  (body connection-body set-connection-body!)
  (body-fill connection-body-fill set-connection-body-fill!)
  (body-length connection-body-length set-connection-body-length!) ; declared
  ;; in state writing: list of (bytevector start . end) still to send
  (pending connection-pending set-connection-pending!)
  ;; close once the pending output is sent
  (close-after? connection-close-after? set-connection-close-after!)
  ;; seconds (loop clock) after which the sweep closes the connection
  (deadline connection-deadline set-connection-deadline!)
  ;; in the epoll set yet?  See `watch!'.
  (watched? connection-watched? set-connection-watched?!))

(define* (make-connection fd deadline #:optional (out-fd fd) (peer #f))
  (%make-connection fd out-fd peer 'idle #f 0 0 0 #f #f 0 0 '() #f deadline #f))

;;;
;;; The loop's state
;;;

(define-record-type/lean <loop>
  (%make-loop epfd listeners events events-address connections count
              input input-address output iovecs iovecs-address
              handler state settings now running? paused? exclusive?
              guarded on-response exit-when-idle? wake-ports drain-request
              drain-deadline peer-buffer signal-fd on-signal
              observer tally read-ns parse-ns batch sampled serving accept-resume
              body-port? pool)
  loop?
  (epfd loop-epfd)
  (listeners loop-listeners)                 ; list of listening descriptors
  (events loop-events)                       ; epoll_event buffer
  (events-address loop-events-address)
  (connections loop-connections set-loop-connections!) ; vector: fd -> <connection> | #f
  (count loop-count set-loop-count!)         ; open connections
  (input loop-input)                         ; shared read buffer
  (input-address loop-input-address)
  (output loop-output)                       ; shared <output>
  (iovecs loop-iovecs)                       ; two struct iovec, for head + large body
  (iovecs-address loop-iovecs-address)
  (handler loop-handler)
  (state loop-state set-loop-state!)         ; the handler's threaded state, a list
  (settings loop-settings)
  (now loop-now set-loop-now!)               ; seconds, read once per round
  (running? loop-running? set-loop-running!)
  (paused? loop-paused? set-loop-paused!)    ; listeners unwatched: at capacity
  (exclusive? loop-exclusive?)               ; listeners watched with EPOLLEXCLUSIVE
  ;; the request whose handler is running, while one is: see call-handler
  (guarded loop-guarded set-loop-guarded!)
  (on-response loop-on-response)       ; #f or (peer request code bytes) -> _
  (exit-when-idle? loop-exit-when-idle?) ; return once no connection is left
  ;; a pipe whose read end is in the epoll set, so that a signal handler
  ;; running on another thread can wake epoll_wait at once: (read . write)
  (wake-ports loop-wake-ports)
  ;; seconds of grace asked for by drain-loop!, not yet acted on, or #f
  (drain-request loop-drain-request set-loop-drain-request!)
  ;; #f, or the loop clock's second at which draining gives up waiting
  (drain-deadline loop-drain-deadline set-loop-drain-deadline!)
  (peer-buffer loop-peer-buffer)       ; sockaddr + socklen_t for accept4
  (signal-fd loop-signal-fd)           ; #f or a signalfd, watched by epoll
  (on-signal loop-on-signal)           ; signal number -> _, on the loop's thread
  ;; Per-request accounting (see `run-loop''s OBSERVER): #f when off.
  (observer loop-observer)
  (tally loop-tally)                           ; the observer's (plucky server tally)
  (read-ns loop-read-ns set-loop-read-ns!)     ; read(2) time not yet reported
  ;; parse time of the current request if it is timed, else #f
  (parse-ns loop-parse-ns set-loop-parse-ns!)
  (batch loop-batch set-loop-batch!)           ; timed answers waiting for the next write
  (sampled loop-sampled set-loop-sampled!)     ; timed requests until the next allocation sample
  (serving loop-serving set-loop-serving!)     ; the connection whose request is handled
  (accept-resume loop-accept-resume set-loop-accept-resume!) ; second to accept again
  ;; Does the handler take request bodies as ports (`with-body-port')?
  (body-port? loop-body-port?)
  ;; #f, or the <pool> of threads serving handed-off connections
  (pool loop-pool set-loop-pool!))

(define input-size 65536)
(define max-events 256)

(define current-loop #f)

(define (wake! loop)
  ;; Make the loop's epoll_wait return now.  Called from signal handlers,
  ;; which Guile may run on another thread.
  (let ((port (cdr (loop-wake-ports loop))))
    (fd-write (port->fdes port) wake-byte-address 0 1)))

(define wake-byte (make-bytevector 1 0))
(define wake-byte-address (bytevector-address wake-byte))

(define (stop-loop!)
  "Ask the loop running in this process to close its connections and
return.  Safe to call from a signal handler."
  (let ((loop current-loop))
    (when loop
      (set-loop-running! loop #f)
      (wake! loop))))

(define (current-request-peer)
  "Return the address of the client whose request the calling handler is
answering, as a string (\"127.0.0.1\", \"::1\", \"unix\"), or #f when it
is not known: the address is learnt only when the loop has an ON-RESPONSE
or OBSERVER (see `run-loop'), and inetd connections have none."
  (let ((peer (or (fluid-ref thread-peer)   ; on a thread (see run-job!)
                  (let* ((loop current-loop)
                         (conn (and loop (loop-serving loop))))
                    (and conn (connection-peer conn))))))
    ;; an IPv4 address kept as a number (see sockaddr->peer)
    (if (integer? peer) (inet-ntop AF_INET peer) peer)))

(define (drain-loop! grace)
  "Ask the loop running in this process to drain: stop accepting, close
idle connections, answer the requests in flight (with Connection: close),
and return once no connection is left or GRACE seconds have passed.  Safe
to call from a signal handler."
  (let ((loop current-loop))
    (when loop
      (set-loop-drain-request! loop grace)
      (wake! loop))))

(define (stop-accepting!)
  "Make the loop running in this process stop accepting connections, for
good, and serve on those it has; for a worker that retires while its
successor, on the same listening sockets, takes every new connection
(once the master has said a reload is over, no new connection may reach
the old code).  Call it from the loop's own turn: a signal it reads from
its signalfd, or a handler the loop runs itself (not one on a thread, as
a `with-body-port' handler is)."
  (let ((loop current-loop))
    (when loop
      (pause-accepting! loop)
      ;; never resumed: see the end of a round in `serve-rounds'
      (set-loop-accept-resume! loop +inf.0))))

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
;;; Printing
;;;

;; A backtrace prints every frame's arguments, and the default record
;; printer would print the loop's event buffer and its table of a
;; thousand connections in each frame: 150 ms a backtrace, time taken
;; from every other client (found by tests/server/loop.scm's handler
;; failures).  These records print as one short line instead.
(set-record-type-printer! <loop>
  (lambda (loop port)
    (format port "#<loop ~a connections>" (loop-count loop))))
(set-record-type-printer! <connection>
  (lambda (conn port)
    (format port "#<connection fd ~a ~a>" (connection-fd conn) (connection-state conn))))
(set-record-type-printer! <loop-settings>
  (lambda (settings port) (display "#<loop-settings>" port)))

;;;
;;; Accounting
;;;

;; Nanoseconds on a monotonic clock: Guile counts internal time in ns.
;; 29 ns a call, and GC_get_total_bytes 26 ns (measured with a loop of a
;; million calls), so leaving the accounting on costs about 0.2 us a
;; request; bench/hello's keep-alive figure shows the difference.
(eval-when (expand)
  (define-syntax-rule (clock) (get-internal-real-time)))

(define gc-total-bytes
  ;; In the program's namespace, not opened as "libgc": libguile's libgc
  ;; is already in the process, and looking up libgc.so searched the
  ;; library path at every start (bench/startup) and needed libgc-dev's
  ;; unversioned libgc.so.
  (pointer->procedure size_t (symbol-address "GC_get_total_bytes")
                      '()))

(eval-when (expand)
  (define-syntax-rule (timed when? expression record!)
    ;; Evaluate EXPRESSION; when WHEN?, call (RECORD! ns) with its duration
    ;; first.  -> the (single) value of EXPRESSION
    (if when?
        (let* ((start (clock))
               (value expression))
          (record! (- (clock) start))
          value)
        expression)))

;; The observer times one request in N, N of its choosing (see (plucky
;; server tally)); the others cost a count.  bench/instructions counted
;; 1,600 instructions a request for timing every one (six clock reads and
;; three calls of the observer), 4% of a hello world's.

(define-inline (take-sample! loop)
  ;; Count a request down.  -> #t when it is to be timed
  (let* ((tally (loop-tally loop))
         (countdown (- (vector-ref tally tally-countdown) 1)))
    (vector-set! tally tally-countdown countdown)
    (<= countdown 0)))

(define-inline (sampling? loop)
  ;; Is the next request, or the one being served, to be timed?  For the
  ;; read that brings it, its accept and its body.
  (and (loop-observer loop)
       (<= (vector-ref (loop-tally loop) tally-countdown) 1)))

(define (sockaddr->peer sockaddr)
  ;; The client's address for the observer, who asks for it only on its
  ;; own pages (current-request-peer): an IPv4 address as its number,
  ;; made a string when asked.  inet-ntop takes 1.6 us, and made
  ;; accounting cost 13,000 instructions a connection (bench/instructions,
  ;; load close).
  (if (= (bytevector-u16-native-ref sockaddr 0) AF_INET)
      (bytevector-u32-ref sockaddr 4 (endianness big))
      (sockaddr->string sockaddr)))

(define-inline (tally-add! loop slot n)
  (let ((tally (loop-tally loop)))
    (vector-set! tally slot (+ n (vector-ref tally slot)))))

;;;
;;; Opening and closing connections
;;;

(define (connection-ref loop fd)
  (let ((table (loop-connections loop)))
    (and (< fd (vector-length table)) (vector-ref table fd))))

(define (register-connection! loop conn)
  (let* ((fd (connection-fd conn))
         (table (loop-connections loop)))
    (when (>= fd (vector-length table))
      (let ((bigger (make-vector (max (+ fd 1) (* 2 (vector-length table))) #f)))
        (vector-move-left! table 0 (vector-length table) bigger 0)
        (set-loop-connections! loop bigger)))
    (vector-set! (loop-connections loop) fd conn)
    (set-loop-count! loop (+ 1 (loop-count loop)))))

(define (close-connection! loop conn)
  ;; The one place a connection's descriptor is closed.  close(2) also
  ;; removes it from the epoll set.
  (let ((fd (connection-fd conn)))
    (when (eq? (connection-ref loop fd) conn)
      (vector-set! (loop-connections loop) fd #f)
      (set-loop-count! loop (- (loop-count loop) 1))
      (when (loop-observer loop)
        (tally-add! loop tally-closed 1))
      (timed (sampling? loop) (fd-close fd)
             (lambda (ns) ((loop-observer loop) 'close ns)))
      (unless (= fd (connection-out-fd conn))
        (fd-close (connection-out-fd conn))))))

(define (linger! loop conn)
  ;; After an error answer the client may still be sending; closing at
  ;; once would make the kernel answer its bytes with a reset, which can
  ;; destroy our answer before the client reads it.  Shut down our side,
  ;; read and drop what comes for a short while, then close (as nginx's
  ;; lingering_close).
  (if (< (fd-shutdown-write (connection-out-fd conn)) 0)
      ;; Not a socket (inetd on a pipe): nothing to linger for.
      (close-connection! loop conn)
      (begin
        (set-connection-state! conn 'lingering)
        (set-connection-input! conn #f)
        (set-connection-deadline! conn (+ (loop-now loop) 2))
        (watch! loop conn EPOLLIN))))

(define (accept-ready! loop listener)
  (let ((settings (loop-settings loop)))
    (let lp ((n 0))
      (when (and (< n 64) (not (loop-paused? loop)))
        (when (>= (loop-count loop) (settings-max-connections settings))
          ;; At capacity: stop watching the listeners (a level-triggered
          ;; listener would wake us in a busy loop) until some close.
          (pause-accepting! loop))
        (let* ((start (and (sampling? loop) (clock)))
               (fd (cond
                   ((loop-paused? loop) (- errno-EAGAIN))
                   ((or (loop-on-response loop) (loop-observer loop))
                    ;; Someone logs or watches requests: learn who the
                    ;; client is.
                    (let ((buffer (loop-peer-buffer loop)))
                      (bytevector-u32-native-set! (car buffer) 128 128)
                      (fd-accept/peer listener (car buffer) (cdr buffer)
                                      (+ (cdr buffer) 128))))
                   (else (fd-accept listener)))))
          (cond
           ((>= fd 0)
            (let ((conn (make-connection
                         fd (+ (loop-now loop)
                               (settings-header-timeout settings))
                         fd
                         (cond
                          ((loop-on-response loop)
                           (sockaddr->string (car (loop-peer-buffer loop))))
                          ((loop-observer loop)
                           (sockaddr->peer (car (loop-peer-buffer loop))))
                          (else #f)))))
              (register-connection! loop conn)
              (when (loop-observer loop)
                (tally-add! loop tally-accepted 1))
              (when start
                ((loop-observer loop) 'accept (- (clock) start)))
              ;; The request is usually there already (the listener
              ;; defers accept until data arrives): serve it now rather
              ;; than after another epoll_wait.  Only a connection that
              ;; stays open is then watched (see `watch!'): one answered
              ;; and closed here costs accept4, read, write and close and
              ;; nothing else (bench/hello, Connection: close).
              (read-ready! loop conn)
              (when (and (eq? (connection-ref loop fd) conn)
                         (not (connection-watched? conn)))
                (watch! loop conn EPOLLIN)))
            (lp (+ n 1)))
           ((= fd (- errno-EAGAIN)) #t)
           ((or (= fd (- errno-EMFILE)) (= fd (- errno-ENFILE)))
            ;; Out of descriptors: the pending connection stays queued in
            ;; the kernel and the listener stays readable, so watching it
            ;; would spin (tests/regress/out-of-descriptors-spins).  Stop
            ;; watching it for a second; the sweep after that resumes.
            (log-line "accept: ~a; not accepting for a second" (errno->string fd))
            (pause-accepting! loop)
            (set-loop-accept-resume! loop (+ (loop-now loop) 1)))
           (else
            ;; ECONNABORTED and friends concern one client only.
            (lp (+ n 1)))))))))

(define (pause-accepting! loop)
  (unless (loop-paused? loop)
    (for-each (lambda (fd) (epoll-remove! (loop-epfd loop) fd))
              (loop-listeners loop))
    (set-loop-paused! loop #t)))

(define (watch! loop conn events)
  ;; Watch CONN for EVENTS, adding it to the epoll set the first time.
  ;; A socket is also given TCP_NODELAY then: it will carry more than one
  ;; answer, and Nagle's algorithm would hold the tail of a large one
  ;; until the client's delayed ACK.
  (if (connection-watched? conn)
      (epoll-modify! (loop-epfd loop) (connection-fd conn) events)
      (begin
        (set-connection-watched?! conn #t)
        (fd-set-tcp-nodelay! (connection-out-fd conn))
        (epoll-add! (loop-epfd loop) (connection-fd conn) events))))

;;;
;;; Reading
;;;

(define (read-ready! loop conn)
  (case (connection-state conn)
    ((lingering)
     (let ((n (fd-read (connection-fd conn) (loop-input-address loop) 0 input-size)))
       (unless (or (> n 0) (= n (- errno-EAGAIN)))
         (close-connection! loop conn))))
    ((body) (read-body! loop conn))
    ((chunked) (read-chunked! loop conn))
    ((writing handed-off) #t)           ; not watched for input; ignore
    (else (read-head! loop conn))))

(define (read-head! loop conn)
  (let ((own (connection-input conn)))
    (if own
        ;; Bytes of an unfinished head are waiting: read after them.
        (let* ((own (if (< (connection-end conn) (bytevector-length own))
                        own
                        (grow-input! conn)))
               (start (connection-start conn))
               (end (connection-end conn))
               (n (timed (sampling? loop)
                         (fd-read (connection-fd conn) (connection-input-address conn)
                                  end (- (bytevector-length own) end))
                         (lambda (ns) (set-loop-read-ns! loop (+ (loop-read-ns loop) ns))))))
          (cond
           ((> n 0)
            (set-connection-end! conn (+ end n))
            (serve-input! loop conn own start (+ end n)))
           ((= n (- errno-EAGAIN)) #t)
           (else (close-connection! loop conn))))
        (let ((n (timed (sampling? loop)
                        (fd-read (connection-fd conn) (loop-input-address loop) 0
                                 input-size)
                        (lambda (ns) (set-loop-read-ns! loop (+ (loop-read-ns loop) ns))))))
          (cond
           ((> n 0) (serve-input! loop conn (loop-input loop) 0 n))
           ((= n (- errno-EAGAIN)) #t)
           (else (close-connection! loop conn)))))))

(define (grow-input! conn)
  ;; Move the unserved bytes to the front, or into a buffer twice as big.
  ;; The parser's limits bound how big a head can make it grow.
  (let* ((own (connection-input conn))
         (start (connection-start conn))
         (end (connection-end conn))
         (used (- end start))
         (new (if (< used (quotient (bytevector-length own) 2))
                  own
                  (make-bytevector (* 2 (bytevector-length own))))))
    (bytevector-copy! own start new 0 used)
    (set-connection-input! conn new)
    (set-connection-input-address! conn (bytevector-address new))
    (set-connection-start! conn 0)
    (set-connection-end! conn used)
    new))

(define (keep-input! conn bv start end)
  ;; Make sure [start, end) of BV survives until the next read: copy it
  ;; into storage of the connection's own unless it is already there.
  (cond
   ((= start end)
    (set-connection-input! conn #f))
   ((eq? bv (connection-input conn))
    (set-connection-start! conn start)
    (set-connection-end! conn end))
   (else
    (let ((own (make-bytevector (max 4096 (* 2 (- end start))))))
      (bytevector-copy! bv start own 0 (- end start))
      (set-connection-input! conn own)
      (set-connection-input-address! conn (bytevector-address own))
      (set-connection-start! conn 0)
      (set-connection-end! conn (- end start))))))

(define body-chunk
  ;; A body that has not arrived gets storage as it arrives, this much at
  ;; first and twice as much each time it fills, never more than its
  ;; declared length: a head that declares 64 MiB and sends nothing costs
  ;; 64 KiB, not 64 MiB (tests/regress/body-allocated-before-it-arrives).
  65536)

(define (read-body! loop conn)
  (let* ((length (connection-body-length conn))
         (body (let ((body (connection-body conn))
                     (fill (connection-body-fill conn)))
                 (if (< fill (bytevector-length body))
                     body
                     (let ((bigger (make-bytevector
                                    (min length (* 2 (bytevector-length body))))))
                       (bytevector-copy! body 0 bigger 0 fill)
                       (set-connection-body! conn bigger)
                       bigger))))
         (fill (connection-body-fill conn))
         (n (timed (sampling? loop)
                   (fd-read (connection-fd conn) (bytevector-address body) fill
                            (- (bytevector-length body) fill))
                   (lambda (ns) (set-loop-read-ns! loop (+ (loop-read-ns loop) ns))))))
    (cond
     ((> n 0)
      (let ((fill (+ fill n)))
        (set-connection-body-fill! conn fill)
        (set-connection-deadline!
         conn (+ (loop-now loop) (settings-body-timeout (loop-settings loop))))
        (when (= fill length)
          (let ((request (connection-request conn)))
            (set-connection-request! conn #f)
            (set-connection-body! conn #f)
            (set-connection-state! conn 'idle)
            (case (respond! loop conn request body)
              ((handed-off) #t)
              ((#f) (serve-input! loop conn (loop-input loop) 0 0))
              (else (finish! loop conn #t #f)))))))
     ((= n (- errno-EAGAIN)) #t)
     (else (close-connection! loop conn)))))

;;;
;;; Serving the requests in a run of bytes
;;;

(define (request-body-length request)
  ;; -> integer, or 'chunked
  (let ((headers (request-headers request)))
    (cond
     ((assq 'transfer-encoding headers) 'chunked)
     ((assq-ref headers 'content-length))
     (else 0))))

(define (serve-input! loop conn bv start end)
  ;; Parse and answer every complete request in BV [start, end), then
  ;; send the answers.  Whatever is left over waits in the connection.
  (let ((settings (loop-settings loop)))
    (let lp ((start start))
      (call-with-values
          (lambda ()
            (if (= start end)
                (values 'incomplete #f)
                (if (and (loop-observer loop) (take-sample! loop))
                    (let ((start-ns (clock)))
                      (call-with-values
                          (lambda ()
                            (parse-request-head bv start end
                                                (settings-parse-limits settings)))
                        (lambda (request index)
                          (set-loop-parse-ns! loop (- (clock) start-ns))
                          (values request index))))
                    ;; not timed: PARSE-NS is #f since the last timed
                    ;; answer was reported (observe-answer!)
                    (parse-request-head bv start end (settings-parse-limits settings)))))
        (lambda (request index)
          (cond
           ((eq? request 'incomplete)
            (keep-input! conn bv start end)
            (cond
             ((= start end)
              (set-connection-state! conn 'idle)
              (set-connection-deadline!
               conn (+ (loop-now loop) (settings-keep-alive-timeout settings))))
             ((not (eq? (connection-state conn) 'head))
              (set-connection-state! conn 'head)
              (set-connection-deadline!
               conn (+ (loop-now loop) (settings-header-timeout settings)))))
            (finish! loop conn #f #f))
           ;; `request?' first: `http-error?' is the predicate of an
           ;; exception type, which Guile makes extensible, so on anything
           ;; else it looks up the record type's parents, every request
           ;; (statprof: record-type-parents, 1% of a keep-alive hello).
           ((and (not (request? request)) (http-error? request))
            (refuse! loop conn #f (http-error-status request)
                     (http-error-reason request)))
           (else
            (let ((length (request-body-length request)))
              (cond
               ((unmet-expectation? request)
                (refuse! loop conn request 417 #f))
               ((and (eq? (request-method request) 'CONNECT) ; issue 13 5g
                     (not (connect-handler? (loop-handler loop))))
                (refuse! loop conn request 501 #f))
               ((and (loop-body-port? loop)
                     (or (eq? length 'chunked)
                         (< 0 length (+ 1 (settings-max-body settings)))))
                ;; The handler reads the body itself, on a thread.
                (hand-off-call! loop conn request length bv index end))
               ((eq? length 'chunked)
                (let ((decoder (make-chunked-decoder
                                #:max-total (settings-max-body settings)))
                      (collected (make-output 4096)))
                  (set-connection-input! conn #f)
                  (set-connection-request! conn request)
                  (set-connection-body! conn (cons decoder collected))
                  (feed-chunked! loop conn bv index end)))
               ((> length (settings-max-body settings))
                (refuse! loop conn request 413 #f))
               ((<= (+ index length) end)
                (let* ((body (and (> length 0)
                                  (let ((body (make-bytevector length)))
                                    (bytevector-copy! bv index body 0 length)
                                    body)))
                       (close? (respond! loop conn request body)))
                  (case close?
                    ((handed-off)
                     ;; Requests behind it wait for the thread to finish.
                     (keep-input! conn bv (+ index length) end))
                    ((#f) (lp (+ index length)))
                    (else
                     (set-connection-input! conn #f)
                     (finish! loop conn #t #f)))))
               (else
                ;; The body has not all arrived: give it storage of its
                ;; own and read the rest straight into it.
                (let* ((have (- end index))
                       (body (make-bytevector (min length (max have body-chunk)))))
                  (continue-if-expected! loop conn request)
                  (bytevector-copy! bv index body 0 have)
                  (set-connection-body-length! conn length)
                  (set-connection-input! conn #f)
                  (set-connection-request! conn request)
                  (set-connection-body! conn body)
                  (set-connection-body-fill! conn have)
                  (set-connection-state! conn 'body)
                  (set-connection-deadline!
                   conn (+ (loop-now loop) (settings-body-timeout settings)))
                  (finish! loop conn #f #f))))))))))))

;;;
;;; Bodies
;;;

(define (continue-expectation? item)
  ;; Guile parses "Expect: 100-Continue" to the symbol 100-Continue; the
  ;; expectation is case-insensitive (RFC 9110 §10.1.1).
  (and (pair? item)
       (symbol? (car item))
       (string-ci=? (symbol->string (car item)) "100-continue")))

(define (unmet-expectation? request)
  ;; An Expect header asking for anything but 100-continue: 417.
  (let ((expect (assq-ref (request-headers request) 'expect)))
    (and expect
         (not (and (pair? expect) (every continue-expectation? expect))))))

(define continue-line (string->utf8 "HTTP/1.1 100 Continue\r\n\r\n"))

(define (continue-if-expected! loop conn request)
  ;; The client waits for "100 Continue" before it sends the body (RFC
  ;; 9110 §10.1.1): say it now that we are about to wait for that body.
  ;; A request refused before this point (413, 417, a bad head) never
  ;; gets it, so its body is never sent.
  (when (and (assq 'expect (request-headers request))
             (equal? (request-version request) '(1 . 1)))
    (let ((out (loop-output loop)))
      (output-put-bytes! out continue-line)
      (finish! loop conn #f #f))))

(define (feed-chunked! loop conn bv start end)
  ;; Decode BV [start, end) of the connection's chunked body; answer the
  ;; request once the body is complete and serve what follows it.
  (let* ((decoder+collected (connection-body conn))
         (collected (cdr decoder+collected)))
    (call-with-values
        (lambda ()
          (decode-chunked! (car decoder+collected) bv start end
                           (lambda (bv start count)
                             (output-put-slice! collected bv start count))))
      (lambda (status index)
        (cond
         ((eq? status 'done)
          (let ((request (connection-request conn))
                (body (let ((bv (make-bytevector (output-fill collected))))
                        (bytevector-copy! (output-bytes collected) 0 bv 0
                                          (output-fill collected))
                        bv)))
            (set-connection-request! conn #f)
            (set-connection-body! conn #f)
            (set-connection-state! conn 'idle)
            (case (respond! loop conn request (and (> (bytevector-length body) 0) body))
              ((handed-off) (keep-input! conn bv index end))
              ((#f) (serve-input! loop conn bv index end))
              (else (finish! loop conn #t #f)))))
         ((eq? status 'more)
          (unless (eq? (connection-state conn) 'chunked)
            (continue-if-expected! loop conn (connection-request conn))
            (set-connection-state! conn 'chunked))
          (set-connection-deadline!
           conn (+ (loop-now loop) (settings-body-timeout (loop-settings loop))))
          (finish! loop conn #f #f))
         (else
          (refuse! loop conn (connection-request conn)
                   (http-error-status status) (http-error-reason status))))))))

(define (read-chunked! loop conn)
  (let ((n (timed (sampling? loop)
                  (fd-read (connection-fd conn) (loop-input-address loop) 0 input-size)
                  (lambda (ns) (set-loop-read-ns! loop (+ (loop-read-ns loop) ns))))))
    (cond
     ((> n 0) (feed-chunked! loop conn (loop-input loop) 0 n))
     ((= n (- errno-EAGAIN)) #t)
     (else (close-connection! loop conn)))))

;;;
;;; Calling the handler
;;;

(define handler-failed (make-prompt-tag "handler-failed"))

(define backtrace-budget
  ;; Full backtraces per second; past that, one line each.  A client that
  ;; can make a handler fail must not make the worker spend its time
  ;; printing stacks.
  10)
(define backtrace-second 0)
(define backtraces-this-second 0)

(define (backtrace-allowed?)
  (let ((now (current-time)))
    (unless (= now backtrace-second)
      (set! backtrace-second now)
      (set! backtraces-this-second 0))
    (set! backtraces-this-second (+ 1 backtraces-this-second))
    (<= backtraces-this-second backtrace-budget)))

(define (report-handler-error request exception stack)
  ;; Log what failed, where, and why.  Printing must not fail in turn:
  ;; a broken printer would otherwise take the worker down.
  (let ((port (current-error-port))
        (stack (and stack (backtrace-allowed?) stack)))
    (false-if-exception
     (format port "plucky: handler failed on ~a ~a~%"
             (request-method request)
             (let ((uri (request-uri request)))
               (if uri ((@ (web uri) uri->string) uri) ""))))
    (when stack
      ;; The 30 innermost frames: the handler's, not the loop's.
      (false-if-exception (display-backtrace stack port 0 30)))
    ;; The message can hold any value the application handed over, a
    ;; request body for one: a client must not be able to fill the log.
    (false-if-exception
     (let ((text (call-with-output-string
                   (lambda (out)
                     (print-exception out #f (exception-kind exception)
                                      (exception-args exception))))))
       (if (> (string-length text) 2000)
           (begin
             (display (substring text 0 2000) port)
             (format port "... (~a more characters)~%" (- (string-length text) 2000)))
           (display text port))))
    (force-output port)))

;; Exceptions are caught by one handler installed around the whole loop
;; (`with-handler-errors-caught') rather than one per request: installing
;; a handler per request cost 0.7 us and 400 bytes (measured with a
;; micro-benchmark of call-handler).  The loop's `guarded' field says
;; which request, if any, is in the hands of application code; the
;; handler logs a backtrace taken where the exception was raised and
;; escapes to the per-request prompt, which Guile compiles inline.
(define (with-handler-errors-caught loop thunk)
  (with-exception-handler
      (lambda (exception)
        (let ((request (loop-guarded loop)))
          (if request
              (begin
                (set-loop-guarded! loop #f)
                ;; Take the stack here, where the exception was raised;
                ;; print it after the escape, outside any handler.
                (abort-to-prompt handler-failed request exception
                                 (make-stack #t 3)))
              ;; Not the application's: a bug of the loop itself.
              (raise-exception exception))))
    thunk))

(define (call-handler loop request body)
  ;; -> (values response body), with the loop's state updated; on an
  ;; exception, (values #f #f) after the backtrace is logged.
  ;; -> (values #f 503) when the watchdog ended the call (issue 13 5d)
  (call-with-prompt handler-failed
    (lambda ()
      (set-loop-guarded! loop request)
      (watchdog-enter! request)         ; issue 13 5d
      (let ((state (loop-state loop)))
        (call-with-values
            (lambda ()
              (if (null? state)
                  ((loop-handler loop) request body)
                  (apply (loop-handler loop) request body state)))
          (lambda (response body . state)
            (watchdog-leave!)           ; issue 13 5d: before unguarding
            (set-loop-guarded! loop #f)
            (unless (null? state)
              (set-loop-state! loop state))
            (values response body)))))
    (lambda (k request exception stack)
      (watchdog-leave!)                 ; issue 13 5d
      (if (handler-timeout? exception)  ; issue 13 5d: logged after the 503
          (watchdog-log! (lambda () (report-handler-error request exception stack)))
          (report-handler-error request exception stack))
      (let ((observer (loop-observer loop)))
        (when observer
          (observer 'failure request exception stack)))
      (values #f (if (handler-timeout? exception) 503 #f)))))

(define-inline (count-answer! loop code bytes)
  ;; -> the status class of CODE, counted in the tally with BYTES
  (let ((tally (loop-tally loop))
        (class (status-class code)))
    (vector-set! tally class (+ 1 (vector-ref tally class)))
    (vector-set! tally tally-bytes (+ bytes (vector-ref tally tally-bytes)))
    class))

(define (respond! loop conn request body)
  ;; Call the handler and append its answer to the output buffer.
  ;; -> #t when the connection must close after the answer.
  (let* ((out (loop-output loop))
         (mark (output-fill out))
         (observer (loop-observer loop))
         ;; timed: the observer asked for this one (see take-sample!)
         (timed? (and observer (loop-parse-ns loop) #t))
         ;; Allocation is sampled, one timed request in 16: reading the
         ;; collector's counter twice per request would double the cost
         ;; of accounting.
         (allocated (and timed?
                         (let ((countdown (- (loop-sampled loop) 1)))
                           (if (> countdown 0)
                               (begin (set-loop-sampled! loop countdown) #f)
                               (begin (set-loop-sampled! loop 16) (gc-total-bytes))))))
         (start (and timed? (clock)))
         (close? (or (not (request-keep-alive? request))
                     (and (loop-drain-deadline loop) #t))))
    (define (observe! code bytes handled)
      ;; HANDLED: the clock when the handler returned, if timed.
      (when observer
        (observe-answer! loop request code bytes
                         (and handled (- handled start))
                         (and handled (- (clock) handled))
                         (and allocated (- (gc-total-bytes) allocated)))))
    (set-loop-serving! loop conn)
    (call-with-values (lambda () (call-handler loop request body))
      (lambda (response response-body)
        (set-loop-serving! loop #f)
        (let ((handled (and timed? (clock))))
          (define (fail code)        ; issue 13 5d: 500, or 503
            (set-output-fill! out mark)
            (write-error-response! out (request-version request) code #f
                                   (request-method request)) ; 13 5b: HEAD has no body
            (report-response! loop conn request code (- (output-fill out) mark))
            (observe! code (- (output-fill out) mark) handled)
            #t)
          (cond
           ((not response)
            (fail (or response-body 500)))  ; issue 13 5d: 503 past the timeout
           ((streamed-response? response response-body)
            ;; Sent as it is written, by a thread: see `hand-off!'.
            (hand-off! loop conn (make-job conn 'stream request response response-body
                                           #f close? '()))
            'handed-off)
           (else
              ;; Serialising can fail too (a bad header value, a
              ;; Content-Length that does not match): that is the
              ;; application's error as well, and becomes a 500.
              (call-with-prompt handler-failed
                (lambda ()
                  (set-loop-guarded! loop request)
                  (call-with-values
                      (lambda ()
                        (write-response! out request response response-body close?))
                    (lambda (close? large-body)
                      (set-loop-guarded! loop #f)
                      (let ((code (answer-code response)))
                        (when (or observer (loop-on-response loop))
                          (let ((bytes (+ (- (output-fill out) mark)
                                          (if large-body (bytevector-length large-body) 0))))
                            (when (loop-on-response loop)
                              (report-response! loop conn request code bytes))
                            (if (or timed? (>= code 500))
                                (observe! code bytes handled)
                                (when observer
                                  ;; the usual case on a busy server: a count
                                  (count-answer! loop code bytes))))))
                      (when large-body
                        (flush-with-body! loop conn large-body))
                      close?)))
                (lambda (k request exception stack)
                  (report-handler-error request exception #f)
                  (fail 500))))))))))

;;;
;;; Handing a connection to a thread
;;;

;; Two kinds of answer cannot be made without blocking: a handler that
;; reads its request body from a port (`with-body-port'), and a streamed
;; answer (see `streamed-response?' in (plucky http response)), whose
;; body procedure writes as it goes.  The loop hands such a connection to
;; a thread of its pool: out of the epoll set, state 'handed-off, no
;; deadline (the thread has its own time-outs).  The thread reads and
;; writes the socket with (plucky server stream), then gives the
;; connection back through the pool's done list and the wake pipe; the
;; loop reports the answer, and serves, closes or lingers as the thread
;; says.  The common case (no body, or a body read whole) never gets
;; here: bench/hello is what it was.

(define (with-body-port handler)
  "Return a handler that is HANDLER but receives each request body that
is not empty as an input port rather than a bytevector: it reads what it
wants (Content-Length and chunked framing decoded, \"100 Continue\" sent
when it first reads), and the body's unread bytes are never buffered.
Such requests are answered on a thread of the worker, so the handler may
block; its threaded state, if any, is the state when the request
arrived, and what it returns becomes the state again."
  (let ((wrapped (case-lambda
                   ((request body) (handler request body))
                   ((request body . state) (apply handler request body state)))))
    (hashq-set! body-port-handlers wrapped #t)
    (when (connect-handler? handler)    ; issue 13 5g: keeps with-connect's mark
      (hashq-set! connect-handlers wrapped #t))
    wrapped))

;; The handlers `with-body-port' made.  Not a procedure property: asking
;; a compiled procedure for its properties parses its debugging
;; information and loads (system vm debug) and the ELF and DWARF readers,
;; which put a collection back into plucky's start-up
;; (bench/startup-instructions: 91.5M instructions instead of 48M).
(define body-port-handlers (make-weak-key-hash-table))

(define (body-port-handler? handler)
  "True when HANDLER was made by `with-body-port'."
  (hashq-ref body-port-handlers handler #f))

;; CONNECT (issue 13 5g).  A 2xx to CONNECT tells the client its tunnel
;; is open (RFC 9110 §9.3.6), and what it sends next is the tunnel's,
;; not HTTP: an app that never meant to tunnel must not answer it.  So
;; CONNECT is refused (501, close) before any handler sees it, unless
;; the app says it handles it.  Either way the connection closes after
;; the answer (`request-keep-alive?').

(define (with-connect handler)
  "Return HANDLER, marked as one that answers CONNECT requests itself;
plucky refuses CONNECT (501) for any other handler."
  (hashq-set! connect-handlers handler #t)
  handler)

;; The handlers `with-connect' marked (weak: see `body-port-handlers').
(define connect-handlers (make-weak-key-hash-table))

(define (connect-handler? handler)
  "True when HANDLER was marked by `with-connect'."
  (hashq-ref connect-handlers handler #f))

;; The peer of the connection a thread serves, for `current-request-peer'.
(define thread-peer (make-thread-local-fluid #f))

(define-record-type/lean <job>
  (%make-job conn kind request response body reader close? pending state
             outcome code bytes handler-ns leftover queued failure)
  job?
  (conn job-conn)
  (kind job-kind)                 ; call: run the handler | stream: send BODY
  (request job-request)
  (response job-response)         ; stream: the handler's answer
  (body job-body)                 ; stream: the body procedure
  (reader job-reader)             ; call: the request body's <body-reader>
  (close? job-close?)             ; close after the answer, whatever it says
  (pending job-pending set-job-pending!) ; earlier answers to send first
  (state job-state set-job-state!)       ; call: the handler's state, in and out
  ;; Set by the thread: keep | close | linger; the status sent (#f if
  ;; none); bytes sent; the handler's ns; bytes read past the body.
  (outcome job-outcome set-job-outcome!)
  (code job-code set-job-code!)
  (bytes job-bytes set-job-bytes!)
  (handler-ns job-handler-ns set-job-handler-ns!)
  (leftover job-leftover set-job-leftover!)
  (queued job-queued set-job-queued!)   ; the loop's second it was queued
  ;; #f, or (exception . stack) when the application failed
  (failure job-failure set-job-failure!))

(set-record-type-printer! <job>
  (lambda (job port)
    (format port "#<job ~a ~a>" (job-kind job) (job-conn job))))

(define (make-job conn kind request response body reader close? state)
  (%make-job conn kind request response body reader close? '() state
             'close #f 0 0 #f 0 #f))

(define-record-type/lean <pool>
  (make-pool mutex condition jobs done threads idle stopping?)
  pool?
  (mutex pool-mutex)
  (condition pool-condition)             ; signalled when a job is queued
  (jobs pool-jobs set-pool-jobs!)        ; waiting for a thread, oldest first
  (done pool-done set-pool-done!)        ; finished, for the loop
  (threads pool-threads set-pool-threads!) ; started
  (idle pool-idle set-pool-idle!)        ; waiting for a job
  (stopping? pool-stopping? set-pool-stopping!))

(define (pool-submit! loop job)
  (let ((pool (or (loop-pool loop)
                  (let ((pool (make-pool (make-mutex) (make-condition-variable)
                                         '() '() 0 0 #f)))
                    (set-loop-pool! loop pool)
                    pool))))
    (set-job-queued! job (loop-now loop))
    (lock-mutex (pool-mutex pool))
    (set-pool-jobs! pool (append (pool-jobs pool) (list job)))
    ;; A thread signalled for an earlier job counts as idle until it
    ;; wakes: compare the jobs waiting with the threads idle, not the idle
    ;; with 0, or a second job can wait behind a stalled first one
    ;; (found by tests/fuzz with port-app.scm).
    (when (and (> (length (pool-jobs pool)) (pool-idle pool))
               (< (pool-threads pool) (settings-max-threads (loop-settings loop))))
      (set-pool-threads! pool (+ 1 (pool-threads pool)))
      (call-with-new-thread (lambda () (pool-thread loop pool))))
    (signal-condition-variable (pool-condition pool))
    (unlock-mutex (pool-mutex pool))))

(define thread-idle-seconds
  ;; A thread with nothing to do for this long ends: each holds a stack
  ;; and two descriptors (Guile's per-thread wake-up pipe).
  60)

(define (pool-thread loop pool)
  (let next ()
    (lock-mutex (pool-mutex pool))
    (let wait ((deadline (+ (current-time) thread-idle-seconds)))
      (when (and (null? (pool-jobs pool)) (not (pool-stopping? pool))
                 (< (current-time) deadline))
        (set-pool-idle! pool (+ 1 (pool-idle pool)))
        (wait-condition-variable (pool-condition pool) (pool-mutex pool) deadline)
        (set-pool-idle! pool (- (pool-idle pool) 1))
        (wait deadline)))
    (if (or (pool-stopping? pool) (null? (pool-jobs pool)))
        (begin
          (set-pool-threads! pool (- (pool-threads pool) 1))
          ;; `stop-pool!' waits for the count to reach 0.
          (broadcast-condition-variable (pool-condition pool))
          (unlock-mutex (pool-mutex pool)))
        (let ((job (car (pool-jobs pool))))
          (set-pool-jobs! pool (cdr (pool-jobs pool)))
          (unlock-mutex (pool-mutex pool))
          (run-job! loop job)
          (lock-mutex (pool-mutex pool))
          (set-pool-done! pool (cons job (pool-done pool)))
          (unlock-mutex (pool-mutex pool))
          (wake! loop)
          (next)))))

(define (take-done-jobs! pool)
  (lock-mutex (pool-mutex pool))
  (let ((done (reverse (pool-done pool))))
    (set-pool-done! pool '())
    (unlock-mutex (pool-mutex pool))
    done))

(define (hand-off! loop conn job)
  ;; Give CONN to a thread for JOB.  Answers to requests that came
  ;; before (pipelined) and are not sent yet go with it, to be sent first.
  (let ((out (loop-output loop)))
    (when (> (output-fill out) 0)
      (queue-output! loop conn (output-bytes out) 0 (output-fill out))
      (output-reset! out))
    (set-job-pending! job (connection-pending conn))
    (set-connection-pending! conn '())
    (set-connection-state! conn 'handed-off)
    (set-connection-deadline! conn never)
    (when (connection-watched? conn)
      (epoll-remove! (loop-epfd loop) (connection-fd conn))
      (set-connection-watched?! conn #f))
    ;; Streamed writes are small (an event at a time): Nagle's algorithm
    ;; would hold each one until the client's delayed ACK.
    (fd-set-tcp-nodelay! (connection-out-fd conn))
    (pool-submit! loop job)))

(define never (ash 1 60))

(define (hand-off-call! loop conn request framing bv start end)
  ;; Hand CONN to a thread that calls the handler with the body of
  ;; REQUEST as a port; BV [START, END) are the bytes after its head.
  (let* ((settings (loop-settings loop))
         (out-fd (connection-out-fd conn))
         (continue? (and (assq 'expect (request-headers request))
                         (equal? (request-version request) '(1 . 1))
                         ;; The whole body came with the head: the client
                         ;; did not wait, nothing to say.
                         (not (and (integer? framing) (>= (- end start) framing)))))
         (reader (make-body-reader
                  (connection-fd conn) framing bv start end
                  #:timeout (settings-body-timeout settings)
                  #:max-body (settings-max-body settings)
                  #:continue (and continue?
                                  (lambda ()
                                    (write-all! out-fd continue-line 0
                                                (bytevector-length continue-line)
                                                (settings-write-timeout settings)))))))
    (set-connection-input! conn #f)
    (hand-off! loop conn
               (make-job conn 'call request #f #f reader
                         (or (not (request-keep-alive? request))
                             (and (loop-drain-deadline loop) #t))
                         (loop-state loop)))))

(define (call-caught thunk)
  ;; -> (#t value ...) or (#f exception stack): THUNK's values, or what
  ;; it raised and where.
  (let ((tag (make-prompt-tag "job")))
    (call-with-prompt tag
      (lambda ()
        (with-exception-handler
            (lambda (exception)
              (abort-to-prompt tag exception (make-stack #t 3)))
          (lambda ()
            (call-with-values thunk (lambda values (cons #t values))))))
      (lambda (k exception stack)
        (list #f exception stack)))))

(define (run-job! loop job)
  ;; On a pool thread: answer JOB's request on its connection.  Sets the
  ;; job's outcome; never closes the descriptor, never raises.
  (let* ((conn (job-conn job))
         (out-fd (connection-out-fd conn))
         (timeout (settings-write-timeout (loop-settings loop)))
         (request (job-request job)))
    (define (send! bv start count)
      (write-all! out-fd bv start count timeout)
      (set-job-bytes! job (+ (job-bytes job) count)))
    (define (send-output! out)
      (send! (output-bytes out) 0 (output-fill out)))
    (define (answer-error! code close-how)
      ;; An error answer, if the client still reads.
      (let ((out (make-output 512)))
        (write-error-response! out (request-version request) code #f
                               (request-method request) #f)
        (set-job-code! job code)
        (set-job-outcome! job close-how)
        (call-caught (lambda () (send-output! out)))))
    (define (complete? reader)
      (or (not reader) (body-reader-complete? reader)))
    (define (answer! response body)
      ;; -> outcome; raises on the application's errors
      (let* ((reader (job-reader job))
             (close? (or (job-close? job) (not (complete? reader))))
             (code (answer-code response)))
        (if (streamed-response? response body)
            (let ((out (make-output 1024)))
              (call-with-values (lambda () (write-streamed-head! out request response))
                (lambda (framing head-close?)
                  (set-job-code! job code)
                  (send-output! out)
                  (unless (eq? framing 'none)
                    (stream-body! job send! out-fd timeout response body framing))
                  (if (or close? head-close?) 'close 'keep))))
            (let ((out (make-output 4096)))
              (call-with-values
                  (lambda () (write-response! out request response body close? #f))
                (lambda (close? large)
                  (set-job-code! job code)
                  (send-output! out)
                  (when large (send! large 0 (bytevector-length large)))
                  (if close? 'close 'keep)))))))
    (define (failed exception stack)
      (cond
       ((connection-lost? exception)
        (set-job-outcome! job 'close))
       ((body-error? exception)
        (answer-error! (body-error-status exception) 'linger))
       ((job-code job)
        ;; The head is out: all that can be said is to stop.
        (report-handler-error request exception stack)
        (set-job-failure! job (cons exception stack))
        (set-job-outcome! job 'close))
       (else
        (report-handler-error request exception stack)
        (set-job-failure! job (cons exception stack))
        (answer-error! 500 (if (complete? (job-reader job)) 'close 'linger)))))
    (fluid-set! thread-peer (connection-peer conn))
    (match (call-caught
            (lambda ()
              (for-each (match-lambda ((bv start . end) (send! bv start (- end start))))
                        (job-pending job))
              (set-job-pending! job '())
              (case (job-kind job)
                ((call)
                 (let* ((start (clock))
                        (state (job-state job))
                        (port (body-reader-port (job-reader job)))
                        (result (call-caught
                                 (lambda ()
                                   (if (null? state)
                                       ((loop-handler loop) request port)
                                       (apply (loop-handler loop) request port state))))))
                   (set-job-handler-ns! job (- (clock) start))
                   ;; The connection goes back to the loop: a handler that
                   ;; kept the port must not read it any more.
                   (body-reader-finish! (job-reader job))
                   (match result
                     ((#t response body . state)
                      (set-job-state! job state)
                      (answer! response body))
                     ((#f exception stack)
                      (failed exception stack)
                      (job-outcome job)))))
                ((stream)
                 (answer! (job-response job) (job-body job))))))
      ((#t outcome)
       (set-job-outcome! job outcome))
      ((#f exception stack)
       (failed exception stack)))
    ;; Bytes read beyond the body belong to the next request.
    (let ((reader (job-reader job)))
      (when (and reader (eq? (job-outcome job) 'keep))
        (call-with-values (lambda () (body-reader-leftover reader))
          (lambda (bv start end)
            (when (< start end)
              (set-job-leftover! job (bytevector-copy-range bv start end)))))))
    (fluid-set! thread-peer #f)))

(define (stream-body! job send! out-fd timeout response body framing)
  ;; Call the body procedure with a port that sends as it is written.
  (let* ((headers (answer-headers response))
         (type (assq-ref headers 'content-type))
         (charset (and type (assq-ref (cdr type) 'charset))))
    (call-with-values
        (lambda ()
          (open-stream-writer out-fd framing #:timeout timeout
                              #:length (assq-ref headers 'content-length)
                              #:encoding (cond ((not charset) "UTF-8")
                                               ((symbol? charset) (symbol->string charset))
                                               (else charset))))
      (lambda (port abandon!)
        (with-exception-handler
            (lambda (exception)
              ;; Nothing more may reach the socket, from the port's buffer
              ;; or its close (the last chunk would say the answer is
              ;; whole).
              (abandon!)
              (raise-exception exception))
          (lambda () (body port)))
        (close-port port)))))

(define (expire-queued-jobs! loop)
  ;; A request that waits for a thread longer than the body time-out
  ;; (every thread busy: slow uploads, long streams) is answered 503
  ;; rather than kept waiting without end.
  (let ((pool (loop-pool loop)))
    (when (and pool (pair? (pool-jobs pool)))
      (let ((oldest (- (loop-now loop) (settings-body-timeout (loop-settings loop))))
            (expired '()))
        (lock-mutex (pool-mutex pool))
        (set-pool-jobs! pool (filter (lambda (job)
                                       (or (> (job-queued job) oldest)
                                           (begin (set! expired (cons job expired)) #f)))
                                     (pool-jobs pool)))
        (unlock-mutex (pool-mutex pool))
        (for-each (lambda (job)
                    (let ((conn (job-conn job)))
                      (log-line "no thread for ~a ~a in ~a s: 503"
                                 (request-method (job-request job))
                                 (uri-path (request-uri (job-request job)))
                                 (settings-body-timeout (loop-settings loop)))
                      ;; Answers to earlier pipelined requests go first.
                      (set-connection-pending! conn (job-pending job))
                      (set-connection-state! conn 'idle)
                      (refuse! loop conn (job-request job) 503 "no thread free to serve this request")))
                  (reverse expired))))))

(define (finish-jobs! loop)
  ;; On the loop's thread: take back the connections threads are done
  ;; with.
  (let ((pool (loop-pool loop)))
    (when pool
      (for-each (lambda (job) (job-done! loop job)) (take-done-jobs! pool)))))

(define (job-done! loop job)
  (let ((conn (job-conn job))
        (observer (loop-observer loop)))
    (when (eq? (connection-ref loop (connection-fd conn)) conn)
      (when (and (eq? (job-kind job) 'call) (pair? (job-state job)))
        (set-loop-state! loop (job-state job)))
      (when (job-code job)
        (report-response! loop conn (job-request job) (job-code job) (job-bytes job))
        (when observer
          (let ((failure (job-failure job)))
            (when failure
              (observer 'failure (job-request job) (car failure) (cdr failure))))
          ;; Counted, never timed: a thread's time is not the loop's
          ;; phases, and the observer weighs each timed answer by the
          ;; sampling rate.
          (observe-answer! loop (job-request job) (job-code job) (job-bytes job)
                           #f #f #f)))
      (case (job-outcome job)
        ((keep)
         (if (loop-drain-deadline loop)
             (close-connection! loop conn)
             (begin
               (set-connection-state! conn 'idle)
               (set-connection-deadline!
                conn (+ (loop-now loop) (settings-keep-alive-timeout (loop-settings loop))))
               (watch! loop conn EPOLLIN)
               (let ((leftover (job-leftover job)))
                 (when leftover
                   (keep-input! conn leftover 0 (bytevector-length leftover))))
               (let ((own (connection-input conn)))
                 (when own
                   (serve-input! loop conn own (connection-start conn)
                                 (connection-end conn)))))))
        ((linger) (linger! loop conn))
        (else (close-connection! loop conn))))))

;;;
;;; Telling whoever listens (the access log)
;;;

(define (report-response! loop conn request code bytes)
  ;; REQUEST is #f for a request that never reached a handler.
  (let ((on-response (loop-on-response loop)))
    (when on-response
      (on-response (connection-peer conn) request code bytes))))

(define (refuse! loop conn request code reason)
  ;; Answer a request that never reached a handler (REQUEST, or #f when
  ;; its head could not be read), then linger-close.
  (let* ((out (loop-output loop))
         (mark (output-fill out)))
    (set-connection-input! conn #f)
    (set-connection-request! conn #f)
    (set-connection-body! conn #f)
    (write-error-response! out (if request (request-version request) '(1 . 1))
                           code reason (if request (request-method request) 'GET))
    (report-response! loop conn #f code (- (output-fill out) mark))
    (when (loop-observer loop)
      (observe-answer! loop #f code (- (output-fill out) mark)
                       (and (loop-parse-ns loop) 0) (and (loop-parse-ns loop) 0) #f))
    (finish! loop conn #t #t)))

(define (observe-answer! loop request code bytes handler serialise allocated)
  ;; Count an answer in the tally; tell the observer of it if it was
  ;; timed (HANDLER and SERIALISE are numbers, not #f), or if it is a 5xx,
  ;; which the observer always wants (for its error inbox).
  (let ((class (count-answer! loop code bytes)))
    (cond
     (handler
      ((loop-observer loop) 'request request code (loop-read-ns loop) (loop-parse-ns loop)
       handler serialise allocated)
      (set-loop-read-ns! loop 0)
      (set-loop-parse-ns! loop #f)         ; reported: not another's
      (set-loop-batch! loop (+ 1 (loop-batch loop))))
     ((eqv? class 5)
      ((loop-observer loop) 'request request code #f #f #f #f #f)))))

;;;
;;; Writing
;;;

(define (flush-with-body! loop conn body)
  ;; Send the output buffer and BODY with one writev(2).  Whatever the
  ;; socket does not take is queued on the connection.
  (let* ((out (loop-output loop))
         (fill (output-fill out))
         (iovecs (loop-iovecs loop)))
    (if (pair? (connection-pending conn))
        (begin
          (queue-output! loop conn (output-bytes out) 0 fill)
          (queue-output! loop conn body 0 (bytevector-length body))
          (output-reset! out))
        (begin
          (iovec-set! iovecs 0 (output-address out) fill)
          (iovec-set! iovecs 1 (bytevector-address body) (bytevector-length body))
          (let* ((n (timed (> (loop-batch loop) 0)
                           (fd-writev (connection-out-fd conn) (loop-iovecs-address loop) 2)
                           (lambda (ns)
                             ((loop-observer loop) 'write (loop-batch loop) ns)
                             (set-loop-batch! loop 0))))
                 (n (if (< n 0) (if (= n (- errno-EAGAIN)) 0 #f) n)))
            (cond
             ((not n)
              (output-reset! out)
              (set-connection-close-after! conn #t)
              (set-connection-pending! conn '()))
             (else
              (when (< n fill)
                (queue-output! loop conn (output-bytes out) n fill))
              (let ((sent (max 0 (- n fill))))
                (when (< sent (bytevector-length body))
                  (queue-output! loop conn body sent (bytevector-length body))))
              (output-reset! out))))))))

(define (queue-output! loop conn bv start end)
  ;; Keep BV [start, end) for later.  The shared output buffer is copied:
  ;; the next response will overwrite it.
  (let ((entry (if (eq? bv (output-bytes (loop-output loop)))
                   (cons* (bytevector-copy-range bv start end) 0 (- end start))
                   (cons* bv start end))))
    (set-connection-pending!
     conn (append (connection-pending conn) (list entry)))))

(define (finish! loop conn close? linger?)
  ;; Send what the served requests produced; then close, linger, wait
  ;; for the socket to drain, or wait for the next request.
  (let* ((out (loop-output loop))
         (fill (output-fill out)))
    (when (> fill 0)
      (if (pair? (connection-pending conn))
          (queue-output! loop conn (output-bytes out) 0 fill)
          (let ((n (timed (> (loop-batch loop) 0)
                          (fd-write (connection-out-fd conn) (output-address out) 0 fill)
                          (lambda (ns)
                            ((loop-observer loop) 'write (loop-batch loop) ns)
                            (set-loop-batch! loop 0)))))
            (cond
             ((= n fill) #t)
             ((or (>= n 0) (= n (- errno-EAGAIN)))
              (let ((n (max n 0)))
                (queue-output! loop conn (output-bytes out) n fill)))
             (else
              ;; The client is gone (EPIPE, ECONNRESET): nothing to send to.
              (set-connection-pending! conn '())
              (set! close? #t)
              (set! linger? #f)))))
      (output-reset! out))
    (cond
     ((pair? (connection-pending conn))
      ;; Wait until the socket takes the rest.
      (set-connection-close-after! conn (or close? (connection-close-after? conn)))
      (set-connection-state! conn 'writing)
      (set-connection-deadline!
       conn (+ (loop-now loop) (settings-write-timeout (loop-settings loop))))
      (watch! loop conn EPOLLOUT))
     ((or close? (connection-close-after? conn))
      (if linger?
          (linger! loop conn)
          (close-connection! loop conn))))))

(define (bytevector-copy-range bv start end)
  (let ((copy (make-bytevector (- end start))))
    (bytevector-copy! bv start copy 0 (- end start))
    copy))

(define (write-ready! loop conn)
  ;; The socket takes more: send the queued output in order.
  (let lp ((pending (connection-pending conn)))
    (match pending
      (()
       (set-connection-pending! conn '())
       (if (connection-close-after? conn)
           (close-connection! loop conn)
           (begin
             (set-connection-state! conn 'idle)
             (set-connection-deadline!
              conn (+ (loop-now loop)
                      (settings-keep-alive-timeout (loop-settings loop))))
             (watch! loop conn EPOLLIN)
             ;; Requests that arrived while we were writing.
             (let ((own (connection-input conn)))
               (when own
                 (serve-input! loop conn own (connection-start conn)
                               (connection-end conn)))))))
      (((bv start . end) . rest)
       (let ((n (fd-write (connection-out-fd conn) (bytevector-address bv) start
                          (- end start))))
         (cond
          ((= n (- end start)) (lp rest))
          ((or (>= n 0) (= n (- errno-EAGAIN)))
           (set-connection-pending! conn (cons (cons* bv (+ start (max n 0)) end) rest))
           (set-connection-deadline!
            conn (+ (loop-now loop) (settings-write-timeout (loop-settings loop)))))
          (else (close-connection! loop conn))))))))

;;;
;;; Timeouts
;;;

(define (sweep! loop)
  ;; Close every connection whose deadline has passed.  Once a second,
  ;; O(connections): cheaper than a timer per request.  Also run the
  ;; finalizers Guile's finalizer thread would run, had we not stopped it
  ;; (see (plucky sys signal)).
  (run-finalizers!)
  (expire-queued-jobs! loop)
  (let ((observer (loop-observer loop)))
    (when observer (observer 'tick)))
  (let ((table (loop-connections loop))
        (now (loop-now loop)))
    (let lp ((fd 0))
      (when (< fd (vector-length table))
        (let ((conn (vector-ref table fd)))
          (when (and conn (< (connection-deadline conn) now))
            (if (memq (connection-state conn) '(head body chunked))
                ;; A head or body that is too slow: say so if we still can.
                (begin
                  (let ((request (connection-request conn)))
                    (set-connection-state! conn 'idle)
                    (refuse! loop conn request 408 #f)))
                (close-connection! loop conn))))
        (lp (+ fd 1))))))

;;;
;;; The loop
;;;

(define (watch-listeners! loop)
  (for-each (lambda (fd)
              (epoll-add! (loop-epfd loop) fd
                          (if (loop-exclusive? loop)
                              (logior EPOLLIN EPOLLEXCLUSIVE)
                              EPOLLIN)))
            (loop-listeners loop)))

(define* (run-loop listeners handler #:key (state '())
                   (settings %default-loop-settings)
                   (exclusive? #f)
                   (connections '())
                   (exit-when-idle? #f)
                   (on-response #f)
                   (signal-fd #f)
                   (on-signal #f)
                   (observer #f)
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

OBSERVER, if given, is told where the time goes, in nanoseconds, on the
loop's thread (it must not block).  The loop first asks it for its tally,
(OBSERVER 'tally), a vector of (plucky server tally): it counts every
answer (by status class, and its bytes), accept and close there, and
times only the requests the tally's countdown picks:
  (OBSERVER 'request request code read parse handler serialize allocated)
    after each timed answer: REQUEST as the handler saw it (#f if
    refused), the status CODE, the time in read(2) that brought its head
    (0 for a request that came pipelined behind another), parsing, the
    handler, and serialising; ALLOCATED is the bytes the handler and
    serialising allocated, measured on one timed request in 16 and #f on
    the others.  The observer resets the countdown.  An answer of 5xx
    that was not timed is told too, its times #f;
  (OBSERVER 'failure request exception stack) when the handler raised
    EXCEPTION (STACK: where it was raised); the 500 is reported after;
  (OBSERVER 'write answers ns) after a write(2) carrying ANSWERS timed
    answers;
  (OBSERVER 'accept ns) after an accept, (OBSERVER 'close ns) after a
    close(2), of those timed: when the countdown is at 1 or below;
  (OBSERVER 'tick) about once a second, from the loop's sweep."
  (let* ((epfd (epoll-create))
         (events (make-epoll-events max-events))
         (input (make-bytevector input-size))
         (iovecs (make-iovecs 2))
         (wake-ports (pipe))
         (peer-buffer (make-bytevector 136 0))
         (loop (%make-loop epfd listeners events (bytevector-address events)
                           (make-vector 1024 #f) 0
                           input (bytevector-address input)
                           (make-output) iovecs (bytevector-address iovecs)
                           handler state settings (current-time) #t #f
                           exclusive? #f on-response exit-when-idle?
                           wake-ports #f #f
                           (cons peer-buffer (bytevector-address peer-buffer))
                           signal-fd on-signal
                           observer (and observer (observer 'tally)) 0 #f 0 0 #f 0
                           body-port? #f)))
    (for-each (lambda (port)
                (fcntl port F_SETFL (logior O_NONBLOCK (fcntl port F_GETFL))))
              (list (car wake-ports) (cdr wake-ports)))
    (epoll-add! epfd (port->fdes (car wake-ports)) EPOLLIN)
    (when signal-fd
      (epoll-add! epfd signal-fd EPOLLIN))
    (watch-listeners! loop)
    (for-each (lambda (spec)
                (let* ((in (if (pair? spec) (car spec) spec))
                       (out (if (pair? spec) (cdr spec) spec))
                       (conn (make-connection
                              in (+ (loop-now loop) (settings-header-timeout settings))
                              out)))
                  (fd-set-nonblocking! in)
                  (fd-set-nonblocking! out)
                  (register-connection! loop conn)
                  (watch! loop conn EPOLLIN)))
              connections)
    (set! current-loop loop)
    (with-handler-errors-caught loop
      (lambda ()
        (serve-rounds loop)))
    (close-all! loop)
    (loop-state loop)))

(define (start-drain! loop grace)
  ;; Stop accepting, close the connections that wait for a request, and
  ;; give the others GRACE seconds to finish.
  (set-loop-drain-request! loop #f)
  (unless (loop-drain-deadline loop)
    (pause-accepting! loop)
    (set-loop-drain-deadline! loop (+ (loop-now loop) grace))
    (let ((table (loop-connections loop)))
      (let lp ((fd 0))
        (when (< fd (vector-length table))
          (let ((conn (vector-ref table fd)))
            (when (and conn
                       (eq? (connection-state conn) 'idle)
                       (not (connection-input conn)))
              (close-connection! loop conn)))
          (lp (+ fd 1)))))))

(define (serve-rounds loop)
  (let ((epfd (loop-epfd loop))
        (events (loop-events loop))
        (listeners (loop-listeners loop))
        (wake-fd (port->fdes (car (loop-wake-ports loop)))))
    (let round ((last-sweep (current-time)))
      (when (loop-running? loop)
        (let ((n (epoll-wait epfd events (loop-events-address loop) 1000))
              (now (current-time)))
          (set-loop-now! loop now)
          (refresh-date-line! now)
          (let ((grace (loop-drain-request loop)))
            (when grace (start-drain! loop grace)))
          (let lp ((i 0))
            (when (< i n)
              (let ((fd (epoll-event-fd events i))
                    (flags (epoll-event-flags events i)))
                (cond
                 ((memv fd listeners)
                  (accept-ready! loop fd))
                 ((= fd wake-fd)
                  ;; Whoever woke us set a flag or finished a job; empty
                  ;; the pipe.
                  (fd-read wake-fd (loop-input-address loop) 0 input-size)
                  (finish-jobs! loop))
                 ((eqv? fd (loop-signal-fd loop))
                  ((loop-on-signal loop) (read-signal fd))
                  (let ((grace (loop-drain-request loop)))
                    (when grace (start-drain! loop grace))))
                 (else
                  (let ((conn (connection-ref loop fd)))
                    (when conn
                      (cond
                       ((eq? (connection-state conn) 'writing)
                        (if (zero? (logand flags EPOLLOUT))
                            ;; EPOLLERR or EPOLLHUP: the peer is gone.
                            (close-connection! loop conn)
                            (write-ready! loop conn)))
                       (else
                        (read-ready! loop conn))))))))
              (lp (+ i 1))))
          (cond
           ((loop-drain-deadline loop)
            (when (or (zero? (loop-count loop))
                      (>= now (loop-drain-deadline loop)))
              (set-loop-running! loop #f)))
           ((and (loop-exit-when-idle? loop) (zero? (loop-count loop)))
            (set-loop-running! loop #f))
           ((and (loop-paused? loop)
                 (< (loop-count loop)
                    (settings-max-connections (loop-settings loop)))
                 (>= now (loop-accept-resume loop)))
            (set-loop-paused! loop #f)
            (watch-listeners! loop)))
          (if (> now last-sweep)
              (begin (sweep! loop) (round now))
              (round last-sweep)))))))

(define (stop-pool! loop pool)
  ;; Make the threads give their connections back: shut the sockets down
  ;; under them (their reads and writes fail at once), then wait up to
  ;; two seconds for them to finish; a handler still computing after that
  ;; finds its descriptor closed.
  (let ((table (loop-connections loop)))
    (let lp ((fd 0))
      (when (< fd (vector-length table))
        (let ((conn (vector-ref table fd)))
          (when (and conn (eq? (connection-state conn) 'handed-off))
            (fd-shutdown (connection-fd conn))
            (fd-shutdown (connection-out-fd conn))))
        (lp (+ fd 1)))))
  (lock-mutex (pool-mutex pool))
  (set-pool-stopping! pool #t)
  (broadcast-condition-variable (pool-condition pool))
  (let ((deadline (+ (current-time) 2)))
    (let wait ()
      (when (and (> (pool-threads pool) 0) (< (current-time) deadline))
        (wait-condition-variable (pool-condition pool) (pool-mutex pool) deadline)
        (wait))))
  (unlock-mutex (pool-mutex pool))
  (set-loop-pool! loop #f))

(define (close-all! loop)
  ;; Close every connection the loop holds, and its epoll descriptor.
  (let ((pool (loop-pool loop)))
    (when pool (stop-pool! loop pool)))
  (let ((table (loop-connections loop)))
    (let lp ((fd 0))
      (when (< fd (vector-length table))
        (let ((conn (vector-ref table fd)))
          (when conn (close-connection! loop conn)))
        (lp (+ fd 1)))))
  (fd-close (loop-epfd loop))
  (close-port (car (loop-wake-ports loop)))
  (close-port (cdr (loop-wake-ports loop)))
  (set! current-loop #f))

(define (close-loop-connections!)
  "Close every connection and the epoll descriptor of the loop of this
process, for a loop that was suspended rather than stopped (see (web
server plucky))."
  (when current-loop
    (close-all! current-loop)))

;;; (plucky server loop) ends here
