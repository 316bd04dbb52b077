;;; (plucky server stream) --- request bodies and answers as ports, on a thread

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The loop (plucky server loop) never blocks: it reads what a socket
;;; has and goes on.  A handler that reads its request body as a port, or
;;; an answer written by a procedure as it is produced, cannot work that
;;; way without turning the application inside out.  So the loop hands
;;; such a connection to one of its worker threads (see `hand-off!' in
;;; the loop), which owns it until the answer is sent, and this module
;;; gives that thread its ports:
;;;
;;;  - a body reader, an input port over the request body: the bytes
;;;    that arrived with the head first, then the socket itself, with
;;;    Content-Length or chunked framing decoded as it is read (plucky
;;;    http chunked), an idle time-out per read, "100 Continue" sent when
;;;    the handler first reads (RFC 9110 §10.1.1), and the bytes that
;;;    follow the body (a pipelined request) kept for the loop;
;;;  - a stream writer, an output port whose writes go to the socket as
;;;    they are made: one chunk per write for HTTP/1.1, the bytes as they
;;;    are when the answer declared its length or the connection closes
;;;    after it (HTTP/1.0); `force-output' sends what is buffered (server-
;;;    sent events), closing the port sends the last chunk with its CRLF.
;;;
;;; The descriptors are the loop's and non-blocking; this thread waits
;;; with poll(2) when they are not ready, so a slow client holds its own
;;; thread, never the loop.  Nothing here closes a descriptor: the
;;; thread gives the connection back and the loop closes it.
;;;
;;; Code:

(define-module (plucky server stream)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 exceptions)
  #:use-module ((ice-9 binary-ports) #:select (make-custom-binary-input-port
                                                make-custom-binary-output-port))
  #:use-module (plucky sys libc)
  #:use-module (plucky server transport)
  #:use-module (plucky http error)
  #:use-module (plucky http chunked)
  #:export (&body-error
            body-error?
            body-error-status
            &connection-lost
            connection-lost?
            write-all!
            make-body-reader
            body-reader-port
            body-reader-complete?
            body-reader-leftover
            body-reader-finish!
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

(define (read-some! fd bv start count timeout transport)
  ;; -> bytes read into BV [START, START+COUNT) through TRANSPORT, at
  ;; least 1; raise a &body-error when the body stops or ends early.
  (let ((address (bytevector-address bv))
        (read (transport-read transport)))
    (let lp ()
      (let ((n (read fd address start count)))
        (cond
         ((> n 0) n)
         ((= n (- errno-EAGAIN))
          (if (or ((transport-pending? transport) fd)
                  (fd-wait fd 'read (* 1000 timeout)))
              (lp)
              (body-error 408 "the request body stopped arriving")))
         ((zero? n) (body-error 400 "the connection closed before the body's end"))
         (else (body-error 400 (errno->string n))))))))

;;;
;;; Request bodies
;;;

(define-record-type <body-reader>
  (%make-body-reader fd transport timeout port continue remaining decoder
                     raw raw-start raw-end data data-start data-end finished?)
  body-reader?
  (fd reader-fd)
  (transport reader-transport)              ; <transport> of FD
  ;; #t once the handler has returned: the socket is the loop's again
  (finished? reader-finished? set-reader-finished!)
  (timeout reader-timeout)                  ; seconds a read may wait
  (port body-reader-port set-reader-port!)
  ;; #f, or a thunk that sends "100 Continue", called before the first read
  (continue reader-continue set-reader-continue!)
  ;; Content-Length framing: bytes of body not yet read; #f when chunked
  (remaining reader-remaining set-reader-remaining!)
  (decoder reader-decoder)                  ; chunked framing: the decoder
  ;; bytes from the socket not yet used: RAW [raw-start, raw-end)
  (raw reader-raw set-reader-raw!)
  (raw-start reader-raw-start set-reader-raw-start!)
  (raw-end reader-raw-end set-reader-raw-end!)
  ;; chunked: decoded body bytes not yet read: DATA [data-start, data-end)
  (data reader-data)
  (data-start reader-data-start set-reader-data-start!)
  (data-end reader-data-end set-reader-data-end!))

(define raw-size
  ;; A chunked body is read from the socket this much at a time.  Its
  ;; decoded data never outgrows the raw bytes it came in, so DATA is as
  ;; big.
  65536)

(define* (make-body-reader fd framing bv start end #:key (timeout 30)
                           (max-body (* 64 1024 1024)) (continue #f)
                           (transport plain-transport))
  "Return a reader of the request body that starts at BV [START, END) (the
bytes that came after the head, copied) and goes on on the socket FD, read through TRANSPORT.
FRAMING is the body's length in bytes (Content-Length) or 'chunked.
Each read waits at most TIMEOUT seconds; a chunked body longer than
MAX-BODY bytes is an error (413).  CONTINUE, if given, is a thunk called
before the first read (it sends \"100 Continue\").  `body-reader-port'
is the port the handler reads; errors reading it raise a &body-error."
  (let* ((chunked? (eq? framing 'chunked))
         (have (- end start))
         ;; With a Content-Length the socket is read straight into the
         ;; handler's buffer: RAW holds only what came with the head.
         (raw (make-bytevector (if chunked? (max raw-size have) have)))
         (reader (%make-body-reader
                  fd transport timeout #f continue (and (not chunked?) framing)
                  (and chunked? (make-chunked-decoder #:max-total max-body))
                  raw 0 have
                  (and chunked? (make-bytevector (bytevector-length raw))) 0 0 #f)))
    (bytevector-copy! bv start raw 0 have)
    (let ((port (make-custom-binary-input-port
                 "request body"
                 (lambda (bv start count) (reader-read! reader bv start count))
                 #f #f #f)))
      (set-reader-port! reader port)
      reader)))

(define (reader-read! reader bv start count)
  ;; The port's read!: -> bytes put in BV [START, START+COUNT), 0 at the
  ;; end of the body.
  (when (reader-finished? reader)
    (error "request body read after its handler returned"))
  (let ((continue (reader-continue reader)))
    (when continue
      (set-reader-continue! reader #f)
      (continue)))
  (if (reader-remaining reader)
      (read-counted! reader bv start count)
      (read-chunked! reader bv start count)))

(define (take-raw! reader bv start count)
  ;; Move up to COUNT bytes of RAW to BV; -> how many.
  (let* ((raw-start (reader-raw-start reader))
         (n (min count (- (reader-raw-end reader) raw-start))))
    (bytevector-copy! (reader-raw reader) raw-start bv start n)
    (set-reader-raw-start! reader (+ raw-start n))
    n))

(define (read-counted! reader bv start count)
  (let ((remaining (reader-remaining reader)))
    (if (zero? remaining)
        0
        (let* ((count (min count remaining))
               (n (if (< (reader-raw-start reader) (reader-raw-end reader))
                      (take-raw! reader bv start count)
                      ;; Straight from the socket into the caller's
                      ;; buffer, never past the body's end: what follows
                      ;; belongs to the next request.
                      (read-some! (reader-fd reader) bv start count
                                  (reader-timeout reader) (reader-transport reader)))))
          (set-reader-remaining! reader (- remaining n))
          n))))

(define (read-chunked! reader bv start count)
  (let ((data-start (reader-data-start reader))
        (data-end (reader-data-end reader))
        (decoder (reader-decoder reader)))
    (cond
     ((< data-start data-end)
      (let ((n (min count (- data-end data-start))))
        (bytevector-copy! (reader-data reader) data-start bv start n)
        (set-reader-data-start! reader (+ data-start n))
        n))
     ((chunked-decoder-done? decoder) 0)
     (else
      (when (= (reader-raw-start reader) (reader-raw-end reader))
        (let ((n (read-some! (reader-fd reader) (reader-raw reader) 0
                             (bytevector-length (reader-raw reader))
                             (reader-timeout reader) (reader-transport reader))))
          (set-reader-raw-start! reader 0)
          (set-reader-raw-end! reader n)))
      (set-reader-data-start! reader 0)
      (set-reader-data-end! reader 0)
      (call-with-values
          (lambda ()
            (decode-chunked! decoder (reader-raw reader) (reader-raw-start reader)
                             (reader-raw-end reader)
                             (lambda (raw start count)
                               (let ((end (reader-data-end reader)))
                                 (bytevector-copy! raw start (reader-data reader) end count)
                                 (set-reader-data-end! reader (+ end count))))))
        (lambda (status index)
          (if (http-error? status)
              (body-error (http-error-status status) (http-error-reason status))
              (begin
                ;; 'more used every byte; 'done leaves what follows the
                ;; body (a pipelined request) in RAW for the loop.
                (set-reader-raw-start! reader index)
                (read-chunked! reader bv start count)))))))))

(define (body-reader-complete? reader)
  "True when every byte of the body has been read from the socket, so
that the connection is at the next request's first byte (or at bytes
kept in `body-reader-leftover')."
  (if (reader-remaining reader)
      (zero? (reader-remaining reader))
      (and (chunked-decoder-done? (reader-decoder reader))
           (= (reader-data-start reader) (reader-data-end reader)))))

(define (body-reader-finish! reader)
  "Make READER's port refuse to read: its handler has returned and the
connection is going back to the loop."
  (set-reader-finished! reader #t))

(define (body-reader-leftover reader)
  "Return the bytes read from the socket beyond the body (the start of a
pipelined request) as three values: a bytevector, start and end."
  (values (reader-raw reader) (reader-raw-start reader) (reader-raw-end reader)))

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
