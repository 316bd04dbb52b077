;;; tests/regress/head-refusal-has-body.scm --- a refused HEAD request gets no content
;;;
;;; RFC 9110 §6.4.1: "any response to a HEAD request" has no content.  A
;;; HEAD request that plucky refused after parsing it (413 for a
;;; Content-Length over max-body, 417 for an expectation other than
;;; 100-continue) was answered by write-error-response!, which wrote the
;;; answer of a GET: the reason phrase as content.  Bytes sent and what
;;; came back before 9f2ca27 (max-body 100):
;;;
;;;   HEAD / HTTP/1.1 / Host: x / Content-Length: 1000 / (blank)
;;;   -> HTTP/1.1 413 Content Too Large ... Content-Length: 18 ... (blank)
;;;      Content Too Large\n                       <- 18 bytes too many
;;;   HEAD / HTTP/1.1 / Host: x / Expect: teapot / (blank)
;;;   -> HTTP/1.1 417 Expectation Failed ... (blank) Expectation Failed\n
;;;
;;; A client that reads the answer to its HEAD as a head alone (as it
;;; must) finds those bytes where the next response should start.  Found
;;; while writing the response checks of the fuzz driver for HEAD
;;; (tests/fuzz/http-fuzz.py).

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (tests lib harness)
             (tests lib server)
             (plucky server))

(define (hello request body)
  (values '((content-type . (text/plain))) "Hello, World!"))

(define (answer port text)
  ;; -> (values status line, bytes after the head, closed?)
  (let* ((text closed? (exchange-until-close port text))
         (end (string-contains text "\r\n\r\n")))
    (values (car (string-split text #\return))
            (if end (substring text (+ end 4)) text)
            closed?)))

(test-begin "regress/head-refusal-has-body")

(call-guarded
 (lambda ()
   (call-with-server
    hello
    (lambda (server)
      (for-each
       (lambda (name status text)
         (let ((line rest closed? (answer (server-port server) text)))
           (test-equal (string-append name ": status") status line)
           (test-equal (string-append name ": no content after the head") "" rest)
           (test-assert (string-append name ": closed") closed?)))
       '("HEAD over max-body" "HEAD with Expect: teapot")
       '("HTTP/1.1 413 Content Too Large" "HTTP/1.1 417 Expectation Failed")
       (list (request-text "/" #:method "HEAD" #:headers '("Content-Length: 1000"))
             (request-text "/" #:method "HEAD" #:headers '("Expect: teapot")))))
    #:settings (make-loop-settings #:max-body 100))))

(test-end "regress/head-refusal-has-body")
