;;; tests/web/test.scm --- (plucky web test)

(use-modules (srfi srfi-64)
             (srfi srfi-11)
             (rnrs bytevectors)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (plucky web test))

;; an app that shows what it was given and sets cookies on /login
(define (app request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path "/login")
      (values '((content-type . (text/plain))
                (set-cookie . "session=abc; Path=/; HttpOnly")
                (set-cookie . "theme=dark"))
              "in"))
     ((string=? path "/logout")
      (values '((content-type . (text/plain))
                (set-cookie . "session=; Max-Age=0"))
              "out"))
     ((string=? path "/fail") (error "the app failed"))
     ((string=? path "/bad-length")
      (values '((content-type . (text/plain)) (content-length . 99)) "short"))
     ((string=? path "/bytes") (values '((content-type . (application/octet-stream))) #vu8(0 1 2)))
     ((string=? path "/none") (values (build-response #:code 204) #f))
     ((string=? path "/stream")
      (values '((content-type . (text/plain)) (transfer-encoding . (chunked)))
              (lambda (port) (display "streamed " port) (display "body" port))))
     (else
      (values '((content-type . (text/plain)))
              (object->string
               (list (request-method request) path (uri-query (request-uri request))
                     (assq-ref (request-headers request) 'cookie)
                     (assq-ref (request-headers request) 'content-type)
                     (and body (utf8->string body)))))))))

(define client (make-test-client app))

(define (get target . args)
  (let-values (((response body) (apply test-request client 'GET target args)))
    (list (response-code response) body)))

(test-begin "web/test")

(test-group "test-request"
  (call-guarded
   (lambda ()
     (test-equal "a GET" `(200 ,(object->string '(GET "/x" "a=1" #f #f #f))) (get "/x?a=1"))
     (let-values (((response body) (test-request client 'POST "/f" #:form '(("a" . "b c") ("é" . "&")))))
       (test-equal "a form" (object->string '(POST "/f" #f #f (application/x-www-form-urlencoded)
                                                   "a=b%20c&%C3%A9=%26"))
         body))
     (let-values (((response body) (test-request client 'PUT "/p" #:body "raw")))
       (test-equal "a body" (object->string '(PUT "/p" #f #f #f "raw")) body))
     (let-values (((response body) (test-request client 'GET "/x")))
       (test-equal "the server's headers: Content-Length" (string-length body)
         (response-content-length response))
       (test-assert "the server's headers: Date" (response-date response))
       (test-equal "the server's headers: charset added" '(text/plain (charset . "utf-8"))
         (response-content-type response)))
     (let-values (((response body) (test-request client 'HEAD "/x")))
       (test-equal "HEAD: no body, as the server sends it" "" body)
       (test-assert "HEAD: the length of the body not sent" (> (response-content-length response) 0)))
     (test-equal "bytes" '(200 #vu8(0 1 2)) (get "/bytes"))
     (test-equal "not decoded when asked" (list 200 (string->utf8 "in"))
       (get "/login" #:decode-body? #f))
     (test-equal "204" '(204 #vu8()) (get "/none"))
     (test-equal "a streamed body, collected" '(200 "streamed body") (get "/stream")))))

(test-group "test-request: failures are 500s as the server answers them"
  (call-guarded
   (lambda ()
     (test-equal "an exception" '(500 "Internal Server Error\n") (get "/fail"))
     (test-assert "kept in the client" (exception? (test-client-error client)))
     (test-equal "a Content-Length that does not match" 500 (car (get "/bad-length")))
     (get "/x")
     (test-equal "cleared by the next request" #f (test-client-error client))
     (test-error "a target that is not a path" #t (get "http://example.com/")))))

(test-group "cookie jar"
  (call-guarded
   (lambda ()
     (let ((client (make-test-client app)))
       (test-request client 'GET "/login")
       (test-equal "kept from Set-Cookie" '(("session" . "abc") ("theme" . "dark"))
         (test-client-cookies client))
       (let-values (((response body) (test-request client 'GET "/x")))
         (test-equal "sent back" (object->string '(GET "/x" #f "session=abc; theme=dark" #f #f))
           body))
       (test-request client 'GET "/logout")
       (test-equal "Max-Age=0 deletes" '(("theme" . "dark")) (test-client-cookies client))
       (set-test-client-cookie! client "theme" #f)
       (test-equal "set-test-client-cookie! #f deletes" '() (test-client-cookies client))))))

(test-group "response-header-values"
  (call-guarded
   (lambda ()
     (let-values (((response body) (test-request (make-test-client app) 'GET "/login")))
       (test-equal "every Set-Cookie" '("session=abc; Path=/; HttpOnly" "theme=dark")
         (response-header-values response 'set-cookie))))))

(test-end "web/test")
