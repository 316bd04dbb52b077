;;; tests/http/websocket.scm --- (plucky http websocket)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The frames are built here as a client sends them (masked), fed to a
;;; reader whole and then split at every byte, and must give the same
;;; events.  Last, a fuzz pass over mutated frames, with a fixed seed:
;;; every mutation must end in events or an error, never an exception.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (rnrs bytevectors)
             (tests lib harness)
             (plucky sys zlib)
             (plucky http websocket))

(test-begin "http/websocket")

(define* (client-frame opcode payload #:key (fin? #t) (mask? #t) (rsv 0)
                       (key #x37FA213D))
  ;; -> the bytes of a frame as a client sends it
  (let* ((payload (if (string? payload) (string->utf8 payload) payload))
         (n (bytevector-length payload))
         (ext (cond ((< n 126) 0) ((< n 65536) 2) (else 8)))
         (header (+ 2 ext (if mask? 4 0)))
         (frame (make-bytevector (+ header n))))
    (bytevector-u8-set! frame 0 (logior (if fin? #x80 0) (ash rsv 4) opcode))
    (bytevector-u8-set! frame 1 (logior (if mask? #x80 0)
                                        (cond ((< n 126) n) ((< n 65536) 126) (else 127))))
    (case ext
      ((2) (bytevector-u16-set! frame 2 n (endianness big)))
      ((8) (bytevector-u64-set! frame 2 n (endianness big))))
    (when mask? (bytevector-u32-set! frame (+ 2 ext) key (endianness big)))
    (let ((k (make-bytevector 4)))
      (bytevector-u32-set! k 0 key (endianness big))
      (let lp ((i 0))
        (when (< i n)
          (bytevector-u8-set! frame (+ header i)
                              (if mask?
                                  (logxor (bytevector-u8-ref payload i)
                                          (bytevector-u8-ref k (logand i 3)))
                                  (bytevector-u8-ref payload i)))
          (lp (+ i 1)))))
    frame))

(define (concat . bvs)
  (let ((out (make-bytevector (apply + (map bytevector-length bvs)))))
    (fold (lambda (bv at) (bytevector-copy! bv 0 out at (bytevector-length bv))
                  (+ at (bytevector-length bv)))
          0 bvs)
    out))

(define* (events bytes #:key (splits '()) (max-message 1000) (inflate #f))
  ;; -> every event the reader makes of BYTES fed in pieces cut at SPLITS
  (let ((reader (make-websocket-reader #:max-message max-message
                                       #:inflate inflate)))
    (let lp ((bounds (append splits (list (bytevector-length bytes))))
             (start 0) (out '()))
      (if (null? bounds)
          (reverse out)
          (begin
            (websocket-reader-feed! reader bytes start (car bounds))
            (let more ((out out))
              (let ((event (websocket-reader-next! reader)))
                (if event
                    (more (cons event out))
                    (lp (cdr bounds) (car bounds) out)))))))))

;; Each case gives the same events whole and split at every byte.
(define-syntax-rule (test-events name bytes expected)
  (let ((b bytes))
    (test-equal name expected (events b))
    (test-assert (string-append name ", split at every byte")
      (every (lambda (k) (equal? expected (events b #:splits (list k))))
             (iota (+ 1 (bytevector-length b)))))))

(test-group "websocket-accept"
  (test-equal "the example of RFC 6455, 1.3" "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    (websocket-accept "dGhlIHNhbXBsZSBub25jZQ==")))

(test-group "websocket-key-valid?"
  (test-assert "16 bytes" (websocket-key-valid? "dGhlIHNhbXBsZSBub25jZQ=="))
  (test-assert "15 bytes" (not (websocket-key-valid? "dGhlIHNhbXBsZSBub25jZQ")))
  (test-assert "not base64" (not (websocket-key-valid? "!!!!!!!!!!!!!!!!!!!!!!==")))
  (test-assert "absent" (not (websocket-key-valid? #f))))

(test-group "utf8-valid?"
  (test-assert "ASCII" (utf8-valid? (string->utf8 "hello")))
  (test-assert "every width" (utf8-valid? (string->utf8 "é€𝄞")))
  (test-assert "overlong" (not (utf8-valid? #vu8(#xC0 #xAF))))
  (test-assert "surrogate" (not (utf8-valid? #vu8(#xED #xA0 #x80))))
  (test-assert "past U+10FFFF" (not (utf8-valid? #vu8(#xF4 #x90 #x80 #x80))))
  (test-assert "cut short" (not (utf8-valid? #vu8(#xE2 #x82)))))

(test-group "websocket-reader-next!: messages"
  (test-events "a text message" (client-frame 1 "Hello") '((text . "Hello")))
  (test-events "a binary message" (client-frame 2 #vu8(0 1 2 255))
    '((binary . #vu8(0 1 2 255))))
  (test-events "an empty text" (client-frame 1 "") '((text . "")))
  (test-events "126 bytes: a 16-bit length" (client-frame 2 (make-bytevector 126 7))
    `((binary . ,(make-bytevector 126 7))))
  (test-equal "65536 bytes: a 64-bit length"
    `((binary . ,(make-bytevector 65536 9)))
    (events (client-frame 2 (make-bytevector 65536 9)) #:max-message 100000))
  (test-events "three fragments, a ping between"
    (concat (client-frame 1 "Hel" #:fin? #f) (client-frame 9 "p")
            (client-frame 0 "lo, " #:fin? #f) (client-frame 0 "world"))
    '((ping . #vu8(112)) (text . "Hello, world")))
  (test-events "a character split across fragments"
    (concat (client-frame 1 #vu8(#xE2 #x82) #:fin? #f) (client-frame 0 #vu8(#xAC)))
    '((text . "€")))
  (test-events "two messages in one read"
    (concat (client-frame 1 "a") (client-frame 2 #vu8(1)))
    '((text . "a") (binary . #vu8(1)))))

(test-group "websocket-reader-next!: control frames"
  (test-events "ping" (client-frame 9 "x") '((ping . #vu8(120))))
  (test-events "pong" (client-frame 10 "") '((pong . #vu8())))
  (test-events "close with a code and reason"
    (client-frame 8 (concat #vu8(3 232) (string->utf8 "bye")))
    '((close 1000 . "bye")))
  (test-events "close with nothing" (client-frame 8 #vu8()) '((close #f . ""))))

(test-group "websocket-reader-next!: errors"
  (test-events "unmasked" (client-frame 1 "x" #:mask? #f)
    '((error 1002 . "client frame not masked")))
  (test-events "a reserved bit" (client-frame 1 "x" #:rsv 4)
    '((error 1002 . "reserved bits set without an extension")))
  (test-events "opcode 3" (client-frame 3 "x") '((error 1002 . "unknown opcode")))
  (test-events "opcode 11" (client-frame 11 "x") '((error 1002 . "unknown opcode")))
  (test-events "a fragmented ping" (client-frame 9 "x" #:fin? #f)
    '((error 1002 . "fragmented control frame")))
  (test-events "a ping of 126 bytes" (client-frame 9 (make-bytevector 126 0))
    '((error 1002 . "control frame over 125 bytes")))
  (test-events "a continuation first" (client-frame 0 "x")
    '((error 1002 . "continuation frame with no message")))
  (test-events "a message inside a message"
    (concat (client-frame 1 "a" #:fin? #f) (client-frame 1 "b"))
    '((error 1002 . "new message inside a fragmented one")))
  (test-events "a bad byte" (client-frame 1 #vu8(104 #xFF 105))
    '((error 1007 . "text message not UTF-8")))
  (test-events "a bad byte in the second fragment"
    (concat (client-frame 1 "ok" #:fin? #f) (client-frame 0 #vu8(#xC0 #xAF)))
    '((error 1007 . "text message not UTF-8")))
  (test-events "a character cut by the end of the message"
    (concat (client-frame 1 "ok" #:fin? #f) (client-frame 0 #vu8(#xE2 #x82)))
    '((error 1007 . "text message not UTF-8")))
  (test-events "over the limit in one frame" (client-frame 2 (make-bytevector 1001 0))
    '((error 1009 . "message too big")))
  (test-events "over the limit across fragments"
    (concat (client-frame 2 (make-bytevector 600 0) #:fin? #f)
            (client-frame 0 (make-bytevector 600 0)))
    '((error 1009 . "message too big")))
  (test-equal "over the limit told by the header alone"
    '((error 1009 . "message too big"))
    (events (let ((f (client-frame 2 (make-bytevector 70000 0))))
              (let ((head (make-bytevector 14)))
                (bytevector-copy! f 0 head 0 14)
                head))))
  (test-events "a close code 1005" (client-frame 8 #vu8(3 237))
    '((error 1002 . "invalid close code")))
  (test-events "a close payload of one byte" (client-frame 8 #vu8(3))
    '((error 1002 . "close payload of one byte")))
  (test-events "a close reason not UTF-8" (client-frame 8 #vu8(3 232 #xFF))
    '((error 1007 . "close reason not UTF-8")))
  (test-equal "nothing after an error"
    '((error 1002 . "client frame not masked"))
    (events (concat (client-frame 1 "x" #:mask? #f) (client-frame 1 "y")))))

(test-group "websocket-frame"
  (test-equal "short" #vu8(#x81 2 104 105) (websocket-frame 1 (string->utf8 "hi")))
  (test-equal "a fragment" #vu8(#x02 1 7) (websocket-frame 2 #vu8(7) #:fin? #f))
  (test-equal "16-bit length" '(#x82 126 1 0)
    (list-head (bytevector->u8-list (websocket-frame 2 (make-bytevector 256 0))) 4))
  (test-equal "64-bit length" '(#x82 127 0 0 0 0 0 1 0 0)
    (list-head (bytevector->u8-list (websocket-frame 2 (make-bytevector 65536 0))) 10)))

(test-group "websocket-close-frame"
  (test-equal "a code and reason" #vu8(#x88 4 3 232 111 107)
    (websocket-close-frame 1000 "ok"))
  (test-equal "no code" #vu8(#x88 0) (websocket-close-frame))
  (test-equal "a long reason is cut to 125 bytes" 127
    (bytevector-length (websocket-close-frame 1000 (make-string 200 #\a))))
  (test-equal "and not inside a character" 126
    (bytevector-length (websocket-close-frame 1000 (make-string 200 #\é)))))

(test-group "websocket-reader-idle?"
  (let ((reader (make-websocket-reader)))
    (define (feed! bv) (websocket-reader-feed! reader bv 0 (bytevector-length bv)))
    (test-assert "a new reader" (websocket-reader-idle? reader))
    (let ((frame (client-frame 1 "hello")))
      (websocket-reader-feed! reader frame 0 3)
      (test-assert "half a frame: not idle" (not (websocket-reader-idle? reader)))
      (websocket-reader-feed! reader frame 3 (bytevector-length frame))
      (test-assert "the whole frame, not yet taken: not idle"
        (not (websocket-reader-idle? reader)))
      (websocket-reader-next! reader)
      (test-assert "taken: idle" (websocket-reader-idle? reader)))
    (feed! (client-frame 1 "first part" #:fin? #f))
    (websocket-reader-next! reader)
    (test-assert "mid-message: not idle" (not (websocket-reader-idle? reader)))
    (feed! (client-frame 0 ", last part"))
    (websocket-reader-next! reader)
    (test-assert "the message out: idle" (websocket-reader-idle? reader))
    (feed! (client-frame 1 "x" #:mask? #f))
    (websocket-reader-next! reader)
    (test-assert "failed: not idle" (not (websocket-reader-idle? reader)))))

(test-group "websocket-reader-next!: fuzz"
  ;; Mutated copies of valid frames: flipped bits, cut or grown lengths,
  ;; bytes dropped.  Each must end (bounded steps) with no exception.
  (let* ((state (seed->random-state 18))
         (seeds (list (client-frame 1 "Hello, world")
                      (concat (client-frame 1 "ab" #:fin? #f) (client-frame 9 "")
                              (client-frame 0 "cd"))
                      (client-frame 2 (make-bytevector 300 1))
                      (client-frame 8 #vu8(3 232 104))
                      (client-frame 1 #vu8(#xE2 #x82 #xAC))))
         (mutate (lambda (bv)
                   (let ((copy (bytevector-copy bv)))
                     (let lp ((k (+ 1 (random 4 state))))
                       (unless (zero? k)
                         (let ((i (random (bytevector-length copy) state)))
                           (case (random 3 state)
                             ((0) (bytevector-u8-set!
                                   copy i (logxor (bytevector-u8-ref copy i)
                                                  (ash 1 (random 8 state)))))
                             ((1) (bytevector-u8-set! copy i (random 256 state)))
                             (else (bytevector-u8-set! copy i 0))))
                         (lp (- k 1))))
                     copy)))
         (failures
          (let lp ((n 0) (failures 0))
            (if (= n 3000)
                failures
                (let* ((bytes (mutate (list-ref seeds (random (length seeds) state))))
                       (split (random (+ 1 (bytevector-length bytes)) state))
                       (ok? (false-if-exception
                             (let ((got (events bytes #:splits (list split))))
                               (and (list? got) (< (length got) 100))))))
                  (lp (+ n 1) (if ok? failures (+ failures 1))))))))
    (test-equal "3000 mutated frames, no exception" 0 failures)))

;;; permessage-deflate

(define (offer text)
  ;; -> the response to the offers TEXT, or #f when all are declined
  (let ((params (websocket-deflate-offer text)))
    (and params (deflate-params-response params))))

(define-syntax-rule (test-offer text expected)
  (test-equal text expected (offer text)))

(test-group "websocket-deflate-offer"
  (test-offer "permessage-deflate" "permessage-deflate")
  (test-offer "permessage-deflate; client_max_window_bits" "permessage-deflate")
  (test-offer "permessage-deflate; server_no_context_takeover"
              "permessage-deflate; server_no_context_takeover")
  (test-offer "permessage-deflate; client_no_context_takeover"
              "permessage-deflate; client_no_context_takeover")
  (test-offer "permessage-deflate; server_max_window_bits=10"
              "permessage-deflate; server_max_window_bits=10")
  (test-offer "permessage-deflate; server_max_window_bits=\"10\""
              "permessage-deflate; server_max_window_bits=10")
  (test-offer "x-webkit-deflate-frame, permessage-deflate"
              "permessage-deflate")
  (test-offer #f #f)
  (test-offer "" #f)
  (test-offer "x-webkit-deflate-frame" #f)
  (test-offer "permessage-deflate; server_max_window_bits=8" #f)
  (test-offer "permessage-deflate; server_max_window_bits=8, permessage-deflate"
              "permessage-deflate")
  (test-offer "permessage-deflate; server_max_window_bits" #f)
  (test-offer "permessage-deflate; server_max_window_bits=16" #f)
  (test-offer "permessage-deflate; server_max_window_bits=010" #f)
  (test-offer "permessage-deflate; client_max_window_bits=7" #f)
  (test-offer "permessage-deflate; server_no_context_takeover=1" #f)
  (test-offer "permessage-deflate; foo" #f)
  (test-offer "permessage-deflate; server_no_context_takeover; server_no_context_takeover"
              #f)
  (test-equal "our window, under 15, is said unasked"
    "permessage-deflate; server_max_window_bits=12"
    (deflate-params-response
     (websocket-deflate-offer "permessage-deflate" #:max-window-bits 12)))
  (test-equal "the smaller of the two windows" 9
    (deflate-params-server-bits
     (websocket-deflate-offer "permessage-deflate; server_max_window_bits=9"
                              #:max-window-bits 12)))
  (test-equal "no context takeover, each side"  '(#t #f)
    (let ((p (websocket-deflate-offer
              "permessage-deflate; server_no_context_takeover")))
      (list (deflate-params-server-reset? p) (deflate-params-client-reset? p)))))

;; "Hello" compressed, then again with the context kept (RFC 7692, 7.2.3.1
;; and 7.2.3.2).
(define hello-1 #vu8(#xf2 #x48 #xcd #xc9 #xc9 #x07 #x00))
(define hello-2 #vu8(#xf2 #x00 #x11 #x00 #x00))

(define (inflate-with inflater)
  (lambda (payload limit) (inflate-message inflater payload limit)))

(define-syntax-rule (test-inflated-events name bytes expected)
  ;; As test-events, with a new inflater for each reader.
  (let ((b bytes))
    (test-assert (string-append name ", whole and split at every byte")
      (every (lambda (k)
               (equal? expected
                       (events b #:splits (if k (list k) '())
                               #:inflate (inflate-with (make-inflater)))))
             (cons #f (iota (+ 1 (bytevector-length b))))))))

(test-group "websocket-reader-next!: compressed messages"
  (test-inflated-events "the RFC's Hello"
    (client-frame 1 hello-1 #:rsv 4)
    '((text . "Hello")))
  (test-equal "twice, the context kept" '((text . "Hello") (text . "Hello"))
    (events (concat (client-frame 1 hello-1 #:rsv 4) (client-frame 1 hello-2 #:rsv 4))
            #:inflate (inflate-with (make-inflater))))
  (test-inflated-events "fragmented (7.2.3.3)"
    (concat (client-frame 1 #vu8(#xf2 #x48 #xcd) #:rsv 4 #:fin? #f)
            (client-frame 0 #vu8(#xc9 #xc9 #x07 #x00)))
    '((text . "Hello")))
  (test-equal "an uncompressed message beside" '((text . "Hello") (text . "hi"))
    (events (concat (client-frame 1 hello-1 #:rsv 4) (client-frame 1 "hi"))
            #:inflate (inflate-with (make-inflater))))
  (test-equal "RSV1 on a continuation: 1002"
    '((error 1002 . "reserved bits set without an extension"))
    (events (concat (client-frame 1 #vu8(#xf2 #x48 #xcd) #:rsv 4 #:fin? #f)
                    (client-frame 0 #vu8(#xc9 #xc9 #x07 #x00) #:rsv 4))
            #:inflate (inflate-with (make-inflater))))
  (test-equal "RSV1 on a ping: 1002"
    '((error 1002 . "reserved bits set without an extension"))
    (events (client-frame 9 #vu8() #:rsv 4) #:inflate (inflate-with (make-inflater))))
  (test-equal "RSV1 when nothing was agreed: 1002"
    '((error 1002 . "reserved bits set without an extension"))
    (events (client-frame 1 hello-1 #:rsv 4)))
  (test-equal "not deflate: 1007" '((error 1007 . "compressed data not deflate"))
    (events (client-frame 2 #vu8(#xff #xff #xff #xff #xff) #:rsv 4)
            #:inflate (inflate-with (make-inflater))))
  (test-equal "inflated text not UTF-8: 1007" '((error 1007 . "text message not UTF-8"))
    (events (client-frame 1 (deflate-message (make-deflater #:format 'raw) #vu8(#xff))
                          #:rsv 4)
            #:inflate (inflate-with (make-inflater))))
  (test-equal "a deflate bomb: 1009, the limit on the inflated size"
    '((error 1009 . "message too big once inflated"))
    (let ((bomb (deflate-message (make-deflater #:format 'raw)
                                 (make-bytevector (* 10 1024 1024) 0))))
      (events (client-frame 2 bomb #:rsv 4) #:max-message 65536
              #:inflate (inflate-with (make-inflater))))))

(test-group "deflate-message"
  (test-equal "the RFC's Hello, then again with the context kept"
    (list hello-1 hello-2)
    (let ((d (make-deflater #:format 'raw)))
      (list (deflate-message d (string->utf8 "Hello"))
            (deflate-message d (string->utf8 "Hello")))))
  (test-equal "reset: the same bytes again" (list hello-1 hello-1)
    (let ((d (make-deflater #:format 'raw)))
      (list (deflate-message d (string->utf8 "Hello"))
            (begin (deflater-reset! d) (deflate-message d (string->utf8 "Hello"))))))
  (test-equal "a window of 2^9 bytes round-trips" (make-bytevector 5000 7)
    (inflate-message (make-inflater #:window-bits 9)
                     (deflate-message (make-deflater #:format 'raw #:window-bits 9)
                                      (make-bytevector 5000 7))
                     10000)))

(test-end "http/websocket")
