;;; (plucky server stream) --- request bodies as ports, answers on a thread

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The loop (plucky server loop) never blocks: it reads what a socket
;;; has and goes on.  Two things do not fit that shape without turning
;;; the application inside out, and this module gives them their ports:
;;;
;;;  - a body pipe, for a handler that reads its request body as a port
;;;    (`with-body-port'): the handler runs on the loop as any other and
;;;    reads a Guile file port over a pipe.  The bytes that came with the
;;;    head are in the pipe before it runs; when it has read them, Guile's
;;;    suspendable ports call `current-read-waiter', set here to `pump!',
;;;    which reads the socket, decodes Content-Length or chunked framing
;;;    (plucky http chunked), sends "100 Continue" the first time (RFC
;;;    9110 §10.1.1), and writes the bytes into the pipe, suspending the
;;;    request (plucky server suspend) while the client sends nothing.
;;;    Bytes read past the body (a pipelined request) go back to the
;;;    loop.  A read waits at most the body time-out (then 408): that
;;;    wait is the client's time, which --handler-timeout does not count
;;;    (`awaiting-body?').  Port procedures written in C
;;;    (`get-bytevector-all') block in poll(2) instead of calling the
;;;    waiter: a guard thread sees the pipe starve and hands it to a
;;;    thread that fills it (`look!'); a body that then fails makes the
;;;    handler's read fail too (`poison-read-end!');
;;;  - a stream writer, for a streamed answer whose body procedure
;;;    blocks (`stream-on-thread'), run on a thread of the pool: an output
;;;    port whose writes go to the socket as they are made: one chunk per
;;;    write for HTTP/1.1, the bytes as they are when the answer declared
;;;    its length or the connection closes after it (HTTP/1.0);
;;;    `force-output' sends what is buffered (server-sent events),
;;;    closing the port sends the last chunk with its CRLF.  It waits
;;;    with poll(2) when the socket takes nothing: the thread is its own.
;;;
;;; Nothing here closes the client's socket: the loop does.  A body
;;; pipe's own descriptors (the pipe's ends, a dup of the socket to wait
;;; on) are closed when its handler returns or raises, or when the loop
;;; drops its request where it waits (`close-request-bodies!').
;;;
;;; Code:

(define-module (plucky server stream)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module ((srfi srfi-1) #:select (any))
  #:use-module (ice-9 exceptions)
  #:use-module ((ice-9 binary-ports) #:select (make-custom-binary-output-port))
  ;; Installed by the first body pipe, not at start-up: docs/waiting.md.
  #:autoload (ice-9 suspendable-ports) (install-suspendable-ports!
                                        current-read-waiter)
  #:use-module ((web response) #:select (build-response response? response-version
                                         response-code response-reason-phrase
                                         response-headers))
  #:use-module (plucky sys libc)
  #:use-module (plucky server transport)
  #:use-module ((plucky server suspend) #:select (wait-readable wait-writable
                                                  release-descriptor!))
  #:use-module ((plucky server watchdog) #:select (handler-call))
  #:use-module ((ice-9 threads) #:select (with-mutex make-mutex make-condition-variable
                                           signal-condition-variable
                                           wait-condition-variable
                                           call-with-new-thread))
  #:use-module (plucky http error)
  #:use-module (plucky http chunked)
  #:export (&body-error
            body-error?
            body-error-status
            &connection-lost
            connection-lost?
            write-all!
            make-body-pipe
            body-pipe?
            body-pipe-port
            body-pipe-complete?
            body-pipe-close!
            close-request-bodies!
            piped-body?
            awaiting-body?
            call-with-body-pipe
            open-stream-writer))

;;;
;;; Errors
;;;

;; The request body cannot be read: too large (413), malformed chunks
;; (400), the client stopped sending (408).  A handler that lets it
;; escape gets that status as its answer instead of a 500.
(define-exception-type &body-error &error
  make-body-error body-error?
  (status body-error-status))

;; The client is gone or does not read: nothing more can be sent.
(define-exception-type &connection-lost &error
  make-connection-lost connection-lost?)

(define (body-error status message)
  (raise-exception
   (make-exception (make-body-error status)
                   (make-exception-with-message message))))

(define (connection-lost message)
  (raise-exception
   (make-exception (make-connection-lost)
                   (make-exception-with-message message))))

;;;
;;; Blocking I/O on a non-blocking descriptor
;;;

(define* (write-all! fd bv start count timeout #:optional (transport plain-transport))
  "Write BV [START, START+COUNT) to FD through TRANSPORT (plucky server
transport), waiting up to TIMEOUT seconds each time the socket takes
nothing.  Return nothing; raise &connection-lost when the client is gone
or the time runs out."
  (let ((address (bytevector-address bv))
        (write (transport-write transport)))
    (let lp ((start start) (count count))
      (when (> count 0)
        (let ((n (write fd address start count)))
          (cond
           ((>= n 0) (lp (+ start n) (- count n)))
           ((= n (- errno-EAGAIN))
            (if (fd-wait fd 'write (* 1000 timeout))
                (lp start count)
                (connection-lost "the client did not read the answer in time")))
           (else (connection-lost (errno->string n)))))))))

;;;
;;; Request bodies
;;;

;; A `with-body-port' request's body, as a pipe the handler reads.  The
;; handler runs on the loop; its port is a Guile file port over the
;; pipe's read end, non-blocking.  When the pipe is empty, Guile's
;; suspendable ports call `current-read-waiter', which is `pump!' here:
;; it reads the next bytes of the body from the client's socket, decodes
;; their framing, and writes them into the pipe (never more than it
;; holds, so the write never blocks), waiting for the socket with
;; `wait-readable' (the request suspends, the loop serves others).  The
;; waiter is called from Scheme, not from C, so it may suspend, where a
;; custom port's read procedure may not (docs/waiting.md).
(define-record-type <body-pipe>
  (%make-body-pipe fd wait-fd transport timeout-ms port write-fd write-port
                   continue remaining decoder raw raw-start raw-end data
                   data-start data-end on-leftover on-progress unyielded
                   lock owner pumping? pumps request seen starving failure
                   read-dup awaiting?)
  body-pipe?
  (fd pipe-fd)                              ; the client's socket: read from it
  ;; a dup of FD, waited on: the loop's table has FD as a connection
  (wait-fd pipe-wait-fd set-pipe-wait-fd!)
  (transport pipe-transport)                ; <transport> of FD
  (timeout-ms pipe-timeout-ms)              ; how long a read of FD may wait
  (port body-pipe-port)                     ; the pipe's read end: the handler's
  (write-fd pipe-write-fd)                  ; the pipe's write end, or #f
  (write-port pipe-write-port set-pipe-write-port!) ; its port, or #f once closed
  ;; #f, or the bytes of "100 Continue", sent before the first wait
  (continue pipe-continue set-pipe-continue!)
  ;; Content-Length framing: body bytes not yet in the pipe; #f when chunked
  (remaining pipe-remaining set-pipe-remaining!)
  (decoder pipe-decoder)                    ; chunked framing: the decoder
  ;; bytes from the socket not yet used: RAW [raw-start, raw-end)
  (raw pipe-raw)
  (raw-start pipe-raw-start set-pipe-raw-start!)
  (raw-end pipe-raw-end set-pipe-raw-end!)
  ;; chunked: decoded body bytes not yet in the pipe: DATA [data-start, data-end)
  (data pipe-data)
  (data-start pipe-data-start set-pipe-data-start!)
  (data-end pipe-data-end set-pipe-data-end!)
  ;; (bv start end) -> _: given the bytes read past the body's end
  (on-leftover pipe-on-leftover)
  (on-progress pipe-on-progress)            ; thunk called as bytes arrive, or #f
  ;; bytes moved since the request last let the loop serve others
  (unyielded pipe-unyielded set-pipe-unyielded!)
  ;; Who reads the socket (see "The guard" below), under LOCK: 'loop,
  ;; 'thread (a filler thread took the pipe over), 'thread-done, or
  ;; 'closed (the handler ended: nothing reads the socket any more).
  (lock pipe-lock)
  (owner pipe-owner set-pipe-owner!)
  (pumping? pipe-pumping? set-pipe-pumping!) ; a `pump!' runs or is suspended
  (pumps pipe-pumps set-pipe-pumps!)         ; how many `pump!' calls began
  ;; set by the guard: the request whose handler reads, what it saw last
  (request pipe-request set-pipe-request!)
  (seen pipe-seen set-pipe-seen!)            ; PUMPS when the guard last looked
  (starving pipe-starving set-pipe-starving!) ; looks since, the pipe starving
  ;; a body error the filler thread met, raised as the handler's answer
  (failure pipe-failure set-pipe-failure!)
  ;; once a filler thread took over: a dup of the pipe's read end, which
  ;; `wait-for-filler!' waits on (see `poison-read-end!')
  (read-dup pipe-read-dup set-pipe-read-dup!)
  ;; `wait-for-filler!' runs: the handler waits for the filler thread
  (awaiting? pipe-awaiting? set-pipe-awaiting!))

(define yield-bytes
  ;; A body that arrives as fast as the handler reads it would never
  ;; suspend: past this many bytes without a wait, the pump waits for
  ;; the socket anyway (it is readable: one turn of the loop), so that
  ;; other clients of the worker are served meanwhile.
  (* 1024 1024))

(define raw-size
  ;; The socket is read this much at a time, the size of a pipe's
  ;; buffer.  A chunked body's decoded data never outgrows the raw bytes
  ;; it came in, so DATA is as big.
  65536)

(define whole-body-size
  ;; A body sent without Expect with a Content-Length up to this many
  ;; bytes gets a pipe that holds it whole (F_SETPIPE_SZ; Linux's default
  ;; /proc/sys/fs/pipe-max-size): it is all there before the handler runs
  ;; (see `prefill!').  The kernel takes the pages as they fill.
  (* 1024 1024))

(define F_SETPIPE_SZ 1031)                  ; Linux, <fcntl.h>

(define suspendable-ports-installed? #f)

(define (ensure-suspendable-ports!)
  ;; Guile's port procedures, replaced for the whole process by ones that
  ;; call `current-read-waiter': only once an app gets a body as a port,
  ;; since they are slower for every port (docs/waiting.md).
  (unless suspendable-ports-installed?
    (set! suspendable-ports-installed? #t)
    (install-suspendable-ports!)))

(define (set-flags! port-or-fd get set flags)
  (fcntl port-or-fd set (logior flags (fcntl port-or-fd get))))

(define* (make-body-pipe fd framing bv start end #:key (timeout-ms 30000)
                         (max-body (* 64 1024 1024)) (continue #f)
                         (transport plain-transport) (on-leftover #f)
                         (on-progress #f))
  "Return the body of a request as a pipe: its port (`body-pipe-port') is
what the handler reads, the bytes at BV [START, END) (those that came
after the head, copied) first, then what the socket FD (read through
TRANSPORT) brings, Content-Length or chunked framing (FRAMING: a length
in bytes, or 'chunked) decoded.  Call the handler through
`call-with-body-pipe'.  A wait for FD longer than TIMEOUT-MS is a 408; a
chunked body longer than MAX-BODY bytes a 413.  CONTINUE, if given, is
a thunk called before the first wait (it sends \"100 Continue\").
ON-LEFTOVER is called as (ON-LEFTOVER bv start end) with the bytes read
past the body's end (a pipelined request) once the handler returns;
ON-PROGRESS, a thunk, each time bytes of the body arrive."
  (ensure-suspendable-ports!)
  (let* ((chunked? (eq? framing 'chunked))
         (have (- end start))
         (raw (make-bytevector (max raw-size have)))
         (ends (pipe))
         (wait-fd (dup->fdes fd))
         (body (%make-body-pipe
                fd wait-fd transport timeout-ms (car ends) (fileno (cdr ends))
                (cdr ends) continue (and (not chunked?) framing)
                (and chunked? (make-chunked-decoder #:max-total max-body))
                raw 0 have
                (and chunked? (make-bytevector (bytevector-length raw))) 0 0
                on-leftover on-progress 0
                (make-mutex) 'loop #f 0 #f 0 0 #f #f #f)))
    (fcntl wait-fd F_SETFD FD_CLOEXEC)
    (for-each (lambda (port)
                (fcntl port F_SETFD FD_CLOEXEC)
                (set-flags! port F_GETFL F_SETFL O_NONBLOCK))
              (list (car ends) (cdr ends)))
    (when (and (not chunked?) (not continue) (> framing raw-size)
               (<= framing whole-body-size))
      ;; Refused past the user's share of pipe memory: then the default.
      (false-if-exception (fcntl (cdr ends) F_SETPIPE_SZ framing)))
    (set-port-encoding! (car ends) "ISO-8859-1")
    (setvbuf (car ends) 'block raw-size)
    (bytevector-copy! bv start raw 0 have)
    body))

(define (prefill! body)
  ;; What came with the head goes in the pipe before the handler runs.
  ;; A body the client sends without waiting for "100 Continue" is read
  ;; until the pipe is full (the request suspends meanwhile): a body the
  ;; pipe holds whole (64 KiB, or a Content-Length up to
  ;; `whole-body-size') is then all there even for Guile's port
  ;; procedures written in C, which cannot suspend (`get-bytevector-all').
  (unless (pipe-remaining body) (decode-raw! body))
  (fill-pipe! body)
  (unless (pipe-continue body)
    (let lp ()
      (unless (or (body-pipe-complete? body)
                  ;; full
                  (call-with-values (lambda () (ready-slice body))
                    (lambda (bv start count) (> count 0))))
        (pump! body)
        (lp)))))

(define (body-error-of status)
  ;; -> the http-error STATUS (from the chunked decoder) raised as a body error
  (body-error (http-error-status status) (http-error-reason status)))

(define (decode-raw! body)
  ;; Chunked: decode what RAW holds into DATA, which is empty.
  (set-pipe-data-start! body 0)
  (set-pipe-data-end! body 0)
  (call-with-values
      (lambda ()
        (decode-chunked! (pipe-decoder body) (pipe-raw body) (pipe-raw-start body)
                         (pipe-raw-end body)
                         (lambda (raw start count)
                           (let ((end (pipe-data-end body)))
                             (bytevector-copy! raw start (pipe-data body) end count)
                             (set-pipe-data-end! body (+ end count))))))
    (lambda (status index)
      (when (http-error? status)
        (body-error-of status))
      ;; 'more used every byte; 'done leaves what follows the body (a
      ;; pipelined request) in RAW.
      (set-pipe-raw-start! body index))))

(define (body-pipe-complete? body)
  "True when every byte of BODY has been read from the socket, so that
the connection is at the next request's first byte (or at the bytes
BODY gives its ON-LEFTOVER)."
  (if (pipe-remaining body)
      (zero? (pipe-remaining body))
      (and (chunked-decoder-done? (pipe-decoder body))
           (= (pipe-data-start body) (pipe-data-end body)))))

(define (ready-slice body)
  ;; -> (values bv start count): decoded body bytes for the pipe
  (if (pipe-remaining body)
      (values (pipe-raw body) (pipe-raw-start body)
              (min (pipe-remaining body) (- (pipe-raw-end body) (pipe-raw-start body))))
      (values (pipe-data body) (pipe-data-start body)
              (- (pipe-data-end body) (pipe-data-start body)))))

(define (slice-taken! body n)
  ;; N bytes of `ready-slice' went into the pipe.
  (if (pipe-remaining body)
      (begin
        (set-pipe-raw-start! body (+ n (pipe-raw-start body)))
        (set-pipe-remaining! body (- (pipe-remaining body) n)))
      (set-pipe-data-start! body (+ n (pipe-data-start body)))))

(define (close-write-end! body)
  (let ((port (pipe-write-port body)))
    (when port
      (set-pipe-write-port! body #f)
      (close-port port))))

(define (fill-pipe! body)
  ;; Move decoded bytes into the pipe while it takes them.  -> #t when
  ;; some went in or the body ended (its write end then closed), #f
  ;; when there is nothing decoded to move.
  (let lp ((moved? #f))
    (if (body-pipe-complete? body)
        (begin (close-write-end! body) #t)
        (call-with-values (lambda () (ready-slice body))
          (lambda (bv start count)
            (if (zero? count)
                moved?
                (let ((n (fd-write (pipe-write-fd body) (bytevector-address bv)
                                   start count)))
                  (cond
                   ((> n 0)
                    (slice-taken! body n)
                    (set-pipe-unyielded! body (+ n (pipe-unyielded body)))
                    (lp #t))
                   ;; Full: the handler has bytes to read.
                   ((= n (- errno-EAGAIN)) #t)
                   (else (error "request body pipe:" (errno->string n)))))))))))

(define* (read-socket! body wait? #:optional (progress? #t))
  ;; Read what the socket has into RAW, which is used up; when it has
  ;; nothing, wait for it if WAIT?, else -> #f.  Raise a body error when
  ;; the body stops or ends early.  ON-PROGRESS is the loop's: called
  ;; only if PROGRESS?.
  (let* ((raw (pipe-raw body))
         (room (if (pipe-remaining body)
                   ;; Never past the body's end: what follows belongs to
                   ;; the next request, and the loop reads it.
                   (min (bytevector-length raw) (pipe-remaining body))
                   (bytevector-length raw)))
         (read (transport-read (pipe-transport body))))
    (define (wait!)
      (set-pipe-unyielded! body 0)
      (or (wait-readable (pipe-wait-fd body) #:timeout-ms (pipe-timeout-ms body)
                         #:kind 'socket #:label "request body")
          (body-error 408 "the request body stopped arriving")))
    (when (and wait? (> (pipe-unyielded body) yield-bytes))
      (wait!))
    (let lp ()
      (let ((n (read (pipe-fd body) (bytevector-address raw) 0 room)))
        (cond
         ((> n 0)
          (let ((on-progress (pipe-on-progress body)))
            (when (and on-progress progress?) (on-progress)))
          (set-pipe-raw-start! body 0)
          (set-pipe-raw-end! body n)
          (unless (pipe-remaining body) (decode-raw! body))
          #t)
         ((= n (- errno-EAGAIN))
          (cond
           (((transport-pending? (pipe-transport body)) (pipe-fd body)) (lp))
           ((not wait?) #f)
           (else (wait!) (lp))))
         ((zero? n) (body-error 400 "the connection closed before the body's end"))
         (else (body-error 400 (errno->string n))))))))

(define (send-all! body bv)
  ;; Write BV to the client, suspending while its socket takes nothing.
  (let ((write (transport-write (pipe-transport body))))
    (let lp ((start 0))
      (when (< start (bytevector-length bv))
        (let ((n (write (pipe-fd body) (bytevector-address bv) start
                        (- (bytevector-length bv) start))))
          (cond
           ((>= n 0) (lp (+ start n)))
           ((= n (- errno-EAGAIN))
            (if (wait-writable (pipe-wait-fd body) #:timeout-ms (pipe-timeout-ms body)
                               #:kind 'socket #:label "client")
                (lp start)
                (connection-lost "the client did not read in time")))
           (else (connection-lost (errno->string n)))))))))

;; The waiter of BODY's port, called when the pipe is empty: put the
;; next bytes of the body in the pipe, or close its write end at the
;; body's end, reading (and waiting for) the socket as needed.  Once a
;; filler thread took the pipe over (the guard, below), wait for the
;; bytes it puts in the pipe instead, never reading the socket.
(define (pump! body)
  (if (begin-pump! body)
      (with-exception-handler
          (lambda (exception)
            (end-pump! body)
            (raise-exception exception))
        (lambda ()
          (pump-socket! body)
          (end-pump! body)))
      (wait-for-filler! body)))

(define (begin-pump! body)
  ;; -> #t when the loop still owns BODY's socket: then the guard leaves
  ;; it alone until `end-pump!', even while the request suspends.
  (with-mutex (pipe-lock body)
    (and (eq? (pipe-owner body) 'loop)
         (begin
           (set-pipe-pumping! body #t)
           (set-pipe-pumps! body (+ 1 (pipe-pumps body)))
           #t))))

(define (end-pump! body)
  (with-mutex (pipe-lock body)
    (set-pipe-pumping! body #f)))

(define (pump-socket! body)
  (let ((continue (pipe-continue body)))
    (when continue
      (set-pipe-continue! body #f)
      (send-all! body continue)))
  ;; The time spent here is the client's, not the handler's: the
  ;; watchdog (plucky server watchdog) does not count it.
  (let ((request (vector-ref handler-call 0)))
    (vector-set! handler-call 0 #f)
    (let lp ((moved? #f))
      (let ((moved? (or (fill-pipe! body) moved?)))
        ;; Once the pipe has what the socket had at once, or is full,
        ;; the handler reads.
        (when (and (not (body-pipe-complete? body))
                   (call-with-values (lambda () (ready-slice body))
                     (lambda (bv start count) (zero? count)))
                   (or (not moved?) (< (pipe-unyielded body) yield-bytes))
                   (read-socket! body (not moved?)))
          (lp moved?))))
    (vector-set! handler-call 0 request)))

(define (wait-for-filler! body)
  ;; The filler thread reads the socket: suspend until the pipe has
  ;; bytes or ends.  The thread waits for the socket at most the body
  ;; time-out, then ends the pipe: a longer wait here means it is gone.
  (let ((request (vector-ref handler-call 0)))
    (vector-set! handler-call 0 #f)
    (set-pipe-awaiting! body #t)
    (let ((ready? (wait-readable (pipe-read-dup body)
                                 #:timeout-ms (* 2 (pipe-timeout-ms body))
                                 #:kind 'socket #:label "request body")))
      (set-pipe-awaiting! body #f)
      (unless ready?
        (body-error 408 "the request body stopped arriving")))
    (vector-set! handler-call 0 request)
    (let ((failure (with-mutex (pipe-lock body) (pipe-failure body))))
      (when failure (raise-exception failure)))))

;;;
;;; The guard: a handler blocked in C on its body
;;;

;; Guile's port procedures written in C (`get-bytevector-all') read an
;; empty pipe with a blocking poll(2) of their own: `pump!' never runs,
;; nothing fills the pipe, and the worker's loop thread would wait
;; forever.  A thread of the worker, the guard, started by the first
;; body pipe, looks at the pipes whose handlers run every GUARD-TICK-MS;
;; a pipe is starving when the loop thread is in its handler
;; (`handler-call'), its body has not all arrived, its pipe is empty,
;; and no `pump!' ran or waits for it since the guard last looked.
;; Starving for GUARD-LOOKS looks in a row (60 to 80 ms: a handler that
;; reads through suspendable ports calls `pump!' within microseconds of
;; emptying the pipe, so no such handler is taken for a stuck one, and
;; a blocked one waits little), the pipe is taken over: a thread of its
;; own reads the socket with blocking waits and fills the pipe until the
;; body ends.  The hand-over is one-way, under the pipe's lock: from then
;; on `pump!' only waits for the pipe.  A handler that computes for a
;; while with its pipe empty may be taken over too: harmless, its bytes
;; come from the thread.

(define guard-tick-ms 20)
(define guard-looks 4)

(define guarded '())                        ; pipes whose handlers run
(define guard-mutex (make-mutex))
(define guard-wake (make-condition-variable))
(define guard-thread #f)

(define (guard! body request)
  ;; Watch BODY, whose handler runs for REQUEST, from the guard thread.
  (set-pipe-request! body request)
  (with-mutex guard-mutex
    (set! guarded (cons body guarded))
    (if guard-thread
        (signal-condition-variable guard-wake)
        (set! guard-thread (call-with-new-thread guard-loop)))))

(define (unguard! body)
  (with-mutex guard-mutex
    (set! guarded (delq! body guarded))))

(define (guard-loop)
  (let lp ()
    (with-mutex guard-mutex
      (let wait ()
        (when (null? guarded)
          (wait-condition-variable guard-wake guard-mutex)
          (wait))))
    (usleep (* 1000 guard-tick-ms))
    (for-each look! (with-mutex guard-mutex (list-copy guarded)))
    (lp)))

(define (look! body)
  (with-mutex (pipe-lock body)
    (when (eq? (pipe-owner body) 'loop)
      (if (and (not (pipe-pumping? body))
               (= (pipe-pumps body) (pipe-seen body))
               (eq? (vector-ref handler-call 0) (pipe-request body))
               (not (body-pipe-complete? body))
               (not (fd-wait (fileno (body-pipe-port body)) 'read 0)))
          (let ((looks (+ 1 (pipe-starving body))))
            (set-pipe-starving! body looks)
            (when (>= looks guard-looks)
              (set-pipe-owner! body 'thread)
              (let ((dup (dup->fdes (fileno (body-pipe-port body)))))
                (fcntl dup F_SETFD FD_CLOEXEC)
                (set-pipe-read-dup! body dup))
              (call-with-new-thread (lambda () (fill-on-thread! body)))))
          (begin
            (set-pipe-starving! body 0)
            (set-pipe-seen! body (pipe-pumps body)))))))

(define (fill-on-thread! body)
  ;; BODY's filler thread: the socket's bytes into the pipe until the
  ;; body ends, each read or write under the pipe's lock and only while
  ;; the handler has not ended (then the loop owns the socket again);
  ;; waits in poll(2), outside the lock, a slice at a time.  A body
  ;; error is kept for the handler's answer and ends the pipe.
  (define wait-fd (pipe-wait-fd body))
  (define write-fd (pipe-write-fd body))
  (define (step)
    ;; -> 'done, 'full (wait for the pipe), 'empty (wait for the socket),
    ;; 'more, or 'closed
    (with-mutex (pipe-lock body)
      (cond
       ((eq? (pipe-owner body) 'closed) 'closed)
       ((pipe-continue body)
        => (lambda (continue)
             (set-pipe-continue! body #f)
             (write-all! (pipe-fd body) continue 0 (bytevector-length continue)
                         (/ (pipe-timeout-ms body) 1000) (pipe-transport body))
             'more))
       (else
        (fill-pipe! body)
        (cond
         ((body-pipe-complete? body) 'done)
         ((call-with-values (lambda () (ready-slice body))
            (lambda (bv start count) (> count 0)))
          'full)
         ((read-socket! body #f #f) 'more)
         (else 'empty))))))
  (define (starved?)
    ;; The handler's pipe is empty (it may be blocked reading it).
    (with-mutex (pipe-lock body)
      (let ((port (body-pipe-port body)))
        (and (not (eq? (pipe-owner body) 'closed))
             (not (port-closed? port))
             (not (fd-wait (fileno port) 'read 0))))))
  (define (wait-for-client timeout-ms)
    ;; As `wait' for the socket.  While the handler reads an empty pipe
    ;; it waits for its client: the watchdog does not count that time
    ;; (plucky server watchdog), looked at each slice of the wait.
    (let ((request (pipe-request body)))
      (define (mark! starved?)
        (cond
         (starved? (vector-set! handler-call 1 request))
         ((eq? (vector-ref handler-call 1) request) (vector-set! handler-call 1 #f))))
      (let lp ((left timeout-ms))
        (mark! (starved?))
        (let ((ready (wait wait-fd 'read (min left guard-tick-ms))))
          (cond
           ((and (not ready) (> left guard-tick-ms)) (lp (- left guard-tick-ms)))
           (else (mark! #f) ready))))))
  (define (wait fd direction timeout-ms)
    ;; -> #t ready, #f timed out, 'closed
    (let lp ((left timeout-ms))
      (cond
       ((eq? (pipe-owner body) 'closed) 'closed)
       ((and left (<= left 0)) #f)
       ((fd-wait fd direction (if left (min left guard-tick-ms) guard-tick-ms)) #t)
       (else (lp (and left (- left guard-tick-ms)))))))
  (define (fail! exception)
    (with-mutex (pipe-lock body)
      (unless (eq? (pipe-owner body) 'closed)
        (set-pipe-failure!
         body (if (body-error? exception)
                  exception
                  (make-exception (make-body-error 400)
                                  (make-exception-with-message
                                   (exception-message* exception)))))
        (poison-read-end! body)
        (close-write-end! body))))
  (with-exception-handler fail!
    (lambda ()
      (let lp ()
        (case (step)
          ((more) (lp))
          ((full) (when (eq? #t (wait write-fd 'write #f)) (lp)))
          ((empty)
           (case (wait-for-client (pipe-timeout-ms body))
             ((#t) (lp))
             ((#f) (body-error 408 "the request body stopped arriving")))))))
    #:unwind? #t)
  ;; Done with the socket.  When the handler ended first, the pipe's
  ;; write end and the socket's dup are this thread's to close.
  (with-mutex (pipe-lock body)
    (if (eq? (pipe-owner body) 'closed)
        (begin
          (close-write-end! body)
          (fd-close wait-fd))
        (set-pipe-owner! body 'thread-done))))

;; A body that fails on the filler thread (the client stalls past the
;; body time-out, leaves, or sends bad chunks) must not end as a clean
;; end of file: a handler blocked in C would take what it read for the
;; whole body and act on it.  Nothing makes a pipe's read fail, so the
;; handler's descriptor is made to name another file, whose reads fail:
;; a TCP socket never connected (ENOTCONN at each read; poll(2) says
;; it is ready), or where there is no IPv4 a Unix one (EINVAL).  Only then is the write end closed: a poll(2) under way
;; on the pipe wakes, and Guile's read that follows fails, raising a
;; system-error in the handler.  `wait-for-filler!' waits on a dup of
;; the read end, which still names the pipe, and raises the body error
;; itself.  A port the handler closed is left alone (its number may be
;; another file's by now).
(define (poison-read-end! body)
  (let ((port (body-pipe-port body)))
    (unless (port-closed? port)
      (let ((socket (or (false-if-exception (socket AF_INET SOCK_STREAM 0))
                        (socket AF_UNIX SOCK_STREAM 0))))
        (dup2 (fileno socket) (fileno port))
        (fcntl (fileno port) F_SETFD FD_CLOEXEC)
        (close-port socket)))))

(define (body-pipe-close! body)
  "Close the descriptors of BODY (the pipe's ends, the socket's dup);
return nothing.  Its port then reads nothing more."
  (unguard! body)
  (let ((owner (with-mutex (pipe-lock body)
                 (let ((owner (pipe-owner body)))
                   (set-pipe-owner! body 'closed)
                   owner))))
   (unless (eq? owner 'closed)             ; closed already
    ;; A filler thread still at work closes its descriptors itself, at
    ;; once: it reads and writes nothing more.
    (unless (eq? owner 'thread)
      (close-write-end! body))
    (let ((dup (pipe-read-dup body)))
      (when dup
        ;; `wait-for-filler!' waited on it.
        (set-pipe-read-dup! body #f)
        (release-descriptor! dup)
        (fd-close dup)))
    (close-port (body-pipe-port body))
    (let ((fd (pipe-wait-fd body)))
      (when fd
        (set-pipe-wait-fd! body #f)
        (release-descriptor! fd)
        (unless (eq? owner 'thread)
          (fd-close fd))))))
  (values))

(define (piped-body? request)
  "Return true when the body of REQUEST is read through a body pipe, its
handler running or waiting."
  (with-mutex guard-mutex
    (any (lambda (body) (eq? (pipe-request body) request)) guarded)))

(define (awaiting-body? request)
  "Return true when the handler of REQUEST waits for the bytes of its
body (the client's time, bounded by the body time-out, not the
handler's)."
  (with-mutex guard-mutex
    (any (lambda (body)
           (and (eq? (pipe-request body) request)
                (or (pipe-pumping? body) (pipe-awaiting? body))))
         guarded)))

(define (close-request-bodies! request)
  "Close the descriptors of the body pipes whose handler runs for
REQUEST; return nothing.  For a request dropped where its handler
waits (given up, told so, and waiting again): no return of the handler
will close them."
  (for-each body-pipe-close!
            (with-mutex guard-mutex
              (filter (lambda (body) (eq? (pipe-request body) request)) guarded)))
  (values))

(define (closing-answer response)
  ;; -> RESPONSE, a handler's answer, saying the connection closes
  (if (response? response)
      (build-response #:version (response-version response)
                      #:code (response-code response)
                      #:reason-phrase (response-reason-phrase response)
                      #:headers (cons '(connection close) (response-headers response))
                      #:port #f)
      (cons '(connection close) response)))

(define (body-error-answer exception)
  (values (build-response #:code (body-error-status exception)
                          #:headers '((content-type text/plain) (connection close)))
          (string-append (exception-message* exception) "\n")))

(define (exception-message* exception)
  (if (exception-with-message? exception) (exception-message exception) ""))

(define (call-with-body-pipe handler request body state)
  "Return the values of (HANDLER REQUEST PORT . STATE), PORT the port of
BODY (a <body-pipe>), read as the handler goes, which may then suspend;
the response says the connection closes when the handler left part of
the body unread.  A body error (408, 413, 400) that escapes the handler
becomes that answer.  BODY is closed once the handler returns or
raises."
  (let ((port (body-pipe-port body))
        (tag (make-prompt-tag "body")))
    (call-with-prompt tag
      (lambda ()
        (call-with-values
            (lambda ()
              (with-exception-handler
                  (lambda (exception)
                    (cond
                     ((body-error? exception)
                      (abort-to-prompt tag exception))
                     ((with-mutex (pipe-lock body) (pipe-failure body))
                      ;; What failed is the body, on the filler thread:
                      ;; the handler's read raised (see `poison-read-end!').
                      => (lambda (failure) (abort-to-prompt tag failure)))
                     (else
                      ;; The handler failed or was given up: its
                      ;; descriptors go now, the error goes on.
                      (body-pipe-close! body)
                      (raise-exception exception))))
                (lambda ()
                  ;; Before the body's first reads (`piped-body?'); the
                  ;; guard takes no pipe over while `pump!' runs.
                  (guard! body request)
                  (prefill! body)
                  (let ((other (current-read-waiter)))
                    (parameterize ((current-read-waiter
                                    (lambda (p) (if (eq? p port) (pump! body) (other p)))))
                      (apply handler request port state))))))
          (lambda (response response-body . state)
            (let* ((lock (pipe-lock body))
                   ;; A filler thread may be at work.
                   (complete? (with-mutex lock (body-pipe-complete? body)))
                   (failure (with-mutex lock (pipe-failure body))))
              (body-pipe-close! body)
              (when failure
                ;; The body ended early for the handler (end of file):
                ;; what it answered is not an answer to the request.
                (abort-to-prompt tag failure))
              (when complete?
                (let ((on-leftover (pipe-on-leftover body)))
                  (when (and on-leftover (< (pipe-raw-start body) (pipe-raw-end body)))
                    (on-leftover (pipe-raw body) (pipe-raw-start body)
                                 (pipe-raw-end body)))))
              (apply values (if complete? response (closing-answer response))
                     response-body state)))))
      (lambda (k exception)
        (body-pipe-close! body)
        (call-with-values (lambda () (body-error-answer exception))
          (lambda (response response-body)
            (apply values response response-body state)))))))

;;;
;;; Answers sent as they are written
;;;

(define crlf #vu8(13 10))
(define last-chunk (string->utf8 "0\r\n\r\n"))

(define* (open-stream-writer fd framing #:key (timeout 30) (length #f)
                             (encoding "UTF-8") (buffer 16384)
                             (transport plain-transport))
  "Return an output port whose bytes go to the socket FD (through
TRANSPORT) as they are
written, framed by FRAMING: 'chunked (each write a chunk; closing the
port sends the last chunk and its CRLF), 'length (exactly LENGTH bytes
as they are: fewer when the port is closed, or more, is an error), or
'close (as they are; the connection closes after).  Textual output is
encoded in ENCODING.  Writes wait up to TIMEOUT seconds for the client;
past that, or when it is gone, they raise &connection-lost.  Output is
buffered up to BUFFER bytes; `force-output' sends it at once.  Return two
values: the port, and a thunk that abandons it (whatever is written,
flushed or closed after is dropped), for an answer that failed."
  (let* ((sent 0)
         ;; chunked: size line, data and CRLF gathered for one write(2),
         ;; grown as needed and kept for the next chunk
         (chunk #vu8())
         ;; Set when the answer fails half-way: the port's buffer can still
         ;; be flushed, or its close called, after that (by the code that
         ;; unwinds, or a finalizer), and none of it may reach the socket,
         ;; which may by then be another connection's.
         (abandoned? #f)
         (port
          (make-custom-binary-output-port
           "streamed answer"
           (lambda (bv start count)
             (when (and (> count 0) (not abandoned?))
               (case framing
                 ((chunked)
                  ;; Size line, data and CRLF as the chunk encoder lays
                  ;; them out; three writes of a chunk would be three
                  ;; segments on the wire, so they are gathered first.
                  (let ((fill 0))
                    (when (< (bytevector-length chunk) (+ count 24))
                      (set! chunk (make-bytevector (+ count 24))))
                    (encode-chunk! bv start count
                                   (lambda (piece from n)
                                     (bytevector-copy! piece from chunk fill n)
                                     (set! fill (+ fill n))))
                    (write-all! fd chunk 0 fill timeout transport)))
                 ((length)
                  (when (> (+ sent count) length)
                    (error "streamed body longer than its Content-Length" length))
                  (write-all! fd bv start count timeout transport))
                 (else (write-all! fd bv start count timeout transport)))
               (set! sent (+ sent count)))
             count)
           #f #f
           (lambda ()
             (case (and (not abandoned?) framing)
               ((chunked) (write-all! fd last-chunk 0 (bytevector-length last-chunk)
                                      timeout transport))
               ((length)
                (unless (= sent length)
                  (error "streamed body shorter than its Content-Length" sent length))))))))
    (set-port-encoding! port encoding)
    (setvbuf port 'block buffer)
    (values port (lambda () (set! abandoned? #t)))))

;;; (plucky server stream) ends here
