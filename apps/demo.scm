;;; apps/demo.scm --- the demo site `make run' serves
;;;
;;;   /         apps/hello.scm
;;;   /headers  apps/headers.scm
;;;   anything else: 404
;;;
;;; Each app is a file whose last expression is its handler; this one
;;; loads them beside itself and dispatches on the path.

(use-modules (web request)
             (web response)
             (web uri))

(define here
  ;; `plucky serve' says where this file is; elsewhere, ask Guile.
  (if (defined? 'app-directory)
      app-directory
      (dirname (current-filename))))

(define (load-app name)
  (load (string-append here "/" name)))

(define hello (load-app "hello.scm"))
(define headers (load-app "headers.scm"))

(define (not-found request body)
  (values (build-response #:code 404 #:headers '((content-type . (text/plain))))
          (string-append "Not found: " (uri-path (request-uri request)) "\n")))

(define (demo request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path "/") (hello request body))
     ((string=? path "/headers") (headers request body))
     (else (not-found request body)))))

demo
