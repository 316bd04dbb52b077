;;; (plucky sys gcrypt) --- libgcrypt's random bytes and hashes, by address

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Three functions of the libgcrypt that guile-gcrypt loads: random
;;; bytes and a digest, called on buffers (a buffer is a bytevector's
;;; handle, `gcry-buffer', which keeps the bytevector alive while it is
;;; in use; the caller may keep a thread's handles rather than make one
;;; per call: each is a pointer object, which Guile records in a global
;;; weak table), and an HMAC.  Of guile-gcrypt only the file name of its
;;; libgcrypt is used: its (gcrypt mac) loads (gcrypt base64) and, with
;;; it, R6RS modules that hold some 500 KB every collection marks (the
;;; live heap libgcrypt's users show in bench/blog's server log).  So
;;; this module initialises libgcrypt itself, as guile-gcrypt's modules
;;; do when they load; libgcrypt allows it more than once.
;;;
;;; Code:

(define-module (plucky sys gcrypt)
  ;; %libgcrypt: the file name guile-gcrypt was built against
  #:use-module ((gcrypt package-config) #:select (%libgcrypt))
  #:use-module ((rnrs bytevectors) #:select (bytevector-length))
  #:use-module ((system foreign) #:select (void int unsigned-int size_t
                                           bytevector->pointer make-c-struct
                                           %null-pointer))
  #:use-module ((system foreign-library) #:select (load-foreign-library
                                                    foreign-library-function))
  #:export (gcry-strong-random
            gcry-md-sha256
            gcry-buffer
            gcry-randomize!
            gcry-hash-buffer!
            gcry-hmac!))

(define gcry-strong-random 1)           ; GCRY_STRONG_RANDOM
(define gcry-md-sha256 8)               ; GCRY_MD_SHA256

(define libgcrypt (load-foreign-library %libgcrypt))

;; libgcrypt's manual: called before any other function.
((foreign-library-function libgcrypt "gcry_check_version" #:return-type '*
                           #:arg-types '(*))
 %null-pointer)

(define %randomize
  (foreign-library-function libgcrypt "gcry_randomize" #:return-type void
                            #:arg-types (list '* size_t int)))

(define %hash-buffer
  (foreign-library-function libgcrypt "gcry_md_hash_buffer" #:return-type void
                            #:arg-types (list int '* '* size_t)))

(define %hash-buffers
  (foreign-library-function libgcrypt "gcry_md_hash_buffers" #:return-type unsigned-int
                            #:arg-types (list int unsigned-int '* '* int)))

(define gcry-md-flag-hmac 2)            ; GCRY_MD_FLAG_HMAC

(define (gcry-buffer bv)
  "Return the handle of the bytevector BV for the procedures below."
  (bytevector->pointer bv))

(define (gcry-randomize! buffer count level)
  "Fill the first COUNT bytes of BUFFER (a `gcry-buffer') with random
bytes of LEVEL (`gcry-strong-random').  Return nothing useful."
  (%randomize buffer count level))

(define (gcry-hash-buffer! algorithm digest buffer count)
  "Write the digest by ALGORITHM (`gcry-md-sha256') of the first COUNT
bytes of BUFFER to DIGEST (both `gcry-buffer's).  Return nothing useful."
  (%hash-buffer algorithm digest buffer count))

(define (gcry-hmac! algorithm digest key data)
  "Write the HMAC by ALGORITHM (`gcry-md-sha256') of the bytevector DATA
under the bytevector KEY to the bytevector DIGEST, as long as the
algorithm's digest.  Return nothing useful; raise an error if libgcrypt
refuses."
  ;; Two gcry_buffer_t (size, off, len, data), the key first: with
  ;; GCRY_MD_FLAG_HMAC, gcry_md_hash_buffers takes the first as the key.
  (let* ((iov (make-c-struct (list size_t size_t size_t '* size_t size_t size_t '*)
                             (list (bytevector-length key) 0 (bytevector-length key)
                                   (bytevector->pointer key)
                                   (bytevector-length data) 0 (bytevector-length data)
                                   (bytevector->pointer data))))
         (error (%hash-buffers algorithm gcry-md-flag-hmac (bytevector->pointer digest)
                               iov 2)))
    (unless (zero? error)
      (scm-error 'misc-error "gcry-hmac!" "gcry_md_hash_buffers failed: error ~a"
                 (list error) #f))))

;;; (plucky sys gcrypt) ends here
