;;; tests/web/csrf.scm --- (plucky web csrf)

(use-modules (srfi srfi-64)
             (srfi srfi-11)
             (srfi srfi-1)
             (rnrs bytevectors)
             (ice-9 ftw)
             (sqlite3)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (plucky web crypto)
             (plucky web session)
             (plucky web middleware)
             (plucky web csrf))

(define directory
  (mkdtemp (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-csrf-test-XXXXXX")))
(define db (sqlite-open (string-append directory "/csrf.db")))

;; The app: GET / renders a form (its token in the body), POST, PUT,
;; PATCH and DELETE say "done"; GET /logout destroys the session.
(define app
  (with-sessions
   (with-csrf
    (lambda (request body)
      (values (build-response #:headers '((content-type text/plain)))
              (cond
               ((string=? "/logout" (uri-path (request-uri request))) (session-destroy!) "bye")
               ((eq? 'GET (request-method request)) (object->string (csrf-field)))
               (else "done")))))
   #:db db))

(define (cookie-of response)
  ;; -> "session=ID" from RESPONSE's Set-Cookie, or #f
  (let ((header (assq-ref (response-headers response) 'set-cookie)))
    (and header (car (string-split header #\;)))))

(define* (call method #:key (path "/") cookie (headers '()) body)
  ;; -> (response-code body-text)
  (call-with-values
      (lambda ()
        (app (build-request (string->uri (string-append "http://localhost" path)) #:method method #:port (%make-void-port "r")
                            #:headers (append (if cookie `((cookie . ,cookie)) '()) headers))
             body))
    (lambda (response body) (list (response-code response) body))))

;; -> (values cookie token): a visitor who loaded the form
(define (visit)
  (call-with-values (lambda () (app (build-request (string->uri "http://localhost/")) #f))
    (lambda (response body)
      (values (cookie-of response)
              (cadr (assq 'value (cdadr (call-with-input-string body read))))))))

(define (urlencoded token)
  (string->utf8 (string-append "title=hello&csrf=" token)))
(define form-headers '((content-type application/x-www-form-urlencoded)))

(define (multipart token)
  (string->utf8
   (string-append "--XyZ\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhello\r\n"
                  "--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.txt\"\r\n\r\ndata\r\n"
                  "--XyZ\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n" token "\r\n--XyZ--\r\n")))
(define multipart-headers '((content-type multipart/form-data (boundary . "XyZ"))))

(define (tamper token)
  (let ((copy (string-copy token)))
    (string-set! copy 40 (if (char=? #\A (string-ref copy 40)) #\B #\A))
    copy))

(define-syntax-rule (test-status name status form)
  (test-equal name status (car form)))

(test-begin "web/csrf")

(test-group "csrf-field"
  (let-values (((cookie token) (visit)))
    (test-assert "the form made a session" (string-prefix? "session=" cookie))
    (test-equal "64 bytes, base64url" 86 (string-length token))
    (let-values (((cookie-2 token-2) (visit)))
      (test-assert "another visitor, another token" (not (equal? token token-2))))))

(test-group "csrf-token"
  (let-values (((cookie token) (visit)))
    (let ((again (cadr (assq 'value (cdadr (call-with-input-string (cadr (call 'GET #:cookie cookie)) read))))))
      (test-assert "masked afresh on each page" (not (equal? token again)))
      (test-status "the older one still works" 200
        (call 'POST #:cookie cookie #:headers form-headers #:body (urlencoded token)))
      (test-status "and the newer one" 200
        (call 'POST #:cookie cookie #:headers form-headers #:body (urlencoded again))))))

(test-group "with-csrf: accepted"
  (let-values (((cookie token) (visit)))
    (test-equal "a GET needs none" '(200 "done")
      (call 'HEAD #:cookie cookie))
    (test-equal "the form's field" '(200 "done")
      (call 'POST #:cookie cookie #:headers form-headers #:body (urlencoded token)))
    (test-status "a multipart form's field" 200
      (call 'POST #:cookie cookie #:headers multipart-headers #:body (multipart token)))
    (test-status "the header" 200
      (call 'POST #:cookie cookie #:headers `((x-csrf-token . ,token))))
    (for-each (lambda (method)
                (test-status (symbol->string method) 200
                  (call method #:cookie cookie #:headers `((x-csrf-token . ,token)))))
              '(PUT PATCH DELETE))))

(test-group "with-csrf: refused with 403"
  (let-values (((cookie token) (visit))
               ((other-cookie other-token) (visit)))
    (test-status "no token" 403 (call 'POST #:cookie cookie))
    (test-status "no token in the form" 403
      (call 'POST #:cookie cookie #:headers form-headers #:body (string->utf8 "title=hello")))
    (test-status "an empty token" 403
      (call 'POST #:cookie cookie #:headers form-headers #:body (urlencoded "")))
    (test-status "one character changed" 403
      (call 'POST #:cookie cookie #:headers form-headers #:body (urlencoded (tamper token))))
    (test-status "another session's token" 403
      (call 'POST #:cookie cookie #:headers form-headers #:body (urlencoded other-token)))
    (test-status "the unmasked secret" 403
      (call 'POST #:cookie cookie #:headers `((x-csrf-token . ,(substring token 43)))))
    (test-status "no session at all" 403
      (call 'POST #:headers form-headers #:body (urlencoded token)))
    (test-status "a token in the query string only" 403
      (call 'POST #:path (string-append "/?csrf=" token) #:cookie cookie))
    (test-status "a multipart form without it" 403
      (call 'POST #:cookie cookie #:headers multipart-headers
            #:body (string->utf8 "--XyZ\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhello\r\n--XyZ--\r\n")))
    (test-status "a malformed multipart body" 403
      (call 'POST #:cookie cookie #:headers multipart-headers #:body (string->utf8 "garbage")))
    (test-equal "the refusal says why" 403
      (car (call 'DELETE #:cookie cookie)))
    (test-assert "the message"
      (string-contains (cadr (call 'DELETE #:cookie cookie)) "security token"))
    (for-each (lambda (junk)
                (test-status junk 403 (call 'POST #:cookie cookie #:headers `((x-csrf-token . ,junk)))))
              (list "null" "undefined" "' OR 1=1 --" (make-string 86 #\A) (make-string 100000 #\A)
                    "\x00" (string-append token "A")))
    (test-status "after logout, the old session's token" 403
      (begin
        (call 'GET #:path "/logout" #:cookie cookie)
        (call 'POST #:cookie cookie #:headers form-headers #:body (urlencoded token))))))

(test-group "with-csrf: no spooled file is left behind"
  (let-values (((cookie token) (visit)))
    (let ((before (scandir (or (getenv "TMPDIR") "/tmp") (lambda (n) (string-prefix? "plucky-upload-" n)))))
      (call 'POST #:cookie cookie #:headers multipart-headers #:body (multipart token))
      (test-equal before
        (scandir (or (getenv "TMPDIR") "/tmp") (lambda (n) (string-prefix? "plucky-upload-" n)))))))

(test-group "with-csrf: exempt?"
  (let ((api (with-sessions (with-csrf (lambda (request body) (values '() "ok"))
                                       #:exempt? (lambda (request)
                                                   (string-prefix? "/api/" (uri-path (request-uri request)))))
                            #:db db)))
    (test-equal "ok" (call-with-values
                         (lambda () (api (build-request (string->uri "http://localhost/api/x") #:method 'POST #:port (%make-void-port "r")) #f))
                       (lambda (response body) body)))))

(system* "rm" "-rf" directory)

(test-group "session-middleware, csrf-middleware"
  ;; the same app, its two layers as middlewares that `wrap' composes
  (let ((wrapped (wrap (lambda (request body)
                         (values (build-response #:headers '((content-type text/plain)))
                                 (if (eq? 'GET (request-method request))
                                     (object->string (csrf-field))
                                     "done")))
                       (session-middleware #:db db)
                       (csrf-middleware #:methods '(POST)))))
    (define (wrapped-call method cookie body)
      (call-with-values
          (lambda ()
            (wrapped (build-request (string->uri "http://localhost/") #:method method
                                    #:port (%make-void-port "r")
                                    #:headers `((cookie . ,cookie) ,@form-headers))
                     body))
        (lambda (response body) (list (response-code response) body))))
    (let-values (((cookie token) (visit)))
      (test-status "a POST with the token" 200 (wrapped-call 'POST cookie (urlencoded token)))
      (test-status "a POST without" 403 (wrapped-call 'POST cookie (string->utf8 "title=x")))
      (test-status "a method not in #:methods passes" 200
        (wrapped-call 'DELETE cookie (string->utf8 "title=x"))))))

(test-end "web/csrf")
