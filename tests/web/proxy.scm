;;; tests/web/proxy.scm --- (plucky web proxy) between a client and real upstreams

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; plucky runs as the proxy, in a child process, in front of: a plucky
;;; upstream (echoes, statuses, a 5 MB chunked body, slow and silent
;;; answers), a raw upstream this file runs for the bytes no good server
;;; sends (hop-by-hop response headers, garbage), a port nothing listens
;;; on, and nginx, started with its own configuration in a temporary
;;; directory.  Requests go in over raw sockets (for exact headers) or
;;; through (plucky web client) outside a handler, which blocks.  Every
;;; fault must give its 502 or 504 in time, and the proxy's descriptors
;;; (counted in /proc/PID/fd) must come back to their level.
;;;
;;; Code:

(use-modules ((plucky http) #:select (bytevector-concatenate))
             (srfi srfi-1)
             (srfi srfi-64)
             ((srfi srfi-19) #:select (date-year))
             (srfi srfi-71)
             (rnrs bytevectors)
             (ice-9 binary-ports)
             (ice-9 ftw)
             (ice-9 match)
             (ice-9 threads)
             (web request)
             (web response)
             (web uri)
             ((web http) #:select (header->string write-header))
             (tests lib harness)
             ((tests lib server) #:hide (http-get))
             (plucky server)
             (plucky web client)
             (plucky web proxy)
             ((plucky web compress) #:select (compress-middleware))
             ((plucky web middleware) #:select (wrap with-headers with-response-headers)))

(test-begin "web/proxy")

;;;
;;; Helpers
;;;

(define (url port path) (format #f "http://127.0.0.1:~a~a" port path))
(define (origin port) (format #f "http://127.0.0.1:~a" port))

(define (text-body text)
  (values '((content-type . (text/plain (charset . "utf-8")))) text))

(define (request-head-text request)
  ;; the head that reached the upstream, each header as Guile writes it
  ;; or, when Guile's parser refused its value, as it came
  (call-with-output-string
    (lambda (port)
      (format port "~a ~a HTTP/~a.~a\r\n" (request-method request)
              (uri->string (request-uri request))
              (car (request-version request)) (cdr (request-version request)))
      (for-each (match-lambda
                  ((name . (? string? value))
                   (format port "~a: ~a\r\n" (header->string name) value))
                  ((name . value) (write-header name value port)))
                (request-headers request))
      (display "\r\n" port))))

(define* (fetch port request-text #:key (head? #f))
  ;; -> (values response body-string) of one raw request on a new connection
  (with-client port
    (lambda (client)
      (client-send! client request-text)
      (let ((response body (client-read-response client #:timeout 10 #:head? head?)))
        (values response (and body (utf8->string body)))))))

(define (header-line? text line)
  (and (string-contains text (string-append "\r\n" line "\r\n")) #t))

(define (seconds-of thunk)
  (let ((start (get-internal-real-time)))
    (thunk)
    (exact->inexact (/ (- (get-internal-real-time) start) internal-time-units-per-second))))

(define (proxy-fds server)
  ;; -> the descriptors the proxy's process holds
  (length (or (scandir (format #f "/proc/~a/fd" (server-pid server)) string->number) '())))

(define five-mb (* 5 1024 1024))

(define (pattern-byte i) (modulo (* i 7) 251))

(define big-body
  (let ((bv (make-bytevector five-mb)))
    (do ((i 0 (+ i 1))) ((= i five-mb) bv)
      (bytevector-u8-set! bv i (pattern-byte i)))))

;;;
;;; The plucky upstream
;;;

(define (upstream-handler request body)
  (let ((path (uri-path (request-uri request))))
    (match path
      ("/hello" (text-body "hello from upstream"))
      ("/echo"
       (text-body (string-append (symbol->string (request-method request)) " "
                                 (uri->string (request-uri request)) " "
                                 (if body (utf8->string body) ""))))
      ("/head" (text-body (request-head-text request)))
      ("/teapot"
       (values (build-response #:code 418 #:reason-phrase "I'm a teapot"
                               #:headers '((content-type . (text/plain))
                                           (x-upstream . "yes")))
               "short and stout"))
      ("/no-content" (values (build-response #:code 204) #f))
      ("/big-chunked"
       ;; 5 MB, chunked: the proxy cannot know its length
       (values '((content-type . (application/octet-stream))
                 (transfer-encoding . ((chunked))))
               (lambda (port)
                 (let lp ((at 0))
                   (when (< at five-mb)
                     (let ((n (min 100000 (- five-mb at))))
                       (put-bytevector port big-body at n)
                       (lp (+ at n))))))))
      ("/big-length"
       ;; 2 MB with a Content-Length over the proxy's buffer limit
       (values '((content-type . (application/octet-stream)))
               (make-bytevector (* 2 1024 1024) 42)))
      ("/slow" (sleep-ms 700) (text-body "slow"))
      ("/fast" (text-body "fast"))
      ("/never" (sleep-ms 60000) (text-body "too late"))
      (_ (values (build-response #:code 404) "no such upstream page")))))

(define upstream (start-server upstream-handler #:workers 2))
(define upstream-port (server-port upstream))

;;;
;;; A raw upstream, for what plucky would not send
;;;

(define raw-responses
  `(("/hop" . ,(string-append
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n"
                "Connection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n"
                "Proxy-Authenticate: Basic realm=\"r\"\r\nTrailer: X-T\r\nUpgrade: foo\r\n"
                "X-End: kept\r\n\r\nok"))
    ("/via" . ,(string-append
                "HTTP/1.1 200 Fine Thanks\r\nVia: 1.0 origin\r\nContent-Length: 2\r\n"
                "Proxy-Connection: keep-alive\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                "via: 1.1 cache\r\nX-Odd:\tvalue  \r\n\r\nok"))
    ("/fold" . "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok")
    ;; bare LF line ends among CR LF ones, each field passed on with CR LF
    ("/lf" . "HTTP/1.1 200 OK\nX-A: a\nContent-Length: 2\r\nX-B: b\nX-C: c\r\nX-D: d\r\n\nok")
    ("/smuggle" . ,(string-append "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"))
    ("/garbage" . "SSH-2.0-OpenSSH_9.2\r\n\r\n")
    ("/half" . "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly a few")))

(define (read-head port)
  ;; -> the path of the request on PORT, or #f
  (let lp ((text ""))
    (if (string-contains text "\r\n\r\n")
        (cadr (string-split text #\space))
        (let ((bv (get-bytevector-some port)))
          (and (not (eof-object? bv))
               (lp (string-append text (utf8->string bv))))))))

(define (raw-upstream report)
  (let ((sock (socket AF_INET SOCK_STREAM 0)))
    (setsockopt sock SOL_SOCKET SO_REUSEADDR 1)
    (bind sock AF_INET INADDR_LOOPBACK 0)
    (listen sock 64)
    (report (sockaddr:port (getsockname sock)))
    (let lp ()
      (let ((client (car (accept sock))))
        (catch #t
          (lambda ()
            (let ((path (read-head client)))
              (when path
                (put-bytevector client
                                (string->utf8 (or (assoc-ref raw-responses path)
                                                  "HTTP/1.1 404 Not Found\r\n\r\n")))
                (force-output client))))
          (lambda _ #f))
        (close-port client)
        (lp)))))

(define raw (start-child raw-upstream))
(define raw-port (server-port raw))

;;;
;;; The proxies
;;;

(define (proxy-app handler)
  ;; HANDLER, and /_close-idle, which empties the proxy's pool of
  ;; upstream connections so that its descriptors can be counted
  (lambda (request body)
    (if (string=? (uri-path (request-uri request)) "/_close-idle")
        (begin (close-idle-connections!) (text-body "closed"))
        (handler request body))))

(define (start-proxy upstreams . options)
  (start-server (proxy-app (apply proxy-handler upstreams options))))

(define proxy (start-proxy (origin upstream-port) #:read-timeout-ms 1000))
(define proxy-port (server-port proxy))

(define refused-port (free-port))

;;;
;;; Passing through
;;;

(test-group "GET, POST, HEAD"
  (let ((response body (http-get (url proxy-port "/hello"))))
    (test-equal "GET: status and body" '(200 "hello from upstream")
      (list (response-code response) body)))
  (let ((response body (http-get (url proxy-port "/echo?a=1&b=%20"))))
    (test-equal "the path and query" "GET /echo?a=1&b=%20 " body))
  (let ((response body (http-post (url proxy-port "/echo") #:body "a posted body")))
    (test-equal "POST: the body forwarded" "POST /echo a posted body" body))
  (let ((response body (http-post (url proxy-port "/echo")
                                  #:body (make-bytevector 300000 65)
                                  #:decode-body? #f)))
    (test-eqv "a 300 kB POST" (+ 11 300000) (bytevector-length body)))
  (let ((response body (http-head (url proxy-port "/hello"))))
    (test-equal "HEAD: the length of the body not sent" '(200 19 #f)
      (list (response-code response) (response-content-length response) body)))
  (let ((response body (fetch proxy-port (request-text "/hello" #:method "HEAD") #:head? #t)))
    (test-equal "HEAD on the wire: no body" '(19 "")
      (list (response-content-length response) body)))
  (let ((response body (http-get (url proxy-port "/teapot"))))
    (test-equal "a 418 with its reason, header and body"
      '(418 "I'm a teapot" "yes" "short and stout")
      (list (response-code response) (response-reason-phrase response)
            (assq-ref (response-headers response) 'x-upstream) body)))
  (let ((response body (http-get (url proxy-port "/no-content"))))
    (test-equal "204" '(204 #f) (list (response-code response)
                                      (response-content-length response))))
  (let ((response body (http-get (url proxy-port "/missing"))))
    (test-eqv "404" 404 (response-code response))))

(test-group "request headers"
  (let ((response text
                  (fetch proxy-port
                         (request-text "/head" #:host "app.example:8443"
                                       #:headers '("Connection: keep-alive, X-Secret"
                                                   "X-Secret: hop"
                                                   "Keep-Alive: timeout=5"
                                                   "TE: trailers"
                                                   "Proxy-Authorization: Basic eDp5"
                                                   "Upgrade: h2c"
                                                   "X-Forwarded-For: 10.1.2.3"
                                                   "Forwarded: for=10.1.2.3"
                                                   "Via: 1.0 edge"
                                                   "X-Kept: yes"
                                                   "Accept: text/html;q=abc")))))
    (test-eqv "200" 200 (response-code response))
    (test-assert "Host kept" (header-line? text "Host: app.example:8443"))
    (test-assert "an end-to-end header kept" (header-line? text "X-Kept: yes"))
    (test-assert "a header Guile refuses kept as sent"
      (header-line? text "Accept: text/html;q=abc"))
    (for-each (lambda (name)
                (test-assert (string-append name " removed")
                  (not (string-contains text (string-append "\r\n" name ":")))))
              '("X-Secret" "Keep-Alive" "Te" "TE" "Proxy-Authorization" "Upgrade"))
    (test-assert "no Connection but the client's own"
      (not (string-contains text "X-Secret")))
    (test-assert "X-Forwarded-For appended"
      (header-line? text "X-Forwarded-For: 10.1.2.3, 127.0.0.1"))
    (test-assert "X-Forwarded-Proto" (header-line? text "X-Forwarded-Proto: http"))
    (test-assert "Forwarded appended (RFC 7239)"
      (header-line? text
                    "Forwarded: for=10.1.2.3, for=127.0.0.1;host=\"app.example:8443\";proto=http"))
    (test-assert "Via appended" (header-line? text "Via: 1.0 edge, 1.1 plucky")))
  (let ((response text (fetch proxy-port (request-text "/head" #:version "1.0"))))
    (test-assert "an HTTP/1.0 client: Via 1.0" (header-line? text "Via: 1.0 plucky"))
    (test-assert "…Forwarded with no host when it sent none"
      (header-line? text "Forwarded: for=127.0.0.1;host=localhost;proto=http"))))

(test-group "in middleware that reads the body"
  ;; the proxy's small bodies are read into a buffer it reuses, of
  ;; which the raw response names the length (answer-body)
  (let* ((server (start-server ((compress-middleware) (proxy-handler (origin upstream-port)))))
         (port (server-port server)))
    (let ((response body (http-get (url port "/hello"))))
      (test-equal "compress-middleware, no coding asked: the body as it came"
        '(200 "hello from upstream" 19)
        (list (response-code response) body (response-content-length response))))
    (let ((response body (http-get (url port "/echo?x") #:headers '((accept-encoding (1000 . "gzip"))))))
      (test-equal "…and twice: each answer its own bytes" "GET /echo?x "
        (if (bytevector? body) (utf8->string body) body)))
    (stop-server server))
  (let* ((server (start-server ((compress-middleware #:min-length 0)
                                (proxy-handler (origin upstream-port)))))
         (port (server-port server)))
    (let ((response body (http-get (url port "/teapot") #:decode-body? #f
                                   #:headers '((accept-encoding (1000 . "gzip"))))))
      (test-equal "compress-middleware compressing: the upstream's status kept"
        '(418 (gzip) "yes")
        (list (response-code response)
              (assq-ref (response-headers response) 'content-encoding)
              (assq-ref (response-headers response) 'x-upstream))))
    (stop-server server))
  (let* ((server (start-server (wrap (proxy-handler (origin upstream-port))
                                     (with-headers '((x-frame-options . "DENY")))
                                     (lambda (handler)
                                       (lambda (request body)
                                         (let ((response body (handler request body)))
                                           (values (with-response-headers
                                                    response '((x-added . "yes")
                                                               (connection close)))
                                                   body)))))))
         (port (server-port server)))
    (let ((response body (http-get (url port "/hello"))))
      (test-equal "middleware that adds headers: the body as it came, the headers added"
        '(200 "hello from upstream" "DENY" "yes" (close))
        (list (response-code response) body
              (assq-ref (response-headers response) 'x-frame-options)
              (assq-ref (response-headers response) 'x-added)
              (response-connection response))))
    (stop-server server)))

(test-group "#:strip-prefix, #:preserve-host? #f"
  (let* ((server (start-proxy (origin upstream-port) #:strip-prefix "/api"
                              #:preserve-host? #f))
         (port (server-port server)))
    (let ((response body (http-get (url port "/api/echo?x=1"))))
      (test-equal "prefix stripped" "GET /echo?x=1 " body))
    (let ((response text (fetch port (request-text "/api/head" #:host "app.example"))))
      (test-assert "the upstream's Host"
        (header-line? text (format #f "Host: 127.0.0.1:~a" upstream-port))))
    (stop-server server)))

(test-group "response headers"
  (let* ((server (start-proxy (origin raw-port)))
         (port (server-port server)))
    (let ((response body (fetch port (request-text "/hop"))))
      (test-equal "200 ok" '(200 "ok") (list (response-code response) body))
      (let ((headers (response-headers response)))
        (for-each (lambda (name)
                    (test-assert (string-append (symbol->string name) " removed")
                      (not (assq name headers))))
                  '(x-hop keep-alive proxy-authenticate trailer upgrade))
        (test-equal "an end-to-end header kept" "kept" (assq-ref headers 'x-end))
        (test-equal "Via" '("1.1 plucky") (assq-ref headers 'via))))
    (let ((response body (fetch port (request-text "/via"))))
      (test-equal "the upstream's reason phrase" "Fine Thanks" (response-reason-phrase response))
      (test-equal "Via: the upstream's elements, then the proxy's"
        '("1.0 origin" "1.1 cache" "1.1 plucky")
        (assq-ref (response-headers response) 'via))
      (test-assert "Proxy-Connection removed"
        (not (assq 'proxy-connection (response-headers response))))
      (test-equal "the upstream's Date kept, no second one"
        '(1994)
        (map (lambda (h) (date-year (cdr h)))
             (filter (lambda (h) (eq? (car h) 'date)) (response-headers response))))
      (test-equal "a field's value as it came, less its blanks" "value"
        (assq-ref (response-headers response) 'x-odd)))
    (let ((response body (fetch port (request-text "/lf"))))
      (test-equal "bare LF lines from the upstream: each field kept, in order"
        '(200 "ok" ("a" "b" "c" "d"))
        (list (response-code response) body
              (map (lambda (name) (assq-ref (response-headers response) name))
                   '(x-a x-b x-c x-d)))))
    (let ((response body (fetch port (request-text "/fold"))))
      (test-eqv "obs-fold from the upstream: 502" 502 (response-code response)))
    (let ((response body (fetch port (request-text "/smuggle"))))
      (test-eqv "Content-Length with Transfer-Encoding from the upstream: 502" 502
        (response-code response)))
    (stop-server server)))

;;;
;;; Bodies
;;;

(test-group "streamed bodies"
  (let ((response reader (http-request-stream (url proxy-port "/big-chunked"))))
    (test-equal "a 5 MB chunked body: chunked to the client"
      '((chunked)) (response-transfer-encoding response))
    (let ((body (let lp ((pieces '()))
                  (let ((piece (reader)))
                    (if (eof-object? piece)
                        (bytevector-concatenate (reverse pieces))
                        (lp (cons piece pieces)))))))
      (test-eqv "…all of it" five-mb (bytevector-length body))
      (test-assert "…byte for byte" (bytevector=? body big-body))))
  (let ((response body (http-get (url proxy-port "/big-length") #:decode-body? #f)))
    (test-equal "2 MB with a Content-Length over the buffer limit: streamed as it is, its length kept"
      '(() 2097152 2097152)
      (list (response-transfer-encoding response) (response-content-length response)
            (bytevector-length body)))))

;;;
;;; Failures
;;;

(test-group "upstream failures"
  (let* ((seconds (seconds-of
                   (lambda ()
                     (let ((response body (http-get (url proxy-port "/never"))))
                       (test-eqv "an upstream that never answers: 504" 504
                         (response-code response)))))))
    (test-assert (format #f "…within the 1 s read time-out (~,2f s)" seconds)
      (< 0.9 seconds 3)))
  (let* ((server (start-proxy (origin refused-port)))
         (port (server-port server)))
    (let ((response body (http-get (url port "/hello"))))
      (test-equal "a refused port: 502" 502 (response-code response))
      (test-assert "…with a short body saying why" (string-contains body "connect-refused")))
    (test-assert "…and a logged line"
      (wait-until (lambda () (string-contains (server-log server) "connect-refused"))))
    (stop-server server))
  (let* ((server (start-proxy (origin raw-port)))
         (port (server-port server)))
    (let ((response body (http-get (url port "/garbage"))))
      (test-equal "garbage from the upstream: 502" 502 (response-code response)))
    (let ((response body (http-get (url port "/half"))))
      (test-equal "a body cut short: 502" 502 (response-code response)))
    (stop-server server))
  (let* ((server (start-proxy (origin upstream-port) #:max-body 1000))
         (port (server-port server)))
    (let ((response body (http-get (url port "/big-length"))))
      (test-equal "a body over #:max-body: 502" 502 (response-code response)))
    (let ((response body (http-get (url port "/hello"))))
      (test-equal "…a small one passes" 200 (response-code response)))
    (stop-server server))
  (let ((response body (fetch proxy-port
                              (request-text "/hello" #:headers '("Connection: Upgrade"
                                                                 "Upgrade: websocket")))))
    (test-eqv "a WebSocket upgrade: 501" 501 (response-code response))))

(test-group "several upstreams"
  (let* ((server (start-proxy (list (origin refused-port) (origin upstream-port))))
         (port (server-port server))
         (codes (map (lambda (i)
                       (let ((response body (http-get (url port "/hello"))))
                         (response-code response)))
                     (iota 6))))
    (test-equal "one refuses: every request goes to the other" (make-list 6 200) codes)
    (test-eqv "…which is tried once, then skipped" 1
      (length (filter (lambda (line) (string-contains line "connect-refused"))
                      (string-split (server-log server) #\newline))))
    (stop-server server)))

;;;
;;; The worker serves others while an upstream is slow
;;;

(test-group "a slow upstream holds no worker"
  (let ((slow (connect-client proxy-port))
        (fast (connect-client proxy-port))
        (start (get-internal-real-time)))
    (define (elapsed)
      (exact->inexact (/ (- (get-internal-real-time) start) internal-time-units-per-second)))
    (client-send! slow (request-text "/slow"))
    (usleep 100000)
    (client-send! fast (request-text "/fast"))
    (let* ((fast-response fast-body (client-read-response fast #:timeout 5))
           (fast-at (elapsed))
           (slow-response slow-body (client-read-response slow #:timeout 5))
           (slow-at (elapsed)))
      (test-equal "the fast one answers" "fast" (and fast-body (utf8->string fast-body)))
      (test-equal "the slow one answers" "slow" (and slow-body (utf8->string slow-body)))
      (test-assert (format #f "…the fast one first (~,2f s, then ~,2f s)" fast-at slow-at)
        (and (< fast-at 0.5) (> slow-at 0.7))))
    (client-close! slow)
    (client-close! fast)))

;;;
;;; nginx as the upstream
;;;

(define dir
  (let ((name (string-copy "/tmp/plucky-proxy-XXXXXX")))
    (close-port (mkstemp! name))
    (delete-file name)
    (mkdir name)
    name))

(define (file name) (string-append dir "/" name))

(define nginx (nginx-program))

(if (not nginx)
    (begin
      (test-skip 1)
      (test-assert "nginx (scripts/install-deps check installs it)" #f))
    (let ((process port (start-nginx dir)))
      (test-assert "nginx listens" port)
      (when port
        (let* ((server (start-proxy (origin port)))
               (proxy (server-port server)))
          (test-group "nginx upstream"
            (let ((response body (http-get (url proxy "/hello"))))
              (test-equal "return 200" '(200 "hello from nginx")
                (list (response-code response) body)))
            (let ((response body (http-get (url proxy "/static.txt"))))
              (test-eqv "a 50 kB file" 50000 (string-length body)))
            (let ((response body (http-head (url proxy "/static.txt"))))
              (test-equal "HEAD: its length, no body" '(50000 #f)
                (list (response-content-length response) body)))
            (let ((response body (http-get (url proxy "/missing"))))
              (test-eqv "404" 404 (response-code response)))
            (let ((responses
                   (with-client proxy
                     (lambda (client)
                       (client-send! client (string-concatenate
                                             (map (lambda (i) (request-text "/hello"))
                                                  (iota 5))))
                       (client-read-responses client 5)))))
              (test-equal "five pipelined requests" (make-list 5 200)
                (map (lambda (r) (response-code (car r))) responses))))
          (stop-server server))
        (let ((status killed? (process-stop process)))
          (test-assert "nginx stops on SIGTERM" (not killed?))))))

;;;
;;; Descriptors
;;;

(test-group "descriptors"
  (define (settled-fds)
    (http-get (url proxy-port "/_close-idle"))
    (usleep 200000)
    (proxy-fds proxy))
  (let ((before (settled-fds)))
    (for-each (lambda (path) (http-get (url proxy-port path)))
              '("/hello" "/never" "/big-length" "/teapot" "/missing"))
    (let ((slow (connect-client proxy-port)))
      ;; a client that leaves while its upstream works
      (client-send! slow (request-text "/slow"))
      (usleep 200000)
      (client-close! slow))
    (usleep 800000)
    (test-eqv "the proxy's descriptors back to their level" before
      (wait-until (lambda () (let ((n (settled-fds))) (and (= n before) n)))
                  #:timeout 5))))

;;;
;;; The end
;;;

(stop-server proxy)
(stop-server raw)
(stop-server upstream)
(system* "rm" "-rf" dir)

(test-end "web/proxy")
