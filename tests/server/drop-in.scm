;;; tests/server/drop-in.scm --- (web server plucky): Guile's run-server with 'plucky

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; An app written for Guile's (web server) switches to plucky with
;;; (run-server handler 'plucky open-params state ...).  Each group runs
;;; Guile's own `run-server' in a child process with a tekuti-style
;;; handler that threads a request count through its state, and talks to
;;; it over raw sockets: the count shows that requests reach the handler
;;; once each, in order, with the state Guile's loop gives back.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (tests lib harness)
             (tests lib server)
             (rnrs bytevectors)
             (ice-9 format)
             (web request)
             (web response)
             (web server)
             (web uri))

(test-begin "server/drop-in")

;;;
;;; The handler: tekuti-style state threading
;;;

(define text-headers '((content-type . (text/plain))))

;; (handler request body count) -> (values response body (+ count 1));
;; the body says "COUNT PATH" (and the request body's length on POST).
(define (counting-handler request body count)
  (let ((path (uri-path (request-uri request)))
        (count (+ count 1)))
    (cond
     ((string=? path "/raise")
      (error "drop-in handler fails on purpose"))
     (body
      (values text-headers
              (format #f "~a ~a ~a:~a" count path (bytevector-length body) (utf8->string body))
              count))
     (else
      (values text-headers (format #f "~a ~a" count path) count)))))

;;;
;;; Servers
;;;

;; Guile's run-server on a socket this child binds itself.
(define (start-with-socket handler . state)
  (start-child
   (lambda (report)
     (let ((sock (socket AF_INET SOCK_STREAM 0)))
       (setsockopt sock SOL_SOCKET SO_REUSEADDR 1)
       (bind sock AF_INET INADDR_LOOPBACK 0)
       (listen sock 128)
       (report (sockaddr:port (getsockname sock)))
       (apply run-server handler 'plucky (list #:socket sock) state)))))

;; Guile's run-server with OPEN-PARAMS that name a port; the parent
;; polls until it accepts connections.
(define (start-with-params handler port open-params host . state)
  (let ((server (start-child
                 (lambda (report)
                   (report port)
                   (apply run-server handler 'plucky open-params state)))))
    (unless (wait-for-port port #:host host)
      (stop-server server)
      (error "drop-in server never listened" open-params))
    server))

(define-syntax-rule (with-started (server start-expression) body ...)
  (call-guarded
   (lambda ()
     (let ((server start-expression))
       (dynamic-wind
         (lambda () #t)
         (lambda () body ...)
         (lambda () (stop-server server)))))))

;;;
;;; Helpers
;;;

(define* (get server path #:key (host "127.0.0.1"))
  ;; -> body string, or #f
  (let ((response body (http-get (server-port server) path #:host host)))
    (and response (utf8->string body))))

(define* (get-reply server path)
  ;; -> (response . body) or #f
  (let ((response body (http-get (server-port server) path)))
    (and response (cons response body))))

;;;
;;; Tests
;;;

(test-group "run-server with #:socket, state threaded"
  (with-started (server (start-with-socket counting-handler 0))
    (test-equal "consecutive answers show the count"
      '("1 /a" "2 /b" "3 /c")
      (map (lambda (p) (get server p)) '("/a" "/b" "/c")))
    (let ((reply (get-reply server "/d")))
      (test-equal "200" 200 (response-code (car reply)))
      (test-equal "Content-Type with charset" '(text/plain (charset . "utf-8"))
        (response-content-type (car reply)))
      (test-equal "Content-Length" 4 (response-content-length (car reply))))))

(test-group "keep-alive and pipelining through the drop-in"
  (with-started (server (start-with-socket counting-handler 0))
    (with-client (server-port server)
      (lambda (client)
        (let ((answers
               (map (lambda (i)
                      (client-send! client (request-text (format #f "/k~a" i)))
                      (let ((response body (client-read-response client)))
                        (and body (utf8->string body))))
                    (iota 10))))
          (test-equal "10 requests on one connection"
            (map (lambda (i) (format #f "~a /k~a" (+ i 1) i)) (iota 10))
            answers))
        (test-assert "the connection stays open" (not (client-eof? client #:timeout 0.2)))
        (client-send! client (string-concatenate
                              (map (lambda (i) (request-text (format #f "/p~a" i))) (iota 5))))
        (test-equal "5 pipelined in one write, in order"
          (map (lambda (i) (format #f "~a /p~a" (+ i 11) i)) (iota 5))
          (map reply-body-string (client-read-responses client 5)))))
    (let ((a (connect-client (server-port server)))
          (b (connect-client (server-port server))))
      (client-send! a (request-text "/a1"))
      (test-equal "two connections: first" "16 /a1"
        (let ((response body (client-read-response a))) (and body (utf8->string body))))
      (client-send! b (request-text "/b1"))
      (test-equal "two connections: second" "17 /b1"
        (let ((response body (client-read-response b))) (and body (utf8->string body))))
      (client-send! a (request-text "/a2"))
      (test-equal "two connections: first again" "18 /a2"
        (let ((response body (client-read-response a))) (and body (utf8->string body))))
      (client-close! a)
      (client-close! b))))

(test-group "request bodies and HTTP/1.0 through the drop-in"
  (with-started (server (start-with-socket counting-handler 0))
    (with-client (server-port server)
      (lambda (client)
        (client-send! client (string-append "POST /post HTTP/1.1\r\nHost: x\r\n"
                                            "Content-Length: 5\r\n\r\nhello"))
        (test-equal "the handler sees the body" "1 /post 5:hello"
          (let ((response body (client-read-response client)))
            (and body (utf8->string body))))))
    (with-client (server-port server)
      (lambda (client)
        (client-send! client "GET /old HTTP/1.0\r\n\r\n")
        (let ((response body (client-read-response client)))
          (test-equal "HTTP/1.0 answered" "2 /old" (and body (utf8->string body)))
          (test-equal "as HTTP/1.0" '(1 . 0) (and response (response-version response))))
        (test-assert "and closed" (client-eof? client))))
    (with-client (server-port server)
      (lambda (client)
        (client-send! client (request-text "/head" #:method "HEAD"))
        (let ((response body (client-read-response client #:head? #t)))
          (test-equal "HEAD: the length of the body not sent" 7
            (and response (response-content-length response))))
        (client-send! client (request-text "/after-head"))
        (test-equal "and no body bytes before the next answer" "4 /after-head"
          (let ((response body (client-read-response client)))
            (and body (utf8->string body))))))))

(test-group "a handler that raises"
  (with-started (server (start-with-socket counting-handler 0))
    (test-equal "before" "1 /a" (get server "/a"))
    (let ((reply (get-reply server "/raise")))
      (test-equal "500" 500 (and reply (response-code (car reply))))
      (test-assert "with a body" (and reply (positive? (bytevector-length (cdr reply))))))
    (test-equal "the server carries on, the state as before the failure" "2 /b"
      (get server "/b"))
    (with-client (server-port server)
      (lambda (client)
        (client-send! client (string-append (request-text "/c") (request-text "/raise")
                                            (request-text "/d")))
        (let ((replies (client-read-responses client 2)))
          (test-equal "pipelined: the answer before the failure, then 500"
            '(200 500) (map (lambda (r) (response-code (car r))) replies)))))
    (test-assert "the process is alive" (server-alive? server))))

(test-group "open-params (#:port N)"
  (let ((port (free-port)))
    (with-started (server (start-with-params counting-handler port (list #:port port)
                                             "127.0.0.1" 100))
      (test-equal "listens on the port given" port (server-port server))
      (test-equal "state given after the open-params" '("101 /x" "102 /y")
        (list (get server "/x") (get server "/y"))))))

(test-group "open-params (#:family AF_INET6 #:addr ::1 #:port N)"
  (let ((port (free-port)))
    (with-started (server (start-with-params counting-handler port
                                             (list #:family AF_INET6
                                                   #:addr (inet-pton AF_INET6 "::1")
                                                   #:port port)
                                             "::1" 0))
      (test-equal "answers on ::1" "1 /six" (get server "/six" #:host "::1")))))

(test-group "a handler without state"
  (with-started (server (start-with-socket
                         (lambda (request body)
                           (values text-headers "stateless"))))
    (test-equal "answers" '("stateless" "stateless")
      (list (get server "/") (get server "/")))))

(test-group "open-params #:workers 2"
  (call-guarded
   (lambda ()
     (let* ((port (free-port))
            (server (start-with-params (lambda (request body)
                                         (values text-headers (number->string (getpid))))
                                       port (list #:port port #:workers 2) "127.0.0.1"))
            (pids (map (lambda (i) (get server "/")) (iota 10)))
            (workers (wait-for-child-pids (server-pid server) 2)))
       (test-equal "two worker processes" 2 (length workers))
       (test-assert "10 answers" (every string? pids))
       (test-assert "from workers, not the supervisor"
         (every (lambda (p) (and p (not (= (string->number p) (server-pid server))))) pids))
       (let ((status killed? (stop-server server)))
         (test-equal "SIGTERM stops supervisor and workers: exit 0" 0
           (status:exit-val status))
         (test-equal "without SIGKILL" #f killed?))
       (test-assert "nothing listens any more"
         (not (false-if-exception (with-client port (lambda (c) #t)))))
       (test-equal "no worker outlives the supervisor" '()
         (kill-survivors workers))))))

(test-end "server/drop-in")
