;;; (plucky web password) --- Argon2id password hashes through libargon2

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;;   (hash-password "correct horse")        -> "$argon2id$v=19$m=19456,t=2,p=1$SALT$HASH"
;;;   (verify-password stored "correct horse") -> #t
;;;   (password-needs-rehash? stored)         -> #f, until the parameters are raised
;;;
;;; A password is stored only as Argon2id (RFC 9106), the memory-hard
;;; hash OWASP's Password Storage Cheat Sheet puts first, with its
;;; minimum parameters by default: 19 MiB of memory, 2 passes, 1 lane.
;;; Memory-hard means a guesser's GPU or ASIC pays for 19 MiB per guess
;;; in flight, not just for arithmetic.  Never a plain or fast hash.
;;;
;;; The work is libargon2's (Debian's libargon2-1, the reference
;;; implementation), called through (plucky sys argon2):
;;; `argon2id_hash_encoded' with a 16-byte salt from a CSPRNG, and
;;; `argon2id_verify', which compares in constant time.  The encoded
;;; string keeps the algorithm, version, parameters and salt beside the
;;; hash, so a stored hash verifies whatever the defaults are today, and
;;; `password-needs-rehash?' tells when to hash again with stronger ones
;;; (at login, the one moment the password is known).
;;;
;;; A login of a name that has no account must take as long as one of a
;;; name that has: `verify-password' given #f for the stored hash
;;; verifies against a dummy one, and answers #f.
;;;
;;; A hash takes tens of milliseconds of one CPU.  In a handler it runs
;;; on one of the worker's compute threads (`blocking', plucky server
;;; suspend) while the request suspends, so the worker serves other
;;; requests meanwhile; elsewhere it runs where it is called.  It is
;;; still a CPU's time: rate-limit logins (plucky web limit).
;;; Passwords longer than `max-password-bytes' are refused, so a
;;; megabyte "password" is turned away before any work.
;;;
;;; Code:

(define-module (plucky web password)
  #:use-module (rnrs bytevectors)
  #:use-module (plucky sys argon2)
  #:use-module (plucky web crypto)
  ;; Loaded by the first hash (bench/startup).
  #:autoload (plucky server) (blocking)
  #:export (hash-password
            verify-password
            password-needs-rehash?
            max-password-bytes
            default-memory
            default-iterations
            default-parallelism))

(define default-memory 19456)           ; KiB: 19 MiB, OWASP's minimum for Argon2id
(define default-iterations 2)
(define default-parallelism 1)
(define salt-bytes 16)                  ; RFC 9106's recommendation
(define hash-bytes 32)

;; More than anyone types or a password manager makes; enough to turn
;; a body full of "password" away before hashing it.
(define max-password-bytes 1024)

(define (password-bytes who password)
  (let ((bytes (->bytevector password)))
    (when (> (bytevector-length bytes) max-password-bytes)
      ;; The password itself is never put in a message.
      (error (string-append (symbol->string who) ": password longer than "
                            (number->string max-password-bytes) " bytes; its length:")
             (bytevector-length bytes)))
    bytes))

(define* (hash-password password #:key (memory default-memory) (iterations default-iterations)
                        (parallelism default-parallelism))
  "Return the Argon2id hash of PASSWORD (a string, taken as UTF-8, or a
bytevector) in the PHC string format libargon2 writes,
\"$argon2id$v=19$m=MEMORY,t=ITERATIONS,p=PARALLELISM$SALT$HASH\", with
a fresh random salt.  MEMORY is in KiB (default 19456, 19 MiB).  Raise an
error if PASSWORD is longer than `max-password-bytes'."
  (let* ((bytes (password-bytes 'hash-password password))
         (salt (random-bytes salt-bytes))
         (length (argon2id-encoded-length iterations memory parallelism salt-bytes hash-bytes))
         (encoded (make-bytevector length 0))
         (status (blocking
                  (lambda ()
                    (argon2id-hash-encoded! iterations memory parallelism
                                            bytes salt hash-bytes encoded)))))
    (unless (= status argon2-ok)
      (error "hash-password: libargon2 failed:" (argon2-error-message status)))
    ;; libargon2 writes a C string: ASCII up to a NUL
    (c-string encoded)))

(define (c-string bv)
  ;; -> the string of the bytes of BV before its first NUL
  (let* ((n (let lp ((i 0))
              (if (or (= i (bytevector-length bv)) (zero? (bytevector-u8-ref bv i)))
                  i
                  (lp (+ i 1)))))
         (text (make-bytevector n)))
    (bytevector-copy! bv 0 text 0 n)
    (utf8->string text)))

(define dummy-hash
  ;; a hash no password is known for, with the default parameters: made
  ;; at the first login of an unknown name in this process
  (delay (hash-password (random-bytes 32))))

(define (verify-password encoded password)
  "Return #t if PASSWORD (a string or a bytevector) is the one ENCODED, a
string `hash-password' returned, was made from; else #f, also when
ENCODED is not an Argon2id hash or PASSWORD is longer than
`max-password-bytes'.  The comparison is libargon2's, in constant time.
ENCODED #f stands for an account that does not exist: PASSWORD is then
verified against a hash no password is known for, which takes as long
as a real one, and the result is #f, so that a login's time does not
tell which names have accounts."
  (let ((bytes (->bytevector password))
        (encoded (or encoded (force dummy-hash))))
    (and (string? encoded)
         (string-prefix? "$argon2id$" encoded)
         (not (string-index encoded #\nul))
         (<= (bytevector-length bytes) max-password-bytes)
         (let ((status (blocking
                        (lambda ()
                          (argon2id-verify encoded bytes)))))
           (= status argon2-ok)))))

(define (encoded-parameters encoded)
  ;; -> (memory iterations parallelism) of a "$argon2id$v=19$m=..,t=..,p=..$.." string, or #f
  (let ((fields (string-split encoded #\$)))
    (and (= 6 (length fields))
         (string=? "argon2id" (list-ref fields 1))
         (string=? "v=19" (list-ref fields 2))
         (let ((numbers (map (lambda (item)
                               (let ((equals (string-index item #\=)))
                                 (and equals (cons (substring item 0 equals)
                                                   (string->number (substring item (+ equals 1)) 10)))))
                             (string-split (list-ref fields 3) #\,))))
           (and (equal? '("m" "t" "p") (map (lambda (n) (and n (car n))) numbers))
                (map cdr numbers))))))

(define* (password-needs-rehash? encoded #:key (memory default-memory) (iterations default-iterations)
                                 (parallelism default-parallelism))
  "Return #t if ENCODED, a stored hash, was made with weaker parameters
than MEMORY, ITERATIONS and PARALLELISM (the defaults of
`hash-password'), or is not an Argon2id hash of version 19 at all: hash
the password again with `hash-password' once it has verified."
  (let ((parameters (and (string? encoded) (encoded-parameters encoded))))
    (or (not parameters)
        (not (and-map integer? parameters))
        (< (car parameters) memory)
        (< (cadr parameters) iterations)
        (< (caddr parameters) parallelism))))

;;; (plucky web password) ends here
