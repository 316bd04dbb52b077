;;; apps/hello.scm --- the seed's "Hello, World!" handler
;;;
;;; Serve it:  bin/plucky serve apps/hello.scm
;;; It is also the hello-world benchmark (make bench): the same handler
;;; Guile's examples/web/hello.scm runs, answering with the alist-of-headers
;;; shorthand and a string body, so the server does the encoding.

(define (hello request body)
  (values '((content-type . (text/plain)))
          "Hello, World!"))

hello
