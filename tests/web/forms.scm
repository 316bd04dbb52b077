;;; tests/web/forms.scm --- (plucky web forms)

(use-modules ((plucky http) #:select (bytevector-concatenate))
             (srfi srfi-64)
             (srfi srfi-1)
             (rnrs bytevectors)
             (ice-9 binary-ports)
             (ice-9 ftw)
             (ice-9 iconv)
             (ice-9 rdelim)
             (tests lib harness)
             (web request)
             (web uri)
             (plucky http error)
             (plucky web forms))

(define (latin-1->bytes text) (string->bytevector text "ISO-8859-1"))

;; -> the status of the &http-error THUNK raises, or (returned VALUE)
(define (status-of thunk)
  (with-exception-handler
      (lambda (e) (if (http-error? e) (http-error-status e) (raise-exception e)))
    (lambda () (list 'returned (thunk)))
    #:unwind? #t))

;; A fresh spool directory per test, removed with what is left in it.
(define (call-with-spool-directory proc)
  (let ((dir (mkdtemp (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-forms-test-XXXXXX"))))
    (dynamic-wind
      (lambda () #t)
      (lambda () (proc dir))
      (lambda ()
        (for-each (lambda (name) (delete-file (string-append dir "/" name))) (spooled-files dir))
        (rmdir dir)))))

(define (spooled-files dir)
  (or (scandir dir (lambda (name) (not (member name '("." ".."))))) '()))

(define (file-bytes path)
  (let ((bytes (call-with-input-file path get-bytevector-all #:binary #t)))
    (if (eof-object? bytes) #vu8() bytes)))

;; -> the kB figure of KEY ("VmRSS:", "VmHWM:") in /proc/self/status
(define (proc-status-kb key)
  (call-with-input-file "/proc/self/status"
    (lambda (port)
      (let lp ()
        (let ((line (read-line port)))
          (cond ((eof-object? line) #f)
                ((string-prefix? key line)
                 (string->number (car (string-tokenize (substring line (string-length key))))))
                (else (lp))))))))

(test-begin "web/forms")

;; First, so that the process's peak RSS (VmHWM) is this test's.
(test-group "a 200 MB upload streamed through the collector in 64 KiB slices"
  (define boundary "plucky-200MB-test-boundary")
  (define delimiter (string-append "\r\n--" boundary))
  (define slice-size (* 64 1024))
  (define slices 3200)                  ; 200 MiB
  (define limit-kb 62500)               ; 64 MB
  ;; One 64 KiB slice reused for every write: byte 0 is 0, bytes 1-8 the
  ;; slice number (big-endian), then data full of CR, LF, "--" and
  ;; near-delimiters, ending with all of the delimiter but its last byte,
  ;; so that every slice boundary cuts a candidate delimiter.
  (define slice
    (let* ((bv (make-bytevector slice-size 0))
           (tail (latin-1->bytes (substring delimiter 0 (- (string-length delimiter) 1))))
           (pieces (map latin-1->bytes
                        (list "\r" "\n" "\r\n" "--" "\r\n--" "\r\r\n-"
                              (substring delimiter 0 10) (substring delimiter 0 20)
                              "0123456789abcdef" "\x00\xff\x80"))))
      (let fill ((i 9) (k 0))
        (let ((piece (list-ref pieces (modulo (* k 7) (length pieces)))))
          (when (< (+ i (bytevector-length piece)) (- slice-size (bytevector-length tail)))
            (bytevector-copy! piece 0 bv i (bytevector-length piece))
            (fill (+ i (bytevector-length piece)) (+ k 1)))))
      (bytevector-copy! tail 0 bv (- slice-size (bytevector-length tail)) (bytevector-length tail))
      bv))
  (define (number-slice! k)
    (bytevector-u64-set! slice 1 k (endianness big))
    slice)
  (call-with-spool-directory
   (lambda (dir)
     (call-with-values
         (lambda ()
           (multipart-form-collector
            (string-append "multipart/form-data; boundary=" boundary)
            #:spool-directory dir))
       (lambda (feed finish)
         (feed (latin-1->bytes
                (string-append "--" boundary "\r\n"
                               "Content-Disposition: form-data; name=\"video\"; filename=\"big.bin\"\r\n"
                               "Content-Type: application/octet-stream\r\n\r\n")))
         (let ((peak
                (let lp ((k 0) (peak 0))
                  (if (= k slices)
                      peak
                      (begin
                        (feed (number-slice! k))
                        (lp (+ k 1)
                            (if (zero? (modulo k 64)) (max peak (proc-status-kb "VmRSS:")) peak)))))))
           ;; The close, cut inside its delimiter.
           (let ((end (latin-1->bytes (string-append delimiter "\r\n"
                                                     "Content-Disposition: form-data; name=\"after\"\r\n\r\n"
                                                     "still here" delimiter "--\r\n"))))
             (feed end 0 7)
             (feed end 7 (bytevector-length end)))
           (let* ((form (finish))
                  (file (form-ref form "video"))
                  (hwm (proc-status-kb "VmHWM:")))
             (format #t "200 MB upload: peak VmRSS ~a kB, VmHWM ~a kB~%" peak hwm)
             (test-assert "VmRSS sampled while streaming stays below 64 MB" (< 0 peak limit-kb))
             (test-assert "peak RSS of the process (VmHWM) below 64 MB" (< hwm limit-kb))
             (test-equal "the field after the file" "still here" (form-ref form "after"))
             (test-equal "size" (* slices slice-size) (form-file-size file))
             (test-equal "size on disk" (* slices slice-size) (stat:size (stat (form-file-path file))))
             (test-equal "every slice on disk, in order"
               '()
               (call-with-input-file (form-file-path file)
                 (lambda (port)
                   (let ((buffer (make-bytevector slice-size)))
                     (let lp ((k 0) (bad '()))
                       (if (= k slices)
                           (reverse bad)
                           (let ((n (get-bytevector-n! port buffer 0 slice-size)))
                             (lp (+ k 1)
                                 (if (and (eqv? n slice-size) (bytevector=? buffer (number-slice! k)))
                                     bad
                                     (cons k bad))))))))
                 #:binary #t))
             (delete-form-files! form)
             (test-equal "deleted" '() (spooled-files dir)))))))))

(test-group "urlencoded->alist"
  (define-syntax-rule (test-urlencoded name text expected)
    (begin
      (test-equal name expected (urlencoded->alist text))
      (test-equal (string-append name ", as a bytevector") expected
        (urlencoded->alist (string->utf8 text)))))
  (test-urlencoded "fields" "a=1&b=2" '(("a" . "1") ("b" . "2")))
  (test-urlencoded "+ and %20 are spaces" "q=two+words%20here" '(("q" . "two words here")))
  (test-urlencoded "%2B is a plus" "sum=1%2B1" '(("sum" . "1+1")))
  (test-urlencoded "percent-encoded UTF-8" "city=S%C3%A3o+Paulo&snow=%E2%98%83"
                   '(("city" . "São Paulo") ("snow" . "☃")))
  (test-urlencoded "raw UTF-8" "été=ünïcode" '(("été" . "ünïcode")))
  (test-urlencoded "escapes in both cases" "x=%c3%a9%C3%A9" '(("x" . "éé")))
  (test-urlencoded "names are decoded too" "a%5B%5D=1&a%5B%5D=2" '(("a[]" . "1") ("a[]" . "2")))
  (test-urlencoded "a repeated name is kept, in order" "t=1&u=2&t=3"
                   '(("t" . "1") ("u" . "2") ("t" . "3")))
  (test-urlencoded "no = : an empty value" "flag&x=1" '(("flag" . "") ("x" . "1")))
  (test-urlencoded "an empty value" "a=&b=" '(("a" . "") ("b" . "")))
  (test-urlencoded "an empty name" "=x" '(("" . "x")))
  (test-urlencoded "= in a value" "eq=a=b=c" '(("eq" . "a=b=c")))
  (test-urlencoded "empty pairs are skipped" "&&a=1&&b=2&" '(("a" . "1") ("b" . "2")))
  (test-urlencoded "empty input" "" '())
  (test-urlencoded "; is not a separator" "a=1;b=2" '(("a" . "1;b=2")))
  (test-urlencoded "invalid escapes are kept literally" "a=%zz&b=100%&c=%4&d=%4g&e=%%41"
                   '(("a" . "%zz") ("b" . "100%") ("c" . "%4") ("d" . "%4g") ("e" . "%A")))
  (test-urlencoded "an escape cut by the end of the pair" "a=%4&b=%" '(("a" . "%4") ("b" . "%")))
  (test-urlencoded "an escape cut by the end of the input" "a=%4" '(("a" . "%4")))
  (test-urlencoded "an escape that ends the input" "a=%41" '(("a" . "A")))
  (test-urlencoded "invalid UTF-8 becomes U+FFFD" "a=%FF&b=%C3" '(("a" . "\ufffd") ("b" . "\ufffd")))
  (test-equal "a bytevector that is not UTF-8" '(("a" . "x\ufffdy"))
    (urlencoded->alist #vu8(97 61 120 255 121))))

;;; multipart/form-data

(define form-type '(multipart/form-data (boundary . "b")))

(define file-data
  ;; Binary data with near-delimiters, CR, LF and "--".
  (string-append "\x00\x01\r\n--\r\n-b\r\n--c\r--b\n--b" (list->string (map integer->char (iota 256)))
                 "\r\n--\r"))

(define form-text
  (string-append
   "--b\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\n" "Un été à Paris"
   "\r\n--b\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"été.jpg\"\r\n"
   "Content-Type: image/jpeg\r\n\r\n" file-data
   "\r\n--b\r\nContent-Disposition: form-data; name=\"tags\"\r\n\r\n" "sea"
   "\r\n--b\r\nContent-Disposition: form-data; name=\"tags\"\r\n\r\n" "sun"
   "\r\n--b\r\nContent-Disposition: form-data; name=\"empty\"; filename=\"\"\r\n"
   "Content-Type: application/octet-stream\r\n\r\n"
   "\r\n--b--\r\n"))

;; The body as a browser sends it: text as UTF-8, the file's bytes as they are.
(define form-body
  (let* ((cut (+ (string-contains form-text "image/jpeg\r\n\r\n") 14))
         (end (+ cut (string-length file-data))))
    (bytevector-concatenate (list (string->utf8 (substring form-text 0 cut))
                                  (latin-1->bytes file-data)
                                  (string->utf8 (substring form-text end))))))

;; -> the form with each <form-file> as (name filename content-type size
;; data-as-latin-1 in-dir?)
(define (describe form dir)
  (map (lambda (entry)
         (let ((value (cdr entry)))
           (cons (car entry)
                 (if (form-file? value)
                     (list (form-file-name value) (form-file-filename value)
                           (form-file-content-type value) (form-file-size value)
                           (bytevector->string (file-bytes (form-file-path value)) "ISO-8859-1")
                           (string=? (dirname (form-file-path value)) dir))
                     value))))
       form))

(define (expected-form)
  `(("title" . "Un été à Paris")
    ("photo" "photo" "été.jpg" (image/jpeg) ,(string-length file-data) ,file-data #t)
    ("tags" . "sea")
    ("tags" . "sun")
    ("empty" "empty" "" (application/octet-stream) 0 "" #t)))

(test-group "read-multipart-form"
  (call-with-spool-directory
   (lambda (dir)
     (let ((form (read-multipart-form form-body form-type #:spool-directory dir)))
       (test-equal "fields as strings, files spooled" (expected-form) (describe form dir))
       (test-equal "one file per file part in the spool directory"
         (sort (map (lambda (name) (string-append dir "/" name)) (spooled-files dir)) string<?)
         (sort (map form-file-path (filter form-file? (map cdr form))) string<?))
       (test-equal "spooled files are the user's only (mkstemp!)" #o600
         (stat:perms (stat (form-file-path (form-ref form "photo")))))
       (test-equal "form-ref: the first value" "sea" (form-ref form "tags"))
       (test-equal "form-ref: a file" "été.jpg" (form-file-filename (form-ref form "photo")))
       (test-equal "form-ref: no such field" #f (form-ref form "nope"))
       (delete-form-files! form)
       (test-equal "delete-form-files! empties the spool directory" '() (spooled-files dir))
       (delete-form-files! form)
       (test-assert "delete-form-files! twice is fine" #t))))
  (call-with-spool-directory
   (lambda (dir)
     (test-equal "a content type as a string, as plucky keeps one Guile rejects"
       (expected-form)
       (let ((form (read-multipart-form form-body "multipart/form-data; boundary=\"b\""
                                        #:spool-directory dir)))
         (describe form dir)))))
  (call-with-spool-directory
   (lambda (dir)
     (let ((tmpdir (getenv "TMPDIR")))
       (setenv "TMPDIR" dir)
       (let ((form (read-multipart-form form-body form-type)))
         (if tmpdir (setenv "TMPDIR" tmpdir) (unsetenv "TMPDIR"))
         (test-equal "the spool directory defaults to $TMPDIR" 2 (length (spooled-files dir)))
         (delete-form-files! form)))))
  (call-with-spool-directory
   (lambda (dir)
     (let* ((read (lambda (name)
                    (call-with-input-file (test-data-file (string-append "multipart/" name))
                      get-bytevector-all #:binary #t)))
            (form (read-multipart-form
                   (read "curl.body")
                   (string-trim-right (utf8->string (read "curl.content-type")))
                   #:spool-directory dir)))
       (test-equal "a body captured from curl"
         `(("name" . "value")
           ("file" "file" "upload.bin" (application/octet-stream) 1024
            ,(bytevector->string (read "upload.bin") "ISO-8859-1") #t)
           ("empty" . ""))
         (describe form dir))
       (delete-form-files! form)))))

(test-group "multipart-form-collector"
  (call-with-spool-directory
   (lambda (dir)
     (test-equal "split in two at every byte: the same form, no file left behind"
       '()
       (remove (lambda (k)
                 (call-with-values
                     (lambda () (multipart-form-collector form-type #:spool-directory dir))
                   (lambda (feed finish)
                     (let ((first (feed form-body 0 k))
                           (second (feed form-body k (bytevector-length form-body))))
                       (let* ((form (finish))
                              (same? (and (eq? first (if (< k (- (bytevector-length form-body) 2))
                                                         'more
                                                         'done))
                                          (eq? second 'done)
                                          (equal? (expected-form) (describe form dir)))))
                         (delete-form-files! form)
                         (and same? (null? (spooled-files dir))))))))
               (iota (+ 1 (bytevector-length form-body)))))))
  (call-with-spool-directory
   (lambda (dir)
     (test-equal "byte by byte"
       (expected-form)
       (call-with-values
           (lambda () (multipart-form-collector form-type #:spool-directory dir))
         (lambda (feed finish)
           (for-each (lambda (i) (feed form-body i (+ i 1)))
                     (iota (bytevector-length form-body)))
           (let* ((form (finish))
                  (described (describe form dir)))
             (delete-form-files! form)
             described))))))
  (call-with-spool-directory
   (lambda (dir)
     (test-equal "slices after the close delimiter are ignored"
       '(done done)
       (call-with-values (lambda () (multipart-form-collector form-type #:spool-directory dir))
         (lambda (feed finish)
           (let* ((first (feed form-body))
                  (second (feed (string->utf8 "--b\r\n\r\nepilogue"))))
             (delete-form-files! (finish))
             (list first second))))))))

(test-group "refused forms: the status, and no file left behind"
  (define (part name filename data)
    (string-append "--b\r\nContent-Disposition: form-data; name=\"" name "\""
                   (if filename (string-append "; filename=\"" filename "\"") "")
                   "\r\n\r\n" data "\r\n"))
  (define-syntax-rule (test-refused name status text args ...)
    (call-with-spool-directory
     (lambda (dir)
       (test-equal name (list status '())
         (list (status-of (lambda ()
                            (read-multipart-form (latin-1->bytes text) form-type
                                                 #:spool-directory dir args ...)))
               (spooled-files dir))))))
  (define-syntax-rule (test-accepted name text args ...)
    (call-with-spool-directory
     (lambda (dir)
       (test-assert name
         (let ((form (read-multipart-form (latin-1->bytes text) form-type
                                          #:spool-directory dir args ...)))
           (delete-form-files! form)
           (pair? form))))))
  (test-refused "a file over max-file-size, after another file" 413
    (string-append (part "a" "a.bin" "12345") (part "b" "b.bin" "123456") "--b--")
    #:max-file-size 5)
  (test-accepted "files of max-file-size"
    (string-append (part "a" "a.bin" "12345") (part "b" "b.bin" "12345") "--b--")
    #:max-file-size 5)
  (test-refused "a field over max-field-size, after a file" 413
    (string-append (part "a" "a.bin" "12345") (part "f" #f "123456") "--b--")
    #:max-field-size 5)
  (test-accepted "a field of max-field-size"
    (string-append (part "a" "a.bin" "12345") (part "f" #f "12345") "--b--")
    #:max-field-size 5)
  (test-refused "more parts than max-parts" 413
    (string-append (part "a" "a.bin" "1") (part "b" #f "2") (part "c" #f "3") "--b--")
    #:max-parts 2)
  (test-refused "a part head over max-header-bytes" 413
    (string-append (part "a" "a.bin" "1") (part (make-string 100 #\n) #f "2") "--b--")
    #:max-header-bytes 64)
  (test-refused "a malformed part head after a file" 400
    (string-append (part "a" "a.bin" "1") "--b\r\nContent-Disposition form-data\r\n\r\nx\r\n--b--"))
  (test-refused "a malformed boundary line after a file" 400
    (string-append (part "a" "a.bin" "1") "--bogus\r\n"))
  (test-refused "no close delimiter, inside a file" 400
    (string-append (part "a" "a.bin" "1") "--b\r\nContent-Disposition: form-data; name=\"b\"; filename=\"b\"\r\n\r\nhalf"))
  (test-refused "a part without a name" 400
    (string-append (part "a" "a.bin" "1") "--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--"))
  (test-refused "a part without Content-Disposition" 400
    (string-append (part "a" "a.bin" "1") "--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--"))
  (test-refused "a part that is not form-data" 400
    "--b\r\nContent-Disposition: attachment; name=\"a\"; filename=\"a\"\r\n\r\nx\r\n--b--")
  (test-equal "not multipart/form-data: 415" 415
    (status-of (lambda () (read-multipart-form (string->utf8 "a=1") '(application/x-www-form-urlencoded)))))
  (test-equal "multipart/mixed: 415" 415
    (status-of (lambda () (multipart-form-collector '(multipart/mixed (boundary . "b"))))))
  (test-equal "no content type: 415" 415
    (status-of (lambda () (multipart-form-collector #f))))
  (test-equal "no boundary: 400" 400
    (status-of (lambda () (multipart-form-collector '(multipart/form-data)))))
  (test-equal "an invalid boundary: 400" 400
    (status-of (lambda () (multipart-form-collector '(multipart/form-data (boundary . ""))))))
  (call-with-spool-directory
   (lambda (dir)
     (test-equal "after an error, feed and finish raise it again, and make no file"
       '(413 413 413 ())
       (call-with-values
           (lambda () (multipart-form-collector form-type #:spool-directory dir #:max-parts 0))
         (lambda (feed finish)
           (let* ((first (status-of (lambda () (feed form-body))))
                  (again (status-of (lambda () (feed form-body))))
                  (end (status-of finish)))
             (list first again end (spooled-files dir)))))))))

;;;
;;; Validation
;;;

(define signup
  (declare-form
   (list (form-field "user" #:label "Username" #:required? #t #:min-length 2 #:max-length 15
                     #:pattern "[A-Za-z0-9_-]+" #:pattern-message "may hold only letters, digits, - and _.")
         (form-field "password" #:label "Password" #:type 'password #:required? #t #:min-length 8
                     #:max-length 128)
         (form-field "about" #:label "About" #:type 'textarea #:max-length 100)
         (form-field "age" #:label "Age" #:type 'integer #:min 13 #:max 150)
         (form-field "email" #:label "Email" #:type 'email)
         (form-field "site" #:label "Site" #:type 'url)
         (form-field "terms" #:label "Terms" #:type 'checkbox
                     #:check (lambda (accepted) (and (not accepted) "Please accept the terms."))))
   #:max-fields 10))

(define good '(("user" . " ada ") ("password" . "  correct horse  ") ("about" . "line 1\r\nline 2")
               ("age" . "36") ("email" . "ada@example.org") ("site" . "https://example.org/a?b")
               ("terms" . "on") ("csrf" . "token")))

(define (with-field name value)
  (map (lambda (entry) (if (equal? (car entry) name) (cons name value) entry)) good))

;; -> the message for NAME when the form is GOOD with NAME's value VALUE
(define (message-for name value)
  (form-error (validate-form signup (with-field name value)) name))

(define-syntax-rule (test-message name value expected)
  (test-equal (object->string (list name value)) expected (message-for name value)))

(test-group "validate-form: a good form"
  (let ((result (validate-form signup good)))
    (test-assert (form-valid? result))
    (test-equal "trimmed" "ada" (form-value result "user"))
    (test-equal "a password is not trimmed" "  correct horse  " (form-value result "password"))
    (test-equal "a textarea keeps its lines" "line 1\r\nline 2" (form-value result "about"))
    (test-equal "an integer" 36 (form-value result "age"))
    (test-equal "a checkbox" #t (form-value result "terms"))
    (test-equal '() (form-errors result))))

(test-group "validate-form: empty optional fields"
  (let ((result (validate-form signup '(("user" . "ada") ("password" . "12345678") ("terms" . "on")))))
    (test-assert (form-valid? result))
    (test-equal #f (form-value result "age"))
    (test-equal #f (form-value result "about"))))

(test-group "validate-form: a message per field"
  (test-message "user" "" "Username is required.")
  (test-message "user" "   " "Username is required.")
  (test-message "user" "a" "Username must be at least 2 characters.")
  (test-message "user" (make-string 16 #\a) "Username must be at most 15 characters.")
  (test-message "user" "<script>alert(1)</script>" "Username must be at most 15 characters.")
  (test-message "user" "a\"b" "Username may hold only letters, digits, - and _.")
  (test-message "user" "x' OR '1'='1" "Username may hold only letters, digits, - and _.")
  (test-message "user" "ada\x00" "Username must not contain a NUL character.")
  (test-message "user" "ada\nbob" "Username must be on one line.")
  (test-message "user" "ada\x1b[2J" "Username must not contain control characters.")
  (test-message "user" #vu8(97 100 255) "Username is not valid UTF-8 text.")
  (test-message "password" "short" "Password must be at least 8 characters.")
  (test-message "about" (make-string 101 #\x) "About must be at most 100 characters.")
  (test-message "about" "tab\tand\nlines are fine" #f)
  (test-message "about" "but not \x07" "About must not contain control characters.")
  (test-message "age" "12" "Age must be at least 13.")
  (test-message "age" "151" "Age must be at most 150.")
  (test-message "age" "3.5" "Age must be a whole number.")
  (test-message "age" "1e3" "Age must be a whole number.")
  (test-message "age" "#x10" "Age must be a whole number.")
  (test-message "age" (make-string 30 #\9) "Age must be a whole number.")
  (test-message "email" "ada" "Email must be an email address.")
  (test-message "email" "ada@localhost" "Email must be an email address.")
  (test-message "email" "a b@example.org" "Email must be an email address.")
  (test-message "site" "javascript:alert(1)" "Site must be a web address starting with http:// or https://.")
  (test-message "site" "example.org" "Site must be a web address starting with http:// or https://.")
  (test-message "site" "http://" "Site must be a web address starting with http:// or https://.")
  (test-message "terms" #f "Please accept the terms."))

(test-group "validate-form: hostile submissions"
  (test-equal "a field sent twice" "Username was sent more than once."
    (form-error (validate-form signup (cons '("user" . "eve") good)) "user"))
  (test-equal "a file for a text field" "Username must be text, not a file."
    (form-error (validate-form signup (with-field "user" ((@@ (plucky web forms) make-form-file) "user" "x" #f "/nonexistent" 0)))
                "user"))
  (let ((result (validate-form signup (append good (map (lambda (i) (cons (number->string i) "x")) (iota 3))))))
    (test-assert "too many fields" (not (form-valid? result)))
    (test-equal '((#f . "The form has too many fields (11; at most 10).")) (form-errors result)))
  (test-equal "a megabyte is not kept to show again" #f
    (form-input (validate-form signup (with-field "user" (make-string 1000000 #\a))) "user")))

(test-group "form-input"
  (let ((result (validate-form signup (with-field "user" " <b>ada</b> "))))
    (test-equal "as typed, for the writer to escape" " <b>ada</b> " (form-input result "user"))))

(test-group "render-field"
  (let ((result (validate-form signup (with-field "user" "a\"b"))))
    (test-equal "with the value and the message"
      '(p (@ (class "field error"))
          (label (@ (for "field-user")) "Username")
          " "
          (input (@ (type "text") (name "user") (id "field-user") (required "required")
                    (aria-invalid "true") (aria-describedby "field-user-error")
                    (maxlength "15") (value "a\"b")))
          " "
          (span (@ (class "error") (id "field-user-error")) "Username may hold only letters, digits, - and _."))
      (render-field signup "user" result))
    (test-equal "a password is never shown again"
      '(p (@ (class "field")) (label (@ (for "field-password")) "Password") " "
          (input (@ (type "password") (name "password") (id "field-password") (required "required")
                    (maxlength "128"))))
      (render-field signup "password" result))
    (test-equal "a textarea"
      '(p (@ (class "field")) (label (@ (for "field-about")) "About") " "
          (textarea (@ (name "about") (id "field-about") (maxlength "100")) "line 1\r\nline 2"))
      (render-field signup "about" result))
    (test-equal "a checkbox, checked"
      '(input (@ (type "checkbox") (name "terms") (id "field-terms") (checked "checked")))
      (caddr (cddr (render-field signup "terms" result)))))
  (test-equal "an empty form"
    '(p (@ (class "field")) (label (@ (for "field-age")) "Age") " "
        (input (@ (type "number") (name "age") (id "field-age") (min "13"))))
    (render-field signup "age" #f #:attributes '((min "13")))))

(test-group "urlencoded->alist #:invalid-utf8"
  (test-equal '(("a" . "\ufffd")) (urlencoded->alist "a=%FF"))
  (test-equal '(("a" . #vu8(255)) ("b" . "é")) (urlencoded->alist "a=%FF&b=%C3%A9" #:invalid-utf8 'keep)))

(test-group "read-form"
  (define (request method uri . headers)
    (build-request (string->uri uri) #:method method #:headers headers #:port (%make-void-port "r")))
  (test-equal "a query" '(("q" . "a b"))
    (read-form (request 'GET "http://x/?q=a+b") #f))
  (test-equal "a urlencoded body" '(("a" . "1") ("b" . #vu8(192)))
    (read-form (request 'POST "http://x/" '(content-type application/x-www-form-urlencoded))
               (string->utf8 "a=1&b=%C0")))
  (test-equal "a multipart body" '(("a" . "1"))
    (read-form (request 'POST "http://x/" '(content-type multipart/form-data (boundary . "b")))
               (string->utf8 "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--b--\r\n")))
  (test-equal "a multipart field that is not UTF-8, kept as its bytes" '(("a" . #vu8(97 255)))
    (read-form (request 'POST "http://x/" '(content-type multipart/form-data (boundary . "b")))
               (latin-1->bytes "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\na\xff\r\n--b--\r\n")))
  (test-equal "no body" '() (read-form (request 'POST "http://x/") #f))
  (test-equal "JSON: 415" 415
    (status-of (lambda () (read-form (request 'POST "http://x/" '(content-type application/json))
                                     (string->utf8 "{}")))))
  (test-equal "too large: 413" 413
    (status-of (lambda () (read-form (request 'POST "http://x/" '(content-type application/x-www-form-urlencoded))
                                     (make-bytevector 2000 97) #:max-bytes 1000))))
  (test-equal "too many fields: 413" 413
    (status-of (lambda () (read-form (request 'POST "http://x/" '(content-type application/x-www-form-urlencoded))
                                     (string->utf8 "a&b&c") #:max-fields 2)))))

(test-end "web/forms")
