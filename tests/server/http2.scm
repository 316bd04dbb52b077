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
;;; window held at zero, too many concurrent streams.
;;;
;;; Code:

(use-modules (srfi srfi-1)
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
         (let ((all (h2-get-all client '(1 3 5 7))))
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

(test-group "suspending handlers run side by side"
  (call-guarded
   (lambda ()
     (with-server (server)
       (let ((client (h2-connect (server-port server)))
             (streams (iota 50 1 2))
             (start (now-seconds)))
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

(test-end "server/http2")
