;;; tests/web/client.scm --- (plucky web client) against real servers

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The client talks to a plucky server (GET, POST, HEAD, keep-alive,
;;; streaming), to a raw server this file runs in a child process for
;;; the framings and faults no good server sends (close-delimited and
;;; chunked bodies, 1xx, garbage, bad chunk sizes, huge heads, a server
;;; that never answers, redirects, connections it counts), to a plucky
;;; TLS server with a test CA made by openssl, and to nginx, started
;;; here with a configuration in a temporary directory.  Each fault must
;;; raise its documented reason and leave no descriptor open (counted in
;;; /proc/self/fd).  A fake loop runs the client as a handler would run:
;;; it must suspend, not block, and close its socket when cancelled.
;;;
;;; Code:

(use-modules ((plucky http) #:select (bytevector-concatenate))
             (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (ice-9 binary-ports)
             (ice-9 exceptions)
             (ice-9 ftw)
             (ice-9 match)
             (ice-9 rdelim)
             (ice-9 threads)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             ((tests lib server) #:hide (http-get))
             (plucky server)
             (plucky server suspend)
             (plucky server tls)
             (plucky sys libc)
             (plucky web client))

(test-begin "web/client")

;;;
;;; Helpers
;;;

(define (open-fds)
  ;; -> the number of sockets this process holds (Guile opens a pipe of
  ;; its own when it first runs finalizers)
  (count (lambda (name)
           (let ((target (false-if-exception (readlink (string-append "/proc/self/fd/" name)))))
             (and target (string-prefix? "socket:" target))))
         (or (scandir "/proc/self/fd" string->number) '())))

(define-syntax-rule (reason-of body ...)
  ;; -> the reason of the &http-client-error BODY raises, or 'no-error
  (with-exception-handler
      (lambda (e)
        (if (http-client-error? e)
            (http-client-error-reason e)
            (list 'other (exception-message* e))))
    (lambda () body ... 'no-error)
    #:unwind? #t))

(define (exception-message* e)
  (if (exception-with-message? e) (exception-message e) e))

(define-syntax-rule (error-of body ...)
  ;; -> the &http-client-error BODY raises, or #f
  (with-exception-handler
      (lambda (e) (and (http-client-error? e) e))
    (lambda () body ... #f)
    #:unwind? #t))

(define (seconds-of thunk)
  (let ((start (now-seconds)))
    (thunk)
    (exact->inexact (- (now-seconds) start))))

(define (url port path) (format #f "http://127.0.0.1:~a~a" port path))

;;;
;;; A plucky server
;;;

(define (plucky-handler request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path "/echo")
      (values '((content-type . (text/plain (charset . "utf-8"))))
              (string-append (symbol->string (request-method request)) " "
                             (if body (utf8->string body) ""))))
     ((string=? path "/bytes")
      (values '((content-type . (application/octet-stream)))
              (make-bytevector 200000 7)))
     ((string=? path "/stream")
      (values '((content-type . (text/plain)))
              (lambda (port)
                (do ((i 0 (+ i 1))) ((= i 1000))
                  (display "line of a streamed body\n" port)))))
     (else
      (values '((content-type . (text/plain (charset . "utf-8")))) "hello, client")))))

(define plucky-server (start-server plucky-handler))
(define plucky-port (server-port plucky-server))

(test-group "http-get"
  (let ((response body (http-get (url plucky-port "/"))))
    (test-eqv "200" 200 (response-code response))
    (test-equal "a text body decoded to a string" "hello, client" body))
  (let ((response body (http-get (url plucky-port "/") #:decode-body? #f)))
    (test-equal "a bytevector without #:decode-body?" (string->utf8 "hello, client") body))
  (let ((response body (http-get (url plucky-port "/bytes"))))
    (test-equal "200000 bytes of octets, a bytevector" '(#t 200000)
      (list (bytevector? body) (bytevector-length body))))
  (let ((response body (http-get (url plucky-port "/stream"))))
    (test-equal "a streamed (chunked) body" (* 1000 (string-length "line of a streamed body\n"))
      (string-length body)))
  (let ((sock (socket AF_INET SOCK_STREAM 0)))
    (connect sock AF_INET INADDR_LOOPBACK plucky-port)
    (let ((response body (http-get (url plucky-port "/") #:port sock)))
      (test-equal "#:port: Guile's client on that port, which it closes"
        '(200 "hello, client" #t)
        (list (response-code response) body (port-closed? sock))))))

(test-group "http-post, http-put, http-head"
  (let ((response body (http-post (url plucky-port "/echo") #:body "données")))
    (test-equal "a string body, sent as UTF-8" "POST données" body))
  (let ((response body (http-put (url plucky-port "/echo") #:body (string->utf8 "raw"))))
    (test-equal "a bytevector body" "PUT raw" body))
  (let ((response body (http-post (url plucky-port "/echo")
                                  #:body (lambda (port) (display "written" port)))))
    (test-equal "a procedure body" "POST written" body))
  (let ((response body (http-head (url plucky-port "/"))))
    (test-equal "HEAD: a response and #f" '(200 #f) (list (response-code response) body)))
  (let ((response body (http-delete (url plucky-port "/echo"))))
    (test-equal "DELETE" "DELETE " body)))

(test-group "keep-alive"
  (close-idle-connections!)
  (let* ((before (open-fds))
         (origin (format #f "http://127.0.0.1:~a" plucky-port)))
    (http-get (url plucky-port "/") #:keep-alive? #t)
    (test-eqv "the connection is pooled" 1 (pool-idle-count origin))
    (test-eqv "one descriptor more" (+ before 1) (open-fds))
    (http-get (url plucky-port "/bytes") #:keep-alive? #t)
    (http-post (url plucky-port "/echo") #:body "x" #:keep-alive? #t)
    (test-eqv "reused: still one connection" 1 (pool-idle-count origin))
    (test-eqv "still one descriptor more" (+ before 1) (open-fds))
    (http-get (url plucky-port "/"))
    (test-eqv "without keep-alive?, no connection kept" (+ before 1) (open-fds))
    (close-idle-connections!)
    (test-eqv "close-idle-connections! closes it" before (open-fds))))

(test-group "streaming"
  (close-idle-connections!)
  (let* ((before (open-fds))
         (response reader (http-request-stream (url plucky-port "/bytes"))))
    (let lp ((total 0) (pieces 0))
      (let ((piece (reader)))
        (if (eof-object? piece)
            (test-equal "the reader hands out the body in pieces" '(200000 #t)
              (list total (> pieces 1)))
            (lp (+ total (bytevector-length piece)) (+ pieces 1)))))
    (test-eqv "read whole: its connection is closed" before (open-fds)))
  (let* ((before (open-fds))
         (response reader (http-request-stream (url plucky-port "/bytes"))))
    (reader)
    (close-reader! reader)
    (test-eqv "given up half-way: close-reader! closes it" before (open-fds)))
  (let* ((before (open-fds))
         (response reader (http-request-stream (url plucky-port "/bytes")
                                               #:keep-alive? #t)))
    (reader)
    (close-reader! reader)
    (test-equal "with keep-alive?, given up half-way: closed, not pooled" '(0 #t)
      (list (pool-idle-count (format #f "http://127.0.0.1:~a" plucky-port))
            (= before (open-fds)))))
  (let* ((response reader (http-request-stream (url plucky-port "/bytes")
                                               #:keep-alive? #t))
         (first (reader))
         (rest (read-reader-rest reader)))
    (test-equal "read-reader-rest: the rest of the body, then the pool has it"
      '(200000 1 #t #vu8())
      (list (+ (bytevector-length first) (bytevector-length rest))
            (pool-idle-count (format #f "http://127.0.0.1:~a" plucky-port))
            (eof-object? (reader))
            (read-reader-rest reader)))
    (close-idle-connections!))
  (let* ((before (open-fds))
         (response port (http-get (url plucky-port "/stream") #:streaming? #t)))
    (test-equal "#:streaming? outside a handler: a port" #t (port? port))
    (test-equal "the port's text" "line of a streamed body"
      (read-line port))
    (close-port port)
    (test-eqv "closing the port closes the connection" before (open-fds))))

;;;
;;; A raw server for odd framings and faults
;;;

(define responses
  ;; path -> (response text . what then: keep | close | hang)
  `(("/cl" "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello" . keep)
    ("/chunked" ,(string-append "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                                "Content-Type: text/plain\r\n\r\n"
                                "5\r\nhello\r\n1;ext=1\r\n,\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
     . keep)
    ("/until-close" "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end" . close)
    ("/http10" "HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nold" . keep)
    ("/continue" "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" . keep)
    ("/204" "HTTP/1.1 204 No Content\r\n\r\n" . keep)
    ("/304" "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n" . keep)
    ("/lf-only" "HTTP/1.1 200 OK\nContent-Length: 2\n\nlf" . keep)
    ("/silent" "" . hang)
    ("/garbage" "SSH-2.0-OpenSSH_9.2\r\n\r\n" . close)
    ("/no-colon" "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nBroken header\r\n\r\nok" . close)
    ("/bad-chunk" "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n" . close)
    ("/short" "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort" . close)
    ("/half-head" "HTTP/1.1 200 OK\r\nContent-Le" . close)
    ("/nothing" "" . close)
    ("/big-head" ,(string-append "HTTP/1.1 200 OK\r\n"
                                 (string-concatenate
                                  (map (lambda (i) (format #f "X-Filler-~a: ~a\r\n" i
                                                           (make-string 100 #\x)))
                                       (iota 700)))
                                 "\r\n") . close)
    ("/many-fields" ,(string-append "HTTP/1.1 200 OK\r\n"
                                    (string-concatenate
                                     (map (lambda (i) (format #f "X-~a: y\r\n" i)) (iota 300)))
                                    "Content-Length: 0\r\n\r\n") . close)
    ("/big" ,(string-append "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"
                            (make-string 100000 #\b)) . keep)
    ("/big-chunked" ,(string-append "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                    (string-concatenate
                                     (map (lambda (i) (string-append "3e8\r\n" (make-string 1000 #\c) "\r\n"))
                                          (iota 100)))
                                    "0\r\n\r\n") . keep)
    ("/big-close" ,(string-append "HTTP/1.1 200 OK\r\n\r\n" (make-string 100000 #\d)) . close)
    ("/redirect" "HTTP/1.1 302 Found\r\nLocation: /cl\r\nContent-Length: 5\r\n\r\nmoved" . keep)
    ("/redirect-relative" "HTTP/1.1 301 Moved\r\nLocation: cl\r\nContent-Length: 0\r\n\r\n" . keep)
    ("/see-other" "HTTP/1.1 303 See Other\r\nLocation: /echo-method\r\nContent-Length: 0\r\n\r\n" . keep)
    ("/redirect-loop" "HTTP/1.1 307 Again\r\nLocation: /redirect-loop\r\nContent-Length: 0\r\n\r\n" . keep)
    ("/closes-after" "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nonce" . close)
    ;; answers, then closes the connection when the next request comes,
    ;; as a server whose keep-alive time-out ends as the request arrives
    ("/drop-next" "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\narmed" . drop-next)))

(define (read-request-head port)
  ;; -> (method path content-length) of the next request on PORT, or #f
  (let lp ((bytes #vu8()))
    (let ((end (find-head-end bytes 0)))
      (if end
          (let* ((text (utf8->string (sub-bytevector bytes 0 end)))
                 (first (car (string-split text #\space)))
                 (path (cadr (string-split text #\space)))
                 (cl (let ((i (string-contains (string-downcase text) "content-length: ")))
                       (and i (string->number
                               (car (string-split (substring text (+ i 16)) #\return)))))))
            (when (and cl (> cl (- (bytevector-length bytes) end)))
              (get-bytevector-n port (- cl (- (bytevector-length bytes) end))))
            (list first path))
          (let ((more (get-bytevector-some port)))
            (and (not (eof-object? more))
                 (lp (bytevector-concatenate (list bytes more)))))))))

(define accepted 0)

(define (serve-raw port)
  (let lp ()
    (match (read-request-head port)
      (#f (close-port port))
      ((method path)
       (match (cond ((string=? path "/count")
                     (let ((n (number->string accepted)))
                       (cons (format #f "HTTP/1.1 200 OK\r\nContent-Length: ~a\r\n\r\n~a"
                                     (string-length n) n)
                             'keep)))
                    ((string=? path "/echo-method")
                     (cons (format #f "HTTP/1.1 200 OK\r\nContent-Length: ~a\r\n\r\n~a"
                                   (string-length method) method)
                           'keep))
                    ((assoc path responses) => cdr)
                    (else (cons "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n" 'keep)))
         ((text . then)
          (put-bytevector port (string->utf8 text))
          (force-output port)
          (case then
            ((keep) (lp))
            ((close) (close-port port))
            ((drop-next) (read-request-head port) (close-port port))
            ((hang) (get-bytevector-all port) (close-port port)))))))))

(define (raw-server report)
  (let ((sock (socket AF_INET SOCK_STREAM 0)))
    (setsockopt sock SOL_SOCKET SO_REUSEADDR 1)
    (bind sock AF_INET INADDR_LOOPBACK 0)
    (listen sock 64)
    (report (sockaddr:port (getsockname sock)))
    (let lp ()
      (let ((client (car (accept sock))))
        (set! accepted (+ accepted 1))
        (call-with-new-thread
         (lambda ()
           (catch #t (lambda () (serve-raw client)) (lambda _ (close-port client)))))
        (lp)))))

(define raw (start-child raw-server))
(define raw-port (server-port raw))
(define raw-origin (format #f "http://127.0.0.1:~a" raw-port))

(define (raw-get path . args)
  (apply http-get (url raw-port path) args))

(test-group "framings"
  (let ((response body (raw-get "/cl")))
    (test-equal "Content-Length" "hello" body))
  (let ((response body (raw-get "/chunked")))
    (test-equal "chunked, with an extension and a trailer" "hello, world" body))
  (let ((response body (raw-get "/until-close")))
    (test-equal "until the server closes" "until the end" body))
  (let ((response body (raw-get "/http10" #:decode-body? #f)))
    (test-equal "HTTP/1.0 with Content-Length" '((1 . 0) #vu8(111 108 100))
      (list (response-version response) body)))
  (let ((response body (raw-get "/continue")))
    (test-equal "100 and 103 read past" '(200 "ok")
      (list (response-code response) (utf8->string body))))
  (let ((response body (raw-get "/204")))
    (test-equal "204: no body" '(204 #vu8()) (list (response-code response) body)))
  (let ((response body (raw-get "/304")))
    (test-equal "304: no body, whatever its Content-Length" '(304 #vu8())
      (list (response-code response) body)))
  (let ((response body (raw-get "/lf-only" #:decode-body? #f)))
    (test-equal "line ends of LF alone" "lf" (utf8->string body))))

(test-group "keep-alive with the raw server"
  (close-idle-connections!)
  (let* ((first (let ((r b (raw-get "/count" #:keep-alive? #t #:decode-body? #f)))
                  (string->number (utf8->string b))))
         (second (let ((r b (raw-get "/count" #:keep-alive? #t #:decode-body? #f)))
                   (string->number (utf8->string b))))
         (third (let ((r b (raw-get "/chunked" #:keep-alive? #t)))
                  (let ((r b (raw-get "/count" #:keep-alive? #t #:decode-body? #f)))
                    (string->number (utf8->string b)))))
         (fresh (let ((r b (raw-get "/count" #:decode-body? #f)))
                  (string->number (utf8->string b)))))
    (test-equal "the server accepted one connection for three requests, a new one without keep-alive"
      (list first first (+ first 1))
      (list second third fresh)))
  (close-idle-connections!)
  (raw-get "/until-close" #:keep-alive? #t)
  (test-eqv "a close-delimited body: its connection is not pooled" 0
    (pool-idle-count raw-origin))
  (raw-get "/cl" #:keep-alive? #t)
  (test-eqv "a Content-Length body: pooled" 1 (pool-idle-count raw-origin))
  (raw-get "/http10" #:keep-alive? #t)
  (test-eqv "HTTP/1.0 without keep-alive: not pooled" 0 (pool-idle-count raw-origin))
  (let ((count (let ((r b (raw-get "/count" #:keep-alive? #t #:decode-body? #f)))
                 (string->number (utf8->string b)))))
    ;; /closes-after answers, then closes a connection it was asked to keep.
    (raw-get "/closes-after" #:keep-alive? #t)
    (let ((response body (raw-get "/cl" #:keep-alive? #t)))
      (test-equal "a pooled connection the server closed: the next request gets its answer"
        "hello" body)))
  (close-idle-connections!)
  (raw-get "/drop-next" #:keep-alive? #t)
  (let ((response body (raw-get "/cl" #:keep-alive? #t)))
    (test-equal "a pooled connection closed as the request came: GET sent again on a new one"
      "hello" body))
  (close-idle-connections!)
  (raw-get "/drop-next" #:keep-alive? #t)
  (test-equal "…but not POST, which is not idempotent: closed" 'closed
    (reason-of (http-post (url raw-port "/cl") #:body "x" #:keep-alive? #t)))
  (set-pool-limits! #:max-idle 2)
  (close-idle-connections!)
  (let ((streams (map (lambda (i)
                        (let ((r reader (http-request-stream (url raw-port "/big")
                                                             #:keep-alive? #t)))
                          reader))
                      (iota 4))))
    (for-each (lambda (reader)
                (let lp () (unless (eof-object? (reader)) (lp))))
              streams)
    (test-eqv "the pool keeps at most #:max-idle per origin" 2 (pool-idle-count raw-origin)))
  (set-pool-limits! #:max-idle 32 #:idle-timeout 50)
  (let ((start (now-seconds)))
    ;; A connection idle longer than the idle time-out is dropped when the
    ;; pool is next used (sweeps are a second apart).
    (let wait () (when (< (- (now-seconds) start) 1.1) (usleep 100000) (wait)))
    (test-eqv "idle past the idle time-out: dropped" 0 (pool-idle-count raw-origin)))
  (close-idle-connections!)
  (set-pool-limits! #:max-idle 32 #:idle-timeout 15000))

(test-group "faults"
  (close-idle-connections!)
  (let ((before (open-fds)))
    (let* ((e #f)
           (secs (seconds-of (lambda ()
                               (set! e (error-of (raw-get "/silent" #:read-timeout-ms 300)))))))
      (test-equal "a server that never answers: read-timeout" 'read-timeout
        (and e (http-client-error-reason e)))
      (test-assert "…after about 300 ms" (< 0.25 secs 3)))
    (let ((secs (seconds-of
                 (lambda ()
                   (test-equal "the whole exchange's #:timeout-ms: timeout" 'timeout
                     (reason-of (raw-get "/silent" #:timeout-ms 200)))))))
      (test-assert "…after about 200 ms" (< 0.15 secs 3)))
    (test-equal "nobody listening: connect-refused" 'connect-refused
      (reason-of (http-get (url (free-port) "/"))))
    (test-equal "garbage: malformed-response" 'malformed-response
      (reason-of (raw-get "/garbage")))
    (test-eqv "…at byte 0" 0 (http-client-error-offset (error-of (raw-get "/garbage"))))
    (test-equal "a field line without a colon: malformed-response at its offset"
      '(malformed-response 36)
      (let ((e (error-of (raw-get "/no-colon"))))
        (list (http-client-error-reason e) (http-client-error-offset e))))
    (let ((e (error-of (raw-get "/bad-chunk"))))
      (test-equal "a bad chunk size: malformed-response at its offset"
        (list 'malformed-response (+ (string-length "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                                     (string-length "5\r\nhello\r\n")))
        (list (http-client-error-reason e) (http-client-error-offset e))))
    (test-equal "a body cut short: closed" 'closed (reason-of (raw-get "/short")))
    (test-equal "a head cut short: malformed-response" 'malformed-response
      (reason-of (raw-get "/half-head")))
    (test-equal "no response at all: closed" 'closed (reason-of (raw-get "/nothing")))
    (test-equal "a 70 kB head: head-too-large" 'head-too-large
      (reason-of (raw-get "/big-head")))
    (test-equal "300 header fields: head-too-large" 'head-too-large
      (reason-of (raw-get "/many-fields")))
    (test-equal "Content-Length past #:max-body: body-too-large" 'body-too-large
      (reason-of (raw-get "/big" #:max-body 50000 #:keep-alive? #t)))
    (test-equal "chunked past #:max-body: body-too-large" 'body-too-large
      (reason-of (raw-get "/big-chunked" #:max-body 50000 #:keep-alive? #t)))
    (test-equal "close-delimited past #:max-body: body-too-large" 'body-too-large
      (reason-of (raw-get "/big-close" #:max-body 50000)))
    (test-equal "bodies within #:max-body" '(100000 100000 100000)
      (map (lambda (path)
             (let ((r b (raw-get path #:max-body 100000 #:decode-body? #f)))
               (bytevector-length b)))
           '("/big" "/big-chunked" "/big-close")))
    (test-equal "not http: bad-uri" 'bad-uri (reason-of (http-get "ftp://127.0.0.1/")))
    (test-eqv "no descriptor left open by any of them" before (open-fds))
    (test-eqv "…nor pooled" 0 (pool-idle-count raw-origin))))

(test-group "connect timeout"
  ;; A listener whose queue is full and that never accepts: Linux drops
  ;; the SYNs of further connections, which then wait.
  (let* ((before (open-fds))
         (sock (socket AF_INET SOCK_STREAM 0)))
    (bind sock AF_INET INADDR_LOOPBACK 0)
    (listen sock 0)
    (let* ((port (sockaddr:port (getsockname sock)))
           (fillers (map (lambda (i)
                           (let ((s (socket AF_INET (logior SOCK_STREAM SOCK_NONBLOCK) 0)))
                             (false-if-exception (connect s AF_INET INADDR_LOOPBACK port))
                             s))
                         (iota 4)))
           (reason #f)
           (secs (seconds-of (lambda ()
                               (set! reason (reason-of (http-get (url port "/")
                                                                 #:connect-timeout-ms 300)))))))
      (test-equal "connect-timeout" 'connect-timeout reason)
      (test-assert "…after about 300 ms" (< 0.25 secs 3))
      (for-each close-port fillers)
      (close-port sock)
      (test-eqv "no descriptor left open" before (open-fds)))))

(test-group "redirects"
  (let ((response body (raw-get "/redirect")))
    (test-equal "not followed by default" '(302 "moved")
      (list (response-code response) (utf8->string body))))
  (let ((response body (raw-get "/redirect" #:follow-redirects 3)))
    (test-equal "followed when asked" '(200 "hello") (list (response-code response) body)))
  (let ((response body (raw-get "/redirect-relative" #:follow-redirects 1)))
    (test-equal "a relative Location" "hello" body))
  (let ((response body (http-post (url raw-port "/see-other") #:body "x"
                                  #:follow-redirects 1 #:decode-body? #f)))
    (test-equal "303 after POST: GET" "GET" (utf8->string body)))
  (test-equal "past #:follow-redirects: too-many-redirects" 'too-many-redirects
    (reason-of (raw-get "/redirect-loop" #:follow-redirects 3)))
  (let ((before (open-fds)))
    (raw-get "/redirect" #:follow-redirects 1 #:keep-alive? #t)
    (test-eqv "a followed redirect on a kept connection: one connection" 1
      (pool-idle-count raw-origin))
    (close-idle-connections!)
    (test-eqv "no descriptor left" before (open-fds))))

;;;
;;; Suspending: the client as a handler the loop runs
;;;

;; A loop of one request: runs THUNK under the suspend prompt, waits
;; itself for what the handler registers, and resumes it.  With
;; CANCEL-READING?, a wait for a socket to be readable is resumed with
;; &request-cancelled instead, as when the handler's client left.
(define* (run-as-handler thunk #:key (cancel-reading? #f))
  (let* ((watch #f)
         (timer #f)
         (suspensions 0)
         (waits (make-waits (lambda (fd write? on-ready arg ms timeout-arg)
                              (set! watch (list fd write? (lambda () (on-ready arg))))
                              (set! timer (and ms (cons ms (lambda () (on-ready timeout-arg))))))
                            (lambda (fd) (set! watch #f) (set! timer #f))
                            (lambda (ms thunk) (set! timer (cons ms thunk)) timer)
                            (lambda (t) (set! timer #f))
                            (lambda (thunk on-done)
                              (on-done (lambda () (thunk))))
                            (current-thread)))
         (make-cancelled (record-constructor &request-cancelled)))
    (install-waits! waits)
    (let ((results
           (let lp ((step (lambda () (call-with-values thunk list))))
             (call-with-prompt suspend-tag
               (lambda ()
                 (enter-suspendable!)
                 (let ((results (step)))
                   (leave-suspendable!)
                   results))
               (lambda (k what kind label register)
                 (leave-suspendable!)
                 (set! suspensions (+ 1 suspensions))
                 (let* ((resumed #f)
                        (undo (register (lambda (thunk) (set! resumed thunk)))))
                   (cond
                    (resumed (lp (lambda () (k resumed))))
                    ((and cancel-reading? watch (not (cadr watch)))
                     (undo)
                     (lp (lambda ()
                           (k (lambda () (raise-exception (make-cancelled 'timeout)))))))
                    (watch
                     (match watch
                       ((fd write? on-ready)
                        (let ((ready? (fd-wait fd (if write? 'write 'read)
                                               (if timer (car timer) 10000))))
                          (if (or ready? (not timer)) (on-ready) ((cdr timer)))
                          (lp (lambda () (k resumed)))))))
                    (else (error "fake loop: nothing to wait for" kind)))))))))
      (install-waits! #f)
      (cons suspensions results))))

(test-group "in a handler"
  (close-idle-connections!)
  (match (run-as-handler (lambda () (http-get (url plucky-port "/bytes"))))
    ((suspensions response body)
     (test-assert "it suspends rather than blocks" (> suspensions 0))
     (test-eqv "and gets its answer" 200000 (bytevector-length body))))
  (match (run-as-handler
          (lambda ()
            (let ((r port (http-get (url plucky-port "/stream") #:streaming? #t)))
              (list (port? port) (read-line port)))))
    ((suspensions result)
     (test-equal "#:streaming?: a port over the body read first"
       '(#t "line of a streamed body") result)))
  (test-equal "#:streaming? in a handler is bounded by #:max-body" '(suspended body-too-large)
    (match (run-as-handler
            (lambda () (reason-of (http-get (url raw-port "/big-close") #:streaming? #t
                                            #:max-body 1000))))
      ((n reason) (list (if (> n 0) 'suspended 'blocked) reason))))
  (let ((before (open-fds)))
    (test-equal "cancelled while it waits: &request-cancelled" 'cancelled
      (with-exception-handler
          (lambda (e) (if (request-cancelled? e) 'cancelled e))
        (lambda () (run-as-handler (lambda () (raw-get "/silent")) #:cancel-reading? #t))
        #:unwind? #t))
    (install-waits! #f)
    (leave-suspendable!)
    (test-eqv "…and its socket is closed" before (open-fds))))

;;;
;;; TLS against plucky, with a test CA
;;;

(define dir
  (let ((name (string-copy "/tmp/plucky-client-XXXXXX")))
    (close-port (mkstemp! name))
    (delete-file name)
    (mkdir name)
    name))

(define (file name) (string-append dir "/" name))

(define (shell command)
  (let ((p (spawn "sh" (list "-c" command))))
    (let ((status (process-wait p #:timeout 60)))
      (close-port (process-stdout p))
      (close-port (process-stderr p))
      (and status (status:exit-val status)))))

(test-eqv "openssl makes a test CA and a certificate for localhost" 0
  (shell (string-append
          "set -e; cd " dir "; exec >/dev/null 2>&1;"
          "mkdir ca other;"
          "openssl ecparam -name prime256v1 -genkey -noout -out ca.key;"
          "openssl req -x509 -new -key ca.key -subj /CN=plucky-client-ca -days 2 -out ca/ca.pem;"
          "openssl ecparam -name prime256v1 -genkey -noout -out other.key;"
          "openssl req -x509 -new -key other.key -subj /CN=other-ca -days 2 -out other/other.pem;"
          "openssl ecparam -name prime256v1 -genkey -noout -out leaf.key;"
          "openssl req -new -key leaf.key -subj /CN=localhost -out leaf.csr;"
          "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > leaf.ext;"
          "openssl x509 -req -in leaf.csr -CA ca/ca.pem -CAkey ca.key -CAcreateserial -days 2"
          " -extfile leaf.ext -out leaf.pem")))

(define tls-server
  (start-child
   (lambda (report)
     (run-server plucky-handler #:host "127.0.0.1" #:port 0 #:workers 1
                 #:tls (lambda ()
                         (tls-transport-maker
                          (load-tls-credentials (list (cons (file "leaf.pem")
                                                            (file "leaf.key"))))))
                 #:on-listen (lambda (sockets) (report (listener-port (car sockets))))))))
(define tls-port (server-port tls-server))

(test-group "TLS"
  (close-idle-connections!)
  (let ((before (open-fds)))
    (parameterize ((x509-certificate-directory (file "ca")))
      (let ((response body (http-get (format #f "https://localhost:~a/" tls-port))))
        (test-equal "https with the test CA" '(200 "hello, client")
          (list (response-code response) body)))
      (let ((response body (http-get (format #f "https://127.0.0.1:~a/bytes" tls-port))))
        (test-eqv "by IP address, 200000 bytes" 200000 (bytevector-length body)))
      (let ((response body (http-post (format #f "https://localhost:~a/echo" tls-port)
                                      #:body (make-string 100000 #\p))))
        (test-eqv "a 100 kB POST" 100005 (string-length body)))
      (let ((origin (format #f "https://localhost:~a" tls-port)))
        (http-get (format #f "https://localhost:~a/" tls-port) #:keep-alive? #t)
        (http-get (format #f "https://localhost:~a/stream" tls-port) #:keep-alive? #t)
        (http-get (format #f "https://localhost:~a/" tls-port) #:keep-alive? #t)
        (test-eqv "keep-alive over TLS: one connection" 1 (pool-idle-count origin))
        (close-idle-connections!)))
    (parameterize ((x509-certificate-directory (file "other")))
      (test-equal "another CA: certificate" 'certificate
        (reason-of (http-get (format #f "https://localhost:~a/" tls-port))))
      (let ((response body (http-get (format #f "https://localhost:~a/" tls-port)
                                     #:verify-certificate? #f)))
        (test-eqv "…unless #:verify-certificate? #f" 200 (response-code response))))
    ;; plucky answers plain HTTP on its TLS port with a 400, as nginx does.
    (let ((response body (http-get (url tls-port "/") #:read-timeout-ms 5000)))
      (test-eqv "plain HTTP to a TLS port: plucky's 400, not a hang"
        400 (response-code response)))
    (test-equal "TLS to a plain HTTP server: tls-failed" 'tls-failed
      (reason-of (http-get (format #f "https://127.0.0.1:~a/" plucky-port)
                           #:verify-certificate? #f #:read-timeout-ms 5000)))
    (test-eqv "no descriptor left" before (open-fds))))

;;;
;;; nginx
;;;

(define nginx (nginx-program))

(if (not nginx)
    (begin
      (test-skip 1)
      (test-assert "nginx (scripts/install-deps check installs it)" #f))
    (let ((process port (start-nginx dir)))
      (test-assert "nginx listens" port)
      (when port
        (test-group "nginx"
          (close-idle-connections!)
          (let ((before (open-fds)))
            (let ((response body (http-get (url port "/hello"))))
              (test-equal "return 200" '(200 "hello from nginx")
                (list (response-code response) body)))
            (let ((response body (http-get (url port "/static.txt"))))
              (test-eqv "a static file" 50000 (string-length body)))
            (let ((response body (http-head (url port "/static.txt"))))
              (test-equal "HEAD: its length, no body" '(50000 #f)
                (list (response-content-length response) body)))
            (let ((response body (http-get (url port "/moved") #:follow-redirects 1)))
              (test-equal "a redirect followed" "hello from nginx" body))
            (let ((origin (format #f "http://127.0.0.1:~a" port)))
              (do ((i 0 (+ i 1))) ((= i 5))
                (http-get (url port "/static.txt") #:keep-alive? #t))
              (http-head (url port "/hello") #:keep-alive? #t)
              (test-eqv "five GETs and a HEAD on one kept connection" 1
                (pool-idle-count origin))
              (let ((response body (http-get (url port "/missing") #:keep-alive? #t)))
                (test-eqv "404" 404 (response-code response)))
              (close-idle-connections!))
            (test-eqv "no descriptor left" before (open-fds))))
        (let ((status killed? (process-stop process)))
          (test-assert "nginx stops on SIGTERM" (not killed?))))))

;;;
;;; The end
;;;

(stop-server tls-server)
(stop-server raw)
(stop-server plucky-server)
(shell (string-append "rm -rf " dir))

(test-end "web/client")
