;;; (plucky web compress) --- gzip and zstd for dynamic responses

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `compress-middleware' wraps a handler: when the client accepts gzip
;;; or zstd (Accept-Encoding, q-values honoured: see `choose-coding' in
;;; (plucky web conditional)) and the answer is worth it, the body leaves
;;; compressed, with Content-Encoding and Vary: Accept-Encoding, a weak
;;; ETag (the bytes differ from the identity answer's) and no
;;; Content-Length of the handler's (the server counts the new body).
;;;
;;; Worth it: a compressible media type (plucky web mime), a body of at
;;; least MIN-LENGTH bytes, a status with a body other than 206, no
;;; Content-Encoding or Content-Range already, no Cache-Control:
;;; no-transform.  File bodies are left alone: (plucky web static) serves
;;; precompressed siblings instead.  Request bodies are not decoded: a
;;; request's Content-Encoding is the app's business.
;;;
;;; A body the server collects (a string, a bytevector, a procedure that
;;; is not streamed) is compressed whole, by one encoder per thread kept
;;; between responses.  A streamed body (text/event-stream, or declared
;;; chunked: see `streamed-response?') is compressed as it is written,
;;; never held whole: the handler's port is a soft port whose flush is a
;;; sync flush of the encoder followed by a flush of the connection's
;;; port, so that each event reaches the client when the handler flushes
;;; it.  libz and libzstd are called through (plucky sys zlib) and
;;; (plucky sys zstd).
;;;
;;; Code:

(define-module (plucky web compress)
  #:use-module (rnrs bytevectors)
  #:use-module ((rnrs io ports) #:select (put-bytevector open-bytevector-output-port))
  #:use-module (ice-9 iconv)
  #:use-module (web request)
  #:use-module (web response)
  #:use-module ((plucky http)
                #:select (answer-headers answer-code streamed-response? answer-body))
  #:use-module (plucky web mime)
  #:use-module (plucky web conditional)
  #:use-module (plucky sys zlib)
  #:use-module (plucky sys zstd)
  #:export (compress-middleware
            compress-bytevector))

;;;
;;; Encoders
;;;

(define (make-encoder coding level)
  ;; -> (feed! . end!): (feed! bv start end mode) -> list of bytevectors
  (case coding
    ((gzip)
     (let ((d (make-deflater #:level (or level 6))))
       (cons (lambda (bv start end mode) (deflate! d bv start end mode))
             (lambda () (deflater-end! d)))))
    ((zstd)
     (let ((z (make-zstd-encoder #:level (or level 3))))
       (cons (lambda (bv start end mode) (zstd-compress! z bv start end mode))
             (lambda () (zstd-encoder-end! z)))))
    (else (error "compress: unknown coding" coding))))

;; One idle encoder per coding and level for whole bodies, per thread:
;; making one allocates zlib's window (a quarter megabyte at level 6)
;; each time, which bench/static's gzip case shows in req/s.
(define idle-encoders (make-thread-local-fluid '()))

(define (compress-bytevector bv coding level)
  "Return BV compressed whole with CODING (gzip or zstd) at LEVEL, as a
bytevector."
  (let* ((key (cons coding level))
         (idle (fluid-ref idle-encoders))
         (found (assoc key idle))
         (encoder (if found
                      (cdr found)
                      (case coding
                        ((gzip) (make-deflater #:level level))
                        (else (make-zstd-encoder #:level level)))))
         (chunks (if (eq? coding 'gzip)
                     (deflate! encoder bv 0 (bytevector-length bv) 'finish)
                     (zstd-compress! encoder bv 0 (bytevector-length bv) 'finish))))
    (if (eq? coding 'gzip) (deflater-reset! encoder) (zstd-encoder-reset! encoder))
    (unless found
      (fluid-set! idle-encoders (acons key encoder idle)))
    (if (and (pair? chunks) (null? (cdr chunks)))
        (car chunks)
        (call-with-values open-bytevector-output-port
          (lambda (port get)
            (for-each (lambda (chunk) (put-bytevector port chunk)) chunks)
            (get))))))

;;;
;;; Headers
;;;

(define (compressed-headers headers coding)
  ;; HEADERS without Content-Length, with Content-Encoding, Vary and a
  ;; weak ETag
  (let lp ((headers headers) (out '()) (vary? #f))
    (if (null? headers)
        (reverse (append (if vary? '() '((vary accept-encoding)))
                         (cons (list 'content-encoding coding) out)))
        (let ((header (car headers)))
          (case (car header)
            ((content-length) (lp (cdr headers) out vary?))
            ((etag)
             (lp (cdr headers)
                 (if (pair? (cdr header))
                     (cons (cons 'etag (cons (cadr header) #f)) out)
                     out)
                 vary?))
            ((vary) (lp (cdr headers) (cons (with-vary header) out) #t))
            (else (lp (cdr headers) (cons header out) vary?)))))))

(define (with-vary header)
  (let ((value (cdr header)))
    (cond ((eq? value '*) header)
          ((and (list? value) (memq 'accept-encoding value)) header)
          ((list? value) (cons 'vary (append value '(accept-encoding))))
          (else header))))

(define (varying-headers headers)
  ;; HEADERS with Vary: Accept-Encoding (the answer depended on it)
  (if (assq 'vary headers)
      (map (lambda (h) (if (eq? (car h) 'vary) (with-vary h) h)) headers)
      (append headers '((vary accept-encoding)))))

(define (rebuild response headers)
  (build-response #:code (answer-code response) #:headers headers
                  #:validate-headers? #f))

(define (with-charset type)
  (if (assq 'charset (cdr type))
      type
      (append type '((charset . "utf-8")))))

;;;
;;; The middleware
;;;

(define (candidate? request response body)
  ;; Could this answer be compressed, whatever its size?
  (let ((headers (answer-headers response))
        (code (answer-code response)))
    (and body
         (or (string? body) (bytevector? body) (procedure? body))
         (not (memv code '(204 206 304)))
         (>= code 200)
         (not (assq 'content-encoding headers))
         (not (assq 'content-range headers))
         (let ((control (assq-ref headers 'cache-control)))
           (not (and (list? control) (memq 'no-transform control))))
         (let ((type (or (assq-ref headers 'content-type)
                         (and (not (bytevector? body)) '(text/plain)))))
           (and (pair? type) (compressible-type? (car type)))))))

(define (charset-of headers)
  (let* ((type (assq-ref headers 'content-type))
         (charset (and (pair? type) (assq-ref (cdr type) 'charset))))
    (or charset "utf-8")))

(define (streaming-body body coding level charset)
  ;; -> a body procedure that gives BODY a port compressing into the
  ;; connection's port as it is written
  (lambda (port)
    (let* ((encoder (make-encoder coding level))
           (feed! (car encoder))
           (send! (lambda (chunks)
                    (for-each (lambda (chunk) (put-bytevector port chunk)) chunks)))
           (encode (if (member (string-downcase charset) '("utf-8" "utf8"))
                       string->utf8
                       (lambda (s) (string->bytevector s charset))))
           (write-string! (lambda (s)
                            (let ((bv (encode s)))
                              (send! (feed! bv 0 (bytevector-length bv) 'none)))))
           (soft (make-soft-port
                  (vector (lambda (c) (write-string! (string c)))
                          write-string!
                          (lambda ()
                            (send! (feed! #vu8() 0 0 'flush))
                            (force-output port))
                          #f
                          #f)
                  "w")))
      (dynamic-wind
        (lambda () #t)
        (lambda ()
          (body soft)
          (force-output soft)
          (send! (feed! #vu8() 0 0 'finish)))
        (lambda () ((cdr encoder)))))))

(define* (compress-middleware #:key (level #f) (min-length 1024)
                              (codings '(zstd gzip)))
  "Return a middleware: a procedure that takes a handler and returns a
handler whose answers leave compressed with one of CODINGS (in order of
preference when the client's q-values tie) when the client accepts it,
the media type is compressible and the body is MIN-LENGTH bytes or more
(a streamed body always).  LEVEL is the compression level (by default 6
for gzip, 3 for zstd)."
  (lambda (app)
    (lambda (request body . state)
      (call-with-values (lambda () (apply app request body state))
        (lambda (response response-body . state)
          (apply values
                 (append (call-with-values
                             (lambda () (compress request response response-body
                                                  codings level min-length))
                           list)
                         state)))))))

(define (compress request response response-body codings level min-length)
  ;; -> (values response body), compressed or not
  (define body (answer-body response response-body)) ; a proxy's is a slice
  (if (not (candidate? request response body))
      (values response body)
      (let ((headers (answer-headers response))
            (coding (choose-coding request codings)))
        (cond
         ((streamed-response? response body)
          (if (memq coding codings)
              (values (rebuild response (compressed-headers headers coding))
                      (streaming-body body coding level (charset-of headers)))
              (values (rebuild response (varying-headers headers)) body)))
         (else
          (let* ((charset (charset-of headers))
                 (textual? (not (bytevector? body)))
                 (bytes (cond
                         ((bytevector? body) body)
                         ((string? body)
                          (if (member (string-downcase charset) '("utf-8" "utf8"))
                              (string->utf8 body)
                              (string->bytevector body charset)))
                         (else (call-with-encoded-output-string charset body))))
                 ;; A bytevector body: the server does not add the
                 ;; charset it adds to a text's type, so add it here.
                 (headers (if textual?
                              (map (lambda (h)
                                     (if (eq? (car h) 'content-type)
                                         (cons 'content-type (with-charset (cdr h)))
                                         h))
                                   (if (assq 'content-type headers)
                                       headers
                                       (cons '(content-type text/plain) headers)))
                              headers)))
            (cond
             ((< (bytevector-length bytes) min-length)
              (values response body))
             ((memq coding codings)
              (values (rebuild response (compressed-headers headers coding))
                      (compress-bytevector bytes coding
                                           (or level (if (eq? coding 'gzip) 6 3)))))
             (else
              (values (rebuild response (varying-headers headers)) bytes)))))))))

;;; (plucky web compress) ends here
