;;; apps/headers.scm --- the seed's debug page: the request's headers as an
;;; HTML table built with SXML
;;;
;;; Serve it:  bin/plucky serve apps/headers.scm
;;; Each row shows a header's name and the Scheme value the server parsed
;;; it to, as `write' prints it: the second benchmark of the seed (Guile's
;;; examples/web/debug-sxml.scm), where the page is dynamic.  The tree is
;;; written by (plucky web html) rather than Guile's `sxml->xml'
;;; (bench/html compares the two on this very page).

(use-modules (web request)
             (web uri)
             (plucky web html))

(define (value->text value)
  (call-with-output-string (lambda (port) (write value port))))

(define (header-row header)
  `(tr (td (tt ,(symbol->string (car header))))
       (td (tt ,(value->text (cdr header))))))

(define (headers-page request)
  `(html (head (title "Request headers")
               (meta (@ (charset "utf-8"))))
         (body (h1 "Request headers")
               (p ,(symbol->string (request-method request)) " "
                  (tt ,(uri->string (request-uri request))))
               (table (@ (border "1"))
                      (tr (th "header") (th "value"))
                      ,@(map header-row (request-headers request))))))

(define (headers request body)
  (html-response (headers-page request)))

headers
