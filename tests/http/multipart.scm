;;; tests/http/multipart.scm --- (plucky http multipart)

(use-modules (srfi srfi-64)
             (srfi srfi-1)
             (rnrs bytevectors)
             (ice-9 binary-ports)
             (ice-9 iconv)
             (web http)
             (tests lib harness)
             (plucky http error)
             (plucky http multipart))

;; Test bodies are strings of latin-1 characters, one per byte, so that
;; binary data reads as it is; `utf-8' spells non-ASCII text that way.
(define (latin-1->bytes text) (string->bytevector text "ISO-8859-1"))
(define (bytes->latin-1 bv) (bytevector->string bv "ISO-8859-1"))
(define (utf-8 text) (bytes->latin-1 (string->utf8 text)))

(define (slice bv start count)
  (let ((copy (make-bytevector count)))
    (bytevector-copy! bv start copy 0 count)
    copy))

;; Parse TEXT in pieces cut at SPLITS (ascending indices).  Each piece is
;; fed as a fresh bytevector that is wiped once fed, so a parser that
;; kept a reference to earlier input would be caught.  -> (OUTCOME PARTS)
;; where OUTCOME is (done INDEX) with the index counted in TEXT, (error
;; STATUS OFFSET), or (unfinished STATUS) when the input ended before
;; the close delimiter and finish-multipart! said so; PARTS is a list of
;; (NAME FILENAME CONTENT-TYPE DATA), with `open' added to a part whose
;; end never came.
(define* (parse text #:key (boundary "b") (splits '()) (max-parts 100)
                (max-header-bytes 256))
  (let* ((bv (latin-1->bytes text))
         (parts '())                    ; reversed; each (part data-port ended?)
         (parser (make-multipart-parser
                  boundary #:max-parts max-parts #:max-header-bytes max-header-bytes
                  #:on-part-start
                  (lambda (part)
                    (set! parts (cons (list part (open-output-string) #f) parts)))
                  #:on-part-data
                  (lambda (bv start count)
                    (display (bytes->latin-1 (slice bv start count)) (cadar parts)))
                  #:on-part-end
                  (lambda (part)
                    (set-car! (cddar parts) (if (eq? part (caar parts)) 'ended 'wrong-part))))))
    (define (transcript)
      (reverse
       (map (lambda (entry)
              (let ((part (car entry)))
                (append (list (multipart-part-name part) (multipart-part-filename part)
                              (multipart-part-content-type part)
                              (get-output-string (cadr entry)))
                        (case (caddr entry)
                          ((ended) '())
                          ((#f) '(open))
                          (else (list (caddr entry)))))))
            parts)))
    (let lp ((bounds (append splits (list (bytevector-length bv)))) (start 0))
      (let* ((piece (slice bv start (- (car bounds) start))))
        (call-with-values
            (lambda () (feed-multipart! parser piece 0 (bytevector-length piece)))
          (lambda (status index)
            (bytevector-fill! piece 0)
            (cond
             ((http-error? status)
              (list (list 'error (http-error-status status) (+ start (http-error-offset status)))
                    (transcript)))
             ((eq? status 'done)
              (list (if (eq? 'done (finish-multipart! parser))
                        (list 'done (+ start index))
                        (list 'done-but-finish-failed))
                    (transcript)))
             ((pair? (cdr bounds)) (lp (cdr bounds) (car bounds)))
             (else
              (let ((end (finish-multipart! parser)))
                (list (if (http-error? end)
                          (list 'unfinished (http-error-status end))
                          (list 'more-then end))
                      (transcript)))))))))))

;; -> the index just past the first MARKER in TEXT: where a body's close
;; delimiter ends, to state the expected index without counting bytes.
(define (after text marker)
  (+ (string-contains text marker) (string-length marker)))

;; Each case must give the same answer whole, split in two at every byte,
;; and fed one byte at a time.  The split tests list the cut points that
;; gave another answer: '() when all agree.
(define-syntax-rule (test-multipart name text expected args ...)
  (let ((text* text)
        (expected* expected))
    (test-equal name expected* (parse text* args ...))
    (test-equal (string-append name ", split at every byte") '()
      (remove (lambda (k) (equal? expected* (parse text* #:splits (list k) args ...)))
              (iota (+ 1 (string-length text*)))))
    (test-equal (string-append name ", byte by byte") expected*
      (parse text* #:splits (iota (string-length text*)) args ...))))

(define (field name value)
  (string-append "Content-Disposition: form-data; name=\"" name "\"\r\n\r\n" value))

(test-begin "http/multipart")

(test-group "valid bodies"
  (define one-field (string-append "--b\r\n" (field "a" "hello") "\r\n--b--"))
  (test-multipart "one field" one-field
    `((done ,(string-length one-field)) (("a" #f #f "hello"))))
  (define two-and-file
    (string-append "--b\r\n" (field "a" "1") "\r\n--b\r\n" (field "b" "two words")
                   "\r\n--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.txt\"\r\n"
                   "Content-Type: text/plain\r\n\r\nline 1\r\nline 2\r\n\r\n--b--\r\n"))
  (test-multipart "two fields and a file" two-and-file
    `((done ,(after two-and-file "--b--")) (("a" #f #f "1") ("b" #f #f "two words")
                  ("f" "x.txt" (text/plain) "line 1\r\nline 2\r\n"))))
  (define framed
    (string-append "This is the preamble.\r\nIt has --b in it, not at a line start.\r\n"
                   "--b\r\n" (field "a" "v") "\r\n--b--\r\nthe epilogue\r\n--b\r\n"
                   (field "x" "not a part") "\r\n--b--\r\n"))
  (test-multipart "preamble and epilogue are ignored" framed
    `((done ,(after framed "--b--")) (("a" #f #f "v"))))
  (test-multipart "close delimiter followed by anything: the epilogue"
    (string-append "--b\r\n" (field "a" "v") "\r\n--b--junk")
    `((done ,(+ 5 (string-length (field "a" "v")) 7)) (("a" #f #f "v"))))
  (test-multipart "empty value, as curl sends it"
    (string-append "--b\r\n" (field "e" "") "\r\n--b\r\n" (field "f" "x") "\r\n--b--")
    `((done ,(+ 5 (string-length (field "e" "")) 7 (string-length (field "f" "x")) 7)) (("e" #f #f "") ("f" #f #f "x"))))
  (test-multipart "a part without data: its head's CRLF starts the delimiter"
    (string-append "--b\r\n" (field "e" "") "--b\r\n" (field "f" "x") "\r\n--b--")
    `((done ,(+ 5 (string-length (field "e" "")) 5 (string-length (field "f" "x")) 7)) (("e" #f #f "") ("f" #f #f "x"))))
  (test-multipart "a part without a head"
    "--b\r\n\r\nvalue\r\n--b--"
    '((done 19) ((#f #f #f "value"))))
  (test-multipart "no parts at all, as browsers send an empty form"
    "--b--\r\n"
    '((done 5) ()))
  (test-multipart "transport padding after boundaries"
    (string-append "--b \t\r\n" (field "a" "v") "\r\n--b  \r\n" (field "c" "w") "\r\n--b--  \r\n")
    `((done ,(+ 7 (string-length (field "a" "v")) 9 (string-length (field "c" "w")) 7)) (("a" #f #f "v") ("c" #f #f "w"))))
  (test-multipart "data that looks like delimiters but is not"
    (string-append "--b\r\n" (field "d" "\r\n-\r\n--\r\n--c\n--b\r--b-x--b\r\n\r\r") "\r\n--b--")
    `((done ,(+ 5 (string-length (field "d" "\r\n-\r\n--\r\n--c\n--b\r--b-x--b\r\n\r\r")) 7)) (("d" #f #f "\r\n-\r\n--\r\n--c\n--b\r--b-x--b\r\n\r\r"))))
  (test-multipart "every byte value in a file"
    (string-append "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"all\"\r\n\r\n"
                   (list->string (map integer->char (iota 256))) "\r\n--b--")
    `((done ,(+ 5 60 256 7)) (("f" "all" #f ,(list->string (map integer->char (iota 256)))))))
  (let* ((boundary "----WebKitFormBoundary7MA4YWxkTrZu0gW")
         (delimiter (string-append "\r\n--" boundary))
         (data (string-append
                ;; Every proper prefix of the delimiter, each cut short by
                ;; a byte that starts another try; then one cut by data.
                (string-concatenate
                 (map (lambda (n) (string-append (substring delimiter 0 n) "\r"))
                      (iota (- (string-length delimiter) 1) 1)))
                (substring delimiter 0 (- (string-length delimiter) 1)) "X"
                "\x00\xff--" boundary "--\r\n"
                ;; The data ends with most of a delimiter, then the real one.
                (substring delimiter 0 20))))
    (test-multipart "binary data full of near-delimiters, long boundary"
      (string-append "--" boundary "\r\nContent-Disposition: form-data; name=\"f\"; filename=\"b.bin\"\r\n"
                     "Content-Type: application/octet-stream\r\n\r\n" data delimiter "--\r\n")
      `((done ,(+ 2 (string-length boundary) 104 (string-length data) (string-length delimiter) 2))
        (("f" "b.bin" (application/octet-stream) ,data)))
      #:boundary boundary))
  (test-multipart "a boundary with the odd characters RFC 2046 allows"
    "--'()+_,-./:=? x\r\n\r\nv\r\n--'()+_,-./:=? x--"
    '((done 41) ((#f #f #f "v")))
    #:boundary "'()+_,-./:=? x"))

(test-group "part heads"
  (define (head-of . lines)
    (string-append "--b\r\n" (string-join lines "\r\n") "\r\n\r\nv\r\n--b--"))
  (define (result-of . lines)
    (cadr (parse (apply head-of lines))))
  (test-multipart "quoted strings with escapes"
    (head-of "Content-Disposition: form-data; name=\"a\\\"b\\\\c\"; filename=\"C:\\\\x\\\\y.txt\"")
    `((done ,(+ 5 74 9)) (("a\"b\\c" "C:\\x\\y.txt" #f "v"))))
  (test-multipart "filename* is preferred to filename, in either order"
    (head-of "Content-Disposition: form-data; filename*=UTF-8''na%C3%AFve%20%E2%98%83.txt; name=\"f\"; filename=\"naive.txt\"")
    `((done 124) (("f" "naïve ☃.txt" #f "v"))))
  (test-equal "filename* in ISO-8859-1, with a language"
    '(("f" "été.txt" #f "v"))
    (result-of "Content-Disposition: form-data; name=f; filename*=iso-8859-1'fr'%E9t%E9.txt"))
  (test-equal "filename* in another charset is ignored"
    '(("f" "a.txt" #f "v"))
    (result-of "Content-Disposition: form-data; name=\"f\"; filename=\"a.txt\"; filename*=koi8-r''%C1"))
  (test-equal "a raw UTF-8 file name, as browsers send it"
    '(("f" "naïve ☃.txt" #f "v"))
    (result-of (string-append "Content-Disposition: form-data; name=\"f\"; filename=\""
                              (utf-8 "naïve ☃.txt") "\"")))
  (test-equal "invalid UTF-8 in a file name becomes U+FFFD"
    '(("f" "a\ufffdb" #f "v"))
    (result-of "Content-Disposition: form-data; name=\"f\"; filename=\"a\xffb\""))
  (test-equal "tokens, whitespace around parameters, an empty parameter, a trailing ;"
    '(("f" "a.txt" #f "v"))
    (result-of "Content-Disposition:form-data ;name = f;; filename=\"a.txt\" ;"))
  (test-equal "Content-Type: names in lower case, values unquoted"
    '((#f #f (text/plain (charset . "UTF-8") (format . "flowed")) "v"))
    (result-of "content-TYPE: Text/Plain; Charset=\"UTF-8\"; format=flowed"))
  (test-equal "all header fields, names in lower case, values trimmed"
    '((content-disposition . "attachment; name=\"x\"")
      (x-custom . "one two")
      (content-transfer-encoding . "binary"))
    (let ((headers #f))
      (feed-multipart!
       (make-multipart-parser "b" #:on-part-start (lambda (part) (set! headers (multipart-part-headers part))))
       (latin-1->bytes (head-of "CONTENT-DISPOSITION: attachment; name=\"x\""
                                "X-Custom: \t one two  " "Content-Transfer-Encoding: binary"))
       0 (string-length (head-of "CONTENT-DISPOSITION: attachment; name=\"x\""
                                 "X-Custom: \t one two  " "Content-Transfer-Encoding: binary")))
      headers))
  (test-equal "disposition type, index"
    '((form-data 0) (attachment 1) (#f 2))
    (let ((seen '())
          (text (string-append "--b\r\n" (field "a" "1")
                               "\r\n--b\r\nContent-Disposition: ATTACHMENT\r\n\r\n2"
                               "\r\n--b\r\n\r\n3\r\n--b--")))
      (feed-multipart! (make-multipart-parser
                        "b" #:on-part-start
                        (lambda (part)
                          (set! seen (cons (list (multipart-part-disposition part)
                                                 (multipart-part-index part))
                                           seen))))
                       (latin-1->bytes text) 0 (string-length text))
      (reverse seen))))

(test-group "data is handed over as slices of the input"
  (test-assert "the caller's bytevector, not a copy"
    (let* ((bv (latin-1->bytes (string-append "--b\r\n" (field "a" "hello") "\r\n--b--")))
           (given '()))
      (feed-multipart! (make-multipart-parser
                        "b" #:on-part-data (lambda (data start count) (set! given (cons data given))))
                       bv 0 (bytevector-length bv))
      (and (pair? given) (every (lambda (data) (eq? data bv)) given)))))

(test-group "many parts"
  (let* ((count 300)
         (text (string-append
                (string-concatenate
                 (map (lambda (i) (string-append "--b\r\n" (field (number->string i) (make-string (modulo i 7) #\x)) "\r\n"))
                      (iota count)))
                "--b--"))
         (expected `((done ,(string-length text))
                     ,(map (lambda (i) (list (number->string i) #f #f (make-string (modulo i 7) #\x)))
                           (iota count)))))
    (test-equal "300 parts" expected (parse text #:max-parts count))
    (test-equal "300 parts, byte by byte" expected
      (parse text #:max-parts count #:splits (iota (string-length text))))
    (test-equal "300 parts, split every 7 bytes" expected
      (parse text #:max-parts count #:splits (iota (quotient (string-length text) 7) 7 7)))))

(test-group "input ends before the close delimiter: finish-multipart! says 400"
  (test-multipart "empty input" "" '((unfinished 400) ()))
  (test-multipart "only a preamble" "hello\r\n" '((unfinished 400) ()))
  (test-multipart "in a boundary line" "--b" '((unfinished 400) ()))
  (test-multipart "in a part head" "--b\r\nContent-Dis" '((unfinished 400) ()))
  (test-multipart "in a part's data" "--b\r\n\r\nhello" '((unfinished 400) ((#f #f #f "hello" open))))
  (test-multipart "in the delimiter after a part's data" "--b\r\n\r\nhello\r\n-"
                  '((unfinished 400) ((#f #f #f "hello" open))))
  (test-multipart "after a delimiter" "--b\r\n\r\nhello\r\n--b" '((unfinished 400) ((#f #f #f "hello"))))
  (test-multipart "half a close delimiter" "--b\r\n\r\nhello\r\n--b-" '((unfinished 400) ((#f #f #f "hello"))))
  (test-multipart "after a boundary line" "--b\r\n\r\nhello\r\n--b\r\n"
                  '((unfinished 400) ((#f #f #f "hello")))))

(test-group "malformed bodies: 400 and the offset"
  (test-multipart "a boundary followed by more characters" "--bX\r\n" '((error 400 3) ()))
  (test-multipart "a boundary followed by one dash" "--b-x" '((error 400 4) ()))
  (test-multipart "a bare LF after a boundary" "--b\n\r\nv\r\n--b--" '((error 400 3) ()))
  (test-multipart "a CR without LF after a boundary" "--b\rx" '((error 400 4) ()))
  (test-multipart "something after the padding" "--b  x\r\n" '((error 400 5) ()))
  (test-multipart "padding before the close dashes" "--b\r\n\r\nv\r\n--b --" '((error 400 14) ((#f #f #f "v"))))
  (test-multipart "more padding before the close dashes" "--b\r\n\r\nv\r\n--b \t--" '((error 400 15) ((#f #f #f "v"))))
  (test-multipart "a line in a part that starts with the boundary"
    "--b\r\n\r\nv\r\n--bogus\r\n\r\nw\r\n--b--" '((error 400 13) ((#f #f #f "v"))))
  (test-multipart "a bare LF in a part head" "--b\r\nX: y\n\r\n" '((error 400 9) ()))
  (test-multipart "a bare CR in a part head" "--b\r\nX: y\rZ: w\r\n\r\n" '((error 400 10) ()))
  (test-multipart "obsolete line folding" "--b\r\nX: y\r\n z\r\n\r\n" '((error 400 11) ()))
  (test-multipart "a folded first line" "--b\r\n\tX: y\r\n\r\n" '((error 400 5) ()))
  (test-multipart "a control character" "--b\r\nX: \x01\r\n\r\n" '((error 400 8) ()))
  (test-multipart "DEL" "--b\r\nX: a\x7f\r\n\r\n" '((error 400 9) ()))
  (test-multipart "the error comes after the earlier parts"
    (string-append "--b\r\n" (field "a" "1") "\r\n--b\r\nX\x01")
    `((error 400 ,(+ 5 (string-length (field "a" "1")) 7 1)) (("a" #f #f "1")))))

(test-group "malformed part heads: 400 at the end of the head"
  (define-syntax-rule (test-bad-head name line)
    (let ((text (string-append "--b\r\n" line "\r\n\r\n")))
      (test-multipart name text `((error 400 ,(- (string-length text) 1)) ()))))
  (test-bad-head "a line without a colon" "Content-Disposition form-data")
  (test-bad-head "space before the colon" "Content-Disposition : form-data; name=\"a\"")
  (test-bad-head "an empty field name" ": form-data")
  (test-bad-head "a field name with a non-token character" "Content@Disposition: form-data")
  (test-bad-head "Content-Disposition twice"
                 "Content-Disposition: form-data; name=\"a\"\r\nContent-Disposition: form-data; name=\"b\"")
  (test-bad-head "Content-Type twice" "Content-Type: text/plain\r\nContent-Type: text/html")
  (test-bad-head "a repeated parameter" "Content-Disposition: form-data; name=\"a\"; NAME=\"b\"")
  (test-bad-head "a repeated filename*"
                 "Content-Disposition: form-data; filename*=UTF-8''a; filename*=UTF-8''b")
  (test-bad-head "an unterminated quoted string" "Content-Disposition: form-data; name=\"a")
  (test-bad-head "a quoted string ending in a backslash" "Content-Disposition: form-data; name=\"a\\")
  (test-bad-head "a parameter without a value" "Content-Disposition: form-data; name")
  (test-bad-head "a parameter with an empty value" "Content-Disposition: form-data; name=")
  (test-bad-head "a value with a space" "Content-Disposition: form-data; name=a b")
  (test-bad-head "no disposition type" "Content-Disposition: ; name=\"a\"")
  (test-bad-head "a slash in the disposition type" "Content-Disposition: form/data")
  (test-bad-head "text after a quoted value" "Content-Disposition: form-data; name=\"a\"b")
  (test-bad-head "filename* with a bad escape" "Content-Disposition: form-data; filename*=UTF-8''%zz")
  (test-bad-head "filename* cut in an escape" "Content-Disposition: form-data; filename*=UTF-8''a%4")
  (test-bad-head "filename* without the quotes" "Content-Disposition: form-data; filename*=UTF-8")
  (test-bad-head "a Content-Type without a subtype" "Content-Type: text")
  (test-bad-head "a Content-Type with two slashes" "Content-Type: text/plain/x"))

(test-group "limits: 413"
  (define (parts n)
    (string-append (string-concatenate
                    (map (lambda (i) (string-append "--b\r\n" (field "a" (number->string i)) "\r\n"))
                         (iota n)))
                   "--b--"))
  (test-multipart "as many parts as allowed" (parts 3)
    `((done ,(string-length (parts 3))) (("a" #f #f "0") ("a" #f #f "1") ("a" #f #f "2")))
    #:max-parts 3)
  (test-multipart "one part too many: 413 at the end of its boundary line" (parts 3)
    `((error 413 ,(- (after (parts 3) "1\r\n--b\r\n") 1)) (("a" #f #f "0") ("a" #f #f "1")))
    #:max-parts 2)
  (test-multipart "no part allowed" (parts 1) '((error 413 4) ()) #:max-parts 0)
  ;; The head counts its lines' bytes and one byte for each line end.
  (test-multipart "a part head at the limit"
    (string-append "--b\r\nX: " (make-string 28 #\a) "\r\n\r\nv\r\n--b--")
    '((done 48) ((#f #f #f "v")))
    #:max-header-bytes 32)
  (test-multipart "a part head one byte over: 413 at its line end"
    (string-append "--b\r\nX: " (make-string 29 #\a) "\r\n\r\nv\r\n--b--")
    '((error 413 38) ())
    #:max-header-bytes 32)
  (test-multipart "a part head line over the limit: 413 at once"
    (string-append "--b\r\nX: " (make-string 40 #\a) "\r\n\r\nv\r\n--b--")
    '((error 413 37) ())
    #:max-header-bytes 32)
  (test-multipart "the limit is per part"
    (string-append "--b\r\nX: " (make-string 28 #\a) "\r\n\r\nv\r\n--b\r\nY: " (make-string 28 #\a)
                   "\r\n\r\nw\r\n--b--")
    '((done 91) ((#f #f #f "v") (#f #f #f "w")))
    #:max-header-bytes 32))

(test-group "after the end"
  (define text (string-append "--b\r\n" (field "a" "v") "\r\n--b--"))
  (test-equal "more input after done: done, nothing read"
    '(done 0 done)
    (let ((parser (make-multipart-parser "b"))
          (bv (latin-1->bytes text)))
      (feed-multipart! parser bv 0 (bytevector-length bv))
      (call-with-values (lambda () (feed-multipart! parser bv 0 (bytevector-length bv)))
        (lambda (status index) (list status index (finish-multipart! parser))))))
  (test-equal "after an error, the same error"
    '(#t #t)
    (let* ((parser (make-multipart-parser "b"))
           (bv (latin-1->bytes "--bX"))
           (first (call-with-values (lambda () (feed-multipart! parser bv 0 4))
                    (lambda (status index) status))))
      (call-with-values (lambda () (feed-multipart! parser (latin-1->bytes "\r\n") 0 2))
        (lambda (status index)
          (list (eq? status first) (eq? (finish-multipart! parser) first))))))
  (test-equal "feeding a part of a bytevector"
    `((done ,(+ 4 (string-length text))) (("a" #f #f "v")))
    (let* ((bv (latin-1->bytes (string-append "xxxx" text "yyyy")))
           (name #f) (data #f)
           (parser (make-multipart-parser
                    "b" #:on-part-start (lambda (part) (set! name (multipart-part-name part)))
                    #:on-part-data (lambda (bv start count) (set! data (bytes->latin-1 (slice bv start count)))))))
      (call-with-values (lambda () (feed-multipart! parser bv 4 (- (bytevector-length bv) 4)))
        (lambda (status index) (list (list status index) (list (list name #f #f data))))))))

(test-group "make-multipart-parser"
  (define (status-of thunk)
    (with-exception-handler
        (lambda (e) (if (http-error? e) (http-error-status e) e))
      thunk #:unwind? #t))
  (test-equal "an empty boundary: 400" 400 (status-of (lambda () (make-multipart-parser ""))))
  (test-equal "a boundary of 71 characters: 400" 400
    (status-of (lambda () (make-multipart-parser (make-string 71 #\a)))))
  (test-assert "a boundary of 70 characters"
    (multipart-parser? (make-multipart-parser (make-string 70 #\a))))
  (test-equal "a boundary ending in a space: 400" 400
    (status-of (lambda () (make-multipart-parser "ab "))))
  (test-equal "a boundary with a CR: 400" 400
    (status-of (lambda () (make-multipart-parser "a\rb"))))
  (test-equal "a boundary with a quote: 400" 400
    (status-of (lambda () (make-multipart-parser "a\"b"))))
  (test-equal "multipart-parser-parts counts the parts begun"
    2
    (let ((parser (make-multipart-parser "b"))
          (bv (latin-1->bytes "--b\r\n\r\nv\r\n--b\r\n\r\nw")))
      (feed-multipart! parser bv 0 (bytevector-length bv))
      (multipart-parser-parts parser))))

(test-group "content-type-boundary"
  (test-equal "as Guile parses it" "xyz"
    (content-type-boundary '(multipart/form-data (boundary . "xyz"))))
  (test-equal "from Guile's parser, quoted" "--a b"
    (content-type-boundary (parse-header 'content-type "multipart/form-data; boundary=\"--a b\"")))
  (test-equal "from Guile's parser, case kept" "xyz"
    (content-type-boundary (parse-header 'content-type "Multipart/Form-Data; BOUNDARY=xyz; charset=utf-8")))
  (test-equal "other multipart types" "xyz"
    (content-type-boundary '(multipart/mixed (boundary . "xyz"))))
  (test-equal "a string (Guile rejects two = in a parameter)" "a=b"
    (content-type-boundary "multipart/form-data; boundary=\"a=b\""))
  (test-equal "a string, unquoted" "----WebKitFormBoundary7MA4YWxkTrZu0gW"
    (content-type-boundary "multipart/form-data; boundary=----WebKitFormBoundary7MA4YWxkTrZu0gW"))
  (test-equal "not multipart" #f
    (content-type-boundary '(application/x-www-form-urlencoded (boundary . "xyz"))))
  (test-equal "no boundary" #f (content-type-boundary '(multipart/form-data)))
  (test-equal "an invalid boundary" #f
    (content-type-boundary `(multipart/form-data (boundary . ,(make-string 71 #\a)))))
  (test-equal "a malformed string" #f (content-type-boundary "multipart/form-data; boundary=\"x"))
  (test-equal "not a content type" #f (content-type-boundary 42)))

(test-group "bodies captured from real clients (tests/data/multipart/capture.py)"
  (define (read-file name)
    (call-with-input-file (test-data-file (string-append "multipart/" name))
      get-bytevector-all #:binary #t))
  (define (boundary-of name)
    (content-type-boundary
     (parse-header 'content-type
                   (string-trim-right (utf8->string (read-file (string-append name ".content-type")))))))
  (define upload (bytes->latin-1 (read-file "upload.bin")))
  (test-equal "upload.bin is 1 KiB with CR, LF and delimiter-like runs"
    '(1024 #t #t)
    (list (string-length upload)
          (and (string-contains upload "\r\n--") #t)
          (and (string-contains upload (string-append "\r\n--" (make-string 24 #\-) "0123")) #t)))
  (let ((body (bytes->latin-1 (read-file "curl.body"))))
    (test-multipart "curl -F name=value -F file=@upload.bin -F empty=" body
      `((done ,(- (string-length body) 2))
        (("name" #f #f "value")
         ("file" "upload.bin" (application/octet-stream) ,upload)
         ("empty" #f #f "")))
      #:boundary (boundary-of "curl")))
  (let ((body (bytes->latin-1 (read-file "requests.body"))))
    ;; requests (urllib3 2) writes a file name the HTML way: raw UTF-8,
    ;; a quote as %22, which is left as it is.
    (test-multipart "Python requests, a UTF-8 field and file name" body
      `((done ,(- (string-length body) 2))
        (("name" #f #f "value")
         ("greeting" #f #f ,(utf-8 "héllo ☃"))
         ("file" "naïve %22quoted%22.bin" (application/octet-stream) ,upload)))
      #:boundary (boundary-of "requests"))))

(test-end "http/multipart")
