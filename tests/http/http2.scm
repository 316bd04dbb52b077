;;; tests/http/http2.scm --- (plucky http http2)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

(use-modules (srfi srfi-64)
             (rnrs bytevectors)
             (tests lib harness)
             (plucky http http2))

(test-runner-current (plucky-test-runner))
(test-begin "http/http2")

(define (fields . pairs)
  (map (lambda (p) (cons (string->utf8 (car p)) (string->utf8 (cdr p)))) pairs))

(define (head . pairs)
  (let ((bv (fields->request-head (apply fields pairs))))
    (and bv (utf8->string bv))))

(test-group "http2-preface?"
  (define (preface? text)
    (let ((bv (string->utf8 text))) (http2-preface? bv 0 (bytevector-length bv))))
  (test-assert "the whole preface" (preface? "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
  (test-assert "its start, the rest to come" (preface? "PRI * HTTP/2.0\r\n"))
  (test-assert "too short to tell" (not (preface? "PRI * HTTP/2")))
  (test-assert "an HTTP/1 request" (not (preface? "GET / HTTP/1.1\r\n\r\n")))
  (test-assert "at an offset"
    (let ((bv (string->utf8 "xxPRI * HTTP/2.0\r\n"))) (http2-preface? bv 2 (bytevector-length bv)))))

(test-group "fields->request-head"
  (test-equal "a GET, :authority as Host, last"
    "GET /a?b=1 HTTP/1.1\r\naccept: */*\r\nhost: example.com\r\n\r\n"
    (head '(":method" . "GET") '(":scheme" . "https") '(":authority" . "example.com")
          '(":path" . "/a?b=1") '("accept" . "*/*")))
  (test-equal "a host field wins over :authority"
    "GET / HTTP/1.1\r\nhost: b\r\n\r\n"
    (head '(":method" . "GET") '(":authority" . "a") '(":path" . "/") '("host" . "b")))
  (test-equal "cookie fields joined into one, last"
    "GET / HTTP/1.1\r\nx: y\r\ncookie: a=1; b=2; c=3\r\n\r\n"
    (head '(":method" . "GET") '(":path" . "/") '("cookie" . "a=1") '("x" . "y")
          '("cookie" . "b=2") '("cookie" . "c=3")))
  (test-equal "no :path: #f" #f (head '(":method" . "GET") '(":authority" . "a")))
  (test-equal "no :method: #f" #f (head '(":path" . "/"))))

(test-group "response-head->fields"
  (define (from text code)
    (let ((bv (string->utf8 text)))
      (map (lambda (f) (cons (utf8->string (car f)) (utf8->string (cdr f))))
           (response-head->fields code bv 0 (bytevector-length bv)))))
  (test-equal "status first, names in lower case, no Connection"
    '((":status" . "200") ("content-type" . "text/plain") ("content-length" . "5"))
    (from "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello" 200))
  (test-equal "no Transfer-Encoding, Keep-Alive, Upgrade"
    '((":status" . "404") ("date" . "x"))
    (from "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nKeep-Alive: timeout=5\r\nUpgrade: h2c\r\nDate: x\r\n\r\n" 404))
  (test-equal "a value's inner spaces kept"
    '((":status" . "200") ("x" . "a  b"))
    (from "HTTP/1.1 200 OK\r\nX:   a  b\r\n\r\n" 200)))

(test-group "response-head-spans"
  (define (spans text)
    (let ((bv (string->utf8 text)))
      (call-with-values (lambda () (response-head-spans bv 0 (bytevector-length bv)
                                                        (make-bytevector 16)))
        (lambda (spans count end)
          (list (bytevector-length spans) count end (utf8->string bv))))))
  (test-equal "past the blank line, names lowered, the body left alone"
    '(16 1 25 "HTTP/1.1 200 OK\r\na: B\r\n\r\nBODY: X")
    (spans "HTTP/1.1 200 OK\r\nA: B\r\n\r\nBODY: X"))
  (test-equal "no blank line: the end"
    '(16 1 23 "HTTP/1.1 200 OK\r\na: b\r\n")
    (spans "HTTP/1.1 200 OK\r\nA: b\r\n"))
  (test-equal "more fields than room: a larger bytevector"
    '(32 2 31 "HTTP/1.1 200 OK\r\na: 1\r\nb: 2\r\n\r\n")
    (spans "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n"))
  (test-equal "connection-specific fields left out, not counted"
    '(16 1 59 "HTTP/1.1 200 OK\r\nconnection: close\r\nkeep-alive: x\r\nx: y\r\n\r\n")
    (spans "HTTP/1.1 200 OK\r\nConnection: close\r\nKeep-Alive: x\r\nX: y\r\n\r\n")))

(test-group "request-head-reset!"
  (let ((head (make-request-head)))
    (define (field! name value)
      (request-head-field! head (string->utf8 name) (string-length name)
                           (string->utf8 value) (string-length value)))
    (field! ":method" "PUT")
    (field! ":path" "/x")
    (field! "a" "b")
    (request-head-reset! head)
    (field! ":method" "GET")
    (test-equal "no :path after it: #f" #f
      (call-with-values (lambda () (request-head-finish! head)) (lambda (bv n) bv)))
    (field! ":path" "/")
    (test-equal "the second request alone"
      "GET / HTTP/1.1\r\n\r\n"
      (call-with-values (lambda () (request-head-finish! head))
        (lambda (bv n)
          (let ((head (make-bytevector n)))
            (bytevector-copy! bv 0 head 0 n)
            (utf8->string head)))))))

(test-group "request-head-field!: malformed fields"
  (define (accepted? . pairs)
    ;; -> whether each field of PAIRS, in order, is taken
    (let ((head (make-request-head)))
      (map (lambda (p)
             (request-head-field! head (string->utf8 (car p)) (string-length (car p))
                                  (string->utf8 (cdr p)) (string-length (cdr p))))
           pairs)))
  (test-equal "pseudo-fields, then fields" '(#t #t #t #t #t)
    (accepted? '(":method" . "GET") '(":scheme" . "https") '(":path" . "/")
               '("accept" . "*/*") '("te" . "trailers")))
  (test-equal "a name in upper case" '(#t #f) (accepted? '(":method" . "GET") '("Accept" . "*/*")))
  (test-equal "a pseudo-field after a field" '(#t #f)
    (accepted? '("accept" . "*/*") '(":path" . "/")))
  (test-equal "a pseudo-field twice" '(#t #f) (accepted? '(":path" . "/") '(":path" . "/x")))
  (test-equal "an unknown pseudo-field" '(#f) (accepted? '(":status" . "200")))
  (test-equal "connection-specific fields" '(#f #f #f)
    (accepted? '("connection" . "close") '("transfer-encoding" . "chunked")
               '("upgrade" . "websocket")))
  (test-equal "te other than trailers" '(#f) (accepted? '("te" . "gzip"))))

(test-group "frame heads"
  (let ((bv (make-bytevector 12 255)))
    (put-frame-head! bv 1 70000 1 5 #x7ffffffe)
    (test-equal "length, type, flags, stream id read back"
      '(70000 1 5 #x7ffffffe)
      (list (frame-length bv 1) (frame-type bv 1) (frame-flags bv 1) (frame-stream-id bv 1)))
    (test-equal "the bytes, network order"
      '(255 1 17 112 1 5 127 255 255 254 255 255)
      (bytevector->u8-list bv))
    (bytevector-u8-set! bv 6 255)
    (test-equal "the reserved bit ignored" #x7ffffffe (frame-stream-id bv 1))))

(test-end "http/http2")
