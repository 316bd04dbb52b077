;;; (plucky web forms) --- what a handler does with a submitted form

;; Copyright (C) 2026 the plucky authors
;; (No header names with a colon in these first lines: Guile reads a
;; "coding:" here as the file's character set.)
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; An HTML form arrives in one of two encodings, and both become the
;;; same thing here: a form, an alist ((name . value) ...) in the order
;;; the fields were sent, a name repeated if the browser repeated it.
;;;
;;;   application/x-www-form-urlencoded   (urlencoded->alist body)
;;;       values are strings.  Also what a query string holds.
;;;
;;;   multipart/form-data                 (read-multipart-form body content-type)
;;;       a field's value is a string; a file's is a <form-file>: its
;;;       data was written, as it arrived, to a temporary file (mkstemp!)
;;;       under the spool directory, never held in memory.  The handler
;;;       moves the file where it belongs or deletes it; the files of a
;;;       form that fails (a limit, a malformed body) are deleted here.
;;;
;;;   (form-ref form "name") -> the first value of that name, or #f.
;;;
;;; A handler given the body as a bytevector (what plucky passes today,
;;; as Guile's server does) uses `read-multipart-form'.  When the body is
;;; streamed, `multipart-form-collector' gives a procedure to feed it
;;; slice by slice and one to call at its end, so that a 200 MB upload
;;; goes to disk in bounded memory:
;;;
;;;   (let-values (((feed finish) (multipart-form-collector content-type)))
;;;     (let loop ()
;;;       (let ((n (read-into! buffer)))        ; however the body is read
;;;         (unless (zero? n)
;;;           (feed buffer 0 n)
;;;           (loop))))
;;;     (finish))                                ; -> the form
;;;
;;; Both raise an &http-error from (plucky http error) for a body the
;;; server should refuse: 400 when malformed, 413 past a limit, 415 when
;;; the content type is not multipart/form-data.  The framing is
;;; (plucky http multipart)'s; field values are decoded as UTF-8 (the
;;; page's charset, in practice; `_charset_' is not looked at), invalid
;;; sequences becoming U+FFFD.
;;;
;;; Code:

(define-module (plucky web forms)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 binary-ports)
  #:use-module (ice-9 iconv)
  #:use-module (ice-9 regex)
  #:use-module (srfi srfi-1)
  #:use-module (web request)
  #:use-module (web uri)
  #:use-module (plucky http)
  #:export (urlencoded->alist
            read-multipart-form
            multipart-form-collector
            form-ref
            form-file?
            form-file-name
            form-file-filename
            form-file-content-type
            form-file-path
            form-file-size
            delete-form-files!
            read-form
            form-field
            declare-form
            validate-form
            form-valid?
            form-value
            form-error
            form-errors
            form-input
            render-field))


;;;
;;; application/x-www-form-urlencoded
;;;

(define-syntax-rule (u8 bv i) (bytevector-u8-ref bv i))

(define (hex-value byte)
  (cond ((<= 48 byte 57) (- byte 48))
        ((<= 97 byte 102) (- byte 87))
        ((<= 65 byte 70) (- byte 55))
        (else #f)))

(define* (utf8-slice->string bv start end #:optional (invalid 'replace))
  ;; -> BV [START, END) as UTF-8, invalid sequences as U+FFFD; or, if
  ;; INVALID is 'keep, the bytes themselves as a bytevector
  (let ((copy (make-bytevector (- end start))))
    (bytevector-copy! bv start copy 0 (- end start))
    ;; utf8->string is the fast path; it refuses invalid input, which
    ;; the port-based decoder then replaces.
    (catch 'decoding-error
      (lambda () (utf8->string copy))
      (lambda args
        (if (eq? invalid 'keep)
            copy
            (bytevector->string copy "UTF-8" 'substitute))))))

(define (check-invalid-utf8 invalid)
  (unless (memq invalid '(replace keep))
    (error "#:invalid-utf8 is neither replace nor keep:" invalid)))

(define* (decode-component bv start end #:optional (invalid 'replace))
  ;; -> BV [START, END) with "+" as a space and %XX as the byte XX, read
  ;; as UTF-8.  A "%" not followed by two hex digits stays as it is.
  (let scan ((i start))
    (cond
     ((= i end) (utf8-slice->string bv start end invalid))
     ((let ((byte (u8 bv i))) (or (eqv? byte 37) (eqv? byte 43)))
      (let ((out (make-bytevector (- end start))))
        (let lp ((i start) (o 0))
          (if (= i end)
              (utf8-slice->string out 0 o invalid)
              (let ((byte (u8 bv i)))
                (cond
                 ((eqv? byte 43)
                  (bytevector-u8-set! out o 32)
                  (lp (+ i 1) (+ o 1)))
                 ((and (eqv? byte 37) (< (+ i 2) end)
                       (hex-value (u8 bv (+ i 1))) (hex-value (u8 bv (+ i 2))))
                  (bytevector-u8-set! out o (+ (* 16 (hex-value (u8 bv (+ i 1))))
                                               (hex-value (u8 bv (+ i 2)))))
                  (lp (+ i 3) (+ o 1)))
                 (else
                  (bytevector-u8-set! out o byte)
                  (lp (+ i 1) (+ o 1)))))))))
     (else (scan (+ i 1))))))

(define (index-of bv byte start end)
  (let lp ((i start))
    (cond ((= i end) #f)
          ((eqv? (u8 bv i) byte) i)
          (else (lp (+ i 1))))))

(define* (urlencoded->alist body #:key (invalid-utf8 'replace))
  "Return the fields of BODY, an application/x-www-form-urlencoded
bytevector or string (a request body or a query string), as an alist
((name . value) ...) of strings in the order given, as the WHATWG URL
standard reads it: pairs are separated by \"&\" (empty ones skipped), a
name without \"=\" has the value \"\", \"+\" is a space, %XX is the byte
XX, and the bytes are read as UTF-8: invalid sequences become U+FFFD, or,
if INVALID-UTF8 is 'keep, a value that is not UTF-8 is left as its bytes
(a bytevector), for `validate-form' to refuse with a message.  An
invalid escape is kept literally: \"%zz\", \"%4\" and a lone \"%\"
stay as they are; the error is the sender's and dropping data would
hide it."
  (check-invalid-utf8 invalid-utf8)
  (let* ((bv (if (string? body) (string->utf8 body) body))
         (end (bytevector-length bv)))
    (let pairs ((start 0) (out '()))
      (if (>= start end)
          (reverse out)
          (let* ((amp (or (index-of bv 38 start end) end))
                 (equals (index-of bv 61 start amp)))
            (pairs (+ amp 1)
                   (if (= start amp)
                       out
                       (cons (cons (decode-component bv start (or equals amp))
                                   (if equals
                                       (decode-component bv (+ equals 1) amp invalid-utf8)
                                       ""))
                             out))))))))


;;;
;;; Forms
;;;

(define-record-type <form-file>
  (make-form-file name filename content-type path size)
  form-file?
  (name form-file-name)                 ; the field's name
  (filename form-file-filename)         ; as the client sent it (filename* preferred):
                                        ; a name to show, never a path to use
  (content-type form-file-content-type) ; (type/subtype (param . "value") ...) or #f
  (path form-file-path)                 ; the spooled data, a file of its own
  (size form-file-size))                ; its bytes

(define (form-ref form name)
  "Return the value of the first field called NAME in FORM (a string, or
a <form-file> for an uploaded file), or #f if there is none."
  (let ((entry (assoc name form)))
    (and entry (cdr entry))))

(define (delete-form-files! form)
  "Delete the spooled file of each <form-file> in FORM that is still
there (a handler that moved one away is fine)."
  (for-each (lambda (entry)
              (when (form-file? (cdr entry))
                (false-if-exception (delete-file (form-file-path (cdr entry))))))
            form))

(define (default-spool-directory)
  (or (getenv "TMPDIR") "/tmp"))

(define (form-data-boundary content-type)
  ;; -> the boundary of CONTENT-TYPE (parsed by Guile, or a string), or
  ;; raise 415 if it is not multipart/form-data, 400 if it has no boundary
  (let ((type (cond
               ((and (pair? content-type) (symbol? (car content-type)))
                (symbol->string (car content-type)))
               ((string? content-type)
                (string-trim-both (car (string-split content-type #\;))))
               (else #f))))
    (unless (and type (string-ci=? type "multipart/form-data"))
      (raise-exception (make-http-error 415 "expected multipart/form-data")))
    (or (content-type-boundary content-type)
        (raise-exception (make-http-error 400 "multipart/form-data without a valid boundary")))))

(define* (multipart-form-collector content-type
                                   #:key (spool-directory (default-spool-directory))
                                   (max-parts 1000) (max-file-size #f)
                                   (max-field-size (* 1024 1024)) (max-header-bytes 8192)
                                   (invalid-utf8 'replace))
  "Return two procedures to read a multipart/form-data body of
CONTENT-TYPE (the request's, as Guile parses it or as a string) that
arrives in slices: (FEED bv [start [end]]) parses the next slice and
returns 'more, or 'done once the close delimiter is in (later slices are
ignored); (FINISH) returns the form, ((name . value) ...) in the order
sent, a field's value a string and a file's a <form-file>.  A part with
a filename parameter (even empty, as a browser sends for no file) is a
file: its data goes, as it arrives, to a new file made with mkstemp!
under SPOOL-DIRECTORY (default: $TMPDIR, else /tmp), which the caller
then owns.  At most MAX-PARTS parts, MAX-FILE-SIZE bytes per file (#f:
no limit but the request's), MAX-FIELD-SIZE bytes per field (held in
memory) and MAX-HEADER-BYTES per part head.  A field's value that is
not UTF-8 is read as `urlencoded->alist' reads one, by INVALID-UTF8.
Both procedures raise an
&http-error: 415 if CONTENT-TYPE is not multipart/form-data (at once),
400 for a malformed body, a part without Content-Disposition: form-data
and a name, or (from FINISH) a body without its close delimiter, and
413 past a limit; every file spooled so far is then deleted, and later
calls raise the same error."
  (check-invalid-utf8 invalid-utf8)
  (let ((boundary (form-data-boundary content-type))
        (form '())                      ; ((name . value) ...), last first
        (spooled '())                   ; the path of every file made
        (file #f)                       ; the open port of the current file part
        (path #f)                       ; and its path
        (field #f)                      ; the bytevector port of the current field
        (field-bytes #f)                ; and the procedure that gives its bytes
        (size 0)                        ; bytes of the current part so far
        (failure #f))                   ; the error, once failed
    (define (refuse status reason)
      (raise-exception (make-http-error status reason)))
    (define (start! part)
      (unless (and (eq? 'form-data (multipart-part-disposition part))
                   (multipart-part-name part))
        (refuse 400 "form part without Content-Disposition: form-data and a name"))
      (set! size 0)
      (if (multipart-part-filename part)
          (let ((port (mkstemp! (string-append spool-directory "/plucky-upload-XXXXXX") "wb")))
            (fcntl port F_SETFD FD_CLOEXEC)
            (set! file port)
            (set! path (port-filename port))
            (set! spooled (cons path spooled)))
          (call-with-values open-bytevector-output-port
            (lambda (port get)
              (set! field port)
              (set! field-bytes get)))))
    (define (data! bv start count)
      (set! size (+ size count))
      (if file
          (begin
            (when (and max-file-size (> size max-file-size))
              (refuse 413 "uploaded file too large"))
            (put-bytevector file bv start count))
          (begin
            (when (> size max-field-size)
              (refuse 413 "form field too large"))
            (put-bytevector field bv start count))))
    (define (end! part)
      (let ((value (if file
                       (begin
                         (close-port file)
                         (set! file #f)
                         (make-form-file (multipart-part-name part) (multipart-part-filename part)
                                         (multipart-part-content-type part) path size))
                       (let ((bytes (field-bytes)))
                         (close-port field)
                         (set! field #f)
                         (utf8-slice->string bytes 0 (bytevector-length bytes) invalid-utf8)))))
        (set! form (cons (cons (multipart-part-name part) value) form))))
    (define parser
      (make-multipart-parser boundary #:max-parts max-parts #:max-header-bytes max-header-bytes
                             #:on-part-start start! #:on-part-data data! #:on-part-end end!))
    (define (abandon! error)
      ;; Whatever went wrong, leave no file behind.
      (unless failure
        (set! failure error)
        (when file (false-if-exception (close-port file)))
        (for-each (lambda (path) (false-if-exception (delete-file path))) spooled)
        (set! spooled '())))
    (define (guarded thunk)
      (when failure (raise-exception failure))
      (with-exception-handler
          (lambda (error)
            (abandon! error)
            (raise-exception error))
        thunk))
    (define* (feed bv #:optional (start 0) (end (bytevector-length bv)))
      (guarded
       (lambda ()
         (call-with-values (lambda () (feed-multipart! parser bv start end))
           (lambda (status index)
             (if (http-error? status)
                 (raise-exception status)
                 status))))))
    (define (finish)
      (guarded
       (lambda ()
         (let ((status (finish-multipart! parser)))
           (if (http-error? status)
               (raise-exception status)
               (reverse form))))))
    (values feed finish)))

(define* (read-multipart-form body content-type #:key (spool-directory (default-spool-directory))
                              (max-parts 1000) (max-file-size #f)
                              (max-field-size (* 1024 1024)) (max-header-bytes 8192)
                              (invalid-utf8 'replace))
  "Return the form in BODY, a multipart/form-data request body of
CONTENT-TYPE — a whole bytevector, or an input port (the body port of a
`with-body-port' handler) read to its end 64 KiB at a time, so that a
file of any size goes to disk without being held in memory —
as ((name . value) ...) in the order sent, fields as strings and files
as <form-file> records whose data has been spooled to temporary files
under SPOOL-DIRECTORY.  The limits and the errors raised are those of
`multipart-form-collector'."
  (call-with-values
      (lambda ()
        (multipart-form-collector content-type #:spool-directory spool-directory
                                  #:max-parts max-parts #:max-file-size max-file-size
                                  #:max-field-size max-field-size
                                  #:max-header-bytes max-header-bytes
                                  #:invalid-utf8 invalid-utf8))
    (lambda (feed finish)
      (if (port? body)
          (let ((buffer (make-bytevector 65536)))
            (let lp ()
              (let ((n (get-bytevector-n! body buffer 0 65536)))
                (unless (eof-object? n)
                  ;; Past the close delimiter the rest is ignored, but
                  ;; still read: the connection must reach the body's end.
                  (feed buffer 0 n)
                  (lp)))))
          (feed body))
      (finish))))

;;;
;;; Reading a request's form
;;;

(define* (read-form request body #:key (max-bytes (* 1024 1024)) (max-fields 1000)
                    (spool-directory (default-spool-directory)) (max-file-size #f))
  "Return the form REQUEST carries as ((name . value) ...): its query
string's fields for a GET or HEAD, its body's for an
application/x-www-form-urlencoded or multipart/form-data one (BODY, a
bytevector, as the handler was given it), '() for a request with
neither.  A value that is not UTF-8 is kept as a bytevector, for
`validate-form' to refuse with a message.  Raise an &http-error: 413 for
a urlencoded body over MAX-BYTES, or more than MAX-FIELDS fields; 415 for
a body of another type; the errors of `read-multipart-form' for a
multipart one."
  (let ((type (request-content-type request)))
    (cond
     ((memq (request-method request) '(GET HEAD))
      (let ((query (uri-query (request-uri request))))
        (if query (limit-fields (urlencoded->alist query #:invalid-utf8 'keep) max-fields) '())))
     ((or (not body) (and (bytevector? body) (zero? (bytevector-length body)))) '())
     ((not (pair? type))
      (raise-exception (make-http-error 415 "a form body needs a Content-Type")))
     ((eq? (car type) 'application/x-www-form-urlencoded)
      (when (> (bytevector-length body) max-bytes)
        (raise-exception (make-http-error 413 "form too large")))
      (limit-fields (urlencoded->alist body #:invalid-utf8 'keep) max-fields))
     ((eq? (car type) 'multipart/form-data)
      (read-multipart-form body type #:spool-directory spool-directory #:max-parts max-fields
                           #:max-file-size max-file-size #:max-field-size max-bytes
                           #:invalid-utf8 'keep))
     (else
      (raise-exception (make-http-error 415 "expected a form (urlencoded or multipart)"))))))

(define (limit-fields form max-fields)
  (when (> (length form) max-fields)
    (raise-exception (make-http-error 413 "too many form fields")))
  form)


;;;
;;; Validation
;;;
;;; A form is declared once, as data, and then used both to check what
;;; was submitted and to render the fields:
;;;
;;;   (define signup
;;;     (declare-form
;;;      (list (form-field "user" #:label "Username" #:required? #t
;;;                        #:min-length 2 #:max-length 15 #:pattern "^[A-Za-z0-9_-]+$")
;;;            (form-field "password" #:type 'password #:required? #t #:min-length 8)
;;;            (form-field "age" #:type 'integer #:min 13))))
;;;
;;;   (let ((result (validate-form signup (read-form request body))))
;;;     (if (form-valid? result)
;;;         (create-user! (form-value result "user") ...)
;;;         (render-page `(form ,@(map (lambda (name) (render-field signup name result))
;;;                                    '("user" "password" "age"))))))
;;;
;;; Every field has a length limit (#:max-length, 200 characters by
;;; default, 20,000 for a textarea); values are trimmed unless
;;; #:trim? #f (a password never is); a value that is not UTF-8, holds a
;;; NUL or another control character (a line break too, but in a
;;; textarea) is refused with a message; the declared form refuses more
;;; than #:max-fields fields in all or a field sent twice.  Messages are
;;; sentences naming the field's label.  `render-field' gives the SXML of
;;; a field with what the visitor typed and the message beside it;
;;; escaping is the HTML writer's.

(define field-types '(text textarea password email url integer checkbox hidden))

(define-record-type <form-field>
  (make-form-field name type label required? min-length max-length minimum maximum
                   pattern pattern-message check trim?)
  form-field?
  (name form-field-name)
  (type form-field-type)                ; one of field-types
  (label form-field-label)              ; for messages and the <label>
  (required? form-field-required?)
  (min-length form-field-min-length)    ; characters, or #f
  (max-length form-field-max-length)    ; characters
  (minimum form-field-minimum)          ; integers: the smallest allowed, or #f
  (maximum form-field-maximum)
  (pattern form-field-pattern)          ; (regexp . source), or #f
  (pattern-message form-field-pattern-message)
  (check form-field-check)              ; value -> #f or a message, or #f
  (trim? form-field-trim?))

(define* (form-field name #:key (type 'text) (label name) (required? #f) (min-length #f)
                     (max-length (if (eq? type 'textarea) 20000 200)) (min #f) (max #f)
                     (pattern #f) (pattern-message #f) (check #f)
                     (trim? (not (eq? type 'password))))
  "Return a field declaration for `declare-form': the field NAME, of
TYPE (text, textarea, password, email, url, integer, checkbox or
hidden), shown as LABEL; REQUIRED? or not; between MIN-LENGTH and
MAX-LENGTH characters (default 200, 20,000 for a textarea) once trimmed
(TRIM?, default #t but for passwords); for an integer, between MIN and
MAX; matching the regular expression PATTERN (POSIX extended, against
the whole value; PATTERN-MESSAGE says what it wants); and passing CHECK,
a procedure given the value (converted: an integer, #t for a checkbox)
that returns #f or a message."
  (unless (memq type field-types)
    (error "form-field: unknown type:" type))
  (unless (and (exact-integer? max-length) (positive? max-length))
    (error "form-field: max-length is not a positive integer:" max-length))
  (make-form-field name type label required? min-length max-length min max
                   (and pattern (cons (make-regexp pattern regexp/extended) pattern))
                   pattern-message check trim?))

(define-record-type <form-spec>
  (make-form-spec fields max-fields)
  form-spec?
  (fields form-spec-fields)             ; (<form-field> ...)
  (max-fields form-spec-max-fields))

(define* (declare-form fields #:key (max-fields (+ 20 (length fields))))
  "Return a form declaration made of FIELDS, a list of `form-field's,
that refuses a submission of more than MAX-FIELDS fields in all
(default: the declared ones and 20 more, for tokens and buttons)."
  (make-form-spec fields max-fields))

(define-record-type <validation>
  (make-validation values errors inputs message)
  validation?
  (values validation-values)            ; ((name . converted value) ...)
  (errors validation-errors)            ; ((name . message) ...)
  (inputs validation-inputs)            ; ((name . text as submitted) ...)
  (message validation-message))         ; for the whole form, or #f

(define (form-valid? result)
  "Return #t if RESULT, from `validate-form', has no error."
  (and (null? (validation-errors result)) (not (validation-message result))))

(define (form-value result name)
  "Return the value of the field NAME in RESULT, from `validate-form':
trimmed, converted (an integer for an integer field, #t or #f for a
checkbox), #f when left empty."
  (assoc-ref (validation-values result) name))

(define (form-error result name)
  "Return the message for the field NAME in RESULT, or #f if it is fine."
  (and result (assoc-ref (validation-errors result) name)))

(define (form-errors result)
  "Return the messages of RESULT as ((name . message) ...), the form's
own message first under the name #f."
  (append (if (validation-message result) (list (cons #f (validation-message result))) '())
          (validation-errors result)))

(define (form-input result name)
  "Return the text submitted for the field NAME in RESULT, as it was (to
show it again), or #f."
  (and result (assoc-ref (validation-inputs result) name)))

(define (single-line-char-ok? c)
  (let ((n (char->integer c)))
    (not (or (< n 32) (= n 127)))))

(define (multi-line-char-ok? c)
  (or (single-line-char-ok? c) (memv c '(#\tab #\newline #\return))))

(define email-pattern (make-regexp "^[^@[:space:]]+@[^@[:space:].]+(\\.[^@[:space:].]+)+$"))
(define integer-pattern (make-regexp "^[-+]?[0-9]{1,18}$" regexp/extended))

(define (whole-match? regexp text)
  (let ((match (regexp-exec regexp text)))
    (and match (= 0 (match:start match)) (= (string-length text) (match:end match)))))

(define (http-url? text)
  (let ((uri (string->uri text)))
    (and uri (memq (uri-scheme uri) '(http https)) (uri-host uri)
         (not (string-null? (uri-host uri))))))

(define (check-field field raw count)
  ;; -> (values value message input) for FIELD given RAW, the submitted
  ;; value (#f when absent), sent COUNT times
  (let ((label (form-field-label field))
        (type (form-field-type field)))
    (define (fail message) (values #f (string-append label " " message) (and (string? raw) raw)))
    (cond
     ((> count 1) (fail "was sent more than once."))
     ((form-file? raw) (fail "must be text, not a file."))
     ((bytevector? raw) (values #f (string-append label " is not valid UTF-8 text.") #f))
     ((and raw (string-index raw #\nul)) (fail "must not contain a NUL character."))
     ((and raw (> (string-length raw) (* 2 (form-field-max-length field))))
      ;; Far too long: not even kept to show again.
      (values #f (string-append label " must be at most "
                                (number->string (form-field-max-length field)) " characters.")
              #f))
     ((eq? type 'checkbox)
      (cond ((and (not raw) (form-field-required? field)) (fail "must be checked."))
            ((and (form-field-check field) ((form-field-check field) (and raw #t)))
             => (lambda (message) (values #f message raw)))
            (else (values (and raw #t) #f raw))))
     ((and raw (not (string-every (if (eq? type 'textarea) multi-line-char-ok? single-line-char-ok?)
                                  raw)))
      (fail (if (string-any (lambda (c) (memv c '(#\newline #\return))) raw)
                "must be on one line."
                "must not contain control characters.")))
     (else
      (let ((text (if (and raw (form-field-trim? field)) (string-trim-both raw) (or raw ""))))
        (cond
         ((string-null? text)
          (if (form-field-required? field) (fail "is required.") (values #f #f raw)))
         ((> (string-length text) (form-field-max-length field))
          (fail (string-append "must be at most " (number->string (form-field-max-length field))
                               " characters.")))
         ((and (form-field-min-length field) (< (string-length text) (form-field-min-length field)))
          (fail (string-append "must be at least " (number->string (form-field-min-length field))
                               " characters.")))
         ((and (eq? type 'integer) (not (whole-match? integer-pattern text)))
          (fail "must be a whole number."))
         ((and (eq? type 'email) (not (whole-match? email-pattern text)))
          (fail "must be an email address."))
         ((and (eq? type 'url) (not (http-url? text)))
          (fail "must be a web address starting with http:// or https://."))
         ((and (form-field-pattern field) (not (whole-match? (car (form-field-pattern field)) text)))
          (fail (or (form-field-pattern-message field) "is not in the expected form.")))
         (else
          (let ((value (if (eq? type 'integer) (string->number text 10) text)))
            (cond
             ((and (eq? type 'integer) (form-field-minimum field) (< value (form-field-minimum field)))
              (fail (string-append "must be at least " (number->string (form-field-minimum field)) ".")))
             ((and (eq? type 'integer) (form-field-maximum field) (> value (form-field-maximum field)))
              (fail (string-append "must be at most " (number->string (form-field-maximum field)) ".")))
             ((and (form-field-check field) ((form-field-check field) value))
              => (lambda (message) (values #f message raw)))
             (else (values value #f raw)))))))))))

(define (validate-form spec form)
  "Return the validation of FORM, ((name . value) ...) as `read-form' or
`urlencoded->alist' give it, against SPEC from `declare-form': a record
for `form-valid?', `form-value', `form-error', `form-errors',
`form-input' and `render-field'.  Fields SPEC does not declare are
ignored (but counted against its max-fields)."
  (if (> (length form) (form-spec-max-fields spec))
      (make-validation '() '() '()
                       (string-append "The form has too many fields ("
                                      (number->string (length form)) "; at most "
                                      (number->string (form-spec-max-fields spec)) ")."))
      (let loop ((fields (form-spec-fields spec)) (values* '()) (errors '()) (inputs '()))
        (if (null? fields)
            (make-validation (reverse values*) (reverse errors) (reverse inputs) #f)
            (let* ((field (car fields))
                   (name (form-field-name field))
                   (sent (count (lambda (entry) (equal? (car entry) name)) form)))
              (call-with-values (lambda () (check-field field (form-ref form name) sent))
                (lambda (value message input)
                  (loop (cdr fields)
                        (cons (cons name value) values*)
                        (if message (cons (cons name message) errors) errors)
                        (if (string? input) (cons (cons name input) inputs) inputs)))))))))


;;;
;;; Rendering
;;;

(define (spec-field spec name)
  (or (find (lambda (field) (equal? (form-field-name field) name)) (form-spec-fields spec))
      (error "render-field: the form declares no field" name)))

(define* (render-field spec name #:optional (result #f) #:key (attributes '()))
  "Return the SXML of the field NAME of SPEC: a <label>, the control
(input, textarea or checkbox) holding what was submitted in RESULT (from
`validate-form'; #f for an empty form) but for a password, its limits as
HTML attributes (maxlength, required), ATTRIBUTES added to the control,
and the message of RESULT for it, if any, in a <span class=\"error\">
that the control names with aria-describedby.  The whole is a
<p class=\"field\"> (class \"field error\" when there is a message)."
  (let* ((field (spec-field spec name))
         (type (form-field-type field))
         (id (string-append "field-" name))
         (message (form-error result name))
         (input (and (not (eq? type 'password)) (form-input result name)))
         (common `((name ,name) (id ,id)
                   ,@(if (form-field-required? field) '((required "required")) '())
                   ,@(if message `((aria-invalid "true") (aria-describedby ,(string-append id "-error"))) '())
                   ,@attributes))
         (control
          (case type
            ((textarea)
             `(textarea (@ ,@common (maxlength ,(number->string (form-field-max-length field))))
                        ,(or input "")))
            ((checkbox)
             `(input (@ (type "checkbox") ,@common ,@(if input '((checked "checked")) '()))))
            (else
             `(input (@ (type ,(case type
                                 ((integer) "number")
                                 (else (symbol->string type))))
                        ,@common
                        ,@(if (eq? type 'integer)
                              '()
                              `((maxlength ,(number->string (form-field-max-length field)))))
                        ,@(if input `((value ,input)) '())))))))
    (if (eq? type 'hidden)
        control
        `(p (@ (class ,(if message "field error" "field")))
            (label (@ (for ,id)) ,(form-field-label field))
            " "
            ,control
            ,@(if message `(" " (span (@ (class "error") (id ,(string-append id "-error"))) ,message)) '())))))

;;; (plucky web forms) ends here
