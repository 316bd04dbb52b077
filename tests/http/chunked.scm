;;; tests/http/chunked.scm --- (plucky http chunked)

(use-modules (srfi srfi-64)
             (srfi srfi-1)
             (rnrs bytevectors)
             (tests lib harness)
             (plucky http error)
             (plucky http chunked))

;; Decode BYTES (a string, latin-1) in pieces split at SPLITS (indices).
;; -> (status data-string index) where status is done, more or an error
;; status number.
(define* (decode text #:key (splits '()) (max-total (* 1024 1024)))
  (let* ((bv (string->utf8 text))
         (decoder (make-chunked-decoder #:max-total max-total #:max-line 64
                                        #:max-trailer 64))
         (data (open-output-string))
         (sink (lambda (bv start count)
                 (display (utf8->string (bytevector-copy-range bv start count)) data))))
    (let lp ((bounds (append splits (list (bytevector-length bv)))) (start 0))
      (call-with-values
          (lambda () (decode-chunked! decoder bv start (car bounds) sink))
        (lambda (status index)
          (cond
           ((and (eq? status 'more) (pair? (cdr bounds))) (lp (cdr bounds) index))
           ((http-error? status)
            (list (http-error-status status) (get-output-string data) index))
           (else (list status (get-output-string data) index))))))))

(define (bytevector-copy-range bv start count)
  (let ((copy (make-bytevector count)))
    (bytevector-copy! bv start copy 0 count)
    copy))

;; Each case must give the same answer whole and split at every byte.
(define-syntax-rule (test-chunked name text expected)
  (let ((text* text))
    (test-equal name expected (decode text*))
    (test-assert (string-append name ", split at every byte")
      (every (lambda (k) (equal? expected (decode text* #:splits (list k))))
             (iota (+ 1 (string-length text*)))))))

(test-begin "http/chunked")

(test-group "valid bodies"
  (test-chunked "one chunk" "5\r\nhello\r\n0\r\n\r\n" '(done "hello" 15))
  (test-chunked "two chunks" "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n" '(done "hello world" 26))
  (test-chunked "hex sizes, both cases" "A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n"
                '(done "0123456789abcdefghij" 35))
  (test-chunked "empty body" "0\r\n\r\n" '(done "" 5))
  (test-chunked "extensions" "5;name=value;x=\"q s\"\r\nhello\r\n0;last\r\n\r\n" '(done "hello" 39))
  (test-chunked "trailers" "5\r\nhello\r\n0\r\nX-Sum: 1\r\nX-Other: 2\r\n\r\n" '(done "hello" 37))
  (test-chunked "leading zeros" "0005\r\nhello\r\n0\r\n\r\n" '(done "hello" 18))
  (test-chunked "extensions with BWS and quoted pairs"
                "2 ; a = \"x\\\"y\" ;b\t=\tc;d\r\nhi\r\n0\r\n\r\n" '(done "hi" 34)))

(test-group "where the next request starts"
  (test-equal "index after the body, not at the end"
    '(done "hi" 12)
    (decode "2\r\nhi\r\n0\r\n\r\nGET / HTTP/1.1\r\n")))

(test-group "incomplete"
  (test-equal "half a chunk" '(more "hel" 6) (decode "5\r\nhel"))
  (test-equal "no trailer end yet" '(more "hello" 13) (decode "5\r\nhello\r\n0\r\n")))

(test-group "malformed: 400 and the offset"
  (test-chunked "no size" "\r\nhello\r\n0\r\n\r\n" '(400 "" 0))
  (test-chunked "not hex" "5x\r\nhello\r\n0\r\n\r\n" '(400 "" 1))
  (test-chunked "negative" "-5\r\nhello\r\n0\r\n\r\n" '(400 "" 0))
  (test-chunked "bare LF after the size" "5\nhello\r\n0\r\n\r\n" '(400 "" 1))
  (test-chunked "data longer than the size" "3\r\nhello\r\n0\r\n\r\n" '(400 "hel" 6))
  (test-chunked "data shorter than the size" "6\r\nhello\r\n0\r\n\r\n" '(400 "hello\r" 9))
  (test-chunked "bare LF after the data" "5\r\nhello\n0\r\n\r\n" '(400 "hello" 8))
  (test-chunked "control character in an extension" "5;a\x01\r\nhello\r\n0\r\n\r\n" '(400 "" 3))
  (test-chunked "extension: \";\" and no name" "5;\r\nhello\r\n0\r\n\r\n" '(400 "" 2))
  (test-chunked "extension: not a token" "5;bad[=x\r\nhello\r\n0\r\n\r\n" '(400 "" 5))
  (test-chunked "extension: whitespace before CRLF" "5 \r\nhello\r\n0\r\n\r\n" '(400 "" 2))
  (test-chunked "extension: whitespace after a name" "5;a \r\nhello\r\n0\r\n\r\n" '(400 "" 4))
  (test-chunked "extension: no value after \"=\"" "5;a=\r\nhello\r\n0\r\n\r\n" '(400 "" 4))
  (test-chunked "extension: unterminated quoted-string" "5;a=\"x\r\nhello\r\n0\r\n\r\n" '(400 "" 6))
  (test-chunked "extension: no \";\" between two" "5;a=b c=d\r\nhello\r\n0\r\n\r\n" '(400 "" 6))
  (test-chunked "extension on the last chunk" "0;=\r\n\r\n" '(400 "" 2))
  (test-chunked "size of 17 hex digits" "10000000000000000\r\n" '(400 "" 16))
  (test-chunked "extension too long"
                (string-append "1;" (make-string 80 #\a) "\r\nx\r\n0\r\n\r\n") '(400 "" 65))
  (test-chunked "obs-fold in a trailer" "0\r\nX: 1\r\n 2\r\n\r\n" '(400 "" 9))
  (test-chunked "bare LF in a trailer" "0\r\nX: 1\n\r\n" '(400 "" 7)))

(test-group "limits"
  (test-equal "decoded size over the limit: 413"
    '(413 "" 2) (decode "5\r\nhello\r\n" #:max-total 4))
  (test-equal "at the limit is fine"
    '(done "hello" 15) (decode "5\r\nhello\r\n0\r\n\r\n" #:max-total 5))
  (test-equal "one over, in the second chunk"
    '(413 "hello" 12) (decode "5\r\nhello\r\n1\r\n!\r\n0\r\n\r\n" #:max-total 5)))

(test-group "encode-chunk!"
  (define (encode text)
    (let ((out (open-output-string))
          (bv (string->utf8 text)))
      (encode-chunk! bv 0 (bytevector-length bv)
                     (lambda (bv start count)
                       (display (utf8->string (bytevector-copy-range bv start count)) out)))
      (get-output-string out)))
  (test-equal "a chunk" "5\r\nhello\r\n" (encode "hello"))
  (test-equal "hex size" "1a\r\nabcdefghijklmnopqrstuvwxyz\r\n" (encode "abcdefghijklmnopqrstuvwxyz"))
  (test-equal "the last chunk" "0\r\n\r\n" (encode ""))
  (test-equal "round trip through the decoder"
    '(done "abcdefghijklmnopqrstuvwxyz" 37)
    (decode (string-append (encode "abcdefghijklmnopqrstuvwxyz") (encode "")))))

(test-end "http/chunked")
