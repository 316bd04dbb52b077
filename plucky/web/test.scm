;;; (plucky web test) --- call an app in-process, as a client would see it

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; App tests without sockets:
;;;
;;;   (define client (make-test-client app))
;;;   (let-values (((response body) (test-request client 'GET "/item/42")))
;;;     (response-code response)                 ; -> 200
;;;     body)                                    ; -> "<!DOCTYPE html>…"
;;;   (test-request client 'POST "/login" #:form '(("user" . "ann")))
;;;
;;; A request flows as it would through `plucky serve':
;;;   a (web request) record is built as plucky's parser makes one (the
;;;   path and query as a relative URI, a Host header, the cookies the
;;;   client's jar holds for it, Content-Length for a body) -> the app is
;;;   called with it and the body (a bytevector, or #f when there is
;;;   none) -> its answer is made into bytes by (plucky http response)'s
;;;   `write-response!', the very code the server sends with (so a bad
;;;   Content-Length, a body on a 204, a string in a charset that cannot
;;;   hold it fail here as there; HEAD gets no body), or, for a streamed
;;;   answer, `write-streamed-head!' and the body procedure's output; an
;;;   exception in the app or in that step is a 500, as the server
;;;   answers it, and is kept in the client (`test-client-error') ->
;;;   the bytes are read back with Guile's `read-response': the response
;;;   record and the body are what a client on a socket would get.
;;;
;;; The client keeps a cookie jar, name -> value, filled from Set-Cookie
;;; and sent in Cookie with each request (Max-Age=0 or an Expires in the
;;; past deletes; Path, Domain and Secure are not looked at: one app,
;;; one origin).
;;;
;;; Code:

(define-module (plucky web test)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-11)
  #:use-module (rnrs bytevectors)
  #:use-module (ice-9 binary-ports)
  #:use-module (ice-9 iconv)
  #:use-module (web request)
  #:use-module (web response)
  #:use-module (web uri)
  #:use-module (plucky http)
  #:export (make-test-client
            test-client?
            test-client-cookies
            test-client-error
            set-test-client-cookie!
            test-request
            response-header-values))

(define-record-type <test-client>
  (%make-test-client handler cookies error)
  test-client?
  (handler test-client-handler)
  (cookies test-client-cookies set-test-client-cookies!) ; (("name" . "value") …)
  (error test-client-error set-test-client-error!))      ; the last exception, or #f

(define (make-test-client handler)
  "Return a test client for HANDLER, an app of (request body), with an
empty cookie jar."
  (%make-test-client handler '() #f))

(define (set-test-client-cookie! client name value)
  "Put the cookie NAME (a string) of VALUE in CLIENT's jar; VALUE #f
takes it out."
  (set-test-client-cookies!
   client
   (let ((others (remove (lambda (cookie) (string=? (car cookie) name))
                         (test-client-cookies client))))
     (if value (append others (list (cons name value))) others))))

;;;
;;; Requests
;;;

(define (form->bytes form)
  (string->utf8
   (string-join (map (lambda (field)
                       (string-append (uri-encode (car field)) "=" (uri-encode (cdr field))))
                     form)
                "&")))

(define (cookie-header cookies)
  (string-join (map (lambda (cookie) (string-append (car cookie) "=" (cdr cookie))) cookies)
               "; "))

(define (make-test-http-request client method target headers body)
  (let* ((uri (string->uri-reference target))
         (headers (if (assq 'host headers) headers (acons 'host '("localhost" . #f) headers)))
         (headers (if (or (assq 'cookie headers) (null? (test-client-cookies client)))
                      headers
                      (append headers `((cookie . ,(cookie-header (test-client-cookies client)))))))
         (headers (if (and body (not (assq 'content-length headers)))
                      (append headers `((content-length . ,(bytevector-length body))))
                      headers)))
    (unless (and uri (string-prefix? "/" (uri-path uri)) (not (uri-scheme uri)))
      (error "test-request: TARGET is a path such as /item?id=1" target))
    ;; a port, as Guile's server gives: build-request wants one for POST
    (build-request uri #:method method #:version '(1 . 1) #:headers headers
                   #:port (open-bytevector-input-port (or body #vu8())))))

;;;
;;; Responses
;;;

(define (call-app client request body)
  ;; -> (values response body) of the app, or (values #f exception)
  (with-exception-handler
      (lambda (exception) (values #f exception))
    (lambda () ((test-client-handler client) request body))
    #:unwind? #t))

(define (output->bytevector out)
  (let ((copy (make-bytevector (output-fill out))))
    (bytevector-copy! (output-bytes out) 0 copy 0 (output-fill out))
    copy))

(define (serialise request response body)
  ;; -> the bytes the server would send for (RESPONSE BODY): head and
  ;; body, a streamed body unframed; raises as the server's writer does
  (let ((out (make-output)))
    (if (streamed-response? response body)
        (let-values (((framing close?) (write-streamed-head! out request response)))
          (let ((head (output->bytevector out)))
            (if (eq? framing 'none)
                (values head #vu8())
                (values head (call-with-output-bytevector body)))))
        (let-values (((close? large) (write-response! out request response body #f #f)))
          (values (output->bytevector out) (or large #vu8()))))))

(define (error-bytes request)
  (let ((out (make-output)))
    (write-error-response! out (request-version request) 500 #f
                           (request-method request) #f)
    (output->bytevector out)))

(define (answer-bytes client request body)
  ;; -> (values bytes-of-head-and-maybe-body extra-body-bytes)
  (let-values (((response response-body) (call-app client request body)))
    (if (not response)
        (begin
          (set-test-client-error! client response-body)
          (values (error-bytes request) #vu8()))
        (with-exception-handler
            (lambda (exception)
              (set-test-client-error! client exception)
              (values (error-bytes request) #vu8()))
          (lambda () (serialise request response response-body))
          #:unwind? #t))))

(define (response-header-values response name)
  "Return the values of every header NAME (a symbol) of RESPONSE, in
order: Set-Cookie, for one, comes once per cookie."
  (filter-map (lambda (header) (and (eq? (car header) name) (cdr header)))
              (response-headers response)))

(define (set-cookie-value value)
  ;; Set-Cookie's value as Guile reads a header it does not know: a
  ;; string; -> (name value delete?)
  (let* ((text (if (string? value) value (object->string value)))
         (parts (map string-trim-both (string-split text #\;)))
         (pair (car parts))
         (equals (string-index pair #\=)))
    (and equals
         (let* ((attributes (map (lambda (part)
                                   (let ((i (string-index part #\=)))
                                     (if i
                                         (cons (string-downcase (substring part 0 i))
                                               (substring part (+ i 1)))
                                         (cons (string-downcase part) ""))))
                                 (cdr parts)))
                (max-age (assoc-ref attributes "max-age"))
                (expires (assoc-ref attributes "expires")))
           (list (substring pair 0 equals)
                 (substring pair (+ equals 1))
                 (or (and max-age (let ((n (string->number max-age))) (and n (<= n 0))))
                     (and expires (string-contains expires "1970"))))))))

(define (keep-cookies! client response)
  (for-each (lambda (value)
              (let ((cookie (set-cookie-value value)))
                (when cookie
                  (set-test-client-cookie! client (car cookie)
                                           (if (caddr cookie) #f (cadr cookie))))))
            (response-header-values response 'set-cookie)))

(define (textual-charset response)
  ;; -> the charset to decode RESPONSE's body with, or #f for bytes
  (let ((type (response-content-type response)))
    (and type
         (let ((charset (assq-ref (cdr type) 'charset)))
           (cond
            (charset charset)
            ((memq (car type) '(application/json application/xml image/svg+xml)) "utf-8")
            ((string-prefix? "text/" (symbol->string (car type))) "utf-8")
            (else #f))))))

(define* (test-request client method target
                       #:key (headers '()) (body #f) (form #f) (decode-body? #t))
  "Send CLIENT's app a request of METHOD (a symbol) for TARGET (a path and
maybe a query: \"/item?id=1\") with HEADERS (an alist of parsed values,
as (web request) has them) and BODY (a string, a bytevector or #f), or
FORM, an alist of strings sent as application/x-www-form-urlencoded.
Return two values: the response, a (web response) record read back from
the bytes the server would send, and its body: a string when
DECODE-BODY? and the response is text (its charset, else UTF-8), else a
bytevector (empty for HEAD, 204, 304).  The response's cookies go into
CLIENT's jar."
  (let* ((body (cond
                (form (form->bytes form))
                ((string? body) (string->utf8 body))
                (else body)))
         (headers (if (and form (not (assq 'content-type headers)))
                      (acons 'content-type '(application/x-www-form-urlencoded) headers)
                      headers))
         (request (make-test-http-request client method target headers body)))
    (set-test-client-error! client #f)
    (let-values (((bytes extra) (answer-bytes client request body)))
      (let* ((port (open-bytevector-input-port (bytevector-concatenate (list bytes extra))))
             (response (read-response port))
             (rest (get-bytevector-all port))
             (payload (if (eof-object? rest) #vu8() rest)))
        (keep-cookies! client response)
        (values response
                (let ((charset (and decode-body? (textual-charset response))))
                  (if charset (bytevector->string payload charset) payload)))))))

;;; (plucky web test) ends here
