;;; tests/regress/connect-tunnel-opened.scm --- CONNECT is refused unless the app takes it
;;;
;;; `CONNECT host:443' reached the handler, which answered 200 as for
;;; any request, and the bytes that followed were parsed as HTTP.  A 2xx
;;; to CONNECT tells a client its tunnel is open (RFC 9110 §9.3.6): the
;;; client then sends the tunnel's bytes (a TLS ClientHello) and reads
;;; whatever comes back as the far end's.  Bytes sent and what came back:
;;;
;;;   CONNECT example.com:443 HTTP/1.1 / Host: example.com:443 / (blank)
;;;   GET /x HTTP/1.1 / Host: x / (blank)
;;;   -> HTTP/1.1 200 OK ... Hello   then   HTTP/1.1 200 OK ... Hello
;;;
;;; Now a handler that does not say it answers CONNECT (`with-connect')
;;; never sees one: 501 and the connection closes.  One that does gets
;;; the request, and the connection still closes after its answer.

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (tests lib harness)
             (tests lib server)
             (plucky server))

(define (hello request body)
  (values '((content-type . (text/plain))) "Hello"))

(define connect-then-get
  (string-append "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"
                 "GET /x HTTP/1.1\r\nHost: x\r\n\r\n"))

(define (answer port text)
  ;; -> (values status line, number of responses, closed?)
  (let ((text closed? (exchange-until-close port text)))
    (values (car (string-split text #\return))
            (let count ((i 0) (n 0))
              (let ((k (string-contains text "HTTP/1.1 " i)))
                (if k (count (+ k 1) (+ n 1)) n)))
            closed?)))

(test-begin "regress/connect-tunnel-opened")

(call-guarded
 (lambda ()
   (call-with-server
    hello
    (lambda (server)
      (let ((line n closed? (answer (server-port server) connect-then-get)))
        (test-equal "refused" "HTTP/1.1 501 Not Implemented" line)
        (test-equal "one response: what follows is not read as HTTP" 1 n)
        (test-assert "closed" closed?))))
   (call-with-server
    (with-connect hello)
    (lambda (server)
      (let ((line n closed? (answer (server-port server) connect-then-get)))
        (test-equal "with-connect: the handler answers" "HTTP/1.1 200 OK" line)
        (test-equal "with-connect: one response" 1 n)
        (test-assert "with-connect: closed" closed?))))
   (call-with-server
    (with-body-port (with-connect hello))
    (lambda (server)
      (let ((line n closed? (answer (server-port server) connect-then-get)))
        (test-equal "with-body-port keeps with-connect's mark" "HTTP/1.1 200 OK" line))))))

(test-end "regress/connect-tunnel-opened")
