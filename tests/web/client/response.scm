;;; tests/web/client/response.scm --- (plucky web client response), split at every byte

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Each response is read from one end of a socketpair, whole and split
;;; in two at every byte boundary, and also a byte at a time: the reader
;;; runs under a fake loop's prompt, as a handler does, and each time it
;;; suspends for want of bytes the loop writes the next piece (or closes
;;; the other end when none is left).  Every split must give what the
;;; whole gives: the code, the body, whether the connection may be
;;; reused, or the same reason and byte offset of a fault.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-11)
             (srfi srfi-64)
             (rnrs bytevectors)
             (ice-9 binary-ports)
             (ice-9 match)
             (ice-9 threads)
             (web response)
             (tests lib harness)
             (plucky server suspend)
             ((plucky sys libc) #:select (fd-set-nonblocking!))
             (plucky web client error)
             (plucky web client connection)
             (plucky web client response))

(test-begin "web/client/response")

(define (socket-pair)
  ;; -> (values client-fd writer-port): the client's end as a bare
  ;; non-blocking descriptor, which its connection closes
  (match (socketpair AF_UNIX SOCK_STREAM 0)
    ((a . b)
     (let ((fd (dup->fdes a)))
       (close-port a)
       (fd-set-nonblocking! fd)
       (values fd b)))))

(define (fed pieces thunk)
  ;; Call (THUNK conn) on a connection that receives PIECES one by one,
  ;; the next each time THUNK suspends; -> what THUNK returns
  (let-values (((fd writer) (socket-pair)))
    (let* ((conn (fd->connection fd))
           (watch #f)
           (waits (make-waits (lambda (fd write? on-ready arg . timeout)
                                (set! watch (lambda () (on-ready arg))))
                              (lambda (fd) (set! watch #f))
                              (lambda (ms thunk) 'timer)
                              (lambda (timer) #t)
                              (lambda (thunk on-done) (on-done thunk))
                              (current-thread))))
      (define (feed!)
        (if (null? pieces)
            (unless (port-closed? writer) (close-port writer))
            (begin
              (put-bytevector writer (car pieces))
              (force-output writer)
              (set! pieces (cdr pieces)))))
      (install-waits! waits)
      (let ((result
             (let lp ((step (lambda () (thunk conn))))
               (call-with-prompt suspend-tag
                 (lambda ()
                   (enter-suspendable!)
                   (let ((r (step))) (leave-suspendable!) r))
                 (lambda (k what kind label register)
                   (leave-suspendable!)
                   (let ((resumed #f))
                     (register (lambda (t) (set! resumed t)))
                     (feed!)
                     (when watch (watch))
                     (lp (lambda () (k resumed)))))))))
        (install-waits! #f)
        (connection-close! conn)
        (unless (port-closed? writer) (close-port writer))
        result))))

(define timeouts (make-timeouts #:read-ms 5000))

(define (read-exchange conn)
  ;; -> (code body reusable?) or (reason offset)
  (with-exception-handler
      (lambda (e) (list (http-client-error-reason e) (http-client-error-offset e)))
    (lambda ()
      (let-values (((response head-size) (read-response-head conn timeouts "test")))
        (let ((body (make-body conn response head-size 'GET #:uri "test")))
          (let lp ((pieces '()))
            (let ((piece (read-body-piece body timeouts)))
              (if (eof-object? piece)
                  (list (response-code response)
                        (utf8->string (apply bytevector-concat (reverse pieces)))
                        (body-reusable? body))
                  (lp (cons piece pieces))))))))
    #:unwind? #t
    #:unwind-for-type &http-client-error))

(define (read-exchange/rest conn)
  ;; as read-exchange, the body read by read-body-rest
  (with-exception-handler
      (lambda (e) (list (http-client-error-reason e) (http-client-error-offset e)))
    (lambda ()
      (let-values (((response head-size) (read-response-head conn timeouts "test")))
        (let* ((body (make-body conn response head-size 'GET #:uri "test"))
               (bv (read-body-rest body timeouts)))
          (list (response-code response) (utf8->string bv) (body-reusable? body)
                (eof-object? (read-body-piece body timeouts))))))
    #:unwind? #t
    #:unwind-for-type &http-client-error))

(define (bytevector-concat . bvs)
  (let ((out (make-bytevector (apply + (map bytevector-length bvs)))))
    (fold (lambda (bv at) (bytevector-copy! bv 0 out at (bytevector-length bv))
                  (+ at (bytevector-length bv)))
          0 bvs)
    out))

(define (slice bv start end)
  (let ((out (make-bytevector (- end start))))
    (bytevector-copy! bv start out 0 (- end start))
    out))

(define (splits bv)
  ;; every way to cut BV in two, and one byte at a time
  (cons (map (lambda (i) (slice bv i (+ i 1))) (iota (bytevector-length bv)))
        (map (lambda (k) (list (slice bv 0 k) (slice bv k (bytevector-length bv))))
             (iota (- (bytevector-length bv) 1) 1))))

(define-syntax test-splits
  (syntax-rules ()
    ((_ name text expected) (test-splits name text expected read-exchange))
    ((_ name text expected read) (test-splits* name text expected read))))

(define-syntax-rule (test-splits* name text expected read-exchange)
  ;; TEXT read whole gives EXPECTED, and so does every split of it
  (let ((bv (string->utf8 text)))
    (test-equal (string-append name ", whole") expected (fed (list bv) read-exchange))
    (test-equal (string-append name ", split at every byte") '()
      (filter-map (lambda (pieces)
                    (let ((got (fed pieces read-exchange)))
                      (and (not (equal? got expected))
                           (list (map bytevector-length pieces) got))))
                  (splits bv)))))

(test-splits "Content-Length"
  "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
  '(200 "hello" #t))
(test-splits "chunked, an extension and a trailer"
  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;ext=1\r\n,\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
  '(200 "hello, world" #t))
(test-splits "line ends of LF alone"
  "HTTP/1.1 200 OK\nContent-Length: 2\n\nlf"
  '(200 "lf" #t))
(test-splits "100 Continue, then the response"
  "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
  '(200 "ok" #t))
(test-splits "until the server closes"
  "HTTP/1.0 200 OK\r\n\r\nuntil close"
  '(200 "until close" #f))
(test-splits "Connection: close"
  "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
  '(200 "ok" #f))
(test-splits "a bad chunk size, and its offset"
  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n"
  '(malformed-response 57))
(test-splits "a body cut short"
  "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"
  '(closed 44))
(test-splits "garbage"
  "SSH-2.0-OpenSSH_9.2\r\n\r\n"
  '(malformed-response 0))
(test-splits "a status line without its code"
  "HTTP/1.1 OK\r\n\r\n"
  '(malformed-response 9))


;; read-body-rest: a body of known length read straight into one
;; bytevector, whatever the server's bytes' cuts; the others as pieces.
(test-splits "read-body-rest, Content-Length"
  "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello there"
  '(200 "hello there" #t #t) read-exchange/rest)
(test-splits "read-body-rest, an empty body"
  "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
  '(200 "" #t #t) read-exchange/rest)
(test-splits "read-body-rest, chunked"
  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
  '(200 "hello world" #t #t) read-exchange/rest)
(test-splits "read-body-rest, a body cut short"
  "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"
  '(closed 44) read-exchange/rest)

;; The head is made into the same <response> Guile's read-response makes.
(define (same-as-guile? text)
  (let* ((bv (string->utf8 text))
         (guile (read-response (open-bytevector-input-port bv)))
         (ours (fed (list bv) (lambda (conn)
                                (let-values (((r size) (read-response-head conn timeouts "t")))
                                  r)))))
    (every (lambda (field) (equal? (field guile) (field ours)))
           (list response-version response-code response-reason-phrase response-headers))))

(test-assert "the head as Guile's read-response reads it"
  (same-as-guile? "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 29 Nov 2026 07:44:48 GMT\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 13\r\nConnection: keep-alive\r\nX-Foo:  bar baz  \r\nVia: 1.0 a, 1.1 b\r\n\r\n"))
(test-assert "the head as Guile's: a reason of two words, bare LF, obs-fold"
  (same-as-guile? "HTTP/1.0 404 Not  Found \nContent-Length:2\nX-A: b\n continued: x\n\n"))
(test-assert "the head as Guile's: a folded line keeps its blanks, less its CR"
  (same-as-guile? "HTTP/1.1 200 OK\r\nX-A: b\r\n c: d \t\r\n\r\n"))
(test-assert "the head as Guile's: an empty reason phrase"
  (same-as-guile? "HTTP/1.1 204 \r\n\r\n"))
(test-assert "the head as Guile's: a byte over #x7F in a value, as latin-1"
  (let ((bv (bytevector-concat (string->utf8 "HTTP/1.1 200 OK\r\nX-Name: caf")
                               #vu8(#xE9) (string->utf8 "\r\n\r\n"))))
    (equal? (string-append "caf" (string (integer->char #xE9)))
            (assq-ref (response-headers
                       (fed (list bv) (lambda (conn)
                                        (let-values (((r size) (read-response-head conn timeouts "t")))
                                          r))))
                      'x-name))))
(test-equal "a status code of four digits is malformed"
  '(malformed-response #f)
  (fed (list (string->utf8 "HTTP/1.1 2000 OK\r\n\r\n")) read-exchange))

(test-end "web/client/response")
