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

(define base64url-alphabet*
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

;; character code below 128 -> its 6-bit value, or 255 when not base64url
(define base64url-values
  (let ((table (make-bytevector 128 255)))
    (do ((i 0 (+ i 1))) ((= i 64) table)
      (bytevector-u8-set! table (char->integer (string-ref base64url-alphabet* i)) i))))

;; The codec is here rather than guile-gcrypt's (gcrypt base64), which
;; goes through a string port a character at a time: a session's cookie
;; and CSRF token are decoded and a token encoded on every request of a
;; visitor who is logged in (bench/news, the front page logged in).

(define (bytes->base64url bv)
  "Return BV in base64url (RFC 4648, section 5) without padding."
  (let* ((n (bytevector-length bv))
         (out (make-string (quotient (+ (* 4 n) 2) 3))))
    (define (put! at sextet)
      (string-set! out at (string-ref base64url-alphabet* sextet)))
    (let lp ((i 0) (at 0))
      (let ((left (- n i)))
        (cond
         ((>= left 3)
          (let ((w (logior (ash (bytevector-u8-ref bv i) 16)
                           (ash (bytevector-u8-ref bv (+ i 1)) 8)
                           (bytevector-u8-ref bv (+ i 2)))))
            (put! at (ash w -18))
            (put! (+ at 1) (logand (ash w -12) 63))
            (put! (+ at 2) (logand (ash w -6) 63))
            (put! (+ at 3) (logand w 63))
            (lp (+ i 3) (+ at 4))))
         ((= left 2)
          (let ((w (logior (ash (bytevector-u8-ref bv i) 16)
                           (ash (bytevector-u8-ref bv (+ i 1)) 8))))
            (put! at (ash w -18))
            (put! (+ at 1) (logand (ash w -12) 63))
            (put! (+ at 2) (logand (ash w -6) 63))))
         ((= left 1)
          (let ((w (ash (bytevector-u8-ref bv i) 16)))
            (put! at (ash w -18))
            (put! (+ at 1) (logand (ash w -12) 63)))))))
    out))

(define (base64url->bytes text)
  "Return the bytes TEXT encodes in unpadded base64url, or #f if TEXT is
not such an encoding (another character, padding, a length no encoding
has): TEXT comes from clients."
  (and (string? text)
       (let ((n (string-length text)))
         (and (not (= 1 (modulo n 4)))
              (let ((out (make-bytevector (quotient (* 3 n) 4))))
                (define (value i)
                  ;; -> the 6 bits of TEXT's character I, or #f
                  (let ((c (char->integer (string-ref text i))))
                    (and (< c 128)
                         (let ((v (bytevector-u8-ref base64url-values c)))
                           (and (< v 64) v)))))
                (let lp ((i 0) (at 0) (w 0) (bits 0))
                  (cond
                   ((= i n) out)
                   ((value i)
                    => (lambda (v)
                         (let ((w (logior (ash (logand w #xFFFF) 6) v))
                               (bits (+ bits 6)))
                           (if (>= bits 8)
                               (begin
                                 (bytevector-u8-set! out at (logand (ash w (- 8 bits)) 255))
                                 (lp (+ i 1) (+ at 1) w (- bits 8)))
                               (lp (+ i 1) at w bits)))))
                   (else #f))))))))

;;; (plucky web crypto) ends here
