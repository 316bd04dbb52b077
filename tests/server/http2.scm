;;; tests/server/http2.scm --- (plucky server http2)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; HTTP/2 served by a real server in a child process, to clients that
;;; know it speaks it (prior knowledge, in clear text, on the port that
;;; serves HTTP/1.1): curl, and the raw client of (tests lib h2), which
;;; also misbehaves as the known attacks do.  TLS's ALPN is tested in
;;; tests/server/tls.scm.  Each limit has its test: rapid reset,
;;; CONTINUATION flood, HPACK bombs (a header list past the limit, a
;;; dynamic table larger than allowed), SETTINGS and PING floods, a
;;; window held at zero, too many concurrent streams, a header block too
;;; large; and malformed requests, each reset.
;;;
;;; Code:

(use-modules ((plucky http) #:select (bytevector-concatenate))
             (srfi srfi-1)
             (srfi srfi-11)
             (srfi srfi-64)
             (rnrs bytevectors)
             (ice-9 popen)
             (ice-9 binary-ports)
             (ice-9 rdelim)
             (web request)
             (web uri)
             (tests lib harness)
             (tests lib server)
             (tests lib h2)
             (plucky server))

(test-runner-current (plucky-test-runner))
(test-begin "server/http2")

(define (handler request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path "/sleep")
      (sleep-ms 400)
      (values '((content-type . (text/plain))) "slept"))
     ((string=? path "/version")
      (values '((content-type . (text/plain)))
              (format #f "~a.~a" (car (request-version request))
                      (cdr (request-version request)))))
     ((string=? path "/echo")
      (values '((content-type . (application/octet-stream)))
              (or body #vu8())))
     ((string=? path "/length")
      (values '((content-type . (text/plain)))
              (number->string (if body (bytevector-length body) 0))))
     ((string=? path "/big")
      (values '((content-type . (application/octet-stream)))
              (make-bytevector 200000 65)))
     ((string=? path "/header")
      (values '((content-type . (text/plain)))
              (or (assq-ref (request-headers request) 'x-test) "none")))
     ((string=? path "/events")
      (values '((content-type . (text/event-stream)))
              (lambda (port)
                (let lp ((i 0))
                  (when (< i 3)
                    (format port "data: ~a\n\n" i)
                    (force-output port)
                    (sleep-ms 50)
                    (lp (+ i 1)))))))
     ((string=? path "/wide")
      (values `((content-type . (text/plain)) (x-wide . ,(make-string 40000 #\w)))
              "wide"))
     ((string=? path "/fail")
      (error "deliberate failure"))
     (else
      (values '((content-type . (text/plain))) "Hello, World!")))))

(define-syntax-rule (with-server (server args ...) body ...)
  (call-with-server handler (lambda (server) body ...) args ...))

(define (curl . args)
  ;; -> (exit-status . output) of curl with ARGS, bounded in time
  (let* ((port (apply open-pipe* OPEN_READ "curl" "-sS" "--max-time" "10" args))
         (output (read-string port))
         (status (close-pipe port)))
    (cons (status:exit-val status) output)))

(define (url server path)
  (format #f "http://127.0.0.1:~a~a" (server-port server) path))

(define (body-string r) (utf8->string (h2-response-body r)))

(test-group "curl, prior knowledge, and HTTP/1.1 on the same port"
  (call-guarded
   (lambda ()
     (with-server (server)
       (test-equal "HTTP/2 by prior knowledge"
         '(0 . "Hello, World!\n2")
         (curl "--http2-prior-knowledge" "-w" "\n%{http_version}" (url server "/")))
       (test-equal "the handler sees version 2.0"
         '(0 . "2.0")
         (curl "--http2-prior-knowledge" (url server "/version")))
       (test-equal "HTTP/1.1 still, on the same port"
         '(0 . "Hello, World!\n1.1")
         (curl "--http1.1" "-w" "\n%{http_version}" (url server "/")))
       (test-equal "a request body, POSTed over HTTP/2"
         '(0 . "100000")
         (let ((file (string-copy "/tmp/plucky-h2-body-XXXXXX")))
           (let ((port (mkstemp! file)))
             (put-bytevector port (make-bytevector 100000 120))
             (close-port port))
           (let ((result (curl "--http2-prior-knowledge" "--data-binary"
                               (string-append "@" file) (url server "/length"))))
             (delete-file file)
             result)))
       (test-equal "a body larger than the window, read back"
         '(0 . "200000")
         (curl "--http2-prior-knowledge" "-o" "/dev/null" "-w" "%{size_download}"
               (url server "/big")))))))

(test-group "streams and fields"
  (call-guarded
   (lambda ()
     (with-server (server)
       (let ((client (h2-connect (server-port server))))
         (h2-request! client 1 "/")
         (h2-request! client 3 "/header" #:fields '(("x-test" . "yes")))
         (h2-request! client 5 "/fail")
         (h2-request! client 7 "/echo" #:method "POST"
                      #:body (string->utf8 (make-string 40000 #\b)))
         ;; a body, then trailers that end the stream
         (h2-send-frame! client 1 4 9 (h2-header-block '((":method" . "POST") (":scheme" . "http")
                                                         (":authority" . "x") (":path" . "/length"))))
         (h2-send-frame! client 0 0 9 (string->utf8 "abc"))
         (h2-send-frame! client 1 5 9 (h2-header-block '(("x-checksum" . "1"))))
         (let ((all (h2-get-all client '(1 3 5 7 9))))
           (test-equal "a body with trailers: the body, answered" "3"
             (let ((r (assv-ref all 9))) (and r (body-string r))))
           (test-equal "a GET" '(200 . "Hello, World!")
             (let ((r (assv-ref all 1))) (and r (cons (h2-response-status r) (body-string r)))))
           (test-assert "its fields in lower case, no Connection"
             (let ((r (assv-ref all 1)))
               (and r (assoc "content-type" (h2-response-fields r))
                    (assoc "content-length" (h2-response-fields r))
                    (not (assoc "connection" (h2-response-fields r))))))
           (test-equal "a request field reaches the handler" "yes"
             (let ((r (assv-ref all 3))) (and r (body-string r))))
           (test-equal "a handler's exception is a 500" 500
             (let ((r (assv-ref all 5))) (and r (h2-response-status r))))
           (test-equal "a body in three DATA frames, echoed" 40000
             (let ((r (assv-ref all 7))) (and r (bytevector-length (h2-response-body r))))))
         (h2-close! client))))))

(test-group "a response head larger than a frame"
  (call-guarded
   (lambda ()
     (with-server (server)
       (let ((client (h2-connect (server-port server))))
         (h2-request! client 1 "/wide")
         (h2-request! client 3 "/")
         (let ((all (h2-get-all client '(1 3))))
           (test-equal "HEADERS and CONTINUATION frames: the field whole" 40000
             (let* ((r (assv-ref all 1))
                    (field (and r (assoc "x-wide" (h2-response-fields r)))))
               (and field (string-length (cdr field)))))
           (test-equal "and its body" "wide"
             (let ((r (assv-ref all 1))) (and r (body-string r))))
           (test-equal "the next answer's head decodes (HPACK in step)" 200
             (let ((r (assv-ref all 3))) (and r (h2-response-status r)))))
         (h2-close! client))))))

(test-group "malformed requests: RST_STREAM PROTOCOL_ERROR"
  (call-guarded
   (lambda ()
     (with-server (server)
       (let ((client (h2-connect (server-port server)))
             (request '((":method" . "GET") (":scheme" . "http")
                        (":authority" . "x") (":path" . "/"))))
         (h2-request! client 1 "/" #:fields '(("X-Test" . "1")))
         (h2-send-frame! client 1 5 3 (h2-header-block
                                       (append '(("x-test" . "1")) request)))
         (h2-request! client 5 "/" #:fields '(("connection" . "keep-alive")))
         (h2-request! client 7 "/" #:fields '(("te" . "gzip")))
         (h2-send-frame! client 1 5 9 (h2-header-block
                                       (append request '((":path" . "/again")))))
         (h2-send-frame! client 1 4 11 (h2-header-block
                                        '((":method" . "POST") (":scheme" . "http")
                                          (":authority" . "x") (":path" . "/length")
                                          ("content-length" . "10"))))
         (h2-send-frame! client 0 1 11 (string->utf8 "abc"))
         (h2-request! client 13 "/" #:fields '(("te" . "trailers")))
         (let ((all (h2-get-all client '(1 3 5 7 9 11 13))))
           (define (reset id) (let ((r (assv-ref all id))) (and r (h2-reset? r))))
           (test-equal "a name in upper case" 1 (reset 1))
           (test-equal "a pseudo-field after a field" 1 (reset 3))
           (test-equal "a connection-specific field" 1 (reset 5))
           (test-equal "te other than trailers" 1 (reset 7))
           (test-equal "a pseudo-field twice" 1 (reset 9))
           (test-equal "a content-length the DATA do not add up to" 1 (reset 11))
           (test-equal "te: trailers is served" 200
             (let ((r (assv-ref all 13))) (and r (h2-response-status r)))))
         (h2-close! client))))))

(test-group "flow control, per stream and per connection"
  (call-guarded
   (lambda ()
     (with-server (server)
       ;; a stream window of 16 KiB, the connection's the default 65,535,
       ;; and credit given back by hand
       (let ((client (h2-connect (server-port server) #:settings '((4 . 16384))
                                 #:auto-window? #f))
             (got 0)
             (ended? #f))
         (define (read-while-coming!)
           ;; DATA until a second passes without any
           (let lp ()
             (let ((f (h2-read-frame client #:timeout 1)))
               (when (vector? f)
                 (when (= (frame-type f) 0)
                   (set! got (+ got (bytevector-length (frame-payload f))))
                   (when (logtest 1 (frame-flags f)) (set! ended? #t)))
                 (lp)))))
         (define (credit! stream n)
           (h2-send-frame! client 8 0 stream
                           (u8-list->bytevector (list (ash n -24) (logand (ash n -16) 255)
                                                      (logand (ash n -8) 255) (logand n 255)))))
         (h2-request! client 1 "/big")
         ;; the answer's HEADERS first, however long the server takes
         ;; to start (a loaded machine); then DATA as long as it comes
         (let lp ()
           (let ((f (h2-read-frame client #:timeout 10)))
             (when (and (vector? f) (not (= (frame-type f) 1)))
               (lp))))
         (read-while-coming!)
         (test-equal "the stream's window, then nothing" 16384 got)
         (credit! 1 100000)
         (read-while-coming!)
         (test-equal "more credit for the stream: the connection's window, then nothing"
           65535 got)
         (credit! 0 200000)
         (credit! 1 200000)
         (read-while-coming!)
         (test-equal "credit for both: the whole body" '(200000 #t) (list got ended?))
         (h2-close! client))))))

(test-group "suspending handlers run side by side"
  (call-guarded
   (lambda ()
     (with-server (server)
       (let* ((client (h2-connect (server-port server)))
              (streams (iota 50 3 2))
              ;; timed from a first answer: the worker has loaded what
              ;; HTTP/2 needs
              (start (begin
                       (h2-request! client 1 "/")
                       (and (assv-ref (h2-get-all client '(1)) 1) (now-seconds)))))
         (for-each (lambda (id) (h2-request! client id "/sleep")) streams)
         (let ((all (h2-get-all client streams #:timeout 20)))
           (test-equal "50 streams of a 400 ms sleep all answered" 50
             (count (lambda (e) (equal? "slept" (body-string (cdr e)))) all))
           ;; One after the other they would take 20 s.
           (test-assert "in about one sleep's time, not fifty"
             (< (- (now-seconds) start) 2.0)))
         (h2-close! client))))))

(test-group "server-sent events"
  (call-guarded
   (lambda ()
     (with-server (server)
       (let ((client (h2-connect (server-port server)))
             (data-frames 0))
         (h2-request! client 1 "/events")
         (let* ((all (h2-get-all client '(1)
                                 #:on-frame (lambda (f)
                                              (when (and (= (frame-type f) 0)
                                                         (> (bytevector-length (frame-payload f)) 0))
                                                (set! data-frames (+ 1 data-frames))))))
                (r (assv-ref all 1)))
           (test-equal "the events, then the stream's end"
             "data: 0\n\ndata: 1\n\ndata: 2\n\n" (and r (body-string r)))
           (test-assert "as they were written, one DATA frame each or more"
             (>= data-frames 3))
           (test-equal "as text/event-stream" "text/event-stream"
             (and r (let ((type (assoc-ref (h2-response-fields r) "content-type")))
                      (and type (car (string-split type #\;)))))))
         (h2-close! client))))))

;;;
;;; Drain
;;;

(test-group "GOAWAY on SIGTERM: streams begun are answered"
  (call-guarded
   (lambda ()
     (let* ((server (start-server handler))
            (client (h2-connect (server-port server)))
            (goaway #f))
       (h2-request! client 1 "/sleep")
       (h2-request! client 3 "/")
       ;; Stream 3's answer shows the server has both requests.
       (test-assert "a first answer" (assv-ref (h2-get-all client '(3)) 3))
       (kill (server-pid server) SIGTERM)
       (let* ((all (h2-get-all client '(1)
                               #:on-frame (lambda (f)
                                            (when (h2-goaway f) (set! goaway f)))))
              (r (assv-ref all 1)))
         (test-equal "GOAWAY NO_ERROR" 0 (and goaway (h2-goaway goaway)))
         (test-assert "naming stream 3 the last taken"
           (and goaway (= 3 (bytevector-u32-ref (frame-payload goaway) 0 (endianness big)))))
         (test-equal "the waiting stream is answered" "slept" (and r (body-string r)))
         (test-eq "then the connection closes" 'eof (h2-read-frame client #:timeout 5)))
       (h2-close! client)
       (stop-server server)))))

;;;
;;; Limits
;;;

(define (read-until-goaway client timeout)
  ;; -> the GOAWAY's error code, or 'eof / #f when none came first
  (let ((deadline (+ (now-seconds) timeout)))
    (let lp ()
      (let ((f (h2-read-frame client #:timeout (max 0 (- deadline (now-seconds))))))
        (cond
         ((h2-goaway f) => identity)
         ((vector? f) (lp))
         (else f))))))

(define (repeat n bv)
  (let ((all (make-bytevector (* n (bytevector-length bv)))))
    (let lp ((i 0))
      (when (< i n)
        (bytevector-copy! bv 0 all (* i (bytevector-length bv)) (bytevector-length bv))
        (lp (+ i 1))))
    all))

(define (still-serves? server)
  (equal? '(0 . "Hello, World!") (curl "--http2-prior-knowledge" (url server "/"))))

(test-group "too many concurrent streams"
  (call-guarded
   (lambda ()
     (with-server (server)
       (let* ((client (h2-connect (server-port server)))
              (streams (iota 101 1 2)))
         ;; All sent before the server's SETTINGS is acknowledged: the
         ;; 101st is refused, not a connection error.
         (for-each (lambda (id) (h2-request! client id "/sleep")) streams)
         (let ((all (h2-get-all client streams #:timeout 20)))
           (test-equal "100 answered" 100
             (count (lambda (e) (eqv? 200 (h2-response-status (cdr e)))) all))
           (test-equal "the 101st reset, REFUSED_STREAM" 7
             (let ((r (assv-ref all 201))) (and r (h2-reset? r)))))
         (h2-close! client))))))

(test-group "rapid reset (CVE-2023-44487)"
  (call-guarded
   (lambda ()
     (with-server (server)
       (let ((client (h2-connect (server-port server)))
             (n 2000))
         (client-send! (h2-client-raw client)
                       (bytevector-concatenate
                              (append-map (lambda (id)
                                     (list (h2-frame 1 5 id (h2-header-block
                                                             '((":method" . "GET") (":scheme" . "http")
                                                               (":authority" . "x") (":path" . "/sleep"))))
                                           (h2-frame 3 0 id #vu8(0 0 0 8))))
                                   (iota n 1 2))))
         (test-equal "GOAWAY ENHANCE_YOUR_CALM" 11 (read-until-goaway client 10))
         (test-eq "and the connection closes" 'eof (read-until-goaway client 5))
         (h2-close! client)
         (test-assert "the server serves on" (still-serves? server)))))))

(test-group "CONTINUATION flood"
  (call-guarded
   (lambda ()
     (with-server (server)
       (let* ((client (h2-connect (server-port server)))
              (field (h2-header-block `(("x-a" . ,(make-string 100 #\a))))))
         (h2-send-frame! client 1 0 1 (h2-header-block '((":method" . "GET") (":scheme" . "http")
                                                         (":authority" . "x") (":path" . "/"))))
         (client-send! (h2-client-raw client) (repeat 1000 (h2-frame 9 0 1 field)))
         (test-equal "GOAWAY ENHANCE_YOUR_CALM" 11 (read-until-goaway client 10))
         (test-eq "and the connection closes" 'eof (read-until-goaway client 5))
         (h2-close! client)
         (test-assert "the server serves on" (still-serves? server)))))))

(test-group "a header block past its limit"
  (call-guarded
   (lambda ()
     (with-server (server)
       ;; eight CONTINUATION frames (the count allowed) of 16 KiB after a
       ;; HEADERS of as much: 144 KiB, past the 128 KiB of a block
       (let ((client (h2-connect (server-port server)))
             (piece (make-bytevector 16384 0)))
         (h2-send-frame! client 1 0 1 piece)
         (client-send! (h2-client-raw client) (repeat 8 (h2-frame 9 0 1 piece)))
         (test-equal "GOAWAY ENHANCE_YOUR_CALM" 11 (read-until-goaway client 10))
         (h2-close! client))
       (test-assert "the server serves on" (still-serves? server))))))

(test-group "HPACK bombs"
  (call-guarded
   (lambda ()
     (with-server (server)
       (let* ((client (h2-connect (server-port server)))
              (big (make-string 4000 #\b))
              ;; one 4 KB field into the dynamic table (literal with
              ;; incremental indexing, RFC 7541 §6.2.1), then 20 one-byte
              ;; references to it (index 62): 80 KB of fields decoded
              (block (bytevector-concatenate (list
                      (h2-header-block '((":method" . "GET") (":scheme" . "http")
                                         (":authority" . "x") (":path" . "/")))
                      #vu8(#x40 5) (string->utf8 "x-big") #vu8(#x7f #xa1 #x1e) ; 4000 = 127 + 33 + 30 * 128
                      (string->utf8 big)
                      (make-bytevector 20 #xbe)))))
         (h2-send-frame! client 1 5 1 block)
         (h2-request! client 3 "/")
         (let ((all (h2-get-all client '(1 3))))
           (test-equal "a header list past 64 KiB: 431" 431
             (let ((r (assv-ref all 1))) (and r (h2-response-status r))))
           (test-equal "and the connection serves on" 200
             (let ((r (assv-ref all 3))) (and r (h2-response-status r)))))
         (h2-close! client))
       (let ((client (h2-connect (server-port server))))
         ;; a dynamic table size update to 1 MB (§6.3), past the 4096 allowed
         (h2-send-frame! client 1 5 1 (bytevector-concatenate (list
                                       #vu8(#x3f #xe1 #xff #x3d)
                                       (h2-header-block '((":method" . "GET") (":scheme" . "http")
                                                          (":authority" . "x") (":path" . "/"))))))
         (test-equal "a table larger than allowed: GOAWAY COMPRESSION_ERROR" 9
           (read-until-goaway client 10))
         (h2-close! client))))))

(test-group "SETTINGS and PING floods"
  (call-guarded
   (lambda ()
     (with-server (server)
       (let ((client (h2-connect (server-port server))))
         (client-send! (h2-client-raw client) (repeat 5000 (h2-frame 4 0 0 #vu8())))
         (test-equal "5000 SETTINGS: GOAWAY ENHANCE_YOUR_CALM" 11 (read-until-goaway client 10))
         (h2-close! client))
       (let ((client (h2-connect (server-port server))))
         (client-send! (h2-client-raw client) (repeat 5000 (h2-frame 6 0 0 (make-bytevector 8 1))))
         (test-equal "5000 PINGs: GOAWAY ENHANCE_YOUR_CALM" 11 (read-until-goaway client 10))
         (h2-close! client))
       (let ((client (h2-connect (server-port server))))
         (client-send! (h2-client-raw client) (repeat 50 (h2-frame 6 0 0 (make-bytevector 8 1))))
         (test-equal "50 PINGs: 50 acknowledgements, no GOAWAY" 50
           (let lp ((n 0))
             (let ((f (h2-read-frame client #:timeout 2)))
               (cond
                ((not (vector? f)) n)
                ((h2-goaway f) -1)
                ((and (= (frame-type f) 6) (logtest 1 (frame-flags f)))
                 (if (= n 49) 50 (lp (+ n 1))))
                (else (lp n))))))
         (h2-close! client))
       (test-assert "the server serves on" (still-serves? server))))))

(test-group "a window held at zero"
  (call-guarded
   (lambda ()
     (with-server (server #:settings (make-loop-settings #:write-timeout 1
                                                         #:keep-alive-timeout 1))
       ;; SETTINGS_INITIAL_WINDOW_SIZE 0, and never a WINDOW_UPDATE
       (let ((client (h2-connect (server-port server) #:settings '((4 . 0))
                                 #:auto-window? #f))
             (start (now-seconds)))
         (h2-request! client 1 "/big")
         (test-equal "no DATA, then GOAWAY ENHANCE_YOUR_CALM" 11 (read-until-goaway client 10))
         (let ((elapsed (- (now-seconds) start)))
           (test-assert "after the write timeout, not before" (>= elapsed 0.9))
           (test-assert "nor long after" (< elapsed 4)))
         (h2-close! client))
       (test-assert "the server serves on" (still-serves? server))))))

(test-group "request bodies past the limit"
  (call-guarded
   (lambda ()
     (with-server (server #:settings (make-loop-settings #:max-body 1000))
       (let ((client (h2-connect (server-port server))))
         (h2-request! client 1 "/length" #:method "POST" #:body (make-bytevector 5000 1))
         (h2-request! client 3 "/length" #:method "POST" #:body (make-bytevector 500 1))
         (let ((all (h2-get-all client '(1 3))))
           (test-equal "5000 bytes: 413" 413
             (let ((r (assv-ref all 1))) (and r (h2-response-status r))))
           (test-equal "500 bytes: read" "500"
             (let ((r (assv-ref all 3))) (and r (body-string r)))))
         (h2-close! client))))))

(test-end "server/http2")
