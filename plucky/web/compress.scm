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
;;; An answer whose strong ETag says its bytes do not change, and that
;;; a shared cache could store, is compressed once per coding: the
;;; compressed bytes are kept in a bounded LRU cache (see `cache-key')
;;; and a repeated page costs a lookup instead of the compressor.
;;;
;;; Code:

(define-module (plucky web compress)
  #:use-module (rnrs bytevectors)
  #:use-module ((rnrs io ports) #:select (put-bytevector open-bytevector-output-port))
  #:use-module (ice-9 iconv)
  #:use-module (srfi srfi-9)
  #:use-module ((ice-9 threads) #:select (make-mutex lock-mutex unlock-mutex))
  #:use-module (web request)
  #:use-module (web uri)
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
  ;; RESPONSE with HEADERS: a header alist when the handler answered
  ;; one (the status is then 200), a response record otherwise (also for
  ;; a raw response, a proxy's, which keeps its status)
  (if (list? response)
      headers
      (build-response #:code (answer-code response) #:headers headers
                      #:validate-headers? #f)))

(define (with-charset type)
  (if (assq 'charset (cdr type))
      type
      (append type '((charset . "utf-8")))))

;;;
;;; The cache of compressed bodies
;;;

;; A strong ETag promises that the bytes it names do not change (RFC
;; 9110, 8.8.1): the compressed bytes of an answer that carries one
;; can be kept and sent again without running the compressor, which
;; is most of an answer's cost (bench/instructions-gzip).  Each
;; middleware keeps its own cache, shared by the worker's threads
;; under a mutex; each worker process has its own.  Entries form a
;; ring through a sentinel: the sentinel's next is the most recently
;; used, its prev the next to go.

(define-record-type <cache>
  (%make-cache table mutex limit entry-limit size ring)
  cache?
  (table cache-table)                   ; key -> <entry>
  (mutex cache-mutex)
  (limit cache-limit)                   ; bytes held at most
  (entry-limit cache-entry-limit)       ; an entry's bytes at most
  (size cache-size set-cache-size!)     ; bytes held now
  (ring cache-ring))                    ; the sentinel <entry>

(define-record-type <entry>
  (make-entry key body-length bytes cost prev next)
  entry?
  (key entry-key)
  ;; the identity body's length (bytes or characters), #f when it was
  ;; a procedure: a body of another length is not this entry's
  (body-length entry-length)
  (bytes entry-bytes)                   ; the compressed body
  (cost entry-cost)                     ; bytes counted against the limit
  (prev entry-prev set-entry-prev!)
  (next entry-next set-entry-next!))

;; What an entry costs beyond its compressed bytes: the key, the
;; record, the table's slot (an estimate; the bound is on the total).
(define entry-overhead 256)

(define (make-cache limit entry-limit)
  (let ((ring (make-entry #f #f #f 0 #f #f)))
    (set-entry-prev! ring ring)
    (set-entry-next! ring ring)
    (%make-cache (make-hash-table) (make-mutex) limit entry-limit 0 ring)))

(define (unlink! entry)
  (set-entry-next! (entry-prev entry) (entry-next entry))
  (set-entry-prev! (entry-next entry) (entry-prev entry)))

(define (push-front! cache entry)
  (let* ((ring (cache-ring cache))
         (first (entry-next ring)))
    (set-entry-prev! entry ring)
    (set-entry-next! entry first)
    (set-entry-prev! first entry)
    (set-entry-next! ring entry)))

(define (cache-ref cache key body-length)
  ;; -> the compressed bytes kept under KEY for a body of BODY-LENGTH, or #f
  (let ((mutex (cache-mutex cache)))
    (lock-mutex mutex)
    (let ((entry (hash-ref (cache-table cache) key)))
      (let ((bytes (and entry
                        (eqv? (entry-length entry) body-length)
                        (begin
                          (unlink! entry)
                          (push-front! cache entry)
                          (entry-bytes entry)))))
        (unlock-mutex mutex)
        bytes))))

(define (cache-set! cache key body-length bytes)
  ;; Keep BYTES under KEY, unless they pass the entry limit; drop the
  ;; least recently used entries until the total is within the limit.
  (let ((cost (+ (bytevector-length bytes) entry-overhead))
        (mutex (cache-mutex cache))
        (table (cache-table cache))
        (ring (cache-ring cache)))
    (when (and (<= (bytevector-length bytes) (cache-entry-limit cache))
               (<= cost (cache-limit cache)))
      (lock-mutex mutex)
      (let ((old (hash-ref table key)))
        (when old
          (unlink! old)
          (set-cache-size! cache (- (cache-size cache) (entry-cost old)))))
      (let ((entry (make-entry key body-length bytes cost #f #f)))
        (hash-set! table key entry)
        (push-front! cache entry)
        (set-cache-size! cache (+ (cache-size cache) cost)))
      (let evict ()
        (when (> (cache-size cache) (cache-limit cache))
          (let ((last (entry-prev ring)))
            (unlink! last)
            (hash-remove! table (entry-key last))
            (set-cache-size! cache (- (cache-size cache) (entry-cost last)))
            (evict))))
      (unlock-mutex mutex))))

(define (directive? control name)
  ;; Does the parsed Cache-Control CONTROL carry the directive NAME,
  ;; alone or with a value?
  (let lp ((control control))
    (and (pair? control)
         (or (eq? (car control) name)
             (and (pair? (car control)) (eq? (caar control) name))
             (lp (cdr control))))))

(define (cache-key request response coding)
  ;; -> the key under which RESPONSE's body compressed with CODING may
  ;; be kept, or #f.  RESPONSE must carry a strong ETag, and a shared
  ;; cache must be allowed to store it (RFC 9111, 3): no Cache-Control
  ;; no-store or private, no Authorization in REQUEST unless public;
  ;; nor Set-Cookie, nor Vary: *.  The key holds the request's host,
  ;; path and query beside the tag: a tag names the bytes of one
  ;; resource, not of every resource.
  (let* ((headers (answer-headers response))
         (etag (assq-ref headers 'etag))
         (control (assq-ref headers 'cache-control)))
    (and (pair? etag)
         (string? (car etag))
         (eq? (cdr etag) #t)
         (or (not control) (list? control))
         (not (directive? control 'no-store))
         (not (directive? control 'private))
         (or (not (assq 'authorization (request-headers request)))
             (directive? control 'public))
         (not (assq 'set-cookie headers))
         (not (eq? (assq-ref headers 'vary) '*))
         (let ((uri (request-uri request)))
           (list coding (car etag) (uri-path uri) (uri-query uri)
                 (assq-ref (request-headers request) 'host))))))

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
           (encode (if (utf-8? charset)
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
                              (codings '(zstd gzip))
                              (cache-size (* 4 1024 1024))
                              (cache-entry-size (* 256 1024)))
  "Return a middleware: a procedure that takes a handler and returns a
handler whose answers leave compressed with one of CODINGS (in order of
preference when the client's q-values tie) when the client accepts it,
the media type is compressible and the body is MIN-LENGTH bytes or more
(a streamed body always).  LEVEL is the compression level (by default 6
for gzip, 3 for zstd).  An answer with a strong ETag that a shared cache
could store (see `cache-key') is compressed once: its compressed bytes
are kept, at most CACHE-SIZE bytes of them in all (0 keeps none), least
recently used first out, each at most CACHE-ENTRY-SIZE bytes."
  (unless (and (exact-integer? cache-size) (>= cache-size 0))
    (error "compress-middleware: #:cache-size must be a count of bytes:" cache-size))
  (unless (and (exact-integer? cache-entry-size) (>= cache-entry-size 0))
    (error "compress-middleware: #:cache-entry-size must be a count of bytes:"
           cache-entry-size))
  (let ((cache (and (> cache-size 0) (make-cache cache-size cache-entry-size))))
    (lambda (app)
      (lambda (request body . state)
        (call-with-values (lambda () (apply app request body state))
          (lambda (response response-body . state)
            (apply values
                   (append (call-with-values
                               (lambda () (compress request response response-body
                                                    codings level min-length cache))
                             list)
                           state))))))))

(define (utf-8? charset)
  (member (string-downcase charset) '("utf-8" "utf8")))

(define (encode-body body charset)
  ;; BODY, a string, bytevector or procedure of a port -> its bytes
  (cond
   ((bytevector? body) body)
   ((string? body)
    (if (utf-8? charset) (string->utf8 body) (string->bytevector body charset)))
   (else (call-with-encoded-output-string charset body))))

(define (compress request response response-body codings level min-length cache)
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
                              headers))
                 (key (and cache (memq coding codings)
                           (cache-key request response coding)))
                 (body-length (cond ((bytevector? body) (bytevector-length body))
                                    ((string? body) (string-length body))
                                    (else #f)))
                 (kept (and key (cache-ref cache key body-length))))
            (if kept
                (values (rebuild response (compressed-headers headers coding)) kept)
                (let ((bytes (encode-body body charset)))
                  (cond
                   ((< (bytevector-length bytes) min-length)
                    (values response body))
                   ((memq coding codings)
                    (let ((compressed
                           (compress-bytevector bytes coding
                                                (or level (if (eq? coding 'gzip) 6 3)))))
                      (when key (cache-set! cache key body-length compressed))
                      (values (rebuild response (compressed-headers headers coding))
                              compressed)))
                   (else
                    (values (rebuild response (varying-headers headers)) bytes)))))))))))

;;; (plucky web compress) ends here
