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

(define-record-type <sink>
  (make-sink bytes fill)
  sink?
  (bytes sink-bytes set-sink-bytes!)    ; bytevector, grown by doubling
  (fill sink-fill set-sink-fill!))      ; bytes used

;; One buffer is kept between pages and reused, a page's worth of
;; garbage fewer for each (bench/html shows the collector's share of a
;; page's time).  A thread that finds it taken makes its own.
(define spare-sink (make-atomic-box #f))

(define (take-sink)
  (let ((sink (atomic-box-swap! spare-sink #f)))
    (if sink
        (begin (set-sink-fill! sink 0) sink)
        (make-sink (make-bytevector 16384) 0))))

(define (give-back-sink! sink)
  ;; a buffer grown past 1 MiB for one huge page is not kept
  (when (<= (bytevector-length (sink-bytes sink)) (* 1024 1024))
    (atomic-box-set! spare-sink sink)))

(define (reserve! sink n)
  ;; -> the index to write N more bytes at, the room being there
  (let* ((bytes (sink-bytes sink))
         (fill (sink-fill sink))
         (size (bytevector-length bytes)))
    (when (> (+ fill n) size)
      (let ((new (make-bytevector (max (* 2 size) (+ fill n)))))
        (bytevector-copy! bytes 0 new 0 fill)
        (set-sink-bytes! sink new)))
    fill))

(define (put-bytes! sink bv)
  (let* ((n (bytevector-length bv))
         (at (reserve! sink n))
         (bytes (sink-bytes sink)))
    (if (< n 32)
        ;; A tag or a name: a loop of the VM's own byte operations costs
        ;; a fraction of a call of bytevector-copy! (bench/html).
        (let lp ((i 0))
          (when (< i n)
            (bytevector-u8-set! bytes (+ at i) (bytevector-u8-ref bv i))
            (lp (+ i 1))))
        (bytevector-copy! bv 0 bytes at n))
    (set-sink-fill! sink (+ at n))))

(define (put-byte! sink byte)
  (let ((at (reserve! sink 1)))
    (bytevector-u8-set! (sink-bytes sink) at byte)
    (set-sink-fill! sink (+ at 1))))

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

;; tag symbol -> #(start-open end-tag kind): the bytes of "<div" and of
;; "</div>", and 'void, 'raw-text or 'normal.  Filled as tags are first
;; seen; names are checked then, not at each use.  A hash table, shared
;; by threads: an entry is added whole, and two threads adding the same
;; one add equal values.
(define tags (make-hash-table 64))

(define (tag-info tag)
  (or (hashq-ref tags tag)
      (let* ((name (check-name! "tag" tag))
             (info (vector (string->utf8 (string-append "<" name))
                           (string->utf8 (string-append "</" name ">"))
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
             (info (cons (string->utf8 (string-append " " text))
                         (string->utf8 (string-append " " text "=\"")))))
        (hashq-set! attributes name info)
        info)))

;;;
;;; Text
;;;

;; What the characters below 128 become: #f for themselves, else the
;; bytes of their escape.  NUL and the C0 controls an HTML parser
;; rejects become U+FFFD; tab, newline, form feed and return stay.
(define ascii-escapes
  (let ((table (make-vector 128 #f))
        (fffd (string->utf8 "\uFFFD")))
    (do ((i 0 (+ i 1))) ((= i 32))
      (unless (memv i '(9 10 12 13))
        (vector-set! table i fffd)))
    (vector-set! table 127 fffd)
    (for-each (lambda (c+text)
                (vector-set! table (char->integer (car c+text)) (string->utf8 (cdr c+text))))
              '((#\& . "&amp;") (#\< . "&lt;") (#\> . "&gt;")
                (#\" . "&quot;") (#\' . "&#39;")))
    table))

(define (put-escaped! sink text)
  ;; TEXT as UTF-8, escaped.  Room for the worst case is made once: six
  ;; bytes a character ("&quot;"); a character past U+FFFF is two of
  ;; UTF-16's but one here, of four bytes.
  (let ((end (string-length text)))
    (reserve! sink (* 6 end))
    (let ((bytes (sink-bytes sink)))
      (let lp ((i 0) (at (sink-fill sink)))
        (if (= i end)
            (set-sink-fill! sink at)
            (let ((n (char->integer (string-ref text i))))
              (cond
               ((< n 128)
                (let ((escape (vector-ref ascii-escapes n)))
                  (if escape
                      (let ((m (bytevector-length escape)))
                        (bytevector-copy! escape 0 bytes at m)
                        (lp (+ i 1) (+ at m)))
                      (begin
                        (bytevector-u8-set! bytes at n)
                        (lp (+ i 1) (+ at 1))))))
               ((< n #x800)
                (bytevector-u8-set! bytes at (logior #xC0 (ash n -6)))
                (bytevector-u8-set! bytes (+ at 1) (logior #x80 (logand n #x3F)))
                (lp (+ i 1) (+ at 2)))
               ((< n #x10000)
                (bytevector-u8-set! bytes at (logior #xE0 (ash n -12)))
                (bytevector-u8-set! bytes (+ at 1) (logior #x80 (logand (ash n -6) #x3F)))
                (bytevector-u8-set! bytes (+ at 2) (logior #x80 (logand n #x3F)))
                (lp (+ i 1) (+ at 3)))
               (else
                (bytevector-u8-set! bytes at (logior #xF0 (ash n -18)))
                (bytevector-u8-set! bytes (+ at 1) (logior #x80 (logand (ash n -12) #x3F)))
                (bytevector-u8-set! bytes (+ at 2) (logior #x80 (logand (ash n -6) #x3F)))
                (bytevector-u8-set! bytes (+ at 3) (logior #x80 (logand n #x3F)))
                (lp (+ i 1) (+ at 4))))))))))

(define (put-raw-text! sink tag text)
  ;; The content of a script or style element: as it is, unless it could
  ;; end the element or holds a NUL.
  (let ((end-tag (string-append "</" (symbol->string tag))))
    (when (or (string-contains-ci text end-tag) (string-index text #\nul))
      (error "write-html: text that would end the element early" tag text))
    (put-bytes! sink (string->utf8 text))))

;;;
;;; Elements
;;;

(define (put-attributes! sink attributes)
  (for-each
   (lambda (attribute)
     (unless (and (pair? attribute) (pair? (cdr attribute)) (null? (cddr attribute)))
       (error "write-html: an attribute is (NAME VALUE)" attribute))
     (let ((name (car attribute))
           (value (cadr attribute)))
       (cond
        ((eq? value #f) #t)
        ((eq? value #t) (put-bytes! sink (car (attribute-info name))))
        (else
         (let ((open (cdr (attribute-info name))))
           (cond
            ((string? value) (put-bytes! sink open) (put-escaped! sink value))
            ((number? value) (put-bytes! sink open) (put-escaped! sink (number->string value)))
            ((symbol? value) (put-bytes! sink open) (put-escaped! sink (symbol->string value)))
            (else (error "write-html: an attribute value is a string, a number or a boolean"
                         name value))))
         (put-byte! sink 34)))))          ; "
   attributes))

(define (put-element! sink node)
  (let* ((tag (car node))
         (info (tag-info tag))
         (rest (cdr node)))
    (put-bytes! sink (vector-ref info 0))
    (let ((children (if (and (pair? rest) (pair? (car rest)) (eq? (caar rest) '@))
                        (begin (put-attributes! sink (cdar rest)) (cdr rest))
                        rest)))
      (put-byte! sink 62)                ; >
      (case (vector-ref info 2)
        ((void)
         (unless (null? children)
           (error "write-html: a void element has no content" tag children)))
        ((raw-text)
         (for-each (lambda (child)
                     (cond ((string? child) (put-raw-text! sink tag child))
                           ((raw? child) (put-bytes! sink (string->utf8 (raw-html child))))
                           (else (error "write-html: script and style hold text only"
                                        tag child))))
                   children)
         (put-bytes! sink (vector-ref info 1)))
        (else
         (put-nodes! sink children)
         (put-bytes! sink (vector-ref info 1)))))))

(define (put-nodes! sink nodes)
  (let lp ((nodes nodes))
    (when (pair? nodes)
      (put-node! sink (car nodes))
      (lp (cdr nodes)))))

(define (put-node! sink node)
  (cond
   ((string? node) (put-escaped! sink node))
   ((pair? node)
    (if (symbol? (car node))
        (case (car node)
          ;; (*TOP* …) as (sxml simple) makes; comments and processing
          ;; instructions are not HTML's and are left out.
          ((*TOP*) (put-nodes! sink (cdr node)))
          ((*COMMENT* *PI* @) #t)
          (else (put-element! sink node)))
        (put-nodes! sink node)))
   ((or (null? node) (not node)) #t)
   ((number? node) (put-escaped! sink (number->string node)))
   ((raw? node) (put-bytes! sink (string->utf8 (raw-html node))))
   ((unspecified? node) #t)
   (else (error "write-html: not an SXML node" node))))

(define doctype (string->utf8 "<!DOCTYPE html>\n"))

(define (tree->sink tree)
  ;; -> a sink taken with `take-sink' holding TREE's bytes: give it back
  (let ((sink (take-sink)))
    (when (and (pair? tree) (eq? (car tree) 'html))
      (put-bytes! sink doctype))
    (put-node! sink tree)
    sink))

(define* (write-html tree #:optional (port (current-output-port)))
  "Write TREE, SXML, to PORT as HTML5 in UTF-8 (see the commentary of
(plucky web html)), preceded by <!DOCTYPE html> when its root is an html
element.  Return an unspecified value.  Raise an error, and write
nothing, for a tag or attribute name HTML cannot carry or a node that is
not SXML."
  (let ((sink (tree->sink tree)))
    (put-bytevector port (sink-bytes sink) 0 (sink-fill sink))
    (give-back-sink! sink)))

(define (html->string tree)
  "Return the HTML5 text of TREE, SXML, as `write-html' writes it."
  (utf8->string (html->bytevector tree)))

(define (html->bytevector tree)
  "Return the UTF-8 bytes of the HTML5 text of TREE, SXML, as
`write-html' writes it."
  (let* ((sink (tree->sink tree))
         (fill (sink-fill sink))
         (copy (make-bytevector fill)))
    (bytevector-copy! (sink-bytes sink) 0 copy 0 fill)
    (give-back-sink! sink)
    copy))

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
