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
  #:use-module ((srfi srfi-1) #:select (any filter-map))
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-11)
  #:use-module (rnrs bytevectors)
  #:use-module ((ice-9 binary-ports) #:select (put-bytevector))
  #:use-module (ice-9 exceptions)
  #:use-module ((ice-9 threads) #:select (make-mutex with-mutex))
  #:use-module (web uri)
  #:use-module (web request)
  #:use-module (web response)
  #:use-module ((web http) #:select (known-header? header->string header-writer))
  #:use-module ((plucky server)
                #:select (current-request-peer current-request-scheme
                          wait-stream-drained suspendable?))
  #:use-module ((plucky http)
                #:select (make-raw-response status-reason copy-limit
                          response-head-version response-head-code
                          response-head-reason-start response-head-reason-end
                          response-head-fields response-head-content-length
                          response-head-connection
                          field-symbol field-name-start field-name-end
                          field-value-start field-value-end field-line-end))
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

(define ticks-per-ms (quotient internal-time-units-per-second 1000))

(define (now-ms)
  ;; ticks (nanoseconds) divided: times 1000, they were a bignum
  (quotient (get-internal-real-time) ticks-per-ms))

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

(define last-host #f)                    ; #(name port text): see host->string

(define (host->string host)
  ;; Guile's parsed Host, (NAME . PORT-OR-#f), or the raw string.  The
  ;; last one made is kept, immutable, replaced whole: a connection's
  ;; requests name the same host.
  (cond
   ((string? host) host)
   ((pair? host)
    (let ((last last-host))
      (if (and last (eqv? (vector-ref last 1) (cdr host))
               (string=? (vector-ref last 0) (car host)))
          (vector-ref last 2)
          (let* ((name (if (string-index (car host) #\:)
                           (string-append "[" (car host) "]") ; IPv6
                           (car host)))
                 (text (if (cdr host)
                           (string-append name ":" (number->string (cdr host)))
                           name)))
            (set! last-host (vector (car host) (cdr host) text))
            text))))
   (else #f)))

(define last-forwarded #f)               ; #(peer host scheme text)

(define (forwarded-element peer host scheme)
  ;; -> RFC 7239's element for PEER (or #f), HOST (or #f) and SCHEME.
  ;; The last one made is kept as `host->string''s is.
  (let ((last last-forwarded))
    (if (and last (equal? (vector-ref last 0) peer) (equal? (vector-ref last 1) host)
             (string=? (vector-ref last 2) scheme))
        (vector-ref last 3)
        (let ((text (string-append "for=" (forwarded-for peer)
                                   (if host (string-append ";host=" (forwarded-value host)) "")
                                   ";proto=" scheme)))
          (set! last-forwarded (vector peer host scheme text))
          text))))

(define (version-text version)
  (string-append (number->string (car version)) "." (number->string (cdr version))))

;;;
;;; The request, as bytes
;;;

;;; The request to the upstream is written straight into one bytevector
;;; from the server's parsed request: its headers' values are strings
;;; (written as they are) or Guile's parsed values, written by Guile's
;;; writer once per distinct value (`value-text').  Building a Guile
;;; request and writing it with `write-request' made a string port per
;;; header and per request (bench/instructions-proxy).

(define (latin-1-bytes text)
  ;; -> TEXT as bytes, a character a byte ("?" for one over U+00FF).
  ;; ASCII, the usual case, goes through string->utf8 (C).
  (let ((bv (string->utf8 text)))
    (if (= (bytevector-length bv) (string-length text))
        bv
        (let ((out (make-bytevector (string-length text))))
          (let lp ((i 0))
            (when (< i (string-length text))
              (let ((c (char->integer (string-ref text i))))
                (bytevector-u8-set! out i (if (< c 256) c 63))
                (lp (+ i 1)))))
          out))))

(define name-texts
  ;; header symbol -> the bytes "Name: ", for Guile's known headers and
  ;; common others; filled here, read-only after, so that threads
  ;; share it
  (let ((table (make-hash-table 128)))
    (for-each (lambda (name)
                (hashq-set! table name
                            (latin-1-bytes (string-append (header->string name) ": "))))
              '(accept accept-charset accept-encoding accept-language authorization
                cache-control content-encoding content-language content-length
                content-location content-md5 content-range content-type date
                expect from host if-match if-modified-since if-none-match if-range
                if-unmodified-since max-forwards pragma range referer user-agent
                via warning cookie origin dnt priority forwarded
                upgrade-insecure-requests x-requested-with x-forwarded-for
                x-forwarded-host x-forwarded-proto x-real-ip sec-fetch-site
                sec-fetch-mode sec-fetch-user sec-fetch-dest sec-ch-ua
                sec-ch-ua-mobile sec-ch-ua-platform))
    table))

(define (name-text name)
  (or (hashq-ref name-texts name)
      (latin-1-bytes (string-append (header->string name) ": "))))

;; Parsed values -> their text: a slot per name's hash, each slot an
;; immutable #(name value text) replaced whole, so that threads share
;; the table without a lock.  Compared by `equal?': the parser hands
;; each request a fresh copy of a value it has seen (Accept: */*).
(define value-texts (make-vector 64 #f))

(define (value-text name value)
  ;; -> VALUE of the header NAME as Guile's writer writes it
  (cond
   ((string? value) value)
   ((eq? name 'host) (host->string value))
   ((eq? name 'content-length) (number->string value))
   ((not (known-header? name)) (object->string value display))
   (else
    (let* ((slot (hashq name (vector-length value-texts)))
           (entry (vector-ref value-texts slot)))
      (if (and entry (eq? (vector-ref entry 0) name) (equal? (vector-ref entry 1) value))
          (vector-ref entry 2)
          (let ((text (call-with-output-string
                        (lambda (port) ((header-writer name) value port)))))
            (vector-set! value-texts slot (vector name value text))
            text))))))

(define (pieces->bytevector pieces body)
  ;; PIECES: bytevectors and strings (a character a byte, "?" for one
  ;; over U+00FF: `latin-1-bytes', whose string->utf8 (C) costs less
  ;; than a loop over the characters), last first; -> one bytevector
  ;; of them in order, then BODY
  (define (size piece)
    (if (string? piece) (string-length piece) (bytevector-length piece)))
  (let* ((body-length (if body (bytevector-length body) 0))
         (head-length (let lp ((pieces pieces) (n 0))
                        (if (null? pieces) n (lp (cdr pieces) (+ n (size (car pieces)))))))
         (out (make-bytevector (+ head-length body-length))))
    (when body (bytevector-copy! body 0 out head-length body-length))
    (let lp ((pieces pieces) (end head-length))
      (if (null? pieces)
          out
          (let* ((piece (car pieces))
                 (start (- end (size piece))))
            (let ((bytes (if (string? piece) (latin-1-bytes piece) piece)))
              (bytevector-copy! bytes 0 out start (bytevector-length bytes)))
            (lp (cdr pieces) start))))))

;; Texts this module keeps and hands out again (a Host's, a parsed
;; value's, Forwarded's, Via's, the peer's) -> their bytes: a slot per
;; text's `hashq', each an immutable (text . bytes) replaced whole, so
;; that threads share the table as they share `value-texts'.  Converting
;; them afresh for each request (string->utf8: a malloc, two copies and
;; a free each) cost more than the rest of the pieces did
;; (bench/instructions-proxy).  Keyed by identity: only texts that are
;; never mutated go through it.
(define text-bytes-cache (make-vector 32 #f))

(define (text-bytes text)
  ;; -> TEXT, a kept text, as bytes (see `latin-1-bytes')
  (let* ((slot (hashq text 32))
         (entry (vector-ref text-bytes-cache slot)))
    (if (and entry (eq? (car entry) text))
        (cdr entry)
        (let ((bytes (latin-1-bytes text)))
          (vector-set! text-bytes-cache slot (cons text bytes))
          bytes))))

(define (method-bytes method)
  ;; -> the bytes of METHOD, a symbol; the usual ones made once
  (case method
    ((GET) get-bytes)
    ((HEAD) head-bytes)
    ((POST) post-bytes)
    (else (latin-1-bytes (symbol->string method)))))

(define get-bytes (string->utf8 "GET"))
(define head-bytes (string->utf8 "HEAD"))
(define post-bytes (string->utf8 "POST"))

(define (upstream-path request strip-prefix)
  ;; -> the path and query to send, a string
  (let* ((uri (request-uri request))
         (path (uri-path uri))
         (path (cond
                ((and strip-prefix (string-prefix? strip-prefix path))
                 (let ((rest (substring path (string-length strip-prefix))))
                   (if (string-prefix? "/" rest) rest (string-append "/" rest))))
                ((string-null? path) "/")
                (else path)))
         (query (uri-query uri)))
    (if query (string-append path "?" query) path)))

(define crlf (string->utf8 "\r\n"))
(define space (string->utf8 " "))
(define http/1.1-line (string->utf8 " HTTP/1.1\r\n"))
(define host-prefix (string->utf8 "Host: "))
(define x-forwarded-for-prefix (string->utf8 "X-Forwarded-For: "))
(define x-forwarded-proto-prefix (string->utf8 "X-Forwarded-Proto: "))
(define forwarded-prefix (string->utf8 "Forwarded: "))
(define via-prefix (string->utf8 "Via: "))
(define content-length-prefix (string->utf8 "Content-Length: "))

(define (joined-piece olds value)
  ;; -> a piece of OLDS (texts, last first) and VALUE, a kept text,
  ;; joined with ", "
  (if (null? olds) (text-bytes value) (string-join (reverse (cons value olds)) ", ")))

(define (value-piece name value)
  ;; -> a piece of VALUE of the header NAME: a string as it came, else
  ;; the bytes of its kept text (`value-text')
  (if (string? value) value (text-bytes (value-text name value))))

(define (request-bytes request body upstream strip-prefix preserve-host? via peer scheme)
  ;; -> the request to send UPSTREAM, head and BODY (#f or a bytevector),
  ;; as one bytevector: method, path and query, HTTP/1.1, the headers
  ;; less the hop-by-hop ones, Expect and (unless PRESERVE-HOST?) Host,
  ;; then Host, X-Forwarded-For, X-Forwarded-Proto, Forwarded and Via
  ;; (VIA: "1.1 plucky" for the request's version, or #f), each of the
  ;; last three with the client's elements first
  (let* ((headers (request-headers request))
         (named (connection-names headers))
         (peer? (and peer (not (string=? peer "unix")))))
    (let lp ((headers headers)
             (pieces (list http/1.1-line (upstream-path request strip-prefix) space
                           (method-bytes (request-method request))))
             (xff '()) (forwarded '()) (vias '()) (client-host #f) (length? #f))
      (if (pair? headers)
          (let ((name (caar headers))
                (value (cdar headers)))
            (define (next pieces)
              (lp (cdr headers) pieces xff forwarded vias client-host length?))
            (case name
              ((host)
               (let ((text (host->string value)))
                 (lp (cdr headers)
                     (if preserve-host?
                         (cons* crlf (if (pair? value) (text-bytes text) text) host-prefix
                                pieces)
                         pieces)
                     xff forwarded vias (or client-host text) length?)))
              ((x-forwarded-for)
               (if peer?
                   (lp (cdr headers) pieces (cons (value-text name value) xff)
                       forwarded vias client-host length?)
                   (next (cons* crlf (value-piece name value) (name-text name) pieces))))
              ((forwarded)
               (lp (cdr headers) pieces xff (cons (value-text name value) forwarded)
                   vias client-host length?))
              ((via)
               (if via
                   (lp (cdr headers) pieces xff forwarded (cons (value-text name value) vias)
                       client-host length?)
                   (next (cons* crlf (value-piece name value) (name-text name) pieces))))
              ((expect x-forwarded-proto) (next pieces))
              ((content-length)
               (lp (cdr headers) (cons* crlf (value-piece name value) (name-text name) pieces)
                   xff forwarded vias client-host #t))
              (else
               (if (or (memq name hop-by-hop-headers) (memq name named))
                   (next pieces)
                   (next (cons* crlf (value-piece name value) (name-text name) pieces))))))
          (let* ((pieces (if preserve-host?
                             pieces
                             (let ((uri (upstream-uri upstream)))
                               (cons* crlf (host->string (cons (uri-host uri) (uri-port uri)))
                                      host-prefix pieces))))
                 (pieces (if peer?
                             (cons* crlf (joined-piece xff peer) x-forwarded-for-prefix pieces)
                             pieces))
                 (pieces (cons* crlf (text-bytes scheme) x-forwarded-proto-prefix pieces))
                 (pieces (cons* crlf
                                (joined-piece forwarded
                                              (forwarded-element peer client-host scheme))
                                forwarded-prefix pieces))
                 (pieces (if via
                             (cons* crlf (joined-piece vias via) via-prefix pieces)
                             pieces))
                 (pieces (if (and body (not length?))
                             ;; a chunked request's body, collected
                             (cons* crlf (number->string (bytevector-length body))
                                    content-length-prefix pieces)
                             pieces)))
            (pieces->bytevector (cons crlf pieces) body))))))

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

;;; The upstream's head is passed on as its bytes (`make-raw-response'):
;;; its field lines are copied but for the hop-by-hop ones, those its
;;; Connection names and, on a response without a body, Content-Length;
;;; its Via gets an element appended.  Guile's records of the head were
;;; most of the cost of a proxied request (bench/instructions-proxy).

(define (bodiless-code? code)
  (or (< code 200) (= code 204) (= code 304)))

(define (lowercase-name bytes start end)
  ;; -> the symbol of the header name BYTES [START, END), lower-cased
  (let ((s (make-string (- end start))))
    (let lp ((i start))
      (when (< i end)
        (string-set! s (- i start) (char-downcase (integer->char (bytevector-u8-ref bytes i))))
        (lp (+ i 1))))
    (string->symbol s)))

(define (bytes=string? bytes start end text)
  (and (= (- end start) (string-length text))
       (let lp ((i 0))
         (or (= i (string-length text))
             (and (= (bytevector-u8-ref bytes (+ start i)) (char->integer (string-ref text i)))
                  (lp (+ i 1)))))))

(define (latin-1-string bytes start end)
  (let ((s (make-string (- end start))))
    (let lp ((i start))
      (when (< i end)
        (string-set! s (- i start) (integer->char (bytevector-u8-ref bytes i)))
        (lp (+ i 1))))
    s))

;; Which fields are dropped is decided by `case' and loops over short
;; lists inline: a `memq' per field and list was a call into C each
;; (bench/instructions-proxy).
(define-inlinable (hop-by-hop? name)
  ;; NAME, a symbol, is one of `hop-by-hop-headers'
  (case name
    ((connection keep-alive proxy-authenticate proxy-authorization te trailer
                 transfer-encoding upgrade proxy-connection)
     #t)
    (else #f)))

(define (in? name names)
  ;; NAME is one of NAMES, a short list of symbols
  (and (pair? names) (or (eq? name (car names)) (in? name (cdr names)))))

(define (usual-connection-options? names)
  ;; NAMES, the options of Connection, are among close, keep-alive, upgrade
  (or (null? names)
      (and (memq (car names) '(close keep-alive upgrade))
           (usual-connection-options? (cdr names)))))

(define (crlf-line? bytes field base)
  ;; FIELD's line in BYTES ends its value with CR LF, no blank between:
  ;; its bytes from the name to the line's end are those to send
  (let ((ve (- (field-value-end field) base)))
    (and (= (+ ve 2) (- (field-line-end field) base))
         (= (bytevector-u8-ref bytes ve) 13))))

(define* (client-response head bytes base drop via #:optional (body-length #f))
  ;; -> the raw response to send the client for the upstream's HEAD,
  ;; parsed from BYTES (positions less BASE): its fields less the
  ;; hop-by-hop ones, those its Connection names and DROP (symbols),
  ;; with VIA (the bytes of "1.1 plucky", or #f) appended to its Via
  (let* ((named (response-head-connection head))
         ;; a name not among the known headers' is made a symbol only
         ;; when it may be one to drop: Proxy-Connection, or a name
         ;; Connection lists beyond its usual options
         (other-names? (not (usual-connection-options? named))))
    (define (dropped? name)
      (or (hop-by-hop? name) (in? name named) (in? name drop)))
    (define (kept? field symbol)
      (if symbol
          (not (dropped? symbol))
          (let ((start (- (field-name-start field) base))
                (end (- (field-name-end field) base)))
            (not (and (or other-names? (= (- end start) 16))
                      (dropped? (lowercase-name bytes start end)))))))
    ;; One pass chooses, the next copies: the kept fields' lines, each
    ;; as it came when it ends in CR LF (runs of them in one copy), then
    ;; one Via line with the upstream's values and VIA.
    (let choose ((fields (response-head-fields head))
                 (kept '()) (size 0) (vias '()) (via-size 0) (date? #f))
      (if (pair? fields)
          (let* ((field (car fields))
                 (symbol (field-symbol field)))
            (cond
             ((and via (eq? symbol 'via))
              (choose (cdr fields) kept size (cons field vias)
                      (+ via-size 2 (- (field-value-end field) (field-value-start field)))
                      date?))
             ((kept? field symbol)
              (choose (cdr fields) (cons field kept)
                      (+ size 2 (- (field-value-end field) (field-name-start field)))
                      vias via-size (or date? (eq? symbol 'date))))
             (else (choose (cdr fields) kept size vias via-size date?))))
          (let ((out (make-bytevector
                      (+ size (if via (+ 5 via-size (bytevector-length via) 2) 0)))))
            (copy-fields! out bytes base (reverse! kept))
            (when via (put-via! out size bytes base (reverse! vias) via))
            (let* ((code (response-head-code head))
                   (rs (- (response-head-reason-start head) base))
                   (re (- (response-head-reason-end head) base)))
              (make-raw-response code out
                                 #:reason (and (not (bytes=string? bytes rs re (status-reason code)))
                                               (latin-1-string bytes rs re))
                                 #:date? date? #:body-length body-length)))))))

(define (copy-fields! out bytes base fields)
  ;; Copy FIELDS' lines from BYTES (positions less BASE) to the start of
  ;; OUT, each ending in CR LF; a run of lines that follow each other
  ;; and end so already goes in one copy.
  (define (flush! from to at)
    (bytevector-copy! bytes from out at (- to from))
    (+ at (- to from)))
  (let copy ((fields fields) (from 0) (to 0) (at 0))
    ;; [FROM, TO): the run not yet copied, to go at AT
    (if (null? fields)
        (flush! from to at)
        (let* ((field (car fields))
               (ns (- (field-name-start field) base)))
          (if (crlf-line? bytes field base)
              (let ((end (- (field-line-end field) base)))
                (if (= ns to)
                    (copy (cdr fields) from end at)
                    (copy (cdr fields) ns end (flush! from to at))))
              (let ((at (flush! ns (- (field-value-end field) base) (flush! from to at))))
                (bytevector-u8-set! out at 13)
                (bytevector-u8-set! out (+ at 1) 10)
                (copy (cdr fields) 0 0 (+ at 2))))))))

(define (put-via! out at bytes base vias via)
  ;; Write at AT in OUT the line "Via: " VIAS' values (fields of BYTES,
  ;; positions less BASE), then VIA, joined by ", ", CR LF.
  (bytevector-copy! via-prefix 0 out at 5)
  (let lp ((vias vias) (at (+ at 5)))
    (if (pair? vias)
        (let* ((field (car vias))
               (vs (- (field-value-start field) base))
               (n (- (field-value-end field) base vs)))
          (bytevector-copy! bytes vs out at n)
          (bytevector-u8-set! out (+ at n) 44)          ; ", "
          (bytevector-u8-set! out (+ at n 1) 32)
          (lp (cdr vias) (+ at n 2)))
        (let ((n (bytevector-length via)))
          (bytevector-copy! via 0 out at n)
          (bytevector-u8-set! out (+ at n) 13)
          (bytevector-u8-set! out (+ at n 1) 10)))))

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

(define scratch #f)   ; a bytevector of copy-limit bytes, not in use; or #f

(define (pass-response request upstream head bytes base reader buffer-limit via-text)
  ;; -> (values response body) to send the client; VIA-TEXT: version ->
  ;; the text of Via's element, or #f
  (let* ((code (response-head-code head))
         (length (response-head-content-length head))
         (head? (eq? (request-method request) 'HEAD))
         (drop (if (bodiless-code? code) '(content-length) '()))
         (via (and via-text (via-text (response-head-version head) #t))))
    (define (response) (client-response head bytes base drop via))
    (cond
     ((and length (<= length copy-limit) (not head?) (not (bodiless-code? code))
           (suspendable?))
      ;; Read into a buffer kept from one answer to the next: the
      ;; server copies the body as the handler returns (see
      ;; `make-raw-response''s BODY-LENGTH), and a body of fresh bytes
      ;; per answer was most of a proxied page's cost in the collector
      ;; (bench/instructions-proxy).  Only handlers the loop runs share
      ;; it, on its thread; one that waits while it reads holds it, and
      ;; the next reads into a buffer of its own.
      (let ((buffer (or scratch (make-bytevector copy-limit))))
        (set! scratch #f)
        (let ((n (read-reader-rest-into! reader buffer)))
          (set! scratch buffer)
          (values (client-response head bytes base drop via n) buffer))))
     ((or (bodiless-code? code) (and head? length))
      (close-reader! reader)
      (values (response) #f))
     (head?
      ;; no length to tell: the head of a chunked answer, without a body
      (close-reader! reader)
      (values (response) (lambda (port) #t)))
     ((and length (<= length buffer-limit))
      (values (response) (read-reader-rest reader)))
     (else
      ;; passed on as it comes: with its Content-Length when it has one
      ;; (the bytes go as they are), else chunked by the server
      (values (response) (stream-body request upstream reader))))))

;;;
;;; The handler
;;;

(define (make-via-text via)
  ;; -> (version bytes?) -> the element of Via for VIA and VERSION,
  ;; "1.1 plucky", a string or (BYTES?) a bytevector; those of 1.1 and
  ;; 1.0 made once
  (let* ((text (lambda (version) (string-append (version-text version) " " via)))
         (text-1.1 (text '(1 . 1)))
         (text-1.0 (text '(1 . 0)))
         (bytes-1.1 (latin-1-bytes text-1.1))
         (bytes-1.0 (latin-1-bytes text-1.0)))
    (lambda (version bytes?)
      (cond
       ((equal? version '(1 . 1)) (if bytes? bytes-1.1 text-1.1))
       ((equal? version '(1 . 0)) (if bytes? bytes-1.0 text-1.0))
       (bytes? (latin-1-bytes (text version)))
       (else (text version))))))

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
         (pick (make-picker upstreams))
         (via-text (and via (make-via-text via))))
    (when (null? upstreams)
      (error "proxy-handler: no upstream"))
    (set-pool-limits! #:max-idle pool-max-idle)
    (lambda (request body . _)
      (cond
       ((eq? (request-method request) 'CONNECT) (not-proxied "CONNECT"))
       ((websocket-upgrade? request) (not-proxied "a WebSocket upgrade"))
       (else
        (let ((payload (upstream-body request body))
              (method (request-method request))
              ;; now: after a wait, the loop serves another connection
              (peer (current-request-peer))
              (scheme (if (eq? (current-request-scheme) 'https) "https" "http")))
          (define (exchange upstream)
            ;; -> (response . body) for the client
            (let-values
                (((head bytes base reader)
                  (http-request-raw
                   (upstream-uri upstream) method
                   (request-bytes request payload upstream strip-prefix preserve-host?
                                  (and via-text (via-text (request-version request) #f))
                                  peer scheme)
                   #:keep-alive? #t
                   #:connect-timeout-ms connect-timeout-ms
                   #:read-timeout-ms read-timeout-ms
                   #:timeout-ms timeout-ms #:max-body max-body
                   #:where (upstream-origin upstream))))
              (call-with-values
                  (lambda ()
                    (pass-response request upstream head bytes base reader buffer-limit
                                   via-text))
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
