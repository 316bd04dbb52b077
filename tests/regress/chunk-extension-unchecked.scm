;;; tests/regress/chunk-extension-unchecked.scm --- malformed chunk extensions are 400
;;;
;;; RFC 9112 §7.1.1: chunk-ext = *( BWS ";" BWS chunk-ext-name
;;; [ BWS "=" BWS chunk-ext-val ] ), names and values tokens or quoted
;;; strings.  The chunked decoder accepted any visible byte after the
;;; size, so these reached the handler as a 5-byte body:
;;;
;;;   5;\r\n          (";" and no name)
;;;   5;bad[=x\r\n    ("[" is not a token byte)
;;;   5 \r\n          (whitespace before the CRLF)
;;;
;;; A proxy in front that reads such a line another way frames the body
;;; another way (request smuggling).  Now each is a 400 and the
;;; connection closes; well-formed extensions still pass.

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (tests lib harness)
             (tests lib server)
             (plucky server))

(define (echo-length request body)
  (values '((content-type . (text/plain)))
          (number->string (if (bytevector? body) (bytevector-length body) 0))))

(define (post-chunked size-line)
  (string-append "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                 size-line "\r\nhello\r\n0\r\n\r\n"))

(define (answer port text)
  ;; -> (values status line, closed?)
  (let ((text closed? (exchange-until-close port text)))
    (values (car (string-split text #\return)) closed?)))

(test-begin "regress/chunk-extension-unchecked")

(call-guarded
 (lambda ()
   (call-with-server
    echo-length
    (lambda (server)
      (for-each
       (lambda (size-line)
         (let ((line closed? (answer (server-port server) (post-chunked size-line))))
           (test-equal (string-append size-line ": status") "HTTP/1.1 400 Bad Request" line)
           (test-assert (string-append size-line ": closed") closed?)))
       '("5;" "5;bad[=x" "5 " "5;a=" "5;a=\"x"))
      (let ((line closed? (answer (server-port server)
                                  (string-append (post-chunked "5 ; a = \"q\" ;b")
                                                 "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))))
        (test-equal "well-formed extensions: served" "HTTP/1.1 200 OK" line))))))

(test-end "regress/chunk-extension-unchecked")
