;;; (plucky web proxy) --- a reverse proxy handler on (plucky web client)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `proxy-handler' makes a handler that passes each request on to
;;; another HTTP service and its response back, as a user puts plucky in
;;; front of an app server:
;;;
;;;   (run-server (proxy-handler '("http://127.0.0.1:8081"
;;;                                "http://127.0.0.1:8082")))
;;;
;;; A request flows through it so:
;;;
;;;   request -> pick an upstream: round robin, skipping one that failed
;;;              to connect within the last #:down-ms
;;;   -> the request to send: method, path and query (less
;;;      #:strip-prefix), headers less the hop-by-hop ones, Host kept,
;;;      X-Forwarded-For, X-Forwarded-Proto, Forwarded and Via added
;;;   -> `http-request-stream' on the client's keep-alive pool: the
;;;      handler suspends while the upstream works, and the worker serves
;;;      others; a connection that could not be made is tried on the next
;;;      upstream (the request was not sent)
;;;   -> the response: status and headers less the hop-by-hop ones, Via
;;;      added; its body read whole when its Content-Length is at most
;;;      #:buffer-limit (one bytevector: the fast path), else passed on
;;;      as it comes, chunked, by a body procedure that reads a piece
;;;      from the upstream, writes it, and waits for the client to take
;;;      it (`wait-stream-drained') before reading the next
;;;   -> a failure before the head is out becomes 502 (refused, reset,
;;;      garbage, too large) or 504 (a time-out), with a logged line; one
;;;      half-way through a streamed body can only cut the connection.
;;;
;;; Resources are released in exception handlers, never in a
;;; `dynamic-wind' (see (plucky server suspend)): the client closes its
;;; connection on any failure, and the streaming body procedure gives
;;; its reader up when the client leaves.
;;;
;;; Code:

(define-module (plucky web proxy)
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-11)
  #:use-module (rnrs bytevectors)
  #:use-module ((rnrs io ports) #:select (put-bytevector))
  #:use-module (ice-9 exceptions)
  #:use-module ((ice-9 threads) #:select (make-mutex with-mutex))
  #:use-module (web uri)
  #:use-module (web request)
  #:use-module (web response)
  #:use-module ((web http) #:select (known-header? valid-header?))
  #:use-module ((plucky server)
                #:select (current-request-peer current-request-scheme
                          wait-stream-drained))
  #:use-module (plucky web client)
  #:export (proxy-handler))

;;;
;;; Upstreams
;;;

(define-record-type <upstream>
  (make-upstream origin uri down-until)
  upstream?
  (origin upstream-origin)                ; "http://127.0.0.1:8081"
  (uri upstream-uri)                      ; the same, a URI record
  (down-until upstream-down-until set-upstream-down-until!)) ; ms, or 0

(define (string->upstream origin)
  (let ((uri (string->uri origin)))
    (unless (and uri (memq (uri-scheme uri) '(http https)) (uri-host uri)
                 (member (uri-path uri) '("" "/")) (not (uri-query uri)))
      (error "proxy-handler: an upstream is an origin such as \"http://127.0.0.1:8081\""
             origin))
    (make-upstream (string-trim-right origin #\/) uri 0)))

(define (now-ms)
  (quotient (* (get-internal-real-time) 1000) internal-time-units-per-second))

(define (make-picker upstreams)
  ;; -> (tried) -> the next upstream not in TRIED, round robin, one that
  ;; failed to connect recently only when all others did too; or #f
  (let ((all (list->vector upstreams))
        (next 0))
    (lambda (tried)
      (let ((n (vector-length all))
            (now (now-ms)))
        (let lp ((i 0) (fallback #f))
          (if (= i n)
              (begin
                (when fallback (set! next (modulo (+ next 1) n)))
                fallback)
              (let ((u (vector-ref all (modulo (+ next i) n))))
                (cond
                 ((memq u tried) (lp (+ i 1) fallback))
                 ((<= (upstream-down-until u) now)
                  (set! next (modulo (+ next i 1) n))
                  u)
                 (else (lp (+ i 1) (or fallback u)))))))))))

;;;
;;; Headers
;;;

(define hop-by-hop-headers
  ;; RFC 9110 §7.6.1: a proxy removes these, and those Connection names
  '(connection keep-alive proxy-authenticate proxy-authorization te trailer
               transfer-encoding upgrade proxy-connection))

(define (connection-names headers)
  ;; -> the header names (symbols) the Connection header lists
  (let ((value (assq-ref headers 'connection)))
    (cond
     ((pair? value) value)
     ((string? value)                   ; Guile's parser refused it
      (map (lambda (name) (string->symbol (string-downcase (string-trim-both name))))
           (string-split value #\,)))
     (else '()))))

(define (without-hop-by-hop headers drop)
  ;; HEADERS less the hop-by-hop ones and those named in DROP
  (let ((named (connection-names headers)))
    (let lp ((headers headers) (kept '()))
      (if (null? headers)
          (reverse kept)
          (let ((name (caar headers)))
            (lp (cdr headers)
                (if (or (memq name hop-by-hop-headers) (memq name named)
                        (memq name drop))
                    kept
                    (cons (car headers) kept))))))))

(define (writable header)
  ;; HEADER as Guile's `write-request' can write it.  (plucky http
  ;; parse) keeps a value Guile's parser refuses as its raw string; a
  ;; known header's writer would fail on it, so it goes under a name
  ;; Guile does not know that prints the same ('|Accept| for 'accept).
  (let ((name (car header)) (value (cdr header)))
    (if (and (string? value) (known-header? name) (not (valid-header? name value)))
        (cons (string->symbol (string-titlecase (symbol->string name))) value)
        header)))

(define token-chars
  ;; RFC 9110 §5.6.2 tchar
  (char-set-union (char-set-intersection char-set:ascii char-set:letter+digit)
                  (string->char-set "!#$%&'*+-.^_`|~")))

(define (token? s)
  (and (not (string-null? s)) (string-every token-chars s)))

(define (forwarded-value s)
  ;; RFC 7239 §4: a token, or else a quoted string
  (if (token? s)
      s
      (string-append "\"" (string-join (string-split s #\") "\\\"") "\"")))

(define (forwarded-for peer)
  (cond
   ((not peer) "unknown")
   ((string-index peer #\:) (string-append "\"[" peer "]\""))  ; IPv6
   ((string=? peer "unix") "unknown")
   (else peer)))

(define (host->string host)
  ;; Guile's parsed Host, (NAME . PORT-OR-#f), or the raw string
  (cond
   ((string? host) host)
   ((pair? host) (if (cdr host)
                     (string-append (car host) ":" (number->string (cdr host)))
                     (car host)))
   (else #f)))

(define (appended headers name value separator)
  ;; HEADERS with NAME's value VALUE, or its old value, SEPARATOR, VALUE
  (let ((old (assq-ref headers name)))
    (acons name (if (string? old) (string-append old separator value) value)
           (if old (assq-remove! (list-copy headers) name) headers))))

(define (via-value version via)
  (string-append (number->string (car version)) "." (number->string (cdr version))
                 " " via))

(define via-lists (make-hash-table))    ; via -> ((version . (value)) ...)
(define via-mutex (make-mutex))         ; handlers may run on pool threads

(define (via-list version via)
  ;; -> the list ("1.1 VIA"), the same object each time for VERSION
  ;; and VIA: (plucky http response) renders a header value once per
  ;; object, so a fresh list would be rendered on every response
  ;; (bench/proxy)
  (with-mutex via-mutex
    (let ((known (hash-ref via-lists via '())))
      (or (assoc-ref known version)
          (let ((value (list (via-value version via))))
            (hash-set! via-lists via (acons (cons (car version) (cdr version)) value known))
            value)))))

(define (with-via headers version via)
  ;; Via is parsed by Guile as a list of strings
  (if via
      (let ((old (assq-ref headers 'via)))
        (if (pair? old)
            (acons 'via (append old (list (via-value version via)))
                   (assq-remove! (list-copy headers) 'via))
            (acons 'via (via-list version via)
                   (if old (assq-remove! (list-copy headers) 'via) headers))))
      headers))

(define (upstream-headers request upstream preserve-host? via)
  ;; -> the headers of the request sent to UPSTREAM
  (let* ((headers (request-headers request))
         (peer (current-request-peer))
         (scheme (symbol->string (or (current-request-scheme) 'http)))
         (host (assq-ref headers 'host))
         (kept (without-hop-by-hop headers (if preserve-host? '(expect) '(expect host))))
         (kept (map writable kept))
         (kept (if preserve-host?
                   kept
                   (let ((uri (upstream-uri upstream)))
                     (acons 'host (cons (uri-host uri) (uri-port uri)) kept))))
         (kept (if (and peer (not (string=? peer "unix")))
                   (appended kept 'x-forwarded-for peer ", ")
                   kept))
         (kept (acons 'x-forwarded-proto scheme
                      (assq-remove! kept 'x-forwarded-proto)))
         (kept (appended kept 'forwarded
                         (string-append "for=" (forwarded-for peer)
                                        (let ((h (host->string host)))
                                          (if h (string-append ";host=" (forwarded-value h)) ""))
                                        ";proto=" scheme)
                         ", ")))
    (with-via kept (request-version request) via)))

;;;
;;; The request
;;;

(define (upstream-target request strip-prefix)
  ;; -> a URI reference holding the path and query to send
  (let* ((uri (request-uri request))
         (path (uri-path uri))
         (stripped (if (and strip-prefix (string-prefix? strip-prefix path))
                       (let ((rest (substring path (string-length strip-prefix))))
                         (if (string-prefix? "/" rest) rest (string-append "/" rest)))
                       path)))
    (if (and (eq? stripped path) (not (uri-host uri)) (not (uri-scheme uri)))
        uri
        (build-uri-reference #:path stripped #:query (uri-query uri)))))

;; Guile's `build-request' wants a port for a body; the request is only
;; written out, never read from.
(define no-port (%make-void-port "w"))

(define (upstream-body request body)
  ;; -> the body to send, or #f
  (and (bytevector? body)
       (or (> (bytevector-length body) 0)
           (assq 'content-length (request-headers request)))
       body))

;;;
;;; Failures
;;;

(define timeout-reasons '(connect-timeout read-timeout write-timeout timeout))
(define connect-reasons '(connect-refused connect-timeout connect-failed resolve-failed))

(define (log-failure request upstream e)
  (let ((port (current-error-port)))
    (format port "plucky: proxy: ~a ~a -> ~a: ~a~a~%"
            (request-method request) (uri-path (request-uri request))
            (upstream-origin upstream) (http-client-error-reason e)
            (if (exception-with-message? e)
                (string-append " (" (exception-message e) ")")
                ""))
    (force-output port)))

(define (failure-response e)
  ;; -> (values response body) for the &http-client-error E
  (let* ((timeout? (memq (http-client-error-reason e) timeout-reasons))
         (code (if timeout? 504 502)))
    (values (build-response #:code code
                            #:headers '((content-type . (text/plain (charset . "utf-8")))
                                        (cache-control . (no-store))))
            (if timeout?
                "504 Gateway Timeout: the upstream did not answer in time\n"
                (string-append "502 Bad Gateway: "
                               (symbol->string (http-client-error-reason e)) "\n")))))

(define (not-proxied what)
  (values (build-response #:code 501
                          #:headers '((content-type . (text/plain (charset . "utf-8")))))
          (string-append "501 Not Implemented: " what " is not proxied\n")))

(define (websocket-upgrade? request)
  (let ((upgrade (assq-ref (request-headers request) 'upgrade)))
    (and upgrade
         (let ((protocols (if (string? upgrade) (list upgrade) upgrade)))
           (or-map (lambda (p) (string-prefix-ci? "websocket" p)) protocols)))))

;;;
;;; The response
;;;

(define (bodiless-code? code)
  (or (< code 200) (= code 204) (= code 304)))

(define (client-response response headers)
  (build-response #:version (response-version response)
                  #:code (response-code response)
                  #:reason-phrase (response-reason-phrase response)
                  #:headers headers
                  #:validate-headers? #f))

(define (stream-body request upstream reader)
  ;; -> the body procedure of a streamed answer: each piece of READER,
  ;; written and flushed as it comes (an event stream's events must not
  ;; wait in a buffer), then a wait for the client to take it, so that
  ;; no more than a little is held for a slow client
  (lambda (port)
    (with-exception-handler
        (lambda (e)
          (if (http-client-error? e)
              (log-failure request upstream e)
              (close-reader! reader))   ; the client left, or the time ran out
          (raise-exception e))
      (lambda ()
        (let lp ()
          (let ((piece (reader)))
            (unless (eof-object? piece)
              (put-bytevector port piece)
              (force-output port)
              (wait-stream-drained port)
              (lp)))))
      #:unwind? #t)))

(define (pass-response request upstream response reader buffer-limit via)
  ;; -> (values response body) to send the client
  (let* ((code (response-code response))
         (length (response-content-length response))
         (head? (eq? (request-method request) 'HEAD))
         (headers (without-hop-by-hop (response-headers response)
                                      (if (bodiless-code? code) '(content-length) '())))
         (headers (with-via headers (response-version response) via)))
    (cond
     ((or (bodiless-code? code) (and head? length))
      (close-reader! reader)
      (values (client-response response headers) #f))
     (head?
      ;; no length to tell: the head of a chunked answer, without a body
      (close-reader! reader)
      (values (client-response response (acons 'transfer-encoding '((chunked)) headers))
              (lambda (port) #t)))
     ((and length (<= length buffer-limit))
      (values (client-response response headers) (read-reader-rest reader)))
     (else
      (values (client-response response
                               (acons 'transfer-encoding '((chunked))
                                      (assq-remove! headers 'content-length)))
              (stream-body request upstream reader))))))

;;;
;;; The handler
;;;

(define* (proxy-handler upstreams #:key
                        (strip-prefix #f)
                        (preserve-host? #t)
                        (connect-timeout-ms 5000)
                        (read-timeout-ms 60000)
                        (timeout-ms #f)
                        (max-body #f)
                        (buffer-limit (* 1024 1024))
                        (down-ms 10000)
                        (pool-max-idle 256)
                        (via "plucky"))
  "Return a handler, (request body . _) -> (values response body), that
forwards each request to one of UPSTREAMS (an origin string such as
\"http://127.0.0.1:8081\", or a list of them, taken in turn) and returns
its response; also a route's or a mount's handler.

The request keeps its method, path and query (less STRIP-PREFIX, when
the path starts with it), body and headers, less the hop-by-hop ones
(`hop-by-hop-headers' and those Connection names) and Expect; Host is
kept when PRESERVE-HOST?, else the upstream's; X-Forwarded-For gets the
client's address appended, X-Forwarded-Proto is set, Forwarded (RFC
7239) and Via (VIA, #f for none) get an element appended.  The response
keeps its status and headers, less the hop-by-hop ones, plus Via; a
body of at most BUFFER-LIMIT bytes by its Content-Length is read whole,
any other is passed on as it comes, chunked, at the pace the client
reads.  Connections to upstreams are kept alive in (plucky web client)'s
pool, whose limit of idle connections per origin this sets to
POOL-MAX-IDLE for the whole process: at least the requests in flight at
once, lest each burst close what the next must open again.

Failures: an upstream that refuses a connection (or cannot be reached
in CONNECT-TIMEOUT-MS) is skipped for DOWN-MS and the request goes to
the next; none left, 502.  An upstream that sends nothing for
READ-TIMEOUT-MS, or whose exchange passes TIMEOUT-MS (#f: no bound),
504; one that resets, closes early, sends what is not HTTP or a body
over MAX-BODY bytes (#f: no bound), 502.  Each is logged on the error
port.  WebSocket upgrades and CONNECT are answered 501."
  (let* ((upstreams (map string->upstream
                         (if (string? upstreams) (list upstreams) upstreams)))
         (pick (make-picker upstreams)))
    (when (null? upstreams)
      (error "proxy-handler: no upstream"))
    (set-pool-limits! #:max-idle pool-max-idle)
    (lambda (request body . _)
      (cond
       ((eq? (request-method request) 'CONNECT) (not-proxied "CONNECT"))
       ((websocket-upgrade? request) (not-proxied "a WebSocket upgrade"))
       (else
        (let ((target (upstream-target request strip-prefix))
              (payload (upstream-body request body)))
          (define (exchange upstream)
            ;; -> (response . body) for the client
            (let-values
                (((response reader)
                  (http-request-stream
                   (upstream-uri upstream)
                   #:request (build-request
                              target
                              #:method (request-method request)
                              #:headers (upstream-headers request upstream
                                                          preserve-host? via)
                              #:port no-port
                              #:validate-headers? #f)
                   #:body payload #:keep-alive? #t
                   #:connect-timeout-ms connect-timeout-ms
                   #:read-timeout-ms read-timeout-ms
                   #:timeout-ms timeout-ms #:max-body max-body)))
              (call-with-values
                  (lambda ()
                    (pass-response request upstream response reader buffer-limit via))
                cons)))
          (let attempt ((tried '()) (failure #f))
            (let ((upstream (pick tried)))
              (if (not upstream)
                  (failure-response failure)
                  (let ((outcome
                         ;; the client error, or the response: the
                         ;; client has closed its connection on a failure
                         (with-exception-handler
                             (lambda (e)
                               (if (http-client-error? e) e (raise-exception e)))
                           (lambda () (exchange upstream))
                           #:unwind? #t)))
                    (cond
                     ((pair? outcome) (values (car outcome) (cdr outcome)))
                     ((memq (http-client-error-reason outcome) connect-reasons)
                      ;; not sent: another upstream may take it
                      (log-failure request upstream outcome)
                      (set-upstream-down-until! upstream (+ (now-ms) down-ms))
                      (attempt (cons upstream tried) outcome))
                     (else
                      (log-failure request upstream outcome)
                      (failure-response outcome)))))))))))))

;;; (plucky web proxy) ends here
