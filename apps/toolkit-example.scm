;;; apps/toolkit-example.scm --- each piece of (plucky web …) in one small app
;;;
;;; Serve it:  bin/plucky serve apps/toolkit-example.scm
;;; List its routes:  bin/plucky routes apps/toolkit-example.scm
;;;
;;;   /                  a page of links, written with (plucky web html)
;;;   /item/:id:int      an item: the id is an integer, else 404
;;;   /user/:name        a name, percent-decoded, escaped in the page
;;;   /files/*path       the rest of the path
;;;   /echo   POST       the form sent, back as a page
;;;   /api/…             a router mounted under /api
;;; with default headers, error pages and a Server-Timing header
;;; (db and render phases) on every response.  tests/web/example.scm
;;; tests it with the test client, and once under plucky serve.

(use-modules (web request)
             (web uri)
             (plucky web router)
             (plucky web middleware)
             (plucky web html)
             (plucky web timing)
             ((plucky web forms) #:select (urlencoded->alist)))

(define (page title . content)
  `(html (head (meta (@ (charset "utf-8"))) (title ,title))
         (body (h1 ,title) ,@content)))

(define (front request body params)
  (html-response
   (page "Toolkit example"
         `(ul (li (a (@ (href ,(url-for router 'item '((id . 42))))) "item 42"))
              (li (a (@ (href ,(url-for router 'user '((name . "Ann <O'Hara>"))))) "a user"))
              (li (a (@ (href ,(url-for router 'file '((path . "docs/a b.txt"))))) "a file"))
              (li (a (@ (href ,(url-for router 'api-item '((id . 7))))) "the API"))))))

(define (item request body params)
  (let* ((id (assq-ref params 'id))
         (title (with-phase 'db (lambda () (string-append "Item number " (number->string id))))))
    (with-phase 'render
      (lambda ()
        (html-response (page title `(p "Page " ,(or (query-ref request "page") "1"))))))))

(define (user request body params)
  (html-response (page (string-append "User " (assq-ref params 'name)))))

(define (file request body params)
  (values '((content-type . (text/plain))) (string-append "file: " (assq-ref params 'path) "\n")))

(define (echo request body params)
  (let ((form (if body (urlencoded->alist body) '())))
    (html-response
     (page "Echo" `(dl ,@(map (lambda (field) `((dt ,(car field)) (dd ,(cdr field)))) form))))))

(define api
  (make-router
   (list (route 'GET "/items/:id:int"
                (lambda (request body params)
                  (values '((content-type . (application/json)))
                          (string-append "{\"id\": " (number->string (assq-ref params 'id)) "}")))
                #:name 'api-item))))

(define router
  (make-router
   (list (route 'GET "/" front #:name 'front)
         (route 'GET "/item/:id:int" item #:name 'item)
         (route 'GET "/user/:name" user #:name 'user)
         (route 'GET "/files/*path" file #:name 'file)
         (route 'POST "/echo" echo #:name 'echo)
         (mount "/api" (router-handler api) #:name 'api))))

(define (error-page request code)
  (html-response (page (string-append "Error " (number->string code)))))

(wrap (router-handler router)
      (with-headers '((x-content-type-options . "nosniff")))
      (with-error-pages (lambda (request code)
                          (call-with-values (lambda () (error-page request code))
                            (lambda (headers body) (values headers body))))
                        #:codes '(404 500))
      (with-server-timing))
