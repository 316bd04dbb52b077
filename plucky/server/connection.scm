;;; (plucky server connection) --- a connection and the loop that holds it

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; What the event loop's modules share.  A request flows through them
;;; in this order:
;;;
;;;   (plucky server loop)     epoll_wait, accept, timers; dispatches a
;;;                            ready descriptor to its connection
;;;   (plucky server http1)    every state a connection goes through:
;;;                            reads, parses every complete request
;;;                            (plucky http parse), answers, sends
;;;   (plucky server respond)  calls the handler; (plucky http response)
;;;                            appends the answer to the output buffer
;;;   (plucky server output)   sends the output, keeps what the socket
;;;                            would not take
;;;   this module              closes (`close-connection!')
;;;
;;; Here are the records: the loop's settings, the loop's own state (one
;;; per worker: the shared buffers, the connection table, and its probe,
;;; through which the access log and an observer hear of requests: plucky
;;; server probe), a connection (its state and buffers), and the two
;;; bodies a handler may answer with besides bytes: a file, sent with
;;; sendfile(2), and a takeover, which gets the connection once the head
;;; is sent.  What only one module uses is that module's: the request
;;; whose body arrives is http1's, the iovecs of a writev output's.
;;;
;;; Memory: a connection owns no buffer while it is idle or its last read
;;; ended on a request boundary, which is the usual case for keep-alive
;;; clients.  Reads go into the loop's shared input buffer and answers
;;; into its shared output buffer; only the bytes of an incomplete
;;; request, a body that has not fully arrived, or an answer the socket
;;; would not take are copied into storage of the connection's own.  A
;;; slow or stalled client therefore costs its own few bytes and never
;;; holds up the loop: nothing here blocks.
;;;
;;; Descriptors are closed by `close-connection!' and nowhere else; the
;;; connection table (a vector indexed by descriptor) is the only owner,
;;; and a connection's bytes go through its transport (plucky server
;;; transport), never straight to libc.
;;;
;;; Deadlines are in milliseconds of a monotonic clock, read once per
;;; round of the loop.  `set-deadline!' also brings the loop's next sweep
;;; forward when the new deadline is earlier, so that a timeout fires
;;; within a few milliseconds of its setting without a timer per request.
;;;
;;; Code:

(define-module (plucky server connection)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module ((srfi srfi-9 gnu) #:select (set-record-type-printer!))
  #:use-module ((plucky sys gc) #:select (gc-total-bytes))
  #:use-module ((plucky server settings) #:select (default-of))
  #:use-module (plucky sys libc)
  #:use-module (plucky sys epoll)
  #:use-module ((plucky http parse) #:select (%default-parse-limits))
  #:use-module ((plucky http bytes) #:select (bytevector-copy-range))
  #:use-module ((plucky http response)
                #:select (output-bytes output-address output-fill output-reset!))
  #:use-module (plucky server probe)
  #:use-module (plucky server transport)
  #:use-module ((plucky server watch) #:select (loop-unwatch!))
  #:export (make-loop-settings loop-settings? %default-loop-settings
            settings-parse-limits settings-max-body settings-max-connections
            settings-keep-alive-ms settings-header-ms
            settings-body-ms settings-write-ms settings-max-threads

            make-loop loop?
            loop-epfd loop-connections set-loop-connections! loop-count
            set-loop-count! loop-input loop-input-address loop-output
            loop-handler loop-state
            set-loop-state! loop-settings loop-now set-loop-now!
            loop-next-sweep set-loop-next-sweep! loop-guarded
            set-loop-guarded! loop-wake-ports
            loop-drain-deadline set-loop-drain-deadline! loop-probe loop-observer
            loop-serving set-loop-serving! loop-body-port?
            loop-pool set-loop-pool! loop-tasks

            make-connection connection?
            connection-fd connection-out-fd connection-peer set-connection-peer!
            connection-transport
            connection-state set-connection-state!
            connection-input set-connection-input!
            connection-input-address connection-start set-connection-start!
            connection-end set-connection-end!
            connection-body set-connection-body!
            connection-pending set-connection-pending!
            connection-close-after? set-connection-close-after!
            connection-deadline set-connection-deadline!
            connection-watched? set-connection-watched?!
            connection-takeover set-connection-takeover!
            connection-task set-connection-task!

            make-file-body (%file-body? . file-body?) file-body-length
            close-file-body!
            file-body->bytevector
            make-takeover (%takeover? . takeover?)

            clock-ms
            input-size never set-deadline! wake!
            connection-ref register-connection! close-connection! forget-connection!
            watch! take-over!
            keep-input! grow-input!

            file-body-fd file-body-offset set-file-body-offset! file-body-end)
  #:re-export (bytevector-copy-range gc-total-bytes clock))

;;;
;;; Settings
;;;

(define-record-type <loop-settings>
  (%make-loop-settings parse-limits max-body max-connections
                       keep-alive-timeout header-timeout body-timeout
                       write-timeout max-threads)
  loop-settings?
  (parse-limits settings-parse-limits)            ; <parse-limits>
  (max-body settings-max-body)                    ; bytes; larger -> 413
  (max-connections settings-max-connections)      ; per worker
  ;; The timeouts, in ms: the loop's clock, and no multiplication per
  ;; request (a call into libguile, scm_product: bench/instructions).
  (keep-alive-timeout settings-keep-alive-ms)     ; idle between requests
  (header-timeout settings-header-ms)             ; for a whole head
  (body-timeout settings-body-ms)                 ; without body progress
  (write-timeout settings-write-ms)               ; without write progress
  (max-threads settings-max-threads))             ; threads for handed-off connections

(define* (make-loop-settings #:key
                             (parse-limits %default-parse-limits)
                             (max-body (default-of 'max-body-bytes))
                             (max-connections (default-of 'max-connections))
                             (keep-alive-timeout (default-of 'keep-alive-timeout-s))
                             (header-timeout (default-of 'header-timeout-s))
                             (body-timeout (default-of 'body-timeout-s))
                             (write-timeout (default-of 'write-timeout-s))
                             (max-threads (default-of 'max-threads)))
  "Return the settings of a worker loop.  Sizes are in bytes, timeouts in
seconds (the defaults are declared in (plucky server settings)).  MAX-THREADS bounds the threads that serve connections handed
off by the loop (request bodies read as ports, streamed answers); past
it, such connections wait for a thread."
  (define (ms seconds) (inexact->exact (round (* 1000 seconds))))
  (%make-loop-settings parse-limits max-body max-connections
                       (ms keep-alive-timeout) (ms header-timeout) (ms body-timeout)
                       (ms write-timeout) max-threads))

(define %default-loop-settings (make-loop-settings))

;;;
;;; The loop's state
;;;

(define-record-type <loop>
  (%make-loop epfd connections count input input-address output handler
              state settings now next-sweep guarded wake-ports drain-deadline
              probe serving body-port? pool tasks)
  loop?
  (epfd loop-epfd)
  (connections loop-connections set-loop-connections!) ; vector: fd -> <connection> | #f
  (count loop-count set-loop-count!)         ; open connections
  (input loop-input)                         ; shared read buffer
  (input-address loop-input-address)
  (output loop-output)                       ; shared <output>
  (handler loop-handler)
  (state loop-state set-loop-state!)         ; the handler's threaded state, a list
  (settings loop-settings)
  (now loop-now set-loop-now!)               ; ms, monotonic, read once per round
  ;; ms: no deadline is earlier, nor the next tick (see `sweep!')
  (next-sweep loop-next-sweep set-loop-next-sweep!)
  ;; the request whose handler is running, while one is: see call-handler
  (guarded loop-guarded set-loop-guarded!)
  ;; a pipe whose read end is in the epoll set, so that a signal handler
  ;; or a thread can wake epoll_wait at once: (read . write)
  (wake-ports loop-wake-ports)
  ;; #f, or the loop clock's ms at which draining gives up waiting
  (drain-deadline loop-drain-deadline set-loop-drain-deadline!)
  ;; #f, or the <probe> (plucky server probe): what the access log and
  ;; the observer hear about, and what is kept for them meanwhile
  (probe loop-probe)
  (serving loop-serving set-loop-serving!)     ; the connection whose request is handled
  ;; Does the handler take request bodies as ports (`with-body-port')?
  (body-port? loop-body-port?)
  ;; #f, or the <pool> of threads serving handed-off connections
  (pool loop-pool set-loop-pool!)
  ;; the suspended handlers' <tasks> (plucky server respond)
  (tasks loop-tasks))

(define* (make-loop #:key epfd connections input output handler state
                    settings now on-response wake-ports observer body-port?
                    tasks)
  "Return the state a worker's loop serves its connections with: its
epoll descriptor EPFD, the CONNECTIONS table (a vector), the shared INPUT
bytevector and OUTPUT buffer, the HANDLER and its STATE, its SETTINGS,
the clock NOW (ms), the WAKE-PORTS pipe, the options `run-loop' takes
(ON-RESPONSE and OBSERVER make its probe), and the TASKS its suspended
handlers are kept in.  The counters start at zero."
  (%make-loop epfd connections 0 input (bytevector-address input) output
              handler state settings now now #f wake-ports #f
              (make-probe observer on-response) #f body-port? #f tasks))

(define-inlinable (loop-observer loop)
  ;; -> #f, or the <observer-hooks> told where the time goes
  (let ((probe (loop-probe loop)))
    (and probe (probe-observer probe))))

;;;
;;; Connections
;;;

(define-record-type <connection>
  (%make-connection fd out-fd peer transport state input input-address start end
                    body pending close-after? deadline watched? takeover task)
  connection?
  (fd connection-fd)                    ; read from it; a socket, or stdin
  (out-fd connection-out-fd)            ; write to it; the socket, or stdout
  ;; "address" of the client, or #f: see `current-request-peer'
  (peer connection-peer set-connection-peer!)
  (transport connection-transport)      ; <transport>: how bytes move
  ;; new | idle | head | body | chunked | writing | lingering | handed-off
  ;; | suspended | streaming: see (plucky server http1)
  (state connection-state set-connection-state!)
  ;; #f, or a bytevector of the connection's own holding bytes not yet
  ;; served, in [start, end)
  (input connection-input set-connection-input!)
  (input-address connection-input-address set-connection-input-address!)
  (start connection-start set-connection-start!)
  (end connection-end set-connection-end!)
  ;; what the state's protocol module keeps: in states body and chunked,
  ;; the request whose body arrives (plucky server http1); in state h2,
  ;; the session (plucky server http2); else #f
  (body connection-body set-connection-body!)
  ;; in state writing: list, in order, of (bytevector start . end) and
  ;; <file-body> still to send
  (pending connection-pending set-connection-pending!)
  ;; close once the pending output is sent
  (close-after? connection-close-after? set-connection-close-after!)
  ;; ms (loop clock) after which the sweep closes the connection
  (deadline connection-deadline set-connection-deadline!)
  ;; in the epoll set yet?  See `watch!'.
  (watched? connection-watched? set-connection-watched?!)
  ;; #f, or the <takeover> to hand the connection to once the output is out
  (takeover connection-takeover set-connection-takeover!)
  ;; in state suspended: the <task> of the handler that waits (plucky
  ;; server respond)
  (task connection-task set-connection-task!))

(define-syntax make-connection
  (lambda (form)
    "Return a new connection: (make-connection #:fd FD [#:out-fd
OUT-FD] [#:peer PEER] #:deadline DEADLINE [#:transport TRANSPORT])
reads FD and writes OUT-FD (by default FD) through TRANSPORT (by default
`plain-transport'), from the client at PEER (or #f), to be closed at
DEADLINE (ms, loop clock) unless it makes progress."
    ;; A macro: the keywords are sorted out when the caller is compiled.
    ;; A procedure with keyword arguments parses them at every call, in
    ;; libguile: once per connection accepted (bench/instructions, close).
    (define (option name options default)
      (let ((found (memq name (syntax->datum (map car options)))))
        (if found
            (cdr (list-ref options (- (length options) (length found))))
            default)))
    (syntax-case form ()
      ((_ key+value ...)
       (let* ((flat #'(key+value ...))
              (options (let pairs ((flat flat))
                         (syntax-case flat ()
                           (() '())
                           ((key value . rest)
                            (keyword? (syntax->datum #'key))
                            (cons (cons #'key #'value) (pairs #'rest)))))))
         (for-each (lambda (option)
                     (unless (memq (syntax->datum (car option))
                                   '(#:fd #:out-fd #:peer #:deadline #:transport))
                       (syntax-violation 'make-connection "unknown keyword" form
                                         (car option))))
                   options)
         (with-syntax ((fd (option #:fd options #f))
                       (out-fd (option #:out-fd options #f))
                       (peer (option #:peer options #'#f))
                       (deadline (option #:deadline options #f))
                       (transport (option #:transport options #'plain-transport)))
           (unless (and (syntax->datum #'fd) (syntax->datum #'deadline))
             (syntax-violation 'make-connection "#:fd and #:deadline are required"
                               form))
           #`(let ((in fd))
               (%make-connection in #,(if (syntax->datum #'out-fd) #'out-fd #'in)
                                 peer transport 'new #f 0 0 0 #f '() #f
                                 deadline #f #f #f))))))))

;;;
;;; Bodies besides bytes
;;;

;; These two records are private to the loop's modules, read through
;; the procedures below and, for sending a file, (plucky server output).

(define-record-type <file-body>
  (%make-file-body fd port offset end release)
  file-body?
  (fd file-body-fd set-file-body-fd!)   ; the file's descriptor; #f once closed
  (port file-body-port)                 ; the port it came from, or #f
  (offset file-body-offset set-file-body-offset!) ; next byte to send
  (end file-body-end)                   ; one past the last byte to send
  (release file-body-release))          ; #f, or a thunk called instead of closing

(define* (make-file-body file #:key (offset 0) (length #f) (release #f))
  "Return a response body that is LENGTH bytes (by default, to its end)
of FILE, a file port or descriptor, from byte OFFSET on: the loop sends
it after the head with sendfile(2), in steps the socket takes, and
closes FILE once it is sent or the connection closes.  Given RELEASE, a
thunk, the loop calls it then instead and leaves FILE open: an
open-file cache shares one descriptor among responses, and closes it
once none holds it."
  (let* ((fd (if (port? file) (port->fdes file) file))
         (length (or length (- (stat:size (stat fd)) offset))))
    (%make-file-body fd (and (port? file) file) offset (+ offset length) release)))

(define (%file-body? object)
  "Return true when OBJECT is a file body (`make-file-body')."
  (file-body? object))

(define (file-body-length body)
  "Return the bytes of BODY, a file body, still to send."
  (- (file-body-end body) (file-body-offset body)))

(define (file-body->bytevector body)
  "Return a bytevector of the bytes BODY, a file body, would send, read
from its file (for tests and tools: the loop sends them with
sendfile(2)), or #f if the file is shorter."
  (let* ((start (file-body-offset body))
         (count (- (file-body-end body) start))
         (bv (make-bytevector count))
         (address (bytevector-address bv))
         (fd (file-body-fd body)))
    (seek fd start SEEK_SET)
    (let lp ((at 0))
      (if (= at count)
          bv
          (let ((n (fd-read fd address at (- count at))))
            (and (> n 0) (lp (+ at n))))))))

(define (close-file-body! body)
  "Close the file of BODY, a <file-body>, or call its release thunk, once:
a second call does nothing.  Return nothing."
  (let ((fd (file-body-fd body)))
    (when fd
      ;; Marked first: a release thunk counts the bodies that share a
      ;; descriptor, and one counted twice would close it under another.
      (set-file-body-fd! body #f)
      (cond
       ((file-body-release body) ((file-body-release body)))
       ((file-body-port body) (close-port (file-body-port body)))
       (else (fd-close fd))))))

(define-record-type <takeover>
  (%make-takeover procedure)
  takeover?
  (procedure takeover-procedure))       ; (fd transport leftover) -> _

;; After the record: with SRFI-9's records, `takeover?' is a macro that
;; must be defined before a procedure that uses it is compiled.
(define (%takeover? object)
  "Return true when OBJECT is a takeover (`make-takeover')."
  (takeover? object))

(define (make-takeover procedure)
  "Return a response body that takes the connection over once the head
is sent (a 101 Switching Protocols): PROCEDURE is called on the loop's
thread as (PROCEDURE fd transport leftover), FD being the socket, to be
read and written through TRANSPORT (plucky server transport), and
LEFTOVER a bytevector of what the client sent after the request, which
the loop had read already.  From then on the loop forgets the
connection: the descriptor is PROCEDURE's to close, with
(transport-close TRANSPORT) on FD.  PROCEDURE must not block: it hands
the socket to a thread, or to a loop of its own."
  (%make-takeover procedure))

;;;
;;; Printing
;;;

;; A backtrace prints every frame's arguments, and the default record
;; printer would print the loop's event buffer and its table of a
;; thousand connections in each frame, and a backtrace's time is taken
;; from every other client (tests/server/loop.scm's handler failures
;; show it).  These records print as one short line instead.
(set-record-type-printer! <loop>
  (lambda (loop port)
    (format port "#<loop ~a connections>" (loop-count loop))))
(set-record-type-printer! <connection>
  (lambda (conn port)
    (format port "#<connection fd ~a ~a>" (connection-fd conn) (connection-state conn))))
(set-record-type-printer! <loop-settings>
  (lambda (settings port) (display "#<loop-settings>" port)))

;;;
;;; Clocks
;;;

(define (clock-ms)
  "Return the monotonic clock in milliseconds, the loop's clock."
  (quotient (get-internal-real-time) 1000000))

;;;
;;; Deadlines
;;;

(define input-size 65536)

(define never (ash 1 60))

(define-inlinable (set-deadline! loop conn ms)
  "Make CONN's deadline MS milliseconds from the loop's now, and the
loop's next sweep no later than that."
  ;; The clock is read in whole milliseconds, so the round began up to
  ;; one before the now it read: one more keeps a timeout from firing
  ;; early (tests/server/loop.scm's timeouts saw 0.9996 s for 1 s).
  (let ((deadline (+ (loop-now loop) ms 1)))
    (set-connection-deadline! conn deadline)
    (when (< deadline (loop-next-sweep loop))
      (set-loop-next-sweep! loop deadline))))

(define wake-byte (make-bytevector 1 0))
(define wake-byte-address (bytevector-address wake-byte))

(define (wake! loop)
  "Make LOOP's epoll_wait return now; return nothing.  Safe from a signal
handler, which Guile may run on another thread, and from a pool thread."
  (let ((port (cdr (loop-wake-ports loop))))
    (fd-write (port->fdes port) wake-byte-address 0 1)))

;;;
;;; Opening and closing connections
;;;

(define (connection-ref loop fd)
  "Return the connection of LOOP on descriptor FD, or #f."
  (let ((table (loop-connections loop)))
    (and (< fd (vector-length table)) (vector-ref table fd))))

(define (register-connection! loop conn)
  "Enter CONN in LOOP's table of connections; return nothing."
  (let* ((fd (connection-fd conn))
         (table (loop-connections loop)))
    (when (>= fd (vector-length table))
      (let ((bigger (make-vector (max (+ fd 1) (* 2 (vector-length table))) #f)))
        (vector-move-left! table 0 (vector-length table) bigger 0)
        (set-loop-connections! loop bigger)))
    (vector-set! (loop-connections loop) fd conn)
    (set-loop-count! loop (+ 1 (loop-count loop)))))

(define (forget-connection! loop conn)
  ;; -> #t when CONN was LOOP's and is not any more
  (let ((fd (connection-fd conn)))
    (and (eq? (connection-ref loop fd) conn)
         (begin
           (vector-set! (loop-connections loop) fd #f)
           (set-loop-count! loop (- (loop-count loop) 1))
           (let lp ((pending (connection-pending conn)))
             (when (pair? pending)
               (when (file-body? (car pending))
                 (close-file-body! (car pending)))
               (lp (cdr pending))))
           #t))))

(define (close-connection! loop conn)
  "Close CONN's descriptors and drop it from LOOP; return nothing.  The
one place a connection's descriptor is closed.  close(2) also removes it
from the epoll set."
  (when (forget-connection! loop conn)
    (let ((fd (connection-fd conn))
          (close (transport-close (connection-transport conn))))
      (probe-closed! (loop-probe loop) (close fd))
      (unless (= fd (connection-out-fd conn))
        (close (connection-out-fd conn))))))

(define (take-over! loop conn takeover)
  "Give CONN, whose head is out, to TAKEOVER (a <takeover>) and forget it
in LOOP; return nothing.  A takeover procedure that raises is logged,
and the socket it was given closed: the worker serves on, as after a
handler's exception."
  (let ((leftover (let ((own (connection-input conn)))
                    (if own
                        (bytevector-copy-range own (connection-start conn)
                                               (connection-end conn))
                        #vu8())))
        (fd (connection-fd conn))
        (transport (connection-transport conn)))
    (set-connection-pending! conn '())
    (forget-connection! loop conn)
    (when (connection-watched? conn)
      (epoll-remove! (loop-epfd loop) fd))
    (catch #t
      (lambda () ((takeover-procedure takeover) fd transport leftover))
      (lambda (key . args)
        (let ((port (current-error-port)))
          (format port "plucky: a takeover failed, its socket closed: ~a ~s~%" key args)
          (force-output port))
        (loop-unwatch! fd)
        ((transport-close transport) fd)))
    (values)))

(define (watch! loop conn events)
  "Watch CONN for EVENTS, adding it to LOOP's epoll set the first time;
return nothing."
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
;;; Input kept between reads
;;;

(define (grow-input! conn)
  "Move CONN's unserved bytes to the front of its buffer, or into one twice
as big; return the buffer."
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
  "Make sure [START, END) of BV survives until CONN's next read: copy it
into storage of the connection's own unless it is already there."
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

;;; (plucky server connection) ends here
