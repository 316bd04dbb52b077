;;; tests/sys/nghttp2.scm --- (plucky sys nghttp2): HPACK against RFC 7541

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The HPACK coder HTTP/2 serving relies on (nghttp2's, reached through
;;; the FFI) against every example of RFC 7541 Appendix C: C.2's single
;;; representations, C.3 and C.5 without Huffman coding, C.4 and C.6
;;; with it, each a sequence of header blocks through one decoder (the
;;; dynamic table carried from block to block, its size checked after
;;; each, and its entries where the RFC lists them).  Decoding is exact
;;; for all; encoding reproduces the RFC's bytes where the RFC's encoder
;;; made the choices nghttp2 makes (C.4: indexing, Huffman when shorter),
;;; and elsewhere round-trips.  The examples are also fed split at every
;;; byte boundary to a decoder fed whole blocks: a header block arrives
;;; whole to HPACK (HTTP/2 reassembles CONTINUATIONs first).
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (srfi srfi-1)
             (rnrs bytevectors)
             (tests lib harness)
             (tests lib hpack-examples)
             (plucky sys nghttp2))

(test-runner-current (plucky-test-runner))
(test-begin "sys/nghttp2")

;; (name hex-block headers table-size table-or-#f) per block of a sequence
(define (test-sequence name table-size blocks)
  ;; A decoder whose table was made smaller than 4096 expects the
  ;; encoder to say so first (RFC 7541 §4.2): C.5 and C.6 assume a
  ;; 256-byte table, so their first block gets that update in front,
  ;; "3fe1 01" (§6.3: 256 = 31 + 225).
  (let ((decoder (make-hpack-decoder table-size)))
    (for-each
     (lambda (block first?)
       (let ((label (car block))
             (bytes (hex (string-append (if (and first? (< table-size 4096)) "3fe1 01" "")
                                        (cadr block)))))
         (test-equal (string-append name " " label ": headers")
           (caddr block) (hpack-decode decoder bytes))
         (test-equal (string-append name " " label ": table size")
           (cadddr block) (hpack-decoder-size decoder))
         (when (fifth block)
           (test-equal (string-append name " " label ": table")
             (fifth block) (hpack-decoder-table decoder)))))
     blocks (cons #t (map (const #f) (cdr blocks))))
    (hpack-free! decoder)))

(test-group "C.2 header field representations"
  (call-guarded
   (lambda ()
     (test-sequence "C.2.1" 4096
       `(("literal with indexing"
          "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"
          (("custom-key" . "custom-header")) 55
          (("custom-key" . "custom-header")))))
     (test-sequence "C.2.2" 4096
       `(("literal without indexing" "040c 2f73 616d 706c 652f 7061 7468"
          ((":path" . "/sample/path")) 0 ())))
     (test-sequence "C.2.3" 4096
       `(("never indexed" "1008 7061 7373 776f 7264 0673 6563 7265 74"
          (("password" . "secret")) 0 ())))
     (test-sequence "C.2.4" 4096
       `(("indexed" "82" ((":method" . "GET")) 0 ()))))))

(test-group "C.3 requests without Huffman coding"
  (call-guarded (lambda () (test-sequence "C.3" 4096 c3))))
(test-group "C.4 requests with Huffman coding"
  (call-guarded (lambda () (test-sequence "C.4" 4096 c4))))
(test-group "C.5 responses without Huffman coding"
  (call-guarded (lambda () (test-sequence "C.5" 256 c5))))
(test-group "C.6 responses with Huffman coding"
  (call-guarded (lambda () (test-sequence "C.6" 256 c6))))

(test-group "encoding"
  (call-guarded
   (lambda ()
     ;; C.4: the RFC's encoder indexes what nghttp2 indexes, and
     ;; Huffman-codes every string (each is shorter so).
     (let ((encoder (make-hpack-encoder 4096)))
       (for-each (lambda (example)
                   (test-equal (string-append (car example) " encoded")
                     (hex (cadr example))
                     (hpack-encode encoder (caddr example))))
                 c4)
       (hpack-free! encoder))
     ;; The responses: whatever the encoder's choices, a decoder with the
     ;; same table size gets the headers back, block after block.
     (let ((encoder (make-hpack-encoder 256))
           (decoder (make-hpack-decoder 256)))
       (hpack-decode decoder (hex "3fe1 01 82"))
       (for-each (lambda (example)
                   (test-equal (string-append (car example) " round trip")
                     (caddr example)
                     (hpack-decode decoder (hpack-encode encoder (caddr example)))))
                 c6)
       (test-assert "the encoder's table stays within 256 bytes"
         (<= (hpack-decoder-size decoder) 256))
       (hpack-free! encoder)
       (hpack-free! decoder)))))

(test-group "bad blocks"
  (call-guarded
   (lambda ()
     (let ((decoder (make-hpack-decoder)))
       ;; index 70: past the static table, the dynamic one empty
       (test-error "an index past both tables" #t (hpack-decode decoder (hex "c6")))
       (hpack-free! decoder))
     (let ((decoder (make-hpack-decoder)))
       ;; a literal whose length says 10 with 2 bytes after it
       (test-error "a truncated string" #t (hpack-decode decoder (hex "400a 6375")))
       (hpack-free! decoder))
     (let ((decoder (make-hpack-decoder)))
       ;; a dynamic table size update above the 4096 the decoder allows
       (test-error "a table size update past the limit" #t
         (hpack-decode decoder (hex "3fe1 3f 82")))
       (hpack-free! decoder)))))

(test-end "sys/nghttp2")
