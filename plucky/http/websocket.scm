;;; (plucky http websocket) --- RFC 6455 frames on bytevectors

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The WebSocket protocol as a codec, with no socket and no clock: the
;;; handshake's accept value, a reader that is fed bytes as they arrive
;;; and gives back whole messages, and the frames a server writes.
;;;
;;;   (websocket-accept key)       the Sec-WebSocket-Accept for KEY
;;;   (make-websocket-reader …)    a reader for one connection
;;;   (websocket-reader-feed! r bv start end)   bytes from the client
;;;   (websocket-reader-next! r)   the next event, or #f for "need more"
;;;   (websocket-frame opcode payload)          a server frame
;;;
;;; The reader is strict, as a server must be (RFC 6455, 5.1 and 5.2):
;;; each violation is an event (error CODE . REASON), after which the
;;; reader gives nothing more and the connection is to be closed with
;;; CODE: 1002 for a protocol error (an unmasked client frame, a reserved
;;; bit without an extension, an unknown opcode, a control frame that is
;;; fragmented or over 125 bytes, a continuation with no message or a new
;;; message inside one, a bad close payload), 1007 for text that is not
;;; UTF-8 (checked as the fragments arrive, so a bad byte is caught in
;;; the fragment that holds it), 1009 for a message over the size limit
;;; (caught from the frame's header, before its payload is read).
;;;
;;; permessage-deflate (RFC 7692): `websocket-deflate-offer' reads a
;;; client's Sec-WebSocket-Extensions and picks the first offer plucky
;;; can honour; a reader made with #:inflate accepts RSV1 on the first
;;; frame of a message and gives the joined payload to that procedure,
;;; which inflates it within the size limit (this module calls no libz:
;;; the caller passes (plucky sys zlib)'s).  The size limit then bounds
;;; the inflated message too, so a deflate bomb is a 1009, not memory.
;;;
;;; Events: (text . STRING), (binary . BYTEVECTOR), (ping . BYTEVECTOR),
;;; (pong . BYTEVECTOR), (close CODE . REASON) with CODE #f when the
;;; client's close frame had no payload, (error CODE . REASON).
;;;
;;; Code:

(define-module (plucky http websocket)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (rnrs bytevectors)
  ;; Loaded at the first handshake: any user of (plucky http) loads this
  ;; module, and guile-gcrypt's hash module holds some 500 KB that each
  ;; collection would mark (the live heap in bench/hello's server log).
  #:autoload (gcrypt hash) (bytevector-hash lookup-hash-algorithm)
  #:autoload (gcrypt base64) (base64-encode base64-decode)
  #:export (websocket-accept
            websocket-key-valid?
            make-websocket-reader
            websocket-reader?
            websocket-reader-feed!
            websocket-reader-next!
            websocket-reader-buffered
            websocket-reader-idle?
            websocket-frame
            websocket-close-frame
            websocket-close-code-valid?
            websocket-deflate-offer
            deflate-params?
            deflate-params-server-bits
            deflate-params-server-reset?
            deflate-params-client-bits
            deflate-params-client-reset?
            deflate-params-response
            utf8-valid?
            opcode-continuation opcode-text opcode-binary
            opcode-close opcode-ping opcode-pong))

(define opcode-continuation 0)
(define opcode-text 1)
(define opcode-binary 2)
(define opcode-close 8)
(define opcode-ping 9)
(define opcode-pong 10)

;;;
;;; The handshake
;;;

(define handshake-guid
  ;; RFC 6455, 1.3: the same for every server.
  (string->utf8 "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))

(define (websocket-accept key)
  "Return the value of Sec-WebSocket-Accept that answers KEY, a client's
Sec-WebSocket-Key: the base64 of the SHA-1 of KEY and the protocol's
GUID."
  (let* ((k (string->utf8 key))
         (both (make-bytevector (+ (bytevector-length k)
                                   (bytevector-length handshake-guid)))))
    (bytevector-copy! k 0 both 0 (bytevector-length k))
    (bytevector-copy! handshake-guid 0 both (bytevector-length k)
                      (bytevector-length handshake-guid))
    (base64-encode (bytevector-hash both (lookup-hash-algorithm 'sha1)))))

(define (websocket-key-valid? key)
  "Return true when KEY, a Sec-WebSocket-Key, is the base64 of 16 bytes
(RFC 6455, 4.1)."
  (and (string? key)
       (= (string-length key) 24)
       (let ((bytes (false-if-exception (base64-decode key))))
         (and bytes (= (bytevector-length bytes) 16)))))

;;;
;;; UTF-8, checked a byte at a time across fragments
;;;

;; The state of the check between bytes: 0 between characters, else
;; REMAINING * 65536 + LOW * 256 + HIGH, the continuation bytes still
;; expected and the range the next one must fall in (the ranges exclude
;; overlong forms, surrogates and code points past U+10FFFF: RFC 3629,
;; 4); -1 once a byte was wrong.

(define (utf8-step state b)
  (cond
   ((< state 0) -1)
   ((zero? state)
    (cond
     ((< b #x80) 0)
     ((<= #xC2 b #xDF) (+ 65536 #x80BF))
     ((= b #xE0) (+ 131072 #xA0BF))
     ((= b #xED) (+ 131072 #x809F))
     ((<= #xE1 b #xEF) (+ 131072 #x80BF))
     ((= b #xF0) (+ 196608 #x90BF))
     ((= b #xF4) (+ 196608 #x808F))
     ((<= #xF1 b #xF3) (+ 196608 #x80BF))
     (else -1)))
   (else
    (let ((remaining (ash state -16))
          (low (logand (ash state -8) #xFF))
          (high (logand state #xFF)))
      (cond
       ((not (<= low b high)) -1)
       ((= remaining 1) 0)
       (else (+ (* (- remaining 1) 65536) #x80BF)))))))

(define (utf8-scan state bv start end)
  ;; -> the state after the bytes of BV from START to END
  (let lp ((i start) (state state))
    (cond
     ((< state 0) -1)
     ((= i end) state)
     ((and (zero? state) (< (bytevector-u8-ref bv i) #x80))
      ;; ASCII, the common case, without the general step
      (lp (+ i 1) 0))
     (else (lp (+ i 1) (utf8-step state (bytevector-u8-ref bv i)))))))

(define (utf8-valid? bv)
  "Return true when BV, a bytevector, is well-formed UTF-8."
  (zero? (utf8-scan 0 bv 0 (bytevector-length bv))))

;;;
;;; The reader
;;;

(define-record-type <websocket-reader>
  (%make-websocket-reader buffer start end max-message require-mask? inflate
                          kind compressed? parts size utf8 failed?)
  websocket-reader?
  ;; bytes fed and not yet parsed: BUFFER from START to END
  (buffer reader-buffer set-reader-buffer!)
  (start reader-start set-reader-start!)
  (end reader-end set-reader-end!)
  (max-message reader-max-message)      ; bytes of a message, at most
  (require-mask? reader-require-mask?)  ; #t for a server's reader
  ;; #f, or (payload limit) -> bytevector, too-big or invalid
  (inflate reader-inflate)
  ;; the message being assembled from fragments: #f, 'text or 'binary
  (kind reader-kind set-reader-kind!)
  (compressed? reader-compressed? set-reader-compressed!) ; RSV1 on its first
  ;; frame
  (parts reader-parts set-reader-parts!) ; its payloads so far, last first
  (size reader-size set-reader-size!)    ; and their bytes
  (utf8 reader-utf8 set-reader-utf8!)    ; the UTF-8 check's state (text)
  (failed? reader-failed? set-reader-failed!))

(define* (make-websocket-reader #:key (max-message (* 1024 1024))
                                (require-mask? #t) (inflate #f))
  "Return a reader of the frames a client sends on one connection.
MAX-MESSAGE bounds a message, all its fragments together, in bytes,
before and after inflating; REQUIRE-MASK? (the default, as a server
must) makes an unmasked frame a protocol error.  INFLATE, when
permessage-deflate was agreed, is a procedure (payload limit) that
returns the inflated PAYLOAD, or the symbol too-big past LIMIT bytes, or
invalid."
  (%make-websocket-reader #vu8() 0 0 max-message require-mask? inflate
                          #f #f '() 0 0 #f))

(define (websocket-reader-buffered reader)
  "Return the number of bytes READER holds that are not yet part of an
event."
  (+ (- (reader-end reader) (reader-start reader)) (reader-size reader)))

(define (websocket-reader-idle? reader)
  "Return #t when READER holds nothing: no bytes of a frame, no part of
a message, no failure; a reader made afresh would go on as it would."
  (and (= (reader-start reader) (reader-end reader))
       (not (reader-kind reader))
       (not (reader-failed? reader))))

(define (websocket-reader-feed! reader bv start end)
  "Give READER the bytes of BV from START to END, as they came from the
client; return nothing.  The bytes are copied: BV may be reused."
  (let* ((old (reader-buffer reader))
         (old-start (reader-start reader))
         (held (- (reader-end reader) old-start))
         (count (- end start)))
    (if (and (zero? held) (> count 0))
        (let ((new (make-bytevector count)))
          (bytevector-copy! bv start new 0 count)
          (set-reader-buffer! reader new))
        (let ((new (make-bytevector (+ held count))))
          (bytevector-copy! old old-start new 0 held)
          (bytevector-copy! bv start new held count)
          (set-reader-buffer! reader new)))
    (set-reader-start! reader 0)
    (set-reader-end! reader (bytevector-length (reader-buffer reader)))
    (values)))

(define (fail! reader code reason)
  (set-reader-failed! reader #t)
  (set-reader-buffer! reader #vu8())
  (set-reader-start! reader 0)
  (set-reader-end! reader 0)
  (set-reader-parts! reader '())
  (set-reader-size! reader 0)
  `(error ,code . ,reason))

(define (unmask! payload key)
  ;; KEY: the four masking bytes as a big-endian number
  (let ((n (bytevector-length payload))
        (k (make-bytevector 4)))
    (bytevector-u32-set! k 0 key (endianness big))
    (let lp ((i 0))
      (when (< i n)
        (bytevector-u8-set! payload i
                            (logxor (bytevector-u8-ref payload i)
                                    (bytevector-u8-ref k (logand i 3))))
        (lp (+ i 1))))))

(define (websocket-reader-next! reader)
  "Return the next event READER can make of the bytes it was fed: a
message, a control frame or an error (see the commentary), or #f when it
needs more bytes.  After an error it returns #f for good."
  (if (reader-failed? reader)
      #f
      (let ((bv (reader-buffer reader))
            (start (reader-start reader))
            (end (reader-end reader)))
        (and (>= (- end start) 2)
             (let* ((b0 (bytevector-u8-ref bv start))
                    (b1 (bytevector-u8-ref bv (+ start 1)))
                    (fin? (logbit? 7 b0))
                    (opcode (logand b0 #x0F))
                    (masked? (logbit? 7 b1))
                    (len7 (logand b1 #x7F))
                    (control? (>= opcode 8)))
               (cond
                ;; RSV1 marks a compressed message: on its first frame
                ;; only, and only when permessage-deflate was agreed.
                ((not (zero? (logand b0 (if (and (reader-inflate reader)
                                                 (memv opcode '(1 2)))
                                            #x30
                                            #x70))))
                 (fail! reader 1002 "reserved bits set without an extension"))
                ((not (memv opcode '(0 1 2 8 9 10)))
                 (fail! reader 1002 "unknown opcode"))
                ((and (reader-require-mask? reader) (not masked?))
                 (fail! reader 1002 "client frame not masked"))
                ((and control? (not fin?))
                 (fail! reader 1002 "fragmented control frame"))
                ((and control? (> len7 125))
                 (fail! reader 1002 "control frame over 125 bytes"))
                (else
                 (let ((header (+ 2 (cond ((= len7 126) 2) ((= len7 127) 8) (else 0))
                                  (if masked? 4 0))))
                   (and (>= (- end start) header)
                        (let ((length (cond
                                       ((= len7 126)
                                        (bytevector-u16-ref bv (+ start 2) (endianness big)))
                                       ((= len7 127)
                                        (bytevector-u64-ref bv (+ start 2) (endianness big)))
                                       (else len7))))
                          (cond
                           ((and (= len7 127) (>= length (expt 2 63)))
                            (fail! reader 1002 "payload length with its top bit set"))
                           ((and (not control?)
                                 (> (+ length (reader-size reader))
                                    (reader-max-message reader)))
                            (fail! reader 1009 "message too big"))
                           ((< (- end start) (+ header length))
                            ;; Wait for the payload.
                            #f)
                           (else
                            (let ((payload (make-bytevector length)))
                              (bytevector-copy! bv (+ start header) payload 0 length)
                              (when masked?
                                (unmask! payload (bytevector-u32-ref
                                                  bv (- (+ start header) 4)
                                                  (endianness big))))
                              (set-reader-start! reader (+ start header length))
                              (frame-event reader fin? (logand b0 #x70) opcode payload))))))))))))))

(define (frame-event reader fin? rsv opcode payload)
  ;; A whole frame is read: -> the event it makes, or, for a fragment
  ;; that is not the last, the next event (a control frame may come
  ;; between fragments).
  (case opcode
    ((8) (close-event reader payload))
    ((9) (cons 'ping payload))
    ((10) (cons 'pong payload))
    ((0)
     (if (not (reader-kind reader))
         (fail! reader 1002 "continuation frame with no message")
         (add-fragment reader fin? payload)))
    (else
     (if (reader-kind reader)
         (fail! reader 1002 "new message inside a fragmented one")
         (begin
           (set-reader-kind! reader (if (= opcode 1) 'text 'binary))
           (set-reader-compressed! reader (logbit? 6 rsv))
           (set-reader-utf8! reader 0)
           (add-fragment reader fin? payload))))))

(define (add-fragment reader fin? payload)
  ;; Compressed text is checked once inflated.
  (let ((utf8 (if (and (eq? (reader-kind reader) 'text)
                       (not (reader-compressed? reader)))
                  (utf8-scan (reader-utf8 reader) payload 0 (bytevector-length payload))
                  0)))
    (cond
     ((or (< utf8 0) (and fin? (not (zero? utf8))))
      (fail! reader 1007 "text message not UTF-8"))
     (else
      (set-reader-utf8! reader utf8)
      (set-reader-parts! reader (cons payload (reader-parts reader)))
      (set-reader-size! reader (+ (reader-size reader) (bytevector-length payload)))
      (if fin?
          (let ((kind (reader-kind reader))
                (whole (join-parts (reader-parts reader) (reader-size reader))))
            (set-reader-kind! reader #f)
            (set-reader-parts! reader '())
            (set-reader-size! reader 0)
            (if (reader-compressed? reader)
                (inflated-event reader kind whole)
                (cons kind (if (eq? kind 'text) (utf8->string whole) whole))))
          (websocket-reader-next! reader))))))

(define (inflated-event reader kind payload)
  (let ((whole ((reader-inflate reader) payload (reader-max-message reader))))
    (cond
     ((eq? whole 'too-big) (fail! reader 1009 "message too big once inflated"))
     ((not (bytevector? whole)) (fail! reader 1007 "compressed data not deflate"))
     ((eq? kind 'binary) (cons kind whole))
     ((utf8-valid? whole) (cons kind (utf8->string whole)))
     (else (fail! reader 1007 "text message not UTF-8")))))

(define (join-parts parts size)
  ;; PARTS last first -> one bytevector
  (if (and (pair? parts) (null? (cdr parts)))
      (car parts)
      (let ((whole (make-bytevector size)))
        (let lp ((parts parts) (end size))
          (if (null? parts)
              whole
              (let ((n (bytevector-length (car parts))))
                (bytevector-copy! (car parts) 0 whole (- end n) n)
                (lp (cdr parts) (- end n))))))))

(define (websocket-close-code-valid? code)
  "Return true when CODE may be sent in a close frame (RFC 6455, 7.4):
1000 to 1003, 1007 to 1011, or 3000 to 4999."
  (or (<= 1000 code 1003) (<= 1007 code 1011) (<= 3000 code 4999)))

(define (close-event reader payload)
  (let ((n (bytevector-length payload)))
    (cond
     ((zero? n) (cons 'close (cons #f "")))
     ((= n 1) (fail! reader 1002 "close payload of one byte"))
     (else
      (let ((code (bytevector-u16-ref payload 0 (endianness big)))
            (reason (let ((r (make-bytevector (- n 2))))
                      (bytevector-copy! payload 2 r 0 (- n 2))
                      r)))
        (cond
         ((not (websocket-close-code-valid? code))
          (fail! reader 1002 "invalid close code"))
         ((not (utf8-valid? reason))
          (fail! reader 1007 "close reason not UTF-8"))
         (else (cons 'close (cons code (utf8->string reason))))))))))

;;;
;;; permessage-deflate's negotiation (RFC 7692, 5 and 7.1)
;;;

(define-record-type <deflate-params>
  (make-deflate-params server-bits server-reset? client-bits client-reset?
                       response)
  deflate-params?
  (server-bits deflate-params-server-bits)     ; our deflater's window bits
  (server-reset? deflate-params-server-reset?) ; no context takeover for us
  (client-bits deflate-params-client-bits)     ; our inflater's window bits
  (client-reset? deflate-params-client-reset?) ; nor for the client
  (response deflate-params-response))          ; Sec-WebSocket-Extensions

(define (split-trim string char)
  (map string-trim-both (string-split string char)))

(define (parse-offer text)
  ;; "name; a; b=1" -> ("name" ("a" . #f) ("b" . "1")), a quoted value
  ;; unquoted (RFC 6455, 9.1).
  (let ((parts (split-trim text #\;)))
    (cons (string-downcase (car parts))
          (map (lambda (param)
                 (let ((eq (string-index param #\=)))
                   (if eq
                       (let ((value (string-trim-both (substring param (+ eq 1)))))
                         (cons (string-downcase
                                (string-trim-both (substring param 0 eq)))
                               (if (and (> (string-length value) 1)
                                        (string-prefix? "\"" value)
                                        (string-suffix? "\"" value))
                                   (substring value 1 (- (string-length value) 1))
                                   value)))
                       (cons (string-downcase param) #f))))
               (filter (negate string-null?) (cdr parts))))))

(define (window-bits value)
  ;; A value of *_max_window_bits: 8 to 15, no leading zero; else #f.
  (and (string? value)
       (member value '("8" "9" "10" "11" "12" "13" "14" "15"))
       (string->number value)))

(define (accept-offer params max-bits)
  ;; PARAMS of one permessage-deflate offer -> <deflate-params>, or #f
  ;; to decline it: a parameter unknown, repeated or with a bad value
  ;; (RFC 7692, 5.1), or a server window zlib cannot make (raw deflate
  ;; has no 256-byte window).
  (let ((names (map car params)))
    (and
     (every (lambda (name) (member name '("server_no_context_takeover"
                                          "client_no_context_takeover"
                                          "server_max_window_bits"
                                          "client_max_window_bits")))
            names)
     (= (length names) (length (delete-duplicates names)))
     (let ((server-reset (assoc "server_no_context_takeover" params))
           (client-reset (assoc "client_no_context_takeover" params))
           (server-max (assoc "server_max_window_bits" params))
           (client-max (assoc "client_max_window_bits" params)))
       (and
        (not (and server-reset (cdr server-reset)))
        (not (and client-reset (cdr client-reset)))
        (or (not server-max) (window-bits (cdr server-max)))
        (or (not client-max) (not (cdr client-max)) (window-bits (cdr client-max)))
        (not (and server-max (= (window-bits (cdr server-max)) 8)))
        ;; Our window: the client's bound or ours, the smaller; said in
        ;; the response when under 15 (7.1.2.1 allows it unasked).
        (let ((server-bits (min max-bits (if server-max
                                             (window-bits (cdr server-max))
                                             15))))
          (make-deflate-params
           server-bits (and server-reset #t)
           15 (and client-reset #t)
           (string-append
            "permessage-deflate"
            (if server-reset "; server_no_context_takeover" "")
            (if client-reset "; client_no_context_takeover" "")
            (if (< server-bits 15)
                (string-append "; server_max_window_bits="
                               (number->string server-bits))
                "")))))))))

(define* (websocket-deflate-offer extensions #:key (max-window-bits 15))
  "Return the <deflate-params> of the first permessage-deflate offer in
EXTENSIONS, the client's Sec-WebSocket-Extensions (a string, or #f),
that can be accepted, or #f when there is none.  Our compressor's window
is at most 2^MAX-WINDOW-BITS bytes (9 to 15).  The params hold the
response header's value (`deflate-params-response'), the window bits of
each side and whether each side resets its context after every
message."
  (and (string? extensions)
       (let lp ((offers (map parse-offer
                             (filter (negate string-null?)
                                     (split-trim extensions #\,)))))
         (cond
          ((null? offers) #f)
          ((and (string=? (caar offers) "permessage-deflate")
                (accept-offer (cdar offers) max-window-bits)))
          (else (lp (cdr offers)))))))

;;;
;;; Writing
;;;

(define* (websocket-frame opcode payload #:key (fin? #t) (rsv1? #f))
  "Return the bytes of an unmasked frame, as a server sends, of OPCODE
(a number) carrying PAYLOAD, a bytevector.  FIN? #f makes it a fragment
that is not the last; RSV1? sets the bit permessage-deflate uses."
  (let* ((n (bytevector-length payload))
         (header (cond ((< n 126) 2) ((< n 65536) 4) (else 10)))
         (frame (make-bytevector (+ header n))))
    (bytevector-u8-set! frame 0 (logior (if fin? #x80 0) (if rsv1? #x40 0) opcode))
    (cond
     ((< n 126) (bytevector-u8-set! frame 1 n))
     ((< n 65536)
      (bytevector-u8-set! frame 1 126)
      (bytevector-u16-set! frame 2 n (endianness big)))
     (else
      (bytevector-u8-set! frame 1 127)
      (bytevector-u64-set! frame 2 n (endianness big))))
    (bytevector-copy! payload 0 frame header n)
    frame))

(define* (websocket-close-frame #:optional code (reason ""))
  "Return the bytes of a close frame with CODE (a number, or #f for none)
and REASON, a string cut to fit the 125 bytes of a control frame."
  (if (not code)
      (websocket-frame opcode-close #vu8())
      (let* ((r (string->utf8 reason))
             (r (if (> (bytevector-length r) 123)
                    (string->utf8 (truncate-utf8 reason 123))
                    r))
             (payload (make-bytevector (+ 2 (bytevector-length r)))))
        (bytevector-u16-set! payload 0 code (endianness big))
        (bytevector-copy! r 0 payload 2 (bytevector-length r))
        (websocket-frame opcode-close payload))))

(define (truncate-utf8 string limit)
  ;; The longest prefix of STRING whose UTF-8 fits in LIMIT bytes.
  (let lp ((n (string-length string)))
    (if (<= (bytevector-length (string->utf8 (substring string 0 n))) limit)
        (substring string 0 n)
        (lp (- n 1)))))

;;; (plucky http websocket) ends here
