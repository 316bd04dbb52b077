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
;;;   read(2) -> nghttp2-session-receive!  (frames, HPACK, flow control:
;;;              libnghttp2, plucky sys nghttp2), whose callbacks collect
;;;              each stream's headers and body here (`session-events')
;;;           -> run-streams!      a complete request is parsed as HTTP/1's
;;;              are (the head its fields make, (plucky http http2), to
;;;              (plucky http parse)) and its handler called, as (plucky
;;;              server respond) calls it
;;;           -> submit!           the answer's head and body, as HTTP/1
;;;              would write them (plucky http response), go to nghttp2 as
;;;              fields (plucky http http2) and a body it pulls (`read-data')
;;;           -> flush!            nghttp2-session-send! -> write(2)
;;;
;;; Streams are multiplexed: a handler that suspends (plucky server
;;; suspend) keeps its continuation in its <h2-stream>, and the other
;;; streams go on.  When its wait ends, RESUME queues it here, and it runs
;;; at once if the loop is not inside a handler, else from a timer of no
;;; delay: a handler is never resumed inside another's.  A streamed answer
;;; (server-sent events) runs its body procedure the same way, writing to
;;; a port whose bytes wait in the stream until nghttp2 pulls them.
;;;
;;; Limits (each tested in tests/server/http2.scm): nghttp2 bounds the
;;; concurrent streams (SETTINGS_MAX_CONCURRENT_STREAMS, REFUSED_STREAM
;;; past it), the HPACK dynamic table, queued SETTINGS/PING
;;; acknowledgements, CONTINUATION frames per header block and, where
;;; the library has it, stream resets; here, a header list's size (431),
;;; a body's (413), resets, PINGs and SETTINGS per second (a GOAWAY
;;; ENHANCE_YOUR_CALM past them), and a time limit on a connection that
;;; takes no answer bytes (a zero window, a socket not read).
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
  #:use-module (plucky sys nghttp2)
  #:use-module ((plucky sys libc) #:select (errno-EAGAIN bytevector-address))
  #:use-module ((plucky sys epoll) #:select (EPOLLIN EPOLLOUT))
  #:use-module ((plucky http parse) #:select (parse-request-head))
  #:use-module (plucky http http2)
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

;; Each limit declared once: what the session advertises and what this
;; module counts.  Per connection.
(define http2-limits
  '((max-concurrent-streams . 100)      ; SETTINGS_MAX_CONCURRENT_STREAMS
    (initial-window-size . 1048576)     ; bytes, per stream, for request bodies
    (header-table-size . 4096)          ; bytes of HPACK dynamic table
    (max-header-list-size . 65536)      ; bytes, names + values + 32 each
    (max-continuations . 8)             ; CONTINUATION frames per header block
    (resets-per-second . 100)           ; RST_STREAM from the client, sustained
    (reset-burst . 200)                 ;   and at once
    (pings-per-second . 100)            ; PING and SETTINGS frames, sustained
    (ping-burst . 200)                  ;   and at once
    (stream-backlog . 16777216)))       ; bytes a streamed body may run ahead

(define-syntax-rule (limit name) (assq-ref http2-limits 'name))

;;;
;;; Records
;;;

(define-record-type <h2>
  (%make-h2 loop conn session streams ready resumed out sent draining? closed?
            busy? wake-timer check-timer last-progress resets reset-ms pings
            ping-ms answer spans heads)
  h2?
  (loop h2-loop)
  (conn h2-conn)
  (session h2-session)                  ; <nghttp2-session>
  (streams h2-streams)                  ; hashv: stream id -> <h2-stream>
  (ready h2-ready set-h2-ready!)        ; streams to call the handler of, newest first
  (resumed h2-resumed set-h2-resumed!)  ; ((stream . thunk) …), newest first
  (out h2-out)                          ; <output>: bytes for the socket
  (sent h2-sent set-h2-sent!)           ; of OUT, bytes already written
  (draining? h2-draining? set-h2-draining!) ; GOAWAY sent: no new stream
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
  (heads h2-heads set-h2-heads!))       ; <request-head>s free for new streams

(define-record-type <h2-stream>
  (%make-h2-stream id state head field-bytes request request1 body refusal k token undo
                   cancelled timer source offset end queue eof? deferred? port
                   code bytes started)
  h2-stream?
  (id stream-id)
  ;; headers | body | ready | running | suspended | streaming | answered | closed
  (state stream-state set-stream-state!)
  (head stream-head set-stream-head!)         ; #f, or the <request-head> its fields make
  (field-bytes stream-field-bytes set-stream-field-bytes!) ; as SETTINGS_MAX_HEADER_LIST_SIZE counts
  (request stream-request set-stream-request!) ; the (web request), version 2.0
  (request1 stream-request1 set-stream-request1!) ; the same, version 1.1, to write answers by
  (body stream-body set-stream-body!)         ; #f, or an <output> collecting it
  (refusal stream-refusal set-stream-refusal!) ; #f, or the status to answer instead
  ;; the handler or body procedure that waits: its continuation, the
  ;; wait's mark, the thunk that undoes the wait
  (k stream-k set-stream-k!)
  (token stream-token set-stream-token!)
  (undo stream-undo set-stream-undo!)
  (cancelled stream-cancelled set-stream-cancelled!) ; #f | client-gone | timeout | stopping
  (timer stream-timer set-stream-timer!)      ; #f, or its handler timeout's timer
  ;; the answer's body as nghttp2 pulls it: SOURCE a bytevector
  ;; [OFFSET, END), or a <file-body>, or 'queue (a streamed body: QUEUE,
  ;; bytevectors oldest first, EOF? once its port is closed)
  (source stream-source set-stream-source!)
  (offset stream-offset set-stream-offset!)
  (end stream-end set-stream-end!)
  (queue stream-queue set-stream-queue!)
  (eof? stream-eof? set-stream-eof!)
  (deferred? stream-deferred? set-stream-deferred!) ; nghttp2 waits for `resume'
  (port stream-port set-stream-port!)         ; a streamed body's port
  (code stream-code set-stream-code!)         ; status answered
  (bytes stream-bytes set-stream-bytes!)      ; body bytes sent
  (started stream-started set-stream-started!)) ; clock ns of the handler call, for an observer

(define (make-h2-stream h2 id)
  (%make-h2-stream id 'headers (take-request-head! h2) 0 #f #f #f #f #f #f #f #f #f #f 0 0 '()
                   #f #f #f 0 0 #f))

;;;
;;; Where a connection becomes HTTP/2
;;;

(define (start-http2! loop conn bv start end)
  "Make CONN, whose client sent the bytes BV [START, END) beginning with
the HTTP/2 connection preface, an HTTP/2 connection of LOOP, and serve
what those bytes ask; return nothing."
  (let* ((now (loop-now loop))
         (h2 #f)
         (session (make-nghttp2-session
                   (session-events (lambda () h2))
                   #:max-concurrent-streams (limit max-concurrent-streams)
                   #:initial-window-size (limit initial-window-size)
                   #:header-table-size (limit header-table-size)
                   #:max-header-list-size (limit max-header-list-size)
                   #:max-continuations (limit max-continuations)
                   ;; nghttp2's own, where the library has it, as a
                   ;; backstop behind ours (`on-frame'), which answers
                   ;; ENHANCE_YOUR_CALM
                   #:reset-burst (* 2 (limit reset-burst))
                   #:reset-rate (* 2 (limit resets-per-second)))))
    (set! h2 (%make-h2 loop conn session (make-hash-table) '() '() (make-output 16384) 0
                       #f #f #f #f #f now (limit reset-burst) now (limit ping-burst) now
                       (make-output 1024) (make-bytevector 256) '()))
    (set-connection-input! conn #f)
    (set-connection-state! conn 'h2)
    (set-connection-body! conn h2)
    ;; The connection's own deadline is never: its timers are here, and
    ;; the sweep would close it without freeing its session.
    (set-connection-deadline! conn never)
    (receive! h2 (+ (bytevector-address bv) start) (- end start))
    (process! h2)
    (values)))

;;;
;;; What nghttp2 tells (within its callbacks: collect, never suspend)
;;;

(define (session-events h2-of)
  (make-nghttp2-events
   (lambda (id name name-length value value-length)
     (on-header (h2-of) id name name-length value value-length))
   (lambda (type flags id code) (on-frame (h2-of) type flags id code))
   (lambda (id address length) (on-data (h2-of) id address length))
   (lambda (id code) (on-stream-close (h2-of) id code))
   (lambda (id length) (read-data (h2-of) id length))))

(define (stream-ref h2 id)
  (hashv-ref (h2-streams h2) id))

(define (on-header h2 id name name-length value value-length)
  ;; A field of stream ID's header block (the first tells that the
  ;; stream began), in the bytevectors NAME and VALUE.
  (let ((stream (or (stream-ref h2 id)
                    (let ((stream (make-h2-stream h2 id)))
                      (hashv-set! (h2-streams h2) id stream)
                      stream))))
    ;; RFC 7541 §4.1's size, as SETTINGS_MAX_HEADER_LIST_SIZE counts
    (let ((size (+ (stream-field-bytes stream) 32 name-length value-length)))
      (set-stream-field-bytes! stream size)
      (cond
       ((> size (limit max-header-list-size))
        ;; Counted on, not kept: the block is decoded to its end (the
        ;; HPACK table must stay in step), then answered 431.
        (unless (stream-refusal stream)
          (set-stream-refusal! stream 431)
          (set-stream-head! stream #f)))
       ((stream-refusal stream) #t)
       ((eq? (stream-state stream) 'headers)
        (request-head-field! (stream-head stream) name name-length value value-length))
       ;; a trailer: accepted, not kept (RFC 9110 §6.5.1 lets a
       ;; recipient drop fields it does not merge)
       (else #t))))
  0)

(define (calm-down! h2)
  ;; The client abuses the protocol: end the session with a GOAWAY of
  ;; ENHANCE_YOUR_CALM.  -> what the callback returns to nghttp2
  (nghttp2-session-terminate! (h2-session h2) NGHTTP2_ENHANCE_YOUR_CALM)
  NGHTTP2_ERR_CALLBACK_FAILURE)

(define (take-token! h2 count set-count! since set-since! burst per-second)
  ;; A token bucket of BURST refilled at PER-SECOND.  -> #f when empty
  (let* ((now (loop-now (h2-loop h2)))
         (refill (quotient (* (- now (since h2)) per-second) 1000))
         (tokens (min burst (+ (count h2) refill))))
    (when (> refill 0) (set-since! h2 now))
    (and (> tokens 0)
         (begin (set-count! h2 (- tokens 1)) #t))))

(define (on-frame h2 type flags id code)
  (let ((stream (stream-ref h2 id)))
    (cond
     ((or (= type NGHTTP2_PING) (= type NGHTTP2_SETTINGS))
      (if (take-token! h2 h2-pings set-h2-pings! h2-ping-ms set-h2-ping-ms!
                       (limit ping-burst) (limit pings-per-second))
          0
          (calm-down! h2)))
     ((= type NGHTTP2_RST_STREAM)
      ;; Rapid reset (CVE-2023-44487): each reset stream may have cost
      ;; a handler call; past the bucket the connection ends.
      (if (take-token! h2 h2-resets set-h2-resets! h2-reset-ms set-h2-reset-ms!
                       (limit reset-burst) (limit resets-per-second))
          0
          (calm-down! h2)))
     ((not stream) 0)
     ((= type NGHTTP2_HEADERS)
      (when (and (eq? (stream-state stream) 'headers)
                 (logtest flags NGHTTP2_FLAG_END_HEADERS))
        (set-stream-state! stream 'body))
      (when (logtest flags NGHTTP2_FLAG_END_STREAM)
        (request-complete! h2 stream))
      0)
     ((= type NGHTTP2_DATA)
      (when (logtest flags NGHTTP2_FLAG_END_STREAM)
        (request-complete! h2 stream))
      0)
     (else 0))))

(define (request-complete! h2 stream)
  (when (memq (stream-state stream) '(headers body))
    (set-stream-state! stream 'ready)
    (set-h2-ready! h2 (cons stream (h2-ready h2)))))

(define (on-data h2 id data length)
  (let ((stream (stream-ref h2 id)))
    (when (and stream (not (stream-refusal stream)))
      (let ((body (or (stream-body stream)
                      (let ((body (make-output 4096)))
                        (set-stream-body! stream body)
                        body)))
            (max-body (settings-max-body (loop-settings (h2-loop h2)))))
        (if (> (+ (output-fill body) length) max-body)
            (begin
              (set-stream-refusal! stream 413)
              (set-stream-body! stream #f))
            (output-put-slice! body data 0 length)))))
  0)

(define (on-stream-close h2 id code)
  (let ((stream (stream-ref h2 id)))
    (when stream
      (hashv-remove! (h2-streams h2) id)
      (let ((state (stream-state stream)))
        (set-stream-state! stream 'closed)
        (close-source! stream)
        (case state
          ((suspended streaming) (cancel-stream! h2 stream 'client-gone))
          (else #t)))))
  0)

(define (close-source! stream)
  (let ((source (stream-source stream)))
    (when (file-body? source)
      (close-file-body! source))
    (set-stream-source! stream #f)
    (set-stream-queue! stream '())))

;;;
;;; Reading and writing the socket
;;;

(define (receive! h2 address count)
  ;; Hand nghttp2 the COUNT bytes at ADDRESS.  -> #f when the session
  ;; failed, a final GOAWAY then queued
  (let ((n (nghttp2-session-receive! (h2-session h2) address count)))
    (or (>= n 0)
        (begin
          ;; A callback that failed has queued its GOAWAY (`calm-down!');
          ;; nghttp2's own limits (acknowledgements a client does not
          ;; read, CONTINUATIONs) and a bad preface have not.
          (unless (= n NGHTTP2_ERR_CALLBACK_FAILURE)
            (nghttp2-session-terminate! (h2-session h2)
                                        (if (memv n nghttp2-flood-errors)
                                            NGHTTP2_ENHANCE_YOUR_CALM
                                            NGHTTP2_PROTOCOL_ERROR)))
          #f))))

(define nghttp2-flood-errors
  ;; NGHTTP2_ERR_FLOODED, NGHTTP2_ERR_TOO_MANY_CONTINUATIONS,
  ;; NGHTTP2_ERR_TOO_MANY_SETTINGS
  '(-904 -905 -537))

(define (http2-ready! loop conn)
  "Serve CONN, an HTTP/2 connection of LOOP whose socket is readable or
writable: send what waits, read what came, answer.  Return nothing."
  (let ((h2 (connection-body conn)))
    (unless (h2-closed? h2)
      (let ((transport (connection-transport conn))
            (fd (connection-fd conn)))
        (let read-more ((rounds 0))
          (let ((n ((transport-read transport) fd (loop-input-address loop) 0 input-size)))
            (cond
             ((> n 0)
              (if (receive! h2 (loop-input-address loop) n)
                  (when (< rounds 16) (read-more (+ rounds 1)))
                  (set-h2-draining! h2 #t)))
             ((= n (- errno-EAGAIN)) #t)
             (else (close-h2! h2)))))
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
  ;; bytes nghttp2 makes frames of before they are written: a write(2)
  ;; per batch, not per frame
  65536)

(define (flush! h2)
  ;; Send what nghttp2 has, as the socket takes it.  -> #f when the
  ;; client is gone
  (let lp ()
    (let ((written (write-out! h2)))
      (cond
       ((not written) #f)
       ((eq? written 'again) #t)
       (else
        (let* ((out (h2-out h2))
               (n (nghttp2-session-send!
                   (h2-session h2)
                   (lambda (bv count) (output-put-slice! out bv 0 count))
                   flush-batch)))
          (cond
           ((< n 0) #f)
           ((> n 0) (lp))
           (else #t))))))))

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
             (or (not (nghttp2-session-want-read? (h2-session h2)))
                 (and (h2-draining? h2) (zero? (active-streams h2))))
             (not (nghttp2-session-want-write? (h2-session h2))))
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

(define (active-streams h2)
  (hash-count (lambda (id stream) #t) (h2-streams h2)))

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
  ;; taken, or a body with bytes nghttp2 does not pull (a window at zero)?
  (or (> (output-fill (h2-out h2)) 0)
      (let ((found #f))
        (hash-for-each (lambda (id stream)
                         (when (and (memq (stream-state stream) '(answered streaming))
                                    (not (stream-deferred? stream))
                                    (stream-source stream))
                           (set! found #t)))
                       (h2-streams h2))
        found)))

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
        (goaway-and-close! h2 NGHTTP2_NO_ERROR))
       ((and (stalled? h2) (>= quiet (settings-write-ms settings)))
        ;; The client takes none of its answers: a zero window held, or
        ;; a socket not read.
        (goaway-and-close! h2 NGHTTP2_ENHANCE_YOUR_CALM))
       (else
        (unless (stalled? h2) (set-h2-last-progress! h2 now))
        (arm-check! h2))))))

(define (goaway-and-close! h2 code)
  (nghttp2-session-terminate! (h2-session h2) code)
  (flush! h2)
  (close-h2! h2))

(define (close-h2! h2)
  ;; Give up every stream (their handlers unwind), free the session,
  ;; close the connection.
  (unless (h2-closed? h2)
    (set-h2-closed! h2 #t)
    (let ((streams (hash-fold (lambda (id stream acc) (cons stream acc)) '()
                              (h2-streams h2))))
      (hash-clear! (h2-streams h2))
      (for-each (lambda (stream)
                  (close-source! stream)
                  (when (memq (stream-state stream) '(suspended streaming))
                    (cancel-stream! h2 stream 'client-gone)))
                streams))
    (run-resumed! h2)
    (when (h2-check-timer h2) (loop-cancel-timer! (h2-check-timer h2)))
    (when (h2-wake-timer h2) (loop-cancel-timer! (h2-wake-timer h2)))
    (nghttp2-session-free! (h2-session h2))
    (close-connection! (h2-loop h2) (h2-conn h2))))

(define (http2-drain! loop conn)
  "Tell the client of CONN, an HTTP/2 connection of LOOP, that it is to
open no more streams (GOAWAY): those it opened are answered, then the
connection closes.  Return nothing."
  (let ((h2 (connection-body conn)))
    (unless (or (h2-closed? h2) (h2-draining? h2))
      (set-h2-draining! h2 #t)
      (let ((session (h2-session h2)))
        (nghttp2-submit-goaway! session (nghttp2-last-stream-id session)
                                NGHTTP2_NO_ERROR))
      (process! h2))
    (values)))

(define (http2-stop! loop conn)
  "Give up every stream of CONN, an HTTP/2 connection of LOOP, unwinding
the handlers that wait, and close it; return nothing."
  (let ((h2 (connection-body conn)))
    (unless (h2-closed? h2)
      (nghttp2-session-terminate! (h2-session h2) NGHTTP2_NO_ERROR)
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
               ((request? request)
                (set-stream-request1! stream request)
                (set-fields request ((request-version) '(2 . 0))))
               ((http-error? request) (http-error-status request))
               (else 400))))))))

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
           (if (integer? request)
               (refuse-stream! h2 stream request)
               (begin
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
          (reset-stream! h2 stream)))
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
  ;; Give nghttp2 the answer RESPONSE, BODY of STREAM's handler, made as
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
        (let* ((bytes (output-bytes out))
               (fill (output-fill out))
               (data (cond
                      (rest rest)
                      ((< end fill)
                       (let ((bv (make-bytevector (- fill end))))
                         (bytevector-copy! bytes end bv 0 (- fill end))
                         bv))
                      (else #f))))
          (set-h2-spans! h2 spans)
          (answer! h2 stream code count data 0))))))

(define (answer-head! h2 stream code source offset)
  ;; `answer!' for an answer buffer that holds the head alone.
  (let ((out (h2-answer h2)))
    (call-with-values
        (lambda () (response-head-spans (output-bytes out) 0 (output-fill out) (h2-spans h2)))
      (lambda (spans count end)
        (set-h2-spans! h2 spans)
        (answer! h2 stream code count source offset)))))

(define (answer! h2 stream code count source offset)
  ;; Queue the head in the answer buffer, as the COUNT fields whose spans
  ;; the connection keeps, and the body SOURCE (#f, a bytevector from
  ;; OFFSET, a <file-body>, or 'queue) for STREAM.
  (let ((loop (h2-loop h2))
        (out (h2-answer h2)))
    (set-stream-state! stream (if (eq? source 'queue) 'streaming 'answered))
    (set-stream-code! stream code)
    (set-stream-source! stream source)
    (set-stream-offset! stream offset)
    (set-stream-end! stream (cond ((bytevector? source) (bytevector-length source))
                                  ((file-body? source) (file-body-end source))
                                  (else 0)))
    (let ((rv (nghttp2-submit-response! (h2-session h2) (stream-id stream) code
                                        (output-address out) (h2-spans h2) count
                                        (and source #t))))
      (when (< rv 0) (close-source! stream)))
    (let ((request (stream-request stream))
          (bytes (if (eq? source 'queue) 0 (- (stream-end stream) offset))))
      (report-response! loop (h2-conn h2) request code bytes)
      (when (loop-observer loop)
        (observe-stream! loop stream request code bytes)))))

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

(define (reset-stream! h2 stream)
  (set-stream-state! stream 'answered)
  (nghttp2-submit-rst-stream! (h2-session h2) (stream-id stream) NGHTTP2_CANCEL))

(define (read-data h2 id length)
  ;; nghttp2 asks for up to LENGTH bytes of stream ID's body.  -> (values
  ;; source start count flags) for (plucky sys nghttp2)
  (let ((stream (stream-ref h2 id)))
    (if (not stream)
        (values #f 0 0 NGHTTP2_DATA_FLAG_EOF)
        (let ((source (stream-source stream)))
          (set-h2-last-progress! h2 (loop-now (h2-loop h2)))
          (cond
           ((bytevector? source)
            (let* ((offset (stream-offset stream))
                   (count (min length (- (stream-end stream) offset)))
                   (eof? (= (+ offset count) (stream-end stream))))
              (set-stream-offset! stream (+ offset count))
              (set-stream-bytes! stream (+ count (stream-bytes stream)))
              (when eof? (set-stream-source! stream #f))
              (values source offset count (if eof? NGHTTP2_DATA_FLAG_EOF 0))))
           ((file-body? source)
            (let* ((offset (stream-offset stream))
                   (count (min length (- (stream-end stream) offset)))
                   (eof? (= (+ offset count) (stream-end stream))))
              (set-stream-offset! stream (+ offset count))
              (set-stream-bytes! stream (+ count (stream-bytes stream)))
              (when eof? (close-source! stream))
              (values (file-body-fd source) offset count (if eof? NGHTTP2_DATA_FLAG_EOF 0))))
           ((eq? source 'queue) (read-queue stream length))
           (else (values #f 0 0 NGHTTP2_DATA_FLAG_EOF)))))))

;;;
;;; Streamed answers (server-sent events)
;;;

(define (read-queue stream length)
  (let ((queue (stream-queue stream)))
    (cond
     ((pair? queue)
      (let* ((bv (car queue))
             (offset (stream-offset stream))
             (count (min length (- (bytevector-length bv) offset))))
        (if (= (+ offset count) (bytevector-length bv))
            (begin (set-stream-queue! stream (cdr queue)) (set-stream-offset! stream 0))
            (set-stream-offset! stream (+ offset count)))
        (set-stream-bytes! stream (+ count (stream-bytes stream)))
        (values bv offset count
                (if (and (stream-eof? stream) (null? (stream-queue stream)))
                    NGHTTP2_DATA_FLAG_EOF
                    0))))
     ((stream-eof? stream)
      (set-stream-source! stream #f)
      (values #f 0 0 NGHTTP2_DATA_FLAG_EOF))
     (else
      (set-stream-deferred! stream #t)
      (values #f 0 NGHTTP2_ERR_DEFERRED 0)))))

(define (queued-bytes stream)
  (let lp ((queue (stream-queue stream)) (n (- (stream-offset stream))))
    (if (pair? queue) (lp (cdr queue) (+ n (bytevector-length (car queue)))) n)))

(define (stream-ready! h2 stream)
  ;; STREAM's body has more: have nghttp2 pull it again.
  (when (stream-deferred? stream)
    (set-stream-deferred! stream #f)
    (nghttp2-session-resume! (h2-session h2) (stream-id stream))))

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
      (reset-stream! h2 stream)))))

;;; (plucky server http2) ends here
