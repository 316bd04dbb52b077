;;; (plucky web crypto) --- the few primitives cookies, sessions and CSRF share

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Signed cookies, session ids and CSRF tokens need the same four
;;; things, and each is easy to get subtly wrong, so they live here once:
;;;
;;;   (random-bytes n)            n bytes from libgcrypt's CSPRNG
;;;   (hmac-sha256 key data)      a 32-byte HMAC (libgcrypt's)
;;;   (sha256 data)               a 32-byte digest (libgcrypt's)
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
;;; A visitor who is logged in costs a SHA-256 (the session's row key)
;;; and 32 random bytes (the mask of the page's CSRF token) a request
;;; (bench/news, the front page logged in), so both avoid what makes a
;;; call through guile-gcrypt dear for a few bytes: `bytevector->pointer',
;;; which records each pointer it makes in a global weak table, and, for
;;; the random bytes, libgcrypt's per-call work (its lock, its pool's
;;; mixing).  Each thread keeps scratch bytevectors whose pointers are
;;; made once, and a buffer of random bytes drawn from the generator a
;;; few kilobytes at a time and handed out in slices, each slice once.
;;; The buffer remembers the process that filled it: a process forked
;;; after a fill (a worker) throws the copy it inherited away before its
;;; first draw and fills its own, from libgcrypt's generator, which has
;;; mixed the new process id in; two processes never hand out the same
;;; bytes.
;;;
;;; Code:

(define-module (plucky web crypto)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  ;; libgcrypt's functions, called directly (see that module for why)
  #:use-module (plucky sys gcrypt)
  #:export (random-bytes
            hmac-sha256
            sha256
            bytevector=?/constant-time
            bytes->base64url
            base64url->bytes
            ->bytevector))

;; The scratch space of a thread: reused by every call the thread makes,
;; so that the handles given to libgcrypt are made once.
(define-record-type <scratch>
  (make-scratch input input-pointer digest digest-pointer
                random random-pointer random-offset random-pid)
  scratch?
  (input scratch-input)                 ; data to hash, up to its length
  (input-pointer scratch-input-pointer) ; its `gcry-buffer'
  (digest scratch-digest)               ; 32 bytes, the last digest
  (digest-pointer scratch-digest-pointer) ; its `gcry-buffer'
  (random scratch-random)               ; random bytes, those before
  (random-pointer scratch-random-pointer) ; the offset handed out
  (random-offset scratch-random-offset set-scratch-random-offset!)
  (random-pid scratch-random-pid set-scratch-random-pid!)) ; who filled it, or #f

(define input-bytes 64)                 ; covers a session id, a token
(define random-buffer-bytes 4096)

(define (fresh-scratch)
  (let ((input (make-bytevector input-bytes))
        (digest (make-bytevector 32))
        (random (make-bytevector random-buffer-bytes 0)))
    (make-scratch input (gcry-buffer input) digest (gcry-buffer digest)
                  random (gcry-buffer random) random-buffer-bytes #f)))

(define scratch-fluid (make-thread-local-fluid #f))

(define (scratch)
  ;; -> the calling thread's <scratch>
  (or (fluid-ref scratch-fluid)
      (let ((new (fresh-scratch)))
        (fluid-set! scratch-fluid new)
        new)))

(define (random-bytes n)
  "Return a fresh bytevector of N bytes from a cryptographically secure
random generator (libgcrypt's, at its strong level), bytes that no other
call, in this process or another, returns."
  (let* ((s (scratch))
         (buffer (scratch-random s))
         (out (make-bytevector n)))
    (cond
     ((> n random-buffer-bytes)
      (gcry-randomize! (gcry-buffer out) n gcry-strong-random))
     (else
      (let ((pid (getpid)))
        (when (or (not (eqv? pid (scratch-random-pid s)))
                  (> (+ (scratch-random-offset s) n) random-buffer-bytes))
          (gcry-randomize! (scratch-random-pointer s) random-buffer-bytes gcry-strong-random)
          (set-scratch-random-pid! s pid)
          (set-scratch-random-offset! s 0)))
      (let ((at (scratch-random-offset s)))
        (bytevector-copy! buffer at out 0 n)
        ;; Handed out: not left in memory to be handed out again.
        (bytevector-fill-range! buffer at n)
        (set-scratch-random-offset! s (+ at n)))))
    out))

(define (bytevector-fill-range! bv start n)
  (do ((i start (+ i 1))) ((= i (+ start n)))
    (bytevector-u8-set! bv i 0)))

(define (->bytevector data)
  "Return DATA as a bytevector: DATA itself, or a string's UTF-8."
  (if (bytevector? data) data (string->utf8 data)))

(define (hmac-sha256 key data)
  "Return the 32-byte HMAC-SHA256 of DATA (a bytevector or a string,
taken as UTF-8) under KEY (likewise)."
  (let ((digest (make-bytevector 32)))
    (gcry-hmac! gcry-md-sha256 digest (->bytevector key) (->bytevector data))
    digest))

(define (sha256 data)
  "Return the 32-byte SHA-256 digest of DATA (a bytevector or a string,
taken as UTF-8)."
  (let* ((bv (->bytevector data))
         (n (bytevector-length bv))
         (s (scratch))
         (digest (scratch-digest s)))
    (if (<= n input-bytes)
        (begin
          (bytevector-copy! bv 0 (scratch-input s) 0 n)
          (gcry-hash-buffer! gcry-md-sha256 (scratch-digest-pointer s) (scratch-input-pointer s) n))
        (gcry-hash-buffer! gcry-md-sha256 (scratch-digest-pointer s) (gcry-buffer bv) n))
    (let ((out (make-bytevector 32)))
      (bytevector-copy! digest 0 out 0 32)
      out)))

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
has, bits set past the last byte): TEXT comes from clients."
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
                   ;; the bits past the last byte must be zeros: else
                   ;; several texts would be one value, and a token
                   ;; whose last character was changed still valid
                   ((= i n) (and (zero? (logand w (- (ash 1 bits) 1))) out))
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
