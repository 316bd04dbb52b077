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
;;; between responses, in one call (gzip: zlib's window and hash table
;;; fitted to the body's size, as nginx fits them).  A handler that
;;; answers the same response object again (a literal header alist, a
;;; kept record) gets the same compressed response again, whose head
;;; the server then copies from its memo instead of rendering it.  A streamed body (text/event-stream, or declared
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
  ;; (ice-9 binary-ports), not (rnrs io ports): the same procedures,
  ;; without loading R6RS records and conditions (see static.scm)
  #:use-module ((ice-9 binary-ports) #:select (put-bytevector open-bytevector-output-port))
  #:use-module (ice-9 iconv)
  #:use-module (srfi srfi-9)
  #:use-module ((ice-9 threads) #:select (make-mutex lock-mutex unlock-mutex))
  #:use-module (web request)
  #:use-module (web uri)
  #:use-module (web response)
  #:use-module ((plucky http)
                #:select (answer-headers answer-code streamed-response? answer-body
                          raw-response?))
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

;; One idle encoder per coding, level and window for whole bodies,
;; per thread: making one allocates zlib's window and hash table (a
;; quarter megabyte at level 6) each time, which bench/static's gzip
;; case shows in req/s.  The list holds (key . encoder), KEY a fixnum
;; (see `encoder-key').
(define idle-encoders (make-thread-local-fluid '()))

(define (gzip-window length)
  ;; -> (values window-bits mem-level) for a gzip stream of LENGTH
  ;; bytes: zlib's defaults, both halved while the body fits in half the
  ;; window (less the 262 bytes deflate keeps for its lookahead), as
  ;; nginx does (ngx_http_gzip_filter_memory): the hash table deflate
  ;; clears at each stream's start shrinks with the window, and the
  ;; window still reaches back to the body's first byte.
  (let lp ((bits 15) (level 8))
    (if (< length (- (ash 1 (- bits 1)) 262))
        (lp (- bits 1) (- level 1))
        (values bits (max level 1)))))

(define (encoder-key coding level bits)
  (if (eq? coding 'gzip)
      (+ (* level 16) bits)              ; level 1-9, bits 9-15
      (+ 1000000 level)))                ; zstd: level up to 22, or negative

(define (idle-encoder coding level length)
  ;; -> the thread's encoder for CODING at LEVEL fitted to LENGTH bytes,
  ;; made and kept the first time
  (call-with-values (lambda ()
                      (if (eq? coding 'gzip) (gzip-window length) (values 0 0)))
    (lambda (bits mem-level)
      (let* ((key (encoder-key coding level bits))
             (idle (fluid-ref idle-encoders))
             (found (assv key idle)))
        (if found
            (cdr found)
            (let ((encoder (if (eq? coding 'gzip)
                               ;; raw: `gzip-bytevector' writes the wrapper
                               (make-deflater #:level level #:format 'raw
                                              #:window-bits bits #:mem-level mem-level)
                               (make-zstd-encoder #:level level))))
              (fluid-set! idle-encoders (acons key encoder idle))
              encoder))))))

(define (compress-bytevector bv coding level)
  "Return BV compressed whole with CODING (gzip or zstd) at LEVEL, as a
bytevector."
  (let ((encoder (idle-encoder coding level (bytevector-length bv))))
    (if (eq? coding 'gzip)
        (gzip-bytevector encoder bv)
        (let ((chunks (begin
                        ;; a frame left unfinished by an error is dropped
                        (zstd-encoder-reset! encoder)
                        (zstd-compress! encoder bv 0 (bytevector-length bv) 'finish))))
          (if (and (pair? chunks) (null? (cdr chunks)))
              (car chunks)
              (call-with-values open-bytevector-output-port
                (lambda (port get)
                  (for-each (lambda (chunk) (put-bytevector port chunk)) chunks)
                  (get))))))))

;;;
;;; Headers
;;;

(define (compressed-headers headers coding)
  ;; HEADERS without Content-Length, with Content-Encoding, Vary and a
  ;; weak ETag
  (let lp ((headers headers) (out '()) (vary? #f))
    (if (null? headers)
        (reverse (append (if vary? '() '((vary accept-encoding)))
                         (cons (content-encoding-header coding) out)))
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

;; The same header each time, so that the server's cache of rendered
;; headers, keyed by the value's identity, renders it once
;; (bench/instructions-gzip).
(define (content-encoding-header coding)
  (case coding
    ((gzip) '(content-encoding gzip))
    ((zstd) '(content-encoding zstd))
    (else (list 'content-encoding coding))))

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

(define-syntax-rule (with-state expression state)
  ;; the two values of EXPRESSION, then the handler's STATE
  (call-with-values (lambda () expression)
    (lambda (response body) (apply values response body state))))

(define-record-type <settings>
  (make-settings codings level min-length cache heads)
  settings?
  (codings settings-codings)            ; symbols, preferred first
  (level settings-level)                ; #f: each coding's default
  (min-length settings-min-length)
  (cache settings-cache)                ; <cache>, or #f
  ;; per coding (0 gzip, 1 zstd): #f or #(response textual? compressed),
  ;; the last answer's response and its compressed response
  (heads settings-heads))

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
  (let ((settings (make-settings codings level min-length
                                 (and (> cache-size 0)
                                      (make-cache cache-size cache-entry-size))
                                 (make-vector 2 #f))))
    (lambda (app)
      ;; The usual handler takes two arguments and returns two values:
      ;; that case goes without `apply' and rest lists.
      (case-lambda
        ((request body)
         (call-with-values (lambda () (app request body))
           (case-lambda
             ((response response-body)
              (compress request response response-body settings))
             ((response response-body . state)
              (with-state (compress request response response-body settings) state)))))
        ((request body . state)
         (call-with-values (lambda () (apply app request body state))
           (lambda (response response-body . state)
             (with-state (compress request response response-body settings) state))))))))

(define (utf-8? charset)
  (or (string-ci=? charset "utf-8") (string-ci=? charset "utf8")))

(define (encode-body body charset)
  ;; BODY, a string, bytevector or procedure of a port -> its bytes
  (cond
   ((bytevector? body) body)
   ((string? body)
    (if (utf-8? charset) (string->utf8 body) (string->bytevector body charset)))
   (else (call-with-encoded-output-string charset body))))

(define (textual-headers headers)
  ;; HEADERS of a textual body, with the charset the server would add
  ;; to its type: a bytevector body gets none from the server
  (map (lambda (h)
         (if (eq? (car h) 'content-type)
             (cons 'content-type (with-charset (cdr h)))
             h))
       (if (assq 'content-type headers)
           headers
           (cons '(content-type text/plain) headers))))

(define (compressed-response response textual? coding heads)
  ;; -> RESPONSE with the headers of its body compressed with CODING.
  ;; A handler that answers the same response object again (a literal
  ;; header alist, a kept record) gets the same compressed response
  ;; again, kept in HEADS: the server then copies that response's head
  ;; from its own memo instead of rendering it (bench/instructions-gzip).
  (let* ((slot (if (eq? coding 'gzip) 0 1))
         (last (vector-ref heads slot)))
    (if (and last
             (eq? (vector-ref last 0) response)
             (eq? (vector-ref last 1) textual?))
        (vector-ref last 2)
        (let* ((headers (answer-headers response))
               (compressed (rebuild response
                                    (compressed-headers
                                     (if textual? (textual-headers headers) headers)
                                     coding))))
          (unless (raw-response? response)   ; a proxy's: new each time
            (vector-set! heads slot (vector response textual? compressed)))
          compressed))))

(define (compress request response response-body settings)
  ;; -> (values response body), compressed or not
  (define body (answer-body response response-body)) ; a proxy's is a slice
  (define codings (settings-codings settings))
  (if (not (candidate? request response body))
      (values response body)
      (let ((headers (answer-headers response))
            (coding (choose-coding request codings)))
        (cond
         ((streamed-response? response body)
          (if (memq coding codings)
              (values (rebuild response (compressed-headers headers coding))
                      (streaming-body body coding (settings-level settings)
                                      (charset-of headers)))
              (values (rebuild response (varying-headers headers)) body)))
         (else
          (let* ((textual? (not (bytevector? body)))
                 (cache (settings-cache settings))
                 (key (and cache (memq coding codings)
                           (cache-key request response coding)))
                 (body-length (cond ((bytevector? body) (bytevector-length body))
                                    ((string? body) (string-length body))
                                    (else #f)))
                 (kept (and key (cache-ref cache key body-length))))
            (if kept
                (values (compressed-response response textual? coding
                                             (settings-heads settings))
                        kept)
                (let ((bytes (encode-body body (charset-of headers))))
                  (cond
                   ((< (bytevector-length bytes) (settings-min-length settings))
                    (values response body))
                   ((memq coding codings)
                    (let ((compressed
                           (compress-bytevector bytes coding
                                                (or (settings-level settings)
                                                    (if (eq? coding 'gzip) 6 3)))))
                      (when key (cache-set! cache key body-length compressed))
                      (values (compressed-response response textual? coding
                                                   (settings-heads settings))
                              compressed)))
                   (else
                    (values (rebuild response
                                     (varying-headers
                                      (if textual? (textual-headers headers) headers)))
                            bytes)))))))))))

;;; (plucky web compress) ends here
