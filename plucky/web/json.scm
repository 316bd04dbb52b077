;;; (plucky web json) --- JSON for handlers: codec, schema types, request and response

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; What an app imports for JSON.  The codec is (plucky web json read)
;;; and (plucky web json write), the compiled record types (plucky web
;;; json schema); this module re-exports them and adds what a handler
;;; needs around them:
;;;
;;;   (read-json-body request body)   the request's JSON, or an &http-error:
;;;                                   415 not application/json, 413 past
;;;                                   #:max-size, 400 malformed (with the
;;;                                   byte offset)
;;;   (json-response value)           -> (values response body), the body
;;;                                   UTF-8 JSON, Content-Type application/json
;;;   (json-handler handler)          HANDLER, with each &http-error it
;;;                                   raises answered as JSON with its status
;;;
;;; The server answers an &http-error raised by a handler with a 500, as
;;; any exception; `json-handler' is where a JSON API turns them into
;;; their 4xx, {"error": REASON, "offset": N}.  docs/json.md is the
;;; user's guide.
;;;
;;; Code:

(define-module (plucky web json)
  #:use-module (rnrs bytevectors)
  #:use-module (ice-9 binary-ports)
  #:use-module (ice-9 exceptions)
  #:use-module (web request)
  #:use-module (web response)
  #:use-module (plucky http)
  #:use-module (plucky web json read)
  #:use-module (plucky web json write)
  #:use-module (plucky web json schema)
  #:re-export (decode-json
               encode-json
               write-json
               &json-error
               json-error?
               json-error-offset
               json-error-expected
               define-json-type
               json-absent
               json-absent?)
  #:export (read-json
            read-json-body
            json-response
            json-handler))

(define* (read-json port #:key (mapping 'plucky) (max-depth 512) (max-size (* 64 1024 1024))
                    (lone-surrogates 'error))
  "Return the Scheme value of the JSON text read from the binary PORT to
its end, in the mapping of `decode-json' (whose keywords this takes).
Raises a &json-error past MAX-SIZE bytes (#f: no limit), with the offset
at which the limit was passed, and for anything but one JSON text."
  (let ((bv (read-at-most port max-size)))
    (decode-json bv #:mapping mapping #:max-depth max-depth #:max-size max-size
                 #:lone-surrogates lone-surrogates)))

(define (read-at-most port limit)
  ;; -> the bytes of PORT to its end, or LIMIT + 1 of them if there are
  ;; more than LIMIT (#f: no limit)
  (if limit
      (let ((bv (get-bytevector-n port (+ limit 1))))
        (if (eof-object? bv) #vu8() bv))
      (let ((bv (get-bytevector-all port)))
        (if (eof-object? bv) #vu8() bv))))

(define (json-content-type? type)
  ;; TYPE: a Content-Type as Guile parses it, (application/json (charset . "utf-8")).
  ;; application/json or any +json type, in UTF-8 (RFC 8259 section 8.1)
  (and (pair? type)
       (let ((name (symbol->string (car type))))
         (or (string=? name "application/json")
             (and (string-prefix? "application/" name) (string-suffix? "+json" name))))
       (let ((charset (assq-ref (cdr type) 'charset)))
         (or (not charset) (string-ci=? charset "utf-8")))))

(define* (read-json-body request body #:key (max-size (* 1024 1024)) (mapping 'plucky)
                         (max-depth 512) (decoder #f))
  "Return the value of REQUEST's JSON body BODY (a bytevector, an input
port as `with-body-port' gives, or #f), decoded by `decode-json' with
MAPPING and MAX-DEPTH, or by DECODER (a procedure of a bytevector, such
as a `define-json-type' decoder) if given.  Raises an &http-error of
(plucky http error): 415 if the Content-Type is not application/json
(or a +json type) in UTF-8, 413 if BODY is over MAX-SIZE bytes, 400 if it
is empty or not JSON, the reason then naming what was expected and the
error's byte offset."
  (unless (json-content-type? (request-content-type request))
    (raise-exception (make-http-error 415 "expected a body of Content-Type application/json")))
  (let ((bytes (cond ((bytevector? body) body)
                     ((port? body) (read-at-most body max-size))
                     (else #vu8()))))
    (when (> (bytevector-length bytes) max-size)
      (raise-exception
       (make-http-error 413 (string-append "JSON body over " (number->string max-size) " bytes"))))
    (when (zero? (bytevector-length bytes))
      (raise-exception (make-http-error 400 "expected a JSON body" 0)))
    (with-exception-handler
        (lambda (e)
          (raise-exception
           (if (json-error? e)
               (make-http-error 400 (string-append "malformed JSON: expected "
                                                   (json-error-expected e) " at byte "
                                                   (number->string (json-error-offset e)))
                                (json-error-offset e))
               e)))
      (lambda ()
        (if decoder
            (decoder bytes)
            (decode-json bytes #:mapping mapping #:max-depth max-depth)))
      #:unwind? #t
      #:unwind-for-type &json-error)))

(define json-headers '((content-type . (application/json))))

(define* (json-response value #:key (status 200) (headers '()) (encoder encode-json))
  "Return two values, a response and a body, that a handler can return:
VALUE as UTF-8 JSON (made by ENCODER, default `encode-json'; give a
`define-json-type' encoder for a record) in a bytevector, with
Content-Type application/json, STATUS (default 200) and the extra
HEADERS (an alist as Guile's `build-response' takes)."
  (let ((body (encoder value)))
    (if (and (eqv? status 200) (null? headers))
        (values json-headers body)
        (values (build-response #:code status #:headers (append json-headers headers))
                body))))

(define (json-handler handler)
  "Return a handler that calls HANDLER and answers each &http-error it
raises (from `read-json-body', say) with that error's status and the
JSON {\"error\": reason} (and \"offset\" when the error has one).  Other
exceptions go on to the server (a 500)."
  (lambda (request body . state)
    (with-exception-handler
        (lambda (e)
          (let ((offset (http-error-offset e)))
            (call-with-values
                (lambda ()
                  (json-response (if offset
                                     `(("error" . ,(http-error-reason e)) ("offset" . ,offset))
                                     `(("error" . ,(http-error-reason e))))
                                 #:status (http-error-status e)))
              (lambda (response body)
                (apply values response body state)))))
      (lambda () (apply handler request body state))
      #:unwind? #t
      #:unwind-for-type &http-error)))

;;; (plucky web json) ends here
