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
;;; WebSocket of the worker.  A connection is a row of this process's
;;; tables, by descriptor, and the app holds a handle to it (see "A
;;; connection, kept by descriptor" below): an idle one has no object
;;; of its own for the collector to mark.  The upgrade request is not
;;; kept: ON-OPEN closes over it and puts what the connection needs in
;;; `websocket-data'.
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
  #:use-module (ice-9 weak-vector)
  #:use-module (web request)
  #:use-module (web response)
  #:use-module (plucky http)
  #:use-module ((plucky sys zlib)
                #:select (make-deflater deflate-message deflater-reset! deflater-end!
                          make-inflater inflate-message inflater-reset! inflater-end!))
  #:use-module ((plucky sys libc) #:select (bytevector-address))
  #:use-module ((plucky server)
                #:select (transport-read transport-write transport-close plain-transport
                          make-numbered numbered-ref numbered-take! numbered-release!
                          make-takeover log-line loop-watch! loop-want-write!
                          loop-unwatch! loop-call-after! loop-now-ms))
  #:export (websocket-request?
            websocket-upgrade
            websocket?
            websocket-send
            websocket-ping
            websocket-close
            websocket-open?
            websocket-buffered
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
  ;; The first subprotocol the client offers that the app accepts, as
  ;; the app spells it (which every connection that chose it then
  ;; shares): compared as they are, since names differing in case are
  ;; different subprotocols to the client, which must get back one of
  ;; its own.
  (let ((offered (let ((value (header-joined request 'sec-websocket-protocol)))
                   (if value
                       (map string-trim-both (string-split value #\,))
                       '()))))
    (let lp ((offered offered))
      (cond
       ((null? offered) #f)
       ((member (car offered) protocols) => car)
       (else (lp (cdr offered)))))))

;; What an upgrade asked for, shared by every connection that asked the
;; same (see `settings-table').
(define-record-type <settings>
  (make-settings protocol max-message max-buffer ping-ms timeout-ms
                 on-message on-close on-drain)
  settings?
  (protocol settings-protocol)          ; the chosen subprotocol, or #f
  (max-message settings-max-message)    ; bytes a message from the client may have
  (max-buffer settings-max-buffer)      ; bytes queued, at most
  (ping-ms settings-ping-ms)
  (timeout-ms settings-timeout-ms)
  (on-message settings-on-message)
  (on-close settings-on-close)
  (on-drain settings-on-drain))

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
            (open-websocket!
             fd transport
             (make-settings protocol max-message max-buffer (* 1000 ping-interval)
                            (* 1000 ping-timeout) on-message on-close on-drain)
             (and deflate (make-codec* deflate))
             on-open leftover)))))))))

;; permessage-deflate's memory per connection: zlib's deflate state is
;; 2^(window+2) + 2^(mem-level+9) bytes, 32 KiB with these rather than
;; 256 KiB with zlib's defaults, for a ratio that differs little on
;; messages of a few kilobytes (bench/websocket measures both ways).
;; The inflater must take the client's window, up to 32 KiB.
(define deflate-window-bits 12)
(define deflate-mem-level 5)

;;;
;;; A connection, kept by descriptor
;;;

;; Every collection marks each object that lives, while the worker's
;; HTTP clients wait (bench/websocket, idle).  A record per WebSocket,
;; even one of four fields, cost 10,000 idle ones about half a
;; millisecond a collection, a record of 28 fields and the upgrade
;; request two.  So an open WebSocket has no object of its own while it
;; is idle, nor a pointer to a shared one.  Its state is a row of
;; numbers in a bytevector, which the collector does not look into (the
;; number of its <settings>, which the upgrades of a route share, among
;; them), and a slot of a vector, #f.  A reader, a queue, a compressor,
;; the app's data, a TLS transport make a vector of extras there while
;; they are kept.  The <websocket> an app is given
;; is a handle, the descriptor and a generation (a descriptor is reused
;; once closed), made when a callback needs one and held weakly: the
;; same handle while the app keeps one, none while it does not.
;;
;; The tables are this process's: every WebSocket lives on its loop's
;; thread, where all of this runs.

(define-record-type <websocket>
  (make-handle fd generation)
  websocket?
  (fd handle-fd)
  (generation handle-generation))

;; The <settings> of open connections, which a row keeps by number
;; (plucky server numbered): the upgrades of a route, whose settings are
;; equal (the same callbacks, as `eq?', and limits), share one.
(define settings-table (make-numbered))

;; permessage-deflate's state, for a connection that agreed to it
(define-record-type <codec>
  (make-codec deflater reset? inflater inflate)
  codec?
  (deflater codec-deflater)             ; raw, for what we send
  (reset? codec-reset?)                 ; reset it after each message
  (inflater codec-inflater)             ; the reader's, to free at the end
  (inflate codec-inflate))              ; the reader's #:inflate

(define (make-codec* deflate)
  ;; -> the <codec> of the agreed permessage-deflate parameters DEFLATE
  (let ((deflater (make-deflater #:format 'raw
                                 #:window-bits (deflate-params-server-bits deflate)
                                 #:mem-level deflate-mem-level))
        (inflater (make-inflater #:window-bits (deflate-params-client-bits deflate)))
        (reset? (deflate-params-client-reset? deflate)))
    (make-codec deflater (deflate-params-server-reset? deflate) inflater
                (lambda (payload limit)
                  (let ((message (inflate-message inflater payload limit)))
                    (when reset? (inflater-reset! inflater))
                    message)))))

;; The tables, in chunks of 256 descriptors, each made when a descriptor
;; of its range first opens: NUMBERS-ROW numbers (s64) a descriptor in
;; a bytevector, a slot in a vector, and a weak vector of handles.
;; Chunks rather than tables that double as they fill: opening 10,000
;; WebSockets grew the heap to 16 MB rather than 23, and a bigger heap
;; makes every collection longer, free as it is (20 MB more, about 1 ms
;; longer).
(define-syntax chunk-bits (identifier-syntax 8))
(define-syntax chunk-mask (identifier-syntax 255))
(define-syntax-rule (chunk-of fd) (ash fd (- chunk-bits)))
(define-syntax numbers-row (identifier-syntax 11))
(define numbers (make-vector 0 #f))     ; chunk index -> bytevector, or #f
(define objects (make-vector 0 #f))     ; chunk index -> vector, or #f
(define handles (make-vector 0 #f))     ; chunk index -> weak vector, or #f
(define open-count 0)
(define generations 0)                  ; handed out so far

(define-syntax define-columns
  ;; (define-columns (REF PUT CHUNKS ROW SCALE) (INDEX GETTER SETTER) ...):
  ;; GETTER and SETTER of column INDEX of a descriptor's row in its chunk
  ;; of CHUNKS, whose elements are SCALE bytes apart
  (syntax-rules ()
    ((_ (ref put chunks row scale) (index getter setter) ...)
     (begin
       (begin
         (define-syntax-rule (getter fd)
           (ref (vector-ref chunks (chunk-of fd))
                (* scale (+ (* (logand fd chunk-mask) row) index))))
         (define-syntax-rule (setter fd value)
           (put (vector-ref chunks (chunk-of fd))
                (* scale (+ (* (logand fd chunk-mask) row) index))
                value)))
       ...))))

;; Times are the loop's clock, in ms; -1 is none.
(define-columns (bytevector-s64-native-ref bytevector-s64-native-set! numbers
                 numbers-row 8)
  (0 generation set-generation!)
  (1 state set-state!)                  ; one of the five below
  (2 last-read set-last-read!)
  (3 pinged-at set-pinged-at!)          ; our ping unanswered since
  (4 stalled-since set-stalled-since!)  ; the queue stuck since
  (5 closing-since set-closing-since!)  ; our close frame sent at
  (6 queue-offset set-queue-offset!)    ; bytes of the queue's first frame sent
  (7 buffered set-buffered!)            ; bytes queued
  (8 refused set-refused!)              ; 1: a send was refused since the queue emptied
  (9 close-code set-close-code!)        ; of the close that ended it (the client's,
                                        ; else ours), 0 until then
  (10 settings-id set-settings-id!))    ; in `settings-table', 0 for none
(define-columns (vector-ref vector-set! objects 1 1)
  (0 extras set-extras!))                ; #f, or a vector of the slots below

(define-syntax-rule (settings fd)
  (numbered-ref settings-table (settings-id fd)))
(define-columns (weak-vector-ref weak-vector-set! handles 1 1)
  (0 handle-ref handle-set!))            ; the app's <websocket>, held weakly

;; A descriptor's other objects, each with the value it has while the
;; connection is idle.  A vector of them is made when one is set to
;; another value, and dropped by the sweep once they all have these
;; again: every slot of the tables is scanned by every collection, so
;; an idle row is one slot, #f.
(define-syntax define-extras
  (syntax-rules ()
    ((_ make idle? (index default getter setter) ...)
     (begin
       (define (make) (vector default ...))
       (define (idle? more)
         (and (eq? (vector-ref more index) default) ...))
       (begin
         (define-syntax-rule (getter fd)
           (let ((more (extras fd)))
             (if more (vector-ref more index) default)))
         (define-syntax-rule (setter fd value)
           (let ((v value) (more (extras fd)))
             (cond
              (more (vector-set! more index v))
              ((not (eq? v default))
               (let ((new (make)))
                 (vector-set! new index v)
                 (set-extras! fd new)))))))
       ...))))

(define-extras make-extras extras-idle?
  (0 plain-transport transport set-transport!)
  (1 #f reader set-reader!)              ; #f when it held nothing at the last sweep
  (2 '() queue set-queue!)               ; frames to send, in order
  (3 #f codec set-codec!)                ; #f, or permessage-deflate's <codec>
  (4 #f close-reason set-close-reason!)
  (5 #f data set-data!))                 ; the app's

;; States: no WebSocket; open; closing (our close frame queued, the
;; client's awaited); flushing (to close once the queue is out); ending
;; (closed, ON-CLOSE being told).
(define state-none 0)
(define state-open 1)
(define state-closing 2)
(define state-flushing 3)
(define state-ending 4)

(define (live? fd)
  (let ((s (state fd)))
    (or (= s state-open) (= s state-closing))))

(define (live-or-flushing? fd)
  (let ((s (state fd)))
    (or (= s state-open) (= s state-closing) (= s state-flushing))))

(define (make-room! fd)
  ;; Make the chunk of FD's row, and room for it.
  (let ((chunk (chunk-of fd)))
    (when (>= chunk (vector-length numbers))
      (let ((grow (lambda (old)
                    (let ((new (make-vector (max (+ chunk 1) (* 2 (vector-length old))) #f)))
                      (vector-move-left! old 0 (vector-length old) new 0)
                      new))))
        (set! numbers (grow numbers))
        (set! objects (grow objects))
        (set! handles (grow handles))))
    (unless (vector-ref numbers chunk)
      (let ((size (+ chunk-mask 1)))
        (vector-set! numbers chunk (make-bytevector (* 8 numbers-row size) 0))
        (vector-set! objects chunk (make-vector size #f))
        (vector-set! handles chunk (make-weak-vector size #f))))))

(define (row? fd)
  ;; -> true when FD has a row (its chunk is made)
  (let ((chunk (chunk-of fd)))
    (and (< chunk (vector-length numbers)) (vector-ref numbers chunk) #t)))

(define (handle fd)
  ;; -> the app's <websocket> for FD, the one it holds if it holds one
  (let ((known (handle-ref fd)))
    (if (and known (= (handle-generation known) (generation fd)))
        known
        (let ((new (make-handle fd (generation fd))))
          (handle-set! fd new)
          new))))

(define (open-fd ws)
  ;; -> the descriptor of WS while its connection is not closed, or #f
  (let ((fd (handle-fd ws)))
    (and (row? fd)
         (= (generation fd) (handle-generation ws))
         (not (= (state fd) state-none))
         fd)))

;; The pending sweep's timer, or #f when no WebSocket is open.
(define sweep-timer #f)

(define (websocket-count)
  "Return the number of WebSockets open on this process's loop."
  open-count)

(define (websocket-open? ws)
  "Return true when WS can still send messages (no close frame sent)."
  (let ((fd (open-fd ws)))
    (and fd (= (state fd) state-open))))

(define (websocket-buffered ws)
  "Return the bytes queued to send on WS."
  (let ((fd (open-fd ws)))
    (if fd (buffered fd) 0)))

(define (websocket-protocol ws)
  "Return the subprotocol chosen for WS, or #f (and #f once it is closed)."
  (let ((fd (open-fd ws)))
    (and fd (settings-protocol (settings fd)))))

(define (websocket-data ws)
  "Return what the app last put in WS's slot (`set-websocket-data!'), #f
before that and once WS is closed (ON-CLOSE still sees it)."
  (let ((fd (open-fd ws)))
    (and fd (data fd))))

(define (set-websocket-data! ws value)
  "Put VALUE in WS's slot for the app; nothing once WS is closed."
  (let ((fd (open-fd ws)))
    (when fd (set-data! fd value))))

(define (reader! fd)
  ;; -> FD's reader, made if the sweep dropped it
  (or (reader fd)
      (let ((new (make-websocket-reader
                  #:max-message (settings-max-message (settings fd))
                  #:inflate (let ((codec (codec fd))) (and codec (codec-inflate codec))))))
        (set-reader! fd new)
        new)))

(define (open-websocket! fd transport settings codec on-open leftover)
  (make-room! fd)
  ;; First, as it may raise: the takeover's caller then closes FD, and
  ;; the row is left empty.
  (catch #t
    (lambda ()
      (loop-watch! fd #:object fd #:on-read read-ready! #:on-write flush!
                   #:on-stop stop!))
    (lambda args
      (when codec
        (deflater-end! (codec-deflater codec))
        (inflater-end! (codec-inflater codec)))
      (apply throw args)))
  (set! generations (+ generations 1))
  (set! open-count (+ open-count 1))
  (set-generation! fd generations)
  (set-state! fd state-open)
  (set-last-read! fd (loop-now-ms))
  (set-pinged-at! fd -1)
  (set-stalled-since! fd -1)
  (set-closing-since! fd -1)
  (set-queue-offset! fd 0)
  (set-buffered! fd 0)
  (set-refused! fd 0)
  (set-close-code! fd 0)
  ;; A close that raised half way may have left its number.
  (let ((old (settings-id fd)))
    (unless (zero? old) (numbered-release! settings-table old)))
  (set-settings-id! fd (numbered-take! settings-table
                                       (lambda (known) (equal? known settings))
                                       (lambda () settings)))
  (set-extras! fd #f)
  (set-transport! fd transport)
  (set-codec! fd codec)
  (handle-set! fd #f)
  (unless sweep-timer
    (set! sweep-timer (loop-call-after! 1000 sweep!)))
  ;; From here the row is the connection's: what raises closes it (1011).
  (guarded fd (lambda () (on-open (handle fd))))
  (when (and (> (bytevector-length leftover) 0) (live? fd))
    (guarded fd (lambda ()
                  (websocket-reader-feed! (reader! fd) leftover 0
                                          (bytevector-length leftover))
                  (take-events! fd)))))

(define (guarded fd thunk)
  ;; An app's callback that raises is logged, and its connection closed
  ;; with 1011, as a handler's exception is a 500.
  (catch #t
    thunk
    (lambda (key . args)
      (log-line "websocket callback: ~a ~s" key args)
      (when (live? fd)
        (send-close! fd 1011 "internal error")
        (set-state! fd state-flushing)
        (close-if-flushed! fd)))))

;;;
;;; Reading
;;;

;; One buffer for every connection of the loop: reads happen one at a
;; time, on the loop's thread.
(define read-size 65536)
(define read-buffer (make-bytevector read-size))
(define read-address (bytevector-address read-buffer))

(define (read-ready! fd)
  (let ((n ((transport-read (transport fd)) fd read-address 0 read-size)))
    (cond
     ((> n 0)
      (set-last-read! fd (loop-now-ms))
      (set-pinged-at! fd -1)
      (when (live? fd)
        (websocket-reader-feed! (reader! fd) read-buffer 0 n)
        (take-events! fd)))
     ((= n (- EAGAIN)) #f)
     (else
      ;; end of file or an error: the client is gone
      (close-now! fd 1006 "connection lost")))))

(define (take-events! fd)
  (let lp ()
    (when (live? fd)
      (let ((event (websocket-reader-next! (reader! fd))))
        (when event
          (case (car event)
            ((text binary)
             (when (= (state fd) state-open)
               (let ((on-message (settings-on-message (settings fd)))
                     (ws (handle fd)))
                 (guarded fd (lambda () (on-message ws (cdr event)))))))
            ((ping) (enqueue! fd (websocket-frame opcode-pong (cdr event))))
            ((pong) #f)
            ((close)
             (let ((code (cadr event)) (reason (cddr event)))
               (set-close-code! fd (or code 1005))
               (set-close-reason! fd reason)
               (when (= (state fd) state-open)
                 ;; Echo the code (RFC 6455, 5.5.1).
                 (enqueue! fd (websocket-close-frame code)))
               (set-state! fd state-flushing)
               (close-if-flushed! fd)))
            ((error)
             (let ((code (cadr event)) (reason (cddr event)))
               (send-close! fd code reason)
               (set-state! fd state-flushing)
               (close-if-flushed! fd))))
          (lp))))))

;;;
;;; Writing
;;;

(define (queue-full? fd bytes)
  ;; -> #t, and the refusal noted for ON-DRAIN, when BYTES more would
  ;; pass the queue's bound; a message is always taken by an empty queue.
  (and (> (+ (buffered fd) bytes) (settings-max-buffer (settings fd)))
       (> (buffered fd) 0)
       (begin (set-refused! fd 1) #t)))

(define (enqueue! fd frame)
  ;; Queue FRAME and send as much of it as the socket takes; -> #t.
  (let ((was-empty? (null? (queue fd))))
    (set-queue! fd (append (queue fd) (list frame)))
    (set-buffered! fd (+ (buffered fd) (bytevector-length frame)))
    (when was-empty? (flush! fd))
    #t))

(define (flush! fd)
  ;; Write what the socket takes; watch for writable while some is left.
  (let ((write (transport-write (transport fd))))
    (let lp ()
      (let ((frames (queue fd)))
        (if (null? frames)
            (begin
              (loop-want-write! fd #f)
              (set-stalled-since! fd -1)
              (when (= (refused fd) 1)
                (set-refused! fd 0)
                (when (= (state fd) state-open)
                  (let ((on-drain (settings-on-drain (settings fd)))
                        (ws (handle fd)))
                    (guarded fd (lambda () (on-drain ws))))))
              (close-if-flushed! fd))
            (let* ((frame (car frames))
                   (offset (queue-offset fd))
                   (left (- (bytevector-length frame) offset))
                   (n (write fd (bytevector-address frame) offset left)))
              (cond
               ((= n left)
                (set-queue! fd (cdr frames))
                (set-queue-offset! fd 0)
                (set-buffered! fd (- (buffered fd) n))
                (lp))
               ((> n 0)
                (set-queue-offset! fd (+ offset n))
                (set-buffered! fd (- (buffered fd) n))
                (set-stalled-since! fd (loop-now-ms))
                (lp))
               ((= n (- EAGAIN))
                (when (< (stalled-since fd) 0)
                  (set-stalled-since! fd (loop-now-ms)))
                (loop-want-write! fd #t))
               (else
                (close-now! fd 1006 "connection lost")))))))))

(define (send-close! fd code reason)
  (let ((frame (websocket-close-frame code reason))) ; checks CODE
    (when (= (close-code fd) 0)
      (set-close-code! fd (or code 1005))
      (set-close-reason! fd reason))
    (enqueue! fd frame)))

(define (close-if-flushed! fd)
  (when (and (= (state fd) state-flushing)
             (null? (queue fd)))
    ;; The server closes the TCP connection first (RFC 6455, 7.1.1).
    (close-now! fd (if (= (close-code fd) 0) 1005 (close-code fd))
                (or (close-reason fd) ""))))

(define (close-now! fd code reason)
  ;; Close the socket, once, tell the app, and empty FD's row.
  (when (live-or-flushing? fd)
    (let ((on-close (settings-on-close (settings fd)))
          (ws (handle fd))
          (codec (codec fd)))
      ;; First: nothing below runs twice, ON-CLOSE cannot send, and
      ;; `websocket-count' no longer counts it.
      (set-state! fd state-ending)
      (set! open-count (- open-count 1))
      (set-queue! fd '())
      (set-buffered! fd 0)
      (loop-unwatch! fd)
      ((transport-close (transport fd)) fd)
      (when codec
        (deflater-end! (codec-deflater codec))
        (inflater-end! (codec-inflater codec)))
      (catch #t
        (lambda () (on-close ws code reason))
        (lambda (key . args)
          (log-line "websocket on-close: ~a ~s" key args)))
      (set-state! fd state-none)
      (numbered-release! settings-table (settings-id fd))
      (set-settings-id! fd 0)
      (set-extras! fd #f)
      (handle-set! fd #f))))

(define (stop! fd)
  ;; The loop stops: say so if the socket takes it at once, and close.
  ;; Its timers are gone with it.
  (set! sweep-timer #f)
  (when (= (state fd) state-open)
    (let ((frame (websocket-close-frame 1001 "server going away")))
      ((transport-write (transport fd)) fd (bytevector-address frame) 0
       (bytevector-length frame))))
  (close-now! fd 1001 "server going away"))

;;;
;;; The API
;;;

(define (websocket-send ws message)
  "Send MESSAGE on WS: a string as a text message, a bytevector as a
binary one.  Return #t when it is sent or queued, #f when WS is closing
or its queue is full (the client reads slowly; ON-DRAIN says when to
send again)."
  (let ((fd (open-fd ws)))
    (and fd
         (= (state fd) state-open)
         (let ((bytes (if (string? message) (string->utf8 message) message)))
           ;; Checked before compressing: a compressed message must be
           ;; sent once compressed, since the client's inflater follows
           ;; ours.  Deflate adds a few bytes at most, and the frame's head.
           (and (not (queue-full? fd (bytevector-length bytes)))
                (enqueue! fd (message-frame fd (if (string? message) opcode-text
                                                   opcode-binary)
                                            bytes)))))))

(define (message-frame fd opcode bytes)
  (let ((codec (codec fd)))
    (if codec
        (let ((frame (websocket-frame opcode
                                      (deflate-message (codec-deflater codec) bytes)
                                      #:rsv1? #t)))
          (when (codec-reset? codec)
            (deflater-reset! (codec-deflater codec)))
          frame)
        (websocket-frame opcode bytes))))

(define* (websocket-ping ws #:optional (payload #vu8()))
  "Send a ping carrying PAYLOAD (at most 125 bytes) on WS; return #t, or
#f when WS is closing."
  (let ((fd (open-fd ws)))
    (and fd
         (= (state fd) state-open)
         (enqueue! fd (websocket-frame opcode-ping payload)))))

(define* (websocket-close ws #:optional (code 1000) (reason ""))
  "Start the close handshake on WS with CODE (1000 to 1003, 1007 to 1011,
or 3000 to 4999) and REASON: no message is sent after it, and the
socket is closed when the client answers (or after the ping timeout).
Return nothing."
  (unless (websocket-close-code-valid? code)
    (error "websocket-close: not a code an endpoint may send:" code))
  (let ((fd (open-fd ws)))
    (when (and fd (= (state fd) state-open))
      (send-close! fd code reason)
      (when (= (state fd) state-open)
        (set-state! fd state-closing)
        (set-closing-since! fd (loop-now-ms)))))
  (values))

;;;
;;; The sweep
;;;

(define (since? time now ms)
  ;; -> true when TIME (or -1, none) is MS or more before NOW; + 1, as the
  ;; clock is in whole milliseconds (see `set-deadline!')
  (and (>= time 0) (> now (+ time ms))))

(define (sweep-one! fd now)
  ;; -> a reason to close FD now, or #f; pings it, drops its empty reader
  (let ((timeout (settings-timeout-ms (settings fd)))
        (reader (reader fd)))
    (when (and reader (websocket-reader-idle? reader))
      (set-reader! fd #f))
    (let ((more (extras fd)))
      (when (and more (extras-idle? more))
        (set-extras! fd #f)))
    (cond
     ((since? (pinged-at fd) now timeout) "no answer to a ping")
     ((since? (stalled-since fd) now timeout) "the client does not read")
     ((since? (closing-since fd) now timeout) "no answer to the close")
     ((and (= (state fd) state-open)
           (< (pinged-at fd) 0)
           (since? (last-read fd) now (settings-ping-ms (settings fd))))
      (set-pinged-at! fd now)
      (enqueue! fd (websocket-frame opcode-ping #vu8()))
      #f)
     (else #f))))

(define (sweep!)
  (let ((now (loop-now-ms)))
    (let lp ((fd 0) (late '()))
      (cond
       ((>= fd (* (vector-length numbers) (+ chunk-mask 1)))
        (for-each (lambda (entry) (close-now! (car entry) 1006 (cdr entry))) late))
       ((not (row? fd))                 ; no chunk here: the next one
        (lp (+ fd chunk-mask 1) late))
       (else
        (let ((reason (and (not (= (state fd) state-none)) (sweep-one! fd now))))
          (lp (+ fd 1) (if reason (cons (cons fd reason) late) late))))))
    (set! sweep-timer
          (and (> open-count 0)
               (loop-call-after! 1000 sweep!)))))

;;; (plucky web websocket) ends here
