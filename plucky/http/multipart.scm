;;; (plucky http multipart) --- multipart bodies, parsed as they arrive

;; Copyright (C) 2026 the plucky authors
;; (No header names with a colon in these first lines: Guile reads a
;; "coding:" here as the file's character set.)
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A form with a file field is sent as multipart/form-data (RFC 7578),
;;; whose framing is MIME multipart's (RFC 2046 §5.1.1):
;;;
;;;   [preamble CRLF]
;;;   --boundary [padding] CRLF  part-head CRLF  part-data
;;;   CRLF --boundary [padding] CRLF  part-head CRLF  part-data
;;;   ...
;;;   CRLF --boundary-- [epilogue]
;;;
;;; where a part head is header lines, each ending in CRLF.  The body
;;; arrives split across reads at any byte and may be far larger than
;;; memory (a 2 GB upload), so, like (plucky http chunked), a
;;; <multipart-parser> keeps where it is between calls and is fed
;;; bytevector slices as they come:
;;;
;;;   (define parser
;;;     (make-multipart-parser boundary
;;;                            #:on-part-start (lambda (part) ...)
;;;                            #:on-part-data (lambda (bv start count) ...)
;;;                            #:on-part-end (lambda (part) ...)))
;;;   (feed-multipart! parser bv start end)  -> 'more | 'done | &http-error, index
;;;   ...
;;;   (finish-multipart! parser)             -> 'done | &http-error
;;;
;;; How a body flows through this file: `feed-multipart!' runs a state
;;; machine.  In a part's data (and in the preamble, whose bytes are
;;; dropped) `scan-body!' looks for the delimiter CRLF "--" boundary: a
;;; word-at-a-time scan for CR, then a byte comparison at each CR.  Data
;;; before it goes to ON-PART-DATA as slices of the caller's bytevector,
;;; never copied.  A delimiter cut by the end of the input is held back:
;;; only the count of its bytes matched so far is kept (they are the
;;; delimiter's own bytes), and `resume-delimiter!' goes on comparing in
;;; the next input; if the match fails, the held bytes were data after
;;; all and are handed over as a slice of the parser's copy of the
;;; delimiter.  So memory per parser is the delimiter and one part head,
;;; whatever the size of the parts.  After a delimiter come "--" (the
;;; end), or padding and CRLF, then a part head, copied byte by byte into
;;; a buffer (at most MAX-HEADER-BYTES) and parsed at its blank line into
;;; a <multipart-part> record for ON-PART-START.
;;;
;;; Strict where the RFCs say MUST and where leniency would let two
;;; parsers (a proxy's and ours) split a body differently:
;;;
;;;   - Line ends are CRLF: a bare CR or LF in a part head or after a
;;;     boundary is a 400.  Header lines may not be folded.
;;;   - A line that starts with "--" boundary is a delimiter whatever
;;;     follows (RFC 2046 §5.1.1: "it is sufficient that the boundary
;;;     appear in its entirety following the CRLF"); if it is not then
;;;     followed by "--" or by optional SP/HTAB and CRLF, it is a 400.
;;;     (Go's mime/multipart reads "--boundaryX" as data instead; the
;;;     RFC forbids the boundary inside a part, so a sender that does
;;;     this is broken either way.)
;;;   - Control characters other than HTAB in a part head, a field line
;;;     without a colon or with an invalid name, a repeated
;;;     Content-Disposition or Content-Type, a malformed or repeated
;;;     parameter in them: 400.
;;;   - A body that ends without the close delimiter is an error that
;;;     `finish-multipart!' returns when the caller knows the input is
;;;     over.
;;;
;;; Lenient where real clients need it or nothing is at stake:
;;;
;;;   - The first boundary may open the body or follow a preamble; the
;;;     preamble, and everything after the close delimiter (the
;;;     epilogue, including CRLF or junk), are ignored.
;;;   - A body with no part at all ("--boundary--") is accepted: browsers
;;;     send it for an empty form.
;;;   - A part's data may be absent altogether: the CRLF ending its head
;;;     then also starts the next delimiter (RFC 2046 grammar:
;;;     body-part := MIME-part-headers [CRLF *OCTET]).
;;;   - Header values are read as UTF-8, which is how browsers send
;;;     non-ASCII file names (RFC 7578 §4.2); invalid sequences become
;;;     U+FFFD.  `filename*' (RFC 8187: UTF-8 or ISO-8859-1) is preferred
;;;     to `filename' when both are given (RFC 6266 §4.3); another
;;;     charset in it is ignored.
;;;
;;; Limits: MAX-PARTS (a part beyond it: 413) and MAX-HEADER-BYTES per
;;; part head (413).  The size of the data is the caller's to bound,
;;; with its body-size limit or in ON-PART-DATA.
;;;
;;; Code:

(define-module (plucky http multipart)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 iconv)
  #:use-module (plucky http error)
  #:export (make-multipart-parser
            multipart-parser?
            multipart-parser-parts
            feed-multipart!
            finish-multipart!
            content-type-boundary
            multipart-part?
            multipart-part-index
            multipart-part-headers
            multipart-part-disposition
            multipart-part-name
            multipart-part-filename
            multipart-part-content-type))

;; Macros only, needed while this file is compiled: see there.
(eval-when (expand)
  (use-modules (plucky http bytes)))


;;;
;;; Records
;;;

(define-record-type <multipart-part>
  (%make-multipart-part index headers disposition name filename content-type)
  multipart-part?
  (index multipart-part-index)               ; 0 for the first part of the body
  (headers multipart-part-headers)           ; ((field-name . "value") ...) as sent, names
                                             ; lower-case symbols, values UTF-8 decoded
  (disposition multipart-part-disposition)   ; form-data, attachment..., or #f without the header
  (name multipart-part-name)                 ; the name parameter, or #f
  (filename multipart-part-filename)         ; filename* decoded, else filename, else #f
  (content-type multipart-part-content-type)) ; (type/subtype (param . "value") ...) or #f

(define-record-type <multipart-parser>
  (%make-multipart-parser state delimiter matched held-from head head-length
                          line-length parts part error max-parts max-header-bytes
                          on-part-start on-part-data on-part-end)
  multipart-parser?
  ;; preamble | body | after-delimiter | padding | close-dash | delimiter-lf
  ;; | head | head-lf | done | failed
  (state parser-state set-parser-state!)
  (delimiter parser-delimiter)              ; bytevector: CR LF "--" boundary
  (matched parser-matched set-parser-matched!) ; bytes of DELIMITER matched at the end
                                               ; of the last input, held back
  (held-from parser-held-from set-parser-held-from!) ; of those, how many were not data
                                                     ; (the CRLF that ended a part head)
  (head parser-head set-parser-head!)       ; bytevector: the part head so far, lines
                                            ; ending in LF
  (head-length parser-head-length set-parser-head-length!)
  (line-length parser-line-length set-parser-line-length!) ; bytes of the current head line
  (parts multipart-parser-parts set-parser-parts!) ; parts started so far
  (part parser-part set-parser-part!)       ; the <multipart-part> being read, or #f
  (error parser-error set-parser-error!)    ; the &http-error once failed
  (max-parts parser-max-parts)
  (max-header-bytes parser-max-header-bytes)
  (on-part-start parser-on-part-start)
  (on-part-data parser-on-part-data)
  (on-part-end parser-on-part-end))

(define (ignore . args) #t)

(define* (make-multipart-parser boundary #:key (max-parts 1000) (max-header-bytes 8192)
                                (on-part-start ignore) (on-part-data ignore)
                                (on-part-end ignore))
  "Return a parser for one multipart body whose parts are separated by
BOUNDARY (a string, as `content-type-boundary' returns it).  While the
body is fed, the parser calls (ON-PART-START part) with a
<multipart-part> when a part's head has been read, (ON-PART-DATA bv start
count) for each run of its data, and (ON-PART-END part) at its end.  The
slices given to ON-PART-DATA are valid only during the call (they are the
caller's input or the parser's own bytes) and must not be modified.
MAX-PARTS bounds the number of parts and MAX-HEADER-BYTES the bytes of
each part's head (beyond either: 413).  Raise an &http-error (400) if
BOUNDARY is not 1 to 70 of the characters RFC 2046 allows."
  (unless (valid-boundary? boundary)
    (raise-exception (make-http-error 400 "invalid multipart boundary")))
  (%make-multipart-parser 'preamble
                          (string->utf8 (string-append "\r\n--" boundary))
                          ;; The body may open with the boundary, as if a
                          ;; CRLF came before it: pretend one did.
                          2 2
                          (make-bytevector (min 256 max-header-bytes)) 0 0
                          0 #f #f max-parts max-header-bytes
                          on-part-start on-part-data on-part-end))


;;;
;;; Bytes
;;;

;; The hot loop of the whole parser: a part's data is scanned for the CR
;; that starts a delimiter, a word at a time: several times faster than
;; a byte loop on random data, and unrolling to two words a turn gains
;; nothing measurable (an A/B of the three loops on the data of
;; bench/multipart.scm).
(define-inlinable (find-cr bv start stop)
  ;; -> the index of the first CR in BV [START, STOP), or STOP
  (let ((stop (index-hint stop)))
    (define (bytes i)
      (if (and (< i stop) (not (eqv? 13 (u8 bv i))))
          (bytes (+ i 1))
          i))
    (let words ((i (index-hint start)))
      (if (<= (+ i 8) stop)
          (let ((cr (lanes-equal (bytevector-u64-native-ref bv i) #x0d0d0d0d0d0d0d0d)))
            (cond
             ((= 0 cr) (words (+ i 8)))
             (*little-endian?* (+ i (lowest-lane cr)))
             (else (bytes i))))
          (bytes i)))))

(define-inlinable (ows? byte) (or (eqv? byte 32) (eqv? byte 9)))

(define (bchar? c)
  ;; RFC 2046 §5.1.1 bchars: DIGIT / ALPHA / ' ( ) + _ , - . / : = ? and space.
  (or (char<=? #\0 c #\9) (char<=? #\a c #\z) (char<=? #\A c #\Z)
      (memv c '(#\' #\( #\) #\+ #\_ #\, #\- #\. #\/ #\: #\= #\? #\space))))

(define (valid-boundary? boundary)
  (and (string? boundary)
       (<= 1 (string-length boundary) 70)
       (string-every bchar? boundary)
       (not (char=? #\space (string-ref boundary (- (string-length boundary) 1))))))

(define (slice->string bv start end)
  ;; -> BV [START, END) decoded as UTF-8, invalid sequences as U+FFFD
  (let ((copy (make-bytevector (- end start))))
    (bytevector-copy! bv start copy 0 (- end start))
    (bytevector->string copy "UTF-8" 'substitute)))


;;;
;;; Feeding
;;;

(define (feed-multipart! parser bv start end)
  "Parse the bytes BV [START, END) of a multipart body with PARSER,
calling its callbacks as parts begin, carry data and end.  Return two
values: 'more and END when every byte was used and the body goes on;
'done and the index just past the close delimiter's \"--\" (what follows
is the epilogue, ignored, as is anything fed later); or an &http-error
(400; 413 past MAX-PARTS or MAX-HEADER-BYTES) and the index of the byte
at fault, which the parser returns again from then on.  An exception
raised by a callback leaves through this procedure and the parser
unusable."
  ;; The scan's index hints need indices below 2^32: a read buffer is far
  ;; smaller.
  (unless (and (exact-integer? start) (exact-integer? end)
               (<= 0 start end (bytevector-length bv)) (< end #x100000000))
    (error "feed-multipart!: invalid slice" start end))
  (define (fail status reason at)
    (let ((error (make-http-error status reason at)))
      (set-parser-error! parser error)
      (set-parser-state! parser 'failed)
      (values error at)))
  (let lp ((i start))
    (define (next state)
      (set-parser-state! parser state)
      (lp (+ i 1)))
    (let ((state (parser-state parser)))
      (cond
       ((or (eq? state 'body) (eq? state 'preamble))
        (cond
         ((>= i end) (values 'more end))
         ((> (parser-matched parser) 0) (lp (resume-delimiter! parser bv i end)))
         (else (lp (scan-body! parser bv i end)))))
       ((eq? state 'done) (values 'done i))
       ((eq? state 'failed) (values (parser-error parser) i))
       ((>= i end) (values 'more end))
       ((eq? state 'head)
        (let ((stop (read-head! parser bv i end)))
          (if (= stop end)
              (values 'more end)
              (let ((byte (u8 bv stop)))
                (cond
                 ((eqv? byte 13)
                  (set-parser-state! parser 'head-lf)
                  (lp (+ stop 1)))
                 ((eqv? byte 10) (fail 400 "part head line must end in CRLF" stop))
                 ((and (ows? byte) (zero? (parser-line-length parser)))
                  (fail 400 "obsolete line folding in a part head" stop))
                 ((or (< byte 32) (eqv? byte 127))
                  (fail 400 "control character in a part head" stop))
                 (else (fail 413 "part head too large" stop)))))))
       (else
        (let ((byte (u8 bv i)))
          (case state
            ((head-lf)
             (cond
              ((not (eqv? byte 10)) (fail 400 "part head line must end in CRLF" i))
              ((zero? (parser-line-length parser))
               ;; The blank line: the head is complete, the data starts,
               ;; and this CRLF may also be the start of the delimiter
               ;; that ends an empty part.
               (let ((part (parse-part-head (parser-head parser) (parser-head-length parser)
                                            (- (multipart-parser-parts parser) 1))))
                 (if (string? part)
                     (fail 400 part i)
                     (begin
                       (set-parser-part! parser part)
                       (set-parser-matched! parser 2)
                       (set-parser-held-from! parser 2)
                       (set-parser-state! parser 'body)
                       ((parser-on-part-start parser) part)
                       (lp (+ i 1))))))
              ((not (head-append! parser 10)) (fail 413 "part head too large" i))
              (else
               (set-parser-line-length! parser 0)
               (next 'head))))
            ((after-delimiter)
             (cond
              ((eqv? byte 45) (next 'close-dash))                 ; "-"
              ((eqv? byte 13) (next 'delimiter-lf))
              ((ows? byte) (next 'padding))
              (else (fail 400 "boundary not followed by CRLF or \"--\"" i))))
            ((padding)
             (cond
              ((eqv? byte 13) (next 'delimiter-lf))
              ((ows? byte) (lp (+ i 1)))
              (else (fail 400 "boundary not followed by CRLF" i))))
            ((close-dash)
             (if (eqv? byte 45)
                 (begin
                   (set-parser-state! parser 'done)
                   (values 'done (+ i 1)))
                 (fail 400 "boundary not followed by CRLF or \"--\"" i)))
            ((delimiter-lf)
             (cond
              ((not (eqv? byte 10)) (fail 400 "boundary line must end in CRLF" i))
              ((>= (multipart-parser-parts parser) (parser-max-parts parser))
               (fail 413 "too many parts in a multipart body" i))
              (else
               (set-parser-parts! parser (+ 1 (multipart-parser-parts parser)))
               (set-parser-head-length! parser 0)
               (set-parser-line-length! parser 0)
               (next 'head))))
            (else (error "multipart parser in unknown state" state)))))))))

(define (finish-multipart! parser)
  "Tell PARSER that its input is over.  Return 'done if the close
delimiter was read; otherwise an &http-error: the one the parser already
returned, or a 400 for a body that ends too soon."
  (case (parser-state parser)
    ((done) 'done)
    ((failed) (parser-error parser))
    (else
     (let ((error (make-http-error 400 "multipart body ends before its close delimiter")))
       (set-parser-error! parser error)
       (set-parser-state! parser 'failed)
       error))))

(define-inlinable (emit! sink bv start end)
  (when (< start end)
    (sink bv start (- end start))))

(define (delimiter-found! parser)
  (when (eq? (parser-state parser) 'body)
    (let ((part (parser-part parser)))
      (set-parser-part! parser #f)
      ((parser-on-part-end parser) part)))
  (set-parser-matched! parser 0)
  (set-parser-held-from! parser 0)
  (set-parser-state! parser 'after-delimiter))

(define (scan-body! parser bv start end)
  ;; In a part's data or the preamble with nothing held back: hand over
  ;; the data up to the delimiter or END.  -> the index to go on from
  ;;
  ;; Every index is hinted below 2^32 and `min' is spelled out: without
  ;; that, each CR found costs a call to `min' and boxed indices, which
  ;; shows on data with many CRs (bench/multipart.scm's crlf, an
  ;; interleaved A/B) and hardly on random data.
  (let* ((delimiter (parser-delimiter parser))
         (size (bytevector-length delimiter))
         (sink (if (eq? (parser-state parser) 'body) (parser-on-part-data parser) ignore))
         (end (index-hint end)))
    (let scan ((i (index-hint start)))
      (let ((cr (index-hint (find-cr bv i end))))
        (if (= cr end)
            (begin (emit! sink bv start end) end)
            (let ((available (index-hint (if (< (- end cr) size) (- end cr) size))))
              (let compare ((k 1))
                (cond
                 ((= k available)
                  (emit! sink bv start cr)
                  (if (= k size)
                      (begin (delimiter-found! parser) (+ cr size))
                      ;; The input ends inside what may be the delimiter:
                      ;; keep only how much of it matched.
                      (begin (set-parser-matched! parser k) end)))
                 ((eqv? (u8 bv (index-hint (+ cr k))) (u8 delimiter k)) (compare (+ k 1)))
                 (else (scan (+ cr 1)))))))))))

(define (resume-delimiter! parser bv start end)
  ;; Some of the delimiter was matched at the end of an earlier input:
  ;; go on comparing.  -> the index to go on from
  (let* ((delimiter (parser-delimiter parser))
         (size (bytevector-length delimiter)))
    (let compare ((k (parser-matched parser)) (i start))
      (cond
       ((= k size) (delimiter-found! parser) i)
       ((= i end) (set-parser-matched! parser k) end)
       ((eqv? (u8 bv i) (u8 delimiter k)) (compare (+ k 1) (+ i 1)))
       (else
        ;; Not a delimiter: what matched was data.  Only position 0 of
        ;; the delimiter is a CR (a boundary has none), so no delimiter
        ;; can start inside the bytes matched; the scan goes on at I.
        (let ((held-from (parser-held-from parser)))
          (when (and (eq? (parser-state parser) 'body) (< held-from k))
            ((parser-on-part-data parser) delimiter held-from (- k held-from)))
          (set-parser-matched! parser 0)
          (set-parser-held-from! parser 0)
          i))))))


;;;
;;; Part heads
;;;

(define (head-append! parser byte)
  ;; -> #f if the head would pass MAX-HEADER-BYTES
  (let ((used (parser-head-length parser))
        (head (parser-head parser)))
    (cond
     ((>= used (parser-max-header-bytes parser)) #f)
     (else
      (when (= used (bytevector-length head))
        (let ((bigger (make-bytevector (min (parser-max-header-bytes parser)
                                            (* 2 (bytevector-length head))))))
          (bytevector-copy! head 0 bigger 0 used)
          (set-parser-head! parser bigger)))
      (bytevector-u8-set! (parser-head parser) used byte)
      (set-parser-head-length! parser (+ used 1))
      #t))))

(define (read-head! parser bv start end)
  ;; Copy the bytes of a head line into the head buffer up to its CR.
  ;; -> the index of the first byte not copied: END, the CR, or a byte
  ;; that is invalid here or would pass the limit.
  (let lp ((i start) (line (parser-line-length parser)))
    (define (stop)
      (set-parser-line-length! parser line)
      i)
    (if (>= i end)
        (stop)
        (let ((byte (u8 bv i)))
          (if (or (eqv? byte 13)
                  (and (< byte 32) (not (eqv? byte 9)))
                  (eqv? byte 127)
                  (and (zero? line) (ows? byte))
                  (not (head-append! parser byte)))
              (stop)
              (lp (+ i 1) (+ line 1)))))))

(define (tchar? c)
  (or (char<=? #\a c #\z) (char<=? #\A c #\Z) (char<=? #\0 c #\9)
      (memv c '(#\! #\# #\$ #\% #\& #\' #\* #\+ #\- #\. #\^ #\_ #\` #\| #\~))))

(define (parse-part-head head used index)
  ;; HEAD [0, USED): field lines, each ending in LF.  -> a
  ;; <multipart-part>, or a string saying why the head is malformed.
  (let lines ((start 0) (fields '()))
    (if (< start used)
        (let* ((end (let find ((i start)) (if (eqv? 10 (u8 head i)) i (find (+ i 1)))))
               (colon (let find ((i start))
                        (cond ((= i end) #f)
                              ((eqv? 58 (u8 head i)) i)
                              (else (find (+ i 1)))))))
          (if (not colon)
              "part head line without a colon"
              (let ((name (slice->string head start colon)))
                (if (or (string-null? name) (not (string-every tchar? name)))
                    "invalid field name in a part head"
                    (let* ((value-start (let skip ((i (+ colon 1)))
                                          (if (and (< i end) (ows? (u8 head i)))
                                              (skip (+ i 1))
                                              i)))
                           (value-end (let skip ((i end))
                                        (if (and (> i value-start) (ows? (u8 head (- i 1))))
                                            (skip (- i 1))
                                            i))))
                      (lines (+ end 1)
                             (cons (cons (string->symbol (string-downcase name))
                                         (slice->string head value-start value-end))
                                   fields)))))))
        (make-part index (reverse fields)))))

(define (make-part index fields)
  ;; -> a <multipart-part> from the FIELDS of its head, or a reason string
  (define (only name)
    (let ((found (filter-values name fields)))
      (cond ((null? found) #f)
            ((pair? (cdr found)) 'repeated)
            (else (car found)))))
  (let ((disposition (only 'content-disposition))
        (content-type (only 'content-type)))
    (cond
     ((eq? disposition 'repeated) "repeated Content-Disposition in a part head")
     ((eq? content-type 'repeated) "repeated Content-Type in a part head")
     (else
      (let ((disposition (and disposition (parse-disposition disposition)))
            (content-type (and content-type (parse-media-type content-type))))
        (cond
         ((string? disposition) disposition)
         ((eq? content-type 'invalid) "invalid Content-Type in a part head")
         (else
          (%make-multipart-part index fields
                                (and disposition (car disposition))
                                (and disposition (assq-ref (cdr disposition) 'name))
                                (and disposition (assq-ref (cdr disposition) 'filename))
                                content-type))))))))

(define (filter-values name fields)
  (let lp ((fields fields) (out '()))
    (cond ((null? fields) (reverse out))
          ((eq? (caar fields) name) (lp (cdr fields) (cons (cdar fields) out)))
          (else (lp (cdr fields) out)))))


;;;
;;; Header values with parameters
;;;

;; The grammar of Content-Disposition (RFC 6266, RFC 2183) and of a media
;; type (RFC 9110 §8.3.1): a value, then ";" name "=" (token /
;; quoted-string) parameters with optional whitespace around each part.
;; These parse strings: a part head is a few hundred bytes, read once.

(define (parse-parameters str)
  ;; -> (values first-word ((lower-case-name . value) ...)) in the order
  ;; given, or (values #f #f) if STR is malformed.  FIRST-WORD is a run of
  ;; token characters and "/".
  (define size (string-length str))
  (define (skip-ows i)
    (if (and (< i size) (memv (string-ref str i) '(#\space #\tab))) (skip-ows (+ i 1)) i))
  (define (token-end i slash?)
    (if (and (< i size)
             (let ((c (string-ref str i))) (or (tchar? c) (and slash? (char=? c #\/)))))
        (token-end (+ i 1) slash?)
        i))
  (define (quoted i)
    ;; I: just past the opening quote.  -> (values string index-past-close) or #f
    (let lp ((i i) (chars '()))
      (cond
       ((>= i size) (values #f #f))
       ((char=? (string-ref str i) #\") (values (list->string (reverse chars)) (+ i 1)))
       ((char=? (string-ref str i) #\\)
        (if (< (+ i 1) size)
            (lp (+ i 2) (cons (string-ref str (+ i 1)) chars))
            (values #f #f)))
       (else (lp (+ i 1) (cons (string-ref str i) chars))))))
  (let* ((start (skip-ows 0))
         (end (token-end start #t)))
    (if (= start end)
        (values #f #f)
        (let params ((i (skip-ows end)) (out '()))
          (cond
           ((= i size) (values (substring str start end) (reverse out)))
           ((not (char=? (string-ref str i) #\;)) (values #f #f))
           (else
            (let* ((name-start (skip-ows (+ i 1)))
                   (name-end (token-end name-start #f)))
              (cond
               ((= name-start size) (values (substring str start end) (reverse out)))
               ((char=? (string-ref str name-start) #\;) (params name-start out))
               ((= name-start name-end) (values #f #f))
               (else
                (let ((equals (skip-ows name-end)))
                  (if (not (and (< equals size) (char=? (string-ref str equals) #\=)))
                      (values #f #f)
                      (let ((value-start (skip-ows (+ equals 1)))
                            (name (string-downcase (substring str name-start name-end))))
                        (if (and (< value-start size)
                                 (char=? (string-ref str value-start) #\"))
                            (call-with-values (lambda () (quoted (+ value-start 1)))
                              (lambda (value next)
                                (if value
                                    (params (skip-ows next) (cons (cons name value) out))
                                    (values #f #f))))
                            (let ((value-end (token-end value-start #f)))
                              (if (= value-start value-end)
                                  (values #f #f)
                                  (params (skip-ows value-end)
                                          (cons (cons name (substring str value-start value-end))
                                                out)))))))))))))))))

(define (parse-disposition str)
  ;; -> (type-symbol (name-symbol . value) ...), extended parameters
  ;; (name*) decoded and preferred to plain ones; or a reason string
  (call-with-values (lambda () (parse-parameters str))
    (lambda (type params)
      (cond
       ((or (not type) (string-index type #\/)) "malformed Content-Disposition in a part head")
       ((let repeated? ((names (map car params)))
          (and (pair? names) (or (member (car names) (cdr names)) (repeated? (cdr names)))))
        "repeated parameter in Content-Disposition")
       (else
        (let lp ((params params) (plain '()) (extended '()))
          (if (null? params)
              (cons (string->symbol (string-downcase type))
                    (append (reverse extended)
                            (filter-out (lambda (p) (assq (car p) extended)) (reverse plain))))
              (let* ((name (caar params))
                     (value (cdar params))
                     (star? (string-suffix? "*" name)))
                (if (not star?)
                    (lp (cdr params) (cons (cons (string->symbol name) value) plain) extended)
                    (let ((decoded (decode-extended-value value)))
                      (case decoded
                        ((#f) (string-append "malformed " name " in Content-Disposition"))
                        ((unsupported) (lp (cdr params) plain extended))
                        (else
                         (lp (cdr params) plain
                             (cons (cons (string->symbol
                                          (substring name 0 (- (string-length name) 1)))
                                         decoded)
                                   extended))))))))))))))

(define (filter-out drop? list)
  (let lp ((list list) (out '()))
    (cond ((null? list) (reverse out))
          ((drop? (car list)) (lp (cdr list) out))
          (else (lp (cdr list) (cons (car list) out))))))

(define (hex-value c)
  (cond ((char<=? #\0 c #\9) (- (char->integer c) 48))
        ((char<=? #\a c #\f) (- (char->integer c) 87))
        ((char<=? #\A c #\F) (- (char->integer c) 55))
        (else #f)))

(define (decode-extended-value str)
  ;; RFC 8187 §3.2.1: charset "'" [language] "'" value-chars, with
  ;; %-escapes.  -> the decoded string, 'unsupported for a charset other
  ;; than UTF-8 and ISO-8859-1, or #f if malformed
  (let* ((quote1 (string-index str #\'))
         (quote2 (and quote1 (string-index str #\' (+ quote1 1)))))
    (and quote2
         (let ((charset (string-downcase (substring str 0 quote1)))
               (size (string-length str)))
           (let lp ((i (+ quote2 1)) (bytes '()))
             (cond
              ((= i size)
               (let ((bv (u8-list->bytevector (reverse bytes))))
                 (cond ((string=? charset "utf-8") (bytevector->string bv "UTF-8" 'substitute))
                       ((string=? charset "iso-8859-1") (bytevector->string bv "ISO-8859-1"))
                       (else 'unsupported))))
              ((char=? (string-ref str i) #\%)
               (let ((high (and (< (+ i 2) size) (hex-value (string-ref str (+ i 1)))))
                     (low (and (< (+ i 2) size) (hex-value (string-ref str (+ i 2))))))
                 (and high low (lp (+ i 3) (cons (+ (* 16 high) low) bytes)))))
              ((char=? (string-ref str i) #\') #f)
              ((> (char->integer (string-ref str i)) 127) #f)
              (else (lp (+ i 1) (cons (char->integer (string-ref str i)) bytes)))))))))

(define (parse-media-type str)
  ;; -> (type/subtype-symbol (param-symbol . value) ...), names in lower
  ;; case, values unquoted; or 'invalid
  (call-with-values (lambda () (parse-parameters str))
    (lambda (type params)
      (let ((slash (and type (string-index type #\/))))
        (if (and slash
                 (> slash 0)
                 (< (+ slash 1) (string-length type))
                 (not (string-index type #\/ (+ slash 1))))
            (cons (string->symbol (string-downcase type))
                  (map (lambda (p) (cons (string->symbol (car p)) (cdr p))) params))
            'invalid)))))

(define (content-type-boundary type)
  "Return the boundary of TYPE, a multipart Content-Type value as Guile's
(web http) parses it, such as (multipart/form-data (boundary . \"xyz\")),
or as a string, such as plucky's parser keeps a value Guile rejects.
Return #f if TYPE is not multipart or has no valid boundary.  Case is
ignored in the type and the parameter name; quotes are removed (Guile
keeps them)."
  (define (unquoted value)
    (if (and (> (string-length value) 1) (string-prefix? "\"" value))
        (call-with-values (lambda () (parse-parameters (string-append "x;b=" value)))
          (lambda (word params) (and word (= 1 (length params)) (cdar params))))
        value))
  (call-with-values
      (lambda ()
        (cond
         ((string? type) (parse-parameters type))
         ((and (pair? type) (symbol? (car type)) (list? (cdr type))
               (and-map (lambda (p) (and (pair? p) (symbol? (car p)) (string? (cdr p))))
                        (cdr type)))
          (values (symbol->string (car type))
                  (map (lambda (p)
                         (cons (string-downcase (symbol->string (car p))) (unquoted (cdr p))))
                       (cdr type))))
         (else (values #f #f))))
    (lambda (name params)
      (and name
           (string-prefix-ci? "multipart/" name)
           (let ((boundary (assoc-ref params "boundary")))
             (and boundary (valid-boundary? boundary) boundary))))))

;;; (plucky http multipart) ends here
