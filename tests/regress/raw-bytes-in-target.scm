;;; tests/regress/raw-bytes-in-target.scm --- non-ASCII bytes in the target are 400
;;;
;;; A request target is ASCII (RFC 9112 §3.2 with RFC 3986 §2): a
;;; browser percent-encodes anything else (`/caf%C3%A9').  plucky took
;;; raw bytes over #x7F and decoded them as latin-1, so `GET /caf\xc3\xa9'
;;; reached the app as the path "/cafÃ©", and the overlong `GET /\xc0\xaf'
;;; (a "/" to a lax UTF-8 decoder: a path traversal trick) went through
;;; too.  Both are now a 400 and the connection closes.

(use-modules ((plucky http) #:select (bytevector-concatenate))
             (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (web response)
             (tests lib harness)
             (tests lib server)
             (plucky server))

(define (hello request body)
  (values '((content-type . (text/plain))) "Hello"))

(define (exchange port target)
  ;; TARGET: a bytevector -> (values status code, closed?)
  (with-client port
    (lambda (client)
      (client-send! client (bytevector-concatenate
                            (list (string->utf8 "GET ") target
                                  (string->utf8 " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))))
      (let ((response body (client-read-response client #:timeout 10)))
        (values (and response (response-code response))
                (and response (client-eof? client #:timeout 5)))))))

(test-begin "regress/raw-bytes-in-target")

(call-guarded
 (lambda ()
   (call-with-server
    hello
    (lambda (server)
      (for-each
       (lambda (name target)
         (let ((code closed? (exchange (server-port server) target)))
           (test-equal (string-append name ": 400") 400 code)
           (test-assert (string-append name ": closed") closed?)))
       '("/caf\\xc3\\xa9" "/\\xc0\\xaf" "/?q=\\xe9")
       (list #vu8(47 99 97 102 #xc3 #xa9) #vu8(47 #xc0 #xaf) #vu8(47 63 113 61 #xe9)))
      (let ((code closed? (exchange (server-port server) (string->utf8 "/caf%C3%A9"))))
        (test-equal "percent-encoded: 200" 200 code))))))

(test-end "regress/raw-bytes-in-target")
