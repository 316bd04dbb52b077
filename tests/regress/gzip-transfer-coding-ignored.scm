;;; tests/regress/gzip-transfer-coding-ignored.scm --- transfer codings but chunked
;;;
;;; (No header with its colon in these lines: Guile would read the value
;;; after "Encoding:" as the file's character set.)
;;;
;;; A request whose Transfer-Encoding was `gzip, chunked' was accepted
;;; and the gzip ignored: the handler got the gzip bytes as the body.
;;; plucky decodes chunked only, so such a request is now a 501 (RFC
;;; 9110 §6.1: a coding the server does not understand).  `chunked,
;;; gzip' (chunked not last) was a 501 too; RFC 9112 §6.3 asks for a 400
;;; and a close: the body has no end the server can find.

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (web response)
             (tests lib harness)
             (tests lib server)
             (plucky server))

(define (echo-length request body)
  (values '((content-type . (text/plain)))
          (number->string (if (bytevector? body) (bytevector-length body) 0))))

(define (exchange port coding)
  ;; -> (values status code, closed?)
  (with-client port
    (lambda (client)
      (client-send! client
                    (string-append "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                                   coding "\r\n\r\n5\r\nhello\r\n0\r\n\r\n"))
      (let ((response body (client-read-response client #:timeout 10)))
        (values (and response (response-code response))
                (and response (client-eof? client #:timeout 5)))))))

(test-begin "regress/gzip-transfer-coding-ignored")

(call-guarded
 (lambda ()
   (call-with-server
    echo-length
    (lambda (server)
      (for-each
       (lambda (coding status)
         (let ((code closed? (exchange (server-port server) coding)))
           (test-equal (string-append coding ": status") status code)
           (test-assert (string-append coding ": closed") closed?)))
       '("gzip, chunked" "chunked, gzip" "gzip")
       '(501 400 400))))))

(test-end "regress/gzip-transfer-coding-ignored")
