;;; tests/regress/head-500-has-body.scm --- a 500 answering HEAD has no content
;;;
;;; RFC 9110 §6.4.1: no response to HEAD has content.  When a handler
;;; raised on a HEAD request, the loop's fallback wrote the 500 of a GET,
;;; "Internal Server Error\n" after the head: the method was not passed
;;; on.  A client reading the answer to its HEAD as a head alone finds
;;; those bytes where the next response should start.

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (tests lib harness)
             (tests lib server)
             (plucky server))

(define (failing request body)
  (error "fails on purpose"))

(test-begin "regress/head-500-has-body")

(call-guarded
 (lambda ()
   (call-with-server
    failing
    (lambda (server)
      (with-client (server-port server)
        (lambda (client)
          (client-send! client (request-text "/" #:method "HEAD"))
          (let* ((bytes closed? (client-read-until-close client #:timeout 10))
                 (text (if (bytevector? bytes) (utf8->string bytes) ""))
                 (end (string-contains text "\r\n\r\n")))
            (test-equal "status" "HTTP/1.1 500 Internal Server Error"
              (car (string-split text #\return)))
            (test-equal "no content after the head" ""
              (if end (substring text (+ end 4)) text)))))))))

(test-end "regress/head-500-has-body")
