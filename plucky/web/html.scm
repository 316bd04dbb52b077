;;; (plucky web html) --- SXML written out as HTML5

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A page is SXML, as with Guile's (sxml simple):
;;;
;;;   `(html (head (title ,title))
;;;          (body (h1 (@ (class "big")) ,title)
;;;                (input (@ (type "checkbox") (checked #t) (disabled #f)))
;;;                (ul ,@(map (lambda (x) `(li ,x)) items))))
;;;
;;; and `write-html' writes it to a port as HTML5, not XML:
;;;
;;;  - an element is (TAG (@ (NAME VALUE) …) CHILD …); TAG and NAME are
;;;    symbols whose spelling is checked once (a tag or attribute name
;;;    that HTML cannot carry, `onclick=x' or `a b', is an error, never
;;;    written);
;;;  - an attribute's VALUE is a string or a number, escaped; #t writes
;;;    the name alone (a boolean attribute), #f leaves the attribute out;
;;;  - a child is a string or a number (text, escaped), an element, a
;;;    list of children (what `map' returns), or #f or '() (nothing, for
;;;    `,(and logged-in? '(a …))');
;;;  - text and attribute values escape & < > " ' as character references;
;;;    NUL and the other C0 control characters but tab, newline, form
;;;    feed and carriage return, which an HTML parser rejects, become
;;;    U+FFFD;
;;;  - void elements (br, img, input, meta, link, …) have no end tag and
;;;    may have no children;
;;;  - script and style hold raw text: their strings are written as they
;;;    are, and one that could end the element early ("</script") is an
;;;    error;
;;;  - HTML from elsewhere (a trusted template, a Markdown renderer) goes
;;;    in only when asked for: (raw "<b>ok</b>") makes a <raw> record,
;;;    written unescaped.  A string is always text.
;;;  - a tree whose root is an html element is preceded by <!DOCTYPE html>.
;;;
;;; Where the time goes (bench/html, against Guile's `sxml->xml'): the
;;; page is encoded as UTF-8 into one byte buffer, kept between pages,
;;; and reaches the port in one `put-bytevector' (see "The buffer"
;;; below); no string is made for a node.  The start and end tags of
;;; each tag name, and " name=\"" of each attribute name, are bytes made
;;; and checked once and kept in a table by symbol.
;;;
;;; `html->bytevector' gives the UTF-8 bytes (a response body with its
;;; Content-Length); `html-response' the (values response body) a handler
;;; returns.
;;;
;;; Code:

(define-module (plucky web html)
  #:use-module (srfi srfi-9)
  #:use-module (rnrs bytevectors)
  #:use-module (ice-9 binary-ports)
  #:use-module (ice-9 atomic)
  #:use-module (ice-9 textual-ports)
  ;; Loaded at the first response that needs a record: see (plucky http
  ;; response) on start-up.
  #:autoload (web response) (build-response)
  #:export (write-html
            html->bytevector
            html->string
            html-response
            raw
            raw?
            raw-html))

;;;
;;; Raw HTML
;;;

(define-record-type <raw>
  (make-raw html)
  raw?
  (html raw-html))

(define (raw html)
  "Return a <raw> record of HTML, a string that `write-html' writes as it
is, unescaped: for HTML the app trusts, never for what a user typed."
  (unless (string? html)
    (error "raw: expects a string" html))
  (make-raw html))

;;;
;;; The buffer
;;;

;; The page is written as UTF-8 into a growing bytevector, then to the
;; port in one `put-bytevector'.  Each `put-string' on a Guile port locks
;; and encodes: a page is thousands of small pieces, and writing them
;; one by one to a string port made write-html slower than sxml->xml
;; (bench/html).  Tags and attribute names are copied as bytes made
;; once; text is encoded here, a character at a time, with the escapes.
;;
;; Every put-X below takes the sink and AT, the index of the page's next
;; byte, and returns the index after what it wrote: the position lives
;; in the VM's registers, not in a record field written at each piece
;; (bench/html).  The bytevector is only replaced, bigger, by `room'.

(define-record-type <sink>
  (make-sink bytes)
  sink?
  (bytes sink-bytes set-sink-bytes!))   ; bytevector, grown by doubling

;; One buffer is kept between pages and reused, a page's worth of
;; garbage fewer for each (bench/html shows the collector's share of a
;; page's time).  A thread that finds it taken makes its own.
(define spare-sink (make-atomic-box #f))

(define (take-sink)
  (or (atomic-box-swap! spare-sink #f)
      (make-sink (make-bytevector 16384))))

(define (give-back-sink! sink)
  ;; a buffer grown past 1 MiB for one huge page is not kept
  (when (<= (bytevector-length (sink-bytes sink)) (* 1024 1024))
    (atomic-box-set! spare-sink sink)))

(define (grow! sink at n)
  (let* ((old (sink-bytes sink))
         (new (make-bytevector (max (* 2 (bytevector-length old)) (+ at n)))))
    (bytevector-copy! old 0 new 0 at)
    (set-sink-bytes! sink new)
    new))

(define-inlinable (room sink at n)
  ;; -> SINK's bytevector, with room for N bytes at AT and a word more,
  ;; which `copy-piece!' may write past its piece
  (let ((bytes (sink-bytes sink)))
    (if (<= (+ at n 8) (bytevector-length bytes))
        bytes
        (grow! sink at (+ n 8)))))

(define-inlinable (put-byte sink at byte)
  (bytevector-u8-set! (room sink at 1) at byte)
  (+ at 1))

;; A piece is the bytes of a tag, an attribute's name or an escape, made
;; once: (BYTES . N), N bytes of UTF-8 in BYTES padded with zeros to a
;; whole number of 8-byte words.  It is copied a word at a time, which
;; for these few bytes costs less than a byte loop or a call of
;; bytevector-copy! (bench/html).

(define (string->piece text)
  (let* ((utf8 (string->utf8 text))
         (n (bytevector-length utf8))
         (bytes (make-bytevector (* 8 (quotient (+ n 7) 8)) 0)))
    (bytevector-copy! utf8 0 bytes 0 n)
    (cons bytes n)))

(define-inlinable (copy-piece! piece bytes at)
  ;; PIECE into BYTES at AT, with the room of `room' -> the index after
  ;; it.  The mask, a no-op on an index, lets the compiler keep AT in a
  ;; machine register.
  (let ((from (car piece))
        (at (logand at #xFFFFFFFFFFFF)))
    (let lp ((i 0))
      (when (< i (bytevector-length from))
        (bytevector-u64-native-set! bytes (+ at i) (bytevector-u64-native-ref from i))
        (lp (+ i 8))))
    (+ at (cdr piece))))

(define-inlinable (put-piece sink at piece)
  (copy-piece! piece (room sink at (cdr piece)) at))

;;;
;;; Names
;;;

(define void-elements
  '(area base br col embed hr img input link meta source track wbr))

(define raw-text-elements '(script style))

(define (name-char? c)
  ;; What an attribute or tag name may hold here: ASCII letters, digits
  ;; and - _ : . — enough for every HTML, SVG and data-/aria- name, and
  ;; no character (space, quote, =, >, /) that would end the name.
  (and (char<? c #\x80)
       (or (char-alphabetic? c) (char-numeric? c) (memv c '(#\- #\_ #\: #\.)))))

(define (check-name! what symbol)
  (let ((name (and (symbol? symbol) (symbol->string symbol))))
    (unless (and name
                 (> (string-length name) 0)
                 (char-alphabetic? (string-ref name 0))
                 (string-every name-char? name))
      (error (string-append "write-html: not a valid " what " name") symbol))
    name))

;; What a tag name is written as, made and checked once.
(define-record-type <tag>
  (make-tag open start end kind)
  tag?
  (open tag-open)                       ; bytes of "<div", attributes follow
  (start tag-start)                     ; bytes of "<div>"
  (end tag-end)                         ; bytes of "</div>"
  (kind tag-kind))                      ; 'void, 'raw-text or 'normal

;; tag symbol -> <tag>, filled as tags are first seen.  A hash table,
;; shared by threads: an entry is added whole, and two threads adding
;; the same one add equal values.
(define tags (make-hash-table 64))

(define (tag-info tag)
  (or (hashq-ref tags tag)
      (let* ((name (check-name! "tag" tag))
             (info (make-tag (string->piece (string-append "<" name))
                             (string->piece (string-append "<" name ">"))
                             (string->piece (string-append "</" name ">"))
                             (cond ((memq tag void-elements) 'void)
                                   ((memq tag raw-text-elements) 'raw-text)
                                   (else 'normal)))))
        (hashq-set! tags tag info)
        info)))

;; attribute symbol -> (" name" . " name=\"") as bytes, checked once
(define attributes (make-hash-table 64))

(define (attribute-info name)
  (or (hashq-ref attributes name)
      (let* ((text (check-name! "attribute" name))
             (info (cons (string->piece (string-append " " text))
                         (string->piece (string-append " " text "=\"")))))
        (hashq-set! attributes name info)
        info)))

;;;
;;; Text
;;;

;; The characters below 128 that are not written as themselves: their
;; index in `escapes', 0 for the others.  & < > " ' become character
;; references; NUL and the C0 controls an HTML parser rejects become
;; U+FFFD; tab, newline, form feed and return stay.
(define ascii-classes
  (let ((table (make-bytevector 128 0)))
    (do ((i 0 (+ i 1))) ((= i 32))
      (unless (memv i '(9 10 12 13))
        (bytevector-u8-set! table i 1)))
    (bytevector-u8-set! table 127 1)
    (for-each (lambda (c i) (bytevector-u8-set! table (char->integer c) i))
              '(#\& #\< #\> #\" #\') '(2 3 4 5 6))
    table))

(define escapes
  (list->vector
   (cons #f (map string->piece '("\uFFFD" "&amp;" "&lt;" "&gt;" "&quot;" "&#39;")))))

;; `put-utf8!' is a macro, needed while this file is compiled only.
(eval-when (expand)
  (use-modules ((plucky http) #:select (put-utf8!))))

(define (put-utf8 bytes at n)
  ;; code point N (at least 128) as UTF-8 at AT -> the index after it
  (put-utf8! bytes at n))

(define (put-escape bytes at class)
  ;; the escape of CLASS (see `ascii-classes') at AT -> the index after it
  (copy-piece! (vector-ref escapes class) bytes at))

(define (escape! bytes at text classes)
  ;; TEXT as UTF-8, escaped as CLASSES says (`ascii-classes' or
  ;; `no-escapes'), into BYTES at AT, which has room for it -> the index
  ;; after it.
  ;;
  ;; The writer's hottest loop, shaped for Guile's compiler
  ;; (bench/html): the inner loop copies a run of characters that stand
  ;; for themselves and counts only I, the string's index; the byte
  ;; index is I plus DELTA, fixed for the run, and the mask (a no-op: AT
  ;; indexes a bytevector) tells the compiler that DELTA is a machine
  ;; integer.  With both unboxed, no generic arithmetic is left in it.
  (let ((end (string-length text)))
    (let run ((i 0) (at at))
      (let ((delta (- (logand at #xFFFFFFFFFFFF) i)))
        (let copy ((i i))
          (if (< i end)
              (let ((n (char->integer (string-ref text i))))
                (cond
                 ((>= n 128)
                  (run (+ i 1) (put-utf8 bytes (+ delta i) n)))
                 ((eqv? (bytevector-u8-ref classes n) 0)
                  (bytevector-u8-set! bytes (+ delta i) n)
                  (copy (+ i 1)))
                 (else
                  (run (+ i 1) (put-escape bytes (+ delta i)
                                           (bytevector-u8-ref classes n))))))
              (+ delta i)))))))

(define-inlinable (text-room text)
  ;; The most bytes TEXT can take escaped: six a character ("&quot;"); a
  ;; character past U+FFFF is two of UTF-16's but one here, of four bytes.
  (* 6 (string-length text)))

(define (put-text sink at text)
  (escape! (room sink at (text-room text)) at text ascii-classes))

;; For text written as it is: raw HTML, a script's or a style's text.
(define no-escapes (make-bytevector 128 0))

(define (put-unescaped sink at text)
  ;; four bytes a character at most, unescaped
  (escape! (room sink at (* 4 (string-length text))) at text no-escapes))

(define (put-raw-text sink at tag text)
  ;; The content of a script or style element: as it is, unless it could
  ;; end the element or holds a NUL.
  (when (or (and (string-index text #\<) ; most scripts and styles have none
                 (string-contains-ci text (string-append "</" (symbol->string tag))))
            (string-index text #\nul))
    (error "write-html: text that would end the element early" tag text))
  (put-unescaped sink at text))

;;;
;;; Elements
;;;

(define (put-attribute sink at attribute)
  ;; One room check for the name, the value and the quote: an attribute
  ;; is the commonest piece of a page after text (bench/html).
  (unless (and (pair? attribute) (pair? (cdr attribute)) (null? (cddr attribute)))
    (error "write-html: an attribute is (NAME VALUE)" attribute))
  (let ((name (car attribute))
        (value (cadr attribute)))
    (cond
     ((string? value)
      (let* ((open (cdr (attribute-info name)))
             (bytes (room sink at (+ (cdr open) (text-room value) 1)))
             (at (escape! bytes (copy-piece! open bytes at) value ascii-classes)))
        (bytevector-u8-set! bytes at 34) ; "
        (+ at 1)))
     ((eq? value #f) at)
     ((eq? value #t) (put-piece sink at (car (attribute-info name))))
     ((or (number? value) (symbol? value))
      (put-attribute sink at (list name (if (number? value)
                                            (number->string value)
                                            (symbol->string value)))))
     (else (error "write-html: an attribute value is a string, a number or a boolean"
                  name value)))))

(define (put-element sink at node)
  (let* ((tag (car node))
         (info (tag-info tag))
         (rest (cdr node)))
    (if (and (pair? rest) (pair? (car rest)) (eq? (caar rest) '@))
        (let lp ((attributes (cdar rest))
                         (at (put-piece sink at (tag-open info))))
          (if (pair? attributes)
              (lp (cdr attributes) (put-attribute sink at (car attributes)))
              (put-content sink (put-byte sink at 62) tag info (cdr rest)))) ; >
        (put-content sink (put-piece sink at (tag-start info)) tag info rest))))

(define (put-content sink at tag info children)
  ;; CHILDREN of the element TAG and its end tag
  (case (tag-kind info)
    ((normal) (put-piece sink (put-nodes sink at children) (tag-end info)))
    ((void)
     (unless (null? children)
       (error "write-html: a void element has no content" tag children))
     at)
    (else                               ; raw-text
     (let lp ((children children) (at at))
       (if (pair? children)
           (let ((child (car children)))
             (lp (cdr children)
                 (cond ((string? child) (put-raw-text sink at tag child))
                       ((raw? child) (put-unescaped sink at (raw-html child)))
                       (else (error "write-html: script and style hold text only"
                                    tag child)))))
           (put-piece sink at (tag-end info)))))))

(define (put-nodes sink at nodes)
  (if (pair? nodes)
      (put-nodes sink (put-node sink at (car nodes)) (cdr nodes))
      at))

(define (put-node sink at node)
  (cond
   ((string? node) (put-text sink at node))
   ((pair? node)
    (if (symbol? (car node))
        (case (car node)
          ;; (*TOP* …) as (sxml simple) makes; comments and processing
          ;; instructions are not HTML's and are left out.
          ((*TOP*) (put-nodes sink at (cdr node)))
          ((*COMMENT* *PI* @) at)
          (else (put-element sink at node)))
        (put-nodes sink at node)))
   ((or (null? node) (not node)) at)
   ((number? node) (put-text sink at (number->string node)))
   ((raw? node) (put-unescaped sink at (raw-html node)))
   ((unspecified? node) at)
   (else (error "write-html: not an SXML node" node))))

(define doctype (string->piece "<!DOCTYPE html>\n"))

(define (call-with-page tree proc)
  ;; -> what (PROC BYTES END) returns, BYTES[0, END) being TREE's page
  (let* ((sink (take-sink))
         (at (if (and (pair? tree) (eq? (car tree) 'html))
                 (put-piece sink 0 doctype)
                 0))
         (end (put-node sink at tree))
         (result (proc (sink-bytes sink) end)))
    (give-back-sink! sink)
    result))

(define* (write-html tree #:optional (port (current-output-port)))
  "Write TREE, SXML, to PORT as HTML5 in UTF-8 (see the commentary of
(plucky web html)), preceded by <!DOCTYPE html> when its root is an html
element.  Return an unspecified value.  Raise an error, and write
nothing, for a tag or attribute name HTML cannot carry or a node that is
not SXML."
  (call-with-page tree (lambda (bytes end) (put-bytevector port bytes 0 end))))

(define (html->string tree)
  "Return the HTML5 text of TREE, SXML, as `write-html' writes it."
  (utf8->string (html->bytevector tree)))

(define (html->bytevector tree)
  "Return the UTF-8 bytes of the HTML5 text of TREE, SXML, as
`write-html' writes it."
  (call-with-page tree
                  (lambda (bytes end)
                    (let ((copy (make-bytevector end)))
                      (bytevector-copy! bytes 0 copy 0 end)
                      copy))))

(define html-type '((content-type . (text/html (charset . "utf-8")))))

(define* (html-response tree #:key (code 200) (headers '()))
  "Return two values, a response and a body, that answer with TREE, SXML,
as an HTML5 page of status CODE: the body is its UTF-8 bytes (see
`html->bytevector'), the response a header alist, HEADERS followed by
Content-Type: text/html; charset=utf-8, or a (web response) record when
CODE is not 200."
  (let ((headers (if (assq 'content-type headers) headers (append headers html-type)))
        (body (html->bytevector tree)))
    (values (if (= code 200)
                headers
                (build-response #:code code #:headers headers))
            body)))

;;; (plucky web html) ends here
