;;; (plucky db postgresql types) --- PostgreSQL's text formats <-> Scheme values

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Values cross between plucky and PostgreSQL in PostgreSQL's text
;;; format, both ways, except a bytevector parameter, which is sent in
;;; binary (its bytes as they are).  Text is what every type has, what
;;; psql shows, and what the server's input functions check; the binary
;;; formats would save the server a conversion per value but each is its
;;; own layout (numeric's base-10000 digits, timestamps' microseconds
;;; since 2000, arrays' headers) to get exactly right on both sides.
;;;
;;; Results: `oid->decoder' gives, for a column's type OID, a procedure
;;; (BV START END) -> value, the value's bytes being [START, END) of BV
;;; (a view of libpq's memory: the decoder copies what it keeps).  NULL
;;; never reaches a decoder.
;;;
;;;   int2 int4 int8 oid      exact integer
;;;   float4 float8           real (+inf.0, -inf.0, +nan.0)
;;;   numeric                 exact rational (NaN, ±Infinity: inexact)
;;;   bool                    #t / #f
;;;   bytea                   bytevector
;;;   text varchar bpchar name char uuid, and any type not listed: string
;;;   json jsonb              (plucky web json)'s `decode-json'
;;;   date timestamp timestamptz
;;;                           SRFI-19 date (zone offset 0 for date and
;;;                           timestamp, the server's for timestamptz);
;;;                           infinity, -infinity: +inf.0, -inf.0
;;;   arrays of the above     vectors (nested for more dimensions)
;;;
;;; Parameters: `encode-param' writes one value's text into a
;;; <param-buffer>, the connection's, reused from query to query.
;;;
;;; Code:

(define-module (plucky db postgresql types)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-11)
  #:use-module (srfi srfi-19)
  #:use-module (ice-9 exceptions)
  #:use-module ((plucky web json) #:select (decode-json encode-json))
  #:export (oid->decoder
            oid-never-empty?
            decode-text

            pg-json
            pg-json?
            pg-json-value

            make-param-buffer
            param-buffer-reset!
            param-buffer-data
            param-buffer-position
            encode-param!
            value->text
            copy-row-text!))

;;;
;;; Decoding
;;;

(define (decode-integer bv start end)
  ;; "-123" -> -123, read where it lies (the per-row hot path of
  ;; bench/pg-roundtrip: no string, no copy)
  (let-values (((negative? start)
                (if (and (< start end) (= (bytevector-u8-ref bv start) 45)) ; #\-
                    (values #t (+ start 1))
                    (values #f start))))
    (let lp ((i start) (acc 0))
      (if (< i end)
          (lp (+ i 1) (+ (* acc 10) (- (bytevector-u8-ref bv i) 48)))
          (if negative? (- acc) acc)))))

(define (slice bv start end)
  ;; -> a fresh bytevector of BV's bytes [START, END)
  (let ((out (make-bytevector (- end start))))
    (bytevector-copy! bv start out 0 (- end start))
    out))

(define (decode-text bv start end)
  (utf8->string (slice bv start end)))

(define (special-float s)
  (cond
   ((string=? s "NaN") +nan.0)
   ((string=? s "Infinity") +inf.0)
   ((string=? s "-Infinity") -inf.0)
   (else #f)))

(define (decode-float bv start end)
  (let ((s (decode-text bv start end)))
    (or (special-float s)
        (exact->inexact (string->number s)))))

(define (decode-numeric bv start end)
  ;; numeric's text is plain decimal notation (no exponent): read exactly
  (let ((s (decode-text bv start end)))
    (or (special-float s)
        (string->number (string-append "#e" s)))))

(define (decode-bool bv start end)
  (= (bytevector-u8-ref bv start) 116))     ; #\t

(define (hex-digit c)
  (cond
   ((<= 48 c 57) (- c 48))
   ((<= 97 c 102) (- c 87))
   ((<= 65 c 70) (- c 55))
   (else (error "bytea: not a hex digit" (integer->char c)))))

(define (decode-bytea bv start end)
  ;; "\x0a1b..." (bytea_output = hex, the default); else the escape
  ;; format: \\ and \ooo octal escapes
  (if (and (>= (- end start) 2) (= (bytevector-u8-ref bv start) 92)
           (= (bytevector-u8-ref bv (+ start 1)) 120))
      (let ((out (make-bytevector (quotient (- end start 2) 2))))
        (let lp ((i (+ start 2)) (j 0))
          (when (< i end)
            (bytevector-u8-set! out j (+ (* 16 (hex-digit (bytevector-u8-ref bv i)))
                                         (hex-digit (bytevector-u8-ref bv (+ i 1)))))
            (lp (+ i 2) (+ j 1))))
        out)
      (let lp ((i start) (acc '()))
        (cond
         ((>= i end) (u8-list->bytevector (reverse acc)))
         ((and (= (bytevector-u8-ref bv i) 92) (< (+ i 1) end)
               (= (bytevector-u8-ref bv (+ i 1)) 92))
          (lp (+ i 2) (cons 92 acc)))
         ((and (= (bytevector-u8-ref bv i) 92) (<= (+ i 4) end))
          (lp (+ i 4) (cons (string->number (utf8->string (slice bv (+ i 1) (+ i 4))) 8)
                            acc)))
         (else (lp (+ i 1) (cons (bytevector-u8-ref bv i) acc)))))))

(define (decode-json-value bv start end)
  (decode-json bv #:start start #:end end))

;; Dates and times, in DateStyle ISO (the connection makes sure of it):
;;   date         2024-01-02             [ BC]
;;   timestamp    2024-01-02 03:04:05[.ffffff]   [ BC]
;;   timestamptz  2024-01-02 03:04:05[.ffffff]+01[:30[:15]]   [ BC]

(define (digits s start end)
  (string->number (substring s start end) 10))

(define (parse-date-time s with-time? with-zone?)
  (cond
   ((string=? s "infinity") +inf.0)
   ((string=? s "-infinity") -inf.0)
   (else
    (let* ((bc? (string-suffix? " BC" s))
           (s (if bc? (substring s 0 (- (string-length s) 3)) s))
           (dash (string-index s #\- 1))     ; years may have more than 4 digits
           (year (digits s 0 dash))
           (month (digits s (+ dash 1) (+ dash 3)))
           (day (digits s (+ dash 4) (+ dash 6)))
           (year (if bc? (- 1 year) year)))
      (if (not with-time?)
          (make-date 0 0 0 0 day month year 0)
          (let* ((t (+ dash 7))
                 (hour (digits s t (+ t 2)))
                 (minute (digits s (+ t 3) (+ t 5)))
                 (second (digits s (+ t 6) (+ t 8)))
                 (n (string-length s))
                 (frac-end (let lp ((i (+ t 8)))
                             (if (and (< i n) (or (char-numeric? (string-ref s i))
                                                  (char=? (string-ref s i) #\.)))
                                 (lp (+ i 1))
                                 i)))
                 (nanosecond (if (> frac-end (+ t 9))
                                 (let ((f (substring s (+ t 9) frac-end)))
                                   (string->number
                                    (string-append f (make-string (- 9 (string-length f)) #\0))))
                                 0))
                 (offset (if (and with-zone? (< frac-end n))
                             (parse-offset s frac-end)
                             0)))
            (make-date nanosecond second minute hour day month year offset)))))))

(define (parse-offset s start)
  ;; "+01", "-05:30", "+05:30:15" -> seconds east of UTC
  (let* ((sign (if (char=? (string-ref s start) #\-) -1 1))
         (parts (map (lambda (p) (string->number p 10))
                     (string-split (substring s (+ start 1)) #\:)))
         (h (car parts))
         (m (if (pair? (cdr parts)) (cadr parts) 0))
         (sec (if (and (pair? (cdr parts)) (pair? (cddr parts))) (caddr parts) 0)))
    (* sign (+ (* 3600 h) (* 60 m) sec))))

(define (decode-date bv start end) (parse-date-time (decode-text bv start end) #f #f))
(define (decode-timestamp bv start end) (parse-date-time (decode-text bv start end) #t #f))
(define (decode-timestamptz bv start end) (parse-date-time (decode-text bv start end) #t #t))

;;; Arrays: {1,2,NULL}, {"a b","c\"d"}, {{1,2},{3,4}}, [0:1]={1,2}

(define (parse-array s element)
  ;; -> vector (nested for more dimensions); ELEMENT: string -> value
  (let* ((n (string-length s))
         (start (if (char=? (string-ref s 0) #\[)
                    (+ (string-index s #\=) 1)
                    0)))
    (define (parse-list i)
      ;; S[I] is #\{ -> (values vector next-index)
      (let lp ((i (+ i 1)) (items '()))
        (let ((c (string-ref s i)))
          (cond
           ((char=? c #\}) (values (list->vector (reverse items)) (+ i 1)))
           ((char=? c #\,) (lp (+ i 1) items))
           ((char=? c #\{)
            (let-values (((v next) (parse-list i)))
              (lp next (cons v items))))
           ((char=? c #\")
            (let-values (((str next) (parse-quoted (+ i 1))))
              (lp next (cons (element str) items))))
           (else
            (let* ((end (let scan ((j i))
                          (if (memv (string-ref s j) '(#\, #\})) j (scan (+ j 1)))))
                   (raw (substring s i end)))
              (lp end (cons (if (string-ci=? raw "NULL") 'null (element raw))
                            items))))))))
    (define (parse-quoted i)
      (let lp ((i i) (chars '()))
        (let ((c (string-ref s i)))
          (cond
           ((char=? c #\") (values (list->string (reverse chars)) (+ i 1)))
           ((char=? c #\\) (lp (+ i 2) (cons (string-ref s (+ i 1)) chars)))
           (else (lp (+ i 1) (cons c chars)))))))
    (if (>= start n)
        (vector)
        (let-values (((v next) (parse-list start))) v))))

(define (array-decoder element-decoder)
  (lambda (bv start end)
    (parse-array (decode-text bv start end)
                 (lambda (str)
                   (let ((bv (string->utf8 str)))
                     (element-decoder bv 0 (bytevector-length bv)))))))

;; type OID -> decoder (pg_type.dat); arrays after their elements
(define decoders (make-hash-table))

(define (register! oid array-oid decoder)
  (hashv-set! decoders oid decoder)
  (when array-oid
    (hashv-set! decoders array-oid (array-decoder decoder))))

(register! 16 1000 decode-bool)
(register! 17 1001 decode-bytea)
(register! 18 1002 decode-text)          ; "char"
(register! 19 1003 decode-text)          ; name
(register! 20 1016 decode-integer)       ; int8
(register! 21 1005 decode-integer)       ; int2
(register! 23 1007 decode-integer)       ; int4
(register! 25 1009 decode-text)          ; text
(register! 26 1028 decode-integer)       ; oid
(register! 114 199 decode-json-value)    ; json
(register! 700 1021 decode-float)        ; float4
(register! 701 1022 decode-float)        ; float8
(register! 1042 1014 decode-text)        ; bpchar
(register! 1043 1015 decode-text)        ; varchar
(register! 1082 1182 decode-date)
(register! 1114 1115 decode-timestamp)
(register! 1184 1185 decode-timestamptz)
(register! 1700 1231 decode-numeric)
(register! 2950 2951 decode-text)        ; uuid
(register! 3802 3807 decode-json-value)  ; jsonb

;; The types whose text is never empty: an empty value is NULL.
(define never-empty (make-hash-table))
(for-each (lambda (oid) (hashv-set! never-empty oid #t))
          '(16 20 21 23 26 700 701 1082 1114 1184 1700 2950))

(define (oid-never-empty? oid)
  "True if no value of the type OID has an empty text (numbers, bool,
dates, uuid)."
  (hashv-ref never-empty oid #f))

(define (oid->decoder oid)
  "Return the procedure that decodes a value of the type OID from its
text, (DECODER BV START END) for the bytes [START, END) of BV: strings
for the types without one of their own."
  (or (hashv-ref decoders oid) decode-text))

;;;
;;; Encoding parameters
;;;

;; A JSON parameter: VALUE is sent as `encode-json' writes it.
(define-record-type <pg-json>
  (pg-json value)
  pg-json?
  (value pg-json-value))

;; The text of a statement's parameters, one after the other, each ending
;; in NUL (libpq reads text parameters as C strings).
(define-record-type <param-buffer>
  (%make-param-buffer data position)
  param-buffer?
  (data param-buffer-data set-param-buffer-data!)     ; bytevector, grown as needed
  (position param-buffer-position set-param-buffer-position!)) ; bytes used

(define (make-param-buffer)
  (%make-param-buffer (make-bytevector 1024) 0))

(define (param-buffer-reset! buffer)
  (set-param-buffer-position! buffer 0))

(define (reserve! buffer count)
  ;; make room for COUNT more bytes; -> the data bytevector
  (let* ((data (param-buffer-data buffer))
         (need (+ (param-buffer-position buffer) count)))
    (if (<= need (bytevector-length data))
        data
        (let ((new (make-bytevector (max need (* 2 (bytevector-length data))))))
          (bytevector-copy! data 0 new 0 (param-buffer-position buffer))
          (set-param-buffer-data! buffer new)
          new))))

(define (put-bytes! buffer bv)
  (let* ((n (bytevector-length bv))
         (data (reserve! buffer n))
         (pos (param-buffer-position buffer)))
    (bytevector-copy! bv 0 data pos n)
    (set-param-buffer-position! buffer (+ pos n))))

(define (put-byte! buffer byte)
  (let ((data (reserve! buffer 1))
        (pos (param-buffer-position buffer)))
    (bytevector-u8-set! data pos byte)
    (set-param-buffer-position! buffer (+ pos 1))))

(define (put-integer! buffer n)
  ;; the decimal digits of the exact integer N, without a string
  (if (< n 0)
      (begin (put-byte! buffer 45) (put-integer! buffer (- n)))
      (let* ((count (let lp ((n (quotient n 10)) (count 1))
                      (if (zero? n) count (lp (quotient n 10) (+ count 1)))))
             (data (reserve! buffer count))
             (pos (param-buffer-position buffer)))
        (let lp ((n n) (i (+ pos count -1)))
          (bytevector-u8-set! data i (+ 48 (remainder n 10)))
          (unless (< n 10) (lp (quotient n 10) (- i 1))))
        (set-param-buffer-position! buffer (+ pos count)))))

(define (raise-bad-param value why)
  (raise-exception (make-exception
          (make-error)
          (make-exception-with-origin 'pg-query)
          (make-exception-with-message
           (string-append "cannot send this value as a PostgreSQL parameter: " why))
          (make-exception-with-irritants (list value)))))

(define (decimal-text q)
  ;; the exact decimal text of the exact rational Q, if it has one
  (let ((d (denominator q)))
    (let lp ((d d) (twos 0) (fives 0))
      (cond
       ((zero? (remainder d 2)) (lp (quotient d 2) (+ twos 1) fives))
       ((zero? (remainder d 5)) (lp (quotient d 5) twos (+ fives 1)))
       ((not (= d 1)) (raise-bad-param q "an exact fraction with no finite decimal form"))
       (else
        (let* ((places (max twos fives))
               (scaled (* (abs q) (expt 10 places)))
               (digits (number->string scaled))
               (digits (if (<= (string-length digits) places)
                           (string-append (make-string (- (+ places 1) (string-length digits)) #\0)
                                          digits)
                           digits))
               (cut (- (string-length digits) places)))
          (string-append (if (< q 0) "-" "")
                         (substring digits 0 cut) "." (substring digits cut))))))))

(define (pad n width)
  (let ((s (number->string n)))
    (if (< (string-length s) width)
        (string-append (make-string (- width (string-length s)) #\0) s)
        s)))

(define (date-text d)
  ;; ISO 8601 with the date's offset, as timestamptz reads it; the
  ;; offset is ignored by timestamp and the time by date
  (let* ((year (date-year d))
         (offset (date-zone-offset d))
         (abs-offset (abs offset)))
    (string-append
     (pad (if (<= year 0) (- 1 year) year) 4) "-" (pad (date-month d) 2) "-" (pad (date-day d) 2)
     " " (pad (date-hour d) 2) ":" (pad (date-minute d) 2) ":" (pad (date-second d) 2)
     (if (zero? (date-nanosecond d)) "" (string-append "." (pad (date-nanosecond d) 9)))
     (if (< offset 0) "-" "+")
     (pad (quotient abs-offset 3600) 2) ":" (pad (quotient (remainder abs-offset 3600) 60) 2)
     (if (zero? (remainder abs-offset 60)) "" (string-append ":" (pad (remainder abs-offset 60) 2)))
     (if (<= year 0) " BC" ""))))

(define (bytevector->hex bv)
  (let* ((n (bytevector-length bv))
         (s (make-string (+ 2 (* 2 n))))
         (hex "0123456789abcdef"))
    (string-set! s 0 #\\)
    (string-set! s 1 #\x)
    (let lp ((i 0))
      (when (< i n)
        (let ((b (bytevector-u8-ref bv i)))
          (string-set! s (+ 2 (* 2 i)) (string-ref hex (quotient b 16)))
          (string-set! s (+ 3 (* 2 i)) (string-ref hex (remainder b 16))))
        (lp (+ i 1))))
    s))

(define (check-no-nul s)
  (when (string-index s #\nul)
    (raise-bad-param s "a string holding a NUL character (PostgreSQL text cannot)"))
  s)

(define (array-text v)
  ;; {e1,e2,...}: each element quoted (\ and " escaped), NULL bare
  (string-append
   "{"
   (string-join
    (map (lambda (x)
           (cond
            ((eq? x 'null) "NULL")
            ((vector? x) (array-text x))
            (else
             (let ((s (value->text x)))
               (string-append
                "\""
                (string-concatenate
                 (map (lambda (c)
                        (case c
                          ((#\\) "\\\\")
                          ((#\") "\\\"")
                          (else (string c))))
                      (string->list s)))
                "\"")))))
         (vector->list v))
    ",")
   "}"))

(define (value->text x)
  "Return the text PostgreSQL reads as the value X (not NULL): a number,
string, boolean, bytevector (bytea's hex form), SRFI-19 date, `pg-json'
or vector (an array)."
  (cond
   ((string? x) (check-no-nul x))
   ((exact-integer? x) (number->string x))
   ((eq? x #t) "t")
   ((eq? x #f) "f")
   ((and (real? x) (inexact? x))
    (cond
     ((nan? x) "NaN")
     ((inf? x) (if (> x 0) "Infinity" "-Infinity"))
     (else (number->string x))))
   ((and (rational? x) (exact? x)) (decimal-text x))
   ((bytevector? x) (bytevector->hex x))
   ((date? x) (date-text x))
   ((pg-json? x) (utf8->string (encode-json (pg-json-value x))))
   ((vector? x) (array-text x))
   (else (raise-bad-param x "no PostgreSQL text form for it"))))

(define (encode-param! buffer x)
  "Write parameter X into BUFFER: its text and a NUL, and return 0 (text
format); or, for a bytevector, its bytes, and return 1 (binary format).
X is not the symbol null (NULL is sent as no value at all)."
  (cond
   ((exact-integer? x) (put-integer! buffer x) (put-byte! buffer 0) 0)
   ((bytevector? x) (put-bytes! buffer x) 1)
   ((string? x) (put-bytes! buffer (string->utf8 (check-no-nul x))) (put-byte! buffer 0) 0)
   (else (put-bytes! buffer (string->utf8 (value->text x))) (put-byte! buffer 0) 0)))

;;;
;;; COPY FROM STDIN, text format
;;;

(define (copy-escape! buffer s)
  ;; COPY's text format: \ tab newline and return escaped
  (string-for-each
   (lambda (c)
     (case c
       ((#\\) (put-byte! buffer 92) (put-byte! buffer 92))
       ((#\tab) (put-byte! buffer 92) (put-byte! buffer 116))
       ((#\newline) (put-byte! buffer 92) (put-byte! buffer 110))
       ((#\return) (put-byte! buffer 92) (put-byte! buffer 114))
       (else
        (if (char<? c #\x80)
            (put-byte! buffer (char->integer c))
            (put-bytes! buffer (string->utf8 (string c)))))))
   s))

(define (copy-row-text! buffer row)
  "Append ROW, a vector of values, to BUFFER as one line of COPY's text
format (tab-separated, \\N for NULL)."
  (let ((n (vector-length row)))
    (let lp ((i 0))
      (when (< i n)
        (unless (zero? i) (put-byte! buffer 9))
        (let ((x (vector-ref row i)))
          (cond
           ((eq? x 'null) (put-byte! buffer 92) (put-byte! buffer 78))
           ((exact-integer? x) (put-integer! buffer x))
           (else (copy-escape! buffer (value->text x)))))
        (lp (+ i 1))))
    (put-byte! buffer 10)))

;;; (plucky db postgresql types) ends here
