;;; tests/regress/replay-returns-raw-values.scm --- replay gives a response record and bytes
;;;
;;; The README says `replay' returns "response, body"; it returned what
;;; the handler returned, raw: for a handler written as most are
;;; (values '((content-type . (text/plain))) "text"), a header list and a
;;; string.  It now returns what a server would send: a response record
;;; and a bytevector, as Guile's `sanitize-response' makes them.

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (web response)
             (tests lib harness)
             (plucky observe inbox))

(define failure
  (sexp->failure
   '(failure (id . 1) (time . 0) (code . 500) (route . "/") (method . GET)
             (target . "/x") (head . "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
             (body . #f) (backtrace . "") (message . "boom"))))

(test-begin "regress/replay-returns-raw-values")

(call-guarded
 (lambda ()
   (let ((response body (replay failure
                                (lambda (request body)
                                  (values '((content-type . (text/plain))) "mended")))))
     (test-assert "a response record" (response? response))
     (test-equal "its code" 200 (and (response? response) (response-code response)))
     (test-equal "its Content-Length" 6
       (and (response? response) (response-content-length response)))
     (test-assert "the body as bytes" (bytevector? body))
     (test-equal "the body" "mended" (and (bytevector? body) (utf8->string body))))))

(test-end "regress/replay-returns-raw-values")
