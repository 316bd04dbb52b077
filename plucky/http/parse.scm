;;; (plucky http parse) --- the request-head parser: bytes in, a (web request) out

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The connection reads into a bytevector and calls
;;;
;;;   (parse-request-head bv start end [limits]) -> (values result index)
;;;
;;; on the bytes [START, END) that have arrived so far.  RESULT is
;;;
;;;   - a genuine (web request) record, the same value Guile's
;;;     `read-request' would give (method symbol, URI record, version
;;;     pair, headers alist in the order received, meta '(), port #f),
;;;     and INDEX the offset just past the blank line that ends the head:
;;;     the body, or the next pipelined request, starts there;
;;;   - the symbol `incomplete' (INDEX #f): a valid prefix, read more and
;;;     call again from START (like picohttpparser's -2; the answer costs
;;;     a rescan, never an allocation);
;;;   - an &http-error from (plucky http error), returned and not raised
;;;     (INDEX #f): its status (400, 414, 431, 501, 505), a short reason
;;;     and the byte offset, counted from index 0 of BV, where it was seen.
;;;
;;; How a request flows through this file:
;;;
;;;   1. `head-may-be-complete?' looks at the last bytes, or failing that
;;;      scans for the blank line.  Without one the head cannot be
;;;      complete, and the parser runs in validate mode: every check and
;;;      limit, no allocation, so a slow client costs nothing but the
;;;      scan, and bad bytes are refused as soon as they arrive.
;;;   2. `parse-head' skips empty lines (RFC 9112 §2.2) and reads the
;;;      request line: method, target, version.
;;;   3. `parse-fields' reads one field line after another: the name (a
;;;      known name is found by its length, compared 4 or 8 bytes at a
;;;      time, and gives its interned symbol), the value (OWS trimmed,
;;;      checked 8 bytes at a time), then the framing rules (Host,
;;;      Content-Length, Transfer-Encoding) are applied as each field
;;;      arrives, so a smuggling attempt is refused as soon as the
;;;      offending field is in.
;;;   4. At the blank line the values of the other known headers go
;;;      through Guile's own parsers, all inside one `catch'; a value
;;;      Guile rejects stays the raw string.  Values a browser repeats on
;;;      every request (Accept, Accept-Encoding, ...) are remembered and
;;;      handed out as fresh copies instead (see `cached-value').
;;;
;;; Limits count bytes as they arrive: leading empty lines count toward
;;; the request line, and a 414 or 431 is answered as soon as the limit
;;; is passed, before the line or the head ends.
;;;
;;; Strict where a wrong guess is a security hole (request smuggling,
;;; cache poisoning): bare CR, obs-fold, whitespace before the colon,
;;; control characters, bytes over #x7F in the target (RFC 3986 has
;;; them percent-encoded), an invalid or repeated Host, an invalid or
;;; conflicting Content-Length, Transfer-Encoding with Content-Length or
;;; in HTTP/1.0 or not ending in chunked (400), a coding other than
;;; chunked (501: the body would reach the handler still encoded).
;;; Lenient where real clients need it: bare LF line ends, obs-text
;;; (bytes #x80-#xFF, decoded as latin-1 as Guile does) in values, the
;;; visible ASCII bytes RFC 3986 leaves out (\" < > \\ ^ ` { | }) in
;;; targets, which browsers send raw in queries (the WHATWG URL query
;;; percent-encode set leaves ` { | } ^ out) and nginx accepts, and
;;; header values Guile's parsers reject (`Accept: text/html;q=abc', odd
;;; dates).
;;;
;;; Deliberate differences from Guile's `read-request':
;;;
;;;   - A value Guile's header parser rejects is kept as the raw string
;;;     instead of failing the whole request (Guile's server answers 400,
;;;     which breaks real browsers).  Host, Content-Length and
;;;     Transfer-Encoding are the exceptions: those are refused.
;;;   - Any token is a method; an unknown one becomes `string->symbol' of
;;;     it (Guile knows nine methods and refuses the rest).
;;;   - The asterisk-form target `*' (OPTIONS only) gives a URI whose
;;;     path is "*"; Guile's `parse-request-uri' returns #f there and the
;;;     request then fails to build.
;;;   - CONNECT takes the authority-form `host:port' and gives a URI
;;;     with just host and port (Guile would read `host' as a scheme).
;;;     Other methods must use origin-form or absolute-form.
;;;   - The version must be exactly HTTP/DIGIT.DIGIT; only 1.0 and 1.1
;;;     are served, any other well-formed version is a 505.
;;;   - HTTP/1.1 without exactly one Host is refused; a Host that is not
;;;     uri-host [":" port] (port at most 65535) is refused.
;;;   - A Content-Length that is a list of equal values ("5, 5") or is
;;;     repeated with the same value is accepted (RFC 9110 §8.6) and
;;;     appears once in the headers, as an integer.
;;;   - Header lines starting with whitespace (obs-fold) are refused,
;;;     not joined.
;;;   - Strings that may be shared: a URI path of exactly "/" is one
;;;     shared (immutable) string, as is an empty field value; the
;;;     target "/" alone is one shared URI record.
;;;
;;; One module, though long: the byte classes, the word-at-a-time
;;; scanners and the other per-byte helpers are `define-inline's and
;;; `eval-when (expand)' macros ((plucky sys inline)), private to this
;;; file and gone once it is compiled, so the compiler inlines them into
;;; the loops of the request line, the field lines and the known-header
;;; match, which all use them.  Split into modules, they would have to
;;; be exported as `define-inlinable's and macros, which every start then
;;; loads (bench/startup-modules, row (plucky http parse)), or be called
;;; as procedures per byte or word (bench/parse.scm, chromium).  The
;;; cache of header values (`cached-value') is small and compares bytes
;;; with the same helpers.
;;;
;;; Code:

(define-module (plucky http parse)
  #:use-module (rnrs bytevectors)
  #:use-module ((srfi srfi-9 gnu) #:select (set-fields))
  #:use-module (web http)
  #:use-module (web uri)
  #:use-module (web request)
  #:use-module (plucky http error)
  #:export (parse-request-head
            make-parse-limits
            parse-limits?
            parse-limits-max-request-line
            parse-limits-max-header-bytes
            parse-limits-max-header-count
            %default-parse-limits
            request-keep-alive?
            parse-response-head
            response-head?
            response-head-version
            response-head-code
            response-head-reason-start
            response-head-reason-end
            response-head-fields
            response-head-content-length
            response-head-transfer-coding
            response-head-connection
            field-symbol
            field-name
            field-name-start
            field-name-end
            field-value-start
            field-value-end
            field-line-end))

;; Macros only, needed while this file is compiled: see there.
(eval-when (expand)
  (use-modules (plucky http bytes)
               (plucky sys inline)))


;;;
;;; Macros for this file only
;;;

;; `plucky serve' loads this module on every start, and loading runs in
;; Guile's VM, before any JIT.  A toplevel macro costs there: Guile keeps
;; it in the module, so loading the .go builds every syntax object its
;; transformer holds, then defines it; `define-inlinable' makes a macro
;; and a procedure.  None is
;; needed once this file is compiled, so each macro here is defined in
;; (eval-when (expand) ...): it exists while the file is compiled, and
;; not in the .go.  A call of a `define-inline' procedure ((plucky sys
;; inline)) expands into the code `define-inlinable' gave, so the
;; request path is unchanged.
;; Tables are computed by the compiler, not at load: `define-literal',
;; `define-known-header-table'.  Both shrink the module's load and its
;; .go (bench/startup-modules, row (plucky http parse), callgrind, JIT
;; off); parsing costs the same or less (bench/parse-instructions: less
;; to mark in each collection).

(eval-when (expand)
  (define-syntax-rule (define-constants (name value) ...)
    ;; Each NAME expands to the literal VALUE, in this file only.
    (eval-when (expand)
      (define-syntax name (identifier-syntax value)) ...))

  (define-syntax-rule (define-literal name expression)
    ;; NAME is the value of EXPRESSION computed when this file is compiled
    ;; (the macros above it in scope).  That value must be plain data
    ;; (numbers, strings, bytevectors, pairs, vectors): it is a constant
    ;; of the .go, read-only, and loading it costs nothing.
    (define name
      (let-syntax ((value (lambda (x)
                            (with-syntax ((datum (datum->syntax x expression)))
                              #'(quote datum)))))
        (value)))))


;;;
;;; Limits
;;;

;; A core record type, not SRFI-9: Guile 3.0.8's SRFI-9 makes `guild
;; compile -W3' warn about the procedures behind its inlined accessors.
;; The parser reads the fields with struct-ref (see below).
(define <parse-limits>
  (make-record-type '<parse-limits>
                    '(max-request-line    ; bytes of the request line, without its line end
                      max-header-bytes    ; bytes from the first field line through the blank line
                      max-header-count))) ; number of field lines

(define %make-parse-limits (record-constructor <parse-limits>))
(define %parse-limits? (record-predicate <parse-limits>))
(define %max-request-line (record-accessor <parse-limits> 'max-request-line))
(define %max-header-bytes (record-accessor <parse-limits> 'max-header-bytes))
(define %max-header-count (record-accessor <parse-limits> 'max-header-count))

(define (parse-limits? obj)
  "Return #t when OBJ is a limits record made by `make-parse-limits'."
  (%parse-limits? obj))

(define (parse-limits-max-request-line limits)
  "Return the most bytes LIMITS allow in a request line, not counting its
line end (empty lines before it count)."
  (%max-request-line limits))

(define (parse-limits-max-header-bytes limits)
  "Return the most bytes LIMITS allow in the header section, from the
first field line through the blank line, line ends included."
  (%max-header-bytes limits))

(define (parse-limits-max-header-count limits)
  "Return the most field lines LIMITS allow in a request head."
  (%max-header-count limits))

;; The parser checks %parse-limits? once at entry, then reads the fields
;; directly: a record-accessor call costs a closure call and a type test
;; each (it showed in the profile of the wrk request).
(define-inline (limits-max-request-line limits) (struct-ref limits 0))
(define-inline (limits-max-header-bytes limits) (struct-ref limits 1))
(define-inline (limits-max-header-count limits) (struct-ref limits 2))

(define (limit-value? n)
  ;; Capped so that every index stays a small fixnum (see `index-hint').
  (and (exact-integer? n) (<= 1 n #x10000000)))

(define* (make-parse-limits #:key (max-request-line 8192)
                            (max-header-bytes 32768)
                            (max-header-count 100))
  "Return the limits `parse-request-head' enforces: a request line of
more than MAX-REQUEST-LINE bytes (not counting its line end) is a 414 (a
400 when its method alone reaches the limit); a
header section of more than MAX-HEADER-BYTES bytes (from the first field
line through the blank line) or of more than MAX-HEADER-COUNT field lines
is a 431."
  (unless (and (limit-value? max-request-line)
               (limit-value? max-header-bytes)
               (limit-value? max-header-count))
    (error "make-parse-limits: limits must be integers in [1, 2^28]"
           max-request-line max-header-bytes max-header-count))
  (%make-parse-limits max-request-line max-header-bytes max-header-count))

(define %default-parse-limits
  ;; Return the default limits: 8192-byte request line, 32768 bytes and
  ;; 100 lines of header fields.
  (make-parse-limits))


;;;
;;; Bytes
;;;

(eval-when (expand)
  (define-syntax define-byte-constants
    ;; (define-byte-constants (LF #\newline) ...): LF expands to the literal 10.
    (lambda (x)
      (syntax-case x ()
        ((_ (name char) ...)
         (with-syntax (((byte ...) (map (lambda (c) (char->integer (syntax->datum c)))
                                        #'(char ...))))
           #'(define-constants (name byte) ...)))))))

(define-byte-constants
  (HTAB #\tab) (LF #\newline) (CR #\return) (SP #\space)
  (COLON #\:) (COMMA #\,) (QUESTION #\?) (HASH #\#) (SLASH #\/)
  (STAR #\*) (LBRACKET #\[) (RBRACKET #\]) (ZERO #\0))

(eval-when (expand)
  (define (byte-comparison x fold-case?)
    ;; The expansion of (bytes=? bv start "literal"): BV's bytes from
    ;; START compared with the literal's, byte by byte, with no
    ;; allocation; FOLD-CASE? for a lower-case literal whose letters
    ;; match either case (bit #x20 set before comparing).
    (syntax-case x ()
      ((_ bv start literal)
       (string? (syntax->datum #'literal))
       (let ((chars (string->list (syntax->datum #'literal))))
         (with-syntax (((test ...)
                        (map (lambda (c offset)
                               (with-syntax ((byte (char->integer c)) (offset offset))
                                 (if (and fold-case? (char-alphabetic? c))
                                     #'(= (logior (bytevector-u8-ref bv (+ start offset)) #x20)
                                          byte)
                                     #'(= (bytevector-u8-ref bv (+ start offset)) byte))))
                             chars (iota (length chars)))))
           #'(and test ...))))))

  (define-syntax bytes=?
    (lambda (x) (byte-comparison x #f)))

  (define-syntax bytes=?/ci
    ;; Like bytes=? for a lower-case LITERAL, ignoring the case of letters.
    (lambda (x) (byte-comparison x #t)))

  (define-syntax native-word
    ;; (native-word "HTTP/1.1") expands to the integer whose native-endian
    ;; bytes are those 4 or 8 ASCII characters, to compare with
    ;; bytevector-u32/u64-native-ref of the input.  A literal, not a
    ;; variable: "HTTP/1.1" is above the fixnum range, and comparing with a
    ;; bignum variable boxes every word read.
    (lambda (x)
      (syntax-case x ()
        ((_ str)
         (string? (syntax->datum #'str))
         (let ((bv (string->utf8 (syntax->datum #'str))))
           (datum->syntax
            #'str
            (case (bytevector-length bv)
              ((4) (bytevector-u32-native-ref bv 0))
              ((8) (bytevector-u64-native-ref bv 0))))))))))

;;; Character classes: one 256-entry table, one bit per class.
;;;
;;; The table is a constant of the .go, so loading does not build it
;;; (bench/startup-modules, (plucky http parse)); parsing costs the same
;;; (bench/parse-instructions).

(define-constants
  (CLASS-TCHAR 1)                       ; token characters (RFC 9110 §5.6.2)
  (CLASS-HOST 2)                        ; reg-name: unreserved, sub-delims, %
  (CLASS-DIGIT 4)
  (CLASS-HEX 8))

(define-literal *byte-classes*
  (let ((table (make-bytevector 256 0)))
    (define (add! class chars)
      (for-each (lambda (c)
                  (let ((b (char->integer c)))
                    (bytevector-u8-set! table b
                                        (logior class (bytevector-u8-ref table b)))))
                chars))
    (define (range from to)
      (map integer->char (iota (+ 1 (- (char->integer to) (char->integer from)))
                               (char->integer from))))
    (define alpha (append (range #\a #\z) (range #\A #\Z)))
    (define digit (range #\0 #\9))
    (add! CLASS-TCHAR (append alpha digit (string->list "!#$%&'*+-.^_`|~")))
    (add! CLASS-HOST (append alpha digit (string->list "-._~!$&'()*+,;=%")))
    (add! CLASS-DIGIT digit)
    (add! CLASS-HEX (append digit (range #\a #\f) (range #\A #\F)))
    table))

(define-inline (byte-class? b class)
  (not (eqv? 0 (logand class (bytevector-u8-ref *byte-classes* b)))))
(define-inline (tchar? b) (byte-class? b CLASS-TCHAR))
(define-inline (digit? b) (and (<= 48 b) (<= b 57)))
(define-inline (ows? b) (or (eqv? b SP) (eqv? b HTAB)))
(define-inline (ascii-letter? b)
  (let ((b (logior b #x20))) (and (<= 97 b) (<= b 122))))

;;; Eight bytes at a time.
;;;
;;; Each macro takes a 64-bit word X and returns a word with bit 7 of a
;;; byte lane set exactly when that byte is "special", all other bits
;;; clear.  Lanes are masked to 7 bits before any addition so that no
;;; sum reaches #x100: lanes never carry into each other, the answer is
;;; exact per byte, and the compiler keeps everything in untagged u64
;;; registers.  A word scan is several times cheaper a byte than a byte
;;; loop on long values, and bench/parse.scm's chromium request is mostly
;;; long values.

(eval-when (expand)
  (define-syntax-rule (lanes-high x)      ; byte >= #x80
    (logand x #x8080808080808080))
  (define-syntax-rule (lanes-below x complement) ; low 7 bits < N; COMPLEMENT = (#x80 - N) in each lane
    (logxor (logand (+ (logand x #x7f7f7f7f7f7f7f7f) complement) #x8080808080808080)
            #x8080808080808080))
  (define-syntax-rule (lanes-del x)       ; low 7 bits = #x7f
    (logand (+ (logand x #x7f7f7f7f7f7f7f7f) #x0101010101010101) #x8080808080808080))
  (define-syntax-rule (word-value-special x)
    (logior (lanes-high x) (lanes-below x #x6060606060606060) (lanes-del x)))
  ;; In a request target: also SP, "?" and "#".
  (define-syntax-rule (word-target-special x)
    (logior (lanes-high x) (lanes-below x #x5f5f5f5f5f5f5f5f) (lanes-del x)
            (lanes-equal x #x3f3f3f3f3f3f3f3f) (lanes-equal x #x2323232323232323)))
  ;; In a field name: controls, SP, DEL, obs-text and ":".
  (define-syntax-rule (word-name-special x)
    (logior (lanes-high x) (lanes-below x #x5f5f5f5f5f5f5f5f) (lanes-del x)
            (lanes-equal x #x3a3a3a3a3a3a3a3a)))
  (define-syntax-rule (word-lf x)
    (lanes-equal x #x0a0a0a0a0a0a0a0a)))

(define-inline (value-special? b) (or (< b #x20) (<= #x7f b)))
(define-inline (target-special? b)
  (or (<= b #x20) (<= #x7f b) (eqv? b QUESTION) (eqv? b HASH)))
(define-inline (name-special? b) (or (<= b #x20) (<= #x7f b) (eqv? b COLON)))
(define-inline (lf? b) (eqv? b LF))

;; The scanners are inlined into the loops that call them: a procedure
;; call and the two index hints at its entry cost more than scanning a
;; typical header name (bench/parse.scm, chromium, the validation
;; alone).  Each is also a procedure, for tests/http/parse.scm
;; to try at every alignment: (define (NAME ...)) binds it at run time,
;; and the macro defined after it takes over the name in the rest of this
;; file as it is compiled.
(eval-when (expand)
  (define-syntax-rule (scan bv start stop word-special byte-special?)
    (let ((stop (index-hint stop)))
      (let words ((i (index-hint start)))
        (define (bytes i)
          (if (and (< i stop) (not (byte-special? (bytevector-u8-ref bv i))))
              (bytes (+ i 1))
              i))
        (if (<= (+ i 8) stop)
            (let ((special (word-special (bytevector-u64-native-ref bv i))))
              (cond
               ((= 0 special) (words (+ i 8)))
               (*little-endian?* (+ i (lowest-lane special)))
               (else (bytes i))))
            (bytes i)))))

  (define-syntax-rule (define-scanner (name bv start stop) word-special byte-special?)
    (begin
      (define (name bv start stop)
        (scan bv start stop word-special byte-special?))
      (define-inline (name bv start stop)
        (scan bv start stop word-special byte-special?)))))

;; Each returns the index of the first special byte in [START, STOP), or STOP.
(define-scanner (skip-value-plain bv start stop) word-value-special value-special?)
(define-scanner (skip-target-plain bv start stop) word-target-special target-special?)
(define-scanner (skip-name-plain bv start stop) word-name-special name-special?)
(define-scanner (find-lf bv start stop) word-lf lf?)

(define (skip-ows/loop bv i end)
  (if (and (< i end) (ows? (u8 bv i))) (skip-ows/loop bv (+ i 1) end) i))

(define-inline (skip-ows bv i end)
  ;; -> first index in [I, END) that is not SP or HTAB, or END.
  ;; Fast path: "name: value", one space.
  (cond
   ((or (>= i end) (not (ows? (u8 bv i)))) i)
   ((or (>= (+ i 1) end) (not (ows? (u8 bv (+ i 1))))) (+ i 1))
   (else (skip-ows/loop bv (+ i 2) end))))

(define (trim-ows-right/loop bv start end)
  (if (and (< start end) (ows? (u8 bv (- end 1))))
      (trim-ows-right/loop bv start (- end 1))
      end))

(define-inline (trim-ows-right bv start end)
  ;; -> END moved left over SP and HTAB, not past START
  (if (and (< start end) (ows? (u8 bv (- end 1))))
      (trim-ows-right/loop bv start (- end 1))
      end))

(define (first-non-tchar bv start end)
  ;; -> first index in [START, END) holding a non-token byte, or END
  (let ((end (index-hint end)))
    (let loop ((i (index-hint start)))
      (if (and (< i end) (tchar? (u8 bv i))) (loop (+ i 1)) i))))

;;; Strings, for what ends up in the request and nothing else.

(define (bytes->string bv start end high?)
  "Return a fresh string of the bytes [START, END) of BV decoded as
latin-1, as Guile decodes a request (the empty string is shared).
HIGH? says whether any byte is #x80 or above."
  ;; ASCII: copy the slice and let utf8->string (C) decode it, several
  ;; times cheaper than string-set! per char, which takes a lock per call.
  (let ((n (- end start)))
    (cond
     ((eqv? n 0) "")
     ((not high?)
      (let ((slice (make-bytevector n)))
        (bytevector-copy! bv start slice 0 n)
        (utf8->string slice)))
     (else
      (let ((str (make-string n)))
        (let loop ((i 0))
          (when (< i n)
            (string-set! str i (integer->char (u8 bv (+ start i))))
            (loop (+ i 1))))
        str)))))

(define (bytes->bytevector bv start end)
  ;; -> a fresh bytevector of the bytes [START, END)
  (let ((slice (make-bytevector (- end start))))
    (bytevector-copy! bv start slice 0 (- end start))
    slice))

(define (lowercase-symbol bv start end)
  ;; -> the symbol of the token [START, END) lower-cased, as string->header
  (let* ((n (- end start))
         (slice (make-bytevector n)))
    (let loop ((i 0))
      (when (< i n)
        (let ((b (u8 bv (+ start i))))
          (bytevector-u8-set! slice i (if (and (<= 65 b) (<= b 90)) (+ b 32) b))
          (loop (+ i 1)))))
    (string->symbol (utf8->string slice))))


;;;
;;; Known header names
;;;

;; A vector, not a record: see <parse-limits>.
;; #(symbol kind parser pattern fold cache)
;;   symbol   the interned name, e.g. 'user-agent
;;   kind     how the value is handled: raw (a string), guile (Guile's
;;            parser, lenient), host, content-length, transfer-encoding,
;;            connection
;;   parser   string -> value, Guile's own once looked up, or #f
;;   pattern  bytevector: the name in lower case
;;   fold     bytevector: #x20 under each letter, else 0
;;   cache    #f, or the recent values: see `cached-value'
(define-inline (make-known-header symbol kind pattern fold cache)
  ;; the parser slot starts empty: see `known-header-parser'
  (vector symbol kind #f pattern fold cache))
(define-inline (known-header-symbol header) (vector-ref header 0))
(define-inline (known-header-kind header) (vector-ref header 1))
(define (known-header-parser header)
  ;; Guile's parser, looked up the first time a value needs it.
  (or (vector-ref header 2)
      (let ((parser (header-parser (known-header-symbol header))))
        (vector-set! header 2 parser)
        parser)))
(define-inline (known-header-pattern header) (vector-ref header 3))
(define-inline (known-header-fold header) (vector-ref header 4))
(define-inline (known-header-cache header) (vector-ref header 5))
(define-inline (known-header-length header)
  (bytevector-length (known-header-pattern header)))

;; The names and the two lists after them are read when this file is
;; compiled, by `define-known-header-table'; the names also stay in the
;; module, for tests/http/parse.scm.
(eval-when (expand load eval)
  (define *known-header-names*
    ;; Every header Guile 3.0 declares in (web http), so their values
    ;; parse as Guile's server parses them, then common request headers
    ;; Guile does not declare, whose values stay strings as in Guile:
    ;; recognising them saves lower-casing and interning the name.
    '("accept" "accept-charset" "accept-encoding" "accept-language"
      "accept-ranges" "age" "allow" "authorization" "cache-control"
      "connection" "content-disposition" "content-encoding"
      "content-language" "content-length" "content-location" "content-md5"
      "content-range" "content-type" "date" "etag" "expect" "expires" "from"
      "host" "if-match" "if-modified-since" "if-none-match" "if-range"
      "if-unmodified-since" "last-modified" "location" "max-forwards"
      "pragma" "proxy-authenticate" "proxy-authorization" "range" "referer"
      "retry-after" "server" "te" "trailer" "transfer-encoding" "upgrade"
      "user-agent" "vary" "via" "warning" "www-authenticate"
      ;; not declared by Guile
      "cookie" "origin" "dnt" "priority" "keep-alive" "forwarded"
      "upgrade-insecure-requests" "x-requested-with" "x-forwarded-for"
      "x-forwarded-host" "x-forwarded-proto" "x-real-ip"
      "sec-fetch-site" "sec-fetch-mode" "sec-fetch-user" "sec-fetch-dest"
      "sec-ch-ua" "sec-ch-ua-mobile" "sec-ch-ua-platform"
      "sec-websocket-key" "sec-websocket-version" "sec-websocket-extensions"
      "sec-websocket-protocol")))

(eval-when (expand)
  (define *opaque-headers*
    ;; Declared by Guile with the identity parser: no need to call it.
    '(user-agent from server content-md5))

  (define *cached-headers*
    ;; Headers a client repeats byte for byte on every request and whose
    ;; Guile parser is slow (Accept; bench/parse.scm): their parsed
    ;; values are remembered, see `cached-value'.  Only values made of
    ;; pairs, strings, symbols and numbers, so a copy is cheap and
    ;; complete; never credentials.
    '(accept accept-charset accept-encoding accept-language cache-control
      pragma te upgrade content-type content-encoding content-language
      expect vary via trailer allow accept-ranges))

  (define *seeded-values*
    ;; Values of cached headers that the cache holds from the start,
    ;; parsed by Guile's parser when this file is compiled: curl, wget,
    ;; ab, python-requests and fetch() send Accept: */*, and with this
    ;; their requests need no parser.  They are evicted like any other
    ;; value.
    '((accept "*/*"))))

(define-constants
  (*cache-ways* 4)                      ; values remembered per header
  (*longest-cached-value* 512))         ; bytes

;; Built at load, from the names, the table would cost every start
;; (bench/startup-modules, (plucky http parse)).  So the compiler works
;; out each header's symbol, kind, pattern and fold, and loading runs
;; straight-line code that puts them in fresh vectors with what only run time has: an empty cache (a constant
;; vector would be read-only) and the slot of Guile's parser for the
;; header, which `known-header-parser' fills at first need.
(eval-when (expand)
  (define-syntax define-known-header-table
    ;; (define-known-header-table TABLE LONGEST) defines TABLE, the vector
    ;; length -> (<known-header> ...) in the order of *known-header-names*,
    ;; and LONGEST, a constant: the length of the longest name.
    (lambda (x)
      (define (known-header-code name)
        (let* ((symbol (string->symbol name))
               (kind (cond
                      ((memq symbol '(host content-length transfer-encoding connection))
                       symbol)
                      ((memq symbol *opaque-headers*) 'raw)
                      ((known-header? symbol) 'guile)
                      (else 'raw))))
          `(make-known-header
            ',symbol ',kind
            ,(string->utf8 name)
            ,(u8-list->bytevector
              (map (lambda (c) (if (ascii-letter? (char->integer c)) #x20 0))
                   (string->list name)))
            ,(and (eq? kind 'guile) (memq symbol *cached-headers*)
                  (seeded-cache-code symbol)))))
      (define (seeded-cache-code symbol)
        ;; a fresh cache holding SYMBOL's *seeded-values*, the next way
        ;; to fill after them
        (let ((seeds (map cadr (filter (lambda (seed) (eq? (car seed) symbol))
                                       *seeded-values*))))
          `(let ((cache (make-vector (+ *cache-ways* 1) #f)))
             ,@(map (lambda (text way)
                      `(vector-set! cache ,way
                                    (cons ,(string->utf8 text)
                                          ',((@ (web http) parse-header) symbol text))))
                    seeds (iota (length seeds)))
             (vector-set! cache *cache-ways* (modulo ,(length seeds) *cache-ways*))
             cache)))
      (syntax-case x ()
        ((_ table longest)
         (let* ((n (apply max (map string-length *known-header-names*)))
                (by-length (make-vector (+ n 1) '())))
           (for-each (lambda (name)
                       (let ((k (string-length name)))
                         (vector-set! by-length k (cons (known-header-code name)
                                                        (vector-ref by-length k)))))
                     (reverse *known-header-names*))
           (with-syntax ((n n)
                         (code (datum->syntax
                                x
                                `(vector ,@(map (lambda (headers)
                                                  (if (null? headers)
                                                      ''()
                                                      `(list ,@headers)))
                                                (vector->list by-length))))))
             #'(begin
                 (define-constants (longest n))
                 (define table code)))))))))

(define-known-header-table *known-headers-by-length* *longest-known-name*)

(define-inline (known-header-matches? header bv start n)
  ;; Compare with the name of HEADER, ignoring the case of letters only:
  ;; (byte | fold) = pattern holds for a letter in either case and, where
  ;; fold is 0, for the exact byte, so a match also proves every byte is
  ;; a token character.  Words overlap at the end instead of a tail loop.
  (let ((pattern (known-header-pattern header))
        (fold (known-header-fold header))
        (start (index-hint start))
        (n (index-hint n)))
    (cond
     ((<= 8 n)
      (let loop ((offset 0))
        (let ((offset (if (< n (+ offset 8)) (- n 8) offset)))
          (and (= (logior (bytevector-u64-native-ref bv (+ start offset))
                          (bytevector-u64-native-ref fold offset))
                  (bytevector-u64-native-ref pattern offset))
               (or (= (+ offset 8) n) (loop (+ offset 8)))))))
     ((<= 4 n)
      (let ((last (- n 4)))
        (and (= (logior (bytevector-u32-native-ref bv start)
                        (bytevector-u32-native-ref fold 0))
                (bytevector-u32-native-ref pattern 0))
             (= (logior (bytevector-u32-native-ref bv (+ start last))
                        (bytevector-u32-native-ref fold last))
                (bytevector-u32-native-ref pattern last)))))
     (else
      (let loop ((i 0))
        (or (= i n)
            (and (= (logior (u8 bv (+ start i)) (u8 fold i)) (u8 pattern i))
                 (loop (+ i 1)))))))))

(define (match-known-header bv start n)
  ;; -> the <known-header> named by the N bytes at START, or #f
  (and (<= n *longest-known-name*)
       (let loop ((headers (vector-ref *known-headers-by-length* n)))
         (cond
          ((null? headers) #f)
          ((known-header-matches? (car headers) bv start n) (car headers))
          (else (loop (cdr headers)))))))

;;; Recent values of the headers in *cached-headers*.
;;;
;;; A browser sends the same Accept, Accept-Encoding and Accept-Language
;;; with every request, and Guile's parsers for them cost more than the
;;; rest of the head together (bench/parse.scm, chromium, shows the
;;; parse with and without the cache).
;;; So each of those headers remembers its last *cache-ways* values:
;;; (bytes . parsed).  A hit hands out a fresh deep copy of the parsed
;;; value, so a request never shares mutable structure with another.
;;; Slots are replaced whole (one vector-set!), so threads racing on a
;;; slot lose an entry at worst, never see half of one.

(define (bytes-equal? bv start end key)
  ;; -> #t when [START, END) of BV holds the bytes of bytevector KEY
  (let ((n (bytevector-length key)))
    (and (= n (- end start))
         (let loop ((i 0))
           (cond
            ((<= (+ i 8) n)
             (and (= (bytevector-u64-native-ref bv (+ start i))
                     (bytevector-u64-native-ref key i))
                  (loop (+ i 8))))
            ((< i n)
             (and (= (u8 bv (+ start i)) (u8 key i))
                  (loop (+ i 1))))
            (else #t))))))

(define (copy-value value)
  ;; -> VALUE with fresh pairs and strings
  (cond
   ((pair? value) (cons (copy-value (car value)) (copy-value (cdr value))))
   ((string? value) (string-copy value))
   (else value)))

(define (plain-value? value)
  ;; -> #t when copy-value copies all there is to VALUE
  (cond
   ((pair? value) (and (plain-value? (car value)) (plain-value? (cdr value))))
   (else (or (string? value) (symbol? value) (number? value)
             (boolean? value) (null? value)))))

(define (cached-value cache bv start end)
  ;; -> a fresh copy of the value parsed from [START, END), or #f
  (let loop ((way 0))
    (and (< way *cache-ways*)
         (let ((entry (vector-ref cache way)))
           (if (and entry (bytes-equal? bv start end (car entry)))
               (copy-value (cdr entry))
               (loop (+ way 1)))))))

(define (cache-value! cache key value)
  ;; KEY: a bytevector of the raw value; VALUE: what Guile's parser made
  (when (and (<= (bytevector-length key) *longest-cached-value*)
             (plain-value? value))
    (let ((way (or (vector-ref cache *cache-ways*) 0)))
      (vector-set! cache way (cons key (copy-value value)))
      (vector-set! cache *cache-ways* (modulo (+ way 1) *cache-ways*)))))

;;;
;;; Request line
;;;

(define-inline (fail status reason offset)
  (values (make-http-error status reason offset) #f))

(define-inline (incomplete)
  (values 'incomplete #f))

(define (method-symbol bv start end)
  ;; -> the method's symbol: the literal for a known method (no
  ;; allocation), otherwise string->symbol of the token
  (or (case (- end start)
        ((3) (cond ((bytes=? bv start "GET") 'GET)
                   ((bytes=? bv start "PUT") 'PUT)
                   (else #f)))
        ((4) (cond ((bytes=? bv start "POST") 'POST)
                   ((bytes=? bv start "HEAD") 'HEAD)
                   (else #f)))
        ((5) (cond ((bytes=? bv start "PATCH") 'PATCH)
                   ((bytes=? bv start "TRACE") 'TRACE)
                   (else #f)))
        ((6) (and (bytes=? bv start "DELETE") 'DELETE))
        ((7) (cond ((bytes=? bv start "OPTIONS") 'OPTIONS)
                   ((bytes=? bv start "CONNECT") 'CONNECT)
                   (else #f)))
        (else #f))
      (string->symbol (bytes->string bv start end #f))))

(define (version-prefix? bv start end)
  ;; -> #t when [START, END) is a prefix of "HTTP/" DIGIT "." DIGIT
  (let loop ((i start) (k 0))
    (or (= i end)
        (and (let ((b (u8 bv i)))
               (case k
                 ((0) (= b 72)) ((1 2) (= b 84)) ((3) (= b 80)) ((4) (= b SLASH))
                 ((5 7) (digit? b)) ((6) (= b 46))
                 (else #f)))
             (loop (+ i 1) (+ k 1))))))


;;; Records through (web uri)'s and (web request)'s public interfaces.
;;; `build-uri-reference' and `build-request' check again what the
;;; parser has checked, take keywords, and `build-request' refuses a
;;; POST or PUT without a port (plucky reads bodies itself: request-port
;;; is #f).  So one record of each is made by them, and every request's
;;; records are copies of it with the parsed fields put in, by SRFI-9's
;;; functional setter `set-fields' (srfi srfi-9 gnu) on the accessors
;;; the modules export: an inlined copy, as cheap as the constructor
;;; (bench/instructions).  An app may `reload-module' (web uri) or (web
;;; request), which makes its record type anew: the copy is then made
;;; from a record of the new type, as Guile's server would make one.

;; The target "/" (no query, no fragment) is one URI record, made once:
;; a URI has no mutator and its only field that is not #f is the shared
;; immutable "/", so nothing a handler does to one request's URI can show
;; in another's.  Saves a record, a good part of what a hello-world
;; request allocates (bench/instructions).
(define root-uri (build-uri-reference #:path "/"))

;; The request every request copies: meta '(), port #f.
(define template-request (build-request root-uri #:version '(1 . 0)))

(define (current-root-uri)
  ;; -> root-uri, made again if (web uri) was reloaded since
  (unless (uri-reference? root-uri)
    (set! root-uri (build-uri-reference #:path "/")))
  root-uri)

(define (current-template-request)
  ;; -> template-request, made again if (web request) was reloaded since
  (unless (request? template-request)
    (set! template-request (build-request (current-root-uri) #:version '(1 . 0))))
  template-request)

(define-inline (make-path-uri path query fragment)
  ;; -> a relative URI reference with PATH, QUERY and FRAGMENT (strings
  ;; or #f), the other fields #f
  (set-fields (current-root-uri)
              ((uri-path) path) ((uri-query) query) ((uri-fragment) fragment)))

(define-inline (make-parsed-request method uri version headers)
  (set-fields (current-template-request)
              ((request-method) method) ((request-uri) uri)
              ((request-version) version) ((request-headers) headers)))

(define (make-target bv method start end query fragment high?)
  ;; -> the request target [START, END) as a URI record, or a string
  ;; giving the reason it is refused
  (let ((first (u8 bv start)))
    (cond
     ((eq? method 'CONNECT)
      ;; authority-form, host ":" port
      (let ((uri (and (not high?)
                      (string->uri-reference
                       (string-append "//" (bytes->string bv start end #f))))))
        (if (and uri (uri-host uri) (uri-port uri) (not (uri-userinfo uri))
                 (string-null? (uri-path uri)) (not (uri-query uri))
                 (not (uri-fragment uri)))
            uri
            "CONNECT target is not host:port")))
     ((= first SLASH)
      ;; origin-form: path and query exactly as sent, like parse-request-uri
      (let* ((query (and query (or (not fragment) (< query fragment)) query))
             (path-end (or query fragment end)))
        (if (= end (+ start 1))            ; "/" alone
            (current-root-uri)
            (make-path-uri
             (if (and (= path-end (+ start 1)) (not high?))
                 "/"
                 (bytes->string bv start path-end high?))
             (and query (bytes->string bv (+ query 1) (or fragment end) high?))
             (and fragment (bytes->string bv (+ fragment 1) end high?))))))
     ((and (= first STAR) (= end (+ start 1)))
      (if (eq? method 'OPTIONS)
          (make-path-uri "*" #f #f)
          "asterisk-form target without OPTIONS"))
     ((ascii-letter? first)
      ;; absolute-form, scheme "://" authority ...
      (let ((uri (string->uri (bytes->string bv start end high?))))
        (if (and uri (uri-host uri))
            uri
            "invalid request target")))
     (else "invalid request target"))))

(define (parse-head bv start end limits build?)
  ;; -> (values request index) | (values 'incomplete #f) | (values error #f),
  ;;    or (values 'complete index) when not BUILD?
  (let* ((line-limit (+ start (limits-max-request-line limits)))
         (stop (if (< end line-limit) end line-limit)))
    (define (too-long-or-incomplete offset)
      (if (= stop line-limit)
          (fail 414 "request line too long" offset)
          (incomplete)))
    (define (request-line ls)
      ;; LS: the first byte of the request line
      (define (method-end)
        (if (and (<= (+ ls 4) stop) (= (bytevector-u32-native-ref bv ls) (native-word "GET ")))
            (+ ls 3)
            (first-non-tchar bv ls stop)))
      (let ((me (method-end)))
        (cond
         ;; A method that reaches the line's limit: a 400, not the 414
         ;; of a long target (RFC 9110 §15.5.15 is about the URI).
         ((= me stop)
          (if (= stop line-limit) (fail 400 "method too long" me) (incomplete)))
         ((not (= (u8 bv me) SP))
          (fail 400 "invalid character in method" me))
         ((= me ls) (fail 400 "missing method" me))
         (else
          (let ((ts (+ me 1)))
            (let target ((k (skip-target-plain bv ts stop))
                         (query #f) (fragment #f) (high? #f))
              (if (= k stop)
                  (too-long-or-incomplete k)
                  (let ((b (u8 bv k)))
                    (cond
                     ((= b SP)
                      (if (= k ts)
                          (fail 400 "missing request target" k)
                          (version ls me ts k query fragment high? (+ k 1))))
                     ((= b QUESTION)
                      (target (skip-target-plain bv (+ k 1) stop)
                              (or query k) fragment high?))
                     ((= b HASH)
                      (target (skip-target-plain bv (+ k 1) stop)
                              query (or fragment k) high?))
                     ((<= #x80 b)
                      ;; RFC 9112 §3.2 with RFC 3986 §2: a target is
                      ;; ASCII, anything else percent-encoded (as every
                      ;; browser sends it).  Raw bytes would leave the
                      ;; app to guess their encoding, and a proxy or
                      ;; cache to read them another way.
                      (fail 400 "non-ASCII byte in request target" k))
                     ((or (= b CR) (= b LF))
                      (fail 400 "request line without HTTP version" k))
                     (else
                      (fail 400 "control character or space in request target" k)))))))))))
    (define (version ls me ts te query fragment high? vs)
      ;; VS: the first byte of "HTTP/x.y"
      (let ((ve (+ vs 8)))
        (cond
         ((< line-limit ve) (fail 414 "request line too long" line-limit))
         ((< end ve)
          (if (version-prefix? bv vs end)
              (incomplete)
              (fail 400 "malformed HTTP version" vs)))
         (else
          (let* ((word (bytevector-u64-native-ref bv vs))
                 (version (cond ((= word (native-word "HTTP/1.1")) '(1 . 1))
                                ((= word (native-word "HTTP/1.0")) '(1 . 0))
                                (else #f))))
            (cond
             ((and (not version) (not (version-prefix? bv vs ve)))
              (fail 400 "malformed HTTP version" vs))
             ((= ve end) (incomplete))
             (else
              (let* ((b (u8 bv ve))
                     (hs (cond ((= b LF) (+ ve 1))
                               ((not (= b CR)) #f)
                               ((= (+ ve 1) end) 'incomplete)
                               ((= (u8 bv (+ ve 1)) LF) (+ ve 2))
                               (else #f))))
                (cond
                 ((not hs) (fail 400 "malformed HTTP version" ve))
                 ((eq? hs 'incomplete) (incomplete))
                 ((not version) (fail 505 "HTTP version not supported" vs))
                 (else
                  (let* ((method (if build?
                                     (method-symbol bv ls me)
                                     (and (= me (+ ls 7)) (bytes=? bv ls "CONNECT")
                                          'CONNECT)))
                         (uri (cond
                               (build? (make-target bv method ts te query fragment high?))
                               ;; validate mode: the cheap checks only
                               ((eq? method 'CONNECT) #t)
                               ((= (u8 bv ts) SLASH) #t)
                               ((= (u8 bv ts) STAR) #t)
                               ((ascii-letter? (u8 bv ts)) #t)
                               (else "invalid request target"))))
                    (if (string? uri)
                        (fail 400 uri ts)
                        (parse-fields bv hs end limits build?
                                      method uri version)))))))))))))
    (let skip ((i start))
      ;; RFC 9112 §2.2: ignore empty lines before the request line.
      (cond
       ((<= line-limit i) (fail 414 "request line too long" i))
       ((= i end) (incomplete))
       (else
        (let ((b (u8 bv i)))
          (cond
           ((= b LF) (skip (+ i 1)))
           ((= b CR)
            (cond
             ((= (+ i 1) end) (incomplete))
             ((= (u8 bv (+ i 1)) LF) (skip (+ i 2)))
             (else (fail 400 "bare CR" i))))
           (else (request-line i)))))))))


;;;
;;; Header fields
;;;

(define (host-value bv start end)
  ;; -> (values host-start host-end port) for a valid Host value
  ;;    (uri-host [":" port], RFC 9110 §7.2), or (values #f bad-offset #f)
  (define (port-value i)
    ;; I: just after ":"; Guile's parser wants at least one digit
    (let loop ((j i) (port 0))
      (cond
       ((and (= j end) (< i j)) port)
       ((or (= j end) (not (digit? (u8 bv j))) (< 65535 port)) #f)
       (else
        (let ((port (+ (* port 10) (- (u8 bv j) ZERO))))
          (if (< 65535 port) #f (loop (+ j 1) port)))))))
  (define (after-host hs he i)
    ;; I: just after the host
    (cond
     ((= i end) (values hs he #f))
     ((= (u8 bv i) COLON)
      (let ((port (port-value (+ i 1))))
        (if port (values hs he port) (values #f (+ i 1) #f))))
     (else (values #f i #f))))
  (cond
   ((= start end) (values start end #f))
   ((= (u8 bv start) LBRACKET)
    ;; IP-literal: IPv6address or IPvFuture, in brackets
    (let loop ((i (+ start 1)))
      (cond
       ((= i end) (values #f i #f))
       ((= (u8 bv i) RBRACKET)
        (if (= i (+ start 1))
            (values #f i #f)
            (after-host (+ start 1) i (+ i 1))))
       ((or (byte-class? (u8 bv i) CLASS-HOST) (= (u8 bv i) COLON))
        (loop (+ i 1)))
       (else (values #f i #f)))))
   (else
    (let loop ((i start))
      (if (and (< i end) (byte-class? (u8 bv i) CLASS-HOST))
          (loop (+ i 1))
          (after-host start i i))))))

(define (content-length-value bv start end)
  ;; -> the integer in [START, END): 1*DIGIT, or a list of such equal
  ;;    values "5, 5" (RFC 9110 §8.6); #f when invalid or conflicting
  (let element ((i start) (value #f))
    (let digits ((j i) (n 0))
      (if (and (< j end) (digit? (u8 bv j)))
          (digits (+ j 1) (+ (* n 10) (- (u8 bv j) ZERO)))
          (cond
           ((= j i) #f)
           ((and value (not (= n value))) #f)
           ((= j end) n)
           (else
            (let ((k (skip-ows bv j end)))
              (and (< k end) (= (u8 bv k) COMMA)
                   (element (skip-ows bv (+ k 1) end) n)))))))))

(define (connection-value bv start end)
  ;; -> the list of options Guile's split-header-names makes of an ASCII
  ;;    value: split at ",", trim, lower-case, intern; the common options
  ;;    come back as literals without allocating
  (let loop ((i start) (options '()))
    (if (< i end)
        (let* ((comma (let find ((j i))
                        (if (or (= j end) (= (u8 bv j) COMMA)) j (find (+ j 1)))))
               (s (skip-ows bv i comma))
               (e (trim-ows-right bv s comma))
               (option (case (- e s)
                         ((5) (and (bytes=?/ci bv s "close") 'close))
                         ((7) (and (bytes=?/ci bv s "upgrade") 'upgrade))
                         ((10) (and (bytes=?/ci bv s "keep-alive") 'keep-alive))
                         (else #f))))
          (loop (if (= comma end) end (+ comma 1))
                (cons (or option (lowercase-symbol bv s e)) options)))
        (reverse! options))))

(define (coding-token? symbol)
  (let ((name (symbol->string symbol)))
    (and (not (string-null? name))
         (string-every (lambda (c)
                         (and (char<? c #\x80) (tchar? (char->integer c))))
                       name))))

(define (transfer-coding-state state codings)
  ;; STATE: 0 no Transfer-Encoding yet, 1 chunked alone, 2 last coding
  ;; not chunked and no chunked before, 3 chunked then another, 4 other
  ;; codings then chunked.
  ;; CODINGS: the value from Guile's parser, ((coding param ...) ...).
  ;; -> the new state, or #f when a coding is malformed or chunked is
  ;;    applied twice (RFC 9112 §7)
  (let loop ((state state) (codings codings))
    (cond
     ((null? codings) state)
     ((not (and (pair? (car codings)) (symbol? (caar codings))
                (coding-token? (caar codings))))
      #f)
     ((string-ci=? (symbol->string (caar codings)) "chunked")
      (case state
        ((0) (loop 1 (cdr codings)))
        ((2) (loop 4 (cdr codings)))
        (else #f)))
     (else (loop (if (memv state (quote (0 2))) 2 3) (cdr codings))))))

(define (parse-field-values! pending)
  ;; PENDING: ((field known-header . key) ...) where FIELD is a
  ;; (name . string) pair of the headers alist and KEY the raw bytes to
  ;; remember the value under, or #f.  Replace each string by its parsed
  ;; value; a value the parser rejects stays the string.  One catch for
  ;; all the fields: a catch costs as much as parsing a short value.
  (define (parse-one! cell)
    (let* ((field (car cell))
           (known (cadr cell))
           (value ((known-header-parser known) (cdr field))))
      (set-cdr! field value)
      (set-car! (cdr cell) #f)          ; done
      (when (cddr cell)
        (cache-value! (known-header-cache known) (cddr cell) value))))
  (unless (null? pending)
    (catch #t
      (lambda ()
        (let loop ((cells pending))
          (unless (null? cells)
            (parse-one! (car cells))
            (loop (cdr cells)))))
      (lambda _
        (let loop ((cells pending))
          (unless (null? cells)
            (let ((cell (car cells)))
              (when (cadr cell)
                (catch #t
                  (lambda () (parse-one! cell))
                  (lambda _
                    (when (cddr cell)
                      (cache-value! (known-header-cache (cadr cell)) (cddr cell)
                                    (cdar cell)))))))
            (loop (cdr cells))))))))

(eval-when (expand)
  (define-syntax-rule (with-field-name bv i stop status more (known colon) body)
    ;; The field name at I, up to its colon: BODY with KNOWN (its
    ;; <known-header>, or #f) and COLON bound; (MORE offset) when the
    ;; bytes end first; a failure of STATUS (400 for a request, 502 for
    ;; a response) when it is not a token followed by a colon.
    (let ((colon (skip-name-plain bv i stop)))
      (cond
       ((= colon stop) (more colon))
       ((not (= (u8 bv colon) COLON))
        (let ((b (u8 bv colon)))
          (fail status
                (cond
                 ((ows? b) "whitespace before colon in header field")
                 ((or (= b CR) (= b LF)) "header field without colon")
                 (else "invalid character in header name"))
                colon)))
       ((= colon i) (fail status "empty header name" i))
       (else
        (let* ((known (match-known-header bv i (- colon i)))
               (bad (and (not known) (first-non-tchar bv i colon))))
          (if (and bad (< bad colon))
              (fail status "invalid character in header name" bad)
              body)))))))

(eval-when (expand)
  (define-syntax-rule (with-field-value bv colon stop status more (vs ve next high?) body)
    ;; The value after COLON, up to its line's end: BODY with VS and VE
    ;; (its bounds, OWS trimmed), NEXT (the next line's first byte) and
    ;; HIGH? (a byte over #x7F in it) bound; (MORE offset) when the bytes
    ;; end first; a failure of STATUS at a control byte or a bare CR.
    (let ((vs (skip-ows bv (+ colon 1) stop)))
      (let scan ((k (skip-value-plain bv vs stop)) (high? #f))
        (if (= k stop)
            (more k)
            (let ((b (u8 bv k)))
              (cond
               ((= b CR)
                (cond
                 ((= (+ k 1) stop) (more (+ k 1)))
                 ((= (u8 bv (+ k 1)) LF)
                  (let ((ve (trim-ows-right bv vs k)) (next (+ k 2))) body))
                 (else (fail status "bare CR" k))))
               ((= b LF)
                (let ((ve (trim-ows-right bv vs k)) (next (+ k 1))) body))
               ((= b HTAB)
                (scan (skip-value-plain bv (+ k 1) stop) high?))
               ((<= #x80 b)
                (scan (skip-value-plain bv (+ k 1) stop) #t))
               (else
                (fail status "control character in header value" k)))))))))

(define (parse-fields bv hs end limits build? method uri version)
  ;; HS: the first byte after the request line.
  ;; -> as parse-head
  (let* ((header-limit (+ hs (limits-max-header-bytes limits)))
         (stop (if (< end header-limit) end header-limit))
         (max-count (limits-max-header-count limits)))
    (define (too-large-or-incomplete offset)
      (if (= stop header-limit)
          (fail 431 "header section too large" offset)
          (incomplete)))
    (define (finish i next headers pending host? coding)
      ;; I: the blank line; NEXT: just past it
      (cond
       ((and (not host?) (equal? version '(1 . 1)))
        (fail 400 "HTTP/1.1 request without Host" i))
       ;; RFC 9112 §6.3: without chunked last the body has no end a
       ;; server can find: 400 and close.  Chunked last after codings
       ;; plucky does not decode (gzip, ...): 501, as §6.1 asks of a
       ;; coding a server does not understand.
       ((memv coding '(2 3))
        (fail 400 "final transfer coding is not chunked" i))
       ((eqv? coding 4)
        (fail 501 "transfer coding other than chunked" i))
       ((not build?) (values 'complete next))
       (else
        (parse-field-values! pending)
        (values (make-parsed-request method uri version (reverse! headers))
                next))))
    (let field ((i hs) (count 0) (headers '()) (pending '())
                (host? #f) (content-length #f) (coding 0))
      ;; I: the first byte of a line
      (define (value name known vs ve next high?)
        ;; one field: NAME (a symbol) or KNOWN (a <known-header>), the
        ;; value [VS, VE) trimmed, NEXT the start of the following line
        (define (add value)
          (if build?
              (cons (cons (if known (known-header-symbol known) name) value)
                    headers)
              headers))
        (define-syntax-rule (next-field headers pending host? content-length coding)
          (field next (+ count 1) headers pending host? content-length coding))
        (define (guile-value)
          ;; parsed at the end, all under one catch: see parse-field-values!
          (let ((cache (and build? (not high?) (known-header-cache known))))
            (cond
             ((not build?) (next-field headers pending host? content-length coding))
             ((and cache (cached-value cache bv vs ve))
              => (lambda (value)
                   (next-field (add value) pending host? content-length coding)))
             (else
              (let* ((key (and cache (bytes->bytevector bv vs ve)))
                     (field (cons (known-header-symbol known)
                                  (if key
                                      (utf8->string key)
                                      (bytes->string bv vs ve high?)))))
                (next-field (cons field headers)
                            (cons (cons field (cons known key)) pending)
                            host? content-length coding))))))
        (case (and known (known-header-kind known))
          ((host)
           (call-with-values (lambda () (host-value bv vs ve))
             (lambda (host-start host-end port)
               (cond
                (host? (fail 400 "more than one Host header" i))
                ((not host-start) (fail 400 "invalid Host header" host-end))
                (else
                 (next-field (add (and build?
                                       (cons (bytes->string bv host-start host-end #f)
                                             port)))
                             pending #t content-length coding))))))
          ((content-length)
           (let ((n (content-length-value bv vs ve)))
             (cond
              ((not n) (fail 400 "invalid Content-Length" vs))
              ((not (eqv? coding 0))
               (fail 400 "Content-Length with Transfer-Encoding" i))
              ((not content-length)
               (next-field (add n) pending host? n coding))
              ((= n content-length)
               (next-field headers pending host? content-length coding))
              (else (fail 400 "conflicting Content-Length headers" i)))))
          ((transfer-encoding)
           (cond
            ((equal? version '(1 . 0))
             (fail 400 "Transfer-Encoding in an HTTP/1.0 request" i))
            (content-length (fail 400 "Content-Length with Transfer-Encoding" i))
            ((not build?) (next-field headers pending host? content-length 1))
            (else
             ;; Framing: a value Guile cannot parse is refused, not kept.
             (let* ((codings (catch #t
                               (lambda ()
                                 ((known-header-parser known)
                                  (bytes->string bv vs ve high?)))
                               (lambda _ #f)))
                    (coding (and codings (transfer-coding-state coding codings))))
               (if coding
                   (next-field (add codings) pending host? content-length coding)
                   (fail 400 "invalid Transfer-Encoding" vs))))))
          ((connection)
           (if (and build? (not high?))
               (next-field (add (connection-value bv vs ve))
                           pending host? content-length coding)
               (guile-value)))
          ((guile) (guile-value))
          (else
           (next-field (add (and build? (bytes->string bv vs ve high?)))
                       pending host? content-length coding))))
      (define (field-value name known colon)
        ;; the value after COLON, up to the end of the line
        (with-field-value bv colon stop 400 too-large-or-incomplete (vs ve next high?)
          (value name known vs ve next high?)))
      (define (field-line)
        (with-field-name bv i stop 400 too-large-or-incomplete (known colon)
          (field-value (and build? (not known) (lowercase-symbol bv i colon))
                       known colon)))
      (if (= i stop)
          (too-large-or-incomplete i)
          (let ((b (u8 bv i)))
            (cond
             ((= b CR)
              (cond
               ((= (+ i 1) stop) (too-large-or-incomplete (+ i 1)))
               ((= (u8 bv (+ i 1)) LF)
                (finish i (+ i 2) headers pending host? coding))
               (else (fail 400 "bare CR" i))))
             ((= b LF) (finish i (+ i 1) headers pending host? coding))
             ((ows? b) (fail 400 "obsolete line folding" i))
             ((<= max-count count) (fail 431 "too many header fields" i))
             (else (field-line))))))))


;;;
;;; Response heads
;;;

;;; What a client or a proxy reads from a server: the status line and
;;; the field lines, checked as strictly as a request head, and handed
;;; back as positions in the bytes rather than as Guile's <response>, so
;;; that a proxy can pass the fields on as they came (plucky web proxy)
;;; and a client build what it needs of them (plucky web client).
;;; Strict: only HTTP/1.x, a three-digit code of at least 100, no bare
;;; CR, no obs-fold (RFC 9112 §5.2 lets a proxy refuse it), no
;;; whitespace before a colon, no control byte in a value, conflicting
;;; Content-Lengths, Content-Length with Transfer-Encoding (RFC 9112
;;; §6.3: a smuggling attempt), or chunked applied twice or not last
;;; then followed by another.  Lenient as with requests: bare LF line
;;; ends, obs-text in values and the reason phrase, a status line with
;;; no reason phrase (and no space before it).

;; A core record type: see <parse-limits>.
(define <response-head>
  (make-record-type '<response-head>
                    '(version           ; (1 . 1) or (1 . 0)
                      code              ; 100 to 999
                      reason-start      ; the reason phrase: [start, end) of the bytes
                      reason-end
                      fields            ; list of fields, in order: see `field'
                      content-length    ; integer, or #f
                      transfer-coding   ; #f, chunked (last), or other
                      connection)))     ; the Connection options, lower-case symbols

(define %make-response-head (record-constructor <response-head>))
(define response-head? (record-predicate <response-head>))
(define response-head-version (record-accessor <response-head> 'version))
(define response-head-code (record-accessor <response-head> 'code))
(define response-head-reason-start (record-accessor <response-head> 'reason-start))
(define response-head-reason-end (record-accessor <response-head> 'reason-end))
(define response-head-fields (record-accessor <response-head> 'fields))
(define response-head-content-length (record-accessor <response-head> 'content-length))
(define response-head-transfer-coding (record-accessor <response-head> 'transfer-coding))
(define response-head-connection (record-accessor <response-head> 'connection))

;; A field of a response head: a vector, whose slots are
;;   0  the name's symbol when it is one of *known-header-names*, else #f
;;   1  the name's first byte, 2 the colon
;;   3  the value's first byte, 4 just past its last (OWS trimmed)
;;   5  just past the field line's end (its LF)
(define (field-symbol field) (vector-ref field 0))
(define (field-name-start field) (vector-ref field 1))
(define (field-name-end field) (vector-ref field 2))
(define (field-value-start field) (vector-ref field 3))
(define (field-value-end field) (vector-ref field 4))
(define (field-line-end field) (vector-ref field 5))

(define (field-name field bv)
  "Return the name of FIELD, of a response head parsed from BV, as a
lower-case symbol, as Guile's `string->header' makes it."
  (or (field-symbol field)
      (lowercase-symbol bv (field-name-start field) (field-name-end field))))

(define version-1.1 '(1 . 1))
(define version-1.0 '(1 . 0))

(define (transfer-coding-value bv start end coding)
  ;; -> the framing after one Transfer-Encoding value [START, END),
  ;;    CODING the one before (#f, chunked or other): chunked when its
  ;;    last coding is chunked, other when it is another; #f when a
  ;;    coding is not a token or chunked is not last
  (let loop ((i start) (coding coding))
    (if (>= i end)
        coding
        (let* ((comma (let find ((j i))
                        (if (or (= j end) (= (u8 bv j) COMMA)) j (find (+ j 1)))))
               (s (skip-ows bv i comma))
               ;; a coding's parameters (";q=...") are not framing
               (e (let find ((j s))
                    (if (or (= j comma) (= (u8 bv j) 59) (ows? (u8 bv j))) j (find (+ j 1)))))
               (next (if (= comma end) end (+ comma 1))))
          (cond
           ((= s e) (and (= s (trim-ows-right bv s comma)) (loop next coding))) ; empty element
           ((< (first-non-tchar bv s e) e) #f)
           ((eq? coding 'chunked) #f)   ; chunked, then anything
           ((and (= (- e s) 7) (bytes=?/ci bv s "chunked")) (loop next 'chunked))
           (else (loop next 'other)))))))

(define (status-line-prefix? bv start end)
  ;; -> #t when [START, END) may begin a status line: "HTTP/1." DIGIT
  ;;    SP DIGIT DIGIT DIGIT, cut anywhere
  (let loop ((i start) (k 0))
    (or (= i end) (= k 12)
        (and (let ((b (u8 bv i)))
               (case k
                 ((0) (= b 72)) ((1 2) (= b 84)) ((3) (= b 80)) ((4) (= b SLASH))
                 ((5) (= b 49)) ((6) (= b 46)) ((7) (digit? b)) ((8) (= b SP))
                 ((9) (and (<= 49 b) (<= b 57))) ((10 11) (digit? b))
                 (else #f)))
             (loop (+ i 1) (+ k 1))))))

(define* (parse-response-head bv start end #:optional (limits %default-parse-limits))
  "Parse the response head at the start of the bytes [START, END) of
bytevector BV.  Return two values: a <response-head> and the index just
past the blank line that ends it; or the symbol `incomplete' and #f
while the bytes are a valid beginning of a head; or an &http-error (not
raised) and #f, with the byte offset in BV where the fault was seen and
status 502 for bytes that are not an HTTP/1 response head, 431 for a
head past LIMITS (MAX-REQUEST-LINE bounds the status line,
MAX-HEADER-BYTES and MAX-HEADER-COUNT the fields).  Garbage is refused
as soon as its first wrong byte is in."
  (unless (and (bytevector? bv) (exact-integer? start) (exact-integer? end)
               (<= 0 start end (bytevector-length bv))
               (< end #x100000000))
    (error "parse-response-head: bad bytevector range" start end))
  (unless (%parse-limits? limits)
    (error "parse-response-head: not a parse-limits record" limits))
  (let ((prefix-end (min end (+ start 12))))
    (cond
     ((not (status-line-prefix? bv start prefix-end))
      (let find ((i start))             ; the first wrong byte
        (if (status-line-prefix? bv start (+ i 1)) (find (+ i 1))
            (fail 502 "not an HTTP/1 status line" i))))
     ((< prefix-end (+ start 12)) (incomplete))
     (else (parse-status-rest bv start end limits)))))

(define (parse-status-rest bv start end limits)
  ;; BV [START, START + 12) holds "HTTP/1.d ddd"
  ;; The limit counts the line without its end: the scan may see the
  ;; CR LF just past it.  A line that ends past LINE-LIMIT is a 431.
  (let* ((line-limit (+ start (limits-max-request-line limits)))
         (stop (if (< end (+ line-limit 2)) end (+ line-limit 2)))
         (version (if (= (u8 bv (+ start 7)) 49) version-1.1
                      (cons 1 (- (u8 bv (+ start 7)) ZERO))))
         (code (+ (* 100 (- (u8 bv (+ start 9)) ZERO))
                  (* 10 (- (u8 bv (+ start 10)) ZERO))
                  (- (u8 bv (+ start 11)) ZERO))))
    (define (line-end k reason-start reason-end next)
      ;; K: the line's end
      (if (> k line-limit)
          (fail 431 "status line too long" line-limit)
          (parse-response-fields bv next end limits version code reason-start reason-end)))
    (define (too-long-or-incomplete)
      (if (= stop (+ line-limit 2))
          (fail 431 "status line too long" line-limit)
          (incomplete)))
    (let ((i (+ start 12)))
      (cond
       ((= i stop) (too-long-or-incomplete))
       (else
        (let ((b (u8 bv i)))
          (cond
           ((= b LF) (line-end i i i (+ i 1)))
           ((= b CR)
            (cond
             ((= (+ i 1) stop) (too-long-or-incomplete))
             ((= (u8 bv (+ i 1)) LF) (line-end i i i (+ i 2)))
             (else (fail 502 "bare CR" i))))
           ((not (= b SP)) (fail 502 "status code not of three digits" i))
           (else
            (let scan ((k (skip-value-plain bv (+ i 1) stop)))
              (if (= k stop)
                  (too-long-or-incomplete)
                  (let ((b (u8 bv k)))
                    (cond
                     ((= b LF) (line-end k (+ i 1) (trim-ows-right bv (+ i 1) k) (+ k 1)))
                     ((= b CR)
                      (cond
                       ((= (+ k 1) stop) (too-long-or-incomplete))
                       ((= (u8 bv (+ k 1)) LF)
                        (line-end k (+ i 1) (trim-ows-right bv (+ i 1) k) (+ k 2)))
                       (else (fail 502 "bare CR" k))))
                     ((or (= b HTAB) (<= #x80 b)) (scan (skip-value-plain bv (+ k 1) stop)))
                     (else (fail 502 "control character in the reason phrase" k))))))))))))))

(define (parse-response-fields bv hs end limits version code reason-start reason-end)
  ;; HS: the first byte after the status line.  -> as parse-response-head
  (let* ((header-limit (+ hs (limits-max-header-bytes limits)))
         (stop (if (< end header-limit) end header-limit))
         (max-count (limits-max-header-count limits)))
    (define (too-large-or-incomplete offset)
      (if (= stop header-limit)
          (fail 431 "response header section too large" offset)
          (incomplete)))
    (let field ((i hs) (count 0) (fields '()) (length #f) (coding #f) (connection '()))
      ;; I: the first byte of a line
      (define (value known ns ne vs ve next)
        ;; one field, its value [VS, VE) trimmed, NEXT the next line
        (let ((fields (cons (vector (and known (known-header-symbol known)) ns ne vs ve next)
                            fields))
              (count (+ count 1)))
          (case (and known (known-header-kind known))
            ((content-length)
             (let ((n (content-length-value bv vs ve)))
               (cond
                ((not n) (fail 502 "invalid Content-Length" vs))
                (coding (fail 502 "Content-Length with Transfer-Encoding" ns))
                ((and length (not (= n length)))
                 (fail 502 "conflicting Content-Length fields" ns))
                (else (field next count fields n coding connection)))))
            ((transfer-encoding)
             (let ((coding (and (not length) (transfer-coding-value bv vs ve coding))))
               (cond
                (length (fail 502 "Content-Length with Transfer-Encoding" ns))
                ((not coding) (fail 502 "invalid Transfer-Encoding" vs))
                (else (field next count fields length coding connection)))))
            ((connection)
             (field next count fields length coding
                    (append connection (connection-value bv vs ve))))
            (else (field next count fields length coding connection)))))
      (define (field-value known ns colon)
        (with-field-value bv colon stop 502 too-large-or-incomplete (vs ve next high?)
          (value known ns colon vs ve next)))
      (define (field-line)
        (with-field-name bv i stop 502 too-large-or-incomplete (known colon)
          (field-value known i colon)))
      (define (finish next)
        (values (%make-response-head version code reason-start reason-end
                                     (reverse! fields) length coding connection)
                next))
      (if (= i stop)
          (too-large-or-incomplete i)
          (let ((b (u8 bv i)))
            (cond
             ((= b CR)
              (cond
               ((= (+ i 1) stop) (too-large-or-incomplete (+ i 1)))
               ((= (u8 bv (+ i 1)) LF) (finish (+ i 2)))
               (else (fail 502 "bare CR" i))))
             ((= b LF) (finish (+ i 1)))
             ((ows? b) (fail 502 "obsolete line folding" i))
             ((<= max-count count) (fail 431 "too many header fields" i))
             (else (field-line))))))))


;;;
;;; Entry points
;;;

(define (head-may-be-complete? bv start end)
  ;; A complete head contains LF followed by LF or CR LF.  Most requests
  ;; arrive whole and end right there, so look at the tail first; else
  ;; scan for it (a body or a pipelined request may follow the head).
  (let ((n (- end start)))
    (or (and (<= 2 n)
             (= (u8 bv (- end 1)) LF)
             (let ((b (u8 bv (- end 2))))
               (or (= b LF)
                   (and (= b CR) (<= 3 n) (= (u8 bv (- end 3)) LF)))))
        (let loop ((i start))
          (let ((lf (find-lf bv i end)))
            (and (< lf end)
                 (or (and (< (+ lf 1) end) (= (u8 bv (+ lf 1)) LF))
                     (and (< (+ lf 2) end)
                          (= (u8 bv (+ lf 1)) CR)
                          (= (u8 bv (+ lf 2)) LF))
                     (loop (+ lf 1)))))))))

(define* (parse-request-head bv start end #:optional (limits %default-parse-limits))
  "Parse the request head at the start of the bytes [START, END) of
bytevector BV.  Return two values: a (web request) record (meta '() and
port #f) and the index just past the blank line that ends the head; or
the symbol `incomplete' and #f when the bytes are a valid beginning of a
head not yet complete; or an &http-error condition (not raised) and #f,
carrying the response status, a reason and the byte offset in BV where
the problem was seen.  LIMITS, from `make-parse-limits', bound the
request line and the header section; going over them is detected as
soon as enough bytes have arrived, complete or not."
  (unless (and (bytevector? bv) (exact-integer? start) (exact-integer? end)
               (<= 0 start end (bytevector-length bv))
               (< end #x100000000))
    (error "parse-request-head: bad bytevector range" start end))
  (unless (%parse-limits? limits)
    (error "parse-request-head: not a parse-limits record" limits))
  (if (head-may-be-complete? bv start end)
      (parse-head bv start end limits #t)
      (call-with-values (lambda () (parse-head bv start end limits #f))
        (lambda (result index)
          (if (eq? result 'complete)
              (parse-head bv start end limits #t)
              (values result index))))))

(define (request-keep-alive? request)
  "Return #t when the connection may carry another request after
REQUEST: for HTTP/1.1 (and later) unless a Connection header lists
`close', for HTTP/1.0 only when a Connection header lists `keep-alive'
and none lists `close'; never after CONNECT, whose answer, if a 2xx,
turns what follows into the tunnel's bytes (RFC 9110 §9.3.6)."
  ;; One walk of the headers for both options, comparing symbols: a
  ;; `string->symbol' per call would intern, a hash and a lock in
  ;; libguile (bench/instructions, keep-alive).
  (define (has? value option name)
    (if (string? value)                 ; a request built without validation
        (member name (map (lambda (s) (string-downcase (string-trim-both s)))
                          (string-split value #\,)))
        (memq option value)))
  (let ((version (request-version request)))
    (and (not (eq? (request-method request) 'CONNECT))
         (let loop ((headers (request-headers request)) (keep-alive? #f))
           (cond
            ((pair? headers)
             (if (eq? (caar headers) 'connection)
                 (let ((value (cdar headers)))
                   (and (not (has? value 'close "close"))
                        (loop (cdr headers)
                              (or keep-alive? (and (has? value 'keep-alive "keep-alive")
                                                   #t)))))
                 (loop (cdr headers) keep-alive?)))
            ((or (< 1 (car version)) (and (= 1 (car version)) (<= 1 (cdr version)))) #t)
            ((and (= 1 (car version)) (= 0 (cdr version))) keep-alive?)
            (else #f))))))

;;; (plucky http parse) ends here
