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
  #:use-module (plucky http error)
  #:use-module (plucky http multipart)
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
            delete-form-files!))


;;;
;;; application/x-www-form-urlencoded
;;;

(define-syntax-rule (u8 bv i) (bytevector-u8-ref bv i))

(define (hex-value byte)
  (cond ((<= 48 byte 57) (- byte 48))
        ((<= 97 byte 102) (- byte 87))
        ((<= 65 byte 70) (- byte 55))
        (else #f)))

(define (utf8-slice->string bv start end)
  ;; -> BV [START, END) as UTF-8, invalid sequences as U+FFFD
  (let ((copy (make-bytevector (- end start))))
    (bytevector-copy! bv start copy 0 (- end start))
    ;; utf8->string is the fast path; it refuses invalid input, which
    ;; the port-based decoder then replaces.
    (catch 'decoding-error
      (lambda () (utf8->string copy))
      (lambda args (bytevector->string copy "UTF-8" 'substitute)))))

(define (decode-component bv start end)
  ;; -> BV [START, END) with "+" as a space and %XX as the byte XX, read
  ;; as UTF-8.  A "%" not followed by two hex digits stays as it is.
  (let scan ((i start))
    (cond
     ((= i end) (utf8-slice->string bv start end))
     ((let ((byte (u8 bv i))) (or (eqv? byte 37) (eqv? byte 43)))
      (let ((out (make-bytevector (- end start))))
        (let lp ((i start) (o 0))
          (if (= i end)
              (utf8-slice->string out 0 o)
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

(define (urlencoded->alist body)
  "Return the fields of BODY, an application/x-www-form-urlencoded
bytevector or string (a request body or a query string), as an alist
((name . value) ...) of strings in the order given, as the WHATWG URL
standard reads it: pairs are separated by \"&\" (empty ones skipped), a
name without \"=\" has the value \"\", \"+\" is a space, %XX is the byte
XX, and the bytes are read as UTF-8 (invalid sequences become U+FFFD).
An invalid escape is kept literally: \"%zz\", \"%4\" and a lone \"%\"
stay as they are; the error is the sender's and dropping data would
hide it."
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
                                   (if equals (decode-component bv (+ equals 1) amp) ""))
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
                                   (max-field-size (* 1024 1024)) (max-header-bytes 8192))
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
memory) and MAX-HEADER-BYTES per part head.  Both procedures raise an
&http-error: 415 if CONTENT-TYPE is not multipart/form-data (at once),
400 for a malformed body, a part without Content-Disposition: form-data
and a name, or (from FINISH) a body without its close delimiter, and
413 past a limit; every file spooled so far is then deleted, and later
calls raise the same error."
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
                         (utf8-slice->string bytes 0 (bytevector-length bytes))))))
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
                              (max-field-size (* 1024 1024)) (max-header-bytes 8192))
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
                                  #:max-header-bytes max-header-bytes))
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

;;; (plucky web forms) ends here
