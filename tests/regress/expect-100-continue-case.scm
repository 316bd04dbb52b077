;;; tests/regress/expect-100-continue-case.scm --- "Expect: 100-Continue" is 100-continue
;;;
;;; Found by the fuzz driver's calibration (tests/fuzz/http-fuzz.py sends
;;; each corpus request alone first): the corpus request of Java's own
;;; HTTP client, tests/data/requests/java-httpclient-expect.http, sends
;;; "Expect: 100-Continue", and plucky refused it with 417 Expectation
;;; Failed and closed.  RFC 9110 §10.1.1: "The Expect field value is
;;; case-insensitive."  Guile's header parser keeps the case of the token
;;; (the symbol 100-Continue), and the loop's unmet-expectation? compared
;;; it with '100-continue.  So every upload from java.net.http with
;;; expectContinue(true) failed against plucky, until 9f2ca27.

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (ice-9 textual-ports)
             (web response)
             (tests lib harness)
             (tests lib server)
             (plucky server))

(define (echo request body)
  (values '((content-type . (text/plain)))
          (string-append "body " (if body (utf8->string body) ""))))

(define (post expect)
  (request-text "/expect" #:method "POST"
                #:headers (list "Content-Length: 3" (string-append "Expect: " expect))))

(test-begin "regress/expect-100-continue-case")

(call-guarded
 (lambda ()
   (call-with-server
    echo
    (lambda (server)
      ;; The Java client's head, byte for byte, with its 3-byte body.
      (let ((head (call-with-input-file (test-data-file "requests/java-httpclient-expect.http")
                    (lambda (port) (get-string-all port)))))
        (with-client (server-port server)
          (lambda (client)
            (client-send! client (string-append head "abc"))
            (let ((response body (client-read-response client #:timeout 5)))
              (test-equal "java-httpclient-expect.http with its body: 200" 200
                (and response (response-code response)))
              (test-equal "and the body reached the handler" "body abc"
                (and body (utf8->string body)))))))
      ;; The head alone: the client waits for 100 Continue before the body.
      (for-each
       (lambda (spelling)
         (with-client (server-port server)
           (lambda (client)
             (client-send! client (post spelling))
             (let ((interim body (client-read-response client #:timeout 5)))
               (test-equal (string-append "Expect: " spelling ": 100 Continue") 100
                 (and interim (response-code interim))))
             (client-send! client "xyz")
             (let ((response body (client-read-response client #:timeout 5)))
               (test-equal (string-append "Expect: " spelling ": then the answer") "body xyz"
                 (and body (utf8->string body)))))))
       '("100-Continue" "100-CONTINUE"))))))

(test-end "regress/expect-100-continue-case")
