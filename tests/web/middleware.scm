;;; tests/web/middleware.scm --- (plucky web middleware)

(use-modules (srfi srfi-64)
             (srfi srfi-11)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (plucky web middleware))

(define (request target)
  (build-request (string->uri-reference target) #:headers '((host . ("localhost" . #f)))))

(define (ok request body) (values '((content-type . (text/plain))) "ok"))
(define (missing request body)
  (values (build-response #:code 404 #:headers '((content-type . (text/plain)) (x-own . "1")))
          "nope"))
(define (failing request body) (error "broken"))

;; a middleware that records its name on the way in and out in LOG
(define log '())
(define (tracer name)
  (lambda (handler)
    (lambda (request body)
      (set! log (cons (list 'in name) log))
      (call-with-values (lambda () (handler request body))
        (lambda (response body)
          (set! log (cons (list 'out name) log))
          (values response body))))))

;; -> (code headers body)
(define (call handler)
  (let-values (((response body) (handler (request "/") #f)))
    (list (response-code* response) (response-headers* response) body)))

(define (error-page request code)
  (values '((content-type . (text/html))) (string-append "<h1>" (number->string code) "</h1>")))

(test-begin "web/middleware")

(test-group "compose-middleware"
  (call-guarded
   (lambda ()
     (set! log '())
     (call ((compose-middleware (tracer 'a) (tracer 'b)) ok))
     (test-equal "the first is the outermost" '((in a) (in b) (out b) (out a)) (reverse log))
     (test-eq "no middleware: the handler" ok ((compose-middleware) ok)))))

(test-group "wrap"
  (call-guarded
   (lambda ()
     (set! log '())
     (let ((wrapped (wrap ok (tracer 'a) (tracer 'b) (tracer 'c))))
       (test-equal "the answer goes through" '(200 ((content-type . (text/plain))) "ok")
         (call wrapped))
       (test-equal "in order" '((in a) (in b) (in c) (out c) (out b) (out a)) (reverse log))
       (test-assert "the inner handler is remembered"
         (procedure? (procedure-property wrapped 'plucky-inner-handler)))))))

(test-group "with-headers"
  (call-guarded
   (lambda ()
     (test-equal "added to an alist" '(200 ((content-type . (text/plain)) (x-a . "1")) "ok")
       (call (wrap ok (with-headers '((x-a . "1"))))))
     (test-equal "the response's own win"
       '(200 ((content-type . (text/plain))) "ok")
       (call (wrap ok (with-headers '((content-type . (text/html)))))))
     (test-equal "added to a record"
       '(404 ((content-type . (text/plain)) (x-own . "1") (x-a . "1")) "nope")
       (call (wrap missing (with-headers '((x-a . "1")))))))))

(test-group "with-error-pages"
  (call-guarded
   (lambda ()
     (test-equal "a 404 gets the page, keeping other headers"
       '(404 ((content-type . (text/html)) (x-own . "1")) "<h1>404</h1>")
       (call (wrap missing (with-error-pages error-page))))
     (test-equal "a 200 untouched" '(200 ((content-type . (text/plain))) "ok")
       (call (wrap ok (with-error-pages error-page))))
     (test-equal "a code not listed untouched"
       '(404 ((content-type . (text/plain)) (x-own . "1")) "nope")
       (call (wrap missing (with-error-pages error-page #:codes '(500)))))
     (let ((errors (open-output-string)))
       (test-equal "an exception is a 500 page"
         '(500 ((content-type . (text/html))) "<h1>500</h1>")
         (parameterize ((current-error-port errors))
           (call (wrap failing (with-error-pages error-page)))))
       (test-assert "and its backtrace is printed"
         (string-contains (get-output-string errors) "broken")))
     (test-error "without 500 in CODES the exception goes on" #t
       (call (wrap failing (with-error-pages error-page #:codes '(404))))))))

(test-group "with-response-headers"
  (call-guarded
   (lambda ()
     (test-equal "alist" '((a . "1") (b . "2")) (with-response-headers '((a . "1")) '((b . "2"))))
     (let ((r (with-response-headers (build-response #:code 201 #:headers '((a . "1")))
                                     '((b . "2")))))
       (test-equal "record" '(201 ((a . "1") (b . "2")))
         (list (response-code r) (response-headers r)))))))

(test-group "redirect"
  (let-values (((response body) (redirect "item?id=3")))
    (test-equal "303 by default" 303 (response-code response))
    (test-equal "a relative Location kept relative" "item?id=3"
      (uri->string (assq-ref (response-headers response) 'location)))
    (test-equal "a short body" "See other\n" body))
  (let-values (((response body) (redirect "https://example.org/" #:code 308)))
    (test-equal "another code" 308 (response-code response))
    (test-equal "an absolute Location" "https://example.org/"
      (uri->string (assq-ref (response-headers response) 'location))))
  (test-error "a code that is not a redirect's" #t (redirect "/" #:code 200)))

(test-end "web/middleware")
