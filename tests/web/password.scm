;;; tests/web/password.scm --- (plucky web password)

(use-modules (srfi srfi-64)
             (srfi srfi-11)
             (rnrs bytevectors)
             (tests lib harness)
             (tests lib error-text)
             (plucky web password))


;; -> (values result milliseconds) of THUNK
(define (timed thunk)
  (let* ((start (get-internal-real-time))
         (result (thunk)))
    (values result (/ (- (get-internal-real-time) start) (/ internal-time-units-per-second 1000.0)))))

(define stored (hash-password "correct horse battery staple"))

(test-begin "web/password")

(test-group "hash-password"
  (test-assert "OWASP's parameters by default, 16-byte salt, 32-byte hash"
    (string-prefix? "$argon2id$v=19$m=19456,t=2,p=1$" stored))
  (test-equal "salt and hash lengths in base64" '(22 43)
    (let ((fields (string-split stored #\$)))
      (list (string-length (list-ref fields 4)) (string-length (list-ref fields 5)))))
  (test-assert "a fresh salt each time"
    (not (equal? stored (hash-password "correct horse battery staple"))))
  (test-assert "other parameters are kept in the string"
    (string-prefix? "$argon2id$v=19$m=8192,t=3,p=2$"
                          (hash-password "x" #:memory 8192 #:iterations 3 #:parallelism 2)))
  (test-assert "an overlong password is refused, without quoting it"
    (let ((text (error-text (lambda () (hash-password (make-string 2000 #\z))))))
      (and (string-contains text "longer than 1024 bytes") (not (string-contains text "zzzz")))))
  (let-values (((hash ms) (timed (lambda () (hash-password "correct horse battery staple")))))
    (format #t "hash-password with the defaults: ~,1f ms~%" ms)
    (test-assert "takes real work (not a fast hash)" (> ms 5))))

(test-group "verify-password"
  (test-assert "the right password" (verify-password stored "correct horse battery staple"))
  (test-assert "a wrong one" (not (verify-password stored "correct horse battery stapler")))
  (test-assert "empty" (not (verify-password stored "")))
  (test-assert "the empty password hashed"
    (verify-password (hash-password "") ""))
  (test-assert "UTF-8" (verify-password (hash-password "pâsswörd ☃") "pâsswörd ☃"))
  (test-assert "a NUL is part of the password, not its end"
    (let ((hash (hash-password "abc\x00def")))
      (and (verify-password hash "abc\x00def") (not (verify-password hash "abc")))))
  (test-assert "bytevectors" (verify-password (hash-password #vu8(255 0 1)) #vu8(255 0 1)))
  ;; libargon2's own test vector (src/test.c, Argon2id, version 19)
  (test-assert "a known hash"
    (verify-password "$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"
                     "password"))
  (for-each (lambda (junk)
              (test-assert (object->string junk) (not (verify-password junk "password"))))
            (list "" "password" "$argon2i$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"
                  "$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$"
                  "$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPd"
                  "$argon2id$v=19$m=65536,t=2,p=1\x00$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"
                  #f 42))
  (test-assert "an overlong password is just wrong"
    (not (verify-password stored (make-string 5000 #\a)))))

(define (median-ms thunk)
  ;; -> the median of 5 timings of THUNK, in milliseconds
  (let ((times (sort (map (lambda (_) (let-values (((r ms) (timed thunk))) ms)) (iota 5)) <)))
    (list-ref times 2)))

(test-group "verify-password #f: an account that does not exist"
  ;; issue 25 (c): a login of an unknown name took 3.7 ms, of a real
  ;; one 59 ms; the name without a hash must cost a verification too.
  (test-equal "is #f" #f (verify-password #f "correct horse battery staple"))
  (let ((real (median-ms (lambda () (verify-password stored "a wrong password"))))
        (absent (median-ms (lambda () (verify-password #f "a wrong password")))))
    (format #t "verify-password: ~,1f ms a stored hash, ~,1f ms #f~%" real absent)
    (test-assert "takes as long as a stored hash (at least half)" (>= absent (/ real 2)))))

(test-group "password-needs-rehash?"
  (test-assert "current parameters" (not (password-needs-rehash? stored)))
  (test-assert "more than asked is fine"
    (not (password-needs-rehash? "$argon2id$v=19$m=65536,t=3,p=1$c29tZXNhbHQ$CTFh")))
  (test-assert "memory raised" (password-needs-rehash? stored #:memory 65536))
  (test-assert "iterations raised" (password-needs-rehash? stored #:iterations 3))
  (test-assert "parallelism raised" (password-needs-rehash? stored #:parallelism 2))
  (test-assert "weaker memory" (password-needs-rehash? "$argon2id$v=19$m=4096,t=2,p=1$c29tZXNhbHQ$CTFh"))
  (test-assert "argon2i" (password-needs-rehash? "$argon2i$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$CTFh"))
  (test-assert "version 16" (password-needs-rehash? "$argon2id$v=16$m=65536,t=2,p=1$c29tZXNhbHQ$CTFh"))
  (test-assert "not a hash" (password-needs-rehash? "5f4dcc3b5aa765d61d8327deb882cf99"))
  (test-assert "garbled parameters" (password-needs-rehash? "$argon2id$v=19$t=2,m=65536,p=1$c29tZXNhbHQ$CTFh")))

(test-end "web/password")
