;;; tests/server/framing.scm --- request bodies and framing over real sockets
;;;
;;; RFC 9112 §6 framing rules, each with a raw-socket test: a request
;;; whose framing is ambiguous is refused and its connection closed, so
;;; that no byte of it can be read as the next request (smuggling).
;;; Chunked bodies, pipelining behind them, and Expect: 100-continue.

(use-modules (srfi srfi-64)
             (srfi srfi-1)
             (srfi srfi-71)
             (rnrs bytevectors)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (tests lib server)
             (plucky server))

;; Answers "<path> <length>:<body>" so that a test sees which request got
;; which body.
(define (echo request body)
  (values '((content-type . (text/plain)))
          (string-append (uri-path (request-uri request)) " "
                         (number->string (if body (bytevector-length body) 0)) ":"
                         (if body (utf8->string body) ""))))

(define-syntax-rule (with-server (server args ...) body ...)
  (call-with-server echo (lambda (server) body ...) args ...))

;; Send TEXT on a new connection; -> (values code body eof-after?)
(define (exchange server text)
  (let ((client (connect-client (server-port server))))
    (client-send! client text)
    (let ((response body (client-read-response client #:timeout 5)))
      (let ((eof? (and response (client-eof? client #:timeout 3))))
        (client-close! client)
        (values (and response (response-code response))
                (and body (utf8->string body))
                eof?)))))

(define-syntax-rule (test-refused name status text)
  (with-server (server)
    (let ((code body eof? (exchange server text)))
      (test-equal (string-append name ": " (number->string status)) status code)
      (test-assert (string-append name ": connection closed") eof?))))

(define (post path . lines)
  (string-append "POST " path " HTTP/1.1\r\nHost: x\r\n"
                 (string-join lines "\r\n") "\r\n\r\n"))

(test-begin "server/framing")

(test-group "smuggling and framing are refused, and the connection closed"
  (test-refused "Content-Length and Transfer-Encoding" 400
                (string-append (post "/" "Content-Length: 5" "Transfer-Encoding: chunked")
                               "5\r\nhello\r\n0\r\n\r\n"))
  (test-refused "two differing Content-Length" 400
                (string-append (post "/" "Content-Length: 5" "Content-Length: 6") "hello!"))
  (test-refused "Content-Length with a sign" 400 (string-append (post "/" "Content-Length: +5") "hello"))
  (test-refused "Content-Length not a number" 400 (string-append (post "/" "Content-Length: 5a") "hello"))
  (test-refused "Transfer-Encoding not ending in chunked" 400
                (string-append (post "/" "Transfer-Encoding: gzip") "hello"))
  (test-refused "chunked then gzip" 400
                (string-append (post "/" "Transfer-Encoding: chunked, gzip") "hello"))
  (test-refused "Transfer-Encoding on HTTP/1.0" 400
                "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
  (test-refused "invalid chunk size" 400
                (string-append (post "/" "Transfer-Encoding: chunked") "5x\r\nhello\r\n0\r\n\r\n"))
  (test-refused "chunk size line ending in a bare LF" 400
                (string-append (post "/" "Transfer-Encoding: chunked") "5\nhello\r\n0\r\n\r\n"))
  (test-refused "chunk data longer than its size" 400
                (string-append (post "/" "Transfer-Encoding: chunked") "3\r\nhello\r\n0\r\n\r\n"))
  (test-refused "control character in a chunk extension" 400
                (string-append (post "/" "Transfer-Encoding: chunked") "5;a\x01b\r\nhello\r\n0\r\n\r\n"))
  (test-refused "an expectation other than 100-continue" 417
                (string-append (post "/" "Content-Length: 5" "Expect: teapot") "hello")))

(test-group "the bytes of a refused request are never served"
  ;; After a CL+TE request, what the chunked reading would call the next
  ;; request must not be answered: only one response comes back.
  (with-server (server)
    (let ((client (connect-client (server-port server))))
      (client-send! client (string-append
                            (post "/a" "Content-Length: 4" "Transfer-Encoding: chunked")
                            "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"))
      (let* ((bytes (client-read-until-close client #:timeout 5))
             (text (if (bytevector? bytes) (utf8->string bytes) "")))
        (test-assert "a 400" (string-prefix? "HTTP/1.1 400 " text))
        (test-equal "and no other answer" 1
          (length (filter (lambda (line) (string-prefix? "HTTP/1.1 " line))
                          (string-split text #\newline)))))
      (client-close! client))))

(test-group "chunked request bodies"
  (with-server (server)
    (let ((code body eof? (exchange server
                                    (string-append (post "/c" "Transfer-Encoding: chunked"
                                                         "Connection: close")
                                                   "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n"))))
      (test-equal "decoded" '(200 "/c 12:hello, world") (list code body)))
    ;; The same body split into single bytes, each sent on its own.
    (let* ((text (string-append (post "/split" "Transfer-Encoding: chunked")
                                "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"))
           (client (connect-client (server-port server))))
      (for-each (lambda (i) (client-send! client (substring text i (+ i 1))))
                (iota (string-length text)))
      (let ((response body (client-read-response client #:timeout 5)))
        (test-equal "sent a byte at a time" "/split 11:hello world"
          (and body (utf8->string body))))
      (client-close! client))
    ;; Pipelined: a chunked body, then two more requests, in one write.
    (let ((client (connect-client (server-port server))))
      (client-send! client (string-append
                            (post "/one" "Transfer-Encoding: chunked") "3\r\nabc\r\n0\r\n\r\n"
                            (post "/two" "Content-Length: 2") "xy"
                            (request-text "/three")))
      (test-equal "pipelined behind a chunked body, in order"
        '("/one 3:abc" "/two 2:xy" "/three 0:")
        (map (lambda (reply) (utf8->string (cdr reply)))
             (client-read-responses client 3 #:timeout 5)))
      (client-close! client))))

(test-group "body size limit"
  (with-server (server #:settings (make-loop-settings #:max-body 10))
    (let ((code body eof? (exchange server (string-append (post "/" "Transfer-Encoding: chunked")
                                                          "6\r\nhello!\r\n6\r\nhello!\r\n0\r\n\r\n"))))
      (test-equal "chunked body over the limit: 413" 413 code)
      (test-assert "and closed" eof?))
    (let ((code body eof? (exchange server (string-append (post "/" "Content-Length: 11")
                                                          "hello world"))))
      (test-equal "Content-Length over the limit: 413" 413 code))))

(test-group "body size limit by run-server's keyword, and by its old name"
  ;; the settings declared once (plucky server settings): run-server
  ;; takes each limit by its keyword
  (for-each
   (lambda (keyword)
     (with-server (server #:options (list keyword 10))
       (let ((code body eof? (exchange server (string-append (post "/" "Content-Length: 11")
                                                             "hello world"))))
         (test-equal (format #f "#:~a 10, 11 bytes: 413" (keyword->symbol keyword)) 413 code))
       (let ((code body eof? (exchange server (string-append (post "/" "Content-Length: 10")
                                                             "hello worl"))))
         (test-equal (format #f "#:~a 10, 10 bytes: 200" (keyword->symbol keyword)) 200 code))))
   (list #:max-body-bytes #:max-body)))

(test-group "Expect: 100-continue"
  (with-server (server #:settings (make-loop-settings #:max-body 100))
    ;; The client sends only the head, and the body once told to.
    (let ((client (connect-client (server-port server))))
      (client-send! client (post "/e" "Content-Length: 5" "Expect: 100-continue"))
      (let ((interim body (client-read-response client #:timeout 5)))
        (test-equal "100 Continue before the body" 100 (and interim (response-code interim))))
      (client-send! client "hello")
      (let ((response body (client-read-response client #:timeout 5)))
        (test-equal "then the answer" "/e 5:hello" (and body (utf8->string body))))
      (client-close! client))
    ;; A body too large is refused at once: no 100 Continue, no body read.
    (let ((client (connect-client (server-port server))))
      (client-send! client (post "/big" "Content-Length: 1000" "Expect: 100-continue"))
      (let ((response body (client-read-response client #:timeout 5)))
        (test-equal "413 without 100 Continue" 413 (and response (response-code response))))
      (client-close! client))
    ;; The whole body sent at once with the head: no interim response.
    (let ((client (connect-client (server-port server))))
      (client-send! client (string-append (post "/now" "Content-Length: 2" "Expect: 100-continue")
                                          "ok"))
      (let ((response body (client-read-response client #:timeout 5)))
        (test-equal "body already there: the answer directly" 200
          (and response (response-code response))))
      (client-close! client))))

(test-end "server/framing")
