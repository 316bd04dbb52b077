;;; tests/web/router.scm --- (plucky web router)

(use-modules (srfi srfi-64)
             (srfi srfi-11)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (plucky web router)
             ((plucky server) #:select (take-request-route!)))

(define (request method target)
  (build-request (string->uri-reference target) #:method method
                 #:headers '((host . ("localhost" . #f)))
                 #:port (open-input-string "")))

;; a route handler that answers with what it was given
(define (echo tag)
  (lambda (request body params)
    (values '((content-type . (text/plain)))
            (list tag (uri-path (request-uri request)) params))))

(define blog
  (make-router (list (route 'GET "/" (echo 'blog-index) #:name 'blog-index)
                     (route 'GET "/post/:slug" (echo 'post) #:name 'post))))

(define router
  (make-router
   (list (route 'GET "/" (echo 'front) #:name 'front)
         (route 'GET "/item/new" (echo 'new-item) #:name 'new-item)
         (route 'GET "/item/:id:int" (echo 'item) #:name 'item)
         (route 'POST "/item/:id:int" (echo 'item-post))
         (route 'GET "/item/:slug" (echo 'item-slug))
         (route '(GET PUT) "/user/:name" (echo 'user) #:name 'user)
         (route 'GET "/user/:name/posts/:n:int" (echo 'user-post) #:name 'user-post)
         (route 'GET "/static/*path" (echo 'static) #:name 'static)
         (route 'GET "/dir/" (echo 'dir))
         (mount "/blog" (router-handler blog) #:name 'blog)
         (mount "/plain" (lambda (request body)
                           (values '() (list 'plain (uri-path (request-uri request))
                                             (request-mount-prefix request))))))))

(define app (router-handler router))

;; -> (code body) of APP for METHOD TARGET
(define (answer method target)
  (let-values (((response body) (app (request method target) #f)))
    (list (if (response? response) (response-code response) 200) body)))

(define (allow method target)
  (let-values (((response body) (app (request method target) #f)))
    (response-allow response)))

(define-syntax-rule (test-route target expected)
  (test-equal target (list 200 expected) (answer 'GET target)))
(define-syntax-rule (test-code method target code)
  (test-equal (string-append (symbol->string method) " " target) code (car (answer method target))))
(define-syntax-rule (test-url expected name params ...)
  (test-equal expected expected (url-for router name params ...)))
(define-syntax-rule (test-bad-pattern pattern)
  (test-error pattern #t (route 'GET pattern (echo 'x))))

(test-begin "web/router")

(test-group "dispatch"
  (call-guarded
   (lambda ()
     (test-route "/" '(front "/" ()))
     (test-route "/item/42" '(item "/item/42" ((id . 42))))
     (test-route "/item/007" '(item "/item/007" ((id . 7))))
     (test-route "/item/new" '(new-item "/item/new" ()))
     (test-route "/item/x42" '(item-slug "/item/x42" ((slug . "x42"))))
     (test-route "/item/-1" '(item-slug "/item/-1" ((slug . "-1"))))
     (test-route "/item/99999999999999999999" '(item-slug "/item/99999999999999999999"
                                                          ((slug . "99999999999999999999"))))
     (test-route "/user/ann" '(user "/user/ann" ((name . "ann"))))
     (test-route "/user/Ann%20O%27Hara" '(user "/user/Ann%20O%27Hara" ((name . "Ann O'Hara"))))
     (test-route "/user/a%2Fb" '(user "/user/a%2Fb" ((name . "a/b"))))
     (test-route "/user/ann/posts/3" '(user-post "/user/ann/posts/3" ((n . 3) (name . "ann"))))
     (test-route "/static/css/site.css" '(static "/static/css/site.css" ((path . "css/site.css"))))
     (test-route "/static/a%20b/c" '(static "/static/a%20b/c" ((path . "a b/c"))))
     (test-route "/static/" '(static "/static/" ((path . ""))))
     (test-route "/static" '(static "/static" ((path . ""))))
     (test-route "/dir/" '(dir "/dir/" ()))
     (test-code 'GET "/dir" 404)
     (test-code 'GET "/nowhere" 404)
     (test-code 'GET "/item" 404)
     (test-code 'GET "/item/" 404)
     (test-code 'GET "/item/42/more" 404)
     (test-code 'GET "/user/" 404)
     (test-route "/user/%zz" '(user "/user/%zz" ((name . "%zz"))))
     (test-code 'GET "/user/%C3%28" 400))))

(test-group "dispatch: methods"
  (call-guarded
   (lambda ()
     (test-equal "POST goes to the POST route" '(200 (item-post "/item/3" ((id . 3))))
       (answer 'POST "/item/3"))
     (test-equal "HEAD is answered by GET" '(200 (item "/item/3" ((id . 3))))
       (answer 'HEAD "/item/3"))
     (test-equal "PUT where the route takes it" '(200 (user "/user/x" ((name . "x"))))
       (answer 'PUT "/user/x"))
     (test-code 'DELETE "/item/3" 405)
     (test-equal "Allow of a 405" '(GET POST HEAD) (allow 'DELETE "/item/3"))
     (test-code 'POST "/" 405)
     (test-equal "Allow of /" '(GET HEAD) (allow 'POST "/"))
     (test-code 'OPTIONS "/user/x" 204)
     (test-equal "Allow of OPTIONS" '(GET PUT HEAD) (allow 'OPTIONS "/user/x"))
     (test-code 'DELETE "/nowhere" 404))))

(test-group "mount"
  (call-guarded
   (lambda ()
     (test-route "/blog/post/hello" '(post "/post/hello" ((slug . "hello"))))
     (test-route "/blog" '(blog-index "/" ()))
     (test-route "/blog/" '(blog-index "/" ()))
     (test-code 'GET "/blog/nowhere" 404)
     (test-route "/plain/a/b?x=1" '(plain "/a/b" "/plain"))
     (test-route "/plain" '(plain "/" "/plain"))
     (test-code 'GET "/blogger" 404))))

(test-group "url-for"
  (call-guarded
   (lambda ()
     (test-url "/" 'front)
     (test-url "/item/42" 'item '((id . 42)))
     (test-url "/user/Ann%20O%27Hara" 'user '((name . "Ann O'Hara")))
     (test-url "/user/a%2Fb" 'user '((name . "a/b")))
     (test-url "/user/%3Cscript%3E/posts/2" 'user-post '((name . "<script>") (n . 2)))
     (test-url "/static/css/a%20b.css" 'static '((path . "css/a b.css")))
     (test-url "/blog/post/hi" 'post '((slug . "hi")))
     (test-url "/item/1?page=2&q=a%26b" 'item '((id . 1)) #:query '(("page" . "2") ("q" . "a&b")))
     (test-error "missing parameter" #t (url-for router 'item '()))
     (test-error "wrong type" #t (url-for router 'item '((id . "x"))))
     (test-error "unknown name" #t (url-for router 'nope '()))
     ;; what url-for makes, dispatch reads back
     (test-route (url-for router 'user '((name . "é & ü/ß")))
                 `(user ,(url-for router 'user '((name . "é & ü/ß"))) ((name . "é & ü/ß")))))))

(test-group "route"
  (call-guarded
   (lambda ()
     (test-bad-pattern "item")
     (test-bad-pattern "/a//b")
     (test-bad-pattern "/*rest/more")
     (test-bad-pattern "/x/:id:float")
     (test-bad-pattern "/x/:")
     (test-bad-pattern "/x/*")
     (test-bad-pattern "/x/:a/:a")
     (test-error "two routes of one name" #t
       (make-router (list (route 'GET "/a" (echo 'a) #:name 'x)
                          (route 'GET "/b" (echo 'b) #:name 'x)))))))

(test-group "router-routes"
  (call-guarded
   (lambda ()
     (test-equal "the routes, mounted ones included"
       '(((GET) "/" front)
         ((GET) "/item/new" new-item)
         ((GET) "/item/:id:int" item)
         ((POST) "/item/:id:int" #f)
         ((GET) "/item/:slug" #f)
         ((GET PUT) "/user/:name" user)
         ((GET) "/user/:name/posts/:n:int" user-post)
         ((GET) "/static/*path" static)
         ((GET) "/dir/" #f)
         ((GET) "/blog/" blog-index)
         ((GET) "/blog/post/:slug" post)
         ((*) "/plain/*" #f))
       (router-routes router))
     (test-eq "handler-router" router (handler-router app))
     (test-eq "handler-router of another procedure" #f (handler-router (lambda (r b) r))))))

(test-group "query-params"
  (call-guarded
   (lambda ()
     (test-equal "decoded, in order" '(("a" . "1") ("b" . "x y") ("a" . "2"))
       (query-params (request 'GET "/?a=1&b=x+y&a=2")))
     (test-equal "none" '() (query-params (request 'GET "/")))
     (test-equal "query-ref" "1" (query-ref (request 'GET "/?a=1&a=2") "a"))
     (test-equal "query-ref default" "d" (query-ref (request 'GET "/?a=1") "b" "d")))))

(test-group "note-request-route!"
  (call-guarded
   (lambda ()
     ;; the observer is told the pattern, the mount prefix before it,
     ;; through (plucky server): the router never loads observe
     (take-request-route!)
     (answer 'GET "/item/5")
     (test-equal "a pattern" "/item/:id:int" (take-request-route!))
     (answer 'GET "/blog/post/x")
     (test-equal "the mount prefix before it" "/blog/post/:slug" (take-request-route!))
     (answer 'GET "/nowhere")
     (test-equal "none for a 404" #f (take-request-route!))
     (test-equal "the router did not load the observer" #f
       (resolve-module '(plucky observe accounting) #f #:ensure #f)))))

(test-end "web/router")
