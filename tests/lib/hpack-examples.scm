;;; (tests lib hpack-examples) --- RFC 7541 Appendix C, as data

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;; The header blocks of RFC 7541's examples, for the tests of each HPACK
;;; decoder (nghttp2's, tests/sys/nghttp2.scm; plucky's,
;;; tests/http/hpack.scm): (label hex-block headers table-size
;;; table-or-#f) per block of a sequence, the table newest entry first.
;;; Code:

(define-module (tests lib hpack-examples)
  #:use-module (srfi srfi-1)
  #:use-module (rnrs bytevectors)
  #:export (hex request-1 request-2 request-3 response-1 response-2 response-3
            c3 c4 c5 c6))

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

;;; (tests lib hpack-examples) ends here
