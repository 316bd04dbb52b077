;;; tests/http/hpack.scm --- (plucky http hpack)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;; The decoder against RFC 7541 Appendix C's requests and responses,
;;; against nghttp2's encoder over many blocks (its dynamic table, its
;;; Huffman coding), each block also cut short at every byte, and
;;; against bad blocks.  The encoder's blocks decoded by nghttp2's
;;; decoder.
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (rnrs bytevectors)
             (tests lib harness)
             (tests lib hpack-examples)
             (plucky sys nghttp2)
             ((plucky http http2) #:select (response-head-spans))
             (plucky http hpack))

(test-runner-current (plucky-test-runner))
(test-begin "http/hpack")

(define (decode decoder bv)
  ;; -> ((name . value) …) of strings, or #f
  (let ((fields '()))
    (and (decode-header-block! decoder bv 0 (bytevector-length bv)
                               (lambda (name name-length value value-length)
                                 (set! fields (cons (cons (utf8->string name)
                                                          (utf8->string value))
                                                    fields))))
         (reverse fields))))

(define (test-sequence name table-size blocks)
  ;; C.5 and C.6 assume a 256-byte table: their first block says so
  ;; first, "3fe1 01" (§6.3)
  (let ((decoder (make-header-decoder 4096)))
    (for-each
     (lambda (block first?)
       (let ((bytes (hex (string-append (if (and first? (< table-size 4096)) "3fe1 01" "")
                                        (cadr block)))))
         (test-equal (string-append name " " (car block) ": headers")
           (caddr block) (decode decoder bytes))
         (test-equal (string-append name " " (car block) ": table size")
           (cadddr block) (header-decoder-size decoder))))
     blocks (cons #t (map (const #f) (cdr blocks))))))

(test-group "RFC 7541 Appendix C"
  (test-sequence "C.3" 4096 c3)
  (test-sequence "C.4" 4096 c4)
  (test-sequence "C.5" 256 c5)
  (test-sequence "C.6" 256 c6))

(test-group "against nghttp2's encoder"
  (call-guarded
   (lambda ()
     ;; Blocks that index, evict (a 4096-byte table filled many times
     ;; over) and Huffman-code: each decoded as it was encoded.
     (let ((encoder (make-hpack-encoder 4096))
           (decoder (make-header-decoder 4096))
           (all-right? #t))
       (let lp ((i 0))
         (when (< i 300)
           (let* ((fields `((":method" . ,(if (even? i) "GET" "POST"))
                            (":path" . ,(format #f "/item/~a" (modulo (* i 7) 50)))
                            ("user-agent" . "plucky-test")
                            (,(format #f "x-field-~a" (modulo i 40))
                             . ,(make-string (modulo (* i 13) 300) (integer->char (+ 33 (modulo i 90)))))
                            ("cookie" . ,(format #f "session=~a" (* i i)))))
                  (block (hpack-encode encoder fields)))
             (unless (equal? fields (decode decoder block))
               (set! all-right? #f))
             (lp (+ i 1)))))
       (test-assert "300 blocks, each decoded back" all-right?)
       (test-assert "the table within its size" (<= (header-decoder-size decoder) 4096))
       (hpack-free! encoder)))))

(test-group "bad blocks"
  (define (bad? text)
    (not (decode (make-header-decoder 4096) (hex text))))
  (test-assert "an index past both tables" (bad? "c6"))
  (test-assert "index 0" (bad? "80"))
  (test-assert "a truncated string" (bad? "400a 6375"))
  (test-assert "a truncated integer" (bad? "7f"))
  (test-assert "an integer past 2^28" (bad? "7f ff ff ff ff 0f"))
  (test-assert "a table size update past the limit" (bad? "3fe1 3f 82"))
  (test-assert "a table size update after a field" (bad? "82 20"))
  (test-assert "Huffman padding of 8 bits" (bad? "0082 ff ff 01 61"))
  (test-assert "Huffman padding not all ones" (bad? "0081 00 01 61"))
  (test-assert "every cut of a good block is refused or shorter"
    (let ((block (hex "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf")))
      (every (lambda (n)
               (let ((cut (make-bytevector n)))
                 (bytevector-copy! block 0 cut 0 n)
                 (let ((fields (decode (make-header-decoder 4096) cut)))
                   (or (not fields) (< (length fields) 5)))))
             (iota (bytevector-length block))))))

(define (encoded code text size-update?)
  ;; -> the block `encode-response-head' makes of the HTTP/1 head TEXT
  (let ((head (string->utf8 text)))
    (call-with-values
        (lambda () (response-head-spans head 0 (bytevector-length head) (make-bytevector 0)))
      (lambda (spans count end)
        (let* ((out (make-bytevector (response-head-bound spans count)))
               (n (encode-response-head code head spans count out size-update?))
               (block (make-bytevector n)))
          (bytevector-copy! out 0 block 0 n)
          block)))))

(test-group "encode-response-head"
  (call-guarded
   (lambda ()
     (let ((decoder (make-hpack-decoder))
           (long (make-string 300 #\v)))
       (define (round-trip code text size-update?)
         (hpack-decode decoder (encoded code text size-update?)))
       (test-equal "a status of the static table, names it has and not"
         '((":status" . "200") ("content-type" . "text/plain") ("x-mine" . "1"))
         (round-trip 200 "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Mine: 1\r\n\r\n" #f))
       (test-equal "a status it has not"
         '((":status" . "418")) (round-trip 418 "HTTP/1.1 418 I'm a teapot\r\n\r\n" #f))
       (test-equal "an index past a prefix, a value past 127 bytes"
         `((":status" . "401") ("www-authenticate" . ,long))
         (round-trip 401 (string-append "HTTP/1.1 401 No\r\nWWW-Authenticate: " long "\r\n\r\n")
                     #f))
       (test-equal "a trailer block: no :status" '(("x-checksum" . "abc"))
         (round-trip #f "HTTP/1.1 200 OK\r\nx-checksum: abc\r\n\r\n" #f))
       (test-equal "a size update first, then the fields" '((":status" . "204"))
         (round-trip 204 "HTTP/1.1 204 No Content\r\n\r\n" #t))
       (test-equal "which empties the decoder's table" 0 (hpack-decoder-size decoder))
       (test-equal "its first byte" 32 (bytevector-u8-ref (encoded 204 "HTTP/1.1 204 No\r\n\r\n" #t) 0))
       (hpack-free! decoder)))))

(test-end "http/hpack")
