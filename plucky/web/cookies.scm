;;; (plucky web cookies) --- reading Cookie, writing Set-Cookie, signing values

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Reading.  A browser sends its cookies in one Cookie header,
;;; "a=1; b=2" (RFC 6265, section 5.4).  plucky hands it to the handler
;;; as Guile does a header Guile does not declare: the raw string, under
;;; the symbol `cookie' in (request-headers request).  `request-cookies'
;;; reads every Cookie header of a request into an alist, leniently, as
;;; browsers read what servers set: pairs split at ";", blanks trimmed,
;;; one pair of double quotes taken off a value, a pair without "=" or
;;; with an empty name skipped, nothing else refused (a value with a
;;; space or a comma, which RFC 6265 forbids servers to set and browsers
;;; send anyway, is kept).  A name sent twice keeps both entries, the
;;; first first: browsers send the cookie of the longer path first, and
;;; `request-cookie' returns it.
;;;
;;; Writing.  `set-cookie' returns a (set-cookie . "name=value; ...")
;;; header to put in a response, strict where reading is lenient: the
;;; name must be an RFC 7230 token and the value RFC 6265 cookie-octets,
;;; else the app is told at once, in one line that names the value.
;;; Defaults are the safe ones: Path=/, HttpOnly (no script can read
;;; it), SameSite=Lax (not sent on a cross-site POST: the first line of
;;; defence against CSRF), and Secure when the request being answered came
;;; over TLS: the parameter `secure-cookies?' is 'auto by default, which
;;; asks (plucky server)'s `current-request-scheme' at each cookie.  Not
;;; always, because over plain HTTP a browser drops a Secure cookie from
;;; any host but localhost.  #t makes every cookie Secure (an app behind
;;; a proxy that ends TLS), #f none.
;;; `delete-cookie' returns the header that makes a browser forget one.
;;;
;;; Signing.  A signed cookie's value is
;;;
;;;     base64url(value) "." expiry "." base64url(HMAC-SHA256)
;;;
;;; where expiry is the second since the epoch after which the value is
;;; refused, whatever the browser does with Max-Age, and the MAC covers
;;; the cookie's name, the encoded value and the expiry: a value cannot
;;; be moved to another cookie, nor its life extended.  The keys are a
;;; list: new values are signed with the first, and a value signed with
;;; any of them is accepted, so a key is rotated by putting a new one in
;;; front and dropping the old one once the longest-lived cookie signed
;;; with it has expired.  MACs are compared in constant time.  Signing
;;; hides nothing: the value is readable by whoever holds the cookie.
;;;
;;; Code:

(define-module (plucky web cookies)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-1)
  #:use-module (web request)
  #:use-module (web response)
  #:use-module (plucky http)
  #:use-module (plucky web crypto)
  ;; what the server tells its handlers: whether the request came over TLS
  #:autoload (plucky server) (current-request-scheme)
  #:export (parse-cookie-header
            request-cookies
            request-cookie
            secure-cookies?
            set-cookie
            delete-cookie
            cookie-name?
            cookie-value?
            sign-cookie-value
            verify-cookie-value
            set-signed-cookie
            request-signed-cookie
            response-with-headers))


;;;
;;; Reading
;;;

(define (cookie-blank? c) (or (char=? c #\space) (char=? c #\tab)))

(define (unquote-value value)
  (let ((n (string-length value)))
    (if (and (>= n 2) (char=? #\" (string-ref value 0)) (char=? #\" (string-ref value (- n 1))))
        (substring value 1 (- n 1))
        value)))

(define (parse-cookie-header text)
  "Return the cookies of TEXT, a Cookie header's value, as an alist
((name . value) ...) of strings in the order sent.  Lenient, as browsers
are: blanks around names and values are trimmed, one pair of double
quotes is taken off a value, and a piece without \"=\" or with an empty
name is skipped."
  (filter-map (lambda (piece)
                (let ((equals (string-index piece #\=)))
                  (and equals
                       (let ((name (string-trim-both (substring piece 0 equals) cookie-blank?))
                             (value (string-trim-both (substring piece (+ equals 1)) cookie-blank?)))
                         (and (not (string-null? name))
                              (cons name (unquote-value value)))))))
              (string-split text #\;)))

(define (request-cookies request)
  "Return the cookies REQUEST carries, from all its Cookie headers, as an
alist ((name . value) ...) in the order sent (see `parse-cookie-header')."
  (append-map (lambda (header)
                (if (and (eq? (car header) 'cookie) (string? (cdr header)))
                    (parse-cookie-header (cdr header))
                    '()))
              (request-headers request)))

(define (request-cookie request name)
  "Return the value of the first cookie called NAME (a string) that
REQUEST carries, or #f."
  (let loop ((headers (request-headers request)))
    (cond ((null? headers) #f)
          ((and (eq? (caar headers) 'cookie) (string? (cdar headers))
                (assoc name (parse-cookie-header (cdar headers))))
           => cdr)
          (else (loop (cdr headers))))))


;;;
;;; Writing
;;;

(define secure-cookies?
  ;; Whether `set-cookie' adds Secure unless told otherwise: #t, #f, or
  ;; 'auto, when the request being answered came over TLS.
  (make-parameter 'auto))

(define (secure-now? secure?)
  ;; -> SECURE?, 'auto resolved for the request being answered
  (if (eq? secure? 'auto)
      (eq? (current-request-scheme) 'https)
      (and secure? #t)))

(define (token-char? c)
  ;; RFC 7230 tchar
  (or (char<=? #\a c #\z) (char<=? #\A c #\Z) (char<=? #\0 c #\9)
      (string-index "!#$%&'*+-.^_`|~" c)))

(define (cookie-octet? c)
  ;; RFC 6265 cookie-octet: visible ASCII but DQUOTE, comma, semicolon
  ;; and backslash
  (let ((n (char->integer c)))
    (and (<= #x21 n #x7e) (not (memv n '(#x22 #x2c #x3b #x5c))))))

(define (cookie-name? name)
  "Return #t if NAME is a string a cookie can be called: an RFC 7230
token (letters, digits and !#$%&'*+-.^_`|~)."
  (and (string? name) (not (string-null? name)) (string-every token-char? name)))

(define (cookie-value? value)
  "Return #t if VALUE is a string a cookie can hold as it is: RFC 6265
cookie-octets (visible ASCII but double quote, comma, semicolon and
backslash), possibly empty."
  (and (string? value) (string-every cookie-octet? value)))

(define (attribute-value? value)
  ;; Path and Domain: any visible ASCII or space but ";"
  (and (string? value)
       (string-every (lambda (c) (and (char<=? #\space c #\~) (not (char=? c #\;)))) value)))

;; Browsers keep at most 4096 bytes of name and value (RFC 6265,
;; section 6.1); a longer cookie would be dropped without a word.
(define max-cookie-bytes 4096)

(define* (set-cookie name value #:key (path "/") (domain #f) (max-age #f) (expires #f)
                     (http-only? #t) (secure? (secure-cookies?)) (same-site 'lax))
  "Return a Set-Cookie header, (set-cookie . \"NAME=VALUE; ...\"), to add
to a response's headers.  NAME must be a token and VALUE cookie-octets
(see `cookie-name?', `cookie-value?'); encode anything else first (as
`set-signed-cookie' does).  PATH defaults to \"/\"; DOMAIN (#f: this host
only); MAX-AGE in seconds and EXPIRES in seconds since the epoch (both
#f: the cookie goes when the browser closes); HTTP-ONLY? (default #t);
SECURE? (default: the parameter `secure-cookies?', 'auto: Secure when the
request being answered came over TLS); SAME-SITE 'lax (the default),
'strict, 'none (which needs SECURE?) or #f (none said).  Raise an error
naming the offending argument if one is not valid."
  (unless (cookie-name? name)
    (error "cookie name is not a token (letters, digits, !#$%&'*+-.^_`|~):" name))
  (unless (cookie-value? value)
    (error "cookie value has a character a cookie cannot hold (space, \", comma, ;, \\, or not ASCII):"
           value))
  (when (> (+ (string-length name) (string-length value)) max-cookie-bytes)
    (error "cookie is longer than the 4096 bytes browsers keep:" name))
  (when (and path (not (attribute-value? path)))
    (error "cookie path has a character it cannot hold:" path))
  (when (and domain (not (and (attribute-value? domain) (string-every token-char? domain))))
    (error "cookie domain is not a host name:" domain))
  (unless (or (not max-age) (and (exact-integer? max-age) (>= max-age 0)))
    (error "cookie max-age is not a number of seconds:" max-age))
  (unless (or (not expires) (real? expires))
    (error "cookie expires is not a time in seconds since the epoch:" expires))
  (unless (memq same-site '(lax strict none #f))
    (error "cookie same-site is not lax, strict, none or #f:" same-site))
  (when (and (eq? same-site 'none) (not (secure-now? secure?)))
    (error "cookie same-site none needs secure? (browsers refuse it otherwise):" name))
  (cons 'set-cookie
        (string-append
         name "=" value
         (if path (string-append "; Path=" path) "")
         (if domain (string-append "; Domain=" domain) "")
         (if max-age (string-append "; Max-Age=" (number->string max-age)) "")
         (if expires
             (string-append "; Expires=" (seconds->imf-fixdate (inexact->exact (floor expires))))
             "")
         (if (secure-now? secure?) "; Secure" "")
         (if http-only? "; HttpOnly" "")
         (case same-site
           ((lax) "; SameSite=Lax")
           ((strict) "; SameSite=Strict")
           ((none) "; SameSite=None")
           (else "")))))

(define* (delete-cookie name #:key (path "/") (domain #f) (secure? (secure-cookies?)))
  "Return a Set-Cookie header that makes a browser forget the cookie
NAME of PATH and DOMAIN (which must be those it was set with): an empty
value that expired at the epoch."
  (set-cookie name "" #:path path #:domain domain #:max-age 0 #:expires 0
              #:secure? secure?))

(define (response-with-headers response headers)
  "Return RESPONSE, a handler's response (a (web response) record, a raw
response, or a header alist), with HEADERS, an alist,
added after its own."
  (cond
   ((raw-response? response) (raw-response-with-headers response headers))
   ((response? response)
    (build-response #:version (response-version response)
                      #:code (response-code response)
                      #:reason-phrase (response-reason-phrase response)
                      #:headers (append (response-headers response) headers)
                      #:port (response-port response)))
   (else (append response headers))))


;;;
;;; Signing
;;;

;; HMAC-SHA256's key should hold as many random bytes as its output.
(define min-key-bytes 32)

(define (check-keys keys)
  ;; -> KEYS (a key or a list of them) as a non-empty list of bytevectors
  (let ((keys (map ->bytevector (if (list? keys) keys (list keys)))))
    (when (null? keys)
      (error "no cookie signing key given"))
    (for-each (lambda (key)
                (when (< (bytevector-length key) min-key-bytes)
                  ;; The key itself is a secret: say its length only.
                  (error "cookie signing key is shorter than 32 bytes; its length:"
                         (bytevector-length key))))
              keys)
    keys))

(define (signed-text name encoded expiry)
  (string-append name "=" encoded "." expiry))

(define* (sign-cookie-value keys name value #:key (max-age (* 30 24 3600)) (now (current-time)))
  "Return the signed form of VALUE (a string, any characters) for the
cookie NAME: base64url(VALUE).EXPIRY.MAC, EXPIRY being NOW plus MAX-AGE
seconds and MAC the HMAC-SHA256, under the first of KEYS, of NAME, the
encoded value and EXPIRY.  KEYS is a key or a list of keys, each a
bytevector or string of at least 32 bytes."
  (unless (cookie-name? name)
    (error "cookie name is not a token (letters, digits, !#$%&'*+-.^_`|~):" name))
  (unless (string? value)
    (error "signed cookie value is not a string:" value))
  (unless (and (exact-integer? max-age) (> max-age 0))
    (error "signed cookie max-age is not a positive number of seconds:" max-age))
  (let* ((key (car (check-keys keys)))
         (encoded (bytes->base64url (string->utf8 value)))
         (expiry (number->string (+ now max-age))))
    (string-append encoded "." expiry "."
                   (bytes->base64url (hmac-sha256 key (signed-text name encoded expiry))))))

(define* (verify-cookie-value keys name signed #:key (now (current-time)))
  "Return the value that SIGNED, the signed form of a value for the
cookie NAME (see `sign-cookie-value'), carries, if its MAC is right under
one of KEYS and its expiry is after NOW; else #f.  A value that is not
well-formed, is not UTF-8 or has expired is #f too."
  (let ((parts (and (string? signed) (string-split signed #\.))))
    (and parts (= 3 (length parts))
         (let ((encoded (car parts))
               (expiry (and (not (string-null? (cadr parts)))
                            (string-every (lambda (c) (char<=? #\0 c #\9)) (cadr parts))
                            (string->number (cadr parts) 10)))
               (mac (base64url->bytes (caddr parts))))
           (and expiry (< now expiry)
                mac
                (let ((text (string->utf8 (signed-text name encoded (cadr parts)))))
                  ;; Every key is tried, the right one too, so the time
                  ;; taken does not say which key matched.
                  (fold (lambda (key ok?)
                          (or (bytevector=?/constant-time (hmac-sha256 key text) mac) ok?))
                        #f (check-keys keys)))
                (let ((bytes (base64url->bytes encoded)))
                  (and bytes (false-if-exception (utf8->string bytes)))))))))

(define* (set-signed-cookie keys name value #:key (max-age (* 30 24 3600)) (path "/")
                            (domain #f) (http-only? #t) (secure? (secure-cookies?))
                            (same-site 'lax) (now (current-time)))
  "Return a Set-Cookie header for the cookie NAME holding VALUE (a
string) signed with the first of KEYS (see `sign-cookie-value'), valid
for MAX-AGE seconds both in the browser and in the signature.  The other
keywords are those of `set-cookie'."
  (set-cookie name (sign-cookie-value keys name value #:max-age max-age #:now now)
              #:path path #:domain domain #:max-age max-age #:http-only? http-only?
              #:secure? secure? #:same-site same-site))

(define* (request-signed-cookie request keys name #:key (now (current-time)))
  "Return the value of the signed cookie NAME in REQUEST if one of the
cookies of that name REQUEST carries verifies under KEYS and has not
expired (see `verify-cookie-value'), else #f."
  (any (lambda (cookie)
         (and (string=? (car cookie) name)
              (verify-cookie-value keys name (cdr cookie) #:now now)))
       (request-cookies request)))

;;; (plucky web cookies) ends here
