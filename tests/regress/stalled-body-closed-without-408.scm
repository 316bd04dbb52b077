;;; tests/regress/stalled-body-closed-without-408.scm --- a stalled body gets its 408
;;;
;;; Issue 4, timeouts: "header read, body read idle, keep-alive idle,
;;; response write; 408 where a response is still possible."  A head
;;; that stalled got "408 Request Timeout", but a body that stalled (a
;;; Content-Length body, or a chunked one, whose bytes stop coming) was
;;; closed without a word, though nothing had been answered to that
;;; request yet: the sweep (plucky/server/loop.scm, sweep!) answered 408
;;; only in state `head' and closed the states `body' and `chunked' as it
;;; closes an idle keep-alive connection.  The client then cannot tell a
;;; timeout from a crash.  Found while deciding how the fuzz driver's
;;; connections may end (tests/fuzz/http-fuzz.py); fixed in 9f2ca27.
;;;
;;; Bytes sent, then silence (body timeout 1 s):
;;;   POST / HTTP/1.1 / Host: x / Content-Length: 10 / (blank) / abc
;;;   POST / HTTP/1.1 / Host: x / Transfer-Encoding: chunked / (blank) / 5 CRLF ab
;;; What came back before 9f2ca27: nothing, then the close (2 s later).
;;; What must: HTTP/1.1 408 ... with Connection: close, then the close.

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (tests lib harness)
             (tests lib server)
             (plucky server))

(define (hello request body)
  (values '((content-type . (text/plain))) "Hello, World!"))

(define (stalled-answer port text)
  ;; Send TEXT and wait for the server to end the connection.
  ;; -> (values first line or "" closed?)
  (let ((text closed? (exchange-until-close port text)))
    (values (car (string-split text #\return)) closed?)))

(test-begin "regress/stalled-body-closed-without-408")

(call-guarded
 (lambda ()
   (call-with-server
    hello
    (lambda (server)
      (for-each
       (lambda (name text)
         (let ((line closed? (stalled-answer (server-port server) text)))
           (test-equal (string-append name ": 408") "HTTP/1.1 408 Request Timeout" line)
           (test-assert (string-append name ": then closed") closed?)))
       '("Content-Length body stalled" "chunked body stalled" "head stalled (control)")
       (list (string-append (request-text "/" #:method "POST" #:headers '("Content-Length: 10"))
                            "abc")
             (string-append (request-text "/" #:method "POST"
                                          #:headers '("Transfer-Encoding: chunked"))
                            "5\r\nab")
             "GET / HTTP/1.1\r\nHost: x\r\n")))
    #:settings (make-loop-settings #:body-timeout 1 #:header-timeout 1))))

(test-end "regress/stalled-body-closed-without-408")
