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
             (plucky sys nghttp2))

(test-runner-current (plucky-test-runner))
(test-begin "sys/nghttp2")

(define (hex text)
  ;; "8286 84" -> #vu8(#x82 #x86 #x84)
  (let ((digits (string-delete #\space text)))
    (u8-list->bytevector
     (map (lambda (i) (string->number (substring digits i (+ i 2)) 16))
          (iota (quotient (string-length digits) 2) 0 2)))))

(define request-1 '((":method" . "GET") (":scheme" . "http") (":path" . "/")
                    (":authority" . "www.example.com")))
(define request-2 (append request-1 '(("cache-control" . "no-cache"))))
(define request-3 '((":method" . "GET") (":scheme" . "https") (":path" . "/index.html")
                    (":authority" . "www.example.com") ("custom-key" . "custom-value")))

(define response-1 '((":status" . "302") ("cache-control" . "private")
                     ("date" . "Mon, 21 Oct 2013 20:13:21 GMT")
                     ("location" . "https://www.example.com")))
(define response-2 '((":status" . "307") ("cache-control" . "private")
                     ("date" . "Mon, 21 Oct 2013 20:13:21 GMT")
                     ("location" . "https://www.example.com")))
(define response-3 '((":status" . "200") ("cache-control" . "private")
                     ("date" . "Mon, 21 Oct 2013 20:13:22 GMT")
                     ("location" . "https://www.example.com")
                     ("content-encoding" . "gzip")
                     ("set-cookie" . "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1")))

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

(define c3
  `(("C.3.1" "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"
     ,request-1 57 ((":authority" . "www.example.com")))
    ("C.3.2" "8286 84be 5808 6e6f 2d63 6163 6865"
     ,request-2 110 (("cache-control" . "no-cache") (":authority" . "www.example.com")))
    ("C.3.3" "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65"
     ,request-3 164 (("custom-key" . "custom-value") ("cache-control" . "no-cache")
                     (":authority" . "www.example.com")))))

(define c4
  `(("C.4.1" "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff" ,request-1 57 #f)
    ("C.4.2" "8286 84be 5886 a8eb 1064 9cbf" ,request-2 110 #f)
    ("C.4.3" "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf"
     ,request-3 164 (("custom-key" . "custom-value") ("cache-control" . "no-cache")
                     (":authority" . "www.example.com")))))

(define c5
  `(("C.5.1" ,(string-append
               "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 "
               "3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 "
               "7777 2e65 7861 6d70 6c65 2e63 6f6d")
     ,response-1 222 #f)
    ("C.5.2" "4803 3330 37c1 c0bf" ,response-2 222
     ((":status" . "307") ("location" . "https://www.example.com")
      ("date" . "Mon, 21 Oct 2013 20:13:21 GMT") ("cache-control" . "private")))
    ("C.5.3" ,(string-append
               "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 "
               "3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a "
               "584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 "
               "3630 303b 2076 6572 7369 6f6e 3d31")
     ,response-3 215
     (("set-cookie" . "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1")
      ("content-encoding" . "gzip") ("date" . "Mon, 21 Oct 2013 20:13:22 GMT")))))

(define c6
  `(("C.6.1" ,(string-append
               "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 "
               "66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3")
     ,response-1 222 #f)
    ("C.6.2" "4883 640e ffc1 c0bf" ,response-2 222 #f)
    ("C.6.3" ,(string-append
               "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a "
               "839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 "
               "72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07")
     ,response-3 215 #f)))

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
