;;; (plucky web client) --- an HTTP/1.1 client that suspends instead of blocking

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Guile's (web client) with the same procedures and keywords, so that
;;; an app switches by changing its import, and four differences that a
;;; server needs:
;;;
;;;  - it never blocks its thread inside a handler.  Sockets are
;;;    non-blocking and every wait goes through (plucky server
;;;    suspend): a handler the loop runs suspends there while its
;;;    worker serves other requests; a script, the REPL or a pool
;;;    thread blocks in poll(2) as Guile's client would.
;;;  - every wait is bounded: #:connect-timeout-ms, #:read-timeout-ms
;;;    (each wait for bytes), #:timeout-ms (the whole exchange), and
;;;    #:max-body bounds what is held.
;;;  - #:keep-alive? connections go back to a per-process pool, per
;;;    origin (plucky web client pool), and are reused.
;;;  - failures are one condition type, &http-client-error, whose
;;;    reason says which (plucky web client error).
;;;
;;; An exchange:
;;;
;;;   http-request -> the request and its body as bytes
;;;     -> a pooled connection, or a new one (plucky web client connection)
;;;     -> write -> read the head, skipping 1xx (plucky web client response)
;;;     -> a redirect to follow? drain, and again with the new URI
;;;     -> the body: read whole and decoded, or handed out piece by piece
;;;     -> the connection back to the pool, or closed
;;;
;;; Streaming.  `http-request-stream' returns the response and a READER:
;;; each (READER) returns the next piece of the body, a bytevector, or
;;; the end-of-file object, waiting (suspending) as needed; the
;;; connection returns to the pool once the body is read whole, and
;;; `close-reader!' closes one given up half-way.  Guile's #:streaming?
;;; #t returns a port instead, and a port's read procedure is called
;;; from C: a continuation captured under it could not be resumed, so a
;;; handler must never suspend inside one.  So `http-request' with
;;; #:streaming? #t returns, outside a suspendable handler, a port over
;;; the connection that blocks as it reads; inside one, it reads the
;;; body first (suspending, within #:max-body) and returns a bytevector
;;; port over it.  A handler that wants to stream uses the reader.
;;;
;;; A caller that passes its own #:port gets Guile's client on it,
;;; unchanged: that port is Guile's to drive, and blocks.
;;;
;;; Code:

(define-module (plucky web client)
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-11)
  #:use-module (rnrs bytevectors)
  #:use-module ((ice-9 binary-ports)
                #:select (open-bytevector-output-port open-bytevector-input-port
                          make-custom-binary-input-port put-bytevector eof-object))
  #:use-module (ice-9 exceptions)
  #:use-module (ice-9 iconv)
  #:use-module ((ice-9 threads) #:select (make-mutex with-mutex))
  #:use-module (web uri)
  #:use-module (web request)
  #:use-module (web response)
  #:use-module ((web http) #:select (known-header? header-writer header->string))
  #:use-module ((web client)
                #:select (x509-certificate-directory
                          (http-request . guile-http-request)))
  #:use-module ((plucky server) #:select (suspendable?))
  #:use-module (plucky web client error)
  #:use-module (plucky web client connection)
  #:use-module (plucky web client response)
  #:use-module (plucky web client pool)
  #:re-export (x509-certificate-directory
               &http-client-error
               http-client-error?
               http-client-error-reason
               http-client-error-offset
               http-client-error-uri
               pool-idle-count
               close-idle-connections!
               set-pool-limits!)
  #:export (http-request
            http-get
            http-head
            http-post
            http-put
            http-delete
            http-trace
            http-options
            http-request-stream
            http-request-raw
            read-reader-rest
            read-reader-rest-into!
            close-reader!))

;;;
;;; Defaults, for `http-request' and `http-request-stream' alike
;;;

(define default-connect-timeout-ms 10000)  ; the TLS handshake included
(define default-read-timeout-ms 30000)     ; each wait for bytes to come or leave

;;;
;;; The request
;;;

(define (ensure-uri uri)
  (let ((uri (cond ((string? uri) (string->uri-reference uri))
                   ((uri-reference? uri) uri)
                   (else #f))))
    (unless (and uri (memq (uri-scheme uri) '(http https)) (uri-host uri))
      (raise-client-error 'bad-uri "not an http or https URI"
                          #:irritants (list uri)))
    uri))

;; Guile's `build-request' wants a port for POST and PUT; the request is
;; written to a bytevector port, so it is given one that takes nothing.
(define no-port (%make-void-port "w"))

(define* (make-request uri #:key method version headers)
  (build-request uri #:method method #:version version #:headers headers
                 #:port no-port))

(define (with-headers request headers)
  (make-request (request-uri request)
                #:method (request-method request)
                #:version (request-version request)
                #:headers headers))

(define (encode-body request body)
  ;; -> (values request bytevector-or-#f), with Content-Length and, for
  ;; text, a charset, as Guile's client does
  (define (charset-of request)
    (let* ((type (request-content-type request '(text/plain)))
           (declared (assq-ref (cdr type) 'charset)))
      (values type declared (or declared "utf-8"))))
  (define (with-charset request type declared charset)
    (if declared
        request
        (with-headers request
                      (cons (cons 'content-type (append type (list (cons 'charset charset))))
                            (assq-remove! (list-copy (request-headers request))
                                          'content-type)))))
  (cond
   ((not body)
    (let ((length (request-content-length request)))
      (when (and length (not (zero? length)))
        (error "content-length, but no body" length))
      (values request #f)))
   ((or (string? body) (procedure? body))
    (let-values (((type declared charset) (charset-of request)))
      (encode-body (with-charset request type declared charset)
                   (if (string? body)
                       (string->bytevector body charset)
                       (call-with-encoded-output-string charset body)))))
   ((bytevector? body)
    (let ((declared (request-content-length request)))
      (cond
       ((not declared)
        (values (with-headers request (cons (cons 'content-length (bytevector-length body))
                                            (request-headers request)))
                body))
       ((= declared (bytevector-length body)) (values request body))
       (else (error "bad content-length" declared (bytevector-length body))))))
   (else (error "unexpected body type" body))))

(define (request->bytevector request body)
  ;; The head as Guile's `write-request' writes it, then BODY.
  (let* ((head (request-head-text request))
         (bytes (and head (latin-1-bytes head))))
    (if bytes
        (if body
            (let ((out (make-bytevector (+ (bytevector-length bytes)
                                           (bytevector-length body)))))
              (bytevector-copy! bytes 0 out 0 (bytevector-length bytes))
              (bytevector-copy! body 0 out (bytevector-length bytes)
                                (bytevector-length body))
              out)
            bytes)
        ;; Guile's own writer, for its errors on what it cannot write
        (let-values (((port get) (open-bytevector-output-port)))
          (write-request request port)
          (when body (put-bytevector port body))
          (get)))))

(define (latin-1-bytes text)
  ;; -> TEXT as the bytes of its characters, or #f when one is over
  ;; U+00FF.  Not (ice-9 iconv), which opens a port per call.
  (if (string-every char-set:ascii text)
      (string->utf8 text)
      (let* ((n (string-length text))
             (bv (make-bytevector n)))
        (let lp ((i 0))
          (if (= i n)
              bv
              (let ((c (char->integer (string-ref text i))))
                (and (< c 256)
                     (begin (bytevector-u8-set! bv i c) (lp (+ i 1))))))))))

(define (request-head-text request)
  ;; -> the head of REQUEST as one string, as Guile's `write-request'
  ;; would write it (its bytes the string's characters), or #f when a
  ;; header is not a string Guile writes as it is nor one Guile knows.
  ;; Made without a string port, most values without the header's
  ;; writer: a port per request and per header was a large part of a
  ;; proxied request (bench/proxy).
  (let* ((uri (request-uri request))
         (path (uri-path uri))
         (query (uri-query uri))
         (version (request-version request))
         (line (list " HTTP/" (number->string (car version)) "."
                     (number->string (cdr version)) "\r\n")))
    (let lp ((headers (request-headers request))
             (parts (reverse (append (list (symbol->string (request-method request)) " "
                                           (if (string-null? path) "/" path))
                                     (if query (list "?" query) '())
                                     line))))
      (if (null? headers)
          (string-concatenate-reverse (cons "\r\n" parts))
          (let* ((name (caar headers))
                 (value (cdar headers))
                 (text (header-text name value)))
            (and text
                 (lp (cdr headers)
                     (cons* "\r\n" text ": " (header-name-text name) parts))))))))

(define (header-name-text name)
  ;; -> (header->string NAME), kept for a name Guile does not know,
  ;; whose string-titlecase was 4% of a proxied request (bench/proxy:
  ;; X-Forwarded-For, Forwarded)
  (if (known-header? name)
      (header->string name)
      (with-mutex header-texts-mutex
        (or (hashq-ref header-names name)
            (let ((text (header->string name)))
              (when (< header-names-count 256)
                (hashq-set! header-names name text)
                (set! header-names-count (+ header-names-count 1)))
              text)))))

;; Names of headers Guile does not know -> their text; the first 256.
(define header-names (make-hash-table))
(define header-names-count 0)

(define (header-text name value)
  ;; -> VALUE as Guile's writer for NAME writes it, or #f
  (cond
   ((not (known-header? name)) (and (string? value) value))
   ((and (eq? name 'host) (pair? value) (string? (car value)))
    (let ((host (if (string-index (car value) #\:)
                    (string-append "[" (car value) "]")
                    (car value))))
      (if (cdr value) (string-append host ":" (number->string (cdr value))) host)))
   (else
    (let ((hit (with-mutex header-texts-mutex (hashq-ref header-texts value))))
      (if (and hit (eq? (car hit) name))
          (cdr hit)
          (let ((text (call-with-output-string
                        (lambda (port) ((header-writer name) value port)))))
            (with-mutex header-texts-mutex
              (when (>= header-texts-count 256)
                (hash-clear! header-texts)
                (set! header-texts-count 0))
              (hashq-set! header-texts value (cons name text))
              (set! header-texts-count (+ header-texts-count 1)))
            text))))))

;; Known headers' values -> (name . text), by the value object: a value
;; given on every request (a proxy's Via, an app's constant Accept) is
;; written once.  Bounded, cleared when full.
(define header-texts (make-hash-table))
(define header-texts-count 0)
(define header-texts-mutex (make-mutex))

(define (idempotent? method)
  (memq method '(GET HEAD PUT DELETE OPTIONS TRACE)))

;;;
;;; One exchange
;;;

(define-record-type <settings>
  (make-settings keep-alive? verify? max-body label uri)
  settings?
  (keep-alive? settings-keep-alive?)
  (verify? settings-verify?)
  (max-body settings-max-body)
  (label settings-label)
  (uri settings-uri))                   ; the first URI, a string, for conditions

(define (exchange uri request payload timeouts settings)
  ;; -> (values response body conn): the request sent, the head read.
  (let ((method (request-method request)))
    (exchange-bytes uri method (request->bytevector request payload) timeouts settings
                    (lambda (conn where)
                      (let-values (((response head-size)
                                    (read-response-head conn timeouts where)))
                        (cons response
                              (make-body conn response head-size method
                                         #:max-body (settings-max-body settings)
                                         #:uri where)))))))

(define last-origin #f)                  ; #(uri origin): see uri-origin

(define (uri-origin uri tls? host port)
  ;; -> "http://HOST:PORT", the pool's key.  The last one made is kept,
  ;; by URI (immutable, replaced whole, so threads share it): a proxy
  ;; asks for its upstream's on every request.
  (let ((last last-origin))
    (if (and last (eq? (vector-ref last 0) uri))
        (vector-ref last 1)
        (let ((origin (string-append (if tls? "https://" "http://") host ":"
                                     (number->string port))))
          (set! last-origin (vector uri origin))
          origin))))

(define (exchange-bytes uri method bytes timeouts settings read-head)
  ;; -> (values head body conn): BYTES, a request of METHOD, sent; the
  ;; head and body of the response read by (READ-HEAD conn where) ->
  ;; (head . body).  A pooled connection the server had closed is
  ;; retried once, on a new one, when the method is idempotent.
  (let* ((tls? (eq? (uri-scheme uri) 'https))
         (host (uri-host uri))
         (port (or (uri-port uri) (if tls? 443 80)))
         (origin (uri-origin uri tls? host port))
         (where (settings-uri settings)))
    (let attempt ((fresh? #f))
      (let* ((pooled (and (settings-keep-alive? settings) (not fresh?)
                          (pool-take! origin (idempotent? method))))
             (conn (or pooled
                       (open-connection host port tls? #:timeouts timeouts
                                        #:verify-certificate? (settings-verify? settings)
                                        #:uri where #:label (settings-label settings))))
             (outcome
              (with-exception-handler
                  (lambda (e)
                    (connection-close! conn)
                    (if (and pooled (idempotent? method) (http-client-error? e)
                             (memq (http-client-error-reason e) '(closed write-failed)))
                        'stale
                        (raise-exception e)))
                (lambda ()
                  (connection-write! conn bytes timeouts)
                  (read-head conn where))
                #:unwind? #t)))
        (if (eq? outcome 'stale)
            (attempt #t)
            (values (car outcome) (cdr outcome) conn))))))

(define (finish! conn body settings)
  ;; The body is over, or given up: pool the connection or close it.
  (if (and (settings-keep-alive? settings) (body-reusable? body))
      (pool-release! conn)
      (connection-close! conn)))

(define (read-whole-body conn body timeouts settings)
  ;; -> the body as one bytevector; the connection pooled or closed
  (let ((bv (with-exception-handler
                (lambda (e) (connection-close! conn) (raise-exception e))
              (lambda () (read-body-rest body timeouts))
              #:unwind? #t)))
    (finish! conn body settings)
    bv))

;;;
;;; Readers
;;;

;; A reader is a procedure of no argument (the next piece) that also
;; takes one, `reader-finish' or `reader-rest', for `close-reader!'
;; and `read-reader-rest': a closure where a weak table of the readers
;; was, one entry per exchange (bench/instructions-proxy).
(define reader-finish (list 'finish))
(define reader-rest (list 'rest))

(define (make-reader conn body timeouts settings)
  (define finished? #f)
  (define (finish)
    (unless finished?
      (set! finished? #t)
      (finish! conn body settings)))
  (define (read-guarded read)
    (with-exception-handler
        (lambda (e)
          (set! finished? #t)
          (connection-close! conn)
          (raise-exception e))
      (lambda () (read body timeouts))
      #:unwind? #t))
  (when (body-done? body) (finish))
  (case-lambda
    (()
     (if finished?
         (eof-object)
         (let ((piece (read-guarded read-body-piece)))
           ;; Pooled as soon as the last byte is in, without waiting for
           ;; the caller to ask for the end.
           (when (body-done? body) (finish))
           piece)))
    ((what)
     (cond
      ((eq? what reader-finish) (finish))
      ((eq? what reader-rest)
       (if finished?
           #vu8()
           ;; all come (a small answer): no wait, no failure to guard
           (let ((bv (if (body-buffered? body)
                         (read-body-rest body timeouts)
                         (read-guarded read-body-rest))))
             (finish)
             bv)))
      (else (error "not a reader's message" what))))
    ((what into)
     ;; reader-rest into INTO: -> the number of bytes read
     (if (or finished? (body-done? body))
         (begin (finish) 0)
         (let ((n (body-left body)))
           (unless (and (eq? (body-kind body) 'length) (<= n (bytevector-length into)))
             (error "read-reader-rest-into!: not a body of known length that fits" n))
           (if (body-buffered? body)
               (read-body-rest body timeouts into)
               (read-guarded (lambda (body timeouts) (read-body-rest body timeouts into))))
           (finish)
           n)))))

(define (close-reader! reader)
  "Give up READER, from `http-request-stream': its connection returns to
the pool if the body was read whole, and is closed otherwise.  Return
nothing."
  (reader reader-finish)
  (values))

(define (read-reader-rest reader)
  "Return the rest of the body of READER, from `http-request-stream', as
one bytevector (empty when it is over), waiting (suspending) as needed,
and give READER up as `close-reader!' does.  A body whose length the
server declared is read straight into one bytevector of that size."
  (let ((bv (reader reader-rest)))
    (close-reader! reader)
    bv))

(define (read-reader-rest-into! reader bv)
  "Read the rest of the body of READER, from `http-request-raw' or
`http-request-stream', whose response declared its Content-Length, into
BV, which must hold that many bytes, and give READER up as
`close-reader!' does.  Return the number of bytes read: a proxy reads
into a buffer it reuses (plucky web proxy)."
  (let ((n (reader reader-rest bv)))
    (close-reader! reader)
    n))

(define (reader->port reader)
  ;; A blocking port over READER, for callers that cannot suspend.
  (let ((piece #vu8()) (at 0))
    (make-custom-binary-input-port
     "http response body"
     (lambda (bv start count)
       (let lp ()
         (if (< at (bytevector-length piece))
             (let ((n (min count (- (bytevector-length piece) at))))
               (bytevector-copy! piece at bv start n)
               (set! at (+ at n))
               n)
             (let ((next (reader)))
               (if (eof-object? next)
                   0
                   (begin (set! piece next) (set! at 0) (lp)))))))
     #f #f
     (lambda () (close-reader! reader)))))

(define (set-body-port-encoding! port response decode?)
  ;; As Guile's `response-body-port'.
  (let ((type (response-content-type response)))
    (when (and decode? type (text-content-type? (car type)))
      (set-port-encoding! port (or (assq-ref (cdr type) 'charset) "ISO-8859-1")))
    port))

(define (decode-body response bv)
  ;; As Guile's client: text becomes a string by its charset.
  (let ((type (response-content-type response)))
    (if (and type (text-content-type? (car type)))
        (bytes->text bv (or (assq-ref (cdr type) 'charset) "iso-8859-1"))
        bv)))

(define (bytes->text bv charset)
  ;; (bytevector->string BV CHARSET), without the port (ice-9 iconv)
  ;; opens for UTF-8 and for latin-1 that is ASCII (an upstream's text
  ;; without a charset: bench/upstream)
  (cond
   ((or (string-ci=? charset "utf-8") (string-ci=? charset "utf8"))
    (utf8->string bv))
   ((and (or (string-ci=? charset "iso-8859-1") (string-ci=? charset "latin1"))
         (let ascii? ((i 0))
           (or (= i (bytevector-length bv))
               (and (< (bytevector-u8-ref bv i) 128) (ascii? (+ i 1))))))
    (utf8->string bv))
   (else (bytevector->string bv charset))))

;;;
;;; Redirects
;;;

(define redirect-codes '(301 302 303 307 308))

(define (resolve-location base location)
  ;; LOCATION, a URI reference, against BASE (RFC 3986 §5.2, without
  ;; dot segments)
  (cond
   ((uri-scheme location) location)
   (else
    (let ((path (uri-path location)))
      (build-uri (uri-scheme base)
                 #:userinfo (uri-userinfo base)
                 #:host (or (uri-host location) (uri-host base))
                 #:port (if (uri-host location) (uri-port location) (uri-port base))
                 #:path (cond
                         ((uri-host location) path)
                         ((string-prefix? "/" path) path)
                         ((string-null? path) (uri-path base))
                         (else (let* ((base-path (uri-path base))
                                      (slash (string-rindex base-path #\/)))
                                 (string-append (if slash
                                                    (substring base-path 0 (+ slash 1))
                                                    "/")
                                                path))))
                 #:query (if (or (uri-host location) (not (string-null? path))
                                 (uri-query location))
                             (uri-query location)
                             (uri-query base)))))))

(define (same-origin? a b)
  (and (eq? (uri-scheme a) (uri-scheme b))
       (equal? (uri-host a) (uri-host b))
       (eqv? (uri-port a) (uri-port b))))

(define (redirected-request request uri response payload)
  ;; -> (values request payload) for following RESPONSE to URI
  (let* ((code (response-code response))
         (method (request-method request))
         (to-get? (or (and (= code 303) (not (eq? method 'HEAD)))
                      (and (memv code '(301 302)) (eq? method 'POST))))
         (drop (append '(host)
                       (if to-get? '(content-length content-type transfer-encoding) '())
                       ;; Credentials stay with their origin.
                       (if (same-origin? uri (request-uri request))
                           '()
                           '(authorization cookie proxy-authorization))))
         (headers (filter (lambda (h) (not (memq (car h) drop))) (request-headers request))))
    (values (make-request uri #:method (if to-get? 'GET method)
                          #:version (request-version request) #:headers headers)
            (if to-get? #f payload))))

;;;
;;; The procedures
;;;

(define* (http-request-raw uri method bytes #:key
                           (verify-certificate? #t)
                           (keep-alive? #f)
                           (connect-timeout-ms default-connect-timeout-ms)
                           (read-timeout-ms default-read-timeout-ms)
                           (timeout-ms #f)
                           (max-body #f)
                           (label #f)
                           (where #f))
  "Send BYTES, a whole HTTP/1.1 request of METHOD (a symbol): its head
and body as they go on the wire, to the origin of URI (a URI record),
and return four values: the response's head as (plucky http)'s
`parse-response-head' gives it, a bytevector of the head's bytes, BASE,
the head's positions less BASE being offsets in those bytes, and a
READER of its body, as `http-request-stream''s.  For a proxy, which has
the bytes to send and passes the head's fields on as they came, without
Guile's records.  WHERE names URI in conditions (default: URI as a
string); the other keywords are those of `http-request'.  Redirects are
not followed; BYTES are not checked."
  (let ((timeouts (make-timeouts #:connect-ms connect-timeout-ms
                                 #:read-ms read-timeout-ms #:total-ms timeout-ms))
        (settings (make-settings keep-alive? verify-certificate? max-body label
                                 (or where (uri->string uri)))))
    (let-values (((head body conn)
                  (exchange-bytes
                   uri method bytes timeouts settings
                   (lambda (conn where)
                     (let-values (((head bytes base)
                                   (read-raw-response-head conn timeouts where)))
                       (cons (list head bytes base)
                             (make-raw-body conn head (bytevector-length bytes) method
                                            #:max-body max-body #:uri where)))))))
      (values (car head) (cadr head) (caddr head)
              (make-reader conn body timeouts settings)))))

(define* (http-request-stream uri #:key
                              (body #f)
                              (verify-certificate? #t)
                              (method 'GET)
                              (version '(1 . 1))
                              (keep-alive? #f)
                              (headers '())
                              (request #f)
                              (connect-timeout-ms default-connect-timeout-ms)
                              (read-timeout-ms default-read-timeout-ms)
                              (timeout-ms #f)
                              (max-body #f)
                              (follow-redirects 0)
                              (label #f))
  "Send a request to URI as `http-request' does and return two values:
Guile's <response> and a READER of its body.  Each (READER) returns the
next piece of the body as a bytevector, or the end-of-file object once
it is over (at once after HEAD, 204 and 304), waiting for it (a handler
suspends) within the time-outs.  The connection goes back to the pool
(with KEEP-ALIVE?) as soon as the body is read whole; call
`close-reader!' on a READER given up before then, which closes it.  The
keywords are those of `http-request'."
  (let* ((uri (ensure-uri uri))
         (timeouts (make-timeouts #:connect-ms connect-timeout-ms
                                  #:read-ms read-timeout-ms #:total-ms timeout-ms))
         (settings (make-settings keep-alive? verify-certificate? max-body label
                                  (uri->string uri))))
    (let-values (((request payload)
                  (encode-body (or request
                                   (make-request uri #:method method #:version version
                                                 #:headers (if keep-alive?
                                                                headers
                                                                (cons '(connection close)
                                                                      headers))))
                               body)))
      (let follow ((uri uri) (request request) (payload payload) (left follow-redirects))
        (let-values (((response body conn) (exchange uri request payload timeouts settings)))
          (let ((location (response-location response)))
            (cond
             ((not (and (memv (response-code response) redirect-codes) location))
              (values response (make-reader conn body timeouts settings)))
             ((<= left 0)
              (if (> follow-redirects 0)
                  (begin
                    (connection-close! conn)
                    (raise-client-error 'too-many-redirects
                                        "more redirects than #:follow-redirects"
                                        #:uri (settings-uri settings)
                                        #:irritants (list follow-redirects)))
                  (values response (make-reader conn body timeouts settings))))
             (else
              (read-whole-body conn body timeouts settings)
              (let ((next (resolve-location uri location)))
                (let-values (((request payload)
                              (redirected-request request next response payload)))
                  (follow next request payload (- left 1))))))))))))

(define* (http-request uri #:key
                       (body #f)
                       (verify-certificate? #t)
                       (port #f)
                       (method 'GET)
                       (version '(1 . 1))
                       (keep-alive? #f)
                       (headers '())
                       (decode-body? #t)
                       (streaming? #f)
                       (request #f)
                       (connect-timeout-ms default-connect-timeout-ms)
                       (read-timeout-ms default-read-timeout-ms)
                       (timeout-ms #f)
                       (max-body #f)
                       (follow-redirects 0)
                       (label #f))
  "Send a request to URI (a string or a URI) and return two values: the
response, Guile's <response>, and its body: a string when DECODE-BODY?
and its type is text (by its charset), a bytevector otherwise, #f after
HEAD, or a port with STREAMING? (see below).

As Guile's `http-request': METHOD, VERSION, HEADERS (an alist added to
the request), BODY (#f, a bytevector, a string encoded by the charset
of HEADERS' content-type, UTF-8 by default, or a procedure writing to a
port), REQUEST (a <request> to send instead of the one built), and
VERIFY-CERTIFICATE? (check an https server's certificate against
`x509-certificate-directory').  Without KEEP-ALIVE?, the request says
\"Connection: close\" and the connection is closed; with it, the
connection is taken from and returned to the per-process pool.  PORT, a
port already open, makes this Guile's own `http-request' on it.

Bounds: CONNECT-TIMEOUT-MS to connect (TLS handshake included),
READ-TIMEOUT-MS for each wait for the server to send or take bytes,
TIMEOUT-MS for the whole exchange, body included (#f: none), MAX-BODY
bytes of body (#f: no limit).  FOLLOW-REDIRECTS is the number of
redirects (301, 302, 303, 307, 308 with a Location) to follow, 0 by
default; past it, too-many-redirects is raised.  LABEL names the waits
on the status page (by default \"upstream HOST:PORT\").

With STREAMING?, the body is a port: outside a suspendable handler, one
over the connection that blocks as it reads; inside one, a bytevector
port over the body read first, within MAX-BODY (a handler must not
suspend inside a port's read: use `http-request-stream').

Failures raise an &http-client-error whose `http-client-error-reason'
is one of: bad-uri, resolve-failed, connect-refused, connect-timeout,
connect-failed, tls-failed, certificate, write-failed, write-timeout,
read-timeout, timeout, closed, malformed-response (with
`http-client-error-offset'), head-too-large, body-too-large,
too-many-redirects.  A handler whose request is cancelled while it
waits gets &request-cancelled; the connection is closed either way."
  (if port
      (guile-http-request uri #:body body #:verify-certificate? verify-certificate?
                          #:port port #:method method #:version version
                          #:keep-alive? keep-alive? #:headers headers
                          #:decode-body? decode-body? #:streaming? streaming?
                          #:request (or request
                                        (build-request (ensure-uri uri)
                                                       #:port port
                                                       #:method method
                                                       #:version version
                                                       #:headers
                                                       (if keep-alive?
                                                           headers
                                                           (cons '(connection close)
                                                                 headers)))))
      (let*-values (((response reader)
                     (http-request-stream uri #:body body
                                          #:verify-certificate? verify-certificate?
                                          #:method method #:version version
                                          #:keep-alive? keep-alive? #:headers headers
                                          #:request request
                                          #:connect-timeout-ms connect-timeout-ms
                                          #:read-timeout-ms read-timeout-ms
                                          #:timeout-ms timeout-ms #:max-body max-body
                                          #:follow-redirects follow-redirects
                                          #:label label))
                    ((method) (if request (request-method request) method)))
        (cond
         ((eq? method 'HEAD)
          (close-reader! reader)
          (values response #f))
         ((and streaming? (not (suspendable?)))
          (values response
                  (set-body-port-encoding! (reader->port reader) response decode-body?)))
         (else
          (let ((bv (read-reader-rest reader)))
            (cond
             (streaming?
              (values response
                      (set-body-port-encoding! (open-bytevector-input-port bv)
                                               response decode-body?)))
             (decode-body? (values response (decode-body response bv)))
             (else (values response bv)))))))))

(define-syntax-rule (define-http-verb name method doc)
  (define (name uri . args)
    doc
    (apply http-request uri #:method method args)))

(define-http-verb http-get 'GET
  "Return the response and body of a GET of URI: see `http-request',
whose keywords it takes.")
(define-http-verb http-head 'HEAD
  "Return the response of a HEAD of URI, and #f: see `http-request'.")
(define-http-verb http-post 'POST
  "Return the response and body of a POST of #:body to URI: see
`http-request'.")
(define-http-verb http-put 'PUT
  "Return the response and body of a PUT of #:body to URI: see
`http-request'.")
(define-http-verb http-delete 'DELETE
  "Return the response and body of a DELETE of URI: see `http-request'.")
(define-http-verb http-trace 'TRACE
  "Return the response and body of a TRACE of URI: see `http-request'.")
(define-http-verb http-options 'OPTIONS
  "Return the response and body of an OPTIONS request for URI: see
`http-request'.")

;;; (plucky web client) ends here
