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
  #:use-module (srfi srfi-9)
  #:use-module ((srfi srfi-9 gnu) #:select (set-record-type-printer!))
  #:use-module ((system foreign) #:select (pointer->procedure size_t))
  #:use-module (ice-9 match)
  #:use-module ((ice-9 exceptions) #:select (exception-kind exception-args))
  #:use-module (web request)
  #:use-module ((web response) #:select (response? response-code))
  #:use-module (plucky sys libc)
  #:use-module (plucky sys epoll)
  #:use-module ((plucky sys signal) #:select (read-signal run-finalizers!))
  #:use-module (plucky http error)
  #:use-module (plucky http parse)
  #:use-module (plucky http date)
  #:use-module (plucky http response)
  ;; Loaded by the first chunked request body, not at start-up (bench/startup).
  #:autoload (plucky http chunked) (make-chunked-decoder decode-chunked!)
  #:use-module ((srfi srfi-1) #:select (every))
  #:export (make-loop-settings
            loop-settings?
            %default-loop-settings
            run-loop
            stop-loop!
            drain-loop!
            current-request-peer
            close-loop-connections!))

;;;
;;; Settings
;;;

(define-record-type <loop-settings>
  (%make-loop-settings parse-limits max-body max-connections
                       keep-alive-timeout header-timeout body-timeout
                       write-timeout)
  loop-settings?
  (parse-limits settings-parse-limits)            ; <parse-limits>
  (max-body settings-max-body)                    ; bytes; larger -> 413
  (max-connections settings-max-connections)      ; per worker
  (keep-alive-timeout settings-keep-alive-timeout) ; seconds idle between requests
  (header-timeout settings-header-timeout)        ; seconds for a whole head
  (body-timeout settings-body-timeout)            ; seconds without body progress
  (write-timeout settings-write-timeout))         ; seconds without write progress

(define* (make-loop-settings #:key
                             (parse-limits %default-parse-limits)
                             (max-body (* 64 1024 1024))
                             (max-connections 10000)
                             (keep-alive-timeout 60)
                             (header-timeout 10)
                             (body-timeout 30)
                             (write-timeout 30))
  "Return the settings of a worker loop.  Sizes are in bytes, timeouts in
seconds."
  (%make-loop-settings parse-limits max-body max-connections
                       keep-alive-timeout header-timeout body-timeout
                       write-timeout))

(define %default-loop-settings (make-loop-settings))

;;;
;;; Connections
;;;

(define-record-type <connection>
  (%make-connection fd out-fd peer state input input-address start end
                    request body body-fill body-length pending close-after? deadline
                    watched?)
  connection?
  (fd connection-fd)                    ; read from it; a socket, or stdin
  (out-fd connection-out-fd)            ; write to it; the socket, or stdout
  (peer connection-peer)                ; "address" of the client, or #f
  ;; idle | head | body | chunked | writing | lingering
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

(define-record-type <loop>
  (%make-loop epfd listeners events events-address connections count
              input input-address output iovecs iovecs-address
              handler state settings now running? paused? exclusive?
              guarded on-response exit-when-idle? wake-ports drain-request
              drain-deadline peer-buffer signal-fd on-signal
              observer read-ns parse-ns batch sampled serving accept-resume)
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
  (read-ns loop-read-ns set-loop-read-ns!)     ; read(2) time not yet reported
  (parse-ns loop-parse-ns set-loop-parse-ns!)  ; parse time of the current request
  (batch loop-batch set-loop-batch!)           ; answers waiting for the next write
  (sampled loop-sampled set-loop-sampled!)     ; requests until the next allocation sample
  (serving loop-serving set-loop-serving!)     ; the connection whose request is handled
  (accept-resume loop-accept-resume set-loop-accept-resume!)) ; second to accept again

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
  (let* ((loop current-loop)
         (conn (and loop (loop-serving loop))))
    (and conn (connection-peer conn))))

(define (drain-loop! grace)
  "Ask the loop running in this process to drain: stop accepting, close
idle connections, answer the requests in flight (with Connection: close),
and return once no connection is left or GRACE seconds have passed.  Safe
to call from a signal handler."
  (let ((loop current-loop))
    (when loop
      (set-loop-drain-request! loop grace)
      (wake! loop))))

;;;
;;; Logging
;;;

(define (log-error fmt . args)
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
(define-syntax-rule (clock) (get-internal-real-time))

(define gc-total-bytes
  ;; (dynamic-link), not "libgc": libguile's libgc is already in the
  ;; process, and looking up libgc.so searched the library path at every
  ;; start (bench/startup) and needed libgc-dev's unversioned libgc.so.
  (pointer->procedure size_t (dynamic-func "GC_get_total_bytes" (dynamic-link))
                      '()))

(define-syntax-rule (timed loop expression record!)
  ;; Evaluate EXPRESSION; when the loop observes, call (RECORD! ns) with
  ;; its duration first.  -> the (single) value of EXPRESSION
  (if (loop-observer loop)
      (let* ((start (clock))
             (value expression))
        (record! (- (clock) start))
        value)
      expression))

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
      (timed loop (fd-close fd)
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
        (let* ((start (and (loop-observer loop) (clock)))
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
                         (and (or (loop-on-response loop) (loop-observer loop))
                              (sockaddr->string (car (loop-peer-buffer loop)))))))
              (register-connection! loop conn)
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
            (log-error "accept: ~a; not accepting for a second" (errno->string fd))
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
    ((writing) #t)                      ; not watched for input; ignore
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
               (n (timed loop
                         (fd-read (connection-fd conn) (connection-input-address conn)
                                  end (- (bytevector-length own) end))
                         (lambda (ns) (set-loop-read-ns! loop (+ (loop-read-ns loop) ns))))))
          (cond
           ((> n 0)
            (set-connection-end! conn (+ end n))
            (serve-input! loop conn own start (+ end n)))
           ((= n (- errno-EAGAIN)) #t)
           (else (close-connection! loop conn))))
        (let ((n (timed loop
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
         (n (timed loop
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
            (let ((close? (respond! loop conn request body)))
              (if close?
                  (finish! loop conn #t #f)
                  (serve-input! loop conn (loop-input loop) 0 0)))))))
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
                (if (loop-observer loop)
                    (let ((start-ns (clock)))
                      (call-with-values
                          (lambda ()
                            (parse-request-head bv start end
                                                (settings-parse-limits settings)))
                        (lambda (request index)
                          (set-loop-parse-ns! loop (- (clock) start-ns))
                          (values request index))))
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
           ((http-error? request)
            (refuse! loop conn #f (http-error-status request)
                     (http-error-reason request)))
           (else
            (let ((length (request-body-length request)))
              (cond
               ((unmet-expectation? request)
                (refuse! loop conn request 417 #f))
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
                  (if close?
                      (begin
                        (set-connection-input! conn #f)
                        (finish! loop conn #t #f))
                      (lp (+ index length)))))
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
            (if (respond! loop conn request (and (> (bytevector-length body) 0) body))
                (finish! loop conn #t #f)
                (serve-input! loop conn bv index end))))
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
  (let ((n (timed loop
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
    (false-if-exception
     (print-exception port #f (exception-kind exception) (exception-args exception)))
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
  (call-with-prompt handler-failed
    (lambda ()
      (set-loop-guarded! loop request)
      (let ((state (loop-state loop)))
        (call-with-values
            (lambda ()
              (if (null? state)
                  ((loop-handler loop) request body)
                  (apply (loop-handler loop) request body state)))
          (lambda (response body . state)
            (set-loop-guarded! loop #f)
            (unless (null? state)
              (set-loop-state! loop state))
            (values response body)))))
    (lambda (k request exception stack)
      (report-handler-error request exception stack)
      (let ((observer (loop-observer loop)))
        (when observer
          (observer 'failure request exception stack)))
      (values #f #f))))

(define (respond! loop conn request body)
  ;; Call the handler and append its answer to the output buffer.
  ;; -> #t when the connection must close after the answer.
  (let* ((out (loop-output loop))
         (mark (output-fill out))
         (observer (loop-observer loop))
         ;; Allocation is sampled, one request in 16: reading the
         ;; collector's counter twice per request would double the cost
         ;; of accounting.
         (allocated (and observer
                         (let ((countdown (- (loop-sampled loop) 1)))
                           (if (> countdown 0)
                               (begin (set-loop-sampled! loop countdown) #f)
                               (begin (set-loop-sampled! loop 16) (gc-total-bytes))))))
         (start (and observer (clock)))
         (close? (or (not (request-keep-alive? request))
                     (and (loop-drain-deadline loop) #t))))
    (define (observe! code handled)
      ;; HANDLED: the clock when the handler returned.
      (when observer
        (let ((now (clock)))
          (observer 'request request code (loop-read-ns loop) (loop-parse-ns loop)
                    (- handled start) (- now handled)
                    (and allocated (- (gc-total-bytes) allocated)))
          (set-loop-read-ns! loop 0)
          (set-loop-batch! loop (+ 1 (loop-batch loop))))))
    (set-loop-serving! loop conn)
    (call-with-values (lambda () (call-handler loop request body))
      (lambda (response response-body)
        (set-loop-serving! loop #f)
        (let ((handled (and observer (clock))))
          (define (fail)
            (set-output-fill! out mark)
            (write-error-response! out (request-version request) 500)
            (report-response! loop conn request 500 (- (output-fill out) mark))
            (observe! 500 handled)
            #t)
          (if (not response)
              (fail)
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
                      (let ((code (if (response? response) (response-code response) 200)))
                        (when (loop-on-response loop)
                          (report-response!
                           loop conn request code
                           (+ (- (output-fill out) mark)
                              (if large-body (bytevector-length large-body) 0))))
                        (observe! code handled))
                      (when large-body
                        (flush-with-body! loop conn large-body))
                      close?)))
                (lambda (k request exception stack)
                  (report-handler-error request exception #f)
                  (fail)))))))))

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
    (let ((observer (loop-observer loop)))
      (when observer
        (observer 'request #f code (loop-read-ns loop) (loop-parse-ns loop) 0 0 #f)
        (set-loop-read-ns! loop 0)
        (set-loop-batch! loop (+ 1 (loop-batch loop)))))
    (finish! loop conn #t #t)))

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
          (let* ((n (timed loop
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
          (let ((n (timed loop
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
                   (observer #f))
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

OBSERVER, if given, is told where the time goes, in nanoseconds, on the
loop's thread (it must not block):
  (OBSERVER 'request request code read parse handler serialize allocated)
    after each answer: REQUEST as the handler saw it (#f if refused),
    the status CODE, the time in read(2) that brought its head (0 for a
    request that came pipelined behind another), parsing, the handler,
    and serialising; ALLOCATED is the bytes the handler and serialising
    allocated, measured on one request in 16 and #f on the others;
  (OBSERVER 'failure request exception stack) when the handler raised
    EXCEPTION (STACK: where it was raised); the 500 is reported after;
  (OBSERVER 'write answers ns) after each write(2) of ANSWERS answers;
  (OBSERVER 'accept ns) after each accepted connection;
  (OBSERVER 'close ns) after each close(2)."
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
                           observer 0 0 0 0 #f 0)))
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
                  ;; Whoever woke us set a flag; empty the pipe.
                  (fd-read wake-fd (loop-input-address loop) 0 input-size))
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

(define (close-all! loop)
  ;; Close every connection the loop holds, and its epoll descriptor.
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
