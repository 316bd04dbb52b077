;;; tests/http/response.scm --- (plucky http response)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `write-response!' and `write-error-response!' write into an <output>
;;; buffer; each test renders one answer, then reads the bytes back with
;;; Guile's own `read-response', so a head plucky writes is checked by an
;;; independent parser as well as byte by byte where the exact bytes
;;; matter (status line, Content-Type with the charset added).
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (tests lib harness)
             (rnrs bytevectors)
             (ice-9 binary-ports)
             (ice-9 iconv)
             (web http)
             (web request)
             (web response)
             (web uri)
             ((srfi srfi-19) #:select (make-date))
             (plucky http date)
             (plucky http response))

(test-begin "http/response")

;;;
;;; Helpers
;;;

(define* (request #:key (method 'GET) (version '(1 . 1)))
  (build-request (string->uri "http://localhost/") #:method method #:version version))

(define (output->bytevector out)
  (let ((bv (make-bytevector (output-fill out))))
    (bytevector-copy! (output-bytes out) 0 bv 0 (output-fill out))
    bv))

;; -> (values bytes close? large-body)
(define* (render response body #:key (req (request)) (close? #f))
  (let ((out (make-output 256)))
    (let ((close? large (write-response! out req response body close?)))
      (values (output->bytevector out) close? large))))

(define (render-bytes response body . args)
  (let ((bytes close? large (apply render response body args)))
    bytes))

(define (bytes->latin-1 bv)
  (bytevector->string bv "ISO-8859-1"))

;; Split rendered BYTES at the end of the head -> (values head-string body-bytes)
(define (split-head bytes)
  (let* ((text (bytes->latin-1 bytes))
         (i (string-contains text "\r\n\r\n")))
    (if i
        (let ((body (make-bytevector (- (bytevector-length bytes) i 4))))
          (bytevector-copy! bytes (+ i 4) body 0 (bytevector-length body))
          (values (substring text 0 (+ i 4)) body))
        (values text #f))))

(define (head-of bytes) (let ((head body (split-head bytes))) head))
(define (body-of bytes) (let ((head body (split-head bytes))) body))

;; Guile's parser on the head -> <response>
(define (parse-head bytes)
  (read-response (open-bytevector-input-port (string->utf8 (head-of bytes)))))

;; Every header line of the head, as strings without CRLF.
(define (header-lines bytes)
  (let ((lines (string-split (head-of bytes) #\newline)))
    (filter (lambda (l) (not (string-null? l)))
            (map (lambda (l) (string-trim-right l #\return)) (cdr lines)))))

(define (header-count bytes prefix)
  (count (lambda (l) (string-prefix-ci? prefix l)) (header-lines bytes)))

(define (status-line-of bytes)
  (let ((text (head-of bytes)))
    (substring text 0 (+ 2 (string-contains text "\r\n")))))

(define-syntax-rule (test-head-line name line response body args ...)
  (test-assert name (member line (header-lines (render-bytes response body args ...)))))

(define hello-headers '((content-type . (text/plain))))

;;;
;;; The alist shorthand
;;;

(test-group "alist shorthand"
  (let ((bytes close? large (render hello-headers "Hello, World!")))
    (test-equal "status line" "HTTP/1.1 200 OK\r\n" (status-line-of bytes))
    (test-assert "charset added to Content-Type"
      (member "Content-Type: text/plain;charset=utf-8" (header-lines bytes)))
    (test-assert "Content-Length" (member "Content-Length: 13" (header-lines bytes)))
    (test-equal "one Date" 1 (header-count bytes "Date: "))
    (test-assert "Date is an IMF-fixdate Guile reads"
      (response-date (parse-head bytes)))
    (test-equal "no Connection header on a kept-alive 1.1 answer" 0
      (header-count bytes "Connection:"))
    (test-equal "body" "Hello, World!" (utf8->string (body-of bytes)))
    (test-equal "keep alive" #f close?)
    (test-equal "body copied, nothing left over" #f large)
    (let ((r (parse-head bytes)))
      (test-equal "Guile reads the code" 200 (response-code r))
      (test-equal "Guile reads the type" '(text/plain (charset . "utf-8"))
        (response-content-type r))
      (test-equal "Guile reads the length" 13 (response-content-length r)))))

(test-group "empty alist and no body"
  (let ((bytes (render-bytes '() #f)))
    (test-equal "200" "HTTP/1.1 200 OK\r\n" (status-line-of bytes))
    (test-assert "Content-Length: 0" (member "Content-Length: 0" (header-lines bytes)))
    (test-equal "no Content-Type when there is no text" 0
      (header-count bytes "Content-Type:"))
    (test-equal "empty body" #vu8() (body-of bytes))))

(test-group "a string body without Content-Type gets text/plain"
  (test-head-line "text/plain;charset=utf-8"
                  "Content-Type: text/plain;charset=utf-8" '() "x"))

(test-group "headers in the order given, once each"
  (let ((bytes (render-bytes '((x-first . "1") (content-type . (text/plain)) (x-last . "2"))
                             "ok")))
    (test-equal "order"
      '("X-First: 1" "Content-Type: text/plain;charset=utf-8" "X-Last: 2")
      (take (header-lines bytes) 3))
    (test-equal "one Content-Type" 1 (header-count bytes "Content-Type:"))))

(test-group "a Date from the handler is kept, not doubled"
  (let ((bytes (render-bytes `((date . ,(parse-header 'date "Sun, 06 Nov 1994 08:49:37 GMT")))
                             "x")))
    (test-equal "one Date" 1 (header-count bytes "Date:"))
    (test-assert "the handler's" (member "Date: Sun, 06 Nov 1994 08:49:37 GMT"
                                         (header-lines bytes)))))

;;;
;;; Response records
;;;

(test-group "a response record: code and reason"
  (let ((bytes (render-bytes (build-response #:code 299 #:reason-phrase "Pretty Fine"
                                             #:headers hello-headers)
                             "custom")))
    (test-equal "custom reason" "HTTP/1.1 299 Pretty Fine\r\n" (status-line-of bytes))
    (test-equal "body" "custom" (utf8->string (body-of bytes))))
  (test-equal "standard reason for a known code" "HTTP/1.1 404 Not Found\r\n"
    (status-line-of (render-bytes (build-response #:code 404) "no")))
  (test-equal "no reason named: plucky's standard one, not Guile's"
    "HTTP/1.1 413 Content Too Large\r\n"
    (status-line-of (render-bytes (build-response #:code 413) "no")))
  (test-equal "a reason named for a code with a standard one"
    "HTTP/1.1 404 Gone Fishing\r\n"
    (status-line-of (render-bytes (build-response #:code 404 #:reason-phrase "Gone Fishing")
                                  "no")))
  (test-equal "the request's version, not the record's" "HTTP/1.0 201 Created\r\n"
    (status-line-of (render-bytes (build-response #:code 201) #f
                                  #:req (request #:version '(1 . 0))))))

;;;
;;; Bodies
;;;

(test-group "string body in the declared charset"
  (let* ((text "<p>café déjà vu</p>")
         (bytes (render-bytes '((content-type . (text/html (charset . "iso-8859-1")))) text)))
    (test-equal "latin-1 bytes" (string->bytevector text "ISO-8859-1") (body-of bytes))
    (test-assert "Content-Length counts bytes"
      (member (string-append "Content-Length: "
                             (number->string (string-length text)))
              (header-lines bytes)))
    (test-assert "charset kept, not replaced"
      (member "Content-Type: text/html;charset=iso-8859-1" (header-lines bytes))))
  (let ((bytes (render-bytes hello-headers "café")))
    (test-equal "utf-8 by default" (string->utf8 "café") (body-of bytes))
    (test-assert "5 bytes" (member "Content-Length: 5" (header-lines bytes)))))

(test-group "procedure body"
  (let ((bytes (render-bytes '() (lambda (port) (display "written by " port)
                                         (write 'a-procedure port)))))
    (test-equal "body" "written by a-procedure" (utf8->string (body-of bytes)))
    (test-assert "text/plain added" (member "Content-Type: text/plain;charset=utf-8"
                                            (header-lines bytes)))
    (test-assert "length" (member "Content-Length: 22" (header-lines bytes))))
  (test-equal "encoded in the declared charset"
    #vu8(233)
    (body-of (render-bytes '((content-type . (text/plain (charset . "iso-8859-1"))))
                           (lambda (port) (display "é" port))))))

(test-group "bytevector body"
  (let ((bytes (render-bytes '((content-type . (application/octet-stream)))
                             #vu8(0 1 2 255 13 10))))
    (test-equal "bytes as given" #vu8(0 1 2 255 13 10) (body-of bytes))
    (test-assert "type unchanged" (member "Content-Type: application/octet-stream"
                                          (header-lines bytes)))
    (test-assert "length" (member "Content-Length: 6" (header-lines bytes))))
  (test-equal "no Content-Type invented for bytes" 0
    (header-count (render-bytes '() #vu8(1 2 3)) "Content-Type:")))

(test-group "HEAD: Content-Length but no body"
  (let ((bytes close? large (render hello-headers "Hello, World!"
                                    #:req (request #:method 'HEAD))))
    (test-assert "length of the body not sent" (member "Content-Length: 13" (header-lines bytes)))
    (test-equal "nothing after the head" #vu8() (body-of bytes))
    (test-equal "no large body either" #f large))
  (let ((bytes close? large (render '() (make-bytevector (* 2 copy-limit) 1)
                                    #:req (request #:method 'HEAD))))
    (test-equal "a large body is not returned for HEAD" #f large)
    (test-equal "nothing after the head" #vu8() (body-of bytes))))

(test-group "HEAD with the Content-Length of the body not sent"
  ;; What Guile's sanitize-response gives for HEAD: the GET body's length
  ;; in the headers, and #f for the body (the drop-in passes that on).
  (test-equal "kept, and no body"
    '(("Content-Length: 5") #vu8())
    (let ((bytes (render-bytes '((content-type . (text/plain (charset . "utf-8")))
                                 (content-length . 5))
                               #f #:req (request #:method 'HEAD))))
      (list (filter (lambda (l) (string-prefix? "Content-Length" l)) (header-lines bytes))
            (body-of bytes))))
  (test-error "but not for GET" #t
    (render '((content-length . 5)) #f)))

(test-group "bodies up to copy-limit are copied, larger ones returned"
  (let* ((small (make-bytevector copy-limit 7))
         (bytes close? large (render '() small)))
    (test-equal "at the limit: copied" small (body-of bytes))
    (test-equal "nothing returned" #f large))
  (let* ((big (make-bytevector (+ 1 copy-limit) 9))
         (bytes close? large (render '() big)))
    (test-eq "over the limit: the very bytevector is returned" big large)
    (test-equal "the output holds the head only" #vu8() (body-of bytes))
    (test-assert "whose Content-Length is the big body's"
      (member (string-append "Content-Length: " (number->string (+ 1 copy-limit)))
              (header-lines bytes))))
  (let* ((text (make-string (+ 10 copy-limit) #\a))
         (bytes close? large (render hello-headers text)))
    (test-assert "a long string becomes a returned bytevector"
      (and (bytevector? large) (= (bytevector-length large) (+ 10 copy-limit))))))

(test-group "output grows past its initial size"
  (let ((out (make-output 16)))
    (write-response! out (request) hello-headers (make-string 1000 #\z) #f)
    (let ((bytes (output->bytevector out)))
      (test-equal "whole body" (make-string 1000 #\z) (utf8->string (body-of bytes))))))

(test-group "responses append to what the output holds"
  (let ((out (make-output 64)))
    (write-response! out (request) hello-headers "one" #f)
    (write-response! out (request) hello-headers "two" #f)
    (let* ((port (open-bytevector-input-port (output->bytevector out)))
           (r1 (read-response port))
           (b1 (read-response-body r1))
           (r2 (read-response port))
           (b2 (read-response-body r2)))
      (test-equal "first" "one" (utf8->string b1))
      (test-equal "second" "two" (utf8->string b2))
      (test-assert "then nothing" (eof-object? (get-u8 port))))
    (output-reset! out)
    (test-equal "output-reset! empties it" 0 (output-fill out))))

;;;
;;; Errors sanitize-response would raise
;;;

(test-group "Content-Length that does not match the body"
  (test-error "string body" #t (render '((content-length . 5)) "Hello, World!"))
  (test-error "bytevector body" #t (render '((content-length . 1)) #vu8(1 2)))
  (test-error "no body" #t (render '((content-length . 3)) #f))
  (test-assert "a matching one is kept, once"
    (let ((bytes (render-bytes '((content-length . 2)) #vu8(1 2))))
      (and (member "Content-Length: 2" (header-lines bytes))
           (= 1 (header-count bytes "Content-Length:"))))))

(test-group "bodies on bodiless codes"
  (test-error "204 with a body" #t (render (build-response #:code 204) "x"))
  (test-error "304 with a body" #t (render (build-response #:code 304) #vu8(1)))
  (let ((bytes (render-bytes (build-response #:code 204) #f)))
    (test-equal "204 without a body" "HTTP/1.1 204 No Content\r\n" (status-line-of bytes))
    (test-equal "has no Content-Length" 0 (header-count bytes "Content-Length:"))
    (test-equal "and nothing after the head" #vu8() (body-of bytes))))

(test-group "unexpected body type"
  (test-error "a symbol" #t (render '() 'body))
  (test-error "a number" #t (render '() 42)))

(test-group "Content-Type written as Guile's writer writes it"
  ;; plucky writes the usual shapes itself, without a string port;
  ;; anything else is left to Guile's writer.
  (let ((plucky (@@ (plucky http response) media-type-text))
        (guile (lambda (value)
                 (call-with-output-string
                   (lambda (port) ((header-writer 'content-type) value port))))))
    (for-each
     (lambda (value)
       (test-equal (format #f "~s" value) (guile value) (plucky value)))
     '((text/plain)
       (text/html (charset . "utf-8"))
       (application/json (charset . "UTF-8") (profile . "x"))
       (multipart/form-data (boundary . "----abc=def"))
       (text/plain (charset . ""))))
    (for-each
     (lambda (value)
       (test-equal (format #f "~s: left to Guile's" value) #f (plucky value)))
     '("text/plain" () (text/plain charset) (text/plain (charset . utf-8))
       ("text/plain") (text/plain . "x")))
    (test-equal "a shape left to Guile still renders through Guile's writer"
      "Content-Type: text/plain;charset=utf-8\r\n"
      (utf8->string ((@@ (plucky http response) render-header)
                     'content-type '(text/plain (charset . "utf-8")))))))

(test-group "header lines in ISO-8859-1, as Guile's iconv writes them"
  (for-each
   (lambda (text)
     (test-equal (format #f "~s" text)
       (string->bytevector text "ISO-8859-1" 'substitute)
       ((@@ (plucky http response) string->latin-1) text)))
   (list "" "X-A: b\r\n" "caf\xe9" "\xff\x80 \x7f" "\u20ac and \u0100" "\U0001F600!")))

(test-group "header injection"
  (test-error "CRLF in a value" #t (render '((x-foo . "a\r\nSet-Cookie: evil=1")) "x"))
  (test-error "bare LF in a value" #t (render '((x-foo . "a\nb")) "x"))
  (test-error "bare CR in a value" #t (render '((x-foo . "a\rb")) "x"))
  (test-error "CRLF in a Location" #t
    (render `((location . ,(build-uri-reference #:path "/a\r\nX-Evil: 1"))) #f)))

;;;
;;; Connection management
;;;

(test-group "CLOSE? adds Connection: close"
  (let ((bytes close? large (render hello-headers "x" #:close? #t)))
    (test-assert "Connection: close" (member "Connection: close" (header-lines bytes)))
    (test-equal "once" 1 (header-count bytes "Connection:"))
    (test-equal "first value says close" #t close?)))

(test-group "HTTP/1.0 kept alive says Connection: keep-alive"
  (let ((bytes close? large (render hello-headers "x" #:req (request #:version '(1 . 0)))))
    (test-equal "1.0 status line" "HTTP/1.0 200 OK\r\n" (status-line-of bytes))
    (test-assert "keep-alive" (member "Connection: keep-alive" (header-lines bytes)))
    (test-equal "not closing" #f close?))
  (let ((bytes close? large (render hello-headers "x" #:req (request #:version '(1 . 0))
                                    #:close? #t)))
    (test-assert "1.0 closing says close" (member "Connection: close" (header-lines bytes)))
    (test-equal "and not keep-alive" 0 (header-count bytes "Connection: keep-alive"))))

(test-group "a Connection header from the handler"
  (let ((bytes close? large (render '((connection close)) "x")))
    (test-equal "close from the handler closes" #t close?)
    (test-equal "and is sent once" 1 (header-count bytes "Connection:")))
  (let ((bytes close? large (render '((connection close)) "x" #:close? #t)))
    (test-equal "sent once when the server closes too" 1 (header-count bytes "Connection:")))
  (let ((bytes close? large (render '((connection keep-alive)) "x"
                                    #:req (request #:version '(1 . 0)))))
    (test-equal "1.0 keep-alive from the handler is sent once" 1
      (header-count bytes "Connection:"))))

;;;
;;; write-error-response!
;;;

(test-group "write-error-response!"
  (let ((out (make-output 64)))
    (let ((close? large (write-error-response! out '(1 . 1) 400)))
      (let ((bytes (output->bytevector out)))
        (test-equal "status" "HTTP/1.1 400 Bad Request\r\n" (status-line-of bytes))
        (test-equal "body: the reason" "Bad Request\n" (utf8->string (body-of bytes)))
        (test-assert "length" (member "Content-Length: 12" (header-lines bytes)))
        (test-assert "plain text" (member "Content-Type: text/plain;charset=utf-8"
                                          (header-lines bytes)))
        (test-assert "closes" (member "Connection: close" (header-lines bytes)))
        (test-equal "Date" 1 (header-count bytes "Date: "))
        (test-equal "says close" #t close?))))
  (let ((out (make-output 64)))
    (write-error-response! out '(1 . 0) 413 "too big")
    (let ((bytes (output->bytevector out)))
      (test-equal "1.0 status" "HTTP/1.0 413 Content Too Large\r\n" (status-line-of bytes))
      (test-equal "the message" "too big\n" (utf8->string (body-of bytes)))))
  (let ((out (make-output 64)))
    (write-error-response! out '(1 . 1) 431)
    (test-equal "431 reason" "HTTP/1.1 431 Request Header Fields Too Large\r\n"
      (status-line-of (output->bytevector out)))))

;;;
;;; The header cache
;;;

(test-group "header cache"
  (let* ((value "a-value")
         (headers `((x-cached . ,value)))
         (first (render-bytes headers "x"))
         (second (render-bytes headers "x")))
    (test-equal "same literal twice: identical bytes" first second)
    (test-assert "and right" (member "X-Cached: a-value" (header-lines second)))
    (let ((third (render-bytes `((x-other . ,value)) "x")))
      (test-assert "same value under another name is rendered for that name"
        (member "X-Other: a-value" (header-lines third)))
      (test-equal "not under the cached one" 0 (header-count third "X-Cached")))
    (test-assert "an equal but fresh value renders the same"
      (member "X-Cached: a-value"
              (header-lines (render-bytes `((x-cached . ,(string-copy value))) "x")))))
  (test-equal "content-type of a string and of bytes do not share a rendering"
    '("Content-Type: text/plain;charset=utf-8" "Content-Type: text/plain")
    (list (find (lambda (l) (string-prefix? "Content-Type" l))
                (header-lines (render-bytes hello-headers "text")))
          (find (lambda (l) (string-prefix? "Content-Type" l))
                (header-lines (render-bytes hello-headers #vu8(1))))))
  ;; More distinct values than the cache holds: every one still right.
  (test-assert "past the cache's bound"
    (every (lambda (i)
             (let ((v (string-append "v" (number->string i))))
               (member (string-append "X-N: " v)
                       (header-lines (render-bytes `((x-n . ,v)) #f)))))
           (iota 1200))))

;;;
;;; Kept heads: a response answered with again and again
;;;

;; The head without its Date line, which may tick between two renders.
(define (head-but-date bytes)
  (filter (lambda (l) (not (string-prefix? "Date: " l)))
          (cons (status-line-of bytes) (header-lines bytes))))

(define (render-head-of response body . args)
  (let ((bytes (apply render-bytes response body args)))
    (list (head-but-date bytes) (header-count bytes "Date") (body-of bytes))))

(define (fresh-response)
  (build-response #:code 200
                  #:headers `((content-type . (text/html (charset . "utf-8")))
                              (etag . ("abc" . #t))
                              (cache-control . (no-cache)))))

(test-group "kept heads"
  (let ((kept (fresh-response)))
    (define (same-as-fresh? name body . args)
      ;; KEPT rendered three times (seen, kept, copied) under ARGS gives
      ;; what a response made afresh gives
      (let ((expected (apply render-head-of (fresh-response) body args)))
        (test-equal (string-append name ": seen") expected
          (apply render-head-of kept body args))
        (test-equal (string-append name ": kept") expected
          (apply render-head-of kept body args))
        (test-equal (string-append name ": copied") expected
          (apply render-head-of kept body args))))
    (same-as-fresh? "GET" #vu8(1 2 3))
    (same-as-fresh? "another length" #vu8(1 2 3 4 5))
    (same-as-fresh? "a string body" "text")
    (same-as-fresh? "HEAD" #vu8(1 2 3) #:req (request #:method 'HEAD))
    (same-as-fresh? "close?" #vu8(1 2 3) #:close? #t)
    (same-as-fresh? "HTTP/1.0" #vu8(1 2 3) #:req (request #:version '(1 . 0)))
    (same-as-fresh? "back to GET" #vu8(1 2 3))
    (test-equal "one Date line, of the loop's second, not the kept one's"
      (list 1 (string-append "Date: " (seconds->imf-fixdate 86400)))
      (begin
        (render-bytes kept #vu8(1))     ; kept with today's Date
        (render-bytes kept #vu8(1))
        ;; as the loop does each round; a second far from the others
        (refresh-date-line! 86400)
        (let* ((bytes (render-bytes kept #vu8(1)))
               (line (find (lambda (l) (string-prefix? "Date: " l)) (header-lines bytes))))
          (refresh-date-line! (current-time))
          (list (header-count bytes "Date") line)))))
  (let ((dated `((date . ,(make-date 0 0 0 0 1 1 2000 0)) (content-type . (text/plain)))))
    (test-equal "a Date of the response's own is kept, once"
      '(1 1 1)
      (map (lambda (i) (header-count (render-bytes dated #vu8(1)) "Date")) '(1 2 3))))
  (let ((alist '((content-type . (text/plain)))))
    (test-equal "an alist answered with again"
      '("Content-Length: 2" "Content-Length: 2" "Content-Length: 3")
      (map (lambda (body)
             (find (lambda (l) (string-prefix? "Content-Length" l))
                   (header-lines (render-bytes alist body))))
           (list #vu8(1 2) #vu8(1 2) #vu8(1 2 3))))))

;;;
;;; response-record?: (web response) records only
;;;

(test-equal "response-record? is true of response records only" '(#t #f #f #f #f)
  (map response-record?
       (list (build-response #:code 404)
             '((content-type . (text/plain)))
             (build-request (string->uri "http://localhost/"))
             (make-output 16)
             "text")))

(test-equal "response-record-code and response-record-headers" '(404 ((x-a . "b")))
  (let ((response (build-response #:code 404 #:headers '((x-a . "b")))))
    (list (response-record-code response) (response-record-headers response))))

(test-group "raw responses"
  (define fields (string->utf8 "Content-Type: text/plain\r\nContent-Length: 5\r\n"))
  (define dated (string->utf8 "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 5\r\n"))
  (define (date-lines bytes)
    (filter (lambda (l) (string-prefix? "Date: " l)) (header-lines bytes)))
  (let ((bytes (render-bytes (make-raw-response 200 fields) (string->utf8 "hello"))))
    (test-equal "the fields as they are, after the status line"
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nDate: "
      (substring (head-of bytes) 0 68))
    (test-equal "…one Date, the server's" 1 (length (date-lines bytes)))
    (test-equal "…the body" "hello" (utf8->string (body-of bytes))))
  (let ((bytes (render-bytes (make-raw-response 200 dated #:date? #t) (string->utf8 "hello"))))
    (test-equal "#:date?: the fields' Date alone" '("Date: Sun, 06 Nov 1994 08:49:37 GMT")
      (date-lines bytes)))
  (let ((bytes close? large (render (make-raw-response 404 fields #:reason "Gone Fishing")
                                    (string->utf8 "hello") #:close? #t)))
    (test-assert "a reason of its own" (string-prefix? "HTTP/1.1 404 Gone Fishing\r\n"
                                                      (head-of bytes)))
    (test-assert "closing: Connection: close" (member "Connection: close" (header-lines bytes)))
    (test-assert "…and says so" close?))
  (let ((bytes close? large (render (make-raw-response 200 fields #:close? #t)
                                    (string->utf8 "hello"))))
    (test-assert "#:close?: Connection: close" (and close? (member "Connection: close"
                                                                  (header-lines bytes)))))
  (let ((bytes close? large (render (raw-response-closing (make-raw-response 200 fields))
                                    (string->utf8 "hello"))))
    (test-assert "raw-response-closing" close?))
  (test-assert "HTTP/1.0 kept alive: Connection: keep-alive"
    (member "Connection: keep-alive"
            (header-lines (render-bytes (make-raw-response 200 fields) (string->utf8 "hello")
                                        #:req (request #:version '(1 . 0))))))
  (test-equal "HEAD: no body" #vu8()
    (body-of (render-bytes (make-raw-response 200 fields) (string->utf8 "hello")
                           #:req (request #:method 'HEAD))))
  (let ((buffer (make-bytevector 100 65)))
    (bytevector-copy! (string->utf8 "hello") 0 buffer 0 5)
    (test-equal "#:body-length: those bytes of the body alone" "hello"
      (utf8->string (body-of (render-bytes (make-raw-response 200 fields #:body-length 5)
                                           buffer))))
    (test-equal "answer-body: a copy of them" "hello"
      (utf8->string (answer-body (make-raw-response 200 fields #:body-length 5) buffer)))
    (test-eq "…a body of another response as it is" buffer
      (answer-body (make-raw-response 200 fields) buffer)))
  (test-error "#:body-length over copy-limit" #t
    (make-raw-response 200 fields #:body-length (+ copy-limit 1)))
  (test-error "a body on a 204" #t
    (render-bytes (make-raw-response 204 #vu8()) (string->utf8 "x")))
  (test-error "a string body" #t (render-bytes (make-raw-response 200 fields) "hello"))
  (test-error "a code out of range" #t (make-raw-response 42 fields))
  (let ((response (make-raw-response 418 fields)))
    (test-equal "answer-code" 418 (answer-code response))
    (test-equal "answer-headers: the fields parsed"
      '((content-type text/plain) (content-length . 5))
      (answer-headers response))
    (test-equal "raw-response->response" '(418 5)
      (let ((r (raw-response->response response)))
        (list (response-code r) (response-content-length r))))
    (test-assert "a procedure body is streamed" (streamed-response? response (lambda (p) #t))))
  (let* ((buffer (make-bytevector 10 65))
         (response (raw-response-with-headers
                    (make-raw-response 200 fields #:body-length 5)
                    '((x-added . "yes") (connection close))))
         (bytes close? large (render response buffer)))
    (test-equal "raw-response-with-headers: after the fields, Connection the server's"
      '("Content-Type: text/plain" "Content-Length: 5" "X-Added: yes" "Connection: close")
      (filter (lambda (l) (not (string-prefix? "Date: " l))) (header-lines bytes)))
    (test-equal "…its body-length kept" "AAAAA" (utf8->string (body-of bytes))))
  (let ((out (make-output 256)))
    (let ((framing close? (write-streamed-head! out (request)
                                               (make-raw-response 200 (string->utf8 "X-A: 1\r\n")))))
      (test-equal "streamed, no length: chunked" 'chunked framing)
      (test-assert "…Transfer-Encoding written"
        (member "Transfer-Encoding: chunked" (header-lines (output->bytevector out)))))))

(test-end "http/response")
