;;; (plucky web json schema) --- JSON codecs compiled from a record's declaration

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A generic decoder builds an alist per object and a string per key,
;;; then the app looks its fields up.  When the shape is known, code
;;; specialised to it does less (the upb parser's lesson): this module's
;;; `define-json-type' declares a JSON object type over an SRFI-9 record
;;; and expands to a decoder and an encoder for exactly that type.
;;;
;;;   (define-json-type user (<user> make-user user?)
;;;     #:decoder json->user #:encoder user->json #:unknown skip
;;;     (id    user-id    "id"          integer)
;;;     (name  user-name  "screen_name" string)
;;;     (url   user-url   "url"         (nullable string) 'null)
;;;     (tags  user-tags  "tags"        (vector-of string) json-absent))
;;;
;;; defines the record <user> (make-user id name url tags), (json->user
;;; bytevector-or-port) -> a <user>, (user->json user [port]) -> a
;;; bytevector (or written to PORT), and `user' itself, a type the
;;; fields of other declarations can name.  A field is (NAME ACCESSOR
;;; "key" TYPE [DEFAULT]): without DEFAULT it must be present; with it,
;;; an absent field takes DEFAULT's value, and a field whose value is
;;; `json-absent' is left out when encoding.  TYPE is string, integer
;;; (exact, no fraction or exponent), real (inexact), number, boolean,
;;; any (whatever (plucky web json) decodes), a declared type,
;;; (nullable TYPE) (null is the symbol null), (vector-of TYPE),
;;; (list-of TYPE), or (alist-of TYPE), an object whose keys are data
;;; (ids, names) as an alist (("key" . value) ...) in document order.  #:unknown is skip (default: unknown fields are read,
;;; checked and dropped) or reject (an error).
;;;
;;; The decoder expects the fields in their declared order: it compares
;;; the bytes of each key in the input with the next declared key
;;; (precomputed bytevectors, quotes included) and parses its value with
;;; the field's own parser, straight on, holding the values in local
;;; variables, and calls the record's constructor at the "}".  At the
;;; first key that is not the one expected, it goes over to a loop that
;;; finds each key among all the declared ones.  No alist, hash table or
;;; key string is made for a known field.  A repeated field keeps its
;;; last value.  Errors are the &json-error of (plucky web json read),
;;; with the byte offset; a missing field names itself.
;;;
;;; Keys must be written without escapes in the declaration (no quote,
;;; backslash or control character); the input's keys may use escapes
;;; (they then take the lookup loop).
;;;
;;; Code:

(define-module (plucky web json schema)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 binary-ports)
  #:use-module (plucky web json read)
  #:use-module (plucky web json write)
  #:export (define-json-type
            json-absent
            json-absent?))

;;;
;;; What the expansions call
;;;

(define-record-type <absent>
  (make-absent)
  json-absent?)

(define json-absent
  ;; the value of an absent optional field that encoders leave out
  (make-absent))

(define (expected bv i end what)
  (json-error i (string-append what ", not "
                               (if (< i end)
                                   (let ((b (bytevector-u8-ref bv i)))
                                     (if (and (< 32 b) (< b 127))
                                         (string #\" (integer->char b) #\")
                                         (string-append "byte " (number->string b))))
                                   "the end"))))

(define (open-object bv i end ctx depth)
  ;; -> the index of the first key, or of "}", past the "{" at I
  (unless (and (< i end) (eqv? (bytevector-u8-ref bv i) 123))
    (expected bv i end "an object"))
  (unless (< depth (json-context-max-depth ctx))
    (json-error i "no deeper nesting (the depth limit)"))
  (json-skip-whitespace bv (+ i 1) end))

(define-inlinable (value-start bv k end)
  ;; K: just past a key's closing quote.  -> the index of its value
  (let ((k (json-skip-whitespace bv k end)))
    (unless (and (< k end) (eqv? (bytevector-u8-ref bv k) 58))
      (expected bv k end "\":\""))
    (json-skip-whitespace bv (+ k 1) end)))

(define (member-end bv k end)
  ;; K: just past a member's value.  -> (values 'more index-of-next-key)
  ;; or (values 'done index-after-"}")
  (let ((k (json-skip-whitespace bv k end)))
    (if (< k end)
        (case (bytevector-u8-ref bv k)
          ((44)
           (let ((j (json-skip-whitespace bv (+ k 1) end)))
             (unless (and (< j end) (eqv? (bytevector-u8-ref bv j) 34))
               (expected bv j end "a string key"))
             (values 'more j)))
          ((125) (values 'done (+ k 1)))
          (else (expected bv k end "\",\" or \"}\"")))
        (expected bv k end "\",\" or \"}\""))))

(define (find-key bv j end ctx keys names)
  ;; J: a key.  -> (values index value-start), INDEX that of the
  ;; declared key it is (KEYS, bytevectors; NAMES, strings), or #f
  (let ((n (vector-length keys)))
    (let lp ((k 0))
      (cond
       ((= k n)
        ;; not byte for byte: read it (escapes and all) and compare
        (call-with-values (lambda () (json-read-key bv j end ctx))
          (lambda (key start)
            (let find ((k 0))
              (cond ((= k n) (values #f start))
                    ((string=? key (vector-ref names k)) (values k start))
                    (else (find (+ k 1))))))))
       ((json-key-at? bv j end (vector-ref keys k))
        (values k (value-start bv (+ j (bytevector-length (vector-ref keys k)) 2) end)))
       (else (lp (+ k 1)))))))

(define (missing-field i name)
  (json-error i (string-append "the field \"" name "\" before \"}\"")))

(define (unknown-field j)
  (json-error j "a field of the type (unknown fields are refused)"))

(define-inlinable (read-vector-of read bv i end ctx depth)
  ;; the array at I, each element read by READ, as a vector; the
  ;; elements wait on the context's stack, as in the generic decoder.
  ;; Inlined where a type names (vector-of T), so that T's reader and
  ;; the push are inlined in the loop rather than called per element
  ;; (bench/json, citm_catalog's arrays of integers).
  (unless (and (< i end) (eqv? (bytevector-u8-ref bv i) 91))
    (expected bv i end "an array"))
  (unless (< depth (json-context-max-depth ctx))
    (json-error i "no deeper nesting (the depth limit)"))
  (let ((j (json-skip-whitespace bv (+ i 1) end))
        (depth (+ depth 1))
        (base (json-context-top ctx)))
    (if (and (< j end) (eqv? (bytevector-u8-ref bv j) 93))
        (values (vector) (+ j 1))
        (let lp ((j j))
          (call-with-values (lambda () (read bv j end ctx depth))
            (lambda (x k)
              (json-context-push! ctx x)
              (let ((k (json-skip-whitespace bv k end)))
                (if (< k end)
                    (case (bytevector-u8-ref bv k)
                      ((44) (lp (json-skip-whitespace bv (+ k 1) end)))
                      ((93) (values (json-context-pop-vector! ctx base) (+ k 1)))
                      (else (expected bv k end "\",\" or \"]\"")))
                    (expected bv k end "\",\" or \"]\"")))))))))

(define (read-list-of read bv i end ctx depth)
  (unless (and (< i end) (eqv? (bytevector-u8-ref bv i) 91))
    (expected bv i end "an array"))
  (unless (< depth (json-context-max-depth ctx))
    (json-error i "no deeper nesting (the depth limit)"))
  (let ((j (json-skip-whitespace bv (+ i 1) end))
        (depth (+ depth 1)))
    (if (and (< j end) (eqv? (bytevector-u8-ref bv j) 93))
        (values '() (+ j 1))
        (let ((head (list #f)))
          (let lp ((j j) (tail head))
            (call-with-values (lambda () (read bv j end ctx depth))
              (lambda (x k)
                (let ((cell (list x))
                      (k (json-skip-whitespace bv k end)))
                  (set-cdr! tail cell)
                  (if (< k end)
                      (case (bytevector-u8-ref bv k)
                        ((44) (lp (json-skip-whitespace bv (+ k 1) end) cell))
                        ((93) (values (cdr head) (+ k 1)))
                        (else (expected bv k end "\",\" or \"]\"")))
                      (expected bv k end "\",\" or \"]\""))))))))))

(define (read-alist-of read bv i end ctx depth)
  ;; the object at I, whatever its keys, each value read by READ, as an
  ;; alist ((key . value) ...) in document order
  (let ((j (open-object bv i end ctx depth))
        (depth (+ depth 1)))
    (cond
     ((and (< j end) (eqv? (bytevector-u8-ref bv j) 125)) (values '() (+ j 1)))
     ((not (and (< j end) (eqv? (bytevector-u8-ref bv j) 34)))
      (expected bv j end "a string key"))
     (else
      (let ((head (list #f)))
        (let lp ((j j) (tail head))
          (call-with-values (lambda () (json-read-key bv j end ctx))
            (lambda (key start)
              (call-with-values (lambda () (read bv start end ctx depth))
                (lambda (x k)
                  (let ((cell (list (cons key x))))
                    (set-cdr! tail cell)
                    (call-with-values (lambda () (member-end bv k end))
                      (lambda (how next)
                        (if (eq? how 'done)
                            (values (cdr head) next)
                            (lp next cell)))))))))))))))

(define (write-alist-of write sink alist)
  (sink-put-byte! sink 123)
  (let lp ((members alist) (first? #t))
    (unless (null? members)
      (unless first? (sink-put-byte! sink 44))
      (sink-put-string! sink (caar members))
      (sink-put-byte! sink 58)
      (write sink (cdar members))
      (lp (cdr members) #f)))
  (sink-put-byte! sink 125))

(define (write-vector-of write sink v)
  (sink-put-byte! sink 91)
  (let ((n (vector-length v)))
    (let lp ((k 0))
      (when (< k n)
        (unless (eqv? k 0) (sink-put-byte! sink 44))
        (write sink (vector-ref v k))
        (lp (+ k 1)))))
  (sink-put-byte! sink 93))

(define (write-list-of write sink items)
  (sink-put-byte! sink 91)
  (let lp ((items items) (first? #t))
    (unless (null? items)
      (unless first? (sink-put-byte! sink 44))
      (write sink (car items))
      (lp (cdr items) #f)))
  (sink-put-byte! sink 93))

(define (write-checked-integer sink x)
  (unless (exact-integer? x) (error "JSON field: not an integer:" x))
  (sink-put-integer! sink x))

(define (write-checked-string sink x)
  (unless (string? x) (error "JSON field: not a string:" x))
  (sink-put-string! sink x))

(define (input->bytevector input max-size)
  (if (bytevector? input)
      input
      (let ((bv (get-bytevector-all input)))
        (if (eof-object? bv) #vu8() bv))))

(define* (decode-with read input #:key (max-depth 512) (lone-surrogates 'error))
  ;; INPUT: a bytevector or a binary port, read to its end
  (let ((bv (input->bytevector input #f)))
    (json-decode read bv 0 (bytevector-length bv)
                 (make-json-context #:max-depth max-depth #:lone-surrogates lone-surrogates))))

(define (encode-with write x port)
  (let ((sink (make-json-sink)))
    (write sink x)
    (if port
        (json-sink-flush! sink port)
        (json-sink-bytes sink))))

;;;
;;; The macro
;;;

(define-syntax define-json-type
  (lambda (form)
    (define (datum=? stx name) (eq? (syntax->datum stx) name))
    (define (fail what stx)
      (syntax-violation 'define-json-type what form stx))
    (define (derived name suffix)
      ;; the procedures of type NAME have names of their own, so that a
      ;; field can name a type declared later, or its own (twitter's
      ;; retweeted_status is a status)
      (datum->syntax name (symbol-append '% (syntax->datum name) (string->symbol suffix))))
    (define (type-reader type)
      ;; -> an expression: a procedure (bv i end ctx depth) -> (values x next)
      (syntax-case type ()
        ((nullable t) (datum=? #'nullable 'nullable)
         #`(lambda (bv i end ctx depth)
             (if (json-null-at? bv i end)
                 (values 'null (+ i 4))
                 (#,(type-reader #'t) bv i end ctx depth))))
        ((vector-of t) (datum=? #'vector-of 'vector-of)
         #`(lambda (bv i end ctx depth)
             (read-vector-of #,(type-reader #'t) bv i end ctx depth)))
        ((list-of t) (datum=? #'list-of 'list-of)
         #`(lambda (bv i end ctx depth)
             (read-list-of #,(type-reader #'t) bv i end ctx depth)))
        ((alist-of t) (datum=? #'alist-of 'alist-of)
         #`(lambda (bv i end ctx depth)
             (read-alist-of #,(type-reader #'t) bv i end ctx depth)))
        (name (identifier? #'name)
         (case (syntax->datum #'name)
           ((string) #'(lambda (bv i end ctx depth) (json-read-string bv i end ctx)))
           ((integer) #'(lambda (bv i end ctx depth) (json-read-integer bv i end ctx)))
           ((real) #'(lambda (bv i end ctx depth) (json-read-real bv i end ctx)))
           ((number) #'(lambda (bv i end ctx depth) (json-read-number bv i end ctx)))
           ((boolean) #'(lambda (bv i end ctx depth) (json-read-boolean bv i end ctx)))
           ((any) #'json-read-value)
           (else (derived #'name "-json-reader"))))
        (_ (fail "unknown field type" type))))
    (define (type-writer type)
      ;; -> an expression: a procedure (sink x)
      (syntax-case type ()
        ((nullable t) (datum=? #'nullable 'nullable)
         #`(lambda (sink x)
             (if (eq? x 'null) (sink-put-null! sink) (#,(type-writer #'t) sink x))))
        ((vector-of t) (datum=? #'vector-of 'vector-of)
         #`(lambda (sink x) (write-vector-of #,(type-writer #'t) sink x)))
        ((list-of t) (datum=? #'list-of 'list-of)
         #`(lambda (sink x) (write-list-of #,(type-writer #'t) sink x)))
        ((alist-of t) (datum=? #'alist-of 'alist-of)
         #`(lambda (sink x) (write-alist-of #,(type-writer #'t) sink x)))
        (name (identifier? #'name)
         (case (syntax->datum #'name)
           ((string) #'write-checked-string)
           ((integer) #'write-checked-integer)
           ((real number) #'sink-put-real!)
           ((boolean) #'sink-put-boolean!)
           ((any) #'sink-put-value!)
           (else (derived #'name "-json-writer"))))
        (_ (fail "unknown field type" type))))
    (define (key-test key)
      ;; -> an expression: does the input hold at j the string KEY,
      ;; quotes included?  Compared eight bytes at a time, each word a
      ;; constant of this expansion (bench/json: a byte-by-byte
      ;; comparison cost a checked read per byte).  .go files are built
      ;; for one byte order, so native words are safe.
      (let* ((bytes (string->utf8 (string-append "\"" key "\"")))
             (n (bytevector-length bytes)))
        (let lp ((off 0) (tests '()))
          (define (word size get ref)
            (with-syntax ((o off) (c (get bytes off)) (r ref))
              (lp (+ off size) (cons #'(eqv? 0 (logxor (r bv (+ j o)) c)) tests))))
          (let ((left (- n off)))
            (cond
             ((>= left 8) (word 8 bytevector-u64-native-ref #'bytevector-u64-native-ref))
             ((>= left 4) (word 4 bytevector-u32-native-ref #'bytevector-u32-native-ref))
             ((>= left 2) (word 2 bytevector-u16-native-ref #'bytevector-u16-native-ref))
             ((= left 1) (word 1 bytevector-u8-ref #'bytevector-u8-ref))
             (else
              (with-syntax ((n n) ((test ...) (reverse tests)))
                #'(and (<= (+ j n) end) test ...))))))))
    (define (check-key! key-stx)
      (let ((key (syntax->datum key-stx)))
        (unless (and (string? key)
                     (string-every (lambda (c) (and (char>=? c #\space)
                                                    (not (memv c '(#\" #\\)))))
                                   key))
          (fail "a field's key must be a string without quote, backslash or control character"
                key-stx))))
    (syntax-case form ()
      ((_ type-name (record-type constructor predicate) option ... )
       (let* ((options+fields #'(option ...)))
         ;; split the keyword options from the fields
         (let split ((rest options+fields) (decoder #f) (encoder #f) (unknown #'skip))
           (syntax-case rest ()
             ((kw value . more) (keyword? (syntax->datum #'kw))
              (case (syntax->datum #'kw)
                ((#:decoder) (split #'more #'value encoder unknown))
                ((#:encoder) (split #'more decoder #'value unknown))
                ((#:unknown) (split #'more decoder encoder #'value))
                (else (fail "unknown option" #'kw))))
             (((field accessor key type . default) ...)
              (begin
                (for-each check-key! #'(key ...))
                (unless (memq (syntax->datum unknown) '(skip reject))
                  (fail "#:unknown must be skip or reject" unknown))
                (let* ((fields #'(field ...))
                       (n (length fields))
                       (keys (map syntax->datum #'(key ...)))
                       (defaults (map (lambda (d)
                                        (syntax-case d ()
                                          (() #f)
                                          ((e) #'e)
                                          (_ (fail "a field is (name accessor \"key\" type [default])" d))))
                                      #'(default ...)))
                       (readers (map type-reader #'(type ...)))
                       (writers (map type-writer #'(type ...)))
                       (vars (generate-temporaries fields))
                       (reject? (eq? (syntax->datum unknown) 'reject)))
                  (with-syntax
                      (((var ...) vars)
                       ((key-bytes ...) (map (lambda (k) (datum->syntax form (string->utf8 k))) keys))
                       ((key-length ...) (map (lambda (k) (bytevector-length (string->utf8 k))) keys))
                       ((prefix ...)
                        (map (lambda (k) (datum->syntax form (string->utf8 (string-append ",\"" k "\":"))))
                             keys))
                       ((first-prefix ...)
                        (map (lambda (k) (datum->syntax form (string->utf8 (string-append "{\"" k "\":"))))
                             keys))
                       ((reader ...) readers)
                       ((writer ...) writers)
                       ((value ...)
                        (map (lambda (var default key)
                               (if default
                                   #`(if (eq? #,var absent) #,default #,var)
                                   #`(if (eq? #,var absent) (missing-field (- close 1) #,key) #,var)))
                             vars defaults keys))
                       ((optional? ...) (map (lambda (d) (and d #t)) defaults))
                       ;; without #:decoder or #:encoder, a type is only
                       ;; named by other types' fields
                       (decoder-given (and decoder #t))
                       (encoder-given (and encoder #t))
                       (decoder (or decoder #'unused))
                       (encoder (or encoder #'unused)))
                    (define (with-field k bound new)
                      ;; BOUND with the K-th variable replaced by NEW
                      (let lp ((vs bound) (i 0))
                        (if (null? vs) '()
                            (cons (if (= i k) new (car vs)) (lp (cdr vs) (+ i 1))))))
                    (define absents (map (lambda (v) #'absent) vars))
                    (define (lookup-clause k)
                      ;; the lookup loop's case for field K
                      (with-syntax ((k k)
                                    (read (list-ref readers k))
                                    ((args ...) (with-field k vars #'x)))
                        #'((k) (call-with-values (lambda () (read bv start end ctx depth))
                                 (lambda (x next) (after next args ...))))))
                    (define expects (generate-temporaries (iota (+ n 1))))
                    (define (expect-definition k)
                      ;; (expect-K j var ...): field K's key is expected
                      ;; at J.  If it is there, its value is read and the
                      ;; next field expected; if not, an optional field
                      ;; is passed over, and otherwise the lookup loop
                      ;; takes the rest of the object.  All calls are
                      ;; tail calls: the compiler makes them jumps.
                      (with-syntax ((name (list-ref expects k))
                                    ((var ...) vars))
                        (if (= k n)
                            #'(define (name j var ...) (lookup j var ...))
                            (with-syntax ((key-here? (key-test (list-ref keys k)))
                                          (len (list-ref #'(key-length ...) k))
                                          (read (list-ref readers k))
                                          (next-expect (list-ref expects (+ k 1)))
                                          ((set ...) (with-field k vars #'x)))
                              #`(define (name j var ...)
                                  (if key-here?
                                      (call-with-values
                                          (lambda () (read bv (value-start bv (+ j len 2) end) end ctx depth))
                                        (lambda (x k2)
                                          (call-with-values (lambda () (member-end bv k2 end))
                                            (lambda (how next)
                                              (if (eq? how 'done)
                                                  (finish next set ...)
                                                  (next-expect next set ...))))))
                                      #,(if (list-ref defaults k)
                                            #'(next-expect j var ...)
                                            #'(lookup j var ...))))))))
                    #`(begin
                        (define-record-type record-type
                          (constructor field ...)
                          predicate
                          (field accessor) ...)
                        ;; Named after the type: two types' macro-made
                        ;; `keys' came out as one top-level variable.
                        (define #,(derived #'type-name "-json-keys") (vector key-bytes ...))
                        (define #,(derived #'type-name "-json-names") (vector key ...))
                        (define (#,(derived #'type-name "-json-reader") bv i end ctx depth)
                          (let ((j (open-object bv i end ctx depth))
                                (depth (+ depth 1)))
                            (define (finish close var ...)
                              ;; CLOSE: just past the "}"
                              (values (constructor value ...) close))
                            (define (after k var ...)
                              (call-with-values (lambda () (member-end bv k end))
                                (lambda (how next)
                                  (if (eq? how 'done)
                                      (finish next var ...)
                                      (lookup next var ...)))))
                            #,@(map expect-definition (iota (+ n 1)))
                            (define (lookup j var ...)
                              (call-with-values (lambda () (find-key bv j end ctx #,(derived #'type-name "-json-keys") #,(derived #'type-name "-json-names")))
                                (lambda (index start)
                                  (case index
                                    #,@(map lookup-clause (iota n))
                                    (else
                                     #,(if reject?
                                           #'(unknown-field j)
                                           #'(after (json-skip-value bv start end ctx depth) var ...)))))))
                            (if (and (< j end) (eqv? (bytevector-u8-ref bv j) 125))
                                (finish (+ j 1) #,@absents)
                                (if (and (< j end) (eqv? (bytevector-u8-ref bv j) 34))
                                    (#,(car expects) j #,@absents)
                                    (expected bv j end "a string key")))))
                        (define (#,(derived #'type-name "-json-writer") sink x)
                          (unless (predicate x)
                            (error "JSON encoder: not a record of its type:" x))
                          ;; FIRST?: no field written yet, so the next
                          ;; one opens the object rather than follows a ","
                          (let* ((first? #t)
                                 (first?
                                  (let ((v (accessor x)))
                                    (if (and optional? (json-absent? v))
                                        first?
                                        (begin
                                          (sink-put-bytes! sink (if first? first-prefix prefix))
                                          (writer sink v)
                                          #f))))
                                 ...)
                            (when first? (sink-put-byte! sink 123))
                            (sink-put-byte! sink 125)))
                        #,@(if (syntax->datum #'decoder-given)
                               (list
                                #`(define* (decoder input #:key (max-depth 512) (lone-surrogates 'error))
                                    "Return the record that the JSON object in INPUT (a bytevector,
or a binary port read to its end) decodes to, or raise a &json-error."
                                    (decode-with #,(derived #'type-name "-json-reader") input
                                                 #:max-depth max-depth
                                                 #:lone-surrogates lone-surrogates)))
                               '())
                        #,@(if (syntax->datum #'encoder-given)
                               (list
                                #`(define* (encoder x #:optional port)
                                    "Return X's JSON text as a bytevector, or write it to PORT."
                                    (encode-with #,(derived #'type-name "-json-writer") x port)))
                               '()))))))
             (_ (fail "expected keyword options, then fields (name accessor \"key\" type [default])"
                      rest))))))
      (_ (fail "expected (define-json-type name (<record> constructor predicate) option ... field ...)"
               form)))))

(define absent
  ;; the variables of fields not seen yet
  (list 'absent))

;;; (plucky web json schema) ends here
