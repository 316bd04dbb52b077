;;; tests/regress/guile-modules.scm --- apps get Guile's (web …) modules as Guile made them

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Until 5cda4fb plucky registered stand-ins for (web http), (web uri),
;;; (web request) and five (ice-9 …) modules, loaded at first use, and
;;; claimed the record types of (web uri) and (web request) ahead of
;;; their code (issue 13, item 3).  An app then saw differences from
;;; Guile's own server:
;;;
;;;   - `set-field' and `set-fields' ((srfi srfi-9 gnu)) on a request
;;;     failed to compile: the stand-in accessors were not SRFI-9's, and
;;;     `plucky serve' refused the app;
;;;   - `reload-module' of (web request) failed;
;;;   - a call with a wrong number of arguments to one of their
;;;     procedures was not warned about when Guile compiled the app.
;;;
;;; Each app here runs under `plucky serve' and under Guile's own
;;; `run-server' ('http), and answers a GET and a POST with what it saw;
;;; the two servers' status and body must agree.  After `reload-module'
;;; the module makes its record type anew, and plucky's requests must
;;; be of the new type, as Guile's server's are.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (web response)
             (tests lib harness)
             (tests lib server)
             (tests lib command))

(test-begin "regress/guile-modules")

(define set-field-app "
(use-modules (srfi srfi-9 gnu) (web request) (web uri))
(define (handler request body)
  (let* ((moved (set-field request (request-uri uri-path) \"/moved\"))
         (put (set-fields request ((request-method) 'PUT) ((request-meta) '((tag . 1))))))
    (values '((content-type . (text/plain)))
            (format #f \"~s\"
                    (list (request-method request) (uri-path (request-uri request))
                          (uri-query (request-uri request))
                          (request? moved) (uri-path (request-uri moved))
                          (uri-query (request-uri moved))
                          (request-method put) (request-meta put)
                          (request-version put) (request-method request))))))
handler
")

(define reload-app "
(use-modules (web request) (web uri))
(define build-request-before build-request)
(reload-module (resolve-module '(web request)))
(define (handler request body)
  (values '((content-type . (text/plain)))
          (format #f \"~s\"
                  (list (request? request) (request-method request)
                        (uri-path (request-uri request))
                        (uri-query (request-uri request))
                        (request-content-length request)
                        (request? (build-request (build-uri-reference #:path \"/x\")
                                                 #:headers '((host \"h\" . #f))))
                        (eq? build-request-before build-request)))))
handler
")

(define arity-app "
(use-modules (web request) (web uri))
(define (handler request body)
  (if (string=? (uri-path (request-uri request)) \"/never\")
      (uri->string 1 2 3)
      (values '((content-type . (text/plain))) \"arity\")))
handler
")

(define (load-app file)
  ;; -> the handler FILE evaluates to, loaded as `plucky serve' loads it
  (save-module-excursion
   (lambda ()
     (set-current-module (make-fresh-user-module))
     (load file))))

(define (start-guile-server file)
  ;; Guile's own run-server ('http) with FILE's handler, in a child
  (start-child
   (lambda (report)
     (let ((sock (socket AF_INET SOCK_STREAM 0)))
       (setsockopt sock SOL_SOCKET SO_REUSEADDR 1)
       (bind sock AF_INET INADDR_LOOPBACK 0)
       (listen sock 16)
       (let ((handler (load-app file)))
         (report (sockaddr:port (getsockname sock)))
         ((@ (web server) run-server) handler 'http (list #:socket sock)))))))

(define requests
  (list (request-text "/a/b?q=1")
        (request-text "/form" #:method "POST" #:body "x=1"
                      #:headers '("Content-Type: application/x-www-form-urlencoded"))))

(define (answers port)
  ;; -> ((code . body) …), one per request, each on a new connection;
  ;; #f without a PORT (the server did not start)
  (and port
   (map (lambda (text)
         (with-client port
           (lambda (client)
             (client-send! client text)
             (let ((response body (client-read-response client)))
               (cons (and response (response-code response))
                     (and body (utf8->string body)))))))
        requests)))

(define (compare name text)
  ;; Serve TEXT, an app, under both servers, plucky first, compiling the
  ;; app as `plucky serve' does when run by hand: -> plucky's log
  (let* ((dir (temporary-directory))
         (file (string-append dir "/app.scm"))
         (environment (cons* "GUILE_AUTO_COMPILE=1"
                             (string-append "XDG_CACHE_HOME=" dir "/cache")
                             (environ))))
    (write-file file text)
    (let* ((plucky (call-with-plucky
                    file (append '("--port" "0" "--workers" "1") allow-root)
                    (lambda (plucky)
                      (let ((answers (answers (plucky-port plucky))))
                        (stop-plucky plucky)
                        (cons answers (plucky-log plucky))))
                    #:environment environment))
           (guile (let ((server (start-guile-server file)))
                    (dynamic-wind
                      (lambda () #t)
                      (lambda () (answers (server-port server)))
                      (lambda () (stop-server server))))))
      (test-assert (string-append name ": Guile's server answers 200s")
        (equal? '(200 200) (map car guile)))
      (test-equal (string-append name ": plucky answers as Guile's server")
        guile (car plucky))
      (remove-tree dir)
      (cdr plucky))))

(test-group "set-field"
  (compare "set-field on a request" set-field-app))

(test-group "reload-module"
  (compare "reload-module of (web request)" reload-app))

(test-group "arity warnings"
  (test-assert "a wrong number of arguments to uri->string is warned about"
    (string-contains (compare "an app with a wrong call" arity-app)
                     "wrong number of arguments to `uri->string'")))

(test-end "regress/guile-modules")

;;; tests/regress/guile-modules.scm ends here
