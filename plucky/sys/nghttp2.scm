;;; (plucky sys nghttp2) --- HTTP/2 framing, HPACK and flow control by libnghttp2

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; libnghttp2 (Debian's libnghttp2-14) does the byte-level work of
;;; HTTP/2 (RFC 9113): frames, HPACK (RFC 7541) with both tables and
;;; Huffman coding, stream states, flow control, SETTINGS and PING
;;; acknowledgements, and many of the limits against abusive peers.  It
;;; does no I/O here: the server hands it what it read
;;; (`nghttp2-session-receive!', nghttp2_session_mem_recv) and takes what
;;; it must write (`nghttp2-session-send!', nghttp2_session_mem_send).
;;;
;;; What nghttp2 learns it tells through callbacks, C calling Scheme
;;; (`procedure->pointer').  Code called back from C must not suspend nor
;;; let an exception unwind through C frames, so the callbacks only
;;; collect: each calls a procedure of the session's <nghttp2-events>
;;; with plain values (numbers, bytevectors), and a raised exception
;;; fails the session (NGHTTP2_ERR_CALLBACK_FAILURE).  The server runs
;;; the handlers after `nghttp2-session-receive!' has returned.  A
;;; response body is pulled by nghttp2 through one data-source callback,
;;; whose Scheme procedure copies bytes into nghttp2's buffer, or says
;;; "deferred" until more of the body exists (`nghttp2-session-resume!').
;;;
;;; The callbacks are made once per process and shared by every session;
;;; a session's user_data is a number that finds its events in a table.
;;; A session is freed by `nghttp2-session-free!' (once, never from a
;;; finalizer).  Each call into C costs a few hundred instructions and
;;; each callback more (bench/instructions-h2), so the server makes few:
;;; one receive per read, sends batched, and only the callbacks a request
;;; needs (a field, a frame received, a body read, a stream closed).  The
;;; callbacks allocate as little as they can: a frame is read through one
;;; view of the address nghttp2 keeps its frames at, a field's bytes are
;;; handed over as views kept by address, and the response's fields go
;;; to nghttp2 from a buffer kept for the purpose.  These buffers belong to the thread that runs the sessions
;;; (the worker's loop).
;;;
;;; The HPACK coder (`make-hpack-decoder', `make-hpack-encoder') is
;;; nghttp2's own, for tests and tools that check header blocks.
;;;
;;; Code:

(define-module (plucky sys nghttp2)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module ((system foreign)
                #:select (pointer->procedure procedure->pointer pointer-address
                          make-pointer pointer->bytevector int uint8 int32 uint32
                          size_t ssize_t uint64 void))
  #:use-module ((system foreign-library)
                #:select (load-foreign-library foreign-library-pointer))
  #:use-module ((plucky sys libc) #:select (bytevector-address fd-pread))
  #:export (nghttp2-available?
            nghttp2-version

            make-nghttp2-events
            make-nghttp2-session
            nghttp2-session?
            nghttp2-session-receive!
            nghttp2-session-send!
            nghttp2-session-want-read?
            nghttp2-session-want-write?
            nghttp2-session-free!
            nghttp2-submit-response!
            nghttp2-submit-rst-stream!
            nghttp2-submit-goaway!
            nghttp2-session-terminate!
            nghttp2-session-resume!
            nghttp2-last-stream-id
            nghttp2-error-message

            NGHTTP2_DATA NGHTTP2_HEADERS NGHTTP2_PRIORITY NGHTTP2_RST_STREAM
            NGHTTP2_SETTINGS NGHTTP2_PUSH_PROMISE NGHTTP2_PING NGHTTP2_GOAWAY
            NGHTTP2_WINDOW_UPDATE NGHTTP2_CONTINUATION
            NGHTTP2_FLAG_END_STREAM NGHTTP2_FLAG_END_HEADERS NGHTTP2_FLAG_ACK
            NGHTTP2_NO_ERROR NGHTTP2_PROTOCOL_ERROR NGHTTP2_INTERNAL_ERROR
            NGHTTP2_FLOW_CONTROL_ERROR NGHTTP2_REFUSED_STREAM NGHTTP2_CANCEL
            NGHTTP2_ENHANCE_YOUR_CALM
            NGHTTP2_ERR_DEFERRED NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE
            NGHTTP2_ERR_CALLBACK_FAILURE
            NGHTTP2_DATA_FLAG_EOF

            make-hpack-decoder
            hpack-decode
            hpack-decoder-table
            hpack-decoder-size
            make-hpack-encoder
            hpack-encode
            hpack-free!))

;;;
;;; Constants (nghttp2/nghttp2.h)
;;;

(define NGHTTP2_DATA 0)
(define NGHTTP2_HEADERS 1)
(define NGHTTP2_PRIORITY 2)
(define NGHTTP2_RST_STREAM 3)
(define NGHTTP2_SETTINGS 4)
(define NGHTTP2_PUSH_PROMISE 5)
(define NGHTTP2_PING 6)
(define NGHTTP2_GOAWAY 7)
(define NGHTTP2_WINDOW_UPDATE 8)
(define NGHTTP2_CONTINUATION 9)

(define NGHTTP2_FLAG_END_STREAM 1)
(define NGHTTP2_FLAG_END_HEADERS 4)
(define NGHTTP2_FLAG_ACK 1)

(define NGHTTP2_NO_ERROR 0)
(define NGHTTP2_PROTOCOL_ERROR 1)
(define NGHTTP2_INTERNAL_ERROR 2)
(define NGHTTP2_FLOW_CONTROL_ERROR 3)
(define NGHTTP2_REFUSED_STREAM 7)
(define NGHTTP2_CANCEL 8)
(define NGHTTP2_ENHANCE_YOUR_CALM 11)

(define NGHTTP2_ERR_DEFERRED -508)
(define NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE -521)
(define NGHTTP2_ERR_CALLBACK_FAILURE -902)

(define NGHTTP2_DATA_FLAG_EOF 1)

(define NGHTTP2_SETTINGS_HEADER_TABLE_SIZE 1)
(define NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS 3)
(define NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE 4)
(define NGHTTP2_SETTINGS_MAX_FRAME_SIZE 5)
(define NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE 6)

(define NGHTTP2_HD_INFLATE_FINAL 1)
(define NGHTTP2_HD_INFLATE_EMIT 2)

;;;
;;; The library
;;;

(define-syntax-rule (define-calls bind-calls! (name c-name return args) ...)
  ;; Each NAME, #f until the library is opened.
  (begin (define name #f) ...
         (define (bind-calls! fn) (set! name (fn c-name return args)) ...)))

(define-calls bind-calls!
  (%version "nghttp2_version" uint64 (list int))
  (%strerror "nghttp2_strerror" uint64 (list int))
  (%callbacks-new "nghttp2_session_callbacks_new" int (list uint64))
  (%set-on-header "nghttp2_session_callbacks_set_on_header_callback" void (list uint64 uint64))
  (%set-on-frame-recv "nghttp2_session_callbacks_set_on_frame_recv_callback"
                      void (list uint64 uint64))
  (%set-on-data-chunk "nghttp2_session_callbacks_set_on_data_chunk_recv_callback"
                      void (list uint64 uint64))
  (%set-on-stream-close "nghttp2_session_callbacks_set_on_stream_close_callback"
                        void (list uint64 uint64))
  (%option-new "nghttp2_option_new" int (list uint64))
  (%option-del "nghttp2_option_del" void (list uint64))
  (%option-no-auto-window-update "nghttp2_option_set_no_auto_window_update"
                                 void (list uint64 int))
  (%option-max-outbound-ack "nghttp2_option_set_max_outbound_ack" void (list uint64 size_t))
  (%option-max-settings "nghttp2_option_set_max_settings" void (list uint64 size_t))
  (%server-new "nghttp2_session_server_new2" int (list uint64 uint64 uint64 uint64))
  (%session-del "nghttp2_session_del" void (list uint64))
  (%mem-recv "nghttp2_session_mem_recv" ssize_t (list uint64 uint64 size_t))
  (%mem-send "nghttp2_session_mem_send" ssize_t (list uint64 uint64))
  (%want-read "nghttp2_session_want_read" int (list uint64))
  (%want-write "nghttp2_session_want_write" int (list uint64))
  (%submit-settings "nghttp2_submit_settings" int (list uint64 uint8 uint64 size_t))
  (%submit-response "nghttp2_submit_response" int (list uint64 int32 uint64 size_t uint64))
  (%submit-rst-stream "nghttp2_submit_rst_stream" int (list uint64 uint8 int32 uint32))
  (%submit-goaway "nghttp2_submit_goaway" int
                  (list uint64 uint8 int32 uint32 uint64 size_t))
  (%terminate "nghttp2_session_terminate_session" int (list uint64 uint32))
  (%resume-data "nghttp2_session_resume_data" int (list uint64 int32))
  (%last-proc-stream-id "nghttp2_session_get_last_proc_stream_id" int32 (list uint64))
  (%inflate-new "nghttp2_hd_inflate_new" int (list uint64))
  (%inflate-del "nghttp2_hd_inflate_del" void (list uint64))
  (%inflate-change-size "nghttp2_hd_inflate_change_table_size" int (list uint64 size_t))
  (%inflate-hd2 "nghttp2_hd_inflate_hd2" ssize_t (list uint64 uint64 uint64 uint64 size_t int))
  (%inflate-end "nghttp2_hd_inflate_end_headers" int (list uint64))
  (%inflate-entries "nghttp2_hd_inflate_get_num_table_entries" size_t (list uint64))
  (%inflate-entry "nghttp2_hd_inflate_get_table_entry" uint64 (list uint64 size_t))
  (%inflate-size "nghttp2_hd_inflate_get_dynamic_table_size" size_t (list uint64))
  (%deflate-new "nghttp2_hd_deflate_new" int (list uint64 size_t))
  (%deflate-del "nghttp2_hd_deflate_del" void (list uint64))
  (%deflate-bound "nghttp2_hd_deflate_bound" size_t (list uint64 uint64 size_t))
  (%deflate-hd "nghttp2_hd_deflate_hd" ssize_t (list uint64 uint64 size_t uint64 size_t)))

;; Present in Debian 12's 1.52 (backported with the fixes of
;; CVE-2023-44487 and CVE-2024-28182), upstream only from 1.57 and 1.61:
;; the reset rate is looked up, not required; the bound on CONTINUATION
;; frames is required (it is the only one: no callback counts them).
(define %option-stream-reset-rate-limit #f)
(define %option-max-continuations #f)

(define library #f)
(define callbacks 0)                    ; the shared nghttp2_session_callbacks*

(define (open-libnghttp2!)
  (unless library
    (let* ((lib (load-foreign-library "libnghttp2" #:extensions '(".so.14" ".so")))
           (fn (lambda (name return args)
                 (pointer->procedure return (foreign-library-pointer lib name) args)))
           (maybe (lambda (name return args)
                    (false-if-exception (fn name return args)))))
      (bind-calls! fn)
      (set! %option-stream-reset-rate-limit
            (maybe "nghttp2_option_set_stream_reset_rate_limit" void
                   (list uint64 uint64 uint64)))
      (set! %option-max-continuations
            (or (maybe "nghttp2_option_set_max_continuations" void (list uint64 size_t))
                (error "libnghttp2 lacks nghttp2_option_set_max_continuations \
(CVE-2024-27316): too old")))
      (set! library lib)
      (set! callbacks (make-callbacks)))))

(define (nghttp2-available?)
  "Return true when libnghttp2 can be loaded."
  (and (false-if-exception (begin (open-libnghttp2!) #t)) #t))

(define (nghttp2-version)
  "Return the version of libnghttp2, a string such as \"1.52.0\"."
  (open-libnghttp2!)
  ;; nghttp2_info {int age; int version_num; const char *version_str; …}
  (let ((info (pointer->bytevector (make-pointer (%version 0)) 16)))
    (c-string (bytevector-u64-native-ref info 8))))

(define (c-string address)
  (let lp ((n 0))
    (if (zero? (bytevector-u8-ref (pointer->bytevector (make-pointer (+ address n)) 1) 0))
        (utf8->string (bytevector-copy (pointer->bytevector (make-pointer address) n)))
        (lp (+ n 1)))))

(define (nghttp2-error-message code)
  "Return nghttp2's message for its error CODE, a negative number."
  (open-libnghttp2!)
  (c-string (%strerror code)))

(define (out-pointer)
  ;; -> a bytevector of 8 bytes that a C call stores a pointer into
  (make-bytevector 8 0))

;;;
;;; What a session tells its owner
;;;

(define-record-type <nghttp2-events>
  (make-nghttp2-events header frame data stream-close read-data)
  nghttp2-events?
  ;; Each is called on the thread that called receive or send, from
  ;; within nghttp2; each returns 0, or NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE
  ;; (the stream is reset), or NGHTTP2_ERR_CALLBACK_FAILURE (the session
  ;; fails).  A stream's first field tells that it began.
  ;; (stream-id name name-length value value-length): the first
  ;; NAME-LENGTH bytes of the bytevector NAME, …, valid during the call
  ;; only
  (header events-header)
  (frame events-frame)                  ; (type flags stream-id error-code)
  (data events-data)                    ; (stream-id bytevector length), as header's
  (stream-close events-stream-close)    ; (stream-id error-code)
  ;; (stream-id length) -> (values from start count flags): the next
  ;; COUNT (at most LENGTH) bytes of the body are FROM [START, START +
  ;; COUNT), FROM a bytevector, or a file descriptor read at offset START;
  ;; FROM #f sends nothing, COUNT being 0 or NGHTTP2_ERR_DEFERRED (no
  ;; bytes yet: see `nghttp2-session-resume!'); FLAGS has
  ;; NGHTTP2_DATA_FLAG_EOF once the body ends
  (read-data events-read-data))

;; user_data -> <nghttp2-events>: sessions by the number they were given.
(define sessions (make-hash-table))
(define next-session-key 1)

(define-syntax-rule (events-of user-data)
  (hashv-ref sessions user-data))

;; Nothing may unwind through nghttp2's frames.  Each callback runs
;; under a prompt of this tag, and each call into nghttp2 that calls back
;; (`with-callback-guard') under an exception handler that aborts to that
;; prompt: an exception in a callback ends there, and the callback
;; returns NGHTTP2_ERR_CALLBACK_FAILURE.  One handler per call into
;; nghttp2 rather than a `catch' per callback: a `catch' costs about what
;; the callback itself does (bench/instructions-h2).
(define callback-tag (make-prompt-tag "nghttp2 callback"))
(define in-callback? #f)                ; inside a callback's prompt

(define (callback-failed k exception)
  (set! in-callback? #f)
  (let ((port (current-error-port)))
    (format port "plucky: an HTTP/2 callback failed: ~a~%" exception)
    (force-output port))
  NGHTTP2_ERR_CALLBACK_FAILURE)

(define-syntax-rule (guarded expression)
  ;; EXPRESSION's value, or NGHTTP2_ERR_CALLBACK_FAILURE if it raised
  (call-with-prompt callback-tag
    (lambda ()
      (set! in-callback? #t)
      (let ((value expression))
        (set! in-callback? #f)
        value))
    callback-failed))

(define (abort-callback exception)
  (if in-callback?
      (abort-to-prompt callback-tag exception)
      (raise-exception exception)))

(define-syntax-rule (with-callback-guard expression)
  (with-exception-handler abort-callback (lambda () expression)))

;; nghttp2_frame_hd: {size_t length; int32_t stream_id; uint8_t type;
;; uint8_t flags; …}; nghttp2_rst_stream and nghttp2_goaway put their
;; error code after it (at 16 and 20).  nghttp2 hands every frame it
;; receives at the same address (its session's frame being read): its
;; view is kept (`view', below).
(define-syntax-rule (frame-bytes address) (view address 24))

(define-syntax-rule (frame-stream-id bv) (bytevector-s32-native-ref bv 8))
(define-syntax-rule (frame-type bv) (bytevector-u8-ref bv 12))
(define-syntax-rule (frame-flags bv) (bytevector-u8-ref bv 13))

;; Views of the memory nghttp2 hands over (a field's name and value, a
;; DATA payload, the bytes to send), kept by address: a field indexed in
;; HPACK's static or dynamic table comes from the same address request
;; after request, and nghttp2's buffers stay where they are, so a view
;; is mostly found, not made (a view is two objects to allocate; a
;; memcpy through the FFI costs more: bench/instructions-h2).  A view
;; may be longer than the bytes at its address now: only LENGTH bytes
;; are read, during the callback.  Direct-mapped, a slot per address
;; hash; the loop's thread only.
(define view-slots 64)
(define view-addresses (make-vector view-slots 0))
(define views (make-vector view-slots #f))

(define (view address length)
  (let* ((slot (logand (ash address -3) (- view-slots 1)))
         (view (vector-ref views slot)))
    (if (and (eqv? (vector-ref view-addresses slot) address)
             (<= length (bytevector-length view)))
        view
        (let ((view (pointer->bytevector (make-pointer address) (max length 1))))
          (vector-set! views slot view)
          (vector-set! view-addresses slot address)
          view))))

;; The procedures behind the shared callbacks, kept reachable here.
(define callback-pointers '())

(define (install-callback! cbs setter procedure return args)
  (let ((pointer (procedure->pointer return procedure args)))
    (set! callback-pointers (cons pointer callback-pointers))
    (setter cbs (pointer-address pointer))))

(define (make-callbacks)
  ;; -> the address of the nghttp2_session_callbacks every session shares
  (let ((out (out-pointer)))
    (%callbacks-new (bytevector-address out))
    (let ((cbs (bytevector-u64-native-ref out 0)))
      (install-callback!
       cbs %set-on-header
       (lambda (session frame name namelen value valuelen flags user-data)
         (guarded ((events-header (events-of user-data))
                   (frame-stream-id (frame-bytes frame))
                   (view name namelen) namelen (view value valuelen) valuelen)))
       int (list uint64 uint64 uint64 size_t uint64 size_t uint8 uint64))
      (install-callback!
       cbs %set-on-frame-recv
       (lambda (session frame user-data)
         (guarded
          (let* ((bv (frame-bytes frame))
                 (type (frame-type bv)))
            ((events-frame (events-of user-data))
             type (frame-flags bv) (frame-stream-id bv)
             (cond ((= type NGHTTP2_RST_STREAM)
                    (bytevector-u32-native-ref bv 16))
                   ((= type NGHTTP2_GOAWAY)
                    (bytevector-u32-native-ref bv 20))
                   (else 0))))))
       int (list uint64 uint64 uint64))
      (install-callback!
       cbs %set-on-data-chunk
       (lambda (session flags stream-id data len user-data)
         (guarded ((events-data (events-of user-data)) stream-id (view data len) len)))
       int (list uint64 uint8 int32 uint64 size_t uint64))
      (install-callback!
       cbs %set-on-stream-close
       (lambda (session stream-id error-code user-data)
         (guarded ((events-stream-close (events-of user-data)) stream-id error-code)))
       int (list uint64 int32 uint32 uint64))
      cbs)))

;; The data source callback of every response body: nghttp2 asks for
;; each DATA frame's bytes into its frame buffer, mostly at one address,
;; and its flags word is on its stack: their views are kept (`view').
(define read-callback #f)

(define (read-callback-address)
  (unless read-callback
    (set! read-callback
          (procedure->pointer
           ssize_t
           (lambda (session stream-id buf length data-flags source user-data)
             (guarded
              (call-with-values
                  (lambda ()
                    ((events-read-data (events-of user-data)) stream-id length))
                (lambda (from start count flags)
                  (let ((count
                         (cond
                          ((bytevector? from)
                           (bytevector-copy! from start (view buf length) 0 count)
                           count)
                          ((integer? from)
                           ;; a file's descriptor: COUNT bytes at START
                           (let ((n (fd-pread from buf 0 count start)))
                             (if (< n 0) NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE n)))
                          (else count))))
                    (unless (zero? flags)
                      (bytevector-u32-native-set! (view data-flags 4) 0 flags))
                    count)))))
           (list uint64 int32 uint64 size_t uint64 uint64 uint64))))
  (pointer-address read-callback))

;;;
;;; Sessions
;;;

(define-record-type <nghttp2-session>
  (%make-nghttp2-session pointer key out out-address)
  nghttp2-session?
  (pointer session-pointer set-session-pointer!) ; nghttp2_session*, 0 once freed
  (key session-key)                              ; its user_data
  (out session-out)                              ; 8 bytes for mem_send's pointer
  (out-address session-out-address))             ; OUT's address

(define (settings-entries alist)
  ;; -> a bytevector of nghttp2_settings_entry {int32 id; uint32 value}
  (let ((bv (make-bytevector (* 8 (length alist)) 0)))
    (let lp ((alist alist) (i 0))
      (unless (null? alist)
        (bytevector-s32-native-set! bv i (caar alist))
        (bytevector-u32-native-set! bv (+ i 4) (cdar alist))
        (lp (cdr alist) (+ i 8))))
    bv))

(define* (make-nghttp2-session events #:key (max-concurrent-streams 100)
                               (initial-window-size 65535)
                               (max-frame-size 16384)
                               (header-table-size 4096)
                               (max-header-list-size 65536)
                               (max-outbound-ack 1000)
                               (max-settings 32)
                               (max-continuations 8)
                               (reset-burst 1000) (reset-rate 33))
  "Return a server session whose happenings go to EVENTS (an
<nghttp2-events>), its SETTINGS frame queued: MAX-CONCURRENT-STREAMS,
INITIAL-WINDOW-SIZE, MAX-FRAME-SIZE, HEADER-TABLE-SIZE (the HPACK
dynamic table the client may use) and MAX-HEADER-LIST-SIZE are
advertised.  MAX-OUTBOUND-ACK bounds the acknowledgements (of SETTINGS
and PING) queued for a client that does not read, MAX-SETTINGS the
entries of one SETTINGS frame, MAX-CONTINUATIONS the CONTINUATION frames
of one header block, RESET-BURST and RESET-RATE (per second) the streams
a client may reset: past these nghttp2 ends the session (where the
library has the last two).  The client's preface is expected first."
  (open-libnghttp2!)
  (let ((out (out-pointer))
        (option-out (out-pointer))
        (key next-session-key))
    (set! next-session-key (+ 1 next-session-key))
    (%option-new (bytevector-address option-out))
    (let ((option (bytevector-u64-native-ref option-out 0)))
      (%option-max-outbound-ack option max-outbound-ack)
      (%option-max-settings option max-settings)
      (%option-max-continuations option max-continuations)
      (when %option-stream-reset-rate-limit
        (%option-stream-reset-rate-limit option reset-burst reset-rate))
      (let ((rv (%server-new (bytevector-address out) callbacks key option)))
        (%option-del option)
        (unless (zero? rv)
          (error "nghttp2_session_server_new2 failed" (nghttp2-error-message rv)))))
    (let* ((send-out (out-pointer))
           (session (%make-nghttp2-session (bytevector-u64-native-ref out 0) key
                                           send-out (bytevector-address send-out)))
           (entries (settings-entries
                     `((,NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS . ,max-concurrent-streams)
                       (,NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE . ,initial-window-size)
                       (,NGHTTP2_SETTINGS_MAX_FRAME_SIZE . ,max-frame-size)
                       (,NGHTTP2_SETTINGS_HEADER_TABLE_SIZE . ,header-table-size)
                       (,NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE . ,max-header-list-size)))))
      (hashv-set! sessions key events)
      (%submit-settings (session-pointer session) 0 (bytevector-address entries)
                        (quotient (bytevector-length entries) 8))
      session)))

(define (nghttp2-session-free! session)
  "Free SESSION's memory in nghttp2; return nothing.  A second call does
nothing."
  (let ((pointer (session-pointer session)))
    (unless (zero? pointer)
      (set-session-pointer! session 0)
      (hashv-remove! sessions (session-key session))
      (%session-del pointer)))
  (values))

(define (nghttp2-session-receive! session address count)
  "Hand SESSION the COUNT bytes read at ADDRESS; return COUNT, or a
negative nghttp2 error code when the session failed (the client broke
the protocol or a limit: a GOAWAY is then queued for sending)."
  (with-callback-guard (%mem-recv (session-pointer session) address count)))

(define (nghttp2-session-send! session put! limit)
  "Call (PUT! bytevector count) with each run of bytes SESSION has to
send, until it has none or LIMIT bytes were put: the first COUNT bytes
of BYTEVECTOR, only valid during the call.  Return the total, or a
negative nghttp2 error code."
  (let ((pointer (session-pointer session))
        (out (session-out session))
        (out-address (session-out-address session)))
    (with-callback-guard
     (let lp ((total 0))
       (if (>= total limit)
           total
           (let ((n (%mem-send pointer out-address)))
             (cond
              ((> n 0)
               (put! (view (bytevector-u64-native-ref out 0) n) n)
               (lp (+ total n)))
              ((zero? n) total)
              (else n))))))))

(define (nghttp2-session-want-read? session)
  "Return true while SESSION still expects input from the client."
  (not (zero? (%want-read (session-pointer session)))))

(define (nghttp2-session-want-write? session)
  "Return true while SESSION has frames to send, flow control allowing."
  (not (zero? (%want-write (session-pointer session)))))

(define (name-value-array pairs)
  ;; PAIRS: ((name . value) …) of bytevectors.  -> (values nva blob
  ;; count): an array of nghttp2_nv {uint8_t *name, *value; size_t
  ;; namelen, valuelen; uint8_t flags} (40 bytes each) pointing into
  ;; BLOB, which the caller keeps until the call that takes them returns
  ;; (nghttp2 copies them).
  (let* ((count (length pairs))
         (size (let lp ((pairs pairs) (n 0))
                 (if (null? pairs)
                     n
                     (lp (cdr pairs) (+ n (bytevector-length (caar pairs))
                                        (bytevector-length (cdar pairs)))))))
         (blob (make-bytevector (max 1 size)))
         (base (bytevector-address blob))
         (nva (make-bytevector (* 40 (max 1 count)) 0)))
    (let lp ((pairs pairs) (i 0) (at 0))
      (unless (null? pairs)
        (let ((name (caar pairs))
              (value (cdar pairs)))
          (bytevector-copy! name 0 blob at (bytevector-length name))
          (bytevector-copy! value 0 blob (+ at (bytevector-length name))
                            (bytevector-length value))
          (bytevector-u64-native-set! nva i (+ base at))
          (bytevector-u64-native-set! nva (+ i 8) (+ base at (bytevector-length name)))
          (bytevector-u64-native-set! nva (+ i 16) (bytevector-length name))
          (bytevector-u64-native-set! nva (+ i 24) (bytevector-length value))
          (lp (cdr pairs) (+ i 40)
              (+ at (bytevector-length name) (bytevector-length value))))))
    (values nva blob count)))

;;; A response's fields go to nghttp2 as an array of nghttp2_nv kept
;;; here and grown as needed (nghttp2 copies the array and the bytes it
;;; points to before `nghttp2_submit_response' returns), its :status
;;; from a table of the codes' digits, and its data provider, which
;;; nghttp2 copies too, from one struct: no allocation per response.

(define response-nva (make-bytevector (* 40 16) 0))
(define response-nva-address #f)
(define status-name (string->utf8 ":status"))
(define status-name-address #f)
(define status-digits (make-vector 1000 #f)) ; code -> (bytevector . address)
(define provider #f)                          ; nghttp2_data_provider {source; read}
(define provider-address #f)

(define (status-field code)
  (or (vector-ref status-digits code)
      (let* ((bv (string->utf8 (number->string code)))
             (entry (cons bv (bytevector-address bv))))
        (vector-set! status-digits code entry)
        entry)))

(define (nghttp2-submit-response! session stream-id code base spans count body?)
  "Queue a response of status CODE on STREAM-ID of SESSION, its other
fields COUNT spans of the bytes at the address BASE: SPANS is a
bytevector of native u32s, four per field (name start and end, value
start and end, from BASE), each name in lower case.  When BODY?, its
body follows through the session's READ-DATA event, else the stream ends
with the fields.  Return 0 or a negative nghttp2 error code."
  (unless provider
    (set! provider (make-bytevector 16 0))
    (bytevector-u64-native-set! provider 8 (read-callback-address))
    (set! provider-address (bytevector-address provider))
    (set! status-name-address (bytevector-address status-name)))
  (when (or (not response-nva-address)
            (> (* 40 (+ count 1)) (bytevector-length response-nva)))
    (set! response-nva (make-bytevector (* 40 (max 16 (* 2 (+ count 1)))) 0))
    (set! response-nva-address (bytevector-address response-nva)))
  (let ((nva response-nva)
        (status (status-field code)))
    (bytevector-u64-native-set! nva 0 status-name-address)
    (bytevector-u64-native-set! nva 8 (cdr status))
    (bytevector-u64-native-set! nva 16 (bytevector-length status-name))
    (bytevector-u64-native-set! nva 24 (bytevector-length (car status)))
    (let lp ((k 0) (i 40))
      (when (< k count)
        (let* ((s (* 16 k))
               (name-start (bytevector-u32-native-ref spans s))
               (name-end (bytevector-u32-native-ref spans (+ s 4)))
               (value-start (bytevector-u32-native-ref spans (+ s 8)))
               (value-end (bytevector-u32-native-ref spans (+ s 12))))
          (bytevector-u64-native-set! nva i (+ base name-start))
          (bytevector-u64-native-set! nva (+ i 8) (+ base value-start))
          (bytevector-u64-native-set! nva (+ i 16) (- name-end name-start))
          (bytevector-u64-native-set! nva (+ i 24) (- value-end value-start))
          (lp (+ k 1) (+ i 40)))))
    (%submit-response (session-pointer session) stream-id
                      response-nva-address (+ count 1)
                      (if body? provider-address 0))))

(define (nghttp2-submit-rst-stream! session stream-id code)
  "Queue an RST_STREAM of error CODE for STREAM-ID of SESSION."
  (%submit-rst-stream (session-pointer session) 0 stream-id code))

(define (nghttp2-submit-goaway! session last-stream-id code)
  "Queue a GOAWAY of error CODE saying LAST-STREAM-ID is the last stream
SESSION will process."
  (%submit-goaway (session-pointer session) 0 last-stream-id code 0 0))

(define (nghttp2-session-terminate! session code)
  "Queue a final GOAWAY of error CODE on SESSION; nothing more is read."
  (%terminate (session-pointer session) code))

(define (nghttp2-session-resume! session stream-id)
  "Make SESSION read STREAM-ID's body again, after a READ-DATA that
returned NGHTTP2_ERR_DEFERRED."
  (%resume-data (session-pointer session) stream-id))

(define (nghttp2-last-stream-id session)
  "Return the highest stream id SESSION has received and processed."
  (%last-proc-stream-id (session-pointer session)))

;;;
;;; HPACK alone
;;;

(define-record-type <hpack>
  (make-hpack pointer deflate?)
  hpack?
  (pointer hpack-pointer set-hpack-pointer!)
  (deflate? hpack-deflate?))

(define* (make-hpack-decoder #:optional (table-size 4096))
  "Return an HPACK decoder (RFC 7541) whose dynamic table may hold
TABLE-SIZE bytes, to free with `hpack-free!'."
  (open-libnghttp2!)
  (let ((out (out-pointer)))
    (%inflate-new (bytevector-address out))
    (let ((pointer (bytevector-u64-native-ref out 0)))
      (unless (= table-size 4096)
        (%inflate-change-size pointer table-size))
      (make-hpack pointer #f))))

(define (nv->pair nv)
  ;; NV: a bytevector of an nghttp2_nv.  -> (name . value), strings
  (cons (latin-1 (bytevector-u64-native-ref nv 0) (bytevector-u64-native-ref nv 16))
        (latin-1 (bytevector-u64-native-ref nv 8) (bytevector-u64-native-ref nv 24))))

(define (copy-out address length)
  (if (zero? length)
      (make-bytevector 0)
      (bytevector-copy (pointer->bytevector (make-pointer address) length))))

(define (latin-1 address length)
  (let ((bv (copy-out address length)))
    (list->string (map integer->char (bytevector->u8-list bv)))))

(define (hpack-decode decoder block)
  "Return the header list BLOCK, a bytevector holding one whole header
block, decodes to with DECODER, ((name . value) …) of strings, in
order; raise an error if it is not valid HPACK."
  (let ((pointer (hpack-pointer decoder))
        (nv (make-bytevector 40 0))
        (flags (make-bytevector 4 0))
        (base (bytevector-address block)))
    (let lp ((at 0) (headers '()))
      (bytevector-u32-native-set! flags 0 0)
      (let ((n (%inflate-hd2 pointer (bytevector-address nv) (bytevector-address flags)
                             (+ base at) (- (bytevector-length block) at) 1)))
        (when (< n 0)
          (error "hpack-decode: bad header block" (nghttp2-error-message n)))
        (let* ((f (bytevector-u32-native-ref flags 0))
               (headers (if (logtest f NGHTTP2_HD_INFLATE_EMIT)
                            (cons (nv->pair nv) headers)
                            headers)))
          (if (logtest f NGHTTP2_HD_INFLATE_FINAL)
              (begin
                (%inflate-end pointer)
                (reverse headers))
              (lp (+ at n) headers)))))))

(define (hpack-decoder-table decoder)
  "Return DECODER's dynamic table, newest entry first, ((name . value) …)."
  (let* ((pointer (hpack-pointer decoder))
         ;; counts the 61 entries of the static table too
         (count (%inflate-entries pointer)))
    ;; numbered after the 61 of the static table, 62 the newest
    (let lp ((i count) (entries '()))
      (if (< i 62)
          entries
          (lp (- i 1)
              (cons (nv->pair (pointer->bytevector
                               (make-pointer (%inflate-entry pointer i)) 40))
                    entries))))))

(define (hpack-decoder-size decoder)
  "Return the size of DECODER's dynamic table, as RFC 7541 §4.1 counts it."
  (%inflate-size (hpack-pointer decoder)))

(define* (make-hpack-encoder #:optional (table-size 4096))
  "Return an HPACK encoder whose dynamic table holds at most TABLE-SIZE
bytes, to free with `hpack-free!'."
  (open-libnghttp2!)
  (let ((out (out-pointer)))
    (%deflate-new (bytevector-address out) table-size)
    (make-hpack (bytevector-u64-native-ref out 0) #t)))

(define (hpack-encode encoder headers)
  "Return a bytevector, the header block ENCODER makes of HEADERS
((name . value) …) of strings, Huffman-coding a string where that is
shorter."
  (call-with-values
      (lambda ()
        (name-value-array
         (map (lambda (h)
                (cons (string->latin-1 (car h)) (string->latin-1 (cdr h))))
              headers)))
    (lambda (nva blob count)
      (let* ((pointer (hpack-pointer encoder))
             (bound (%deflate-bound pointer (bytevector-address nva) count))
             (buf (make-bytevector bound))
             (n (%deflate-hd pointer (bytevector-address buf) bound
                             (bytevector-address nva) count)))
        (bytevector-length blob)
        (when (< n 0)
          (error "hpack-encode failed" (nghttp2-error-message n)))
        (bytevector-copy-range buf n)))))

(define (bytevector-copy-range bv n)
  (let ((out (make-bytevector n)))
    (bytevector-copy! bv 0 out 0 n)
    out))

(define (string->latin-1 s)
  (u8-list->bytevector (map char->integer (string->list s))))

(define (hpack-free! coder)
  "Free CODER, an HPACK encoder or decoder; return nothing.  A second
call does nothing."
  (let ((pointer (hpack-pointer coder)))
    (unless (zero? pointer)
      (set-hpack-pointer! coder 0)
      (if (hpack-deflate? coder) (%deflate-del pointer) (%inflate-del pointer))))
  (values))

;;; (plucky sys nghttp2) ends here
