;;; (plucky http hpack) --- HPACK decoding, HTTP/2's header compression

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A request's header block (RFC 7541) decoded in Scheme: the static
;;; table, the dynamic table the client fills (a ring of (name . value)
;;; bytevectors, newest first), integers with their prefixes, string
;;; literals, Huffman-coded or not.  `decode-header-block!' hands each
;;; field to a procedure as it is decoded.
;;;
;;; Why not nghttp2's decoder, which (plucky sys nghttp2) binds: it
;;; decodes one field per call, and a call out through the FFI costs
;;; some 2,000 instructions, more than decoding a field here
;;; (bench/instructions-h2).  A client's fields are mostly one byte each
;;; once its table holds them (an index), and an index is read here
;;; without a copy.  Huffman decoding walks a tree bit by bit: it is only
;;; met in literals, the first time a client sends a field.
;;;
;;; A response's head is encoded here too (`encode-response-head'),
;;; without the dynamic table nor Huffman coding: names from the static
;;; table where it has them, values as they are.  That costs a client
;;; some bytes per response that an indexing encoder would save, and
;;; costs the server less than a call to one (bench/instructions-h2).
;;;
;;; Code:

(define-module (plucky http hpack)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:export (make-header-decoder
            header-decoder?
            header-decoder-size
            decode-header-block!
            encode-response-head
            response-head-bound))

(define (vector-map-1 f v)
  (let ((out (make-vector (vector-length v))))
    (let lp ((i 0))
      (when (< i (vector-length v))
        (vector-set! out i (f (vector-ref v i)))
        (lp (+ i 1))))
    out))

;; RFC 7541 Appendix A: index 1 to 61, (name . value)
(define static-entries
  '#((":authority" . "")
    (":method" . "GET")
    (":method" . "POST")
    (":path" . "/")
    (":path" . "/index.html")
    (":scheme" . "http")
    (":scheme" . "https")
    (":status" . "200")
    (":status" . "204")
    (":status" . "206")
    (":status" . "304")
    (":status" . "400")
    (":status" . "404")
    (":status" . "500")
    ("accept-charset" . "")
    ("accept-encoding" . "gzip, deflate")
    ("accept-language" . "")
    ("accept-ranges" . "")
    ("accept" . "")
    ("access-control-allow-origin" . "")
    ("age" . "")
    ("allow" . "")
    ("authorization" . "")
    ("cache-control" . "")
    ("content-disposition" . "")
    ("content-encoding" . "")
    ("content-language" . "")
    ("content-length" . "")
    ("content-location" . "")
    ("content-range" . "")
    ("content-type" . "")
    ("cookie" . "")
    ("date" . "")
    ("etag" . "")
    ("expect" . "")
    ("expires" . "")
    ("from" . "")
    ("host" . "")
    ("if-match" . "")
    ("if-modified-since" . "")
    ("if-none-match" . "")
    ("if-range" . "")
    ("if-unmodified-since" . "")
    ("last-modified" . "")
    ("link" . "")
    ("location" . "")
    ("max-forwards" . "")
    ("proxy-authenticate" . "")
    ("proxy-authorization" . "")
    ("range" . "")
    ("referer" . "")
    ("refresh" . "")
    ("retry-after" . "")
    ("server" . "")
    ("set-cookie" . "")
    ("strict-transport-security" . "")
    ("transfer-encoding" . "")
    ("user-agent" . "")
    ("vary" . "")
    ("via" . "")
    ("www-authenticate" . "")))

;; RFC 7541 Appendix B: the code of each byte, and its length in bits
(define huffman-codes
  #(#x1ff8 #x7fffd8 #xfffffe2 #xfffffe3 #xfffffe4 #xfffffe5 #xfffffe6 #xfffffe7
    #xfffffe8 #xffffea #x3ffffffc #xfffffe9 #xfffffea #x3ffffffd #xfffffeb #xfffffec
    #xfffffed #xfffffee #xfffffef #xffffff0 #xffffff1 #xffffff2 #x3ffffffe #xffffff3
    #xffffff4 #xffffff5 #xffffff6 #xffffff7 #xffffff8 #xffffff9 #xffffffa #xffffffb
    #x14 #x3f8 #x3f9 #xffa #x1ff9 #x15 #xf8 #x7fa
    #x3fa #x3fb #xf9 #x7fb #xfa #x16 #x17 #x18
    #x0 #x1 #x2 #x19 #x1a #x1b #x1c #x1d
    #x1e #x1f #x5c #xfb #x7ffc #x20 #xffb #x3fc
    #x1ffa #x21 #x5d #x5e #x5f #x60 #x61 #x62
    #x63 #x64 #x65 #x66 #x67 #x68 #x69 #x6a
    #x6b #x6c #x6d #x6e #x6f #x70 #x71 #x72
    #xfc #x73 #xfd #x1ffb #x7fff0 #x1ffc #x3ffc #x22
    #x7ffd #x3 #x23 #x4 #x24 #x5 #x25 #x26
    #x27 #x6 #x74 #x75 #x28 #x29 #x2a #x7
    #x2b #x76 #x2c #x8 #x9 #x2d #x77 #x78
    #x79 #x7a #x7b #x7ffe #x7fc #x3ffd #x1ffd #xffffffc
    #xfffe6 #x3fffd2 #xfffe7 #xfffe8 #x3fffd3 #x3fffd4 #x3fffd5 #x7fffd9
    #x3fffd6 #x7fffda #x7fffdb #x7fffdc #x7fffdd #x7fffde #xffffeb #x7fffdf
    #xffffec #xffffed #x3fffd7 #x7fffe0 #xffffee #x7fffe1 #x7fffe2 #x7fffe3
    #x7fffe4 #x1fffdc #x3fffd8 #x7fffe5 #x3fffd9 #x7fffe6 #x7fffe7 #xffffef
    #x3fffda #x1fffdd #xfffe9 #x3fffdb #x3fffdc #x7fffe8 #x7fffe9 #x1fffde
    #x7fffea #x3fffdd #x3fffde #xfffff0 #x1fffdf #x3fffdf #x7fffeb #x7fffec
    #x1fffe0 #x1fffe1 #x3fffe0 #x1fffe2 #x7fffed #x3fffe1 #x7fffee #x7fffef
    #xfffea #x3fffe2 #x3fffe3 #x3fffe4 #x7ffff0 #x3fffe5 #x3fffe6 #x7ffff1
    #x3ffffe0 #x3ffffe1 #xfffeb #x7fff1 #x3fffe7 #x7ffff2 #x3fffe8 #x1ffffec
    #x3ffffe2 #x3ffffe3 #x3ffffe4 #x7ffffde #x7ffffdf #x3ffffe5 #xfffff1 #x1ffffed
    #x7fff2 #x1fffe3 #x3ffffe6 #x7ffffe0 #x7ffffe1 #x3ffffe7 #x7ffffe2 #xfffff2
    #x1fffe4 #x1fffe5 #x3ffffe8 #x3ffffe9 #xffffffd #x7ffffe3 #x7ffffe4 #x7ffffe5
    #xfffec #xfffff3 #xfffed #x1fffe6 #x3fffe9 #x1fffe7 #x1fffe8 #x7ffff3
    #x3fffea #x3fffeb #x1ffffee #x1ffffef #xfffff4 #xfffff5 #x3ffffea #x7ffff4
    #x3ffffeb #x7ffffe6 #x3ffffec #x3ffffed #x7ffffe7 #x7ffffe8 #x7ffffe9 #x7ffffea
    #x7ffffeb #xffffffe #x7ffffec #x7ffffed #x7ffffee #x7ffffef #x7fffff0 #x3ffffee))
(define huffman-lengths
  #vu8(13 23 28 28 28 28 28 28 28 24 30 28 28 30 28 28
    28 28 28 28 28 28 30 28 28 28 28 28 28 28 28 28
    6 10 10 12 13 6 8 11 10 10 8 11 8 6 6 6
    5 5 5 6 6 6 6 6 6 6 7 8 15 6 12 10
    13 6 7 7 7 7 7 7 7 7 7 7 7 7 7 7
    7 7 7 7 7 7 7 7 8 7 8 13 19 13 14 6
    15 5 6 5 6 5 6 6 6 5 7 7 6 6 6 5
    6 7 6 5 5 6 7 7 7 7 7 15 11 14 13 28
    20 22 20 20 22 22 22 23 22 23 23 23 23 23 24 23
    24 24 22 23 24 23 23 23 23 21 22 23 22 23 23 24
    22 21 20 22 22 23 23 21 23 22 22 24 21 22 23 23
    21 21 22 21 23 22 23 23 20 22 22 22 23 22 22 23
    26 26 20 19 22 23 22 25 26 26 26 27 27 26 24 25
    19 21 26 27 27 26 27 24 21 21 26 26 28 27 27 27
    20 24 20 21 22 21 21 23 22 22 25 25 24 24 26 23
    26 27 26 26 27 27 27 27 27 28 27 27 27 27 27 26))

(define static-table
  (vector-map-1 (lambda (entry)
                (cons (string->utf8 (car entry)) (string->utf8 (cdr entry))))
              static-entries))

;;; The Huffman code as a tree: node K's children are (vector-ref zero K)
;;; and (vector-ref one K), a node's index or, for a leaf, -1 - the
;;; symbol (256: EOS); 0, no child.

(define-values (huffman-zero huffman-one)
  (let ((zero (make-vector 512 0))
        (one (make-vector 512 0))
        (next 1))
    (define (add! symbol code length)
      (let lp ((node 0) (bit (- length 1)))
        (let* ((branch (if (logbit? bit code) one zero))
               (child (vector-ref branch node)))
          (if (zero? bit)
              (vector-set! branch node (- -1 symbol))
              (if (> child 0)
                  (lp child (- bit 1))
                  (let ((new next))
                    (set! next (+ next 1))
                    (vector-set! branch node new)
                    (lp new (- bit 1))))))))
    (let lp ((symbol 0))
      (when (< symbol 256)
        (add! symbol (vector-ref huffman-codes symbol) (bytevector-u8-ref huffman-lengths symbol))
        (lp (+ symbol 1))))
    (add! 256 #x3fffffff 30)
    (values zero one)))

(define (huffman-decode bv start end)
  ;; -> a bytevector, or #f when BV [START, END) is not a valid code
  ;; (EOS inside, padding longer than 7 bits or not all ones)
  (let ((out (make-bytevector (quotient (+ 4 (* 8 (- end start))) 5))))
    (let lp ((i start) (node 0) (fill 0) (pad 0) (ones? #t))
      (if (= i end)
          (and (<= pad 7) ones?
               (let ((copy (make-bytevector fill)))
                 (bytevector-copy! out 0 copy 0 fill)
                 copy))
          (let ((byte (bytevector-u8-ref bv i)))
            (let bits ((bit 7) (node node) (fill fill) (pad pad) (ones? ones?))
              (if (< bit 0)
                  (lp (+ i 1) node fill pad ones?)
                  (let* ((set? (logbit? bit byte))
                         (child (vector-ref (if set? huffman-one huffman-zero) node)))
                    (cond
                     ((> child 0) (bits (- bit 1) child fill (+ pad 1) (and ones? set?)))
                     ((or (zero? child) (= child -257)) #f)
                     (else
                      (bytevector-u8-set! out fill (- -1 child))
                      (bits (- bit 1) 0 (+ fill 1) 0 #t)))))))))))

;;;
;;; The decoder
;;;

(define-record-type <header-decoder>
  (%make-header-decoder entries first count size limit max)
  header-decoder?
  (entries decoder-entries)             ; vector: a ring of (name . value), newest at FIRST
  (first decoder-first set-decoder-first!)
  (count decoder-count set-decoder-count!)
  (size header-decoder-size set-decoder-size!) ; RFC 7541 §4.1's
  (limit decoder-limit set-decoder-limit!) ; the table's size, as the client last set it
  (max decoder-max))                    ; what our SETTINGS_HEADER_TABLE_SIZE allows

(define* (make-header-decoder #:optional (max-size 4096))
  "Return a decoder of header blocks whose dynamic table may hold
MAX-SIZE bytes (the SETTINGS_HEADER_TABLE_SIZE advertised)."
  (%make-header-decoder (make-vector (max 1 (quotient max-size 32)) #f) 0 0 0
                        max-size max-size))

(define-syntax-rule (entry-size entry)
  (+ 32 (bytevector-length (car entry)) (bytevector-length (cdr entry))))

(define (evict! decoder limit)
  ;; Drop the oldest entries until the table holds LIMIT bytes at most.
  (let ((entries (decoder-entries decoder)))
    (let lp ()
      (when (> (header-decoder-size decoder) limit)
        (let* ((count (decoder-count decoder))
               (oldest (modulo (- (decoder-first decoder) (- count 1))
                               (vector-length entries)))
               (entry (vector-ref entries oldest)))
          (vector-set! entries oldest #f)
          (set-decoder-count! decoder (- count 1))
          (set-decoder-size! decoder (- (header-decoder-size decoder) (entry-size entry)))
          (lp))))))

(define (insert! decoder entry)
  (let ((size (entry-size entry))
        (limit (decoder-limit decoder))
        (entries (decoder-entries decoder)))
    (if (> size limit)
        (evict! decoder 0)              ; §4.4: the table empties
        (let ((first (modulo (+ 1 (decoder-first decoder)) (vector-length entries))))
          (evict! decoder (- limit size))
          (vector-set! entries first entry)
          (set-decoder-first! decoder first)
          (set-decoder-count! decoder (+ 1 (decoder-count decoder)))
          (set-decoder-size! decoder (+ size (header-decoder-size decoder)))))))

(define (table-ref decoder index)
  ;; -> (name . value) of INDEX (1 to 61 the static table, then the
  ;; dynamic, newest first), or #f
  (cond
   ((<= 1 index 61) (vector-ref static-table (- index 1)))
   ((<= 62 index (+ 61 (decoder-count decoder)))
    (let ((entries (decoder-entries decoder)))
      (vector-ref entries (modulo (- (decoder-first decoder) (- index 62))
                                  (vector-length entries)))))
   (else #f)))

(define-inlinable (read-integer bv i end prefix)
  ;; -> (values n next), or (values #f #f): RFC 7541 §5.1, at most 2^28
  (let* ((mask (- (ash 1 prefix) 1))
         (n (logand (bytevector-u8-ref bv i) mask)))
    (if (< n mask)
        (values n (+ i 1))
        (let lp ((j (+ i 1)) (n n) (shift 0))
          (if (or (>= j end) (> shift 21))
              (values #f #f)
              (let ((b (bytevector-u8-ref bv j)))
                (if (< b 128)
                    (values (+ n (ash b shift)) (+ j 1))
                    (lp (+ j 1) (+ n (ash (logand b 127) shift)) (+ shift 7)))))))))

(define (read-string bv i end)
  ;; -> (values bytevector next), or (values #f #f): §5.2
  (if (>= i end)
      (values #f #f)
      (let ((huffman? (logbit? 7 (bytevector-u8-ref bv i))))
        (call-with-values (lambda () (read-integer bv i end 7))
          (lambda (length start)
            (if (or (not length) (> (+ start length) end))
                (values #f #f)
                (let ((s (if huffman?
                             (huffman-decode bv start (+ start length))
                             (let ((copy (make-bytevector length)))
                               (bytevector-copy! bv start copy 0 length)
                               copy))))
                  (if s (values s (+ start length)) (values #f #f)))))))))

(define (decode-header-block! decoder bv start end emit)
  "Decode the whole header block BV [START, END) with DECODER, calling
(EMIT name name-length value value-length) for each field in order: NAME
and VALUE bytevectors (whole: the lengths are theirs), not to be
changed.  Return #t, or #f when the block is not valid HPACK (a
connection error, COMPRESSION_ERROR: DECODER is then out of step)."
  (define (literal! i prefix index?)
    ;; a literal field whose name index has PREFIX bits
    (call-with-values (lambda () (read-integer bv i end prefix))
      (lambda (index next)
        (if (not index)
            #f
            (call-with-values
                (lambda ()
                  (if (zero? index)
                      (read-string bv next end)
                      (let ((entry (table-ref decoder index)))
                        (if entry (values (car entry) next) (values #f #f)))))
              (lambda (name next)
                (and name
                     (call-with-values (lambda () (read-string bv next end))
                       (lambda (value next)
                         (and value
                              (begin
                                (when index? (insert! decoder (cons name value)))
                                (emit name (bytevector-length name)
                                      value (bytevector-length value))
                                (fields next))))))))))))
  (define (fields i)
    ;; the field representations from I, after the first
    (if (>= i end)
        #t
        (let ((b (bytevector-u8-ref bv i)))
          (cond
           ((>= b 128)                  ; §6.1 indexed
            (call-with-values (lambda () (read-integer bv i end 7))
              (lambda (index next)
                (let ((entry (and index (table-ref decoder index))))
                  (and entry
                       (begin
                         (emit (car entry) (bytevector-length (car entry))
                               (cdr entry) (bytevector-length (cdr entry)))
                         (fields next)))))))
           ((>= b 64) (literal! i 6 #t)) ; §6.2.1 with incremental indexing
           ((>= b 32) #f)                ; a size update after a field (§4.2)
           (else (literal! i 4 #f)))))) ; §6.2.2, §6.2.3 without, never indexed
  (let updates ((i start))
    ;; §6.3: size updates come first
    (if (and (< i end) (= (logand (bytevector-u8-ref bv i) #xe0) 32))
        (call-with-values (lambda () (read-integer bv i end 5))
          (lambda (size next)
            (and size (<= size (decoder-max decoder))
                 (begin
                   (set-decoder-limit! decoder size)
                   (evict! decoder size)
                   (updates next)))))
        (fields i))))


;;;
;;; The encoder: literals without indexing (§6.2.2), raw strings
;;;

(define (remove-name name entries)
  (cond
   ((null? entries) '())
   ((bytevector=? name (caar entries)) (cdr entries))
   (else (cons (car entries) (remove-name name (cdr entries))))))

;; name length -> ((name . index) …) of the static table's names
(define static-names
  (let ((by-length (make-vector 32 '())))
    (let lp ((i 60))
      (when (>= i 0)
        (let* ((name (car (vector-ref static-table i)))
               (n (bytevector-length name))
               (known (vector-ref by-length n)))
          ;; the first index of each name
          (vector-set! by-length n (cons (cons name (+ i 1))
                                         (remove-name name known))))
        (lp (- i 1))))
    by-length))

(define (static-name-index bv start end)
  ;; -> the static table's index of the name BV [START, END), or 0
  (let ((n (- end start)))
    (if (>= n (vector-length static-names))
        0
        (let lp ((entries (vector-ref static-names n)))
          (cond
           ((null? entries) 0)
           ((let ((name (caar entries)))
              (let same ((i 0))
                (or (= i n)
                    (and (= (bytevector-u8-ref name i) (bytevector-u8-ref bv (+ start i)))
                         (same (+ i 1))))))
            (cdar entries))
           (else (lp (cdr entries))))))))

(define-inlinable (put-integer! out at n prefix first)
  ;; §5.1: N with a PREFIX-bit prefix, FIRST the bits above it -> next
  (let ((mask (- (ash 1 prefix) 1)))
    (if (< n mask)
        (begin (bytevector-u8-set! out at (logior first n)) (+ at 1))
        (begin
          (bytevector-u8-set! out at (logior first mask))
          (let lp ((n (- n mask)) (at (+ at 1)))
            (if (< n 128)
                (begin (bytevector-u8-set! out at n) (+ at 1))
                (begin (bytevector-u8-set! out at (logior 128 (logand n 127)))
                       (lp (ash n -7) (+ at 1)))))))))

(define (put-string! out at bv start end)
  (let* ((n (- end start))
         (at (put-integer! out at n 7 0)))
    (bytevector-copy! bv start out at n)
    (+ at n)))

;; :status codes the static table holds whole (index 8 to 14)
(define status-indices '((200 . 8) (204 . 9) (206 . 10) (304 . 11) (400 . 12)
                         (404 . 13) (500 . 14)))

(define (encode-response-head code bv spans count out size-update?)
  "Write to the bytevector OUT the header block of a response of status
CODE (#f: a trailer block, no :status), its other fields COUNT spans of
BV: SPANS is a bytevector of native u32s, four per field (name start and
end, value start and end), each name in lower case.  With SIZE-UPDATE?,
the block begins by setting the dynamic table's size to 0 (§6.3), as it
must after the client's SETTINGS_HEADER_TABLE_SIZE changed.  Return the
block's length, or #f when OUT has too little room (see
`response-head-bound')."
  (and (<= (response-head-bound spans count) (bytevector-length out))
       (let* ((at (if size-update? (begin (bytevector-u8-set! out 0 32) 1) 0))
              (at (cond
                   ((not code) at)
                   ((assv code status-indices)
                    => (lambda (entry) (bytevector-u8-set! out at (logior 128 (cdr entry)))
                               (+ at 1)))
                   (else
                    ;; :status (8) by name, its three digits
                    (bytevector-u8-set! out at 8)
                    (bytevector-u8-set! out (+ at 1) 3)
                    (bytevector-u8-set! out (+ at 2) (+ 48 (quotient code 100)))
                    (bytevector-u8-set! out (+ at 3) (+ 48 (remainder (quotient code 10) 10)))
                    (bytevector-u8-set! out (+ at 4) (+ 48 (remainder code 10)))
                    (+ at 5)))))
         (let lp ((k 0) (at at))
           (if (= k count)
               at
               (let* ((s (* 16 k))
                      (name-start (bytevector-u32-native-ref spans s))
                      (name-end (bytevector-u32-native-ref spans (+ s 4)))
                      (index (static-name-index bv name-start name-end))
                      (at (if (zero? index)
                              (begin
                                (bytevector-u8-set! out at 0) ; a new name
                                (put-string! out (+ at 1) bv name-start name-end))
                              (put-integer! out at index 4 0))))
                 (lp (+ k 1)
                     (put-string! out at bv (bytevector-u32-native-ref spans (+ s 8))
                                  (bytevector-u32-native-ref spans (+ s 12))))))))))

(define (response-head-bound spans count)
  "Return the most bytes `encode-response-head' may write for COUNT
fields of SPANS."
  (let lp ((k 0) (total 8))
    (if (= k count)
        total
        (let ((s (* 16 k)))
          (lp (+ k 1)
              (+ total 16
                 (- (bytevector-u32-native-ref spans (+ s 4)) (bytevector-u32-native-ref spans s))
                 (- (bytevector-u32-native-ref spans (+ s 12))
                    (bytevector-u32-native-ref spans (+ s 8)))))))))

;;; (plucky http hpack) ends here
