;;; tests/regress/json-number-digits-quadratic.scm --- a long JSON number stalls a worker
;;;
;;; Issue 25 (i).  `decode-json' read a number of any length: its digits
;;; went to `string->number', whose bignum conversion takes time
;;; quadratic in them.  Before the fix:
;;;
;;;   (decode-json (make-bytevector 100000 (char->integer #\1)))     0.23 s
;;;   (decode-json (make-bytevector 1000000 (char->integer #\1)))   19.9 s
;;;
;;; and a 1 MB POST of digits to an app calling `read-json-body' held its
;;; worker for 18 s while other requests waited.  The decoders (the
;;; generic one and those `define-json-type' makes) now refuse a number
;;; of more than 4,300 digits (CPython's limit for int()), at its first
;;; byte, with an error that says so.

(use-modules (srfi srfi-64)
             (rnrs bytevectors)
             (ice-9 exceptions)
             (web request)
             (web uri)
             (tests lib harness)
             (plucky http error)
             (plucky web json)
             (plucky web json read))

(define (digits n)
  ;; -> a bytevector of N digits "1", a JSON number
  (make-bytevector n (char->integer #\1)))

(define (wrapped prefix n suffix)
  ;; -> PREFIX, N digits, SUFFIX as UTF-8
  (let ((bv (make-bytevector (+ (string-length prefix) n (string-length suffix))
                             (char->integer #\1))))
    (bytevector-copy! (string->utf8 prefix) 0 bv 0 (string-length prefix))
    (bytevector-copy! (string->utf8 suffix) 0 bv (+ (string-length prefix) n)
                      (string-length suffix))
    bv))

(define (outcome thunk)
  ;; -> (ok), (json-error OFFSET EXPECTED) or (other CONDITION)
  (with-exception-handler
      (lambda (e)
        (if (json-error? e)
            (list 'json-error (json-error-offset e) (json-error-expected e))
            (list 'other e)))
    (lambda () (thunk) '(ok))
    #:unwind? #t))

(define (seconds thunk)
  ;; -> how long THUNK took, in seconds
  (let ((start (get-internal-real-time)))
    (thunk)
    (exact->inexact (/ (- (get-internal-real-time) start) internal-time-units-per-second))))

;; Well within the budget on any machine the tests run on; before the
;; fix, each of these took tens of seconds.
(define budget 1.0)

(define-json-type counter (<counter> make-counter counter?)
  #:decoder json->counter #:encoder counter->json #:unknown reject
  (n counter-n "n" integer)
  (x counter-x "x" real 0.0))

(test-begin "regress/json-number-digits-quadratic")

(define expected "a number of at most 4300 digits")

(test-group "decode-json"
  (test-equal "4300 digits: read" (string->number (make-string 4300 #\1))
    (decode-json (digits 4300)))
  (test-equal "4301 digits: refused at the number's first byte" (list 'json-error 0 expected)
    (outcome (lambda () (decode-json (digits 4301)))))
  (test-equal "a fraction's digits count" (list 'json-error 1 expected)
    (outcome (lambda () (decode-json (wrapped "[1." 4300 "]")))))
  (test-equal "an exponent's digits count" (list 'json-error 1 expected)
    (outcome (lambda () (decode-json (wrapped "[1e" 4300 "]")))))
  (test-equal "-0.1e-5: six digits, read" -1e-6 (decode-json (string->utf8 "-0.1e-5")))
  (let ((result #f))
    (test-assert "1,000,000 digits: refused within the budget"
      (< (seconds (lambda () (set! result (outcome (lambda () (decode-json (digits 1000000)))))))
         budget))
    (test-equal "1,000,000 digits: the error" (list 'json-error 0 expected) result))
  (let ((result #f))
    (test-assert "1,000,000 digits after a point: refused within the budget"
      (< (seconds (lambda () (set! result (outcome (lambda () (decode-json (wrapped "0." 1000000 "")))))))
         budget))
    (test-equal "1,000,000 digits after a point: the error" (list 'json-error 0 expected) result)))

(test-group "define-json-type"
  (test-equal "an integer field of 1,000,000 digits: refused" (list 'json-error 5 expected)
    (outcome (lambda () (json->counter (wrapped "{\"n\":" 1000000 "}")))))
  (test-assert "within the budget"
    (< (seconds (lambda () (outcome (lambda () (json->counter (wrapped "{\"n\":" 1000000 "}"))))))
       budget))
  (test-equal "a real field of 1,000,000 digits: refused" (list 'json-error 11 expected)
    (outcome (lambda () (json->counter (wrapped "{\"n\":1,\"x\":" 1000000 "}")))))
  (test-assert "within the budget"
    (< (seconds (lambda () (outcome (lambda () (json->counter (wrapped "{\"n\":1,\"x\":" 1000000 "}"))))))
       budget))
  (test-equal "a field of 4300 digits: read" (string->number (make-string 4300 #\1))
    (counter-n (json->counter (wrapped "{\"n\":" 4300 "}")))))

(test-group "read-json-body"
  (define request
    (build-request (string->uri "http://localhost/") #:method 'POST
                   #:headers '((content-type . (application/json)))
                   #:port (open-input-string "")))
  (test-equal "1 MB of digits: a 400 naming the limit, at once"
    (list 400 (string-append "malformed JSON: expected " expected " at byte 0"))
    (with-exception-handler
        (lambda (e) (list (http-error-status e) (http-error-reason e)))
      (lambda () (read-json-body request (digits 1000000)))
      #:unwind? #t)))

(test-end "regress/json-number-digits-quadratic")
