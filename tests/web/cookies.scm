;;; tests/web/cookies.scm --- (plucky web cookies) and (plucky web crypto)

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (rnrs bytevectors)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (tests lib error-text)
             (ice-9 threads)
             (rnrs io ports)
             ((gcrypt hash) #:prefix gcrypt:)
             (plucky web crypto)
             (plucky web cookies))

(define (request-with . headers)
  (build-request (string->uri "http://localhost/") #:headers headers))


(define-syntax-rule (test-parse text expected)
  (test-equal text expected (parse-cookie-header text)))
(define-syntax-rule (test-header expected form)
  (test-equal expected (cons 'set-cookie expected) form))
(define-syntax-rule (test-refused what fragment form)
  (test-assert what (string-contains (error-text (lambda () form)) fragment)))

(define key-1 (make-bytevector 32 1))
(define key-2 (make-string 40 #\k))
(define now 1800000000)

(test-begin "web/cookies")

(test-group "bytevector=?/constant-time"
  (test-assert (bytevector=?/constant-time #vu8(1 2 3) #vu8(1 2 3)))
  (test-assert (not (bytevector=?/constant-time #vu8(1 2 3) #vu8(1 2 4))))
  (test-assert (not (bytevector=?/constant-time #vu8(0 2 3) #vu8(1 2 3))))
  (test-assert (not (bytevector=?/constant-time #vu8(1 2) #vu8(1 2 3))))
  (test-assert (bytevector=?/constant-time #vu8() #vu8())))

(test-group "base64url"
  (test-equal "AQL_-w" (bytes->base64url #vu8(1 2 255 251)))
  (test-equal #vu8(1 2 255 251) (base64url->bytes "AQL_-w"))
  (test-equal #f (base64url->bytes "AQL/+w"))
  (test-equal #f (base64url->bytes "AQL_-w=="))
  (test-equal #f (base64url->bytes "A"))
  (test-equal #vu8() (base64url->bytes ""))
  ;; RFC 4648's vectors, unpadded
  (for-each (lambda (plain encoded)
              (test-equal encoded (bytes->base64url (string->utf8 plain)))
              (test-equal plain (utf8->string (base64url->bytes encoded))))
            '("" "f" "fo" "foo" "foob" "fooba" "foobar")
            '("" "Zg" "Zm8" "Zm9v" "Zm9vYg" "Zm9vYmE" "Zm9vYmFy"))
  (test-equal "every byte value, every alphabet character"
    "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0-P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn-AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq-wsbKztLW2t7i5uru8vb6_wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t_g4eLj5OXm5-jp6uvs7e7v8PHy8_T19vf4-fr7_P3-_w"
    (bytes->base64url (u8-list->bytevector (iota 256))))
  (test-equal "and back" (u8-list->bytevector (iota 256))
    (base64url->bytes (bytes->base64url (u8-list->bytevector (iota 256)))))
  (test-assert "random bytes of every length up to 64 round-trip"
    (every (lambda (n) (let ((bytes (random-bytes n)))
                         (equal? bytes (base64url->bytes (bytes->base64url bytes)))))
           (iota 65)))
  (test-equal "a character past ASCII" #f (base64url->bytes "AQ\u00e9w"))
  (test-equal "a space" #f (base64url->bytes "AQ w"))
  ;; "AQL_-x" would be the same bytes as "AQL_-w" if the bits past the
  ;; last byte were ignored: a session id with its last character
  ;; changed then opened the same session, one time in 256
  (test-equal "bits set past the last byte" #f (base64url->bytes "AQL_-x"))
  (test-equal "two characters, bits past the byte" #f (base64url->bytes "AR"))
  (test-equal "two characters, canonical" #vu8(1) (base64url->bytes "AQ"))
  (test-equal "not a string" #f (base64url->bytes 42)))

(test-group "hmac-sha256"
  ;; RFC 4231, test case 2
  (test-equal "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    (string-join (map (lambda (b) (string-pad (number->string b 16) 2 #\0))
                      (bytevector->u8-list (hmac-sha256 "Jefe" "what do ya want for nothing?")))
                 ""))
  ;; RFC 4231, test case 6: a key longer than SHA-256's block
  (test-equal "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
    (string-join (map (lambda (b) (string-pad (number->string b 16) 2 #\0))
                      (bytevector->u8-list
                       (hmac-sha256 (make-bytevector 131 #xaa)
                                    "Test Using Larger Than Block-Size Key - Hash Key First")))
                 ""))
  (test-equal "empty data, a bytevector" 32 (bytevector-length (hmac-sha256 #vu8(1 2 3) #vu8()))))

(define (hex bv)
  (string-join (map (lambda (b) (string-pad (number->string b 16) 2 #\0))
                    (bytevector->u8-list bv))
               ""))

(define (gcrypt-sha256 bv)
  (gcrypt:bytevector-hash bv (gcrypt:hash-algorithm gcrypt:sha256)))

(define-syntax-rule (test-sha256 expected data)
  (test-equal expected (hex (sha256 data))))

(test-group "sha256"
  ;; FIPS 180-2's examples
  (test-sha256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" "")
  (test-sha256 "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" "abc")
  (test-sha256 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
               "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
  (test-sha256 "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
               (make-string 1000000 #\a))
  (test-assert "the same as guile-gcrypt's, for every length up to 200"
    (every (lambda (n)
             (let ((data (u8-list->bytevector (map (lambda (i) (modulo (* i 7) 256)) (iota n)))))
               (equal? (gcrypt-sha256 data) (sha256 data))))
           (iota 201)))
  (test-assert "each digest a fresh bytevector"
    (let* ((a (sha256 "a")) (b (sha256 "b")))
      (and (equal? a (gcrypt-sha256 (string->utf8 "a")))
           (equal? b (gcrypt-sha256 (string->utf8 "b"))))))
  (test-equal "from other threads too"
    (map (lambda (n) (gcrypt-sha256 (make-bytevector n n))) (iota 8))
    (map join-thread
         (map (lambda (n) (call-with-new-thread (lambda () (sha256 (make-bytevector n n)))))
              (iota 8)))))

(define (random-in-child n)
  ;; -> N bytes drawn by `random-bytes' in a child process
  (let* ((pipe (pipe))
         (pid (primitive-fork)))
    (if (zero? pid)
        (begin
          (close-port (car pipe))
          (put-bytevector (cdr pipe) (random-bytes n))
          (force-output (cdr pipe))
          (primitive-_exit 0))
        (begin
          (close-port (cdr pipe))
          (let ((bytes (get-bytevector-all (car pipe))))
            (close-port (car pipe))
            (waitpid pid)
            bytes)))))

(define (all-distinct? items)
  (= (length items) (length (delete-duplicates items))))

(test-group "random-bytes"
  (test-equal 16 (bytevector-length (random-bytes 16)))
  (test-assert (not (equal? (random-bytes 16) (random-bytes 16))))
  (test-equal 0 (bytevector-length (random-bytes 0)))
  (test-equal "more than a buffer at once" 10000 (bytevector-length (random-bytes 10000)))
  (test-assert "no two draws alike, across many refills"
    (all-distinct? (map (lambda (_) (random-bytes 24)) (iota 2000))))
  (test-assert "a process forked after a draw draws other bytes than its parent"
    (begin
      (random-bytes 16)                 ; the buffer is filled here
      (let* ((child (random-in-child 32))
             (parent (random-bytes 32)))
        (and (= 32 (bytevector-length child))
             (not (equal? child parent))))))
  (test-assert "two processes forked from one draw different bytes"
    (begin
      (random-bytes 16)
      (let* ((a (random-in-child 32))
             (b (random-in-child 32)))
        (and (= 32 (bytevector-length a) (bytevector-length b))
             (not (equal? a b))))))
  (test-assert "threads draw different bytes"
    (all-distinct?
     (append-map join-thread
                 (map (lambda (_)
                        (call-with-new-thread
                         (lambda () (map (lambda (_) (random-bytes 16)) (iota 50)))))
                      (iota 4))))))

(test-group "parse-cookie-header"
  (test-parse "a=1; b=2" '(("a" . "1") ("b" . "2")))
  (test-parse "a=1;b=2" '(("a" . "1") ("b" . "2")))
  (test-parse "  a = 1 ;\tb=2 ; " '(("a" . "1") ("b" . "2")))
  (test-parse "a=\"quoted\"" '(("a" . "quoted")))
  (test-parse "a=x=y" '(("a" . "x=y")))
  (test-parse "a=" '(("a" . "")))
  (test-parse "flag; a=1" '(("a" . "1")))
  (test-parse "=orphan; a=1" '(("a" . "1")))
  (test-parse "a=with space, comma" '(("a" . "with space, comma")))
  (test-parse "a=1; a=2" '(("a" . "1") ("a" . "2")))
  (test-parse "" '()))

(test-group "request-cookies"
  (test-equal '(("a" . "1") ("b" . "2") ("c" . "3"))
    (request-cookies (request-with '(cookie . "a=1; b=2") '(cookie . "c=3"))))
  (test-equal '() (request-cookies (request-with))))

(test-group "request-cookie"
  (let ((request (request-with '(cookie . "a=1; b=2; a=3") '(cookie . "c=4"))))
    (test-equal "1" (request-cookie request "a"))
    (test-equal "4" (request-cookie request "c"))
    (test-equal #f (request-cookie request "d"))))

(test-group "set-cookie"
  (test-header "a=1; Path=/; HttpOnly; SameSite=Lax" (set-cookie "a" "1"))
  (test-header "a=1; Path=/; Secure; HttpOnly; SameSite=Lax"
    (parameterize ((secure-cookies? #t)) (set-cookie "a" "1")))
  (test-header "a=1; Path=/app; Domain=example.org; Max-Age=60; Expires=Fri, 15 Jan 2027 08:00:00 GMT; Secure; SameSite=Strict"
    (set-cookie "a" "1" #:path "/app" #:domain "example.org" #:max-age 60 #:expires 1800000000.5
                #:secure? #t #:http-only? #f #:same-site 'strict))
  (test-header "a=1; HttpOnly" (set-cookie "a" "1" #:path #f #:same-site #f))
  (test-header "a=1; Path=/; Secure; HttpOnly; SameSite=None"
    (set-cookie "a" "1" #:secure? #t #:same-site 'none))
  (test-refused "a name with a space" "\"a b\"" (set-cookie "a b" "1"))
  (test-refused "an empty name" "cookie name" (set-cookie "" "1"))
  (test-refused "a value with ;" "\"x;Path=/evil\"" (set-cookie "a" "x;Path=/evil"))
  (test-refused "a value with a space" "\"a b\"" (set-cookie "a" "a b"))
  (test-refused "a value with CR LF" "cookie value" (set-cookie "a" "x\r\nSet-Cookie: b=2"))
  (test-refused "a value with a NUL" "cookie value" (set-cookie "a" "x\x00"))
  (test-refused "a value not ASCII" "cookie value" (set-cookie "a" "caf\xe9"))
  (test-refused "a value too long" "4096" (set-cookie "a" (make-string 5000 #\x)))
  (test-refused "a path with ;" "\"/;x\"" (set-cookie "a" "1" #:path "/;x"))
  (test-refused "a domain with a space" "cookie domain" (set-cookie "a" "1" #:domain "a b"))
  (test-refused "a negative max-age" "-1" (set-cookie "a" "1" #:max-age -1))
  (test-refused "an unknown same-site" "sideways" (set-cookie "a" "1" #:same-site 'sideways))
  (test-refused "same-site none without secure" "secure" (set-cookie "a" "1" #:same-site 'none))
  (test-assert "the message is one line"
    (not (string-index (string-trim-right (error-text (lambda () (set-cookie "a" "x;y")))) #\newline))))

(test-group "delete-cookie"
  (test-header "a=; Path=/; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT; HttpOnly; SameSite=Lax"
    (delete-cookie "a")))

(test-group "response-with-headers"
  (let ((response (response-with-headers (build-response #:code 302 #:headers '((content-type text/plain)))
                                         (list (set-cookie "a" "1")))))
    (test-equal 302 (response-code response))
    (test-equal "a=1; Path=/; HttpOnly; SameSite=Lax" (assq-ref (response-headers response) 'set-cookie)))
  (test-equal '((content-type text/plain) (set-cookie . "x"))
    (response-with-headers '((content-type text/plain)) '((set-cookie . "x")))))

(test-group "sign-cookie-value"
  (let ((signed (sign-cookie-value key-1 "user" "ada" #:max-age 60 #:now now)))
    (test-assert "cookie-octets" (cookie-value? signed))
    (test-equal "ada" (verify-cookie-value key-1 "user" signed #:now now))
    (test-equal "any text" "naïve; \"quoted\" \x00"
      (verify-cookie-value key-1 "u" (sign-cookie-value key-1 "u" "naïve; \"quoted\" \x00" #:now now)
                           #:now now)))
  (test-refused "a short key" "shorter than 32 bytes" (sign-cookie-value "secret" "a" "1"))
  (test-refused "a key that is not secret" "32" (sign-cookie-value "0123456789" "a" "1"))
  (test-assert "the key is not in the message"
    (not (string-contains (error-text (lambda () (sign-cookie-value "hunter2" "a" "1"))) "hunter2")))
  (test-refused "no key" "no cookie signing key" (sign-cookie-value '() "a" "1")))

(test-group "verify-cookie-value"
  (define signed (sign-cookie-value key-1 "user" "ada" #:max-age 60 #:now now))
  (define (tamper text i c)
    (let ((copy (string-copy text))) (string-set! copy i c) copy))
  (define (parts text) (string-split text #\.))
  (test-equal "expired at its expiry" #f (verify-cookie-value key-1 "user" signed #:now (+ now 60)))
  (test-equal "valid a second before" "ada" (verify-cookie-value key-1 "user" signed #:now (+ now 59)))
  (test-equal "another name" #f (verify-cookie-value key-1 "admin" signed #:now now))
  (test-equal "another key" #f (verify-cookie-value key-2 "user" signed #:now now))
  (test-equal "value changed" #f
    (verify-cookie-value key-1 "user"
                         (string-append (bytes->base64url (string->utf8 "root")) "."
                                        (cadr (parts signed)) "." (caddr (parts signed)))
                         #:now now))
  (test-equal "expiry extended" #f
    (verify-cookie-value key-1 "user"
                         (string-append (car (parts signed)) "." (number->string (+ now 99999))
                                        "." (caddr (parts signed)))
                         #:now now))
  (test-equal "one MAC character changed" #f
    (verify-cookie-value key-1 "user"
                         (tamper signed (- (string-length signed) 2)
                                 (if (char=? #\A (string-ref signed (- (string-length signed) 2))) #\B #\A))
                         #:now now))
  (test-equal "MAC cut short" #f
    (verify-cookie-value key-1 "user" (substring signed 0 (- (string-length signed) 4)) #:now now))
  (test-equal "no MAC" #f
    (verify-cookie-value key-1 "user" (string-append (car (parts signed)) "." (cadr (parts signed)) ".")
                         #:now now))
  (for-each (lambda (junk)
              (test-equal junk #f (verify-cookie-value key-1 "user" junk #:now now)))
            '("" "." ".." "..." "a.b.c" "YWRh.1800000060" "YWRh.+1800000060.AAAA" "YWRh.#x1.AAAA"
              "YWRh.1e20.AAAA" "\x00.\x00.\x00"))
  (test-equal "a value not UTF-8, signed" #f
    (let* ((encoded (bytes->base64url #vu8(255 254)))
           (expiry (number->string (+ now 60)))
           (mac (bytes->base64url (hmac-sha256 key-1 (string-append "user=" encoded "." expiry)))))
      (verify-cookie-value key-1 "user" (string-append encoded "." expiry "." mac) #:now now))))

(test-group "key rotation"
  (define old (sign-cookie-value (list key-1) "user" "ada" #:now now))
  (define new (sign-cookie-value (list key-2 key-1) "user" "bob" #:now now))
  (test-equal "old value, old key second" "ada" (verify-cookie-value (list key-2 key-1) "user" old #:now now))
  (test-equal "new value, signed with the first" "bob" (verify-cookie-value (list key-2) "user" new #:now now))
  (test-equal "new value refused by the old key alone" #f (verify-cookie-value (list key-1) "user" new #:now now))
  (test-equal "old key dropped" #f (verify-cookie-value (list key-2) "user" old #:now now)))

(test-group "set-signed-cookie"
  (let ((header (set-signed-cookie key-1 "user" "ada" #:max-age 3600 #:now now)))
    (test-assert (string-contains (cdr header) "; Max-Age=3600; HttpOnly; SameSite=Lax"))
    (test-equal "ada"
      (request-signed-cookie (request-with (cons 'cookie (car (string-split (cdr header) #\space)))) key-1 "user"
                             #:now now))))

(test-group "request-signed-cookie"
  (let ((good (sign-cookie-value key-1 "user" "ada" #:now now)))
    (test-equal "a forged one first, then the real one" "ada"
      (request-signed-cookie (request-with (cons 'cookie (string-append "user=forged; user=" good)))
                             key-1 "user" #:now now))
    (test-equal "a forged one only" #f
      (request-signed-cookie (request-with '(cookie . "user=YWRh.9999999999.AAAA")) key-1 "user" #:now now))
    (test-equal "none" #f (request-signed-cookie (request-with) key-1 "user" #:now now))))

(test-end "web/cookies")
