;;; tests/web/static.scm --- (plucky web static): files, conditions, ranges, safety

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A directory tree in /tmp, served by a real server on an ephemeral
;;; port of 127.0.0.1 and asked with a raw socket: each conditional and
;;; range rule on GET and on HEAD, precompressed siblings, directories,
;;; traversal tricks, the open-file cache, and files that change while
;;; they are sent.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (tests lib harness)
             (tests lib server)
             (rnrs bytevectors)
             ((rnrs io ports) #:select (put-bytevector get-bytevector-some))
             (ice-9 popen)
             ((ice-9 iconv) #:select (bytevector->string))
             (ice-9 rdelim)
             (web request)
             (web response)
             (web uri)
             (plucky sys libc)
             (plucky server transport)
             (plucky server loop)
             (plucky server socket)
             (plucky web static))

(test-begin "web/static")

;;;
;;; The tree
;;;

(define base (mkdtemp (string-copy "/tmp/plucky-static-XXXXXX")))
(define root (string-append base "/root"))
(define secret "TOP-SECRET-OUTSIDE")

(define (write-file! name bv)
  (let ((port (open-output-file name #:binary #t)))
    (put-bytevector port (if (string? bv) (string->utf8 bv) bv))
    (close-port port)))

(define (pattern n seed)
  ;; N bytes of a pattern, so that a misplaced byte shows
  (let ((bv (make-bytevector n)))
    (do ((i 0 (+ i 1))) ((= i n) bv)
      (bytevector-u8-set! bv i (modulo (+ seed (* i 7)) 251)))))

(define (sub bv start end)
  (let ((out (make-bytevector (- end start))))
    (bytevector-copy! bv start out 0 (- end start))
    out))

(define data (pattern 1000 0))

(mkdir root)
(for-each (lambda (d) (mkdir (string-append root "/" d)))
          '("dir" "nodir" "sub" ".git"))
(write-file! (string-append base "/outside.txt") secret)
(write-file! (string-append root "/data.bin") data)
(write-file! (string-append root "/hello.txt") "Hello, static world!\n")
(write-file! (string-append root "/hot.txt") "asked often\n")
(write-file! (string-append root "/style.css") "body { color: red }\n")
(write-file! (string-append root "/style.css.gz") "GZIP-BYTES")
(write-file! (string-append root "/style.css.zst") "ZSTD-BYTES")
(write-file! (string-append root "/brotli.css") "p { color: blue }\n")
(write-file! (string-append root "/brotli.css.br") "BR-BYTES")
(write-file! (string-append root "/brotli.css.gz") "GZ-BYTES")
(write-file! (string-append root "/only-gz.js") "let x = 1;\n")
(write-file! (string-append root "/only-gz.js.gz") "GZ-JS")
(write-file! (string-append root "/app.3f2a9b1c.js") "fingerprinted\n")
(write-file! (string-append root "/dir/index.html") "<p>index</p>\n")
(write-file! (string-append root "/nodir/<b>&.txt") "escaped\n")
(write-file! (string-append root "/.secret") "dotfile\n")
(write-file! (string-append root "/sub/.hidden") "hidden\n")
(write-file! (string-append root "/.git/config") "[core]\n")
(write-file! (string-append root "/caf\u00e9.txt") "utf-8 name\n")
(symlink (string-append base "/outside.txt") (string-append root "/out"))
(symlink "/etc" (string-append root "/etc"))
(symlink "hello.txt" (string-append root "/in"))

(define (app request body)
  (values '((content-type . (text/plain))) "from the app\n"))

(define (site request body)
  ;; /listed/… lists directories; /mw/… is the middleware in front of
  ;; `app'; the rest the plain handler.
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string-prefix? "/listed/" path)
      (listed (strip request "/listed") body))
     ((string-prefix? "/mw/" path)
      (middleware (strip request "/mw") body))
     (else (plain request body)))))

(define (strip request prefix)
  (let ((uri (request-uri request)))
    (build-request (build-uri-reference
                    #:path (substring (uri-path uri) (string-length prefix))
                    #:query (uri-query uri))
                   #:method (request-method request)
                   #:headers (request-headers request)
                   #:validate-headers? #f)))

(define plain
  (static-handler root #:cache-control
                  '(("\\.[0-9a-f]{8}\\.(js|css)$" . "public, max-age=31536000, immutable"))))
(define listed (static-handler root #:listing? #t))
(define middleware ((static-middleware root) app))

(define server (start-server site))
(define port (server-port server))

(define* (ask path #:key (method "GET") (headers '()))
  ;; -> (values response body) of one request on a new connection
  (with-client port
    (lambda (client)
      (client-send! client (request-text path #:method method #:headers headers))
      (client-read-response client #:head? (string=? method "HEAD")))))

(define (header response name)
  (assq-ref (response-headers response) name))

(define (body-text body) (and body (utf8->string body)))

;;;
;;; Plain files
;;;

(define etag #f)
(define last-modified #f)

(test-group "static-handler: a file"
  (let ((response body (ask "/data.bin")))
    (test-equal "200" 200 (response-code response))
    (test-equal "its bytes" data body)
    (test-equal "Content-Length" 1000 (response-content-length response))
    (test-equal "Accept-Ranges" '(bytes) (header response 'accept-ranges))
    (test-assert "a strong ETag" (and (header response 'etag) (cdr (header response 'etag))))
    (test-assert "Last-Modified" (header response 'last-modified))
    (test-equal "application/octet-stream" 'application/octet-stream
      (car (header response 'content-type)))
    (set! etag (car (header response 'etag)))
    (set! last-modified (header response 'last-modified)))
  (let ((response body (ask "/data.bin" #:method "HEAD")))
    (test-equal "HEAD: 200" 200 (response-code response))
    (test-equal "HEAD: the length" 1000 (response-content-length response))
    (test-equal "HEAD: the same ETag" etag (car (header response 'etag))))
  (let ((response body (ask "/hello.txt")))
    (test-equal "text: charset utf-8" '(text/plain (charset . "utf-8"))
      (header response 'content-type)))
  (let ((response body (ask "/style.css")))
    (test-equal "css by extension" 'text/css (car (header response 'content-type))))
  (let ((response body (ask "/caf%C3%A9.txt")))
    (test-equal "a UTF-8 name, percent-encoded" "utf-8 name\n" (body-text body)))
  (let ((response body (ask "/in")))
    (test-equal "a symlink inside the root" 200 (response-code response)))
  ;; issue 25 (n): a POST to a file was a 404
  (let ((response body (ask "/data.bin" #:method "POST")))
    (test-equal "POST to a file: 405" 405 (response-code response))
    (test-equal "with Allow: GET, HEAD" '(GET HEAD) (header response 'allow)))
  (let ((response body (ask "/dir/" #:method "DELETE")))
    (test-equal "DELETE of a directory: 405" 405 (response-code response)))
  (let ((response body (ask "/missing.txt" #:method "POST")))
    (test-equal "POST to no file: 404" 404 (response-code response)))
  (let ((response body (ask "/.secret" #:method "POST")))
    (test-equal "POST to a dotfile: 404, as a GET" 404 (response-code response)))
  (let ((response body (ask "/missing.txt")))
    (test-equal "missing: 404" 404 (response-code response))))

(define (http-date response) 
  (call-with-output-string
    (lambda (port)
      ((@ (web http) write-header) 'last-modified last-modified port))))

(define last-modified-text
  (let ((line (call-with-output-string
                (lambda (port) ((@ (web http) write-header) 'last-modified last-modified port)))))
    (string-trim-right (substring line (string-length "Last-Modified: ")))))

(define (quoted tag) (string-append "\"" tag "\""))

(define-syntax-rule (test-code name expected path header ...)
  ;; the status of GET and of HEAD of PATH with the header lines given
  (begin
    (test-equal (string-append name " (GET)") expected
      (let ((response body (ask path #:headers (list header ...))))
        (response-code response)))
    (test-equal (string-append name " (HEAD)") expected
      (let ((response body (ask path #:method "HEAD" #:headers (list header ...))))
        (response-code response)))))

(test-group "preconditions: 304"
  (test-code "If-None-Match: its ETag" 304 "/data.bin"
             (string-append "If-None-Match: " (quoted etag)))
  (test-code "If-None-Match: weak form matches too" 304 "/data.bin"
             (string-append "If-None-Match: W/" (quoted etag)))
  (test-code "If-None-Match: among others" 304 "/data.bin"
             (string-append "If-None-Match: \"a\", " (quoted etag)))
  (test-code "If-None-Match: *" 304 "/data.bin" "If-None-Match: *")
  (test-code "If-None-Match: another" 200 "/data.bin" "If-None-Match: \"other\"")
  (test-code "If-Modified-Since: its date" 304 "/data.bin"
             (string-append "If-Modified-Since: " last-modified-text))
  (test-code "If-Modified-Since: later" 304 "/data.bin"
             "If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT")
  (test-code "If-Modified-Since: earlier" 200 "/data.bin"
             "If-Modified-Since: Thu, 01 Jan 1998 00:00:00 GMT")
  (test-code "If-Modified-Since: not a date" 200 "/data.bin"
             "If-Modified-Since: yesterday")
  (test-code "If-None-Match wins over If-Modified-Since" 200 "/data.bin"
             "If-None-Match: \"other\""
             (string-append "If-Modified-Since: " last-modified-text))
  (let ((response body (ask "/data.bin" #:headers
                            (list (string-append "If-None-Match: " (quoted etag))))))
    (test-equal "304: no body" #vu8() body)
    (test-equal "304: the ETag" etag (car (header response 'etag)))
    (test-assert "304: Last-Modified" (header response 'last-modified))))

(test-group "preconditions: 412"
  (test-code "If-Match: another" 412 "/data.bin" "If-Match: \"other\"")
  (test-code "If-Match: its ETag" 200 "/data.bin"
             (string-append "If-Match: " (quoted etag)))
  (test-code "If-Match: weak never matches" 412 "/data.bin"
             (string-append "If-Match: W/" (quoted etag)))
  (test-code "If-Match: *" 200 "/data.bin" "If-Match: *")
  (test-code "If-Unmodified-Since: earlier" 412 "/data.bin"
             "If-Unmodified-Since: Thu, 01 Jan 1998 00:00:00 GMT")
  (test-code "If-Unmodified-Since: its date" 200 "/data.bin"
             (string-append "If-Unmodified-Since: " last-modified-text))
  (test-code "If-Match wins over If-Unmodified-Since" 200 "/data.bin"
             (string-append "If-Match: " (quoted etag))
             "If-Unmodified-Since: Thu, 01 Jan 1998 00:00:00 GMT"))

(define (range path . headers)
  (ask path #:headers headers))

(test-group "request-ranges: 206"
  (let ((response body (range "/data.bin" "Range: bytes=0-9")))
    (test-equal "first bytes: 206" 206 (response-code response))
    (test-equal "their bytes" (sub data 0 10) body)
    (test-equal "Content-Range" '(bytes (0 . 9) 1000) (header response 'content-range)))
  (let ((response body (range "/data.bin" "Range: bytes=-10")))
    (test-equal "a suffix" (sub data 990 1000) body)
    (test-equal "its Content-Range" '(bytes (990 . 999) 1000) (header response 'content-range)))
  (let ((response body (range "/data.bin" "Range: bytes=990-")))
    (test-equal "to the end" (sub data 990 1000) body))
  (let ((response body (range "/data.bin" "Range: bytes=995-5000")))
    (test-equal "past the end: clipped" (sub data 995 1000) body))
  (let ((response body (range "/data.bin" "Range: bytes=-5000")))
    (test-equal "a suffix longer than the file: all of it" data body)
    (test-equal "still 206" 206 (response-code response)))
  (let ((response body (range "/data.bin" "Range: bytes=1000-")))
    (test-equal "from the end: 416" 416 (response-code response))
    (test-equal "Content-Range: bytes */N" '(bytes * 1000) (header response 'content-range)))
  (test-equal "unsatisfiable" 416
    (let ((response body (range "/data.bin" "Range: bytes=2000-3000")))
      (response-code response)))
  (test-code "an invalid range is ignored" 200 "/data.bin" "Range: bytes=5-1")
  (test-code "another unit is ignored" 200 "/data.bin" "Range: items=0-1")
  (test-code "garbage is ignored" 200 "/data.bin" "Range: bytes=abc")
  (let ((response body (range "/data.bin" "Range: bytes=0-9" "If-Range: \"other\"")))
    (test-equal "If-Range: another ETag: all of it" 200 (response-code response))
    (test-equal "all of it" data body))
  (let ((response body (range "/data.bin" "Range: bytes=0-9"
                              (string-append "If-Range: " (quoted etag)))))
    (test-equal "If-Range: its ETag" 206 (response-code response)))
  (let ((response body (range "/data.bin" "Range: bytes=0-9"
                              (string-append "If-Range: W/" (quoted etag)))))
    (test-equal "If-Range: weak: all of it" 200 (response-code response)))
  (let ((response body (range "/data.bin" "Range: bytes=0-9"
                              (string-append "If-Range: " last-modified-text))))
    (test-equal "If-Range: its date" 206 (response-code response)))
  (let ((response body (range "/data.bin" "Range: bytes=0-9"
                              "If-Range: Thu, 01 Jan 1998 00:00:00 GMT")))
    (test-equal "If-Range: another date" 200 (response-code response)))
  (let ((response body (ask "/data.bin" #:method "HEAD" #:headers '("Range: bytes=0-9"))))
    (test-equal "HEAD ignores Range (RFC 9110 §14.2)" 200 (response-code response))
    (test-equal "HEAD: the whole length" 1000 (response-content-length response)))
  (test-code "Range with If-None-Match that matches: 304" 304 "/data.bin"
             "Range: bytes=0-9" (string-append "If-None-Match: " (quoted etag)))
  (test-code "Range with a failed If-Match: 412" 412 "/data.bin"
             "Range: bytes=0-9" "If-Match: \"x\""))

(define (multipart-parts body boundary)
  ;; -> list of (content-range-text . bytes)
  (let* ((text (bytevector->string body "ISO-8859-1"))
         (delim (string-append "\r\n--" boundary)))
    (let lp ((at 0) (out '()))
      (let ((start (string-contains text delim at)))
        (if (or (not start)
                (string-prefix? "--" (substring text (+ start (string-length delim)))))
            (reverse out)
            (let* ((head-end (string-contains text "\r\n\r\n" start))
                   (next (string-contains text delim (+ head-end 4)))
                   (head (substring text start head-end))
                   (cr (string-contains head "Content-Range: ")))
              (lp next
                  (cons (cons (substring head (+ cr 15)
                                         (or (string-index head #\return (+ cr 15))
                                             (string-length head)))
                              (sub body (+ head-end 4) next))
                        out))))))))

(test-group "request-ranges: multipart/byteranges"
  (for-each
   (lambda (spec)
     (let ((response body (range "/data.bin" (string-append "Range: " spec))))
       (test-equal (string-append spec ": 206") 206 (response-code response))
       (let ((type (header response 'content-type)))
         (test-equal (string-append spec ": multipart/byteranges")
           'multipart/byteranges (car type))
         (let ((parts (multipart-parts body (assq-ref (cdr type) 'boundary))))
           (test-equal (string-append spec ": the parts")
             (list (cons "bytes 0-1/1000" (sub data 0 2))
                   (cons "bytes 5-6/1000" (sub data 5 7))
                   (cons "bytes 998-999/1000" (sub data 998 1000)))
             parts)))))
   '("bytes=0-1,5-6,-2" "bytes=0-1, 5-6, 998-"))
  (test-code "overlaps adding up to more than the file: all of it" 200 "/data.bin"
             "Range: bytes=0-999,0-999"))

;;;
;;; Precompressed siblings
;;;

(define (encoded path accept)
  ;; -> (code content-encoding vary body-text)
  (let ((response body (ask path #:headers (if accept
                                                (list (string-append "Accept-Encoding: " accept))
                                                '()))))
    (list (response-code response)
          (header response 'content-encoding)
          (header response 'vary)
          (body-text body))))

;; one case: PATH asked with Accept-Encoding ACCEPT (#f: none) answers
;; (code content-encoding vary body-text) EXPECTED
(define-syntax-rule (test-encoded name expected path accept)
  (test-equal name expected (encoded path accept)))

(test-group "precompressed siblings"
  (test-encoded "no Accept-Encoding: identity, with Vary" '(200 #f (accept-encoding) "body { color: red }\n")
    "/style.css" #f)
  (test-encoded "gzip" '(200 (gzip) (accept-encoding) "GZIP-BYTES")
    "/style.css" "gzip")
  (test-encoded "zstd" '(200 (zstd) (accept-encoding) "ZSTD-BYTES")
    "/style.css" "zstd")
  (test-encoded "both: zstd preferred on a tie" '(200 (zstd) (accept-encoding) "ZSTD-BYTES")
    "/style.css" "gzip, deflate, br, zstd")
  (test-encoded "q-values: gzip over zstd" '(200 (gzip) (accept-encoding) "GZIP-BYTES")
    "/style.css" "gzip;q=1.0, zstd;q=0.5")
  (test-encoded "zstd;q=0: gzip" '(200 (gzip) (accept-encoding) "GZIP-BYTES")
    "/style.css" "zstd;q=0, gzip")
  (test-encoded "*: zstd" '(200 (zstd) (accept-encoding) "ZSTD-BYTES")
    "/style.css" "*")
  (test-encoded "identity;q=0: a coding" '(200 (zstd) (accept-encoding) "ZSTD-BYTES")
    "/style.css" "identity;q=0, gzip, zstd")
  (test-encoded "identity over *;q=0.5" '(200 #f (accept-encoding) "body { color: red }\n")
    "/style.css" "identity, *;q=0.5")
  (test-encoded "br only: identity" '(200 #f (accept-encoding) "body { color: red }\n")
    "/style.css" "br")
  (test-encoded "empty: identity" '(200 #f (accept-encoding) "body { color: red }\n")
    "/style.css" "")
  (test-equal "identity;q=0 and nothing else: 406"
    406 (car (encoded "/style.css" "identity;q=0, br")))
  (test-equal "*;q=0: 406" 406 (car (encoded "/style.css" "*;q=0")))
  ;; issue 25 (n): br alone got identity, and .br siblings were ignored
  (test-encoded "br alone: the .br sibling" '(200 (br) (accept-encoding) "BR-BYTES")
    "/brotli.css" "br")
  (test-encoded "a browser's list: br over gzip" '(200 (br) (accept-encoding) "BR-BYTES")
    "/brotli.css" "gzip, deflate, br")
  (test-encoded "gzip asked: the .gz" '(200 (gzip) (accept-encoding) "GZ-BYTES")
    "/brotli.css" "gzip")
  (test-encoded "br;q=0.5, gzip: the .gz" '(200 (gzip) (accept-encoding) "GZ-BYTES")
    "/brotli.css" "br;q=0.5, gzip")
  (test-encoded "only a .gz: zstd asked, identity" '(200 #f (accept-encoding) "let x = 1;\n")
    "/only-gz.js" "zstd")
  (test-encoded "only a .gz: gzip" '(200 (gzip) (accept-encoding) "GZ-JS")
    "/only-gz.js" "zstd, gzip")
  (test-encoded "no sibling: no Vary" '(200 #f #f "Hello, static world!\n")
    "/hello.txt" "gzip")
  (let ((identity-response b1 (ask "/style.css"))
        (gzip-response b2 (ask "/style.css" #:headers '("Accept-Encoding: gzip"))))
    (test-assert "each coding its own ETag"
      (not (equal? (header identity-response 'etag) (header gzip-response 'etag))))
    (test-equal "the type of the original"
      'text/css (car (header gzip-response 'content-type)))
    (test-code "304 for the coded ETag" 304 "/style.css" "Accept-Encoding: gzip"
               (string-append "If-None-Match: "
                              (quoted (car (header gzip-response 'etag)))))
    (let ((response body (ask "/style.css" #:headers '("Accept-Encoding: gzip"
                                                       "Range: bytes=0-3"))))
      (test-equal "a range of the coded bytes" "GZIP" (body-text body))
      (test-equal "with its coding" '(gzip) (header response 'content-encoding)))))

;;;
;;; Directories and headers
;;;

(test-group "directories"
  (let ((response body (ask "/dir")))
    (test-equal "no slash: 301" 301 (response-code response))
    (test-equal "to the slash" "/dir/" (uri->string (header response 'location))))
  (let ((response body (ask "/dir?a=1")))
    (test-equal "the query kept" "/dir/?a=1" (uri->string (header response 'location))))
  (let ((response body (ask "/dir/")))
    (test-equal "index.html" "<p>index</p>\n" (body-text body))
    (test-equal "as html" 'text/html (car (header response 'content-type))))
  (test-code "no index, no listing: 404" 404 "/nodir/")
  (test-code "the root without index: 404" 404 "/")
  (let ((response body (ask "/listed/nodir/")))
    (test-equal "listing: 200" 200 (response-code response))
    (test-assert "names escaped"
      (string-contains (body-text body) "&lt;b&gt;&amp;.txt"))
    (test-assert "links encoded"
      (string-contains (body-text body) "href=\"%3Cb%3E%26.txt\""))
    (test-assert "no raw markup from a name" (not (string-contains (body-text body) "<b>"))))
  (let ((response body (ask "/listed/")))
    (test-assert "dotfiles not listed" (not (string-contains (body-text body) ".secret")))
    (test-assert "directories with a slash" (string-contains (body-text body) "nodir/"))))

(test-group "cache-control per pattern"
  (let ((response body (ask "/app.3f2a9b1c.js")))
    (test-equal "immutable for a fingerprinted asset"
      '(public (max-age . 31536000) immutable) (header response 'cache-control)))
  (let ((response body (ask "/app.3f2a9b1c.js" #:headers
                            (list (string-append "If-None-Match: " (quoted "x"))))))
    (test-assert "on every answer" (header response 'cache-control)))
  (let ((response body (ask "/hello.txt")))
    (test-equal "none elsewhere" #f (header response 'cache-control))))

(test-group "static-middleware"
  (let ((response body (ask "/mw/hello.txt")))
    (test-equal "a file" "Hello, static world!\n" (body-text body)))
  (let ((response body (ask "/mw/nothing-here")))
    (test-equal "no file: the app" "from the app\n" (body-text body)))
  (let ((response body (ask "/mw/../outside.txt")))
    (test-assert "a traversal: never the file" (not (equal? secret (body-text body))))))

;;;
;;; Safety
;;;

(define traversals
  ;; Each must be refused (404, or 400 from the parser) and never show
  ;; what is outside the root, a dotfile or a hidden file.
  '("/../outside.txt" "/..%2foutside.txt" "/..%2Foutside.txt" "/%2e%2e/outside.txt"
    "/%2E%2E/outside.txt" "/.%2e/outside.txt" "/%2e./outside.txt"
    "/%2e%2e%2foutside.txt" "/..%5coutside.txt" "/..%5Coutside.txt"
    "/%5c..%5coutside.txt" "/dir/../../outside.txt" "/dir/%2e%2e/%2e%2e/outside.txt"
    "/dir%2f..%2f..%2foutside.txt" "/%c0%ae%c0%ae/outside.txt" "/%c0%ae%c0%ae%c0%afoutside.txt"
    "/%e0%80%ae%e0%80%ae/outside.txt" "/%c1%9c..%c1%9coutside.txt" "/%f0%80%80%ae/x"
    "/%252e%252e/outside.txt" "/hello.txt%00" "/hello.txt%00.png" "/dir/..%00/outside.txt"
    "/out" "/etc/passwd" "/etc%2fpasswd" "//etc/passwd" "/%2f%2fetc/passwd" "/%2fetc/passwd"
    "/.secret" "/%2esecret" "/sub/.hidden" "/sub/%2ehidden" "/.git/config" "/%2Egit/config"
    "/./hello.txt" "/%2e/hello.txt" "/hello.txt/" "/hello.txt/." "/hello.txt/.."
    "/..;/outside.txt" "/%ff%fe" "/%zz" "/%" "/%2" "/dir/./../..//outside.txt"
    "/dir//index.html" "/%c0%80" "/%ed%a0%80"))

(define (refused? path)
  (with-client port
    (lambda (client)
      (client-send! client (string-append "GET " path " HTTP/1.1\r\nHost: localhost\r\n\r\n"))
      (let ((response body (client-read-response client)))
        (and response
             (memv (response-code response) '(400 404))
             (not (string-contains (bytevector->string body "ISO-8859-1") secret))
             (not (string-contains (bytevector->string body "ISO-8859-1") "dotfile"))
             (not (string-contains (bytevector->string body "ISO-8859-1") "hidden\n"))
             (not (string-contains (bytevector->string body "ISO-8859-1") "root:"))
             #t)))))

(test-group "path-segments: traversal"
  (test-assert "at least 30 tricks" (>= (length traversals) 30))
  (for-each (lambda (path) (test-assert path (refused? path))) traversals)
  (for-each (lambda (path)
              (test-equal (string-append "404, not a parser's 400: " path) 404
                (let ((response body (ask path))) (response-code response))))
            '("/%2e%2e/outside.txt" "/..%2foutside.txt" "/%c0%ae%c0%ae/outside.txt"
              "/hello.txt%00" "/..%5coutside.txt" "/out" "/.secret"))
  (test-equal "a plain segment" '("a" "b c") (path-segments "/a/b%20c" #f))
  (test-equal "dotfiles allowed" '(".well-known" "x")
    (path-segments "/.well-known/x" #t))
  (test-equal "`..' even with dotfiles allowed" #f (path-segments "/a/../b" #t)))

;;;
;;; The open-file cache
;;;

(define (files-open pid name)
  ;; -> how many descriptors of PID are open on NAME
  (let ((dir (opendir (format #f "/proc/~a/fd" pid))))
    (let lp ((count 0))
      (let ((entry (readdir dir)))
        (cond
         ((eof-object? entry) (closedir dir) count)
         ((equal? (false-if-exception (readlink (format #f "/proc/~a/fd/~a" pid entry)))
                  name)
          (lp (+ count 1)))
         (else (lp count)))))))

(test-group "the open-file cache"
  (with-client port
    (lambda (client)
      (do ((i 0 (+ i 1))) ((= i 50))
        (client-send! client (request-text "/hot.txt")))
      (test-equal "fifty answers" 50 (length (client-read-responses client 50)))))
  (test-equal "one descriptor for a hot file" 1
    (files-open (server-pid server) (string-append root "/hot.txt")))
  ;; A file replaced: seen within the revalidation second.
  (let ((file (string-append root "/changing.txt")))
    (write-file! file "first\n")
    (let ((response body (ask "/changing.txt")))
      (test-equal "first" "first\n" (body-text body))
      (write-file! (string-append file ".new") "second version\n")
      (rename-file (string-append file ".new") file)
      (test-assert "then the new file, within a second or so"
        (wait-until (lambda ()
                      (let ((response2 body2 (ask "/changing.txt")))
                        (equal? "second version\n" (body-text body2))))
                    #:timeout 5))
      (let ((response2 body2 (ask "/changing.txt")))
        (test-assert "with another ETag"
          (not (equal? (header response 'etag) (header response2 'etag)))))
      (test-assert "the old descriptor closed"
        (wait-until (lambda () (<= (files-open (server-pid server)
                                               (string-append file " (deleted)"))
                                   0))
                    #:timeout 5))
      (delete-file file)
      (test-assert "a deleted file: 404"
        (wait-until (lambda ()
                      (let ((response3 body3 (ask "/changing.txt")))
                        (= 404 (response-code response3))))
                    #:timeout 5)))))

;;;
;;; Files that change while they are sent
;;;

(define big-size (* 8 1024 1024))

(test-group "a file truncated during a download"
  (let ((file (string-append root "/shrinking.bin"))
        (original (pattern big-size 3)))
    (write-file! file original)
    (let ((client (connect-client port #:receive-buffer 4096)))
      (client-send! client (request-text "/shrinking.bin"))
      ;; The server has sent what the socket takes; now the file shrinks.
      (usleep 200000)
      (truncate-file file 1000)
      (let ((bytes closed? (client-read-until-close client #:timeout 20)))
        (test-assert "the connection closes" closed?)
        (let* ((text (bytevector->string bytes "ISO-8859-1"))
               (head-end (+ 4 (string-contains text "\r\n\r\n")))
               (got (- (bytevector-length bytes) head-end)))
          (test-assert "short of Content-Length" (< got big-size))
          ;; sendfile(2) hands the socket the page cache's pages: bytes
          ;; queued before the truncation may read as zeros past the new
          ;; end (the kernel zeroes the cut page), but they are never
          ;; another file's.
          (test-assert "what came is the file's own bytes, or zeros past its new end"
            (let ((body (sub bytes head-end (bytevector-length bytes))))
              (let lp ((i 0))
                (or (= i got)
                    (and (let ((b (bytevector-u8-ref body i)))
                           (or (= b (bytevector-u8-ref original i))
                               (and (>= i 1000) (zero? b))))
                         (lp (+ i 1)))))))))
      (client-close! client))
    (let ((response body (ask "/hello.txt")))
      (test-equal "others are served on" 200 (response-code response)))
    (delete-file file)))

;;;
;;; A large sparse file to a slow client
;;;

(define (rss-kb pid)
  (string->number (car (string-tokenize (process-status-field pid "VmRSS")))))

(test-group "a 1 GB sparse file at a limited rate"
  (let ((file (string-append root "/sparse.bin")))
    (close-port (open-output-file file))
    (truncate-file file (* 1024 1024 1024))
    (let* ((before (rss-kb (server-pid server)))
           (curl (open-pipe* OPEN_READ "curl" "-s" "-o" "/dev/null" "--limit-rate" "20M"
                             "-m" "4" "-w" "%{size_download}"
                             (format #f "http://127.0.0.1:~a/sparse.bin" port)))
           (times (map (lambda (i)
                         (let ((start (now-seconds)))
                           (ask "/hello.txt")
                           (- (now-seconds) start)))
                       (iota 40)))
           (during (rss-kb (server-pid server)))
           (downloaded (string->number (read-line curl))))
      (close-pipe curl)
      (test-assert "curl got megabytes of it" (and downloaded (> downloaded (* 10 1024 1024))))
      (test-assert "other clients served at once meanwhile"
        (< (apply max times) 1.0))
      (test-assert "the worker's RSS flat (within 8 MB)"
        (< (- during before) 8192)))
    (delete-file file)))

;;;
;;; Without sendfile
;;;

(define (start-copying-server)
  ;; A transport that cannot sendfile(2), as TLS will be
  (start-child
   (lambda (report)
     (let ((listener (open-listener "127.0.0.1" 0)))
       (report (listener-port listener))
       (run-loop (list (port->fdes listener)) (static-handler root)
                 #:make-transport (lambda (fd) (make-transport #:sendfile #f)))))))

(test-group "a transport without sendfile"
  (let ((copying (start-copying-server))
        (original (pattern big-size 5))
        (file (string-append root "/big.bin")))
    (write-file! file original)
    (dynamic-wind
      (lambda () #t)
      (lambda ()
        (with-client (server-port copying)
          (lambda (client)
            (client-send! client (string-append (request-text "/big.bin")
                                                (request-text "/data.bin"
                                                              #:headers '("Range: bytes=10-19"))))
            (let ((responses (client-read-responses client 2 #:timeout 30)))
              (test-assert "the file, copied" (equal? original (cdr (first responses))))
              (test-equal "then a range of another" (sub data 10 20) (cdr (second responses)))))
          #:receive-buffer 4096))
      (lambda () (stop-server copying) (delete-file file)))))

(stop-server server)
(system* "rm" "-rf" base)

(test-end "web/static")
