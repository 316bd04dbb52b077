;;; (plucky server http2) --- an HTTP/2 connection's state machine

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; HTTP/2 (RFC 9113) on the worker's loop, for the same handlers as
;;; HTTP/1.  A connection becomes HTTP/2 at one point: (plucky server
;;; request) sees the client's connection preface, "PRI * HTTP/2.0", where
;;; an HTTP/1 head would be (a client that knows in clear text, or one that
;;; TLS's ALPN agreed "h2" with), and calls `start-http2!'.  From then on
;;; the connection is in state h2, its BODY field holds its <h2>, and the
;;; loop calls `http2-ready!' whenever its socket is readable or writable.
;;;
;;;   read(2) -> read-frames!     each whole frame in the bytes read (a
;;;              frame cut by the read waits in PENDING), one procedure
;;;              per type: a header block decoded (plucky http hpack)
;;;              into the HTTP/1.1 head it stands for (plucky http
;;;              http2); DATA into the stream's body;
;;;              SETTINGS, PING, WINDOW_UPDATE, RST_STREAM, GOAWAY
;;;           -> run-streams!     a complete request is parsed as HTTP/1's
;;;              are (plucky http parse) and its handler called, as
;;;              (plucky server respond) calls it
;;;           -> answer!          the response's head, as HTTP/1 would
;;;              write it (plucky http response), HPACK-coded
;;;              (plucky http hpack) into a HEADERS frame; its body
;;;              queued in the stream
;;;           -> flush!           DATA frames as the windows allow
;;;              (`send-data!'), then write(2)
;;;
;;; The frames are plucky's own: nghttp2's session API called back into
;;; Scheme for each field and each frame, which cost more than the
;;; frames (bench/instructions-h2); a frame is 9 bytes of head read in
;;; place.
;;;
;;; Streams are multiplexed: a handler that suspends (plucky server
;;; suspend) keeps its continuation in its <h2-stream>, and the other
;;; streams go on.  When its wait ends, RESUME queues it here, and it runs
;;; at once if the loop is not inside a handler, else from a timer of no
;;; delay: a handler is never resumed inside another's.  A streamed answer
;;; (server-sent events) runs its body procedure the same way, writing to
;;; a port whose bytes wait in the stream until its window lets them go.
;;;
;;; Limits (each tested in tests/server/http2.scm): concurrent streams
;;; (SETTINGS_MAX_CONCURRENT_STREAMS, REFUSED_STREAM past it), the HPACK
;;; dynamic table (the decoder refuses a larger one), a header
;;; list's size (431), CONTINUATION frames per header block and a
;;; block's bytes, a body's size (413), resets, PINGs and SETTINGS per
;;; second (a GOAWAY ENHANCE_YOUR_CALM past them: so acknowledgements
;;; cannot pile up for a client that does not read), and a time limit on
;;; a connection that takes no answer bytes (a zero window, a socket not
;;; read).
;;;
;;; The loop's drain (a SIGTERM, a reload) sends GOAWAY: streams already
;;; begun are answered, and the connection closes once they are.
;;;
;;; Code:

(define-module (plucky server http2)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module ((srfi srfi-9 gnu) #:select (set-fields))
  #:use-module ((ice-9 binary-ports) #:select (make-custom-binary-output-port
                                               open-bytevector-input-port))
  #:use-module (web request)
  #:use-module ((plucky sys libc) #:select (errno-EAGAIN fd-pread))
  #:use-module ((plucky sys epoll) #:select (EPOLLIN EPOLLOUT))
  #:use-module ((plucky http parse) #:select (parse-request-head))
  #:use-module (plucky http http2)
  #:use-module ((plucky http hpack) #:select (make-header-decoder decode-header-block!
                                              encode-response-head response-head-bound))
  #:use-module ((plucky http error) #:select (http-error? http-error-status))
  #:use-module (plucky http response)
  #:use-module (plucky server transport)
  #:use-module ((plucky server probe) #:select (observe-untimed!))
  #:use-module (plucky server connection)
  #:use-module ((plucky server watch) #:select (loop-call-after! loop-cancel-timer!))
  #:use-module ((plucky server suspend)
                #:select (suspendable? make-request-cancelled leave-suspendable!))
  #:use-module ((plucky server watchdog) #:select (handler-call))
  #:use-module ((plucky server pool) #:select (report-handler-error))
  #:use-module ((ice-9 exceptions) #:select (make-exception
                                             make-exception-with-message))
  #:use-module (plucky server respond)
  #:re-export (http2-preface?)
  #:export (start-http2!
            http2-ready!
            http2-drain!
            http2-stop!
            http2-limits))

;;;
;;; Limits
;;;

;; Each limit declared once: what the connection advertises and what this
;; module counts.  Per connection.
(define http2-limits
  '((max-concurrent-streams . 100)      ; SETTINGS_MAX_CONCURRENT_STREAMS
    (initial-window-size . 1048576)     ; bytes, per stream and the connection, for request bodies
    (header-table-size . 4096)          ; bytes of HPACK dynamic table
    (max-header-list-size . 65536)      ; bytes, names + values + 32 each
    (max-header-block . 131072)         ; bytes of one HPACK-coded block
    (max-continuations . 8)             ; CONTINUATION frames per header block
    (resets-per-second . 100)           ; RST_STREAM from the client, sustained
    (reset-burst . 200)                 ;   and at once
    (pings-per-second . 100)            ; PING and SETTINGS frames, sustained
    (ping-burst . 200)                  ;   and at once
    (stream-backlog . 16777216)))       ; bytes a streamed body may run ahead

(define-syntax-rule (limit name) (assq-ref http2-limits 'name))

;; RFC 9113 §6: frame types, flags, settings, error codes
(define DATA 0) (define HEADERS 1) (define PRIORITY 2) (define RST_STREAM 3)
(define SETTINGS 4) (define PUSH_PROMISE 5) (define PING 6) (define GOAWAY 7)
(define WINDOW_UPDATE 8) (define CONTINUATION 9)
(define END_STREAM 1) (define ACK 1) (define END_HEADERS 4) (define PADDED 8)
(define PRIORITY-FLAG 32)
(define NO_ERROR 0) (define PROTOCOL_ERROR 1) (define INTERNAL_ERROR 2)
(define FLOW_CONTROL_ERROR 3) (define STREAM_CLOSED 5) (define FRAME_SIZE_ERROR 6)
(define REFUSED_STREAM 7) (define CANCEL 8) (define COMPRESSION_ERROR 9)
(define ENHANCE_YOUR_CALM 11)

(define default-window 65535)           ; RFC 9113 §6.9.2
(define max-window #x7fffffff)
(define max-frame 16384)                ; SETTINGS_MAX_FRAME_SIZE, ours (the default)

;;;
;;; Records
;;;

(define-record-type <h2>
  (%make-h2 loop conn streams ready resumed out sent draining? closed?
            busy? wake-timer check-timer last-progress resets reset-ms pings
            ping-ms answer spans heads
            pending preface decoder table-update? last-id fatal? open senders
            send-window recv-window peer-window peer-frame
            block-id block-flags block continuations scratch)
  h2?
  (loop h2-loop)
  (conn h2-conn)
  (streams h2-streams)                  ; hashv: stream id -> <h2-stream>
  (ready h2-ready set-h2-ready!)        ; streams to call the handler of, newest first
  (resumed h2-resumed set-h2-resumed!)  ; ((stream . thunk) …), newest first
  (out h2-out)                          ; <output>: bytes for the socket
  (sent h2-sent set-h2-sent!)           ; of OUT, bytes already written
  (draining? h2-draining? set-h2-draining!) ; GOAWAY sent or received: no new stream
  (closed? h2-closed? set-h2-closed!)
  (busy? h2-busy? set-h2-busy!)         ; inside `process!'
  (wake-timer h2-wake-timer set-h2-wake-timer!) ; #f, or a timer of no delay
  (check-timer h2-check-timer set-h2-check-timer!) ; the idle/stall timer
  (last-progress h2-last-progress set-h2-last-progress!) ; ms: answer bytes left
  ;; token buckets (count, ms of the last refill)
  (resets h2-resets set-h2-resets!)
  (reset-ms h2-reset-ms set-h2-reset-ms!)
  (pings h2-pings set-h2-pings!)
  (ping-ms h2-ping-ms set-h2-ping-ms!)
  ;; reused: a response's head; its fields' spans
  (answer h2-answer)                    ; <output>
  (spans h2-spans set-h2-spans!)        ; bytevector, for `response-head-spans'
  (heads h2-heads set-h2-heads!)        ; <request-head>s free for new streams
  (pending h2-pending)                  ; <output>: the start of a frame not all read
  (preface h2-preface set-h2-preface!)  ; bytes of the preface still to see, or
                                        ; 'settings: a SETTINGS frame must come next
  (decoder h2-decoder)                  ; <header-decoder> (plucky http hpack): requests
  ;; the client changed SETTINGS_HEADER_TABLE_SIZE: the next response
  ;; block says our table's size, 0 (we never index)
  (table-update? h2-table-update? set-h2-table-update!)
  (last-id h2-last-id set-h2-last-id!)  ; the highest stream id the client opened
  (fatal? h2-fatal? set-h2-fatal!)      ; a connection error: GOAWAY queued, read no more
  (open h2-open set-h2-open!)           ; streams in STREAMS
  (senders h2-senders set-h2-senders!)  ; streams with a body to send, oldest first
  ;; flow control (§6.9): what we may send, what the client may
  (send-window h2-send-window set-h2-send-window!)
  (recv-window h2-recv-window set-h2-recv-window!)
  (peer-window h2-peer-window set-h2-peer-window!) ; its SETTINGS_INITIAL_WINDOW_SIZE
  (peer-frame h2-peer-frame set-h2-peer-frame!)    ; its SETTINGS_MAX_FRAME_SIZE
  ;; a header block being received in HEADERS and CONTINUATION frames
  (block-id h2-block-id set-h2-block-id!) ; 0: none
  (block-flags h2-block-flags set-h2-block-flags!)
  (block h2-block)                      ; <output>
  (continuations h2-continuations set-h2-continuations!)
  (scratch h2-scratch set-h2-scratch!)) ; bytevector: a response's HPACK block

(define-record-type <h2-stream>
  (%make-h2-stream id state head field-bytes request request1 body refusal k token undo
                   cancelled timer source offset end queue eof? deferred? port
                   code bytes started send-window recv-window remote-done?)
  h2-stream?
  (id stream-id)
  ;; headers | body | ready | running | suspended | streaming | answered | closed
  (state stream-state set-stream-state!)
  (head stream-head set-stream-head!)         ; #f, or the <request-head> its fields make
  (field-bytes stream-field-bytes set-stream-field-bytes!) ; as SETTINGS_MAX_HEADER_LIST_SIZE counts
  (request stream-request set-stream-request!) ; the (web request), version 2.0
  (request1 stream-request1 set-stream-request1!) ; the same, version 1.1, to write answers by
  (body stream-body set-stream-body!)         ; #f, or an <output> collecting it
  ;; #f, or the status to answer instead, or 'malformed (RST_STREAM
  ;; PROTOCOL_ERROR, RFC 9113 §8.1.1)
  (refusal stream-refusal set-stream-refusal!)
  ;; the handler or body procedure that waits: its continuation, the
  ;; wait's mark, the thunk that undoes the wait
  (k stream-k set-stream-k!)
  (token stream-token set-stream-token!)
  (undo stream-undo set-stream-undo!)
  (cancelled stream-cancelled set-stream-cancelled!) ; #f | client-gone | timeout | stopping
  (timer stream-timer set-stream-timer!)      ; #f, or its handler timeout's timer
  ;; the answer's body as it goes out: SOURCE a bytevector [OFFSET,
  ;; END), or a <file-body>, or 'queue (a streamed body: QUEUE,
  ;; bytevectors oldest first, EOF? once its port is closed)
  (source stream-source set-stream-source!)
  (offset stream-offset set-stream-offset!)
  (end stream-end set-stream-end!)
  (queue stream-queue set-stream-queue!)
  (eof? stream-eof? set-stream-eof!)
  (deferred? stream-deferred? set-stream-deferred!) ; a streamed body with nothing queued
  (port stream-port set-stream-port!)         ; a streamed body's port
  (code stream-code set-stream-code!)         ; status answered
  (bytes stream-bytes set-stream-bytes!)      ; body bytes sent
  (started stream-started set-stream-started!) ; clock ns of the handler call, for an observer
  (send-window stream-send-window set-stream-send-window!) ; bytes we may send
  (recv-window stream-recv-window set-stream-recv-window!) ; bytes the client may
  (remote-done? stream-remote-done? set-stream-remote-done!)) ; END_STREAM received

(define (make-h2-stream h2 id)
  (%make-h2-stream id 'headers (take-request-head! h2) 0 #f #f #f #f #f #f #f #f #f #f 0 0 '()
                   #f #f #f 0 0 #f (h2-peer-window h2) (limit initial-window-size) #f))

;;;
;;; Where a connection becomes HTTP/2
;;;

(define (start-http2! loop conn bv start end)
  "Make CONN, whose client sent the bytes BV [START, END) beginning with
the HTTP/2 connection preface, an HTTP/2 connection of LOOP, and serve
what those bytes ask; return nothing."
  (let* ((now (loop-now loop))
         (h2 (%make-h2 loop conn (make-hash-table) '() '() (make-output 16384) 0
                       #f #f #f #f #f now (limit reset-burst) now (limit ping-burst) now
                       (make-output 1024) (make-bytevector 256) '()
                       (make-output 1024) (bytevector-length connection-preface)
                       (make-header-decoder (limit header-table-size))
                       #f
                       0 #f 0 '()
                       default-window (limit initial-window-size) default-window max-frame
                       0 0 (make-output 1024) 0 (make-bytevector 1024))))
    (set-connection-input! conn #f)
    (set-connection-state! conn 'h2)
    (set-connection-body! conn h2)
    ;; The connection's own deadline is never: its timers are here, and
    ;; the sweep would close it without freeing its coders.
    (set-connection-deadline! conn never)
    (put-settings! h2)
    (receive! h2 bv start end)
    (process! h2)
    (values)))

;;;
;;; Frames out (each into OUT, whole)
;;;

(define (put-frame! h2 type flags id bv start count)
  (let* ((out (h2-out h2))
         (fill (output-reserve! out (+ 9 count)))
         (bytes (output-bytes out)))
    (put-frame-head! bytes fill count type flags id)
    (when (> count 0) (bytevector-copy! bv start bytes (+ fill 9) count))
    (set-output-fill! out (+ fill 9 count))))

(define (put-u32-frame! h2 type id n)
  (let* ((out (h2-out h2))
         (fill (output-reserve! out 13))
         (bytes (output-bytes out)))
    (put-frame-head! bytes fill 4 type 0 id)
    (bytevector-u32-set! bytes (+ fill 9) n (endianness big))
    (set-output-fill! out (+ fill 13))))

(define (put-settings! h2)
  ;; Ours, and the connection's window raised to a stream's.
  (let ((entries (make-bytevector 18)))
    (for-each (lambda (i id value)
                (bytevector-u16-set! entries i id (endianness big))
                (bytevector-u32-set! entries (+ i 2) value (endianness big)))
              '(0 6 12)
              '(3 4 6)                  ; MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE,
                                        ; MAX_HEADER_LIST_SIZE
              (list (limit max-concurrent-streams) (limit initial-window-size)
                    (limit max-header-list-size)))
    (put-frame! h2 SETTINGS 0 0 entries 0 18)
    (put-u32-frame! h2 WINDOW_UPDATE 0 (- (limit initial-window-size) default-window))))

(define (put-goaway! h2 code)
  (let ((payload (make-bytevector 8)))
    (bytevector-u32-set! payload 0 (h2-last-id h2) (endianness big))
    (bytevector-u32-set! payload 4 code (endianness big))
    (put-frame! h2 GOAWAY 0 0 payload 0 8)))

(define (connection-error! h2 code)
  ;; End the connection: a GOAWAY of CODE, nothing more read.
  (unless (h2-fatal? h2)
    (set-h2-fatal! h2 #t)
    (set-h2-draining! h2 #t)
    (put-goaway! h2 code)))

(define (calm-down! h2)
  ;; The client abuses the protocol.
  (connection-error! h2 ENHANCE_YOUR_CALM))

(define (take-token! h2 count set-count! since set-since! burst per-second)
  ;; A token bucket of BURST refilled at PER-SECOND.  -> #f when empty
  (let* ((now (loop-now (h2-loop h2)))
         (refill (quotient (* (- now (since h2)) per-second) 1000))
         (tokens (min burst (+ (count h2) refill))))
    (when (> refill 0) (set-since! h2 now))
    (and (> tokens 0)
         (begin (set-count! h2 (- tokens 1)) #t))))

(define (stream-ref h2 id)
  (hashv-ref (h2-streams h2) id))

;;;
;;; Frames in
;;;

(define (receive! h2 bv start end)
  ;; Read the frames in BV [START, END), after those PENDING holds the
  ;; start of; keep what is cut.
  (let ((pending (h2-pending h2)))
    (if (zero? (output-fill pending))
        (let ((used (read-frames! h2 bv start end)))
          (when (and (< used end) (not (h2-fatal? h2)))
            (output-put-slice! pending bv used (- end used))))
        (begin
          (output-put-slice! pending bv start (- end start))
          (let* ((bytes (output-bytes pending))
                 (fill (output-fill pending))
                 (used (read-frames! h2 bytes 0 fill)))
            (bytevector-copy! bytes used bytes 0 (- fill used))
            (set-output-fill! pending (- fill used)))))))

(define (read-frames! h2 bv start end)
  ;; -> the index of the first byte not used
  (let lp ((i start))
    (cond
     ((h2-fatal? h2) end)
     ((integer? (h2-preface h2))
      (let* ((left (h2-preface h2))
             (at (- (bytevector-length connection-preface) left))
             (n (min left (- end i))))
        (if (let check ((k 0))
              (or (= k n)
                  (and (= (bytevector-u8-ref bv (+ i k))
                          (bytevector-u8-ref connection-preface (+ at k)))
                       (check (+ k 1)))))
            (begin
              (set-h2-preface! h2 (if (= n left) 'settings (- left n)))
              (lp (+ i n)))
            (begin (connection-error! h2 PROTOCOL_ERROR) end))))
     ((< (- end i) 9) i)
     (else
      (let ((length (frame-length bv i)))
        (cond
         ((> length max-frame) (connection-error! h2 FRAME_SIZE_ERROR) end)
         ((< (- end i 9) length) i)
         (else
          (read-frame! h2 bv i length)
          (lp (+ i 9 length)))))))))

(define (read-frame! h2 bv i length)
  (let ((type (frame-type bv i))
        (flags (frame-flags bv i))
        (id (frame-stream-id bv i))
        (p (+ i 9)))
    (cond
     ((eq? (h2-preface h2) 'settings)
      ;; §3.4: the preface ends with a SETTINGS frame
      (if (and (= type SETTINGS) (not (logtest flags ACK)))
          (begin (set-h2-preface! h2 #f)
                 (on-settings! h2 bv p length flags id))
          (connection-error! h2 PROTOCOL_ERROR)))
     ((not (zero? (h2-block-id h2)))
      ;; §6.10: a header block's frames come one after another
      (if (and (= type CONTINUATION) (= id (h2-block-id h2)))
          (on-continuation! h2 bv p length flags)
          (connection-error! h2 PROTOCOL_ERROR)))
     ((= type HEADERS) (on-headers! h2 bv p length flags id))
     ((= type DATA) (on-data! h2 bv p length flags id))
     ((= type WINDOW_UPDATE) (on-window-update! h2 bv p length id))
     ((= type SETTINGS) (on-settings! h2 bv p length flags id))
     ((= type PING) (on-ping! h2 bv p length flags id))
     ((= type RST_STREAM) (on-rst-stream! h2 bv p length id))
     ((= type GOAWAY)
      (if (zero? id)
          (set-h2-draining! h2 #t)
          (connection-error! h2 PROTOCOL_ERROR)))
     ((= type PRIORITY)                 ; ignored, as §5.3.2 allows
      (when (zero? id) (connection-error! h2 PROTOCOL_ERROR)))
     ((or (= type PUSH_PROMISE) (= type CONTINUATION))
      (connection-error! h2 PROTOCOL_ERROR))
     (else #t))))                       ; an unknown type: ignored (§4.1)

(define (payload-bounds h2 bv p length flags)
  ;; -> the start and end of a HEADERS or DATA frame's payload without
  ;; its padding and priority, or #f (a connection error queued)
  (let* ((pad (if (logtest flags PADDED)
                  (if (> length 0) (bytevector-u8-ref bv p) length)
                  0))
         (start (+ p (if (logtest flags PADDED) 1 0)))
         (end (- (+ p length) pad)))
    (if (> start end)
        (begin (connection-error! h2 PROTOCOL_ERROR) (values #f #f))
        (values start end))))

(define (on-headers! h2 bv p length flags id)
  (if (or (zero? id) (even? id))
      (connection-error! h2 PROTOCOL_ERROR)
      (call-with-values (lambda () (payload-bounds h2 bv p length flags))
        (lambda (start end)
          (when start
            (let ((start (if (logtest flags PRIORITY-FLAG) (+ start 5) start)))
              (cond
               ((> start end) (connection-error! h2 PROTOCOL_ERROR))
               ((logtest flags END_HEADERS) (header-block! h2 id flags bv start end))
               (else
                (let ((block (h2-block h2)))
                  (output-reset! block)
                  (output-put-slice! block bv start (- end start))
                  (set-h2-block-id! h2 id)
                  (set-h2-block-flags! h2 flags)
                  (set-h2-continuations! h2 0))))))))))

(define (on-continuation! h2 bv p length flags)
  (let ((block (h2-block h2))
        (n (+ 1 (h2-continuations h2))))
    (set-h2-continuations! h2 n)
    (if (or (> n (limit max-continuations))
            (> (+ length (output-fill block)) (limit max-header-block)))
        ;; CONTINUATION flood (CVE-2024-27316 family)
        (calm-down! h2)
        (begin
          (output-put-slice! block bv p length)
          (when (logtest flags END_HEADERS)
            (let ((id (h2-block-id h2)))
              (set-h2-block-id! h2 0)
              (header-block! h2 id (h2-block-flags h2)
                             (output-bytes block) 0 (output-fill block))))))))

(define (ignore-field name name-length value value-length) #t)

(define (header-block! h2 id flags bv start end)
  ;; The whole header block BV [START, END) of stream ID: a new
  ;; request, or a request's trailers, or one to decode only (the HPACK
  ;; table stays in step with the client's).
  (let ((stream (stream-ref h2 id)))
    (cond
     (stream
      ;; trailers: accepted, not kept (RFC 9110 §6.5.1 lets a recipient
      ;; drop fields it does not merge); they end the stream
      (decode! h2 bv start end ignore-field)
      (cond
       ((stream-remote-done? stream) (reset-stream! h2 stream STREAM_CLOSED))
       ((not (logtest flags END_STREAM)) (reset-stream! h2 stream PROTOCOL_ERROR))
       (else (remote-end! h2 stream))))
     ((or (<= id (h2-last-id h2)) (h2-draining? h2))
      ;; a stream closed, or opened after our GOAWAY
      (decode! h2 bv start end ignore-field))
     ((>= (h2-open h2) (limit max-concurrent-streams))
      (set-h2-last-id! h2 id)
      (decode! h2 bv start end ignore-field)
      (put-u32-frame! h2 RST_STREAM id REFUSED_STREAM))
     (else
      (let ((stream (make-h2-stream h2 id)))
        (set-h2-last-id! h2 id)
        (hashv-set! (h2-streams h2) id stream)
        (set-h2-open! h2 (+ 1 (h2-open h2)))
        (decode! h2 bv start end
                 (lambda (name name-length value value-length)
                   (on-field! stream name name-length value value-length)))
        (set-stream-state! stream 'body)
        (when (logtest flags END_STREAM)
          (remote-end! h2 stream)))))))

(define (decode! h2 bv start end emit)
  (unless (decode-header-block! (h2-decoder h2) bv start end emit)
    (connection-error! h2 COMPRESSION_ERROR)))

(define (on-field! stream name name-length value value-length)
  ;; A field of STREAM's request, in the bytevectors NAME and VALUE.
  ;; RFC 7541 §4.1's size, as SETTINGS_MAX_HEADER_LIST_SIZE counts
  (let ((size (+ (stream-field-bytes stream) 32 name-length value-length)))
    (set-stream-field-bytes! stream size)
    (cond
     ((stream-refusal stream) #t)
     ((> size (limit max-header-list-size))
      ;; Counted on, not kept: the block is decoded to its end (the
      ;; HPACK table must stay in step), then answered 431.
      (set-stream-refusal! stream 431))
     ((not (request-head-field! (stream-head stream) name name-length value value-length))
      (set-stream-refusal! stream 'malformed)))))

(define (request-complete! h2 stream)
  (when (memq (stream-state stream) '(headers body))
    (set-stream-state! stream 'ready)
    (set-h2-ready! h2 (cons stream (h2-ready h2)))))

(define (remote-end! h2 stream)
  ;; END_STREAM from the client: the request is whole.
  (set-stream-remote-done! stream #t)
  (request-complete! h2 stream))

(define (on-data! h2 bv p length flags id)
  (let ((stream (stream-ref h2 id))
        (window (- (h2-recv-window h2) length)))
    (cond
     ((zero? id) (connection-error! h2 PROTOCOL_ERROR))
     ((< window 0) (connection-error! h2 FLOW_CONTROL_ERROR))
     ((and (not stream) (> id (h2-last-id h2))) (connection-error! h2 PROTOCOL_ERROR))
     (else
      ;; The connection's window, credited back at half way.
      (if (< window (quotient (limit initial-window-size) 2))
          (begin
            (put-u32-frame! h2 WINDOW_UPDATE 0 (- (limit initial-window-size) window))
            (set-h2-recv-window! h2 (limit initial-window-size)))
          (set-h2-recv-window! h2 window))
      (call-with-values (lambda () (payload-bounds h2 bv p length flags))
        (lambda (start end)
          (cond
           ((not start) #t)
           ((not stream) #t)            ; a stream closed meanwhile
           ((stream-remote-done? stream) (reset-stream! h2 stream STREAM_CLOSED))
           ((< (- (stream-recv-window stream) length) 0)
            (reset-stream! h2 stream FLOW_CONTROL_ERROR))
           (else
            (stream-data! h2 stream bv start end length)
            (when (logtest flags END_STREAM)
              (remote-end! h2 stream))))))))))

(define (stream-data! h2 stream bv start end length)
  (let ((window (- (stream-recv-window stream) length)))
    (set-stream-recv-window! stream window)
    (unless (stream-refusal stream)
      (let ((body (or (stream-body stream)
                      (let ((body (make-output 4096)))
                        (set-stream-body! stream body)
                        body)))
            (max-body (settings-max-body (loop-settings (h2-loop h2)))))
        (if (> (+ (output-fill body) (- end start)) max-body)
            (begin
              ;; answered 413 at once, the rest of the body refused
              ;; (RST_STREAM NO_ERROR after the answer)
              (set-stream-refusal! stream 413)
              (set-stream-body! stream #f)
              (request-complete! h2 stream))
            (begin
              (output-put-slice! body bv start (- end start))
              (when (< window (quotient (limit initial-window-size) 2))
                (put-u32-frame! h2 WINDOW_UPDATE (stream-id stream)
                                (- (limit initial-window-size) window))
                (set-stream-recv-window! stream (limit initial-window-size)))))))))

(define (on-window-update! h2 bv p length id)
  (if (not (= length 4))
      (connection-error! h2 FRAME_SIZE_ERROR)
      (let ((increment (read-u31 bv p)))
        (if (zero? id)
            (let ((window (+ (h2-send-window h2) increment)))
              (if (or (zero? increment) (> window max-window))
                  (connection-error! h2 (if (zero? increment) PROTOCOL_ERROR FLOW_CONTROL_ERROR))
                  (set-h2-send-window! h2 window)))
            (let ((stream (stream-ref h2 id)))
              (cond
               ((> id (h2-last-id h2)) (connection-error! h2 PROTOCOL_ERROR))
               ((not stream) #t)
               ((zero? increment) (reset-stream! h2 stream PROTOCOL_ERROR))
               (else
                (let ((window (+ (stream-send-window stream) increment)))
                  (if (> window max-window)
                      (reset-stream! h2 stream FLOW_CONTROL_ERROR)
                      (set-stream-send-window! stream window))))))))))

(define (on-settings! h2 bv p length flags id)
  (cond
   ((not (zero? id)) (connection-error! h2 PROTOCOL_ERROR))
   ((logtest flags ACK)
    (unless (zero? length) (connection-error! h2 FRAME_SIZE_ERROR)))
   ((not (zero? (remainder length 6))) (connection-error! h2 FRAME_SIZE_ERROR))
   ((not (take-token! h2 h2-pings set-h2-pings! h2-ping-ms set-h2-ping-ms!
                      (limit ping-burst) (limit pings-per-second)))
    (calm-down! h2))
   (else
    (let lp ((i p))
      (when (and (< i (+ p length)) (not (h2-fatal? h2)))
        (setting! h2 (bytevector-u16-ref bv i (endianness big))
                  (bytevector-u32-ref bv (+ i 2) (endianness big)))
        (lp (+ i 6))))
    (unless (h2-fatal? h2)
      (put-frame! h2 SETTINGS ACK 0 bv 0 0)))))

(define (setting! h2 id value)
  (case id
    ((1) (set-h2-table-update! h2 #t))  ; HEADER_TABLE_SIZE
    ((2) (unless (<= value 1) (connection-error! h2 PROTOCOL_ERROR))) ; ENABLE_PUSH
    ((4)                                ; INITIAL_WINDOW_SIZE: every stream's changes by as much
     (if (> value max-window)
         (connection-error! h2 FLOW_CONTROL_ERROR)
         (let ((delta (- value (h2-peer-window h2))))
           (set-h2-peer-window! h2 value)
           (hash-for-each (lambda (id stream)
                            (set-stream-send-window! stream (+ delta (stream-send-window stream))))
                          (h2-streams h2)))))
    ((5)                                ; MAX_FRAME_SIZE
     (if (<= 16384 value 16777215)
         (set-h2-peer-frame! h2 value)
         (connection-error! h2 PROTOCOL_ERROR)))
    (else #t)))

(define (on-ping! h2 bv p length flags id)
  (cond
   ((not (= length 8)) (connection-error! h2 FRAME_SIZE_ERROR))
   ((not (zero? id)) (connection-error! h2 PROTOCOL_ERROR))
   ((logtest flags ACK) #t)
   ((take-token! h2 h2-pings set-h2-pings! h2-ping-ms set-h2-ping-ms!
                 (limit ping-burst) (limit pings-per-second))
    (put-frame! h2 PING ACK 0 bv p 8))
   (else (calm-down! h2))))

(define (on-rst-stream! h2 bv p length id)
  (cond
   ((not (= length 4)) (connection-error! h2 FRAME_SIZE_ERROR))
   ((or (zero? id) (> id (h2-last-id h2))) (connection-error! h2 PROTOCOL_ERROR))
   ;; Rapid reset (CVE-2023-44487): each reset stream may have cost a
   ;; handler call; past the bucket the connection ends.
   ((not (take-token! h2 h2-resets set-h2-resets! h2-reset-ms set-h2-reset-ms!
                      (limit reset-burst) (limit resets-per-second)))
    (calm-down! h2))
   (else
    (let ((stream (stream-ref h2 id)))
      (when stream (close-stream! h2 stream))))))

(define (close-stream! h2 stream)
  ;; STREAM is done with, both ways: forget it; a handler that waits is
  ;; given up.
  (unless (eq? (stream-state stream) 'closed)
    (hashv-remove! (h2-streams h2) (stream-id stream))
    (set-h2-open! h2 (- (h2-open h2) 1))
    (set-h2-senders! h2 (delq stream (h2-senders h2)))
    (let ((state (stream-state stream)))
      (set-stream-state! stream 'closed)
      (close-source! stream)
      (when (memq state '(suspended streaming))
        (cancel-stream! h2 stream 'client-gone)))))

(define (close-source! stream)
  (let ((source (stream-source stream)))
    (when (file-body? source)
      (close-file-body! source))
    (set-stream-source! stream #f)
    (set-stream-queue! stream '())))

(define (reset-stream! h2 stream code)
  (put-u32-frame! h2 RST_STREAM (stream-id stream) code)
  (close-stream! h2 stream))

(define (local-end! h2 stream)
  ;; Our END_STREAM is queued: the stream closes, at once if the client
  ;; has sent all, else with RST_STREAM NO_ERROR (RFC 9113 §8.1).
  (set-stream-source! stream #f)
  (if (stream-remote-done? stream)
      (close-stream! h2 stream)
      (reset-stream! h2 stream NO_ERROR)))

;;;
;;; DATA out, as the windows allow
;;;

(define (send-data! h2)
  ;; One DATA frame per stream that has bytes and window, round after
  ;; round, until OUT holds a batch.  -> #t when a frame was queued
  (let lp ((streams (h2-senders h2)) (any? #f))
    (cond
     ((or (>= (output-fill (h2-out h2)) flush-batch)
          (<= (h2-send-window h2) 0)
          (h2-fatal? h2))
      any?)
     ((pair? streams)
      (let ((sent? (send-frame! h2 (car streams))))
        (lp (cdr streams) (or any? sent?))))
     ((and any? (pair? (h2-senders h2))) (lp (h2-senders h2) #f))
     (else any?))))

(define (send-frame! h2 stream)
  ;; -> #t when a DATA frame of STREAM was queued
  (let* ((source (stream-source stream))
         (window (min (h2-send-window h2) (stream-send-window stream) (h2-peer-frame h2)))
         (out (h2-out h2)))
    (define (frame! count last?)
      ;; the head of a DATA frame of COUNT bytes, whose bytes the caller
      ;; has put after it
      (let ((fill (output-fill out)))
        (put-frame-head! (output-bytes out) fill count DATA (if last? END_STREAM 0)
                         (stream-id stream))
        (set-output-fill! out (+ fill 9 count))
        (set-h2-send-window! h2 (- (h2-send-window h2) count))
        (set-stream-send-window! stream (- (stream-send-window stream) count))
        (set-stream-bytes! stream (+ count (stream-bytes stream)))
        (set-h2-last-progress! h2 (loop-now (h2-loop h2)))
        (when last?
          (when (file-body? source) (close-file-body! source))
          (local-end! h2 stream))
        #t))
    (cond
     ((bytevector? source)
      (let* ((offset (stream-offset stream))
             (count (min window (- (stream-end stream) offset))))
        (and (> count 0)
             (let ((fill (output-reserve! out (+ 9 count))))
               (bytevector-copy! source offset (output-bytes out) (+ fill 9) count)
               (set-stream-offset! stream (+ offset count))
               (frame! count (= (+ offset count) (stream-end stream)))))))
     ((file-body? source)
      (let* ((offset (stream-offset stream))
             (count (min window (- (stream-end stream) offset))))
        (and (> count 0)
             (let* ((fill (output-reserve! out (+ 9 count)))
                    (n (fd-pread (file-body-fd source) (output-address out) (+ fill 9)
                                 count offset)))
               (if (<= n 0)
                   (begin (reset-stream! h2 stream INTERNAL_ERROR) #f)
                   (begin
                     (set-stream-offset! stream (+ offset n))
                     (frame! n (= (+ offset n) (stream-end stream)))))))))
     ((eq? source 'queue)
      (let ((queue (stream-queue stream)))
        (cond
         ((pair? queue)
          (let* ((bv (car queue))
                 (offset (stream-offset stream))
                 (count (min window (- (bytevector-length bv) offset))))
            (and (> count 0)
                 (let ((fill (output-reserve! out (+ 9 count))))
                   (bytevector-copy! bv offset (output-bytes out) (+ fill 9) count)
                   (if (= (+ offset count) (bytevector-length bv))
                       (begin (set-stream-queue! stream (cdr queue))
                              (set-stream-offset! stream 0))
                       (set-stream-offset! stream (+ offset count)))
                   (frame! count (and (stream-eof? stream) (null? (stream-queue stream))))))))
         ((stream-eof? stream)
          (output-reserve! out 9)
          (frame! 0 #t))
         (else (set-stream-deferred! stream #t) #f))))
     (else
      (set-h2-senders! h2 (delq stream (h2-senders h2)))
      #f))))

;;;
;;; Reading and writing the socket
;;;

(define (http2-ready! loop conn)
  "Serve CONN, an HTTP/2 connection of LOOP whose socket is readable or
writable: send what waits, read what came, answer.  Return nothing."
  (let ((h2 (connection-body conn)))
    (unless (h2-closed? h2)
      (let ((transport (connection-transport conn))
            (fd (connection-fd conn)))
        (let read-more ((rounds 0))
          (unless (h2-fatal? h2)
            (let ((n ((transport-read transport) fd (loop-input-address loop) 0 input-size)))
              (cond
               ((> n 0)
                (receive! h2 (loop-input loop) 0 n)
                (when (< rounds 16) (read-more (+ rounds 1))))
               ((= n (- errno-EAGAIN)) #t)
               (else (close-h2! h2))))))
        (unless (h2-closed? h2)
          (process! h2))))
    (values)))

(define (write-out! h2)
  ;; Write what OUT holds.  -> #t when all of it is out, 'again when the
  ;; socket took less, #f when the client is gone
  (let* ((conn (h2-conn h2))
         (out (h2-out h2))
         (fill (output-fill out)))
    (let lp ()
      (let ((sent (h2-sent h2)))
        (if (= sent fill)
            (begin (output-reset! out) (set-h2-sent! h2 0) #t)
            (let ((n ((transport-write (connection-transport conn))
                      (connection-out-fd conn) (output-address out) sent (- fill sent))))
              (cond
               ((> n 0)
                (set-h2-sent! h2 (+ sent n))
                (set-h2-last-progress! h2 (loop-now (h2-loop h2)))
                (lp))
               ((= n (- errno-EAGAIN)) 'again)
               (else #f))))))))

(define flush-batch
  ;; bytes of frames queued before they are written: a write(2) per
  ;; batch, not per frame
  65536)

(define (flush! h2)
  ;; Send what is queued and the DATA the windows allow, as the socket
  ;; takes it.  -> #f when the client is gone
  (let lp ()
    (send-data! h2)
    (let ((written (write-out! h2)))
      (cond
       ((not written) #f)
       ((eq? written 'again) #t)
       ((send-data! h2) (lp))
       (else #t)))))

(define (process! h2)
  ;; After input or a resumption: run the handlers that can run, send,
  ;; and decide whether the connection stays.
  (unless (h2-busy? h2)
    (set-h2-busy! h2 #t)
    (let lp ((round 0))
      (run-streams! h2)
      (run-resumed! h2)
      (when (and (or (pair? (h2-ready h2)) (pair? (h2-resumed h2))) (< round 64))
        (lp (+ round 1))))
    (set-h2-busy! h2 #f)
    (let ((conn (h2-conn h2))
          (loop (h2-loop h2)))
      (cond
       ((not (flush! h2)) (close-h2! h2))
       ((and (zero? (output-fill (h2-out h2)))
             (or (h2-fatal? h2)
                 (and (h2-draining? h2) (zero? (h2-open h2)))))
        (close-h2! h2))
       (else
        (watch! loop conn (if (or (> (output-fill (h2-out h2)) 0)
                                  ;; TLS: a read waits for the socket to
                                  ;; take the session's own bytes
                                  ((transport-wants-write? (connection-transport conn))
                                   (connection-fd conn)))
                              (logior EPOLLIN EPOLLOUT)
                              EPOLLIN))
        (arm-check! h2))))))

(define (active-streams h2) (h2-open h2))

;;;
;;; Idle connections and stalled answers
;;;

(define (arm-check! h2)
  ;; One timer per connection, at the earliest of its deadlines.
  (unless (h2-check-timer h2)
    (let* ((settings (loop-settings (h2-loop h2)))
           (ms (if (zero? (active-streams h2))
                   (settings-keep-alive-ms settings)
                   (settings-write-ms settings))))
      (set-h2-check-timer! h2 (loop-call-after! ms (lambda () (check! h2)))))))

(define (stalled? h2)
  ;; Is an answer waiting for the client: bytes the socket has not
  ;; taken, or a body with bytes a window at zero holds back?
  (or (> (output-fill (h2-out h2)) 0)
      (let lp ((streams (h2-senders h2)))
        (and (pair? streams)
             (or (and (not (stream-deferred? (car streams)))
                      (or (<= (h2-send-window h2) 0)
                          (<= (stream-send-window (car streams)) 0)))
                 (lp (cdr streams)))))))

(define (check! h2)
  (set-h2-check-timer! h2 #f)
  (unless (h2-closed? h2)
    (let* ((loop (h2-loop h2))
           (settings (loop-settings loop))
           (now (loop-now loop))
           (quiet (- now (h2-last-progress h2))))
      (cond
       ((and (zero? (active-streams h2))
             (>= quiet (settings-keep-alive-ms settings)))
        (goaway-and-close! h2 NO_ERROR))
       ((and (stalled? h2) (>= quiet (settings-write-ms settings)))
        ;; The client takes none of its answers: a zero window held, or
        ;; a socket not read.
        (goaway-and-close! h2 ENHANCE_YOUR_CALM))
       (else
        (unless (stalled? h2) (set-h2-last-progress! h2 now))
        (arm-check! h2))))))

(define (goaway-and-close! h2 code)
  (connection-error! h2 code)
  (flush! h2)
  (close-h2! h2))

(define (close-h2! h2)
  ;; Give up every stream (their handlers unwind), free the coders,
  ;; close the connection.
  (unless (h2-closed? h2)
    (set-h2-closed! h2 #t)
    (let ((streams (hash-fold (lambda (id stream acc) (cons stream acc)) '()
                              (h2-streams h2))))
      (for-each (lambda (stream) (close-stream! h2 stream)) streams))
    (run-resumed! h2)
    (when (h2-check-timer h2) (loop-cancel-timer! (h2-check-timer h2)))
    (when (h2-wake-timer h2) (loop-cancel-timer! (h2-wake-timer h2)))
    (close-connection! (h2-loop h2) (h2-conn h2))))

(define (http2-drain! loop conn)
  "Tell the client of CONN, an HTTP/2 connection of LOOP, that it is to
open no more streams (GOAWAY): those it opened are answered, then the
connection closes.  Return nothing."
  (let ((h2 (connection-body conn)))
    (unless (or (h2-closed? h2) (h2-draining? h2))
      (set-h2-draining! h2 #t)
      (put-goaway! h2 NO_ERROR)
      (process! h2))
    (values)))

(define (http2-stop! loop conn)
  "Give up every stream of CONN, an HTTP/2 connection of LOOP, unwinding
the handlers that wait, and close it; return nothing."
  (let ((h2 (connection-body conn)))
    (unless (h2-closed? h2)
      (connection-error! h2 NO_ERROR)
      (flush! h2)
      (hash-for-each (lambda (id stream)
                       (when (memq (stream-state stream) '(suspended streaming))
                         (cancel-stream! h2 stream 'stopping)))
                     (h2-streams h2))
      (close-h2! h2))
    (values)))

;;;
;;; Requests
;;;

(define (parse-stream-request h2 stream)
  ;; -> the request, version 2.0, or the status to refuse it with
  ;; (the HTTP/1.1 request is kept too, to write the answer by)
  (call-with-values (lambda () (request-head-finish! (stream-head stream)))
    (lambda (head length)
      (if (not head)
          400
          (call-with-values
              (lambda ()
                (parse-request-head head 0 length
                                    (settings-parse-limits (loop-settings (h2-loop h2)))))
            (lambda (request index)
              (cond
               ((not (request? request))
                (if (http-error? request) (http-error-status request) 400))
               ((let ((length (request-content-length request))
                      (body (stream-body stream)))
                  ;; RFC 9113 §8.1.1: a Content-Length the DATA
                  ;; frames do not add up to is malformed
                  (and length (not (= length (if body (output-fill body) 0)))))
                'malformed)
               (else
                (set-stream-request1! stream request)
                (set-fields request ((request-version) '(2 . 0)))))))))))

;; A stream's <request-head> is used until its request is parsed, then
;; kept for the next stream of the connection: no new buffer per request.
(define max-free-heads 8)

(define (take-request-head! h2)
  (let ((heads (h2-heads h2)))
    (if (pair? heads)
        (begin (set-h2-heads! h2 (cdr heads)) (car heads))
        (make-request-head))))

(define (give-request-head! h2 stream)
  (let ((head (stream-head stream))
        (heads (h2-heads h2)))
    (set-stream-head! stream #f)
    (when (and head (< (length heads) max-free-heads))
      (request-head-reset! head)
      (set-h2-heads! h2 (cons head heads)))))

;;;
;;; Calling handlers
;;;

(define (run-streams! h2)
  ;; Call the handler of each stream whose request is complete, oldest
  ;; first.
  (let ((ready (reverse (h2-ready h2))))
    (set-h2-ready! h2 '())
    (for-each
     (lambda (stream)
       (when (eq? (stream-state stream) 'ready)
         (let ((request (if (stream-refusal stream)
                            (stream-refusal stream)
                            (parse-stream-request h2 stream))))
           (give-request-head! h2 stream)
           (cond
            ((eq? request 'malformed) (reset-stream! h2 stream PROTOCOL_ERROR))
            ((integer? request) (refuse-stream! h2 stream request))
            (else
             (set-stream-request! stream request)
             (call-stream-handler! h2 stream))))))
     ready)))

(define (stream-body-value h2 stream)
  ;; -> the body the handler is given: as over HTTP/1, #f or a bytevector
  ;; (a port for a `with-body-port' handler)
  (let* ((body (stream-body stream))
         (bv (and body (> (output-fill body) 0)
                  (let ((bv (make-bytevector (output-fill body))))
                    (bytevector-copy! (output-bytes body) 0 bv 0 (output-fill body))
                    bv))))
    (set-stream-body! stream #f)
    (if (loop-body-port? (h2-loop h2))
        (and bv (open-bytevector-input-port bv))
        bv)))

(define (call-stream-handler! h2 stream)
  (let ((loop (h2-loop h2)))
    (set-stream-state! stream 'running)
    (when (loop-observer loop)
      (set-stream-started! stream (clock)))
    (set-loop-serving! loop (h2-conn h2))
    (call-with-values
        (lambda () (call-handler loop (stream-request stream) (stream-body-value h2 stream)))
      (lambda (response body)
        (set-loop-serving! loop #f)
        (handler-outcome! h2 stream response body)))))

(define (handler-outcome! h2 stream response body)
  ;; RESPONSE and BODY as `call-handler' or `resume-handler' return them
  (cond
   ((eq? response suspended)
    (await! h2 stream body))
   (else
    (when (stream-timer stream)
      (loop-cancel-timer! (stream-timer stream))
      (set-stream-timer! stream #f))
    (set-stream-k! stream #f)
    (cond
     ((eq? (stream-state stream) 'closed) #t) ; the client reset it meanwhile
     ((stream-cancelled stream)
      (if (eq? (stream-cancelled stream) 'timeout)
          (refuse-stream! h2 stream 503)
          (reset-stream! h2 stream CANCEL)))
     ((not response)
      (refuse-stream! h2 stream (if (eqv? body 503) 503 500)))
     (else (submit! h2 stream response body))))))

(define (await! h2 stream suspension)
  ;; The handler of STREAM waits as SUSPENSION says.
  (set-stream-state! stream (if (stream-port stream) 'streaming 'suspended))
  (set-stream-k! stream (suspension-k suspension))
  (set-stream-token! stream suspension)
  (if (stream-cancelled stream)
      (set-h2-resumed! h2 (cons (cons stream #f) (h2-resumed h2)))
      (begin
        (unless (or (stream-timer stream) (stream-port stream))
          (let ((limit (tasks-handler-ms (loop-tasks (h2-loop h2)))))
            (when limit
              (set-stream-timer! stream
                                 (loop-call-after! limit
                                                   (lambda ()
                                                     (set-stream-timer! stream #f)
                                                     (cancel-stream! h2 stream 'timeout)
                                                     (wake! h2)))))))
        (set-stream-undo!
         stream
         ((suspension-register suspension)
          (lambda (thunk)
            (when (eq? (stream-token stream) suspension)
              (set-stream-token! stream #f)
              (set-h2-resumed! h2 (cons (cons stream thunk) (h2-resumed h2)))
              (wake! h2))))))))

(define (wake! h2)
  ;; A wait ended: resume now if the loop is between handlers, else
  ;; from a timer of no delay (never a handler inside another).
  (cond
   ((h2-closed? h2) #t)
   ((h2-busy? h2) #t)                   ; `process!' goes round again
   ((not (suspendable?)) (process! h2))
   ((not (h2-wake-timer h2))
    (set-h2-wake-timer! h2 (loop-call-after! 0 (lambda ()
                                                 (set-h2-wake-timer! h2 #f)
                                                 (unless (h2-closed? h2)
                                                   (process! h2))))))))

(define (cancel-stream! h2 stream reason)
  ;; Give STREAM's waiting handler up: it resumes raising
  ;; &request-cancelled where it waits, so that it unwinds.
  (unless (stream-cancelled stream)
    (set-stream-cancelled! stream reason)
    (when (stream-token stream)
      (set-stream-token! stream #f)
      (let ((undo (stream-undo stream)))
        (when (procedure? undo) (undo)))
      (set-h2-resumed!
       h2 (cons (cons stream
                      (lambda ()
                        (raise-exception
                         (make-exception
                          (make-request-cancelled reason)
                          (make-exception-with-message
                           (format #f "request given up: ~a" reason))))))
                (h2-resumed h2))))))

(define (run-resumed! h2)
  (let ((resumed (reverse (h2-resumed h2)))
        (loop (h2-loop h2)))
    (set-h2-resumed! h2 '())
    (for-each
     (lambda (entry)
       (let ((stream (car entry))
             (thunk (cdr entry)))
         (call-with-values
             (lambda ()
               (resume-serving loop (h2-conn h2) (stream-request stream)
                               (stream-k stream) thunk))
           (lambda (response body)
             (if (stream-port stream)
                 (stream-body-outcome! h2 stream response body)
                 (handler-outcome! h2 stream response body))))))
     resumed)))

;;;
;;; Answers
;;;

(define http1-version '(1 . 1))

(define (submit! h2 stream response body)
  ;; Queue the answer RESPONSE, BODY of STREAM's handler, made as
  ;; HTTP/1 makes it (charset, Content-Length, HEAD, a collected procedure
  ;; body), then taken apart into fields.
  (let ((request (stream-request stream))
        (as-http1 (stream-request1 stream))
        (out (h2-answer h2))
        (code (answer-code response)))
    (define (fail! exception)
      (report-handler-error request exception #f)
      (refuse-stream! h2 stream 500))
    (output-reset! out)
    (with-exception-handler fail!
      (lambda ()
        (cond
         ((streamed-response? response body)
          (call-with-values (lambda () (write-streamed-head! out as-http1 response))
            (lambda (framing close?)
              (if (eq? framing 'none)
                  (answer-head! h2 stream code #f 0)
                  (start-streamed-body! h2 stream code response body)))))
         ((file-body? body)
          (write-response-head! out as-http1 response (file-body-length body) #f)
          (if (or (eq? (request-method request) 'HEAD) (zero? (file-body-length body)))
              (begin (close-file-body! body) (answer-head! h2 stream code #f 0))
              (answer-head! h2 stream code body (file-body-offset body))))
         ((takeover? body)
          ;; A protocol switch (WebSocket) is HTTP/1.1's alone.
          (refuse-stream! h2 stream 501))
         (else
          (call-with-values (lambda () (write-response! out as-http1 response body #f #f))
            (lambda (close? rest)
              (answer-with-body! h2 stream code rest))))))
      #:unwind? #t)))

(define (answer-with-body! h2 stream code rest)
  ;; The answer's head is in the connection's answer buffer, its body
  ;; after it or REST.
  (let ((out (h2-answer h2)))
    (call-with-values
        (lambda () (response-head-spans (output-bytes out) 0 (output-fill out) (h2-spans h2)))
      (lambda (spans count end)
        (set-h2-spans! h2 spans)
        (cond
         (rest (answer! h2 stream code count rest 0 (bytevector-length rest)))
         ((< end (output-fill out))
          (answer! h2 stream code count (output-bytes out) end (output-fill out)))
         (else (answer! h2 stream code count #f 0 0)))))))

(define (answer-head! h2 stream code source offset)
  ;; `answer!' for an answer buffer that holds the head alone.
  (let ((out (h2-answer h2)))
    (call-with-values
        (lambda () (response-head-spans (output-bytes out) 0 (output-fill out) (h2-spans h2)))
      (lambda (spans count end)
        (set-h2-spans! h2 spans)
        (answer! h2 stream code count source offset
                 (if (file-body? source) (file-body-end source) 0))))))

(define (answer! h2 stream code count source offset end)
  ;; Queue the head in the answer buffer, as the COUNT fields whose spans
  ;; the connection keeps, and the body SOURCE [OFFSET, END) for STREAM:
  ;; #f, a bytevector (perhaps the answer buffer's, after the head), a
  ;; <file-body>, or 'queue.
  (let ((loop (h2-loop h2)))
    (set-stream-state! stream (if (eq? source 'queue) 'streaming 'answered))
    (set-stream-code! stream code)
    (set-stream-source! stream source)
    (set-stream-offset! stream offset)
    (set-stream-end! stream end)
    (send-head! h2 stream code count (and source #t))
    (cond
     ((not source) #t)
     ((eq? source (output-bytes (h2-answer h2))) (send-body-now! h2 stream))
     (else (set-h2-senders! h2 (append (h2-senders h2) (list stream)))))
    (let ((request (stream-request stream))
          (bytes (- end offset)))
      (report-response! loop (h2-conn h2) request code bytes)
      (when (loop-observer loop)
        (observe-stream! loop stream request code bytes)))))

(define (send-body-now! h2 stream)
  ;; A body in the answer buffer, which the next answer reuses: in one
  ;; DATA frame now if the windows allow (most answers: one copy, no
  ;; queue), else copied out and queued.
  (let* ((source (stream-source stream))
         (offset (stream-offset stream))
         (count (- (stream-end stream) offset)))
    (if (<= count (min (h2-send-window h2) (stream-send-window stream) (h2-peer-frame h2)))
        (begin
          (put-frame! h2 DATA END_STREAM (stream-id stream) source offset count)
          (set-h2-send-window! h2 (- (h2-send-window h2) count))
          (set-stream-send-window! stream (- (stream-send-window stream) count))
          (set-stream-bytes! stream count)
          (local-end! h2 stream))
        (let ((copy (make-bytevector count)))
          (bytevector-copy! source offset copy 0 count)
          (set-stream-source! stream copy)
          (set-stream-offset! stream 0)
          (set-stream-end! stream count)
          (set-h2-senders! h2 (append (h2-senders h2) (list stream)))))))

(define (observe-stream! loop stream request code bytes)
  ;; Every answer over HTTP/2 is accounted for, with the time from its
  ;; handler's call to its answer (waits included); no read, parse or
  ;; write time of its own (a read serves many streams).  Counted apart
  ;; too, for the status page.
  (let ((started (stream-started stream)))
    (observe-untimed! (loop-probe loop) request code bytes
                      (if started (- (clock) started) 0))))

(define (refuse-stream! h2 stream code)
  ;; Answer CODE, plain text, for a request that never reached (or failed
  ;; in) its handler.
  (let ((out (h2-answer h2))
        (method (let ((request (stream-request stream)))
                  (if request (request-method request) 'GET))))
    (output-reset! out)
    (write-error-response! out http1-version code #f method #f)
    (answer-with-body! h2 stream code #f)))

(define (send-head! h2 stream code count body?)
  ;; The head in the answer buffer, COUNT fields whose spans the
  ;; connection keeps, HPACK-coded into HEADERS and, if it needs more
  ;; frames than one, CONTINUATION frames, queued whole.
  (let* ((out (h2-answer h2))
         (spans (h2-spans h2))
         (bound (response-head-bound spans count))
         (scratch (let ((bv (h2-scratch h2)))
                    (if (<= bound (bytevector-length bv))
                        bv
                        (let ((bv (make-bytevector (* 2 bound))))
                          (set-h2-scratch! h2 bv)
                          bv))))
         (n (encode-response-head code (output-bytes out) spans count scratch
                                  (h2-table-update? h2)))
         (id (stream-id stream))
         (end-stream (if body? 0 END_STREAM)))
    (set-h2-table-update! h2 #f)
    (cond
     ((<= n (h2-peer-frame h2))
      (put-frame! h2 HEADERS (logior END_HEADERS end-stream) id scratch 0 n))
     (else
      (let ((size (h2-peer-frame h2)))
        (put-frame! h2 HEADERS end-stream id scratch 0 size)
        (let lp ((at size))
          (let ((count (min size (- n at))))
            (put-frame! h2 CONTINUATION (if (= (+ at count) n) END_HEADERS 0) id
                        scratch at count)
            (unless (= (+ at count) n) (lp (+ at count))))))))
    (unless body? (local-end! h2 stream))))

;;;
;;; Streamed answers (server-sent events)
;;;

(define (queued-bytes stream)
  (let lp ((queue (stream-queue stream)) (n (- (stream-offset stream))))
    (if (pair? queue) (lp (cdr queue) (+ n (bytevector-length (car queue)))) n)))

(define (stream-ready! h2 stream)
  ;; STREAM's body has more: `flush!' sends it, after the body
  ;; procedure returns or waits.
  (set-stream-deferred! stream #f))

(define (open-stream-port h2 stream response)
  (let* ((headers (answer-headers response))
         (type (assq-ref headers 'content-type))
         (charset (and type (pair? type) (assq-ref (cdr type) 'charset)))
         (port (make-custom-binary-output-port
                "HTTP/2 streamed answer"
                (lambda (bv start count)
                  (unless (memq (stream-state stream) '(closed))
                    (when (> count 0)
                      (let ((copy (make-bytevector count)))
                        (bytevector-copy! bv start copy 0 count)
                        (set-stream-queue! stream (append (stream-queue stream) (list copy))))
                      (when (> (queued-bytes stream) (limit stream-backlog))
                        (raise-exception
                         (make-exception (make-request-cancelled 'client-gone)
                                         (make-exception-with-message
                                          "request given up: client-gone"))))
                      (stream-ready! h2 stream)))
                  count)
                #f #f
                (lambda ()
                  (set-stream-eof! stream #t)
                  (unless (eq? (stream-state stream) 'closed)
                    (stream-ready! h2 stream))))))
    (set-port-encoding! port (cond ((not charset) "UTF-8")
                                   ((symbol? charset) (symbol->string charset))
                                   (else charset)))
    (setvbuf port 'block 16384)
    port))

(define stream-done (list 'stream-done))

(define (handler-done! loop)
  ;; A body procedure returned: leave the handler's state as a handler's
  ;; return leaves it (see `handler-returned' in (plucky server respond)).
  (leave-suspendable!)
  (vector-set! handler-call 0 #f)
  (set-loop-guarded! loop #f))

(define (start-streamed-body! h2 stream code response body)
  (let ((port (open-stream-port h2 stream response))
        (loop (h2-loop h2)))
    (set-stream-port! stream port)
    (answer-head! h2 stream code 'queue 0)
    ;; The body procedure runs as a resumed handler would, under the
    ;; same prompt: it may wait, and what it raises is logged.
    (call-with-values
        (lambda ()
          (resume-serving loop (h2-conn h2) (stream-request stream)
                          (lambda (thunk) (thunk))
                          (lambda ()
                            (body port)
                            (close-port port)
                            (handler-done! loop)
                            stream-done)))
      (lambda (result suspension)
        (stream-body-outcome! h2 stream result suspension)))))

(define (stream-body-outcome! h2 stream result suspension)
  (cond
   ((eq? result suspended) (await! h2 stream suspension))
   ((eq? result stream-done)
    (unless (eq? (stream-state stream) 'closed)
      (set-stream-state! stream 'answered)))
   (else
    ;; Failed half-way or given up: the head is out, all that can be said
    ;; is to stop the stream.
    (unless (eq? (stream-state stream) 'closed)
      (close-source! stream)
      (reset-stream! h2 stream CANCEL)))))

;;; (plucky server http2) ends here
