;;; (plucky http http2) --- HTTP/2 fields and HTTP/1 heads, one into the other

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; HTTP/2 carries a request's head as fields (RFC 9113 §8.3), which
;;; libnghttp2 has already decoded from HPACK and checked (names in
;;; lower case, no CR, LF or NUL in a value, the pseudo-fields present
;;; and first).  The server gives a handler exactly the request record an
;;; HTTP/1.1 client would have got, so a <request-head> writes the fields
;;; as the HTTP/1.1 head they stand for, as they arrive
;;; (`request-head-field!'), which (plucky http parse) then parses with
;;; its limits and its precise 4xx answers.  The response goes the other
;;; way: (plucky http response) writes it as HTTP/1.1 would, and
;;; `response-head-spans' finds in that head the fields HTTP/2 sends,
;;; without those that only mean something to an HTTP/1 connection, for
;;; nghttp2 to copy from where they are.  Both work on bytevectors.
;;; `fields->request-head' and `response-head->fields' do the same with
;;; fields as pairs (name . value) of bytevectors, for tests and tools.
;;; Also here: HTTP/2's connection preface, which tells an HTTP/2 client
;;; from an HTTP/1 one, and the 9 bytes that begin each frame (RFC 9113
;;; §4.1), read and written in place.
;;;
;;; Code:

(define-module (plucky http http2)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:export (http2-preface?
            connection-preface
            frame-length frame-type frame-flags frame-stream-id
            put-frame-head!
            read-u31
            make-request-head
            request-head-reset!
            request-head-field!
            request-head-finish!
            fields->request-head
            response-head-spans
            response-head->fields))

(define preface-start (string->utf8 "PRI * HTTP/2.0"))

(define (http2-preface? bv start end)
  "Return true when BV [START, END) begins with the start of HTTP/2's
connection preface (RFC 9113 §3.4), which an HTTP/1 parser refuses as a
request of version 2.0: the client speaks HTTP/2."
  (let ((n (bytevector-length preface-start)))
    (and (>= (- end start) n)
         (let lp ((i 0))
           (or (= i n)
               (and (= (bytevector-u8-ref bv (+ start i))
                       (bytevector-u8-ref preface-start i))
                    (lp (+ i 1))))))))

(define connection-preface
  ;; RFC 9113 §3.4: what an HTTP/2 client sends first
  (string->utf8 "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))

;;; A frame's head: length (24 bits), type, flags, a reserved bit and
;;; the stream id (31 bits), network byte order, at I of BV.

(define-inlinable (frame-length bv i)
  (logior (ash (bytevector-u8-ref bv i) 16)
          (ash (bytevector-u8-ref bv (+ i 1)) 8)
          (bytevector-u8-ref bv (+ i 2))))
(define-inlinable (frame-type bv i) (bytevector-u8-ref bv (+ i 3)))
(define-inlinable (frame-flags bv i) (bytevector-u8-ref bv (+ i 4)))
(define-inlinable (read-u31 bv i)
  (logand (bytevector-u32-ref bv i (endianness big)) #x7fffffff))
(define-inlinable (frame-stream-id bv i) (read-u31 bv (+ i 5)))

(define (put-frame-head! bv i length type flags id)
  "Write at I of the bytevector BV the head of a frame of LENGTH bytes
of payload, TYPE, FLAGS and stream ID; return nothing."
  (bytevector-u8-set! bv i (ash length -16))
  (bytevector-u8-set! bv (+ i 1) (logand (ash length -8) 255))
  (bytevector-u8-set! bv (+ i 2) (logand length 255))
  (bytevector-u8-set! bv (+ i 3) type)
  (bytevector-u8-set! bv (+ i 4) flags)
  (bytevector-u32-set! bv (+ i 5) id (endianness big)))

(define crlf #vu8(13 10))
(define colon-space #vu8(58 32))
(define http11-crlf (string->utf8 " HTTP/1.1\r\n"))
(define host-colon (string->utf8 "host: "))
(define cookie-colon (string->utf8 "cookie: "))
(define semicolon-space #vu8(59 32))

;;; A request's head, as its fields arrive.  nghttp2 gives the fields one
;;; at a time, the pseudo-fields first (it refuses them after another);
;;; each is written at once as the line of an HTTP/1.1 head, the request
;;; line before the first field that is not a pseudo-field, so that no
;;; field is kept as a value of its own (bench/instructions-h2).  Host,
;;; from :authority unless a host field came, and the cookie fields
;;; joined into one Cookie (RFC 9113 §8.2.3) come last.

(define-record-type <request-head>
  (%make-request-head bytes fill method path authority host? cookies)
  request-head?
  ;; the head so far: BYTES [0, FILL), grown by doubling (not an
  ;; <output>, whose address would be looked up for each)
  (bytes request-head-bytes set-request-head-bytes!)
  (fill request-head-fill set-request-head-fill!)
  (method request-head-method set-request-head-method!) ; #f or bytevector
  (path request-head-path set-request-head-path!)
  (authority request-head-authority set-request-head-authority!)
  (host? request-head-host? set-request-head-host!) ; a host field came
  (cookies request-head-cookies set-request-head-cookies!)) ; bytevectors, newest first

(define (make-request-head)
  "Return an empty request head, for `request-head-field!'."
  (%make-request-head (make-bytevector 256) 0 #f #f #f #f '()))

(define (request-head-reset! head)
  "Make HEAD empty again, to serve another request; return nothing."
  (set-request-head-fill! head 0)
  (set-request-head-method! head #f)
  (set-request-head-path! head #f)
  (set-request-head-authority! head #f)
  (set-request-head-host! head #f)
  (set-request-head-cookies! head '())
  (values))

(define (put! head bv start count)
  (let* ((fill (request-head-fill head))
         (bytes (let ((bytes (request-head-bytes head)))
                  (if (<= (+ fill count) (bytevector-length bytes))
                      bytes
                      (let ((bigger (make-bytevector
                                     (max (+ fill count) (* 2 (bytevector-length bytes))))))
                        (bytevector-copy! bytes 0 bigger 0 fill)
                        (set-request-head-bytes! head bigger)
                        bigger)))))
    (bytevector-copy! bv start bytes fill count)
    (set-request-head-fill! head (+ fill count))))

(define-syntax-rule (put-bytes! head bv) (put! head bv 0 (bytevector-length bv)))

(define (bytes=? bv start end literal)
  ;; Is BV [START, END) the bytes of LITERAL?
  (let ((n (bytevector-length literal)))
    (and (= (- end start) n)
         (let lp ((i 0))
           (or (= i n)
               (and (= (bytevector-u8-ref bv (+ start i)) (bytevector-u8-ref literal i))
                    (lp (+ i 1))))))))

(define method-name (string->utf8 ":method"))
(define path-name (string->utf8 ":path"))
(define authority-name (string->utf8 ":authority"))
(define cookie-name (string->utf8 "cookie"))
(define host-name (string->utf8 "host"))

(define (slice bv start end)
  (let ((copy (make-bytevector (- end start))))
    (bytevector-copy! bv start copy 0 (- end start))
    copy))

(define (put-request-line! head)
  (when (zero? (request-head-fill head))
    (put-bytes! head (or (request-head-method head) #vu8()))
    (put-bytes! head #vu8(32))
    (put-bytes! head (or (request-head-path head) #vu8()))
    (put-bytes! head http11-crlf)))

(define (request-head-field! head name name-length value value-length)
  "Add to HEAD the field whose name is the first NAME-LENGTH bytes of the
bytevector NAME and whose value the first VALUE-LENGTH of VALUE, in the
order it came.  Return #t, or #f when the field makes the request
malformed (RFC 9113 §8.2, §8.3): a name with upper case, a pseudo-field
after another field, unknown or twice, a connection-specific field."
  (if (and (> name-length 0) (= (bytevector-u8-ref name 0) 58)) ; ":"
      (and (zero? (request-head-fill head))
           (cond
            ((bytes=? name 0 name-length method-name)
             (and (not (request-head-method head))
                  (begin (set-request-head-method! head (slice value 0 value-length)) #t)))
            ((bytes=? name 0 name-length path-name)
             (and (not (request-head-path head))
                  (begin (set-request-head-path! head (slice value 0 value-length)) #t)))
            ((bytes=? name 0 name-length authority-name)
             (and (not (request-head-authority head))
                  (begin (set-request-head-authority! head (slice value 0 value-length)) #t)))
            ((bytes=? name 0 name-length scheme-name) #t)
            (else #f)))
      (and (not (upper-case-in? name name-length))
           (not (connection-specific? name 0 name-length))
           (or (not (bytes=? name 0 name-length te-name))
               (bytes=? value 0 value-length trailers-value))
           (begin
             (put-request-line! head)
             (cond
              ((bytes=? name 0 name-length cookie-name)
               (set-request-head-cookies! head (cons (slice value 0 value-length)
                                                     (request-head-cookies head))))
              (else
               (when (bytes=? name 0 name-length host-name)
                 (set-request-head-host! head #t))
               (put! head name 0 name-length)
               (put-bytes! head colon-space)
               (put! head value 0 value-length)
               (put-bytes! head crlf)))
             #t))))

(define (upper-case-in? bv n)
  (let lp ((i 0))
    (and (< i n)
         (or (<= 65 (bytevector-u8-ref bv i) 90)
             (lp (+ i 1))))))

(define scheme-name (string->utf8 ":scheme"))
(define te-name (string->utf8 "te"))
(define trailers-value (string->utf8 "trailers"))

(define (request-head-finish! head)
  "Return two values: a bytevector and the length of the HTTP/1.1 request
head at its start that the fields given to HEAD stand for (the request
line of :method and :path, the other fields, Host and Cookie); or #f
and 0 when :method or :path is missing."
  (if (not (and (request-head-method head) (request-head-path head)))
      (values #f 0)
      (begin
        (put-request-line! head)
        (when (and (request-head-authority head) (not (request-head-host? head)))
          (put-bytes! head host-colon)
          (put-bytes! head (request-head-authority head))
          (put-bytes! head crlf))
        (let ((cookies (reverse (request-head-cookies head))))
          (unless (null? cookies)
            (put-bytes! head cookie-colon)
            (put-bytes! head (car cookies))
            (for-each (lambda (cookie)
                        (put-bytes! head semicolon-space)
                        (put-bytes! head cookie))
                      (cdr cookies))
            (put-bytes! head crlf)))
        (put-bytes! head crlf)
        (values (request-head-bytes head) (request-head-fill head)))))

(define (fields->request-head fields)
  "Return a bytevector, the HTTP/1.1 request head that FIELDS, a
request's ((name . value) …) of bytevectors in the order they came,
stand for (see `request-head-field!'), or #f when :method or :path is
missing."
  (let ((head (make-request-head)))
    (for-each (lambda (field)
                (request-head-field! head (car field) (bytevector-length (car field))
                                     (cdr field) (bytevector-length (cdr field))))
              fields)
    (call-with-values (lambda () (request-head-finish! head))
      (lambda (bytes length)
        (and bytes (slice bytes 0 length))))))

;;; A response's fields, from the HTTP/1 head (plucky http response)
;;; wrote: found where they are, names put in lower case in place, and
;;; given as spans for nghttp2 to copy; no field becomes a value of its
;;; own.

(define (connection-specific? bv start end)
  ;; A field HTTP/2 forbids (RFC 9113 §8.2.2), which an HTTP/1 head has:
  ;; Connection, Keep-Alive, Transfer-Encoding, Upgrade,
  ;; Proxy-Connection; NAME already in lower case.
  (case (- end start)
    ((10) (or (bytes=? bv start end connection-name)
              (bytes=? bv start end keep-alive-name)))
    ((17) (bytes=? bv start end transfer-encoding-name))
    ((7) (bytes=? bv start end upgrade-name))
    ((16) (bytes=? bv start end proxy-connection-name))
    (else #f)))

(define connection-name (string->utf8 "connection"))
(define keep-alive-name (string->utf8 "keep-alive"))
(define transfer-encoding-name (string->utf8 "transfer-encoding"))
(define upgrade-name (string->utf8 "upgrade"))
(define proxy-connection-name (string->utf8 "proxy-connection"))

(define (response-head-spans head start end spans)
  "Find the fields of the HTTP/1 response head that begins HEAD [START,
END) (its status line, its fields, a blank line, perhaps the body),
without the connection-specific ones, and put each name in lower case
in place.  Return three values: a bytevector of native u32s, four per
field (name start and end, value start and end, indices of HEAD), which
is SPANS unless it had too little room; the number of fields; the index
just past the blank line (END if there is none).  One pass over the
head (bench/instructions-h2)."
  (define (cr-from i)
    ;; -> the index of the first CR from I, or END
    (if (or (>= i end) (= (bytevector-u8-ref head i) 13)) i (cr-from (+ i 1))))
  (define (name-end i)
    ;; lower the name from I in place -> the index of its colon (or of
    ;; the CR that ends a line without one)
    (if (>= i end)
        i
        (let ((b (bytevector-u8-ref head i)))
          (cond
           ((or (= b 58) (= b 13)) i)
           (else
            (when (<= 65 b 90) (bytevector-u8-set! head i (+ b 32)))
            (name-end (+ i 1)))))))
  (define (skip-spaces i stop)
    (if (and (< i stop) (= (bytevector-u8-ref head i) 32)) (skip-spaces (+ i 1) stop) i))
  (define (room spans count)
    (if (<= (* 16 (+ count 1)) (bytevector-length spans))
        spans
        (let ((more (make-bytevector (* 2 (max 16 (bytevector-length spans))))))
          (bytevector-copy! spans 0 more 0 (bytevector-length spans))
          more)))
  (let lp ((i (+ 2 (cr-from start))) (spans spans) (count 0))
    (cond
     ((>= i end) (values spans count end))
     ((= (bytevector-u8-ref head i) 13) (values spans count (min end (+ i 2))))
     (else
      (let* ((colon (name-end i))
             (e (cr-from colon)))
        (if (or (= colon e) (connection-specific? head i colon))
            (lp (+ e 2) spans count)
            (let ((spans (room spans count))
                  (s (* 16 count)))
              (bytevector-u32-native-set! spans s i)
              (bytevector-u32-native-set! spans (+ s 4) colon)
              (bytevector-u32-native-set! spans (+ s 8) (skip-spaces (+ colon 1) e))
              (bytevector-u32-native-set! spans (+ s 12) e)
              (lp (+ e 2) spans (+ count 1)))))))))

(define (response-head->fields code head start end)
  "Return the fields, ((name . value) …) of bytevectors, of the HTTP/1
response head in HEAD [START, END) (status line to blank line), whose
status is CODE: :status first, then each header, its name in lower case,
without the connection-specific ones.  (HEAD's names are put in lower
case in place.)"
  (call-with-values (lambda () (response-head-spans head start end (make-bytevector 0)))
    (lambda (spans count head-end)
      (cons (cons (string->utf8 ":status") (string->utf8 (number->string code)))
            (let lp ((k 0))
              (if (= k count)
                  '()
                  (let ((at (lambda (i) (bytevector-u32-native-ref spans (+ (* 16 k) i)))))
                    (cons (cons (slice head (at 0) (at 4)) (slice head (at 8) (at 12)))
                          (lp (+ k 1))))))))))

;;; (plucky http http2) ends here
