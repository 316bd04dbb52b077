;;; (tests lib h2) --- a raw HTTP/2 client for tests

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;; Tests of HTTP/2 serving speak the protocol frame by frame, so that
;;; they can also misbehave as attackers do (resets, floods, a window
;;; held at zero).  An <h2-client> wraps a (tests lib server) <client>:
;;; `h2-connect' sends the preface and a SETTINGS frame; `h2-send-frame!'
;;; any frame; `h2-header-block' encodes fields as HPACK literals
;;; without indexing or Huffman (RFC 7541 §6.2.2), the simplest valid
;;; encoding; `h2-read-frame' reads one frame within a deadline, and
;;; answers the server's SETTINGS and (unless told not to) gives back
;;; flow-control credit for the DATA it reads.  `h2-get-all' runs
;;; requests on streams and collects each one's status, fields and body;
;;; responses' header blocks are decoded with nghttp2's HPACK decoder.
;;; Code:

(define-module (tests lib h2)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (rnrs bytevectors)
  #:use-module (tests lib server)
  #:use-module (plucky sys nghttp2)
  #:use-module ((plucky http) #:select (bytevector-concatenate))
  #:export (h2-connect
            h2-client-raw
            h2-close!
            h2-send-frame!
            h2-frame
            h2-header-block
            h2-request!
            h2-read-frame
            h2-goaway
            h2-get-all
            h2-response-status
            h2-response-fields
            h2-response-body
            h2-reset?
            frame-type frame-flags frame-stream frame-payload
            preface))

(define preface (string->utf8 "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))

(define-record-type <h2-client>
  (make-h2-client raw decoder auto-window? settings-acked?)
  h2-client?
  (raw h2-client-raw)                   ; <client> of (tests lib server)
  (decoder h2-client-decoder)           ; HPACK decoder of the responses
  (auto-window? h2-client-auto-window?) ; give back credit for DATA read
  (settings-acked? h2-client-settings-acked? set-h2-client-settings-acked!))

(define (u24 n) (list (ash n -16) (logand (ash n -8) 255) (logand n 255)))
(define (u32 n) (list (ash n -24) (logand (ash n -16) 255) (logand (ash n -8) 255)
                      (logand n 255)))

(define (h2-frame type flags stream payload)
  "Return the bytes of a frame: TYPE and FLAGS numbers, STREAM its id,
PAYLOAD a bytevector."
  (let ((head (u8-list->bytevector
               (append (u24 (bytevector-length payload)) (list type flags) (u32 stream))))
        (all (make-bytevector (+ 9 (bytevector-length payload)))))
    (bytevector-copy! head 0 all 0 9)
    (bytevector-copy! payload 0 all 9 (bytevector-length payload))
    all))

(define* (h2-connect port #:key (settings '()) (auto-window? #t) (receive-buffer #f))
  "Return an HTTP/2 client connected to PORT on 127.0.0.1 that sent the
preface and a SETTINGS frame of SETTINGS ((id . value) …)."
  (let* ((raw (if receive-buffer
                  (connect-client port #:receive-buffer receive-buffer)
                  (connect-client port)))
         (client (make-h2-client raw (make-hpack-decoder) auto-window? #f)))
    (client-send! raw preface)
    (h2-send-frame! client 4 0 0
                    (u8-list->bytevector
                     (append-map (lambda (s) (append (list 0 (car s)) (u32 (cdr s))))
                                 settings)))
    client))

(define (h2-close! client)
  (hpack-free! (h2-client-decoder client))
  (client-close! (h2-client-raw client)))

(define (h2-send-frame! client type flags stream payload)
  "Send a frame; return #f if the server no longer takes bytes."
  (client-send! (h2-client-raw client) (h2-frame type flags stream payload)))

(define (hpack-integer n prefix-bits first)
  ;; -> list of bytes: N with a PREFIX-BITS prefix, FIRST the high bits
  (let ((max (- (ash 1 prefix-bits) 1)))
    (if (< n max)
        (list (logior first n))
        (let lp ((n (- n max)) (out (list (logior first max))))
          (if (< n 128)
              (reverse (cons n out))
              (lp (ash n -7) (cons (logior 128 (logand n 127)) out)))))))

(define (h2-header-block fields)
  "Return an HPACK block of FIELDS ((name . value) …, strings): each a
literal without indexing, no Huffman coding."
  (u8-list->bytevector
   (append-map (lambda (field)
                 (let ((name (bytevector->u8-list (string->utf8 (car field))))
                       (value (bytevector->u8-list (string->utf8 (cdr field)))))
                   (append '(0) (hpack-integer (length name) 7 0) name
                           (hpack-integer (length value) 7 0) value)))
               fields)))

(define* (h2-request! client stream path #:key (method "GET") (fields '())
                      (body #f))
  "Open STREAM with a request for PATH; BODY, a bytevector, follows as
DATA frames of 16 KB."
  (h2-send-frame! client 1 (if body 4 5) stream
                  (h2-header-block
                   (append `((":method" . ,method) (":scheme" . "http")
                             (":authority" . "localhost") (":path" . ,path))
                           fields)))
  (when body
    (let lp ((start 0))
      (let* ((n (min 16384 (- (bytevector-length body) start)))
             (chunk (make-bytevector n)))
        (bytevector-copy! body start chunk 0 n)
        (h2-send-frame! client 0 (if (= (+ start n) (bytevector-length body)) 1 0)
                        stream chunk)
        (when (< (+ start n) (bytevector-length body))
          (lp (+ start n)))))))

(define (frame-type f) (vector-ref f 0))
(define (frame-flags f) (vector-ref f 1))
(define (frame-stream f) (vector-ref f 2))
(define (frame-payload f) (vector-ref f 3))

(define (take-bytes! raw n deadline)
  ;; -> N bytes from RAW's pending input, or #f / 'eof
  (let lp ()
    (let ((pending (client-pending raw)))
      (if (>= (bytevector-length pending) n)
          (let ((bytes (sub-bytevector pending 0 n)))
            (set-client-pending! raw (sub-bytevector pending n (bytevector-length pending)))
            bytes)
          (let ((got (receive-some! raw deadline)))
            (if (eq? got #t) (lp) got))))))

(define* (h2-read-frame client #:key (timeout 10))
  "Return the next frame as #(type flags stream payload), or 'eof when
the server closed, or #f when none came within TIMEOUT seconds."
  (let* ((raw (h2-client-raw client))
         (deadline (+ (now-seconds) timeout))
         (head (take-bytes! raw 9 deadline)))
    (if (not (bytevector? head))
        head
        (let* ((length (+ (ash (bytevector-u8-ref head 0) 16)
                          (ash (bytevector-u8-ref head 1) 8)
                          (bytevector-u8-ref head 2)))
               (payload (if (zero? length) (make-bytevector 0)
                            (take-bytes! raw length deadline))))
          (if (not (bytevector? payload))
              payload
              (let ((frame (vector (bytevector-u8-ref head 3) (bytevector-u8-ref head 4)
                                   (logand #x7fffffff (bytevector-u32-ref head 5 (endianness big)))
                                   payload)))
                (cond
                 ((and (= (frame-type frame) 4) (zero? (logand 1 (frame-flags frame))))
                  (h2-send-frame! client 4 1 0 (make-bytevector 0)))
                 ((and (= (frame-type frame) 0) (h2-client-auto-window? client)
                       (> length 0))
                  (let ((credit (u8-list->bytevector (u32 length))))
                    (h2-send-frame! client 8 0 0 credit)
                    (h2-send-frame! client 8 0 (frame-stream frame) credit))))
                frame))))))

(define (h2-goaway frame)
  "Return the error code of FRAME, a GOAWAY, or #f when it is another."
  (and (vector? frame) (= (frame-type frame) 7)
       (bytevector-u32-ref (frame-payload frame) 4 (endianness big))))

;; A response: #(status fields body reset-code)
(define (h2-response-status r) (vector-ref r 0))
(define (h2-response-fields r) (vector-ref r 1))
(define (h2-response-body r) (vector-ref r 2))
(define (h2-reset? r) (vector-ref r 3))

(define (header-payload frame)
  ;; HEADERS' fragment, without padding and priority
  (let* ((p (frame-payload frame))
         (flags (frame-flags frame))
         (pad (if (logtest flags 8) (bytevector-u8-ref p 0) 0))
         (start (+ (if (logtest flags 8) 1 0) (if (logtest flags 32) 5 0))))
    (sub-bytevector p start (- (bytevector-length p) pad))))

(define* (h2-get-all client streams #:key (timeout 10) (on-frame #f))
  "Read frames until each stream of STREAMS (ids) has ended or was
reset, or until TIMEOUT seconds or the connection's end; return an alist
of id -> response (`h2-response-status' …) for those that ended.
ON-FRAME, if given, is called with each frame read."
  (let ((deadline (+ (now-seconds) timeout))
        (table (make-hash-table)))
    (define (entry id)
      (or (hashv-ref table id)
          (let ((e (vector #f '() (make-bytevector 0) #f #f)))
            (hashv-set! table id e)
            e)))
    (define (done? id)
      (let ((e (hashv-ref table id))) (and e (vector-ref e 4))))
    (define block #f)                   ; (id flags bytes): a block in pieces
    (define (headers! id flags bytes)
      (let* ((e (entry id))
             (fields (hpack-decode (h2-client-decoder client) bytes)))
        (if (vector-ref e 0)
            (vector-set! e 1 (append (vector-ref e 1) fields)) ; trailers
            (begin
              (vector-set! e 0 (string->number (cdr (assoc ":status" fields))))
              (vector-set! e 1 fields)))
        (when (logtest 1 flags) (vector-set! e 4 #t))))
    (let lp ()
      (unless (every done? streams)
        (let ((frame (h2-read-frame client #:timeout (max 0 (- deadline (now-seconds))))))
          (when (vector? frame)
            (when on-frame (on-frame frame))
            (let ((id (frame-stream frame)))
              (case (frame-type frame)
                ((1)
                 (if (logtest 4 (frame-flags frame))
                     (headers! id (frame-flags frame) (header-payload frame))
                     (set! block (list id (frame-flags frame) (header-payload frame)))))
                ((9)                    ; CONTINUATION of BLOCK
                 (let ((bytes (bytevector-concatenate (list (caddr block)
                                                            (frame-payload frame)))))
                   (if (logtest 4 (frame-flags frame))
                       (begin (headers! id (cadr block) bytes) (set! block #f))
                       (set! block (list id (cadr block) bytes)))))
                ((0)
                 (let ((e (entry id)))
                   (vector-set! e 2 (let* ((a (vector-ref e 2)) (b (frame-payload frame))
                                           (c (make-bytevector (+ (bytevector-length a)
                                                                  (bytevector-length b)))))
                                      (bytevector-copy! a 0 c 0 (bytevector-length a))
                                      (bytevector-copy! b 0 c (bytevector-length a)
                                                        (bytevector-length b))
                                      c))
                   (when (logtest 1 (frame-flags frame)) (vector-set! e 4 #t))))
                ((3)
                 (let ((e (entry id)))
                   (vector-set! e 3 (bytevector-u32-ref (frame-payload frame) 0
                                                        (endianness big)))
                   (vector-set! e 4 #t)))))
            (lp)))))
    (filter-map (lambda (id)
                  (let ((e (hashv-ref table id)))
                    (and e (vector-ref e 4)
                         (cons id (vector (vector-ref e 0) (vector-ref e 1)
                                          (vector-ref e 2) (vector-ref e 3))))))
                streams)))

;;; (tests lib h2) ends here
