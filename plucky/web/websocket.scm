;;; (plucky web websocket) --- WebSocket connections on the worker's loop

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A handler accepts an upgrade by returning what `websocket-upgrade'
;;; returns:
;;;
;;;   (define (handler request body)
;;;     (if (websocket-request? request)
;;;         (websocket-upgrade request
;;;           #:on-message (lambda (ws message) (websocket-send ws message)))
;;;         (values '((content-type . (text/plain))) "hello")))
;;;
;;; The 101 answer carries a takeover (see `make-takeover'): once it is
;;; sent, the socket is watched by the worker's own epoll loop (plucky
;;; server watch), not given a thread.  Every callback runs on the loop's
;;; thread, so it must not block: it may send on this or any other
;;; WebSocket of the worker.  A connection is a <websocket> record, a
;;; reader (plucky http websocket) and a queue of frames to send.
;;;
;;; Reading: a readable socket is read into one buffer shared by every
;;; connection of the loop; the reader copies only what is not yet a
;;; whole frame, so an idle connection holds no buffer.  Whole messages
;;; go to ON-MESSAGE, pings are answered, a close is echoed and the
;;; socket closed once the echo is out; a protocol error closes with its
;;; code (1002, 1007, 1009).
;;;
;;; Writing: `websocket-send' writes at once what the socket takes and
;;; queues the rest, watching for the socket to be writable.  The queue
;;; is bounded (MAX-BUFFER bytes): a message that would pass the bound is
;;; refused (`websocket-send' returns #f) and ON-DRAIN is called once the
;;; queue is empty again; that is the backpressure of a client that reads
;;; slowly.
;;;
;;; Time: once a second a sweep of the loop's WebSockets pings those idle
;;; for PING-INTERVAL seconds and drops those that did not answer within
;;; PING-TIMEOUT, whose queue made no progress for as long, or whose
;;; close handshake did not finish.
;;;
;;; Compression: when the client offers permessage-deflate (RFC 7692)
;;; and the app did not say #:deflate? #f, the first offer plucky can
;;; honour is accepted (plucky http websocket reads the offers) and the
;;; connection gets a raw deflater and an inflater of its own (plucky sys
;;; zlib), kept across messages (context takeover) unless the offer said
;;; otherwise, freed when the socket closes.  Every message sent is
;;; compressed, RSV1 set; the reader inflates within MAX-MESSAGE.
;;;
;;; Code:

(define-module (plucky web websocket)
  #:use-module ((srfi srfi-1) #:select (filter-map))
  #:use-module (srfi srfi-9)
  #:use-module (rnrs bytevectors)
  #:use-module ((rnrs io ports)
                #:select (call-with-bytevector-output-port open-bytevector-input-port))
  #:use-module ((system foreign) #:select (bytevector->pointer pointer-address))
  #:use-module (web request)
  #:use-module (web response)
  #:use-module (plucky http websocket)
  #:use-module ((plucky sys zlib)
                #:select (make-deflater deflate-message deflater-reset! deflater-end!
                          make-inflater inflate-message inflater-reset! inflater-end!))
  #:use-module (plucky server transport)
  #:use-module ((plucky server loop)
                #:select (make-takeover log-line loop-watch! loop-want-write!
                          loop-unwatch! loop-call-after! loop-now-ms))
  #:export (websocket-request?
            websocket-upgrade
            websocket?
            websocket-send
            websocket-ping
            websocket-close
            websocket-open?
            websocket-buffered
            websocket-request
            websocket-protocol
            websocket-data
            set-websocket-data!
            websocket-count))

;;;
;;; The handshake
;;;

(define (header-tokens request name)
  ;; -> the comma-separated tokens of header NAME, lower case
  (let ((value (assq-ref (request-headers request) name)))
    (cond
     ((not value) '())
     ((string? value)
      (map (lambda (s) (string-downcase (string-trim-both s)))
           (string-split value #\,)))
     ((list? value)
      (map (lambda (v)
             (string-downcase (if (symbol? v) (symbol->string v)
                                  (if (string? v) v (object->string v)))))
           value))
     (else '()))))

(define (header-string request name)
  (let ((value (assq-ref (request-headers request) name)))
    (and (string? value) (string-trim-both value))))

(define (header-joined request name)
  ;; -> the values of every header NAME, joined by commas, or #f
  (let ((values (filter-map (lambda (h) (and (eq? (car h) name) (string? (cdr h))
                                             (cdr h)))
                            (request-headers request))))
    (and (pair? values) (string-join values ", "))))

(define (websocket-request? request)
  "Return true when REQUEST asks to become a WebSocket: a GET with
Upgrade: websocket and Connection: upgrade."
  (and (eq? (request-method request) 'GET)
       (member "websocket" (header-tokens request 'upgrade))
       (member "upgrade" (header-tokens request 'connection))
       #t))

(define (refuse code text . headers)
  (values (build-response #:code code
                          #:headers `((content-type . (text/plain))
                                      (connection . (close))
                                      ,@headers))
          text))

(define (choose-protocol request protocols)
  ;; The first subprotocol the client offers that the app accepts.
  (let ((offered (header-tokens request 'sec-websocket-protocol)))
    (let lp ((offered offered))
      (cond
       ((null? offered) #f)
       ((member (car offered) protocols) (car offered))
       (else (lp (cdr offered)))))))

(define* (websocket-upgrade request #:key (on-open (lambda (ws) #f))
                            (on-message (lambda (ws message) #f))
                            (on-close (lambda (ws code reason) #f))
                            (on-drain (lambda (ws) #f))
                            (protocols '())
                            (max-message (* 1024 1024))
                            (max-buffer (* 1024 1024))
                            (ping-interval 30)
                            (ping-timeout 30)
                            (deflate? #t))
  "Return the two values a handler returns to accept REQUEST as a
WebSocket: a 101 response and a takeover, or, for a request that is not
a proper upgrade, a 400 (426 for a protocol version other than 13) and
its text.  Callbacks run on the loop's thread: ON-OPEN (ws) once the
connection is open, ON-MESSAGE (ws message) with each message, a string
for text or a bytevector for binary, ON-CLOSE (ws code reason) once when
the socket is closed (CODE 1006 when it was lost without a close frame,
1005 when the close frame had no code), ON-DRAIN (ws) when the send
queue is empty after a `websocket-send' was refused.  PROTOCOLS, a list
of strings, are the subprotocols the app speaks; the first one the
client offers is chosen (`websocket-protocol').  MAX-MESSAGE bounds a
message from the client (bytes; over it, close 1009), MAX-BUFFER the
queue of bytes to send; an idle connection is pinged after PING-INTERVAL
seconds and dropped PING-TIMEOUT seconds later without an answer.
DEFLATE? #f declines permessage-deflate, which is otherwise accepted
when the client offers it.  Checking Origin is the app's choice, before
it calls this."
  (let ((key (header-string request 'sec-websocket-key))
        (version (header-string request 'sec-websocket-version)))
    (cond
     ((not (websocket-request? request))
      (refuse 400 "not a WebSocket upgrade\n"))
     ((not (equal? version "13"))
      (refuse 426 "WebSocket version 13 only\n" '(sec-websocket-version . "13")))
     ((not (websocket-key-valid? key))
      (refuse 400 "bad Sec-WebSocket-Key\n"))
     (else
      (let ((protocol (choose-protocol request protocols))
            (deflate (and deflate?
                          (websocket-deflate-offer
                           (header-joined request 'sec-websocket-extensions)
                           #:max-window-bits deflate-window-bits))))
        (values
         (build-response
          #:code 101
          #:headers `((upgrade . ("websocket"))
                      (connection . (upgrade))
                      (sec-websocket-accept . ,(websocket-accept key))
                      ,@(if protocol `((sec-websocket-protocol . ,protocol)) '())
                      ,@(if deflate
                            `((sec-websocket-extensions
                               . ,(deflate-params-response deflate)))
                            '())))
         (make-takeover
          (lambda (fd transport leftover)
            (let ((deflater (and deflate
                                 (make-deflater #:format 'raw
                                                #:window-bits
                                                (deflate-params-server-bits deflate)
                                                #:mem-level deflate-mem-level)))
                  (inflater (and deflate
                                 (make-inflater #:window-bits
                                                (deflate-params-client-bits deflate)))))
              (open-websocket! (make-websocket
                                #:fd fd #:transport transport #:request request
                                #:protocol protocol
                                #:max-message max-message
                                #:inflate (and inflater
                                               (inflate-procedure inflater deflate))
                                #:deflater deflater
                                #:deflate-reset? (and deflate
                                                      (deflate-params-server-reset? deflate))
                                #:inflater inflater
                                #:on-message on-message #:on-close on-close
                                #:on-drain on-drain #:max-buffer max-buffer
                                #:ping-ms (* 1000 ping-interval)
                                #:timeout-ms (* 1000 ping-timeout))
                               on-open leftover))))))))))

;; permessage-deflate's memory per connection: zlib's deflate state is
;; 2^(window+2) + 2^(mem-level+9) bytes, 32 KiB with these rather than
;; 256 KiB with zlib's defaults, for a ratio that differs little on
;; messages of a few kilobytes (bench/websocket measures both ways).
;; The inflater must take the client's window, up to 32 KiB.
(define deflate-window-bits 12)
(define deflate-mem-level 5)

(define (inflate-procedure inflater deflate)
  ;; -> the reader's #:inflate for this connection
  (let ((reset? (deflate-params-client-reset? deflate)))
    (lambda (payload limit)
      (let ((message (inflate-message inflater payload limit)))
        (when reset? (inflater-reset! inflater))
        message))))

;;;
;;; A connection
;;;

(define-record-type <websocket>
  (%make-websocket fd transport head protocol reader max-message inflate
                   deflater deflate-reset? inflater on-message on-close
                   on-drain max-buffer ping-ms timeout-ms state queue
                   queue-offset buffered refused? last-read pinged-at
                   stalled-since closing-since close-code close-reason data)
  websocket?
  (fd websocket-fd)
  (transport websocket-transport)
  ;; the upgrade request as Guile writes it: bytes, which the collector
  ;; does not scan (see `websocket-request')
  (head websocket-head)
  (protocol websocket-protocol)         ; the chosen subprotocol, or #f
  ;; a reader of the client's frames, or #f when it held nothing at the
  ;; last sweep (see `websocket-reader!'); what makes one
  (reader websocket-reader set-websocket-reader!)
  (max-message websocket-max-message)
  (inflate websocket-inflate)
  (deflater websocket-deflater)         ; #f, or permessage-deflate's (raw)
  (deflate-reset? websocket-deflate-reset?) ; reset it after each message
  (inflater websocket-inflater)         ; #f, or the reader's, to free
  (on-message websocket-on-message)
  (on-close websocket-on-close)
  (on-drain websocket-on-drain)
  (max-buffer websocket-max-buffer)     ; bytes queued, at most
  (ping-ms websocket-ping-ms)
  (timeout-ms websocket-timeout-ms)
  ;; open, closing (our close frame queued, the client's awaited),
  ;; flushing (to close once the queue is out), closed
  (state websocket-state set-websocket-state!)
  (queue websocket-queue set-websocket-queue!) ; frames to send, in order
  (queue-offset websocket-queue-offset set-websocket-queue-offset!) ; sent of the first
  (buffered websocket-buffered set-websocket-buffered!)
  (refused? websocket-refused? set-websocket-refused!) ; a send was refused
  (last-read websocket-last-read set-websocket-last-read!) ; loop ms
  (pinged-at websocket-pinged-at set-websocket-pinged-at!) ; #f or loop ms
  (stalled-since websocket-stalled-since set-websocket-stalled-since!) ; #f or ms
  (closing-since websocket-closing-since set-websocket-closing-since!)
  ;; the close frame that ended it: the client's, else ours
  (close-code websocket-close-code set-websocket-close-code!)
  (close-reason websocket-close-reason set-websocket-close-reason!)
  (data websocket-data set-websocket-data!)) ; the app's

(define* (make-websocket #:key fd transport request protocol max-message inflate
                         deflater deflate-reset? inflater on-message
                         on-close on-drain max-buffer ping-ms timeout-ms)
  (%make-websocket fd transport (request->head request) protocol #f max-message
                   inflate deflater deflate-reset? inflater on-message on-close
                   on-drain max-buffer ping-ms timeout-ms 'open '() 0 0 #f
                   (loop-now-ms) #f #f #f #f #f #f))

;; An open WebSocket lives as long as its client stays, and every
;; collection marks what it holds, while the worker's HTTP clients wait
;; (bench/websocket, idle): the upgrade request (a record, its URI, a
;; list of headers and their strings) was most of it.  It is kept as the
;; bytes Guile's `write-request' gives, one object the collector does
;; not look into, and read again when asked for.  A request Guile cannot
;; write (plucky keeps a header Guile's parser refuses as its raw string,
;; which Guile's writer refuses in turn) is kept as it is.
(define (request->head request)
  (catch #t
    (lambda ()
      (call-with-bytevector-output-port
       (lambda (port)
         (set-port-encoding! port "ISO-8859-1")
         (write-request request port))))
    (lambda _ request)))

(define (websocket-request ws)
  "Return the request WS was upgraded from: a (web request) record, read
afresh from the bytes kept on each call (equal to the handler's, not
`eq?', and without its meta, such as the mount prefix)."
  (let ((head (websocket-head ws)))
    (if (bytevector? head)
        (let ((port (open-bytevector-input-port head)))
          (set-port-encoding! port "ISO-8859-1")
          (read-request port))
        head)))

(define (websocket-open? ws)
  "Return true when WS can still send messages (no close frame sent)."
  (eq? (websocket-state ws) 'open))

;; The open WebSockets of this process's loop: a vector indexed by
;; descriptor, and how many.  Not a hash table, nor closures over each
;; WebSocket for the loop to call: every collection marks what an idle
;; WebSocket holds, and the worker's HTTP clients wait through it
;; (bench/websocket, idle); a table's entry is two objects, a closure
;; one.  For the same reason a WebSocket's reader is dropped by the
;; sweep when it holds nothing, and made again by the next read.
(define websockets (make-vector 64 #f))
(define open-count 0)

;; The pending sweep's timer, or #f when no WebSocket is open.
(define sweep-timer #f)

(define (websocket-count)
  "Return the number of WebSockets open on this process's loop."
  open-count)

(define (enter-websocket! fd ws)
  (when (>= fd (vector-length websockets))
    (let ((bigger (make-vector (max (+ fd 1) (* 2 (vector-length websockets))) #f)))
      (vector-move-left! websockets 0 (vector-length websockets) bigger 0)
      (set! websockets bigger)))
  (unless (vector-ref websockets fd)
    (set! open-count (+ open-count 1)))
  (vector-set! websockets fd ws))

(define (forget-websocket! fd ws)
  (when (and (< fd (vector-length websockets)) (eq? (vector-ref websockets fd) ws))
    (vector-set! websockets fd #f)
    (set! open-count (- open-count 1))))

(define (websocket-reader! ws)
  ;; -> WS's reader, made if the sweep dropped it
  (or (websocket-reader ws)
      (let ((reader (make-websocket-reader #:max-message (websocket-max-message ws)
                                           #:inflate (websocket-inflate ws))))
        (set-websocket-reader! ws reader)
        reader)))

(define (open-websocket! ws on-open leftover)
  (let ((fd (websocket-fd ws)))
    (enter-websocket! fd ws)
    (loop-watch! fd #:object ws #:on-read read-ready! #:on-write flush! #:on-stop stop!)
    (unless sweep-timer
      (set! sweep-timer (loop-call-after! 1000 sweep!)))
    (guarded ws (lambda () (on-open ws)))
    (when (> (bytevector-length leftover) 0)
      (websocket-reader-feed! (websocket-reader! ws) leftover 0
                              (bytevector-length leftover))
      (take-events! ws))))

(define (guarded ws thunk)
  ;; An app's callback that raises is logged, and its connection closed
  ;; with 1011, as a handler's exception is a 500.
  (catch #t
    thunk
    (lambda (key . args)
      (log-line "websocket callback: ~a ~s" key args)
      (when (memq (websocket-state ws) '(open closing))
        (send-close! ws 1011 "internal error")
        (set-websocket-state! ws 'flushing)
        (close-if-flushed! ws)))))

;;;
;;; Reading
;;;

(define (bytevector-address* bv)
  (pointer-address (bytevector->pointer bv)))

;; One buffer for every connection of the loop: reads happen one at a
;; time, on the loop's thread.
(define read-size 65536)
(define read-buffer (make-bytevector read-size))
(define read-address (bytevector-address* read-buffer))

(define (read-ready! ws)
  (let ((n ((transport-read (websocket-transport ws))
            (websocket-fd ws) read-address 0 read-size)))
    (cond
     ((> n 0)
      (set-websocket-last-read! ws (loop-now-ms))
      (set-websocket-pinged-at! ws #f)
      (unless (eq? (websocket-state ws) 'flushing)
        (websocket-reader-feed! (websocket-reader! ws) read-buffer 0 n)
        (take-events! ws)))
     ((= n (- EAGAIN)) #f)
     (else
      ;; end of file or an error: the client is gone
      (close-now! ws 1006 "connection lost")))))

(define (take-events! ws)
  (let lp ()
    (when (memq (websocket-state ws) '(open closing))
      (let ((event (websocket-reader-next! (websocket-reader! ws))))
        (when event
          (case (car event)
            ((text binary)
             (when (websocket-open? ws)
               (guarded ws (lambda () ((websocket-on-message ws) ws (cdr event))))))
            ((ping) (enqueue! ws (websocket-frame opcode-pong (cdr event))))
            ((pong) #f)
            ((close)
             (let ((code (cadr event)) (reason (cddr event)))
               (set-websocket-close-code! ws (or code 1005))
               (set-websocket-close-reason! ws reason)
               (when (websocket-open? ws)
                 ;; Echo the code (RFC 6455, 5.5.1).
                 (enqueue! ws (websocket-close-frame code)))
               (set-websocket-state! ws 'flushing)
               (close-if-flushed! ws)))
            ((error)
             (let ((code (cadr event)) (reason (cddr event)))
               (send-close! ws code reason)
               (set-websocket-state! ws 'flushing)
               (close-if-flushed! ws))))
          (lp))))))

;;;
;;; Writing
;;;

(define (queue-full? ws bytes)
  ;; -> #t, and the refusal noted for ON-DRAIN, when BYTES more would
  ;; pass the queue's bound; a message is always taken by an empty queue.
  (and (> (+ (websocket-buffered ws) bytes) (websocket-max-buffer ws))
       (> (websocket-buffered ws) 0)
       (begin (set-websocket-refused! ws #t) #t)))

(define (enqueue! ws frame)
  ;; Queue FRAME and send as much of it as the socket takes; -> #t.
  (let ((was-empty? (null? (websocket-queue ws))))
    (set-websocket-queue! ws (append (websocket-queue ws) (list frame)))
    (set-websocket-buffered! ws (+ (websocket-buffered ws) (bytevector-length frame)))
    (when was-empty? (flush! ws))
    #t))

(define (flush! ws)
  ;; Write what the socket takes; watch for writable while some is left.
  (let ((fd (websocket-fd ws))
        (write (transport-write (websocket-transport ws))))
    (let lp ()
      (let ((queue (websocket-queue ws)))
        (if (null? queue)
            (begin
              (loop-want-write! fd #f)
              (set-websocket-stalled-since! ws #f)
              (when (websocket-refused? ws)
                (set-websocket-refused! ws #f)
                (when (websocket-open? ws)
                  (guarded ws (lambda () ((websocket-on-drain ws) ws)))))
              (close-if-flushed! ws))
            (let* ((frame (car queue))
                   (offset (websocket-queue-offset ws))
                   (left (- (bytevector-length frame) offset))
                   (n (write fd (bytevector-address* frame) offset left)))
              (cond
               ((= n left)
                (set-websocket-queue! ws (cdr queue))
                (set-websocket-queue-offset! ws 0)
                (set-websocket-buffered! ws (- (websocket-buffered ws) n))
                (lp))
               ((> n 0)
                (set-websocket-queue-offset! ws (+ offset n))
                (set-websocket-buffered! ws (- (websocket-buffered ws) n))
                (set-websocket-stalled-since! ws (loop-now-ms))
                (lp))
               ((= n (- EAGAIN))
                (unless (websocket-stalled-since ws)
                  (set-websocket-stalled-since! ws (loop-now-ms)))
                (loop-want-write! fd #t))
               (else
                (close-now! ws 1006 "connection lost")))))))))

(define (send-close! ws code reason)
  (unless (websocket-close-code ws)
    (set-websocket-close-code! ws code)
    (set-websocket-close-reason! ws reason))
  (enqueue! ws (websocket-close-frame code reason)))

(define (close-if-flushed! ws)
  (when (and (eq? (websocket-state ws) 'flushing)
             (null? (websocket-queue ws)))
    ;; The server closes the TCP connection first (RFC 6455, 7.1.1).
    (close-now! ws (or (websocket-close-code ws) 1005)
                (or (websocket-close-reason ws) ""))))

(define (close-now! ws code reason)
  ;; Close the socket, once, and tell the app.
  (unless (eq? (websocket-state ws) 'closed)
    (let ((fd (websocket-fd ws)))
      (set-websocket-state! ws 'closed)
      (forget-websocket! fd ws)
      (loop-unwatch! fd)
      ((transport-close (websocket-transport ws)) fd)
      (when (websocket-deflater ws) (deflater-end! (websocket-deflater ws)))
      (when (websocket-inflater ws) (inflater-end! (websocket-inflater ws)))
      (set-websocket-queue! ws '())
      (set-websocket-buffered! ws 0)
      (catch #t
        (lambda () ((websocket-on-close ws) ws code reason))
        (lambda (key . args)
          (log-line "websocket on-close: ~a ~s" key args))))))

(define (stop! ws)
  ;; The loop stops: say so if the socket takes it at once, and close.
  ;; Its timers are gone with it.
  (set! sweep-timer #f)
  (when (websocket-open? ws)
    (let ((frame (websocket-close-frame 1001 "server going away")))
      ((transport-write (websocket-transport ws))
       (websocket-fd ws) (bytevector-address* frame) 0 (bytevector-length frame))))
  (close-now! ws 1001 "server going away"))

;;;
;;; The API
;;;

(define (websocket-send ws message)
  "Send MESSAGE on WS: a string as a text message, a bytevector as a
binary one.  Return #t when it is sent or queued, #f when WS is closing
or its queue is full (the client reads slowly; ON-DRAIN says when to
send again)."
  (and (websocket-open? ws)
       (let ((bytes (if (string? message) (string->utf8 message) message)))
         ;; Checked before compressing: a compressed message must be sent
         ;; once compressed, since the client's inflater follows ours.
         ;; Deflate adds a few bytes at most, and the frame's head.
         (and (not (queue-full? ws (bytevector-length bytes)))
              (enqueue! ws (message-frame ws (if (string? message) opcode-text
                                                 opcode-binary)
                                          bytes))))))

(define (message-frame ws opcode bytes)
  (let ((deflater (websocket-deflater ws)))
    (if deflater
        (let ((frame (websocket-frame opcode (deflate-message deflater bytes)
                                      #:rsv1? #t)))
          (when (websocket-deflate-reset? ws)
            (deflater-reset! deflater))
          frame)
        (websocket-frame opcode bytes))))

(define* (websocket-ping ws #:optional (payload #vu8()))
  "Send a ping carrying PAYLOAD (at most 125 bytes) on WS; return #t, or
#f when WS is closing."
  (and (websocket-open? ws)
       (enqueue! ws (websocket-frame opcode-ping payload))))

(define* (websocket-close ws #:optional (code 1000) (reason ""))
  "Start the close handshake on WS with CODE and REASON: no message is
sent after it, and the socket is closed when the client answers (or
after the ping timeout).  Return nothing."
  (when (websocket-open? ws)
    (send-close! ws code reason)
    (unless (eq? (websocket-state ws) 'closed)
      (set-websocket-state! ws 'closing)
      (set-websocket-closing-since! ws (loop-now-ms))))
  (values))

;;;
;;; The sweep
;;;

(define (sweep-one! ws now)
  ;; -> a reason to close WS now, or #f; pings it, drops its empty reader
  (let ((timeout (websocket-timeout-ms ws))
        (reader (websocket-reader ws)))
    (when (and reader (websocket-reader-idle? reader))
      (set-websocket-reader! ws #f))
    (cond
     ((and (websocket-pinged-at ws)
           (>= now (+ (websocket-pinged-at ws) timeout)))
      "no answer to a ping")
     ((and (websocket-stalled-since ws)
           (>= now (+ (websocket-stalled-since ws) timeout)))
      "the client does not read")
     ((and (websocket-closing-since ws)
           (>= now (+ (websocket-closing-since ws) timeout)))
      "no answer to the close")
     ((and (websocket-open? ws)
           (not (websocket-pinged-at ws))
           (>= now (+ (websocket-last-read ws) (websocket-ping-ms ws))))
      (set-websocket-pinged-at! ws now)
      (enqueue! ws (websocket-frame opcode-ping #vu8()))
      #f)
     (else #f))))

(define (sweep!)
  (let ((now (loop-now-ms))
        (table websockets))
    (let lp ((fd 0) (late '()))
      (if (< fd (vector-length table))
          (let* ((ws (vector-ref table fd))
                 (reason (and ws (sweep-one! ws now))))
            (lp (+ fd 1) (if reason (cons (cons ws reason) late) late)))
          (for-each (lambda (entry) (close-now! (car entry) 1006 (cdr entry))) late)))
    (set! sweep-timer
          (and (> open-count 0)
               (loop-call-after! 1000 sweep!)))))

;;; (plucky web websocket) ends here
