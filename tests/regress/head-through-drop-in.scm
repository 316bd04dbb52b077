;;; tests/regress/head-through-drop-in.scm --- HEAD of a sanitized response under the drop-in
;;;
;;; An app that calls Guile's `sanitize-response' itself (tekuti does,
;;; to cache its answers) returns, for HEAD, the response with the GET's
;;; Content-Length and the body #f; Guile's `run-server' sanitizes again
;;; and hands the server an empty bytevector.  plucky's response writer
;;; let a HEAD answer declare a length only with no body at all, so every
;;; HEAD under (run-server handler 'plucky) was a 500.  Under Guile's own
;;; server it is a 200 with the GET's Content-Length, as it is now.

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (web request)
             (web response)
             (web server)
             (tests lib harness)
             (tests lib server))

(define (sanitizing request body)
  ;; What tekuti does: sanitize, then return the result.
  (sanitize-response request
                     (build-response #:headers '((content-type . (text/plain))))
                     "Hello, World!"))

(define (start-drop-in handler)
  (start-child
   (lambda (report)
     (let ((sock (socket AF_INET SOCK_STREAM 0)))
       (setsockopt sock SOL_SOCKET SO_REUSEADDR 1)
       (bind sock AF_INET INADDR_LOOPBACK 0)
       (listen sock 128)
       (report (sockaddr:port (getsockname sock)))
       (run-server handler 'plucky (list #:socket sock))))))

(test-begin "regress/head-through-drop-in")

(call-guarded
 (lambda ()
   (let ((server (start-drop-in sanitizing)))
     (dynamic-wind
       (lambda () #t)
       (lambda ()
         (with-client (server-port server)
           (lambda (client)
             (client-send! client (request-text "/" #:method "HEAD"))
             (let ((response body (client-read-response client #:head? #t)))
               (test-equal "HEAD: 200" 200 (and response (response-code response)))
               (test-equal "HEAD: the GET's Content-Length" 13
                 (and response (response-content-length response))))
             (client-send! client (request-text "/"))
             (let ((response body (client-read-response client)))
               (test-equal "then GET on the same connection: its body" "Hello, World!"
                 (and body (utf8->string body)))))))
       (lambda () (stop-server server))))))

(test-end "regress/head-through-drop-in")
