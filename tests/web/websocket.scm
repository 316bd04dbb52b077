;;; tests/web/websocket.scm --- (plucky web websocket) with real clients

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A real server on an ephemeral port echoes messages; Debian's
;;; python3-websockets (tests/web/websocket-client.py) and raw frames
;;; from the same script check echo, fragments, ping, close codes and
;;; the errors; tests/web/websocket-deflate.py does permessage-deflate
;;; both ways, with and without context takeover.  Then many idle
;;; connections stay open on one worker while HTTP requests are answered,
;;; and a client that does not read meets the bounded queue.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (plucky server numbered)
             (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 popen)
             (ice-9 rdelim)
             (rnrs bytevectors)
             ((rnrs io ports) #:select (get-bytevector-some))
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (tests lib server)
             ((plucky http bytes) #:select (bytevector-copy-range))
             (plucky web websocket))

(test-begin "web/websocket")

(define refused 0)                       ; sends refused by a full queue
(define held #f)                        ; the handle "/held" keeps
(define data-in-on-close #f)            ; what its ON-CLOSE saw
(define count-in-on-close #f)           ; and websocket-count there
(define latest #f)                      ; the handle "/echo" gave last
(define handle-fd (@@ (plucky web websocket) handle-fd))

(define (echo ws message)
  ;; "/echo"'s ON-MESSAGE, one procedure for every upgrade (a lambda in
  ;; `site' would be a closure each, as this file is not compiled)
  (if (equal? message "close me")
      (websocket-close ws 4001 "asked")
      (websocket-send ws message)))

(define (site request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((and (string=? path "/echo") (websocket-request? request))
      (websocket-upgrade
       request
       #:protocols '("chat")
       #:max-message (* 64 1024)
       #:on-message echo
       #:on-open (lambda (ws) (set! latest ws))))
     ((string=? path "/flood")
      ;; Sends until the queue is full, to a client that never reads.
      (websocket-upgrade
       request
       #:max-buffer (* 256 1024)
       #:on-open (lambda (ws)
                   (let lp ((n 0))
                     (if (websocket-send ws (make-bytevector 4096 1))
                         (lp (+ n 1))
                         (websocket-close ws 1000 (number->string n)))))))
     ((string=? path "/held")
      ;; the app keeps the handle it was given when open
      (websocket-upgrade
       request
       #:protocols '("chat")
       #:on-open (lambda (ws)
                   (set! held ws)
                   (set-websocket-data! ws 0))
       #:on-message (lambda (ws message)
                      (set-websocket-data! ws (+ 1 (websocket-data ws)))
                      (websocket-send
                       ws (simple-format #f "~a ~a ~a" (eq? ws held)
                                         (websocket-data ws) (websocket-protocol ws))))
       #:on-close (lambda (ws code reason)
                    (set! data-in-on-close (websocket-data ws))
                    (set! count-in-on-close (websocket-count)))))
     ((string=? path "/bad-close")
      ;; a close code no endpoint may send: the app's error, a 1011
      (websocket-upgrade
       request
       #:on-message (lambda (ws message) (websocket-close ws 1005))))
     ((string=? path "/gc")
      (gc)
      (values '((content-type . (text/plain))) "collected"))
     ((string=? path "/counter")
      ;; keeps no handle: a collection between messages takes it
      (websocket-upgrade
       request
       #:on-message (lambda (ws message)
                      (set-websocket-data! ws (+ 1 (or (websocket-data ws) 0)))
                      (websocket-send ws (number->string (websocket-data ws))))))
     ((string=? path "/stale")
      ;; what the handle kept from "/held" says once that is closed
      (values '((content-type . (text/plain)))
              (simple-format #f "~a ~a ~a ~a ~a ~a ~a" (websocket-send held "late")
                             (websocket-open? held) (websocket-data held)
                             (websocket-protocol held) data-in-on-close
                             count-in-on-close
                             (and latest (= (handle-fd held) (handle-fd latest))))))
     ((string=? path "/quick")
      ;; pings after a second of silence, gives up a second later
      (websocket-upgrade request #:ping-interval 1 #:ping-timeout 1))
     ((string=? path "/count")
      (values '((content-type . (text/plain))) (number->string (websocket-count))))
     ((string=? path "/settings")
      ;; the <settings> the open WebSockets' rows have a number for
      (values '((content-type . (text/plain)))
              (number->string
               (length (numbered-in-use (@@ (plucky web websocket) settings-table))))))
     ((string=? path "/echo")
      (websocket-upgrade request))
     (else
      (values '((content-type . (text/plain))) "Hello, World!")))))

(define* (python-checks port #:optional (script "tests/web/websocket-client.py"))
  ;; -> the lines the client SCRIPT printed
  (let* ((pipe (open-pipe* OPEN_READ "timeout" "120" "/usr/bin/python3"
                           script (number->string port)))
         (lines (let lp ((out '()))
                  (let ((line (read-line pipe)))
                    (if (eof-object? line) (reverse out) (lp (cons line out)))))))
    (close-pipe pipe)
    lines))

(define (readable? port deadline)
  ;; -> #t once PORT is readable, #f when DEADLINE passed.  Guile's
  ;; select may come back empty before its time-out, so it is asked
  ;; again until the deadline.
  (let lp ()
    (or (pair? (car (select (list port) '() '()
                            (max 0 (inexact->exact (round (- deadline (now-seconds))))))))
        (and (< (now-seconds) deadline) (lp)))))

(define (read-head port deadline)
  ;; -> what PORT gave up to a blank line, as a string, or #f at DEADLINE
  (let lp ((got ""))
    (cond
     ((string-contains got "\r\n\r\n") got)
     ((not (readable? port deadline)) #f)
     (else
      (let ((more (get-bytevector-some port)))
        (and (not (eof-object? more))
             (lp (string-append got (latin-1 more)))))))))

(define (latin-1 bv)
  (list->string (map integer->char (bytevector->u8-list bv))))

(define (upgrade-text path)
  (string-append "GET " path " HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                 "Connection: Upgrade\r\n"
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 "Sec-WebSocket-Version: 13\r\n\r\n"))

(define (upgraded-client server path)
  ;; -> a client of SERVER whose upgrade to PATH was answered (its head read)
  (let ((client (connect-client (server-port server))))
    (client-send! client (upgrade-text path))
    (read-head (client-socket client) (+ (now-seconds) 10))
    client))

(test-group "websocket-upgrade: a real client"
  (call-with-server
   site
   (lambda (server)
     (let ((lines (python-checks (server-port server))))
       (test-assert "the client ran" (>= (length lines) 14))
       (for-each (lambda (line)
                   (test-assert line (string-prefix? "ok " line)))
                 lines))
     (let ((response body (http-get (server-port server) "/count")))
       (test-equal "every socket closed" "0" (utf8->string body))))))

(test-group "websocket-upgrade: permessage-deflate"
  (call-with-server
   site
   (lambda (server)
     (let ((lines (python-checks (server-port server) "tests/web/websocket-deflate.py")))
       (test-assert "the client ran" (>= (length lines) 16))
       (for-each (lambda (line)
                   (test-assert line (string-prefix? "ok " line)))
                 lines))
     (let ((response body (http-get (server-port server) "/count")))
       (test-equal "every socket closed" "0" (utf8->string body))))))

(test-group "websocket-upgrade: refusals"
  (call-with-server
   site
   (lambda (server)
     (with-client (server-port server)
       (lambda (client)
         (client-send! client (string-append
                               "GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                               "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n"))
         (let ((got (read-head (client-socket client) (+ (now-seconds) 10))))
           (test-assert "no key: 400"
             (and got (string-prefix? "HTTP/1.1 400" got))))))
     (with-client (server-port server)
       (lambda (client)
         (client-send! client (string-append
                               "GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                               "Connection: Upgrade\r\nSec-WebSocket-Version: 8\r\n"
                               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"))
         (let ((got (read-head (client-socket client) (+ (now-seconds) 10))))
           (test-assert "version 8: 426"
             (and got (string-prefix? "HTTP/1.1 426" got)))))))))

(test-group "websocket-send: a client that does not read"
  (call-with-server
   site
   (lambda (server)
     (let ((client (connect-client (server-port server) #:receive-buffer 4096)))
       (client-send! client (upgrade-text "/flood"))
       ;; The server queued up to its bound, refused the rest and asked to
       ;; close; it is still serving others.
       (let ((response body (http-get (server-port server) "/")))
         (test-equal "the worker serves on" 200 (response-code response)))
       (let ((response body (http-get (server-port server) "/count")))
         (test-equal "the flooded socket is still open" "1" (utf8->string body)))
       (client-close! client)))))

(define (read-bytes port n deadline)
  ;; -> N bytes from PORT, fewer at its end, or #f at DEADLINE
  (let lp ((got #vu8()))
    (cond
     ((>= (bytevector-length got) n) got)
     ((not (readable? port deadline)) #f)
     (else
      (let ((more (get-bytevector-some port)))
        (if (eof-object? more)
            got
            (lp (u8-list->bytevector (append (bytevector->u8-list got)
                                             (bytevector->u8-list more))))))))))


(define (text-frame text)
  ;; a client's text frame, masked with the key 0
  (let* ((payload (string->utf8 text))
         (frame (make-bytevector (+ 6 (bytevector-length payload)) 0)))
    (bytevector-u8-set! frame 0 #x81)
    (bytevector-u8-set! frame 1 (logior #x80 (bytevector-length payload)))
    (bytevector-copy! payload 0 frame 6 (bytevector-length payload))
    frame))

(define (server-text-frame text)
  ;; a short text frame as the server sends it: unmasked
  (let ((payload (bytevector->u8-list (string->utf8 text))))
    (u8-list->bytevector (cons* #x81 (length payload) payload))))

(test-group "websocket handles"
  (call-with-server
   site
   (lambda (server)
     (let ((client (connect-client (server-port server))))
       (client-send! client
                     (string-append "GET /held HTTP/1.1\r\nHost: x\r\n"
                                    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                                    "Sec-WebSocket-Protocol: chat\r\n"
                                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                    "Sec-WebSocket-Version: 13\r\n\r\n"))
       (read-head (client-socket client) (+ (now-seconds) 10))
       (for-each
        (lambda (n)
          (client-send! client (text-frame "hi"))
          (test-equal (simple-format #f "message ~a: the handle kept, the data, the protocol" n)
            (server-text-frame (simple-format #f "#t ~a chat" n))
            (read-bytes (client-socket client) 11 (+ (now-seconds) 10))))
        '(1 2))
       ;; asked on a connection made before the close, so that no other
       ;; takes the descriptor the close frees
       (let ((counter (connect-client (server-port server))))
         ;; answered: the server has accepted it
         (client-send! counter (request-text "/count"))
         (client-read-response counter)
         (client-close! client)
         (test-assert "its close is seen"
           (wait-until (lambda ()
                         (client-send! counter (request-text "/count"))
                         (let ((response body (client-read-response counter)))
                           (equal? (and body (utf8->string body)) "0")))))
         (client-close! counter)))
     ;; a new WebSocket takes the closed one's descriptor: the old handle
     ;; must not reach it
     (let ((client (upgraded-client server "/echo")))
       (let ((response body (http-get (server-port server) "/stale")))
         (test-equal (string-append "a closed handle: no send, not open, no data; "
                                    "on-close saw the data and a count without it; "
                                    "the new WebSocket has its descriptor")
           "#f #f #f #f 2 0 #t" (utf8->string body)))
       (test-assert "and the new one got nothing"
         (not (readable? (client-socket client) (+ (now-seconds) 0.5))))
       (client-close! client))
     (let ((client (upgraded-client server "/counter")))
       (test-equal "the data outlives a handle the app did not keep, across collections"
         (map (lambda (n) (server-text-frame (number->string n))) '(1 2 3))
         (map (lambda (n)
                (client-send! client (text-frame "+"))
                (let ((got (read-bytes (client-socket client) 3 (+ (now-seconds) 10))))
                  (http-get (server-port server) "/gc")
                  got))
              '(1 2 3)))
       (client-close! client))
     (let ((client (upgraded-client server "/bad-close")))
       (client-send! client (text-frame "x"))
       (test-equal "websocket-close with 1005 raises: closed with 1011"
         #vu8(#x88 16 #x03 #xF3)
         (let ((got (read-bytes (client-socket client) 4 (+ (now-seconds) 10))))
           (and got (>= (bytevector-length got) 4) (bytevector-copy-range got 0 4))))
       (client-close! client))
     (let ((client (connect-client (server-port server))))
       (client-send! client
                     (string-append "GET /held HTTP/1.1\r\nHost: x\r\n"
                                    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                                    "Sec-WebSocket-Protocol: Chat, superchat\r\n"
                                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                    "Sec-WebSocket-Version: 13\r\n\r\n"))
       (let ((head (read-head (client-socket client) (+ (now-seconds) 10))))
         (test-assert "subprotocols compared as they are: Chat is not chat"
           (and head (string-prefix? "HTTP/1.1 101" head)
                (not (string-contains-ci head "sec-websocket-protocol")))))
       (client-close! client)))))

(test-group "websocket-upgrade: an echo after the sweep"
  ;; The sweep (once a second) drops the reader of a connection that
  ;; holds nothing; the next frame makes another.
  (call-with-server
   site
   (lambda (server)
     (let ((client (upgraded-client server "/echo")))
       (client-send! client (text-frame "before"))
       (test-equal "echoed" (server-text-frame "before")
         (read-bytes (client-socket client) 8 (+ (now-seconds) 10)))
       (test-assert "nothing more for two sweeps"
         (not (readable? (client-socket client) (+ (now-seconds) 2.2))))
       (client-send! client (text-frame "after"))
       (test-equal "echoed again" (server-text-frame "after")
         (read-bytes (client-socket client) 7 (+ (now-seconds) 10)))
       (client-close! client)))))

(test-group "websocket-upgrade: keepalive"
  (call-with-server
   site
   (lambda (server)
     (let ((client (upgraded-client server "/quick")))
       (test-equal "an idle connection is pinged" #vu8(#x89 0)
         (read-bytes (client-socket client) 2 (+ (now-seconds) 5)))
       (test-equal "and closed when it does not answer" #vu8()
         (read-bytes (client-socket client) 1 (+ (now-seconds) 5)))
       (client-close! client)))))

(test-group "websocket-upgrade: a thousand idle connections"
  (call-with-server
   site
   (lambda (server)
     (let* ((clients (map (lambda (i)
                            (let ((c (connect-client (server-port server))))
                              (client-send! c (upgrade-text "/echo"))
                              c))
                          (iota 1000))))
       (test-equal "every one upgraded" '()
         (filter-map (lambda (c i)
                       (let ((head (read-head (client-socket c) (+ (now-seconds) 20))))
                         (and (not (and head (string-prefix? "HTTP/1.1 101" head)))
                              (list i head))))
                     clients (iota 1000)))
       (let ((response body (http-get (server-port server) "/count")))
         (test-equal "a thousand open" "1000" (utf8->string body)))
       (let ((response body (http-get (server-port server) "/settings")))
         (test-equal "sharing one <settings>" "1" (utf8->string body)))
       (test-assert "no thread per connection: two at most"
         (<= (string->number
              (string-trim-both (process-status-field (server-pid server) "Threads")))
             2))
       (for-each client-close! clients)
       (test-assert "all closed when the clients go"
         (wait-until (lambda ()
                       (let ((response body (http-get (server-port server) "/count")))
                         (equal? (utf8->string body) "0")))))
       (let ((response body (http-get (server-port server) "/settings")))
         (test-equal "which is freed with the last of them" "0"
           (utf8->string body)))))))

(test-end "web/websocket")
