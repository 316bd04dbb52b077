;;; (plucky server http1) --- an HTTP/1 connection: every state it goes through

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The loop (plucky server loop) only waits for descriptors and timers;
;;; what a connection does when one of them fires is decided here, and
;;; only here: every change of a connection's state is in this module.
;;; A request flows through these modules, in this order:
;;;
;;;   (plucky server loop)      epoll_wait, accept: `connection-accepted!',
;;;                             `connection-ready!', `connection-expired!'
;;;   this module               reads (the loop's shared buffer), parses
;;;                             every complete request with (plucky http
;;;                             parse), in order (pipelining)
;;;   (plucky server respond)   `respond!' calls the handler (which may
;;;                             suspend) and serialises its answer with
;;;                             (plucky http response)
;;;   this module               `after-respond!' does what the answer
;;;                             calls for; `finish!' sends it with
;;;                             (plucky server output), then the
;;;                             connection closes, lingers, is handed over
;;;                             or waits for its next request
;;;
;;; A connection's states (`connection-state'), and what moves it on:
;;;
;;;   new        accepted, nothing read yet; its first bytes choose its
;;;              protocol (`choose-protocol'): HTTP/1 goes on here
;;;   idle       between requests (keep-alive timeout)
;;;   head       part of a head has come (header timeout)
;;;   body       a Content-Length body is arriving into storage of its
;;;              own (body timeout)
;;;   chunked    a chunked body is arriving, decoded as it comes
;;;   writing    answers wait for the socket (EPOLLOUT, write timeout);
;;;              requests behind them wait in the connection's input
;;;   suspended  its handler waits (plucky server suspend): watched for
;;;              the client hanging up only; handler timeout
;;;   streaming  a streamed answer's body procedure runs on the loop
;;;   handed-off a pool thread has the connection (a stream that
;;;              blocks); out of epoll until `job-done!'
;;;   lingering  after an error answer: reads and drops, then closes
;;;
;;; Requests that arrive behind one that waits (pipelined) stay in the
;;; connection's input and are served once it is free again.  A body
;;; that has not all arrived gets storage of its own and is read straight
;;; into it, or decoded as it comes (chunked); the request is answered
;;; once it is whole.  A handler that reads bodies from ports
;;; (`with-body-port') is called at once, with a port that reads the
;;; socket as it goes (`serve-body-port!').
;;;
;;; Code:

(define-module (plucky server http1)
  #:use-module (rnrs bytevectors)
  #:use-module ((srfi srfi-1) #:select (every))
  #:use-module (srfi srfi-9)
  #:use-module (web request)
  #:use-module ((web uri) #:select (uri-path))
  #:use-module (plucky sys libc)
  #:use-module ((plucky sys epoll)
                #:select (EPOLLIN EPOLLOUT EPOLLRDHUP EPOLLHUP EPOLLERR epoll-remove!))
  #:use-module (plucky http error)
  #:use-module (plucky http parse)
  #:use-module ((plucky http response) #:select (make-output output-put-bytes!
                                                 output-put-slice! output-fill
                                                 output-bytes write-error-response!))
  ;; Loaded by the first chunked request body, not at start-up (bench/startup).
  #:autoload (plucky http chunked) (make-chunked-decoder decode-chunked!)
  ;; Loaded by the first body read as a port (bench/startup).
  #:autoload (plucky server stream) (make-body-pipe piped-body? awaiting-body?)
  ;; Loaded by the first HTTP/2 connection, not at start-up (bench/startup).
  #:autoload (plucky server http2) (http2-preface? start-http2! http2-ready!)
  #:use-module (plucky server transport)
  #:use-module (plucky server connection)
  #:use-module ((plucky server probe)
                #:select (timed-read parse-timed probe-refusal!))
  #:use-module (plucky server output)
  #:use-module (plucky server pool)
  #:use-module (plucky server respond)
  #:use-module ((plucky server hooks) #:select (observer-hooks-on-wait
                                                observer-hooks-on-failure))
  #:export (connection-accepted!
            connection-ready!
            connection-expired!
            connection-idle?
            connection-handed-off?
            connection-waiting-task
            connection-http2?
            job-done!
            job-expired!
            run-ready-tasks!))

;; `parse-head' runs once per request, inlined where it is called
;; (plucky sys inline): bench/instructions.
(eval-when (expand)
  (use-modules (plucky sys inline)))

;;;
;;; What the loop tells a connection
;;;

(define (connection-accepted! loop conn)
  "Serve CONN, which LOOP has just accepted and entered in its table:
read what it sent, and watch it if it stays open; return nothing."
  ;; The request is usually there already (the listener defers accept
  ;; until data arrives): serve it now rather than after another
  ;; epoll_wait.  Only a connection that stays open is then watched (see
  ;; `watch!'): one answered and closed here costs accept4, read, write
  ;; and close and nothing else (bench/hello, Connection: close).
  (read-ready! loop conn)
  (read-pending! loop conn)
  (when (and (eq? (connection-ref loop (connection-fd conn)) conn)
             (not (connection-watched? conn)))
    (watch! loop conn EPOLLIN)))

(define (connection-ready! loop conn flags)
  "Do what CONN's state calls for now that epoll reported FLAGS on its
descriptor; return nothing."
  (case (connection-state conn)
    ((suspended)
     ;; Watched for EPOLLRDHUP alone: the client left while its handler
     ;; waits; or, its request's body read as a port, it shut its side
     ;; down after its request, as HTTP/1.1 allows: then it is answered,
     ;; and the body's reads tell if it left before the body's end.
     (if (and (loop-body-port? loop)
              (not (logtest flags (logior EPOLLHUP EPOLLERR)))
              (piped-body? (task-request (connection-task conn))))
         (watch! loop conn 0)
         (cancel-task! loop (connection-task conn) 'client-gone)))
    ((streaming)
     (if (logtest flags (logior EPOLLRDHUP EPOLLHUP EPOLLERR))
         (give-up-stream! loop conn)
         (stream-writable! loop conn)))
    ((writing)
     (if (zero? (logand flags EPOLLOUT))
         ;; EPOLLERR or EPOLLHUP: the peer is gone.
         (close-connection! loop conn)
         (when (write-ready! loop conn)
           (serve-input! loop conn (connection-input conn)
                         (connection-start conn) (connection-end conn)))))
    (else
     (read-ready! loop conn)))
  (read-pending! loop conn))

(define (read-pending! loop conn)
  ;; Read what CONN's transport holds that epoll cannot show (a TLS
  ;; record larger than the last read's room), while CONN reads.
  (let ((fd (connection-fd conn))
        (pending? (transport-pending? (connection-transport conn))))
    (let lp ()
      (when (and (pending? fd)
                 (eq? (connection-ref loop fd) conn)
                 (not (memq (connection-state conn)
                            '(writing handed-off suspended streaming))))
        (read-ready! loop conn)
        (lp)))))

(define (connection-expired! loop conn)
  "Do what CONN's state calls for now that its deadline has passed;
return nothing."
  (case (connection-state conn)
    ((suspended)
     ;; Past the handler timeout: give it up, a 503.  Not while it waits
     ;; for its body, the client's time: the body time-out bounds that
     ;; wait (a 408 where it waits).
     (if (and (loop-body-port? loop)
              (awaiting-body? (task-request (connection-task conn))))
         (set-deadline! loop conn (settings-body-ms (loop-settings loop)))
         (begin
           (set-connection-deadline! conn never)
           (cancel-task! loop (connection-task conn) 'timeout))))
    ((streaming)
     ;; The client has read nothing for the write timeout.
     (set-connection-deadline! conn never)
     (give-up-stream! loop conn))
    ((head body chunked)
     ;; A head or body that is too slow: say so if we still can.
     (let ((request (arriving-request-of conn)))
       (set-connection-state! conn 'idle)
       (refuse! loop conn request 408 #f)))
    (else
     (close-connection! loop conn))))

(define (give-up-stream! loop conn)
  ;; CONN streams an answer its client no longer takes: give its body
  ;; procedure up if it waits (it unwinds, then the connection closes),
  ;; else close now (it runs: its next write finds the connection gone).
  (let ((task (connection-task conn)))
    (if task
        (cancel-task! loop task 'client-gone)
        (close-connection! loop conn))))

(define (connection-idle? conn)
  "Return true when CONN waits for a request and holds none of one: a
drain closes it at once."
  (and (memq (connection-state conn) '(new idle))
       (not (connection-input conn))))

(define (connection-handed-off? conn)
  "Return true when a thread of the pool has CONN."
  (eq? (connection-state conn) 'handed-off))

(define (connection-http2? conn)
  "Return true when CONN speaks HTTP/2 (plucky server http2)."
  (eq? (connection-state conn) 'h2))

(define (connection-waiting-task conn)
  "Return the task (plucky server respond) of CONN's handler or stream
body when it waits, else #f."
  (and (memq (connection-state conn) '(suspended streaming))
       (connection-task conn)))

;;;
;;; Reading
;;;

(define-syntax-rule (read-into! loop conn address start count)
  ;; -> bytes read through CONN's transport, timed for the observer
  (timed-read (loop-probe loop)
              ((transport-read (connection-transport conn))
               (connection-fd conn) address start count)))

(define (read-ready! loop conn)
  "Read what CONN has for LOOP and serve the requests it completes;
return nothing."
  (case (connection-state conn)
    ((lingering)
     (let ((n ((transport-read (connection-transport conn))
               (connection-fd conn) (loop-input-address loop) 0 input-size)))
       (unless (or (> n 0) (= n (- errno-EAGAIN)))
         (close-connection! loop conn))))
    ((body) (read-body! loop conn))
    ((chunked) (read-chunked! loop conn))
    ((writing handed-off suspended streaming) #t) ; not watched for input
    ((h2) (http2-ready! loop conn))
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
               (n (read-into! loop conn (connection-input-address conn)
                              end (- (bytevector-length own) end))))
          (cond
           ((> n 0)
            (set-connection-end! conn (+ end n))
            (serve-input! loop conn own start (+ end n)))
           ((= n (- errno-EAGAIN)) #t)
           (else (close-connection! loop conn))))
        (let ((n (read-into! loop conn (loop-input-address loop) 0 input-size)))
          (cond
           ((> n 0)
            (if (eq? (connection-state conn) 'new)
                (start-protocol! loop conn (loop-input loop) 0 n)
                (serve-input! loop conn (loop-input loop) 0 n)))
           ((= n (- errno-EAGAIN)) #t)
           (else (close-connection! loop conn)))))))

(define body-chunk
  ;; A body that has not arrived gets storage as it arrives, this much at
  ;; first and twice as much each time it fills, never more than its
  ;; declared length: a head that declares 64 MiB and sends nothing costs
  ;; 64 KiB, not 64 MiB (tests/regress/body-allocated-before-it-arrives).
  65536)

(define-record-type <arriving>
  ;; A request whose body arrives (states body and chunked), kept in
  ;; its connection's `connection-body'.
  (make-arriving request bytes fill length)
  arriving?
  (request arriving-request)
  ;; state body: the bytevector being filled, FILL bytes of the declared
  ;; LENGTH in; state chunked: (decoder . output collecting the data)
  (bytes arriving-bytes set-arriving-bytes!)
  (fill arriving-fill set-arriving-fill!)
  (length arriving-length))

(define (arriving-request-of conn)
  ;; -> the request whose body CONN waits for, or #f
  (let ((arriving (connection-body conn)))
    (and (arriving? arriving) (arriving-request arriving))))

(define (read-body! loop conn)
  (let* ((arriving (connection-body conn))
         (length (arriving-length arriving))
         (fill (arriving-fill arriving))
         (body (let ((body (arriving-bytes arriving)))
                 (if (< fill (bytevector-length body))
                     body
                     (let ((bigger (make-bytevector
                                    (min length (* 2 (bytevector-length body))))))
                       (bytevector-copy! body 0 bigger 0 fill)
                       (set-arriving-bytes! arriving bigger)
                       bigger))))
         (n (read-into! loop conn (bytevector-address body) fill
                        (- (bytevector-length body) fill))))
    (cond
     ((> n 0)
      (let ((fill (+ fill n)))
        (set-arriving-fill! arriving fill)
        (set-deadline! loop conn (settings-body-ms (loop-settings loop)))
        (when (= fill length)
          (let ((request (arriving-request arriving)))
            (set-connection-body! conn #f)
            (set-connection-state! conn 'idle)
            (when (after-respond! loop conn (respond! loop conn request body)
                                  (loop-input loop) 0 0)
              (serve-input! loop conn (loop-input loop) 0 0))))))
     ((= n (- errno-EAGAIN)) #t)
     (else (close-connection! loop conn)))))

;;;
;;; Where a connection's protocol is chosen
;;;

;; Here the server decides which protocol a connection speaks: once its
;; first bytes are in, and with them, over TLS, the handshake and what
;; ALPN agreed.  HTTP/1 is served by this module.  HTTP/2 starts with
;; its preface, "PRI * HTTP/2.0", whether ALPN agreed on "h2" or the
;; client has prior knowledge on a clear-text port: to the HTTP/1
;; parser that is a head of version 2.0, refused with a 505, and where
;; `serve-input!' would answer that 505 it hands the connection to
;; (plucky server http2) instead, which keeps it in the loop's table in
;; the state `h2'.  Nothing on the HTTP/1 path pays for it.

(define (start-protocol! loop conn bv start end)
  ;; CONN, new, has read its first bytes, BV [START, END).
  (let ((alpn ((transport-protocol (connection-transport conn)) (connection-fd conn))))
    ;; No ALPN (plain HTTP, or a TLS client that offered none) is
    ;; HTTP/1: compared only when there is one, as string=? costs a
    ;; connection-per-request hello a share (bench/instructions-real).
    (if (or (not alpn) (string=? alpn "http/1.1") (string=? alpn "h2"))
        (begin
          (set-connection-state! conn 'idle)
          (serve-input! loop conn bv start end))
        ;; Agreed on and not served: (plucky server tls) offers no other.
        (close-connection! loop conn))))

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

(define-inline (parse-head loop bv start end)
  ;; -> (values request index), as `parse-request-head'; timed when the
  ;; observer asks for this request (see `parse-timed')
  (parse-timed (loop-probe loop)
               (parse-request-head bv start end
                                   (settings-parse-limits (loop-settings loop)))))

(define (serve-input! loop conn bv start end)
  "Parse and answer every complete request in BV [START, END) that came
on CONN, then send the answers.  Whatever is left over waits in the
connection.  Return nothing."
  (let ((settings (loop-settings loop)))
    (let lp ((start start))
      (call-with-values
          (lambda ()
            (if (= start end)
                (values 'incomplete #f)
                (parse-head loop bv start end)))
        (lambda (request index)
          (cond
           ((eq? request 'incomplete)
            (keep-input! conn bv start end)
            (cond
             ((= start end)
              (set-connection-state! conn 'idle)
              (set-deadline! loop conn (settings-keep-alive-ms settings)))
             ((not (eq? (connection-state conn) 'head))
              (set-connection-state! conn 'head)
              (set-deadline! loop conn (settings-header-ms settings))))
            (finish! loop conn #f #f))
           ;; `request?' first: `http-error?' is the predicate of an
           ;; exception type, which Guile makes extensible, so on anything
           ;; else it looks up the record type's parents, every request
           ;; (statprof: record-type-parents, 1% of a keep-alive hello).
           ((and (not (request? request)) (http-error? request))
            ;; The one place a connection becomes HTTP/2: its preface
            ;; is a head of version 2.0 to the HTTP/1 parser.
            (if (and (= (http-error-status request) 505)
                     (http2-preface? bv start end))
                (start-http2! loop conn bv start end)
                (refuse! loop conn #f (http-error-status request)
                         (http-error-reason request))))
           (else
            (let ((length (request-body-length request)))
              (cond
               ((unmet-expectation? request)
                (refuse! loop conn request 417 #f))
               ((and (eq? (request-method request) 'CONNECT)
                     (not (connect-handler? (loop-handler loop))))
                (refuse! loop conn request 501 #f))
               ((and (loop-body-port? loop)
                     (or (eq? length 'chunked)
                         (< 0 length (+ 1 (settings-max-body settings)))))
                ;; The handler reads the body itself, as it comes.
                (serve-body-port! loop conn request length bv index end))
               ((eq? length 'chunked)
                (let ((decoder (make-chunked-decoder
                                #:max-total (settings-max-body settings)))
                      (collected (make-output 4096)))
                  (set-connection-input! conn #f)
                  (set-connection-body! conn (make-arriving request
                                                            (cons decoder collected)
                                                            0 #f))
                  (feed-chunked! loop conn bv index end)))
               ((> length (settings-max-body settings))
                (refuse! loop conn request 413 #f))
               ((<= (+ index length) end)
                (let ((body (and (> length 0)
                                 (let ((body (make-bytevector length)))
                                   (bytevector-copy! bv index body 0 length)
                                   body))))
                  (when (after-respond! loop conn (respond! loop conn request body)
                                        bv (+ index length) end)
                    (lp (+ index length)))))
               (else
                ;; The body has not all arrived: give it storage of its
                ;; own and read the rest straight into it.
                (let* ((have (- end index))
                       (body (make-bytevector (min length (max have body-chunk)))))
                  (continue-if-expected! loop conn request)
                  (bytevector-copy! bv index body 0 have)
                  (set-connection-input! conn #f)
                  (set-connection-body! conn (make-arriving request body have length))
                  (set-connection-state! conn 'body)
                  (set-deadline! loop conn (settings-body-ms settings))
                  (finish! loop conn #f #f))))))))))))

;;;
;;; Sending, and what comes after
;;;

(define (finish! loop conn close? linger?)
  "Send what the requests served on CONN produced; then close (CLOSE?),
linger (LINGER? too), wait for the socket to drain, hand the connection
over (a takeover), or wait for the next request.  Return nothing."
  (unless (write-output! loop conn)
    (set! close? #t)
    (set! linger? #f))
  (cond
   ((pair? (connection-pending conn))
    ;; Wait until the socket takes the rest.
    (set-connection-close-after! conn (or close? (connection-close-after? conn)))
    (wait-for-socket! loop conn))
   ((or close? (connection-close-after? conn))
    (if linger?
        (linger! loop conn)
        (close-connection! loop conn)))
   ((connection-takeover conn)
    (take-over! loop conn (connection-takeover conn)))))

(define (wait-for-socket! loop conn)
  ;; CONN's answers wait for the socket to take them: state writing.
  (set-connection-state! conn 'writing)
  (set-deadline! loop conn (settings-write-ms (loop-settings loop)))
  (watch! loop conn EPOLLOUT))

(define (write-ready! loop conn)
  "Send CONN's queued output in order, now that the socket takes more.
Return #t when the connection is idle again with requests of its own
waiting (the caller serves them), else #f."
  (case (send-pending! loop conn)
    ((done)
     (cond
      ((connection-close-after? conn)
       (close-connection! loop conn)
       #f)
      ((connection-takeover conn)
       (take-over! loop conn (connection-takeover conn))
       #f)
      (else
       (set-connection-state! conn 'idle)
       (set-deadline! loop conn (settings-keep-alive-ms (loop-settings loop)))
       (watch! loop conn EPOLLIN)
       ;; Requests that arrived while we were writing.
       (and (connection-input conn) #t))))
    ((again) #f)
    (else (close-connection! loop conn) #f)))

(define (linger! loop conn)
  "Shut down CONN's sending side and read and drop what still comes for a
short while, then close; return nothing."
  ;; After an error answer the client may still be sending; closing at
  ;; once would make the kernel answer its bytes with a reset, which can
  ;; destroy our answer before the client reads it (as nginx's
  ;; lingering_close).
  (if (< ((transport-shutdown (connection-transport conn)) (connection-out-fd conn)) 0)
      ;; Not a socket (inetd on a pipe): nothing to linger for.
      (close-connection! loop conn)
      (begin
        (set-connection-state! conn 'lingering)
        (set-connection-input! conn #f)
        (set-deadline! loop conn 2000)
        (watch! loop conn EPOLLIN))))

(define (refuse! loop conn request code reason)
  "Answer CODE (with REASON, or the usual phrase if #f) to a request that
never reached a handler (REQUEST, or #f when its head could not be
read), then linger-close CONN.  Return nothing."
  (let* ((out (loop-output loop))
         (mark (output-fill out)))
    (set-connection-input! conn #f)
    (set-connection-body! conn #f)
    (write-error-response! out (if request (request-version request) '(1 . 1))
                           code reason (if request (request-method request) 'GET))
    (report-response! loop conn #f code (- (output-fill out) mark))
    (probe-refusal! (loop-probe loop) code (- (output-fill out) mark))
    (finish! loop conn #t #t)))

;;;
;;; After an answer
;;;

(define (after-respond! loop conn outcome bv index end)
  "Do what OUTCOME, the result of `respond!' (or of a stream's body
procedure, or of a handler resumed) for a request on CONN, calls for;
BV [INDEX, END) are the bytes that came after that request.  Return #t
when the caller is to serve those bytes now (the connection stays open
and is free), else #f."
  ;; The one place a response's outcome is dispatched on.  Requests
  ;; behind one that waits (a thread, a handler's wait, the socket, a
  ;; stream) wait in the connection's input (`keep-input!').
  (cond
   ((not outcome) #t)
   ((eq? outcome #t)
    (set-connection-input! conn #f)
    (finish! loop conn #t #f)
    #f)
   ((symbol? outcome)
    (case outcome
      ((suspended)
       ;; EPOLLRDHUP alone: what the client sends meanwhile waits in the
       ;; kernel (pipelined requests), but its leaving wakes us.  The
       ;; answers before the wait leave now, or queue.
       (set-connection-state! conn 'suspended)
       (set-connection-deadline! conn never)
       (let ((limit (tasks-handler-ms (loop-tasks loop))))
         (when limit (set-deadline! loop conn limit)))
       (watch! loop conn EPOLLRDHUP)
       (keep-input! conn bv index end)
       (write-output! loop conn)
       #f)
      ((streaming)
       ;; A stream's body procedure waits.
       (keep-input! conn bv index end)
       #f)
      ((writing)
       ;; A stream is done; its last bytes wait for the socket.
       (wait-for-socket! loop conn)
       (keep-input! conn bv index end)
       #f)
      ((stream-done)
       (set-connection-state! conn 'idle)
       (watch! loop conn EPOLLIN)
       #t)
      ((takeover)
       ;; What follows is the new protocol's: the takeover gets it.
       (keep-input! conn bv index end)
       (finish! loop conn #f #f)
       #f)))
   ((job? outcome)
    ;; A stream that blocks, for a thread.
    (keep-input! conn bv index end)
    (hand-to-thread! loop conn outcome)
    #f)
   (else
    ;; A <task>: a stream whose body procedure runs on the loop.  Its
    ;; writes go out as the socket takes them; the client hanging up
    ;; gives it up.
    (set-connection-state! conn 'streaming)
    (set-connection-deadline! conn never)
    ;; Streamed writes are small (an event at a time): Nagle's
    ;; algorithm would hold each one until the client's delayed ACK.
    (fd-set-tcp-nodelay! (connection-out-fd conn))
    (watch! loop conn EPOLLRDHUP)
    (after-respond! loop conn (run-stream! loop outcome) bv index end))))

(define (hand-to-thread! loop conn job)
  ;; Give CONN to a thread of the pool for JOB: out of epoll's set until
  ;; `job-done!'.
  (set-connection-state! conn 'handed-off)
  (set-connection-deadline! conn never)
  (when (connection-watched? conn)
    (epoll-remove! (loop-epfd loop) (connection-fd conn))
    (set-connection-watched?! conn #f))
  ;; A stream's writes are small (an event at a time): see above.
  (fd-set-tcp-nodelay! (connection-out-fd conn))
  (hand-off! loop conn job))

(define (run-ready-tasks! loop)
  "Resume every suspended handler of LOOP whose wait has ended, and those
their resumption made ready in turn; return nothing."
  (let lp ()
    (let ((ready (take-ready-tasks! loop)))
      (unless (null? ready)
        (for-each (lambda (entry) (finish-task! loop (car entry) (cdr entry)))
                  ready)
        (lp)))))

(define (after-task! loop conn outcome)
  ;; The request of CONN that waited came to OUTCOME (as `respond!''s):
  ;; serve the requests that came behind it, if the connection is free.
  (let ((own (connection-input conn)))
    (if own
        (when (after-respond! loop conn outcome own
                              (connection-start conn) (connection-end conn))
          (serve-input! loop conn own (connection-start conn) (connection-end conn)))
        (when (after-respond! loop conn outcome (loop-input loop) 0 0)
          (serve-input! loop conn (loop-input loop) 0 0)))))

(define (finish-task! loop task thunk)
  ;; Resume TASK with THUNK; once its handler returns, answer as after
  ;; any request, then serve the requests that came behind it.
  (let ((conn (task-conn task)))
    (cond
     ((not (eq? (connection-task conn) task)) #f)
     ((task-stream task)
      (let ((outcome (resume-stream! loop task thunk)))
        (unless (eq? outcome 'streaming)
          (after-task! loop conn outcome))))
     (else
      (call-with-values (lambda () (resume-task! loop task thunk))
        (lambda (response body)
          (unless (eq? response suspended)
            (case (task-cancelled task)
              ((client-gone stopping)
               (close-connection! loop conn))
              (else
               (let ((timeout? (eq? (task-cancelled task) 'timeout))
                     (observer (loop-observer loop))
                     (request (task-request task)))
                 (set-connection-state! conn 'idle)
                 (watch! loop conn EPOLLIN)
                 (let ((outcome
                        (answer! loop conn request
                                 (and (not timeout?) response)
                                 (if timeout? 503 body)
                                 ;; a drain began while it waited
                                 (or (task-close? task)
                                     (and (loop-drain-deadline loop) #t))
                                 (output-fill (loop-output loop))
                                 (lambda (code bytes)
                                   (when observer
                                     (observe-answer! loop request code bytes
                                                      #f #f #f)
                                     ((observer-hooks-on-wait observer)
                                      request code (task-waited task)
                                      (task-computing task)
                                      (- (clock) (task-started task)))))
                                 #t)))
                   (after-task! loop conn outcome))))))))))))

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
  (let* ((arriving (connection-body conn))
         (request (arriving-request arriving))
         (decoder+collected (arriving-bytes arriving))
         (collected (cdr decoder+collected)))
    (call-with-values
        (lambda ()
          (decode-chunked! (car decoder+collected) bv start end
                           (lambda (bv start count)
                             (output-put-slice! collected bv start count))))
      (lambda (status index)
        (cond
         ((eq? status 'done)
          (let ((body (bytevector-copy-range (output-bytes collected) 0
                                             (output-fill collected))))
            (set-connection-body! conn #f)
            (set-connection-state! conn 'idle)
            (when (after-respond! loop conn
                                  (respond! loop conn request
                                            (and (> (bytevector-length body) 0) body))
                                  bv index end)
              (serve-input! loop conn bv index end))))
         ((eq? status 'more)
          (unless (eq? (connection-state conn) 'chunked)
            (continue-if-expected! loop conn request)
            (set-connection-state! conn 'chunked))
          (set-deadline! loop conn (settings-body-ms (loop-settings loop)))
          (finish! loop conn #f #f))
         (else
          (refuse! loop conn request
                   (http-error-status status) (http-error-reason status))))))))

(define (read-chunked! loop conn)
  (let ((n (read-into! loop conn (loop-input-address loop) 0 input-size)))
    (cond
     ((> n 0) (feed-chunked! loop conn (loop-input loop) 0 n))
     ((= n (- errno-EAGAIN)) #t)
     (else (close-connection! loop conn)))))

(define (serve-body-port! loop conn request framing bv start end)
  ;; Call the handler with the body of REQUEST as a port (plucky server
  ;; stream's body pipe), on the loop; BV [START, END) are the bytes
  ;; after its head.  The body pipe gives back the bytes it read past the
  ;; body's end (pipelined requests), which are served after it.
  (let* ((settings (loop-settings loop))
         (continue? (and (assq 'expect (request-headers request))
                         (equal? (request-version request) '(1 . 1))
                         ;; The whole body came with the head: the client
                         ;; did not wait, nothing to say.
                         (not (and (integer? framing) (>= (- end start) framing)))))
         (queued? (or (> (output-fill (loop-output loop)) 0)
                      (pair? (connection-pending conn))))
         (body (make-body-pipe
                (connection-fd conn) framing bv start end
                #:timeout-ms (settings-body-ms settings)
                #:max-body (settings-max-body settings)
                #:transport (connection-transport conn)
                ;; Sent by the body pipe on the handler's first wait, or
                ;; now, behind the answers to earlier requests not sent yet.
                #:continue (and continue? (not queued?) continue-line)
                #:on-leftover (lambda (bv start end) (keep-input! conn bv start end))
                ;; --handler-timeout counts from the body's last bytes: a
                ;; large upload takes the time its client takes (and its
                ;; waits for them are not counted: `connection-expired!').
                #:on-progress (let ((limit (tasks-handler-ms (loop-tasks loop))))
                                (and limit (lambda () (set-deadline! loop conn limit)))))))
    (when (and continue? queued?)
      (output-put-bytes! (loop-output loop) continue-line))
    (set-connection-input! conn #f)
    (after-task! loop conn (respond! loop conn request body))))

;;;
;;; Connections back from the pool
;;;

(define (job-done! loop job)
  (let ((conn (job-conn job))
        (observer (loop-observer loop)))
    (when (eq? (connection-ref loop (connection-fd conn)) conn)
      (when (job-code job)
        (report-response! loop conn (job-request job) (job-code job) (job-bytes job))
        (when observer
          (let ((failure (job-failure job)))
            (when failure
              ((observer-hooks-on-failure observer)
               (job-request job) (car failure) (cdr failure))))
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
               (set-deadline! loop conn (settings-keep-alive-ms (loop-settings loop)))
               (watch! loop conn EPOLLIN)
               (let ((own (connection-input conn)))
                 (when own
                   (serve-input! loop conn own (connection-start conn)
                                 (connection-end conn)))))))
        ((linger) (linger! loop conn))
        (else (close-connection! loop conn))))))

(define (job-expired! loop job)
  "Answer 503 to the request of JOB, which waited for a thread of the
pool longer than it may; return nothing."
  (let ((conn (job-conn job)))
    ;; Answers to earlier pipelined requests go first.
    (set-connection-pending! conn (job-pending job))
    (set-connection-state! conn 'idle)
    (refuse! loop conn (job-request job) 503 "no thread free to serve this request")))

;;; (plucky server http1) ends here
