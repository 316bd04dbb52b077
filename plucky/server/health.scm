;;; (plucky server health) --- the health path a load balancer checks

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `plucky serve --health-path /_plucky/health' makes each worker answer
;;; that path itself, before the app sees it: 200 "serving" while it
;;; serves, 503 "draining" from the SIGTERM on.  A load balancer that
;;; checks it (HAProxy's `option httpchk GET /_plucky/health') takes the
;;; host out of its rotation within one check interval; --drain-delay-s
;;; keeps the host accepting and answering that long before it drains
;;; (see `serve-in-this-process' in (plucky server)), so that no request
;;; the balancer sends meanwhile meets a closed socket.  The path answers
;;; whatever the method, with no body for HEAD; it is never logged apart
;;; from other requests and never reaches the app.
;;;
;;; Code:

(define-module (plucky server health)
  #:use-module ((web request) #:select (request-uri request-method))
  #:use-module ((web uri) #:select (uri-path))
  #:use-module ((web response) #:select (build-response))
  #:export (with-health))

(define (health-response code text)
  (build-response #:code code
                  #:headers `((content-type text/plain (charset . "utf-8"))
                              (cache-control no-store)
                              (content-length . ,(string-length text)))))

(define (with-health handler path draining?)
  "Return a handler that answers requests for PATH (a string) itself,
200 \"serving\" while (DRAINING?) returns #f and 503 \"draining\" once it
returns true, and passes every other request on to HANDLER (a handler of
any number of state values)."
  (let ((serving (health-response 200 "serving\n"))
        (draining (health-response 503 "draining\n")))
    ;; DRAINING? is read once a request: the code and the body agree
    (define (health request)
      (let ((now-draining? (draining?)))
        (values (if now-draining? draining serving)
                (cond ((eq? (request-method request) 'HEAD) #f)
                      (now-draining? "draining\n")
                      (else "serving\n")))))
    (case-lambda
      ((request body)
       (if (string=? (uri-path (request-uri request)) path)
           (health request)
           (handler request body)))
      ((request body . state)
       (if (string=? (uri-path (request-uri request)) path)
           (call-with-values (lambda () (health request))
             (lambda (response body) (apply values response body state)))
           (apply handler request body state))))))

;;; (plucky server health) ends here
