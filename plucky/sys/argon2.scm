;;; (plucky sys argon2) --- libargon2's Argon2id, on bytevectors

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The four functions of libargon2 (Debian's libargon2-1, the reference
;;; implementation) that (plucky web password) uses, taking and giving
;;; bytevectors and strings: no pointer leaves this module.  The library
;;; is opened when this module loads, which (plucky web password) does
;;; at its first hash (bench/startup).
;;;
;;; Code:

(define-module (plucky sys argon2)
  #:use-module (rnrs bytevectors)
  #:use-module ((system foreign)
                #:select (%null-pointer bytevector->pointer string->pointer pointer->string
                          uint32 int size_t))
  #:use-module ((system foreign-library)
                #:select (load-foreign-library foreign-library-function))
  #:export (argon2-ok
            argon2-verify-mismatch
            argon2id-encoded-length
            argon2id-hash-encoded!
            argon2id-verify
            argon2-error-message))

(define libargon2
  (catch #t
    (lambda () (load-foreign-library "libargon2.so.1"))
    (lambda _
      (error "(plucky web password) needs libargon2 (Debian: apt-get install libargon2-1); not found:"
             "libargon2.so.1"))))

(define argon2id-type 2)                ; Argon2_id in argon2.h
(define argon2-ok 0)
(define argon2-verify-mismatch -35)

(define %hash-encoded
  (foreign-library-function libargon2 "argon2id_hash_encoded" #:return-type int
                            #:arg-types (list uint32 uint32 uint32 '* size_t '* size_t size_t
                                              '* size_t)))
(define %verify
  (foreign-library-function libargon2 "argon2id_verify" #:return-type int
                            #:arg-types (list '* '* size_t)))
(define %encoded-length
  (foreign-library-function libargon2 "argon2_encodedlen" #:return-type size_t
                            #:arg-types (list uint32 uint32 uint32 uint32 uint32 int)))
(define %error-message
  (foreign-library-function libargon2 "argon2_error_message" #:return-type '*
                            #:arg-types (list int)))

(define (pointer-or-null bv)
  ;; libargon2 refuses a null pointer with a non-zero length only, but an
  ;; empty bytevector's pointer is not to be trusted either way.
  (if (zero? (bytevector-length bv)) %null-pointer (bytevector->pointer bv)))

(define (argon2id-encoded-length iterations memory parallelism salt-bytes hash-bytes)
  "Return the bytes of the encoded string (its NUL included) of an
Argon2id hash of HASH-BYTES with these parameters and a salt of
SALT-BYTES."
  (%encoded-length iterations memory parallelism salt-bytes hash-bytes argon2id-type))

(define (argon2id-hash-encoded! iterations memory parallelism password salt hash-bytes encoded)
  "Write into the bytevector ENCODED the encoded Argon2id hash, of
HASH-BYTES, of the bytevector PASSWORD with the bytevector SALT, as a
NUL-terminated string.  Return libargon2's status: `argon2-ok' or an
error code (see `argon2-error-message')."
  (%hash-encoded iterations memory parallelism
                 (pointer-or-null password) (bytevector-length password)
                 (bytevector->pointer salt) (bytevector-length salt) hash-bytes
                 (bytevector->pointer encoded) (bytevector-length encoded)))

(define (argon2id-verify encoded password)
  "Return libargon2's status of verifying the bytevector PASSWORD against
the string ENCODED (in constant time): `argon2-ok' when it matches."
  (%verify (string->pointer encoded "UTF-8")
           (pointer-or-null password) (bytevector-length password)))

(define (argon2-error-message status)
  "Return libargon2's message for the status STATUS."
  (pointer->string (%error-message status)))

;;; (plucky sys argon2) ends here
