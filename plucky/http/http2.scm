;;; (plucky http http2) --- HTTP/2 fields and HTTP/1 heads, one into the other

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; HTTP/2 carries a request's head as fields (RFC 9113 §8.3), which
;;; libnghttp2 has already decoded from HPACK and checked (names in
;;; lower case, no CR, LF or NUL in a value, the pseudo-fields present
;;; and first).  The server gives a handler exactly the request record an
;;; HTTP/1.1 client would have got, so `fields->request-head' writes the
;;; fields as the HTTP/1.1 head they stand for, which (plucky http parse)
;;; then parses with its limits and its precise 4xx answers.  The answer
;;; goes the other way: (plucky http response) writes it as HTTP/1.1
;;; would, and `response-head->fields' takes that head apart into the
;;; fields HTTP/2 sends, without those that only mean something to an
;;; HTTP/1 connection.  Both work on bytevectors, fields being pairs
;;; (name . value) of bytevectors.  Also here: the start of HTTP/2's
;;; connection preface, which tells an HTTP/2 client from an HTTP/1 one.
;;;
;;; Code:

(define-module (plucky http http2)
  #:use-module (rnrs bytevectors)
  #:use-module ((srfi srfi-1) #:select (filter-map))
  #:use-module ((plucky http response)
                #:select (make-output output-put-bytes! output-bytes output-fill))
  #:export (http2-preface?
            fields->request-head
            response-head->fields
            head-end))

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

(define crlf #vu8(13 10))
(define colon-space #vu8(58 32))
(define cookie-name (string->utf8 "cookie"))
(define host-name (string->utf8 "host"))

(define (field-ref fields name)
  (let ((found (assoc (string->utf8 name) fields)))
    (and found (cdr found))))

(define (pseudo? name)
  (and (> (bytevector-length name) 0) (= (bytevector-u8-ref name 0) 58))) ; ":"

(define (fields->request-head fields)
  "Return a bytevector, the HTTP/1.1 request head that FIELDS, a
request's ((name . value) …) in the order they came, stand for: the
request line of :method and :path, Host from :authority (unless a host
field came too), the cookie fields joined into one Cookie (RFC 9113
§8.2.3), the other fields as they are.  Return #f when :method or :path
is missing."
  (let ((method (field-ref fields ":method"))
        (path (field-ref fields ":path"))
        (authority (field-ref fields ":authority"))
        (out (make-output 1024)))
    (define (line! name value)
      (output-put-bytes! out name)
      (output-put-bytes! out colon-space)
      (output-put-bytes! out value)
      (output-put-bytes! out crlf))
    (and method path
         (begin
           (output-put-bytes! out method)
           (output-put-bytes! out #vu8(32))
           (output-put-bytes! out path)
           (output-put-bytes! out (string->utf8 " HTTP/1.1\r\n"))
           (when (and authority (not (assoc host-name fields)))
             (line! host-name authority))
           (let ((cookies (filter-map (lambda (field)
                                        (and (equal? (car field) cookie-name) (cdr field)))
                                      fields)))
             (unless (null? cookies)
               (line! cookie-name
                      (let join ((cookies (cdr cookies)) (all (car cookies)))
                        (if (null? cookies)
                            all
                            (join (cdr cookies)
                                  (bytevector-append* all #vu8(59 32) (car cookies))))))))
           (for-each (lambda (field)
                       (unless (or (pseudo? (car field)) (equal? (car field) cookie-name))
                         (line! (car field) (cdr field))))
                     fields)
           (output-put-bytes! out crlf)
           (let ((head (make-bytevector (output-fill out))))
             (bytevector-copy! (output-bytes out) 0 head 0 (output-fill out))
             head)))))

(define (bytevector-append* . bvs)
  (let ((all (make-bytevector (apply + (map bytevector-length bvs)))))
    (let lp ((bvs bvs) (at 0))
      (if (null? bvs)
          all
          (begin
            (bytevector-copy! (car bvs) 0 all at (bytevector-length (car bvs)))
            (lp (cdr bvs) (+ at (bytevector-length (car bvs)))))))))

(define connection-specific
  ;; fields HTTP/2 forbids (RFC 9113 §8.2.2), which an HTTP/1 head has
  (map string->utf8 '("connection" "keep-alive" "transfer-encoding" "upgrade"
                      "proxy-connection")))

(define (response-head->fields code head start end)
  "Return the fields, ((name . value) …) of bytevectors, of the HTTP/1
response head in HEAD [START, END) (status line to blank line), whose
status is CODE: :status first, then each header, its name in lower case,
without the connection-specific ones."
  (define (line-end i)
    (let lp ((i i))
      (if (and (< (+ i 1) end)
               (not (and (= (bytevector-u8-ref head i) 13)
                         (= (bytevector-u8-ref head (+ i 1)) 10))))
          (lp (+ i 1))
          i)))
  (define (slice from to)
    (let ((bv (make-bytevector (- to from))))
      (bytevector-copy! head from bv 0 (- to from))
      bv))
  (define (lower! bv)
    (let lp ((i 0))
      (when (< i (bytevector-length bv))
        (let ((c (bytevector-u8-ref bv i)))
          (when (<= 65 c 90) (bytevector-u8-set! bv i (+ c 32))))
        (lp (+ i 1))))
    bv)
  (let lp ((i (+ 2 (line-end start)))
           (fields (list (cons (string->utf8 ":status")
                               (string->utf8 (number->string code))))))
    (let ((e (line-end i)))
      (if (or (>= i end) (= e i))
          (reverse fields)
          (let* ((colon (let c ((j i))
                          (if (or (= j e) (= (bytevector-u8-ref head j) 58)) j (c (+ j 1)))))
                 (name (lower! (slice i colon)))
                 (value-start (let s ((j (+ colon 1)))
                                (if (and (< j e) (= (bytevector-u8-ref head j) 32))
                                    (s (+ j 1))
                                    j))))
            (lp (+ e 2)
                (if (member name connection-specific)
                    fields
                    (cons (cons name (slice value-start e)) fields))))))))

(define (head-end bv start end)
  "Return the index just past the blank line that ends the head in BV
[START, END), or END when there is none."
  (let lp ((i start))
    (cond
     ((> (+ i 4) end) end)
     ((and (= (bytevector-u8-ref bv i) 13) (= (bytevector-u8-ref bv (+ i 1)) 10)
           (= (bytevector-u8-ref bv (+ i 2)) 13) (= (bytevector-u8-ref bv (+ i 3)) 10))
      (+ i 4))
     (else (lp (+ i 1))))))

;;; (plucky http http2) ends here
