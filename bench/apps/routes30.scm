;;; bench/apps/routes30.scm --- a router of 30 routes, for bench/instructions
;;;
;;;   INSTRUCTIONS_APP=bench/apps/routes30.scm INSTRUCTIONS_PATH=/item/42 \
;;;     bench/instructions
;;;
;;; /item/42 is answered as apps/hello.scm answers /, so that the
;;; difference with apps/hello.scm is the router's cost: the path cut
;;; into segments, the trie walked past a literal that does not match
;;; ("item/new") to the integer parameter, the route's pattern declared.
;;; The other routes make the trie as wide as a real app's.

(use-modules (plucky web router))

(define (hello request body params)
  (values '((content-type . (text/plain))) "Hello, World!"))

(define (other request body params)
  (values '((content-type . (text/plain))) "other"))

(router-handler
 (make-router
  (append
   (map (lambda (i)
          (route 'GET (string-append "/section" (number->string i) "/:id:int") other
                 #:name (string->symbol (string-append "section" (number->string i)))))
        (iota 14))
   (map (lambda (i)
          (route '(GET POST) (string-append "/user/:name/page" (number->string i)) other))
        (iota 8))
   (list (route 'GET "/static/*path" other)
         (route 'GET "/item/new" other)
         (route 'GET "/item/:id:int" hello #:name 'item)
         (route 'POST "/item/:id:int" other)
         (route 'GET "/news" other)
         (route 'GET "/newest" other)
         (route 'GET "/ask" other)
         (route 'GET "/" other #:name 'front)))))
