;;; (plucky sys gcrypt) --- libgcrypt's random bytes and hashes, by address

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Two functions of the libgcrypt that guile-gcrypt loads (and that
;;; (gcrypt mac), loaded by (plucky web crypto), initialises), called on
;;; buffers: a buffer is a bytevector's handle, `gcry-buffer', which
;;; keeps the bytevector alive while it is in use; the caller may keep
;;; a thread's handles rather than make one per call (each is a pointer
;;; object, which Guile records in a global weak table).
;;;
;;; Code:

(define-module (plucky sys gcrypt)
  ;; %libgcrypt: the file name guile-gcrypt was built against
  #:use-module ((gcrypt package-config) #:select (%libgcrypt))
  #:use-module ((system foreign) #:select (void int size_t bytevector->pointer))
  #:use-module ((system foreign-library) #:select (load-foreign-library
                                                    foreign-library-function))
  #:export (gcry-strong-random
            gcry-md-sha256
            gcry-buffer
            gcry-randomize!
            gcry-hash-buffer!))

(define gcry-strong-random 1)           ; GCRY_STRONG_RANDOM
(define gcry-md-sha256 8)               ; GCRY_MD_SHA256

(define libgcrypt (load-foreign-library %libgcrypt))

(define %randomize
  (foreign-library-function libgcrypt "gcry_randomize" #:return-type void
                            #:arg-types (list '* size_t int)))

(define %hash-buffer
  (foreign-library-function libgcrypt "gcry_md_hash_buffer" #:return-type void
                            #:arg-types (list int '* '* size_t)))

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

;;; (plucky sys gcrypt) ends here
