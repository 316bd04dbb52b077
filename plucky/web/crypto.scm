;;; (plucky web crypto) --- the few primitives cookies, sessions and CSRF share

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Signed cookies, session ids and CSRF tokens need the same four
;;; things, and each is easy to get subtly wrong, so they live here once:
;;;
;;;   (random-bytes n)            n bytes from libgcrypt's CSPRNG
;;;   (hmac-sha256 key data)      a 32-byte HMAC (guile-gcrypt's (gcrypt mac))
;;;   (sha256 data)               a 32-byte digest
;;;   (bytevector=?/constant-time a b)
;;;                               compares without leaking, through its
;;;                               running time, where the first difference is
;;;   (bytes->base64url bv) / (base64url->bytes text)
;;;                               unpadded base64url, the alphabet that
;;;                               needs no quoting in a cookie, a URL or
;;;                               an HTML attribute
;;;
;;; libgcrypt's random generator (GCRY_STRONG_RANDOM, "for session keys")
;;; is seeded from getrandom(2) and mixes the process id into its pool,
;;; so two workers forked from one master draw different bytes.
;;;
;;; Code:

(define-module (plucky web crypto)
  #:use-module (rnrs bytevectors)
  ;; Prefixed: this module's hmac-sha256 and sha256 would otherwise hide
  ;; the names (gcrypt mac) and (gcrypt hash) define for the algorithms.
  #:use-module ((gcrypt mac) #:prefix gcrypt:)
  #:use-module ((gcrypt hash) #:prefix gcrypt:)
  #:use-module (gcrypt random)
  #:use-module (gcrypt base64)
  #:export (random-bytes
            hmac-sha256
            sha256
            bytevector=?/constant-time
            bytes->base64url
            base64url->bytes
            ->bytevector))

(define (random-bytes n)
  "Return a fresh bytevector of N bytes from a cryptographically secure
random generator (libgcrypt's, at its strong level)."
  (gen-random-bv n %gcry-strong-random))

(define (->bytevector data)
  "Return DATA as a bytevector: DATA itself, or a string's UTF-8."
  (if (bytevector? data) data (string->utf8 data)))

(define (hmac-sha256 key data)
  "Return the 32-byte HMAC-SHA256 of DATA (a bytevector or a string,
taken as UTF-8) under KEY (likewise)."
  (gcrypt:sign-data (->bytevector key) (->bytevector data)
                    #:algorithm (gcrypt:mac-algorithm gcrypt:hmac-sha256)))

(define (sha256 data)
  "Return the 32-byte SHA-256 digest of DATA (a bytevector or a string,
taken as UTF-8)."
  (gcrypt:bytevector-hash (->bytevector data) (gcrypt:hash-algorithm gcrypt:sha256)))

(define (bytevector=?/constant-time a b)
  "Return #t if the bytevectors A and B hold the same bytes.  For two of
the same length the time taken does not depend on where they differ:
every byte is looked at and the differences are or-ed together, so an
attacker who times the comparison of a guessed MAC or token learns
nothing about how much of it was right.  Lengths are not secret (a MAC's
or a token's is fixed), so a length mismatch returns at once."
  (and (= (bytevector-length a) (bytevector-length b))
       (let loop ((i 0) (diff 0))
         (if (= i (bytevector-length a))
             (zero? diff)
             (loop (+ i 1)
                   (logior diff (logxor (bytevector-u8-ref a i)
                                        (bytevector-u8-ref b i))))))))

(define (bytes->base64url bv)
  "Return BV in base64url (RFC 4648, section 5) without padding."
  (base64-encode bv 0 (bytevector-length bv) #f #t base64url-alphabet))

(define (base64url-char? c)
  (or (char<=? #\a c #\z) (char<=? #\A c #\Z) (char<=? #\0 c #\9)
      (char=? c #\-) (char=? c #\_)))

(define (base64url->bytes text)
  "Return the bytes TEXT encodes in unpadded base64url, or #f if TEXT is
not such an encoding (another character, padding, a length no encoding
has): TEXT comes from clients."
  (and (string? text)
       (if (string-null? text)
           #vu8()
           (and (not (= 1 (modulo (string-length text) 4)))
                (string-every base64url-char? text)
                (false-if-exception
                 (base64-decode text base64url-alphabet #f #f #f))))))

;;; (plucky web crypto) ends here
