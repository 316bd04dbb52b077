;;; (plucky web middleware) --- handler -> handler, composed in order

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A middleware is a procedure that takes a handler of (request body)
;;; and returns another: it may change the request on the way in, the
;;; response on the way out, or answer by itself.
;;;
;;;   (define app
;;;     (wrap (router-handler router)
;;;           (with-headers '((x-frame-options . "DENY")))
;;;           (with-error-pages error-page)
;;;           (with-server-timing)))        ; from (plucky web timing)
;;;
;;; `wrap' applies them so that the first named is the outermost: a
;;; request meets with-headers first, and with-headers sees the response
;;; last.  `compose-middleware' makes one middleware of several, in the
;;; same order.  A handler `wrap' makes remembers the handler it wraps
;;; (the procedure property 'plucky-inner-handler), so that
;;; `handler-router' of (plucky web router) finds a wrapped router's
;;; routes.
;;;
;;; A response here is what a handler returns: a (web response) record,
;;; a raw response (plucky http: a proxy's) or a header alist (a 200).  `response-code*' and `response-headers*'
;;; read both; `with-response-headers' returns the same kind with headers
;;; added.
;;;
;;; Code:

(define-module (plucky web middleware)
  #:use-module (srfi srfi-1)
  #:use-module (web request)
  #:use-module (web response)
  #:use-module ((web uri) #:select (string->uri-reference))
  #:use-module ((plucky http) #:select (answer-code answer-headers raw-response?
                                        raw-response-with-headers))
  #:export (compose-middleware
            wrap
            response-code*
            response-headers*
            with-response-headers
            with-headers
            with-error-pages
            redirect))

(define (compose-middleware . middlewares)
  "Return one middleware that applies MIDDLEWARES, the first the
outermost."
  (lambda (handler)
    (fold-right (lambda (middleware inner)
                  (let ((outer (middleware inner)))
                    (unless (eq? outer inner)
                      (set-procedure-property! outer 'plucky-inner-handler inner))
                    outer))
                handler middlewares)))

(define (wrap handler . middlewares)
  "Return HANDLER wrapped in MIDDLEWARES, the first the outermost: (wrap
h a b) is (a (b h))."
  ((apply compose-middleware middlewares) handler))

(define (response-code* response)
  "Return the status code of RESPONSE, a (web response) record, a raw
response (plucky http) or a header alist (200)."
  (answer-code response))

(define (response-headers* response)
  "Return the header alist of RESPONSE, a (web response) record, a raw
response (its fields parsed) or a header alist."
  (answer-headers response))

(define (with-response-headers response headers)
  "Return RESPONSE (a record, a raw response or a header alist) with
HEADERS, an alist, added after its own headers, of the same kind as
RESPONSE (for a raw response, HEADERS written after its fields)."
  (if (raw-response? response)
      (raw-response-with-headers response headers)
      (with-guile-response-headers response headers)))

(define (with-guile-response-headers response headers)
  (if (response? response)
      (build-response #:version (response-version response)
                      #:code (response-code response)
                      #:reason-phrase (response-reason-phrase response)
                      #:headers (append (response-headers response) headers))
      (append response headers)))

(define (with-headers defaults)
  "Return a middleware that adds to each response the headers of
DEFAULTS, an alist, that it does not set itself.  Informational
responses (a 101 that hands the connection to a WebSocket) are left as
they are."
  (lambda (handler)
    (lambda (request body)
      (call-with-values (lambda () (handler request body))
        (lambda (response response-body)
          (let* ((own (response-headers* response))
                 (missing (if (< (response-code* response) 200)
                              '()
                              (remove (lambda (header) (assq (car header) own)) defaults))))
            (values (if (null? missing) response (with-response-headers response missing))
                    response-body)))))))

(define* (with-error-pages render #:key (codes '(400 403 404 405 500)))
  "Return a middleware that replaces the body of each response whose
status is in CODES by a page of the app's: (RENDER request code) returns
two values, a header alist (its content type) and a body.  The
response's other headers (Allow, Location …) are kept.  A handler's
exception becomes a 500 page, its backtrace printed to the current error
port."
  (lambda (handler)
    (lambda (request body)
      (define (page code headers)
        (call-with-values (lambda () (render request code))
          (lambda (page-headers page-body)
            (values (build-response
                     #:code code
                     #:headers (append page-headers
                                       (remove (lambda (header)
                                                 (memq (car header)
                                                       '(content-type content-length)))
                                               headers)))
                    page-body))))
      (let ((failed (list 'failed))
            (stack #f))
        (call-with-values
            (lambda ()
              (with-exception-handler
                  (lambda (exception) (values failed exception))
                (lambda ()
                  ;; the stack where the exception was raised, before
                  ;; the outer handler unwinds it
                  (with-exception-handler
                      (lambda (exception)
                        (set! stack (make-stack #t))
                        (raise-exception exception))
                    (lambda () (handler request body))))
                #:unwind? #t))
          (lambda (response response-body)
            (cond
             ((eq? response failed)
              (unless (memv 500 codes)
                (raise-exception response-body))
              (let ((port (current-error-port)))
                (display "plucky: the handler failed:\n" port)
                (when stack (display-backtrace stack port))
                (print-exception port #f '%exception (list response-body)))
              (page 500 '()))
             ((memv (response-code* response) codes)
              (page (response-code* response) (response-headers* response)))
             (else (values response response-body)))))))))

(define* (redirect location #:key (code 303))
  "Return (values response body): a redirect to LOCATION, a string (a
path relative to the request's, or an absolute URL), with status CODE:
303 See Other by default, which the browser follows with a GET, so that
reloading the page after a form's POST does not send it again; 301,
302, 307 or 308 otherwise."
  (unless (memv code '(301 302 303 307 308))
    (error "redirect: CODE is 301, 302, 303, 307 or 308, not" code))
  (values (build-response #:code code
                          #:headers `((location . ,(string->uri-reference location))
                                      (content-type . (text/plain))))
          (if (= code 303) "See other\n" "Moved\n")))

;;; (plucky web middleware) ends here
