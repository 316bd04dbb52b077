;;; tests/web/compress.scm --- (plucky web compress), (plucky sys zlib), (plucky sys zstd)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The encoders against gzip(1) and zstd(1); the middleware on a real
;;; server: negotiation, what is left alone, and a streamed event that
;;; must arrive, decodable, before the handler writes the next.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (tests lib harness)
             (tests lib server)
             (rnrs bytevectors)
             ((rnrs io ports) #:select (put-bytevector get-bytevector-all))
             (ice-9 popen)
             ((ice-9 iconv) #:select (bytevector->string))
             (web request)
             (web response)
             (web uri)
             (plucky sys zlib)
             (plucky sys zstd)
             (plucky web compress))

(test-begin "web/compress")

(define scratch (mkdtemp (string-copy "/tmp/plucky-compress-XXXXXX")))

(define (decode program bv)
  ;; -> the bytes PROGRAM (gzip or zstd) decodes from BV, even if BV
  ;; stops mid-stream (what a flush has made decodable)
  (let ((file (string-append scratch "/in")))
    (call-with-output-file file (lambda (port) (put-bytevector port bv)) #:binary #t)
    (let* ((pipe (open-pipe* OPEN_READ "sh" "-c"
                             (string-append program " -dc < " file " 2>/dev/null")))
           (out (get-bytevector-all pipe)))
      (close-pipe pipe)
      (if (eof-object? out) #vu8() out))))

(define text
  (string-concatenate
   (map (lambda (i) (format #f "<p>paragraph ~a of a page that repeats itself</p>\n" i))
        (iota 400))))

(define (concat bvs)
  (let ((out (make-bytevector (apply + (map bytevector-length bvs)))))
    (fold (lambda (bv at) (bytevector-copy! bv 0 out at (bytevector-length bv))
                  (+ at (bytevector-length bv)))
          0 bvs)
    out))

(test-group "deflate!"
  (let* ((bv (string->utf8 text))
         (d (make-deflater #:level 6))
         (first (concat (append (deflate! d bv 0 5000 'none) (deflate! d bv 5000 6000 'flush))))
         (rest (concat (deflate! d bv 6000 (bytevector-length bv) 'finish))))
    (deflater-end! d)
    (test-equal "a flush makes all input so far decodable"
      (substring text 0 6000) (utf8->string (decode "gzip" first)))
    (test-equal "the whole stream" text (utf8->string (decode "gzip" (concat (list first rest)))))
    (test-assert "smaller" (< (+ (bytevector-length first) (bytevector-length rest))
                              (quotient (bytevector-length bv) 4)))))

;; LENGTH bytes of markup around numbers: compressible, never one
;; repeated block
(define (text-of length)
  (let ((out (make-bytevector length)))
    (let lp ((at 0) (x 7))
      (if (>= at length)
          out
          (let* ((x (modulo (+ (* x 1103515245) 12345) 2147483648))
                 (word (string->utf8
                        (string-append "<li>" (number->string (quotient x 4194304) 16)
                                       "</li>\n")))
                 (n (min (bytevector-length word) (- length at))))
            (bytevector-copy! word 0 out at n)
            (lp (+ at n) x))))))

(define (gunzip bv) (decode "gzip" bv))

(test-group "deflate-bytevector"
  (let ((bv (string->utf8 text))
        (d (make-deflater #:level 6)))
    (test-equal "one stream" bv (gunzip (deflate-bytevector d bv)))
    (test-equal "again, with the kept buffer" bv (gunzip (deflate-bytevector d bv)))
    (test-equal "a slice" (substring text 100 5000)
      (utf8->string (gunzip (deflate-bytevector d bv 100 5000))))
    (deflater-reset! d)
    (deflate! d bv 0 3000 'none)
    (test-equal "after a stream left unfinished: that stream dropped" bv
      (gunzip (deflate-bytevector d bv)))
    (let ((big (text-of (* 3 1024 1024))))
      (test-equal "larger than the buffer it keeps" big (gunzip (deflate-bytevector d big))))
    (test-equal "empty" #vu8() (gunzip (deflate-bytevector d #vu8())))
    (test-equal "the same bytes as deflate!"
      (concat (deflate! (make-deflater #:level 6) bv 0 (bytevector-length bv) 'finish))
      (deflate-bytevector d bv))
    (deflater-end! d)))

(test-group "gzip-bytevector"
  (let ((bv (string->utf8 text)))
    (for-each
     (lambda (level)
       (let ((raw (make-deflater #:level level #:format 'raw)))
         (test-equal (format #f "level ~a: zlib's gzip bytes" level)
           (concat (deflate! (make-deflater #:level level) bv 0 (bytevector-length bv) 'finish))
           (gzip-bytevector raw bv))
         (deflater-end! raw)))
     '(1 6 9))
    (let ((raw (make-deflater #:level 6 #:format 'raw #:window-bits 10 #:mem-level 3)))
      (test-equal "a slice, a small window" (substring text 10 400)
        (utf8->string (gunzip (gzip-bytevector raw bv 10 400))))
      (test-equal "empty" #vu8() (gunzip (gzip-bytevector raw #vu8())))
      (deflater-end! raw))
    (let ((gzip (make-deflater #:level 6)))
      (test-error "a gzip deflater: refused" #t (gzip-bytevector gzip bv))
      (deflater-end! gzip))))

(test-group "zstd-compress!"
  (let* ((bv (string->utf8 text))
         (z (make-zstd-encoder #:level 3))
         (first (concat (append (zstd-compress! z bv 0 5000 'none)
                                (zstd-compress! z bv 5000 6000 'flush))))
         (rest (concat (zstd-compress! z bv 6000 (bytevector-length bv) 'finish))))
    (zstd-encoder-end! z)
    (test-equal "a flush makes all input so far decodable"
      (substring text 0 6000) (utf8->string (decode "zstd" first)))
    (test-equal "the whole frame" text (utf8->string (decode "zstd" (concat (list first rest)))))))

(test-group "compress-bytevector"
  (let ((bv (string->utf8 text)))
    (test-equal "gzip, twice with the kept encoder" (list text text)
      (map (lambda (i) (utf8->string (decode "gzip" (compress-bytevector bv 'gzip 6))))
           '(1 2)))
    (test-equal "zstd" text (utf8->string (decode "zstd" (compress-bytevector bv 'zstd 3))))))

(test-group "compress-bytevector: the window fitted to the body"
  ;; nginx's sizes: the window and hash halved while the body fits in
  ;; half the window less 262 bytes; around each step and past the
  ;; largest window
  (for-each
   (lambda (length)
     (let ((bv (text-of length)))
       (test-equal (format #f "~a bytes" length) bv (gunzip (compress-bytevector bv 'gzip 6)))))
   '(1 249 250 251 8000 8001 16121 16122 16123 32767 70000 200000))
  (let ((bv (text-of 20000)))
    (test-equal "a body past half the largest window: zlib's defaults"
      (concat (deflate! (make-deflater #:level 6) bv 0 (bytevector-length bv) 'finish))
      (compress-bytevector bv 'gzip 6)))
  (let ((small (text-of 3000)))
    (test-assert "a small body: a smaller window, as good or nearly"
      (<= (bytevector-length (compress-bytevector small 'gzip 6))
          (+ 16 (bytevector-length
                 (concat (deflate! (make-deflater #:level 6) small 0 3000 'finish))))))))

;;;
;;; The cache of compressed bodies, through the handler alone
;;;

(define (page seed)
  ;; -> about 8 KB of text that compresses to a few KB, different per SEED
  (let lp ((i 0) (x seed) (out '()))
    (if (= i 1000)
        (string-concatenate out)
        (let ((x (modulo (+ (* x 1103515245) 12345) 2147483648)))
          (lp (+ i 1) x (cons (number->string (quotient x 65536) 16) (cons " " out)))))))

(define (request-of path . headers)
  (read-request
   (open-input-string
    (string-append "GET " path " HTTP/1.1\r\nHost: example.org\r\n"
                   (string-concatenate (map (lambda (h) (string-append h "\r\n")) headers))
                   "\r\n"))))

(define (cache-app pages)
  ;; a handler answering, for a path, what the hash table PAGES holds
  ;; under it now: (headers . body)
  (lambda (request body)
    (let ((page (hash-ref pages (uri-path (request-uri request)))))
      (values (car page) (cdr page)))))

(define (same-length-change text)
  ;; TEXT with its first character changed: the same length, other bytes
  (string-append (if (char=? (string-ref text 0) #\x) "y" "x") (substring text 1)))

(define (served handler path . headers)
  ;; -> the text HANDLER's answer to a gzip request for PATH decodes to
  (let ((response body (handler (apply request-of path "Accept-Encoding: gzip" headers) #f)))
    (utf8->string (decode "gzip" (if (bytevector? body) body (string->utf8 body))))))

(define html '(content-type . (text/html)))

(define (answered handler . request-headers)
  ;; -> (response body) of HANDLER's answer to a request for /
  (call-with-values
      (lambda () (handler (apply request-of "/" request-headers) #f))
    list))

(test-group "compress-middleware: the same response again"
  (let* ((headers (list html '(x-page . "1")))
         (body (string->utf8 (page 2)))
         (bodies (list body (utf8->string body)))
         (handler ((compress-middleware)
                   (lambda (request _)
                     (let ((body (car bodies)))
                       (values headers body)))))
         (first (answered handler "Accept-Encoding: gzip"))
         (second (answered handler "Accept-Encoding: gzip")))
    (test-assert "the same compressed response" (eq? (car first) (car second)))
    (test-equal "its headers" '((content-type text/html) (x-page . "1")
                                (content-encoding gzip) (vary accept-encoding))
      (car second))
    (test-equal "its body" body (gunzip (cadr second)))
    (let ((zstd (answered handler "Accept-Encoding: zstd")))
      (test-equal "zstd: its own headers" '(zstd) (assq-ref (car zstd) 'content-encoding))
      (test-equal "gzip after zstd: gzip" '(gzip)
        (assq-ref (car (answered handler "Accept-Encoding: gzip")) 'content-encoding)))
    (set! bodies (cdr bodies))
    (let ((text (answered handler "Accept-Encoding: gzip")))
      (test-equal "the same headers with a string body: the charset added"
        '(text/html (charset . "utf-8")) (assq-ref (car text) 'content-type))
      (test-equal "its body" body (gunzip (cadr text))))
    (set! headers (list html '(x-page . "2")))
    (test-equal "other headers: their compressed response" "2"
      (assq-ref (car (answered handler "Accept-Encoding: gzip")) 'x-page))))

(test-group "compress-middleware: the handler's state"
  (let* ((handler ((compress-middleware)
                   (lambda (request body . state)
                     (apply values (list html) (page 3)
                            (if (null? state) '(1) (list (+ 1 (car state))))))))
         (two (call-with-values
                  (lambda () (handler (request-of "/" "Accept-Encoding: gzip") #f))
                list))
         (three (call-with-values
                    (lambda () (handler (request-of "/" "Accept-Encoding: gzip") #f 41))
                  list)))
    (test-equal "no state in: the state out" 1 (caddr two))
    (test-equal "compressed with it" (page 3) (utf8->string (gunzip (cadr two))))
    (test-equal "state in: passed on and back" 42 (caddr three))
    (test-equal "compressed with it too" (page 3) (utf8->string (gunzip (cadr three))))))

(test-group "compress-middleware: the cache"
  (let* ((pages (make-hash-table))
         (handler ((compress-middleware) (cache-app pages)))
         (a (page 1))
         (set (lambda (path headers body) (hash-set! pages path (cons headers body)))))
    (set "/a" (list html '(etag . ("a1" . #t))) a)
    (test-equal "a strong ETag: compressed" a (served handler "/a"))
    (set "/a" (list html '(etag . ("a1" . #t))) (same-length-change a))
    (test-equal "the same tag, the same length: the kept bytes" a (served handler "/a"))
    (let* ((response body (handler (request-of "/a" "Accept-Encoding: gzip") #f))
           (headers (if (response? response) (response-headers response) response)))
      (test-equal "a hit's headers: gzip" '(gzip) (assq-ref headers 'content-encoding))
      (test-equal "a hit's headers: the weak ETag" '("a1" . #f) (assq-ref headers 'etag)))
    (set "/a" (list html '(etag . ("a1" . #t))) (string-append a "!"))
    (test-equal "another length: compressed again" (string-append a "!") (served handler "/a"))
    (set "/b" (list html '(etag . ("a1" . #t))) a)
    (test-equal "another path, the same tag: compressed" a (served handler "/b"))
    (let ((changed (same-length-change a)))
      (define (not-kept name headers . request-headers)
        (set "/c" headers a)
        (apply served handler "/c" request-headers)
        (set "/c" headers changed)
        (test-equal name changed (apply served handler "/c" request-headers)))
      (not-kept "a weak ETag: not kept" (list html '(etag . ("c1" . #f))))
      (not-kept "no ETag: not kept" (list html))
      (not-kept "no-store: not kept" (list html '(etag . ("c2" . #t)) '(cache-control . (no-store))))
      (not-kept "private: not kept" (list html '(etag . ("c3" . #t)) '(cache-control . (private))))
      (not-kept "Set-Cookie: not kept" (list html '(etag . ("c4" . #t)) '(set-cookie . "a=b")))
      (not-kept "Vary: *: not kept" (list html '(etag . ("c5" . #t)) '(vary . *)))
      (not-kept "Authorization: not kept" (list html '(etag . ("c6" . #t)))
                "Authorization: Basic YTpi")
      (set "/d" (list html '(etag . ("d1" . #t)) '(cache-control . (public))) a)
      (served handler "/d" "Authorization: Basic YTpi")
      (set "/d" (list html '(etag . ("d1" . #t)) '(cache-control . (public))) changed)
      (test-equal "Authorization, public: kept" a (served handler "/d" "Authorization: Basic YTpi")))
    (let ((response body (handler (request-of "/a" "Accept-Encoding: zstd") #f)))
      (test-equal "another coding: its own bytes" (string-append a "!")
        (utf8->string (decode "zstd" body)))))
  (let* ((runs 0)
         (handler ((compress-middleware)
                   (lambda (request body)
                     (values (list html '(etag . ("p1" . #t)))
                             (lambda (port) (set! runs (+ runs 1)) (display (page 2) port)))))))
    (served handler "/p")
    (test-equal "a procedure body with a strong ETag: kept, not run again"
      (list (page 2) 1) (list (served handler "/p") runs)))
  (let* ((pages (make-hash-table))
         (a (page 3))
         (size (bytevector-length (compress-bytevector (string->utf8 a) 'gzip 6)))
         (set (lambda (path body) (hash-set! pages path (cons (list html '(etag . ("e" . #t))) body)))))
    (define (kept? entry-size)
      (let ((handler ((compress-middleware #:cache-entry-size entry-size) (cache-app pages))))
        (set "/e" a)
        (served handler "/e")
        (set "/e" (same-length-change a))
        (equal? a (served handler "/e"))))
    (test-equal "#:cache-entry-size: an entry of that size kept, one byte more not"
      '(#t #f) (list (kept? size) (kept? (- size 1))))
    (let ((handler ((compress-middleware #:cache-size 0) (cache-app pages))))
      (set "/e" a)
      (served handler "/e")
      (set "/e" (same-length-change a))
      (test-equal "#:cache-size 0: nothing kept" (same-length-change a) (served handler "/e"))))
  (let* ((pages (make-hash-table))
         (texts (map page '(4 5 6)))
         (sizes (map (lambda (t) (bytevector-length (compress-bytevector (string->utf8 t) 'gzip 6)))
                     texts))
         ;; room for two of the three pages whatever an entry's overhead
         ;; below half a page, not for three
         (limit (quotient (* 5 (apply max sizes)) 2))
         (handler ((compress-middleware #:cache-size limit) (cache-app pages)))
         (set (lambda (path body) (hash-set! pages path (cons (list html '(etag . ("t" . #t))) body)))))
    (for-each set '("/x" "/y" "/z") texts)
    (served handler "/x")
    (served handler "/y")
    (served handler "/x")
    (served handler "/z")               ; /y, the least recently used, goes
    (for-each (lambda (path text) (set path (same-length-change text)))
              '("/x" "/y") texts)
    (test-assert "pages of a few KB" (> (apply min sizes) 2048))
    (test-equal "#:cache-size: the least recently used page goes, the others stay"
      (list (car texts) (same-length-change (cadr texts)) (caddr texts))
      (map (lambda (path) (served handler path)) '("/x" "/y" "/z"))))
  (test-error "#:cache-size: a count of bytes" #t (compress-middleware #:cache-size -1))
  (test-error "#:cache-entry-size: a count of bytes" #t
              (compress-middleware #:cache-entry-size 'big)))

;;;
;;; The middleware on a server
;;;

(define flag (string-append scratch "/go-on"))

(define (app request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path "/page")
      (values '((content-type . (text/html)) (etag . ("v1" . #t))) text))
     ((string=? path "/small")
      (values '((content-type . (text/html))) "<p>small</p>"))
     ((string=? path "/png")
      (values '((content-type . (image/png))) (make-bytevector 5000 0)))
     ((string=? path "/partial")
      (values (build-response #:code 206 #:headers
                              '((content-type . (text/html))
                                (content-range . (bytes (0 . 4999) 10000))))
              (make-bytevector 5000 65)))
     ((string=? path "/encoded")
      (values '((content-type . (text/html)) (content-encoding . (br))) text))
     ((string=? path "/no-transform")
      (values '((content-type . (text/html)) (cache-control . (no-transform))) text))
     ((string=? path "/procedure")
      (values '((content-type . (text/plain)))
              (lambda (port) (display text port))))
     ((string=? path "/events")
      (values '((content-type . (text/event-stream)))
              (lambda (port)
                (display "data: first\n\n" port)
                (force-output port)
                ;; The test creates FLAG once the first event arrived.
                (let wait ((i 0))
                  (unless (or (file-exists? flag) (> i 1000))
                    (usleep 10000)
                    (wait (+ i 1))))
                (display "data: second\n\n" port))))
     (else (values '((content-type . (text/plain))) "?")))))

(define server (start-server ((compress-middleware) app)))
(define port (server-port server))

(define* (ask path #:key (method "GET") (headers '()))
  (with-client port
    (lambda (client)
      (client-send! client (request-text path #:method method #:headers headers))
      (client-read-response client #:head? (string=? method "HEAD")))))

(define (header response name) (assq-ref (response-headers response) name))

(define (coding-of path accept)
  (let ((response body (ask path #:headers (list (string-append "Accept-Encoding: " accept)))))
    (header response 'content-encoding)))

(test-group "compress-middleware: negotiation"
  (let ((response body (ask "/page" #:headers '("Accept-Encoding: gzip"))))
    (test-equal "gzip" '(gzip) (header response 'content-encoding))
    (test-equal "Vary" '(accept-encoding) (header response 'vary))
    (test-equal "its bytes decode to the page" text (utf8->string (decode "gzip" body)))
    (test-equal "a weak ETag" '("v1" . #f) (header response 'etag))
    (test-equal "its Content-Length counts the compressed bytes"
      (bytevector-length body) (response-content-length response))
    (test-equal "the charset kept" '(text/html (charset . "utf-8"))
      (header response 'content-type)))
  (let ((response body (ask "/page" #:headers '("Accept-Encoding: zstd"))))
    (test-equal "zstd decodes" text (utf8->string (decode "zstd" body))))
  (test-equal "both: zstd" '(zstd) (coding-of "/page" "gzip, zstd"))
  (test-equal "q-values: gzip" '(gzip) (coding-of "/page" "zstd;q=0.1, gzip"))
  (test-equal "*: zstd" '(zstd) (coding-of "/page" "*"))
  (test-equal "identity;q=0: a coding" '(gzip) (coding-of "/page" "identity;q=0, gzip"))
  (test-equal "gzip;q=0: none" #f (coding-of "/page" "gzip;q=0"))
  (test-equal "br: none" #f (coding-of "/page" "br"))
  (let ((response body (ask "/page")))
    (test-assert "no Accept-Encoding: the page" (equal? text (utf8->string body)))
    (test-equal "with Vary" '(accept-encoding) (header response 'vary)))
  (let ((response body (ask "/procedure" #:headers '("Accept-Encoding: gzip"))))
    (test-equal "a procedure body" text (utf8->string (decode "gzip" body))))
  (let ((response body (ask "/page" #:method "HEAD" #:headers '("Accept-Encoding: gzip"))))
    (test-equal "HEAD: the same headers" '(gzip) (header response 'content-encoding))))

(test-group "compress-middleware: left alone"
  (test-equal "small" #f (coding-of "/small" "gzip"))
  (test-equal "an image" #f (coding-of "/png" "gzip"))
  (test-equal "a 206" #f (coding-of "/partial" "gzip"))
  (test-equal "encoded already" '(br) (coding-of "/encoded" "gzip"))
  (test-equal "no-transform" #f (coding-of "/no-transform" "gzip")))

(define (chunks-data bv)
  ;; -> the data of the complete chunks at the start of BV (chunked body)
  (let lp ((at 0) (out '()))
    (let* ((text (bytevector->string bv "ISO-8859-1"))
           (line-end (string-contains text "\r\n" at)))
      (if (not line-end)
          (concat (reverse out))
          (let ((size (string->number (substring text at line-end) 16)))
            (if (or (not size) (zero? size)
                    (> (+ line-end 2 size) (bytevector-length bv)))
                (concat (reverse out))
                (let ((data (make-bytevector size)))
                  (bytevector-copy! bv (+ line-end 2) data 0 size)
                  (lp (+ line-end 2 size 2) (cons data out)))))))))

(test-group "compress-middleware: a streamed event arrives when flushed"
  (for-each
   (lambda (coding)
     (when (file-exists? flag) (delete-file flag))
     (with-client port
       (lambda (client)
         (client-send! client (request-text "/events" #:headers
                                            (list (string-append "Accept-Encoding: " coding))))
         (let* ((deadline (+ (now-seconds) 10))
                (first (let lp ()
                         (let* ((pending ((@@ (tests lib server) client-pending) client))
                                (text (bytevector->string pending "ISO-8859-1"))
                                (head-end (string-contains text "\r\n\r\n"))
                                (body (and head-end
                                           (let ((bv (make-bytevector (- (bytevector-length pending)
                                                                         head-end 4))))
                                             (bytevector-copy! pending (+ head-end 4) bv 0
                                                               (bytevector-length bv))
                                             bv)))
                                (decoded (and body (utf8->string
                                                    (decode coding (chunks-data body))))))
                           (cond
                            ((and decoded (string-contains decoded "data: first")) decoded)
                            ((> (now-seconds) deadline) #f)
                            (else
                             ((@@ (tests lib server) receive-some!) client (+ (now-seconds) 1))
                             (lp)))))))
           (test-equal (string-append coding ": the first event, before the second is written")
             "data: first\n\n" first)
           (close-port (open-output-file flag))
           (let ((bytes closed? (client-read-until-close client #:timeout 2)))
             #t))))
       (test-assert (string-append coding ": then the rest") #t))
   '("gzip" "zstd")))

(stop-server server)
(system* "rm" "-rf" scratch)

(test-end "web/compress")
