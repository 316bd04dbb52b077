;;; (plucky http response) --- a handler's answer, made into bytes

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A handler returns (values response body) exactly as under Guile's
;;; (web server): RESPONSE is a (web response) record or the shorthand, an
;;; alist of headers; BODY is #f, a string, a bytevector, or a procedure
;;; that writes to a port.  `write-response!' gives that pair the meaning
;;; Guile's `sanitize-response' gives it — strings encoded in the declared
;;; charset (utf-8 added to Content-Type when none is declared), procedure
;;; bodies collected, Content-Length added or checked, no body for HEAD —
;;; but never builds a response record: it writes the status line, the
;;; headers and the body straight into an <output> buffer that the server
;;; reuses for every response on every connection.
;;;
;;; Where the time goes, and what is done about it (bench/hello):
;;;  - status lines are precomputed bytes (plucky http status);
;;;  - the Date line is remade once a second (plucky http date);
;;;  - a header is rendered with Guile's own header writer once per value
;;;    object and the bytes are cached, keyed by `eq?' on the value: a
;;;    handler's '((content-type . (text/plain))) is the same literal on
;;;    every call, so the second response copies 40 cached bytes instead
;;;    of opening a string port.  The cache is bounded and cleared when
;;;    full, so freshly consed values cost a miss, never memory.  (A
;;;    handler that mutates a header value in place after returning it
;;;    would see the old rendering; Guile's literals are immutable anyway.)
;;;  - bodies up to `copy-limit' bytes are copied after the head so that
;;;    head and body leave in one write(2); a larger body is returned to
;;;    the caller, which sends head and body together with writev(2).
;;;
;;; Code:

(define-module (plucky http response)
  #:use-module (rnrs bytevectors)
  #:use-module (ice-9 iconv)
  #:use-module ((ice-9 binary-ports) #:select (open-bytevector-input-port))
  #:use-module ((srfi srfi-1) #:select (filter-map))
  #:use-module (srfi srfi-9)
  #:use-module ((srfi srfi-9 gnu) #:select (set-fields))
  #:use-module (web http)
  #:use-module ((web uri) #:select (build-uri-reference))
  #:use-module (web request)
  ;; Not (web response): see `response-record?'.
  #:use-module (plucky http status)
  #:use-module (plucky http date)
  #:use-module ((plucky http bytes) #:select (bytevector-copy-range
                                             bytevector-concatenate))
  #:export (make-output
            output?
            output-bytes
            output-address
            set-output-address-procedure!
            output-fill
            set-output-fill!
            output-reset!
            output-put-bytes!
            output-put-slice!
            output-reserve!
            write-response!
            write-response-head!
            write-error-response!
            streamed-response?
            response-record?
            response-record-code
            response-record-headers
            answer-headers
            answer-code
            write-streamed-head!
            copy-limit
            make-raw-response
            raw-response?
            raw-response-code
            raw-response-fields
            raw-response-closing
            raw-response->response
            raw-response-with-headers
            answer-body))

;;;
;;; Output buffers
;;;

;; What other modules read of an output buffer is exported as
;; procedures, which Guile copies into the modules that call them.
(define-record-type <output>
  (%make-output bytes address fill)
  %output?
  (bytes %output-bytes set-output-bytes!)       ; bytevector, grown by doubling
  (address %output-address set-output-address!) ; integer address of BYTES, for write(2)
  (fill %output-fill %set-output-fill!))        ; bytes used so far

(define (output? x)
  "Return #t if X is an output buffer."
  (%output? x))

(define (output-bytes out)
  "Return the bytevector that holds OUT's bytes (replaced as OUT grows)."
  (%output-bytes out))

(define (output-address out)
  "Return the address of `output-bytes' of OUT, for write(2)."
  (%output-address out))

(define (output-fill out)
  "Return how many bytes of OUT are used."
  (%output-fill out))

(define (set-output-fill! out fill)
  "Set how many bytes of OUT are used to FILL."
  (%set-output-fill! out fill))

;; The address of an output's bytes is for the server, which hands them
;; to write(2) without making a pointer object per write
;; (bench/instructions).  This layer calls no C (STYLE.md): the server
;; gives the procedure that finds a bytevector's address, as it loads
;; (plucky server output); until then an output's address is #f.
(define address-of (lambda (bv) #f))

(define (set-output-address-procedure! procedure)
  "Have output buffers made from now on record the address of their
bytes as (PROCEDURE bytevector) returns it.  Return nothing useful."
  (set! address-of procedure))

;; An output buffer starts small and doubles when an answer needs more
;; (`output-reserve!'), once per buffer.  Guile zeroes a new bytevector,
;; so a 64 KB buffer would take 16 page faults before a worker's first
;; answer where 4 KB takes one (perf stat -e page-faults over `plucky
;; serve apps/hello.scm --workers 1' to its first 200: bench/RESULTS.md).
(define* (make-output #:optional (size 4096))
  "Return an empty output buffer of SIZE bytes that grows as needed."
  (let ((bv (make-bytevector size)))
    (%make-output bv (address-of bv) 0)))

(define (output-reset! out)
  "Empty OUT, keeping its storage."
  (set-output-fill! out 0))

(define (output-reserve! out n)
  "Make room for N more bytes in OUT; return the index of its bytes at
which they may be written (then `set-output-fill!')."
  (let ((fill (output-fill out))
        (bv (output-bytes out)))
    (when (> (+ fill n) (bytevector-length bv))
      (let ((new (make-bytevector (max (* 2 (bytevector-length bv)) (+ fill n)))))
        (bytevector-copy! bv 0 new 0 fill)
        (set-output-bytes! out new)
        (set-output-address! out (address-of new))))
    fill))

(define (output-put-bytes! out bv)
  "Append the bytevector BV to OUT."
  (let* ((n (bytevector-length bv))
         (fill (output-reserve! out n)))
    (bytevector-copy! bv 0 (output-bytes out) fill n)
    (set-output-fill! out (+ fill n))))

(define (output-put-slice! out bv start count)
  "Append COUNT bytes of BV from START to OUT."
  (let ((fill (output-reserve! out count)))
    (bytevector-copy! bv start (output-bytes out) fill count)
    (set-output-fill! out (+ fill count))))

(define (output-put-decimal! out n)
  ;; Digits of the non-negative integer N, without making a string.
  (let* ((digits (let lp ((k n) (d 1)) (if (< k 10) d (lp (quotient k 10) (+ d 1)))))
         (fill (output-reserve! out digits))
         (bv (output-bytes out)))
    (let lp ((k n) (i (+ fill digits -1)))
      (bytevector-u8-set! bv i (+ 48 (remainder k 10)))
      (when (>= k 10) (lp (quotient k 10) (- i 1))))
    (set-output-fill! out (+ fill digits))))

;;;
;;; Response records
;;;

;; A handler answers with a (web response) record or, shorter, a header
;; alist.  (web response) is loaded only once something needs it (an
;; app that builds responses imports it; an error answer builds one):
;; plucky serve's start-up saves its load (bench/startup-modules) for
;; apps that answer with alists.  A value
;; can only be a response record once the module is loaded, so until
;; then the test is a look at the module table, and only for structs.

(define web-response-loaded? #f)        ; #t once (web response) is seen loaded

(define (response-module-loaded?)
  ;; -> #t if (web response) has been loaded; loads nothing
  (or web-response-loaded?
      (let ((module (resolve-module '(web response) #f #:ensure #f)))
        (and module
             (module-public-interface module)
             (begin
               (set! web-response-loaded? #t)
               #t)))))

(define (response-record? value)
  "Return #t if VALUE is a (web response) record."
  (and (struct? value)
       (response-module-loaded?)
       ((@ (web response) response?) value)))

(define (response-record-code response)
  "Return the status code of RESPONSE, a (web response) record."
  ((@ (web response) response-code) response))

(define (response-record-headers response)
  "Return the header alist of RESPONSE, a (web response) record."
  ((@ (web response) response-headers) response))

;; code -> Guile's standard reason phrase for it, or #f until first needed
(define guile-reasons (make-vector 600 #f))

(define (guile-reason code)
  ;; -> the phrase `response-reason-phrase' answers for a response of
  ;; CODE that names none (the table behind it is not exported)
  (define (reason)
    ((@ (web response) response-reason-phrase)
     ((@ (web response) build-response) #:code code)))
  (if (and (exact-integer? code) (<= 0 code 599))
      (or (vector-ref guile-reasons code)
          (let ((phrase (reason)))
            (vector-set! guile-reasons code phrase)
            phrase))
      (reason)))

(define (response-record-reason-phrase response code)
  ;; -> the reason phrase RESPONSE names, or #f when it names none or
  ;; Guile's standard one: then plucky writes its standard status line
  (let ((phrase ((@ (web response) response-reason-phrase) response)))
    (and (not (string=? phrase (guile-reason code)))
         phrase)))

;;; Raw responses.  A reverse proxy (plucky web proxy) has the upstream's
;;; head as bytes: rebuilding it as a (web response) record, header by
;;; parsed header, and rendering each header again was most of the cost
;;; of a proxied request (bench/instructions-proxy).  A raw response
;;; carries the field lines as bytes, to be written as they are; the
;;; server still writes the status line (its own version), Date unless
;;; the fields hold one, and Connection, as for any answer.  Its body is
;;; #f, a bytevector, or a procedure (a streamed answer); the framing
;;; headers are the handler's to get right, as the fields are not read.

(define-record-type <raw-response>
  (%make-raw-response code reason fields date? close? body-length headers)
  raw-response?
  (code raw-response-code)
  (reason raw-response-reason)          ; string, or #f for the standard one
  ;; bytevector: field lines, each ending in CRLF, without Connection
  ;; and, for a streamed body, without Transfer-Encoding
  (fields raw-response-fields)
  (date? raw-response-date?)            ; the fields hold a Date
  (close? raw-response-close?)          ; close the connection after it
  (body-length raw-response-body-length) ; #f, or the body's bytes: see below
  (headers %raw-response-headers set-raw-response-headers!)) ; #f until asked

(define* (make-raw-response code fields #:key (reason #f) (date? #f) (close? #f)
                            (body-length #f))
  "Return a handler's response whose header fields are the bytes FIELDS,
written as they are: field lines each ending in CRLF, with neither the
status line nor the empty line, nor Connection (the server writes its
own), nor Transfer-Encoding when the body is a procedure (the server
frames a streamed body).  CODE is the status code; REASON the reason
phrase (#f: the standard one); DATE? says that FIELDS hold a Date (else
the server adds one); CLOSE? asks for the connection to close after.
The body that goes with it must agree with the Content-Length of
FIELDS, which are not checked.  BODY-LENGTH, at most `copy-limit', says
that only the first BODY-LENGTH bytes of the bytevector body are the
body: they are copied into the answer as the handler returns, before
its thread runs other code, so that a handler may reuse that
bytevector for its next answer (plucky web proxy)."
  (unless (and (exact-integer? code) (<= 100 code 999) (bytevector? fields))
    (error "make-raw-response: a code and a bytevector of field lines" code fields))
  (when (and body-length (not (and (exact-integer? body-length)
                                   (<= 0 body-length copy-limit))))
    (error "make-raw-response: a body-length from 0 to copy-limit" body-length))
  (%make-raw-response code reason fields date? close? body-length #f))

(define (answer-body response body)
  "Return BODY, returned by a handler with RESPONSE, as the body alone:
for a raw response with a BODY-LENGTH (see `make-raw-response'), a
fresh bytevector of that many bytes of BODY; otherwise BODY.  For
middleware that reads a body."
  (if (and (raw-response? response) (raw-response-body-length response)
           (bytevector? body))
      (bytevector-copy-range body 0 (raw-response-body-length response))
      body))

(define (raw-response-closing response)
  "Return the raw response RESPONSE that closes the connection after it."
  (%make-raw-response (raw-response-code response) (raw-response-reason response)
                      (raw-response-fields response) (raw-response-date? response)
                      #t (raw-response-body-length response) #f))

(define (answer-headers response)
  "Return the header alist of RESPONSE, a handler's answer: a (web
response) record, a raw response (its fields parsed by Guile's parsers)
or the alist itself."
  (cond
   ((response-record? response) (response-record-headers response))
   ((raw-response? response) (raw-response-headers response))
   (else response)))

(define (answer-code response)
  "Return the status code of RESPONSE, a handler's answer: a (web
response) record's or a raw response's code, or 200 for a header alist."
  (cond
   ((response-record? response) (response-record-code response))
   ((raw-response? response) (raw-response-code response))
   (else 200)))

(define (raw-response-headers response)
  ;; -> the fields as Guile's `read-headers' reads them, made once: for
  ;; what looks at an answer's headers (middleware, a stream's charset)
  (or (%raw-response-headers response)
      (let ((headers
             (let ((port (open-bytevector-input-port
                          (bytevector-concatenate (list (raw-response-fields response) crlf)))))
               (set-port-encoding! port "ISO-8859-1")
               (read-headers port))))
        (set-raw-response-headers! response headers)
        headers)))

(define (raw-response-with-headers response headers)
  "Return the raw response RESPONSE with HEADERS, an alist, written by
Guile's writers after its own fields, but Connection, which asks for a
close if it lists close (its body as it was: for middleware that adds
headers)."
  (let ((added (filter-map (lambda (h)
                             ;; Connection: the server's, from CLOSE?
                             (and (not (eq? (car h) 'connection))
                                  (render-header (car h) (cdr h))))
                           headers)))
    (%make-raw-response (raw-response-code response) (raw-response-reason response)
                        (bytevector-concatenate (cons (raw-response-fields response) added))
                        (or (raw-response-date? response) (and (assq 'date headers) #t))
                        (or (raw-response-close? response)
                            (let ((c (assq-ref headers 'connection)))
                              (and (pair? c) (memq 'close c) #t)))
                        (raw-response-body-length response) #f)))

(define (raw-response->response response)
  "Return the raw response RESPONSE as a (web response) record, its
headers parsed by Guile's parsers."
  ((@ (web response) build-response)
   #:code (raw-response-code response)
   #:reason-phrase (or (raw-response-reason response)
                       (guile-reason (raw-response-code response)))
   #:headers (append (raw-response-headers response)
                     (if (raw-response-close? response) '((connection close)) '()))
   #:validate-headers? #f))

(define (put-raw-head! out request response framing close?)
  ;; The head of the raw RESPONSE: status line, its fields, Date, the
  ;; framing line of a streamed body (FRAMING chunked), Connection, the
  ;; empty line.  -> whether to close after.
  (let ((version (request-version request))
        (close? (or close? (raw-response-close? response))))
    (output-put-bytes! out (status-line version (raw-response-code response)
                                        (raw-response-reason response)))
    (output-put-bytes! out (raw-response-fields response))
    (unless (raw-response-date? response)
      (output-put-bytes! out (date-line)))
    (when (eq? framing 'chunked)
      (output-put-bytes! out transfer-encoding-chunked-line))
    (cond
     (close? (output-put-bytes! out connection-close-line))
     ((eqv? (cdr version) 0) (output-put-bytes! out connection-keep-alive-line)))
    (output-put-bytes! out crlf)
    close?))

(define (write-raw-response! out request response body close?)
  ;; `write-response!' of a raw RESPONSE
  (let* ((code (raw-response-code response))
         (length (cond ((not (bytevector? body))
                        (if body
                            (error "a raw response's body is #f or a bytevector" body)
                            0))
                       ((raw-response-body-length response))
                       (else (bytevector-length body)))))
    (when (and (must-not-include-body? code) (> length 0))
      (error "response with this status code must not include body" code))
    (let ((close? (put-raw-head! out request response #f close?)))
      (cond
       ((or (eq? (request-method request) 'HEAD) (zero? length))
        (values close? #f))
       ((<= length copy-limit)
        (output-put-slice! out body 0 length)
        (values close? #f))
       (else
        (values close? body))))))

;;;
;;; Headers
;;;

(define crlf #vu8(13 10))
(define content-length-prefix (string->utf8 "Content-Length: "))
(define connection-close-line (string->utf8 "Connection: close\r\n"))
(define connection-keep-alive-line (string->utf8 "Connection: keep-alive\r\n"))

(define (string->latin-1 str)
  ;; -> STR as (string->bytevector str "ISO-8859-1" 'substitute) encodes
  ;; it: a byte per character, "?" for one above U+00FF, without the
  ;; port (ice-9 iconv) would open.
  (let* ((n (string-length str))
         (bv (make-bytevector n)))
    (let loop ((i 0))
      (if (= i n)
          bv
          (let ((c (char->integer (string-ref str i))))
            (bytevector-u8-set! bv i (if (< c 256) c 63))
            (loop (+ i 1)))))))

(define (media-type-text type)
  ;; -> the text Guile's Content-Type writer makes of TYPE when it has
  ;; the usual shape, (text/html (charset . "utf-8") …); else #f, and
  ;; Guile's writer has it.  Written here so that an answer with only
  ;; this header and those plucky writes itself (the common case: a
  ;; type, Content-Length, Date) opens no string port.
  (and (pair? type)
       (symbol? (car type))
       (let loop ((parameters (cdr type))
                  (parts (list (symbol->string (car type)))))
         (cond
          ((null? parameters) (string-concatenate-reverse parts))
          ((and (pair? parameters)
                (pair? (car parameters))
                (symbol? (caar parameters))
                (string? (cdar parameters)))
           (loop (cdr parameters)
                 (cons* (cdar parameters) "=" (symbol->string (caar parameters))
                        ";" parts)))
          (else #f)))))

(define (render-header name value)
  ;; -> bytevector "Name: value\r\n", or raise if the value would smuggle
  ;; a line break into the head (header injection).
  (let* ((type? (eq? name 'content-type))
         (text (or (and type? (media-type-text value))
                   (call-with-output-string
                     (lambda (port)
                       ((header-writer name) value port))))))
    (when (or (string-index text #\return) (string-index text #\newline))
      (error "response header value contains CR or LF" name value))
    (string->latin-1
     (string-append (if type? "Content-Type" (header->string name))
                    ": " text "\r\n"))))

(define cache-limit 512)

(define-record-type <header-cache>
  (make-header-cache table count)
  header-cache?
  (table header-cache-table)                    ; hashq: value -> (name . bytes)
  (count header-cache-count set-header-cache-count!))

(define (new-header-cache) (make-header-cache (make-hash-table 64) 0))

(define plain-cache (new-header-cache))
;; Content-Type values for textual bodies, with the charset plucky adds.
(define charset-cache (new-header-cache))

(define (cached-header-bytes cache name value render)
  (let ((hit (hashq-ref (header-cache-table cache) value)))
    (if (and hit (eq? (car hit) name))
        (cdr hit)
        (let ((bytes (render name value)))
          (when (>= (header-cache-count cache) cache-limit)
            (hash-clear! (header-cache-table cache))
            (set-header-cache-count! cache 0))
          (hashq-set! (header-cache-table cache) value (cons name bytes))
          (set-header-cache-count! cache (+ 1 (header-cache-count cache)))
          bytes))))

(define (put-header! out name value)
  (output-put-bytes! out (cached-header-bytes plain-cache name value render-header)))

(define (with-charset type charset)
  ;; (text/plain) -> (text/plain (charset . "utf-8"))
  (if (assq 'charset (cdr type))
      type
      (cons (car type) (append (cdr type) (list (cons 'charset charset))))))

(define (put-textual-content-type! out type)
  (output-put-bytes!
   out
   (cached-header-bytes charset-cache 'content-type type
                        (lambda (name type)
                          (render-header name (with-charset type "utf-8"))))))

;;;
;;; Bodies
;;;

(define copy-limit
  ;; Bodies up to this size are copied behind the head (one write);
  ;; larger ones go out by writev without a copy.  A copy of 64 KiB costs
  ;; less than the second iovec's bookkeeping for small pages.
  65536)

(define default-text-type '(text/plain))

(define (declared-charset type)
  (let ((charset (assq-ref (cdr type) 'charset)))
    (and charset (if (symbol? charset) (symbol->string charset) charset))))

(define (utf-8-name? charset)
  (or (string-ci=? charset "utf-8") (string-ci=? charset "utf8")))

(define (encode-text text charset)
  (if (or (not charset) (utf-8-name? charset))
      (string->utf8 text)
      (string->bytevector text charset)))

(define (body->bytevector body charset)
  ;; -> bytevector; strings and procedures encoded as Guile's
  ;; sanitize-response does.
  (cond
   ((bytevector? body) body)
   ((not body) #f)
   ((string? body) (encode-text body charset))
   ((procedure? body)
    (call-with-encoded-output-string (or charset "utf-8") body))
   (else (error "unexpected body type" body))))

(define (must-not-include-body? code)
  (or (<= 100 code 199) (= code 204) (= code 304)))

;;;
;;; The writer
;;;

(define* (write-response! out request response body close? #:optional (cache? #t))
  "Append to OUT the bytes of the answer (RESPONSE, BODY) to REQUEST, as
a handler returned them.  CLOSE? is true when the connection will be
closed after this response whatever it says.  Return two values: whether
the connection must close after it, and #f or a bytevector too large to
copy that must be sent right after OUT's contents.  Raise an error for a
response Guile's `sanitize-response' would refuse (a Content-Length that
does not match the body, a body on a 204 or 304, a bad body type).
CACHE? #f renders every header afresh instead of using the caches, which
only the loop's thread may use (see `write-streamed-head!').  A raw
response (`make-raw-response') has its fields written as they are."
  (if (raw-response? response)
      (write-raw-response! out request response body close?)
      (write-guile-response! out request response body close? cache?)))

(define (write-guile-response! out request response body close? cache?)
  ;; `write-response!' of a record or a header alist
  (let* ((headers (answer-headers response))
         (code (answer-code response))
         (head? (eq? (request-method request) 'HEAD))
         (textual? (or (string? body) (procedure? body)))
         (type (and textual?
                    (let ((type (assq-ref headers 'content-type)))
                      (or type default-text-type))))
         (payload (body->bytevector body (and type (declared-charset type))))
         (length (if payload (bytevector-length payload) 0))
         (bodiless? (must-not-include-body? code)))
    (when (and bodiless? (> length 0))
      (error "response with this status code must not include body" code))
    (let ((close? (if cache?
                      (put-head/memo! out request response headers code textual?
                                      length head? payload bodiless? close?)
                      (put-head! out request response headers code textual?
                                 length head? payload bodiless? close? #f #f))))
      (cond
       ((or head? (not payload) (zero? length))
        (values close? #f))
       ((<= length copy-limit)
        (output-put-bytes! out payload)
        (values close? #f))
       (else
        (values close? payload))))))

(define (write-response-head! out request response length close?)
  "Append to OUT the head of the answer RESPONSE to REQUEST whose body
of LENGTH bytes the caller sends itself (a file, with sendfile(2)), or
that has none (a 101 before the connection changes protocol).  CLOSE?
is as for `write-response!'.  Return whether the connection must close
after the answer.  Raise an error for a declared Content-Length that is
not LENGTH, or a body on a status that must not have one."
  (let ((code (answer-code response)))
    (when (and (must-not-include-body? code) (> length 0))
      (error "response with this status code must not include body" code))
    (if (raw-response? response)
        (put-raw-head! out request response #f close?)
        (put-head/memo! out request response (answer-headers response) code #f length
                        (eq? (request-method request) 'HEAD) #f
                        (must-not-include-body? code) close?))))

;;; The heads of answers given again.  An app that keeps a response and
;;; answers with it again and again (a page cache: apps/blog's, the
;;; news site's) would have the same head rendered each time, header by
;;; header.  The second time a response is seen (the same object, with a
;;; request of the same version, a body of the same length and kind, and
;;; the same close? and HEAD), its head is kept as bytes; from the third
;;; on it is copied, the Date line put in afresh (bench/blog, the
;;; index).  A response seen once costs a slot's look and store: no
;;; allocation for the apps that make a response per request.  A slot
;;; per hash of the object (`hashq'), the newest wins; the validity of a
;;; kept head was checked when it was rendered, by the same arguments.
;;; Only the loop's thread writes with the caches (see `write-response!').

(define-record-type <kept-head>
  (make-kept-head response version textual? length head? close-in
                  before-date after-date close?)
  kept-head?
  (response kept-head-response)
  (version kept-head-version)           ; the request's, a pair
  (textual? kept-head-textual?)
  (length kept-head-length)
  (head? kept-head-head?)
  (close-in kept-head-close-in)         ; the close? it was rendered with
  (before-date kept-head-before-date)   ; bytes
  (after-date kept-head-after-date)     ; bytes, or #f when no Date line
  (close? kept-head-close?))            ; what put-head! returned

(define kept-head-slots 64)
(define kept-heads (make-vector kept-head-slots #f))

;; Where put-head! wrote the Date line in the output (its fill offset),
;; or #f when the response had a Date of its own.
(define date-at #f)

(define (put-head/memo! out request response headers code textual? length head?
                        payload bodiless? close?)
  ;; put-head! for a body of LENGTH bytes, through the kept heads
  (let* ((slot (hashq response kept-head-slots))
         (kept (vector-ref kept-heads slot))
         (version (request-version request)))
    (cond
     ((and (kept-head? kept)
           (eq? (kept-head-response kept) response)
           (eqv? (kept-head-length kept) length)
           (eq? (kept-head-head? kept) head?)
           (eq? (kept-head-textual? kept) textual?)
           (eq? (kept-head-close-in kept) close?)
           (let ((v (kept-head-version kept)))
             (and (eqv? (car v) (car version)) (eqv? (cdr v) (cdr version)))))
      (output-put-bytes! out (kept-head-before-date kept))
      (let ((after (kept-head-after-date kept)))
        (when after
          (output-put-bytes! out (date-line))
          (output-put-bytes! out after)))
      (kept-head-close? kept))
     ((or (eq? kept response)
          (and (kept-head? kept) (eq? (kept-head-response kept) response)))
      ;; seen before: render, and keep
      (let* ((start (output-fill out))
             (close-after (put-head! out request response headers code textual?
                                     length head? payload bodiless? close? #t #f))
             (end (output-fill out))
             (bytes (output-bytes out))
             (cut (or date-at end))
             (date-end (and date-at (+ date-at (bytevector-length (date-line))))))
        (vector-set! kept-heads slot
                     (make-kept-head response (cons (car version) (cdr version))
                                     textual? length head? close?
                                     (bytevector-copy-range bytes start cut)
                                     (and date-end (bytevector-copy-range bytes date-end end))
                                     close-after))
        close-after))
     (else
      (vector-set! kept-heads slot response)
      (put-head! out request response headers code textual? length head?
                 payload bodiless? close? #t #f)))))

(define (put-head! out request response headers code textual? length head?
                   payload bodiless? close? cache? streamed)
  ;; The status line and the headers, up to and with the empty line.
  ;; STREAMED is #f for a body of LENGTH bytes, else how a body sent as it
  ;; is produced is framed: 'length (the handler declared its
  ;; Content-Length), 'chunked or 'close.  -> whether to close after.
  (define (header! name value)
    (if cache?
        (put-header! out name value)
        (output-put-bytes! out (render-header name value))))
  (define (type! type)
    (if cache?
        (put-textual-content-type! out type)
        (output-put-bytes! out (render-header 'content-type (with-charset type "utf-8")))))
  (let ((version (request-version request))
        (all-headers headers))
    (output-put-bytes!
     out (status-line version code
                      (and (response-record? response)
                           (response-record-reason-phrase response code))))
    (let lp ((headers headers) (length-seen? #f) (date-seen? #f)
             (type-seen? #f) (close? close?))
      (if (pair? headers)
          (let* ((header (car headers))
                 (name (car header))
                 (value (cdr header)))
            (case name
              ((content-length)
               ;; A HEAD answer may declare the length of the body it
               ;; does not send: with no body, one its caller sends (a
               ;; file), or an empty one (what Guile's run-server makes
               ;; of the #f its own `sanitize-response' gives for HEAD).
               (unless (or streamed (eqv? value length)
                           (and head? (or (not payload) (zero? length))))
                 (error "bad content-length" value length))
               (header! name value)
               (lp (cdr headers) #t date-seen? type-seen? close?))
              ((content-type)
               (if textual? (type! value) (header! name value))
               (lp (cdr headers) length-seen? date-seen? #t close?))
              ((date)
               (header! name value)
               (lp (cdr headers) length-seen? #t type-seen? close?))
              ((connection)
               ;; Written once, below, where the server's own decision
               ;; is known.
               (lp (cdr headers) length-seen? date-seen? type-seen?
                   (or close? (and (pair? value) (memq 'close value) #t))))
              ((transfer-encoding)
               ;; Framing is the server's: written below when streamed.
               (if streamed
                   (lp (cdr headers) length-seen? date-seen? type-seen? close?)
                   (begin
                     (header! name value)
                     (lp (cdr headers) length-seen? date-seen? type-seen? close?))))
              (else
               (header! name value)
               (lp (cdr headers) length-seen? date-seen? type-seen? close?))))
          (let ((close? (or close? (eq? streamed 'close))))
            (when (and textual? (not type-seen?))
              (type! default-text-type))
            (cond
             ((eq? streamed 'chunked)
              (unless bodiless?
                (output-put-bytes! out transfer-encoding-chunked-line)))
             ((or streamed length-seen? bodiless?) #t)
             (else
              (output-put-bytes! out content-length-prefix)
              (output-put-decimal! out length)
              (output-put-bytes! out crlf)))
            ;; DATE-AT only for `put-head/memo!', on the loop's thread:
            ;; the other threads write with CACHE? #f
            (if date-seen?
                (when cache? (set! date-at #f))
                (begin
                  (when cache? (set! date-at (output-fill out)))
                  (output-put-bytes! out (date-line))))
            ;; ALL-HEADERS: HEADERS is the loop's, empty by now.
            (let ((connection (assq-ref all-headers 'connection)))
              (cond
               (close?
                (output-put-bytes! out connection-close-line))
               (connection
                (header! 'connection connection))
               ((eqv? (cdr version) 0)
                (output-put-bytes! out connection-keep-alive-line))))
            (output-put-bytes! out crlf)
            close?)))))

(define transfer-encoding-chunked-line (string->utf8 "Transfer-Encoding: chunked\r\n"))

;;;
;;; Streamed answers
;;;

(define (streamed-response? response body)
  "True when the answer (RESPONSE, BODY) a handler returned asks to be
sent as BODY produces it rather than collected first: BODY is a
procedure and RESPONSE (a record or a header alist) declares
Transfer-Encoding: chunked or Content-Type text/event-stream, or is a
raw response (`make-raw-response').  Any other procedure body is
collected, as Guile's `sanitize-response' does, so that the answer gets
a Content-Length."
  (and (procedure? body)
       (or (raw-response? response)
           (let ((headers (answer-headers response)))
         (or (assq 'transfer-encoding headers)
             (let ((type (assq-ref headers 'content-type)))
               (and (pair? type) (eq? (car type) 'text/event-stream))))))
       #t))

(define (write-streamed-head! out request response)
  "Append to OUT the head of a streamed answer (see `streamed-response?')
to REQUEST.  Return two values: the framing of the body that follows,
'length (RESPONSE declares a Content-Length: send that many bytes as
they are), 'chunked (HTTP/1.1: each write is a chunk, then the last
chunk), 'close (HTTP/1.0: the body ends when the connection closes) or
'none (HEAD, 204, 304: no body at all), and whether to close the
connection after it.  Headers are rendered afresh, without the caches,
so that any thread may call it."
  (let* ((headers (answer-headers response))
         (code (answer-code response))
         (head? (eq? (request-method request) 'HEAD))
         (bodiless? (must-not-include-body? code))
         (framing (cond
                   ((assq 'content-length headers) 'length)
                   ((equal? (request-version request) '(1 . 0)) 'close)
                   (else 'chunked))))
    (let ((close? (if (raw-response? response)
                      (put-raw-head! out request response
                                     (and (not bodiless?) framing) (eq? framing 'close))
                      (put-head! out request response headers code #t 0 head? #f
                                 bodiless? #f #f framing))))
      (values (if (or head? bodiless?) 'none framing) close?))))

(define plain-text '((content-type . (text/plain))))

;; What `write-error-response!' copies, with the method and version in,
;; for `write-response!', which reads nothing else of it; made again if
;; an app reloaded (web request) since (see "Records through (web
;; uri)'s ..." in (plucky http parse)).
(define error-request #f)

(define (current-error-request)
  (unless (request? error-request)
    (set! error-request
          (build-request (build-uri-reference #:path "/") #:version '(1 . 0))))
  error-request)

(define* (write-error-response! out version code #:optional (message #f)
                                (method 'GET) (cache? #t))
  "Append to OUT a complete plain-text response with status CODE for
HTTP VERSION, whose body is MESSAGE (default: the reason phrase), that
closes the connection; for METHOD HEAD, the head alone.  Used for
requests that never reach a handler.  CACHE? as for `write-response!'."
  (let ((request (set-fields (current-error-request)
                             ((request-method) method)
                             ((request-version)
                              (if (equal? version '(1 . 0)) '(1 . 0) '(1 . 1))))))
    (write-response! out request
                     ((@ (web response) build-response) #:code code #:headers plain-text
                                     #:version version)
                     (string-append (or message (status-reason code)) "\n")
                     #t cache?)))

;;; (plucky http response) ends here
