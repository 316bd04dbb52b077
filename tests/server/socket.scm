;;; tests/server/socket.scm --- where connections come from

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `bin/plucky serve' given its sockets every way plucky takes them:
;;;
;;;  - socket activation as systemd and GNU Shepherd do it: this test
;;;    binds a socket, and a launcher forks, makes it descriptor 3, sets
;;;    LISTEN_FDS=1, LISTEN_PID to the child's own PID and LISTEN_FDNAMES,
;;;    and execs bin/plucky;
;;;  - --fd N, a listening descriptor inherited under another number;
;;;  - --inetd, one connection on standard input and output: through two
;;;    pipes, and through a socket that is also standard error (as inetd
;;;    passes it), whose messages must not reach the client;
;;;  - --host unix:PATH, served to curl --unix-socket, with a stale
;;;    socket file removed first and a live one refused;
;;;  - --host ::1;
;;;  - open-listeners for workers: only the first socket takes connections
;;;    until the others' workers call start-listening!.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 binary-ports)
             (ice-9 format)
             (ice-9 match)
             (ice-9 regex)
             (rnrs bytevectors)
             (web response)
             (tests lib harness)
             (tests lib server)
             (tests lib command))

(test-begin "server/socket")

(define dir (temporary-directory))
(define app (write-text-app dir "served"))

(define (tcp-listener)
  ;; -> a listening socket on 127.0.0.1 and a port the kernel picked
  (let ((sock (socket AF_INET SOCK_STREAM 0)))
    (bind sock AF_INET INADDR_LOOPBACK 0)
    (listen sock 128)
    sock))

(define (body-of port path)
  (let ((response body (http-get port path)))
    (and response (= 200 (response-code response)) (utf8->string body))))

(define (stopped-cleanly plucky)
  (let ((status killed? (stop-plucky plucky)))
    (test-equal "SIGTERM stops it, exit 0" '(0 #f) (list (status:exit-val status) killed?))))

(define (read-all port timeout)
  ;; -> every byte PORT gives until end of file, or until TIMEOUT seconds
  (let ((deadline (+ (now-seconds) timeout)))
    (let lp ((chunks '()))
      (if (and (< (now-seconds) deadline)
               (match (select (list port) '() '() 0 100000)
                 (((_) _ _) #t)
                 (_ #f)))
          (let ((bv (get-bytevector-some port)))
            (if (eof-object? bv)
                (u8-list->bytevector (append-map bytevector->u8-list (reverse chunks)))
                (lp (cons bv chunks))))
          (if (< (now-seconds) deadline)
              (lp chunks)
              (u8-list->bytevector (append-map bytevector->u8-list (reverse chunks))))))))

(define (responses-in bv)
  ;; -> the list of (code . body-string) of the responses in BV, in order
  (let ((port (open-bytevector-input-port bv)))
    (let lp ((acc '()))
      (if (eof-object? (lookahead-u8 port))
          (reverse acc)
          (let* ((response (read-response port))
                 (body (read-response-body response)))
            (lp (cons (cons (response-code response) (and body (utf8->string body))) acc)))))))

(define (activation-environment names)
  ;; what systemd sets, computed in the child: LISTEN_PID is its own PID
  (lambda ()
    (append (list "LISTEN_FDS=1"
                  (string-append "LISTEN_PID=" (number->string (getpid))))
            (if names (list (string-append "LISTEN_FDNAMES=" names)) '())
            (filter (lambda (entry) (not (string-prefix? "LISTEN_" entry))) (environ)))))

;;;
;;; Socket activation and --fd
;;;

(test-group "socket activation: LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES"
  (call-guarded
   (lambda ()
     (let* ((sock (tcp-listener))
            (port (sockaddr:port (getsockname sock)))
            (plucky (start-plucky app (append '("--workers" "2" "--port" "1") allow-root)
                                  #:fds (list (cons 3 (port->fdes sock)))
                                  #:environment (activation-environment "web"))))
       ;; The service manager's copy, closed: from now on only plucky
       ;; holds the socket.
       (close-port sock)
       (test-equal "listens on the inherited socket, not on --port" port (plucky-port plucky))
       (test-assert "names it" (string-contains (plucky-log plucky) "socket activation: web"))
       (test-equal "serves on it" "served" (body-of port "/"))
       (test-equal "again" (make-list 5 "served") (map (lambda (i) (body-of port "/")) (iota 5)))
       (stopped-cleanly plucky)
       (test-assert "once it has stopped, nobody listens there"
         (not (false-if-exception (connect-client port))))
       (delete-file (plucky-log-file plucky))))))

(test-group "LISTEN_PID of another process: not ours, ignored"
  (call-guarded
   (lambda ()
     (let* ((sock (tcp-listener))
            (port (sockaddr:port (getsockname sock))))
       (call-with-plucky app (append '("--port" "0" "--workers" "1") allow-root)
         (lambda (plucky)
           (test-assert "listens on a port of its own" (plucky-port plucky))
           (test-assert "not the offered one" (not (eqv? port (plucky-port plucky))))
           (test-assert "no activation logged"
             (not (string-contains (plucky-log plucky) "socket activation"))))
         #:fds (list (cons 3 (port->fdes sock)))
         #:environment (list "LISTEN_FDS=1" "LISTEN_PID=1"
                             (string-append "PATH=" (getenv "PATH"))))
       (close-port sock)))))

(test-group "--fd N: an inherited listening descriptor"
  (call-guarded
   (lambda ()
     (let* ((sock (tcp-listener))
            (port (sockaddr:port (getsockname sock))))
       (call-with-plucky app (append '("--fd" "5" "--workers" "2") allow-root)
         (lambda (plucky)
           (close-port sock)
           (test-equal "listens on it" port (plucky-port plucky))
           (test-equal "serves on it" "served" (body-of port "/")))
         #:fds (list (cons 5 (port->fdes sock))))))))

(define (log-saying log text)
  "TEXT if LOG contains it, else LOG itself (for the failure report)."
  (if (string-contains log text) text log))

(test-group "--fd of something else is refused"
  (call-guarded
   (lambda ()
     (let ((channel (pipe)))
       (let ((plucky (start-plucky app (append '("--fd" "4") allow-root)
                                   #:fds (list (cons 4 (port->fdes (car channel))))
                                   #:wait? #f)))
         (let ((status (wait-until (lambda () (plucky-exit-status plucky)))))
           (test-equal "a pipe: exit 2" 2 (and status (status:exit-val status)))
           ;; A failure shows the whole log.
           (test-equal "says why" "descriptor 4 is not a listening stream socket"
             (log-saying (plucky-log plucky) "descriptor 4 is not a listening stream socket")))
         (delete-file (plucky-log-file plucky)))
       (close-port (car channel))
       (close-port (cdr channel)))))
  (call-guarded
   (lambda ()
     (let ((plucky (start-plucky app (append '("--fd" "9") allow-root) #:wait? #f)))
       (let ((status (wait-until (lambda () (plucky-exit-status plucky)))))
         (test-equal "a closed descriptor: exit 2" 2 (and status (status:exit-val status)))
         (test-equal "says why" "descriptor 9 is not open"
           (log-saying (plucky-log plucky) "descriptor 9 is not open")))
       (delete-file (plucky-log-file plucky))))))

;;;
;;; inetd
;;;

(define two-requests
  (string-append (request-text "/one")
                 (request-text "/two" #:headers '("Connection: close"))))

(test-group "--inetd through pipes"
  (call-guarded
   (lambda ()
     (let* ((in (pipe))
            (out (pipe))
            (log (string-append dir "/inetd-pipe.log"))
            (log-port (open-file log "w"))
            (pid (launch plucky-program (append (list "serve" app "--inetd") allow-root)
                         #:fds (list (cons 0 (port->fdes (car in)))
                                     (cons 1 (port->fdes (cdr out)))
                                     (cons 2 (port->fdes log-port))))))
       (for-each close-port (list (car in) (cdr out) log-port))
       (put-bytevector (cdr in) (string->utf8 two-requests))
       (close-port (cdr in))
       (let ((bytes (read-all (car out) 10)))
         (test-equal "two answers, in order, on standard output"
           '((200 . "served") (200 . "served"))
           (false-if-exception (responses-in bytes))))
       (close-port (car out))
       (let ((status (wait-until (lambda () (match (waitpid pid WNOHANG)
                                              ((0 . _) #f)
                                              ((_ . status) status))))))
         (unless status (kill pid SIGKILL) (waitpid pid))
         (test-equal "then it exits 0" 0 (and status (status:exit-val status))))
       (test-assert "saying nothing about listening"
         (not (string-contains (read-file log) "listening")))))))

(test-group "--inetd through a socket that is also standard error"
  (call-guarded
   (lambda ()
     (let* ((pair (socketpair AF_UNIX SOCK_STREAM 0))
            (ours (car pair))
            (pid (launch plucky-program (append (list "serve" app "--inetd") allow-root)
                         #:fds (map (lambda (target) (cons target (port->fdes (cdr pair))))
                                    '(0 1 2)))))
       (close-port (cdr pair))
       (put-bytevector ours (string->utf8 (request-text "/first")))
       (force-output ours)
       ;; One answer, while the connection stays open (keep-alive)…
       (let ((first (responses-in
                     (let ((bv (make-bytevector 4096)))
                       (let ((n (and (match (select (list ours) '() '() 10)
                                       (((_) _ _) #t)
                                       (_ #f))
                                     (recv! ours bv))))
                         (if n
                             (let ((got (make-bytevector n)))
                               (bytevector-copy! bv 0 got 0 n)
                               got)
                             #vu8()))))))
         (test-equal "the first answer" '((200 . "served")) first))
       ;; … then a second, and the client's end of file.
       (put-bytevector ours (string->utf8 (request-text "/second")))
       (force-output ours)
       (shutdown ours 1)
       (let ((rest (read-all ours 10)))
         (test-equal "the second answer, and nothing else: no log line"
           '((200 . "served")) (false-if-exception (responses-in rest))))
       (close-port ours)
       (let ((status (wait-until (lambda () (match (waitpid pid WNOHANG)
                                              ((0 . _) #f)
                                              ((_ . status) status))))))
         (unless status (kill pid SIGKILL) (waitpid pid))
         (test-equal "exit 0 once the client is done" 0 (and status (status:exit-val status))))))))

;;;
;;; Unix-domain sockets and IPv6
;;;

(define (curl-unix path)
  ;; -> curl's output for http://localhost/ through the socket PATH
  (let* ((out (pipe))
         (pid (launch "/usr/bin/env" (list "curl" "-s" "--max-time" "5" "--unix-socket" path
                                           "http://localhost/")
                      #:fds (list (cons 1 (port->fdes (cdr out)))))))
    (close-port (cdr out))
    (let ((text (utf8->string (read-all (car out) 10))))
      (close-port (car out))
      (waitpid pid)
      text)))

(define (start-unix-plucky path . args)
  (let ((plucky (start-plucky app (append (list "--host" (string-append "unix:" path))
                                          allow-root args)
                              #:wait? #f)))
    (wait-until (lambda ()
                  (or (string-contains (plucky-log plucky) "listening on unix:")
                      (plucky-exit-status plucky))))
    plucky))

(test-group "--host unix:PATH"
  (call-guarded
   (lambda ()
     (let ((path (string-append dir "/plucky.sock")))
       ;; A stale socket file, as a server killed with SIGKILL leaves.
       (let ((stale (socket AF_UNIX SOCK_STREAM 0)))
         (bind stale AF_UNIX path)
         (listen stale 1)
         (close-port stale))
       (test-assert "a stale socket file is there" (file-exists? path))
       (let ((plucky (start-unix-plucky path "--workers" "2")))
         (test-assert "listens on it"
           (string-contains (plucky-log plucky) (string-append "listening on unix:" path)))
         (test-equal "curl --unix-socket gets the answer" "served" (curl-unix path))
         (test-equal "again" "served" (curl-unix path))
         (let ((second (start-unix-plucky path "--workers" "1")))
           (let ((status (wait-until (lambda () (plucky-exit-status second)))))
             (test-equal "a second server on the live socket exits 2" 2
               (and status (status:exit-val status)))
             (test-assert "saying it is in use, naming it"
               (string-contains (plucky-log second)
                                (string-append "plucky: unix:" path ": address in use"))))
           (delete-file (plucky-log-file second)))
         (test-equal "the first still serves" "served" (curl-unix path))
         (stopped-cleanly plucky)
         (test-assert "and removes its socket file" (not (file-exists? path)))
         (delete-file (plucky-log-file plucky)))
       (write-file path "not a socket\n")
       (let ((plucky (start-unix-plucky path)))
         (let ((status (wait-until (lambda () (plucky-exit-status plucky)))))
           (test-equal "a regular file in the way: exit 2" 2 (and status (status:exit-val status)))
           (test-assert "left alone" (equal? "not a socket\n" (read-file path))))
         (delete-file (plucky-log-file plucky)))))))

(test-group "--host ::1"
  (call-guarded
   (lambda ()
     (call-with-plucky app (append '("--host" "::1" "--port" "0" "--workers" "2") allow-root)
       (lambda (plucky)
         (test-assert "listens on [::1]"
           (string-contains (plucky-log plucky) "listening on http://[::1]:"))
         (test-equal "serves over IPv6" "served"
           (and (plucky-port plucky)
                (let ((response body (http-get (plucky-port plucky) "/" #:host "::1")))
                  (and response (utf8->string body))))))))))

(test-group "open-listeners: a worker's socket takes connections once it listens"
  (let* ((sockets ((@ (plucky server socket) open-listeners) "127.0.0.1" 0 2))
         (first (car sockets))
         (second (cadr sockets))
         (port ((@ (plucky server socket) listener-port) first))
         (SO_ACCEPTCONN 30)             ; Linux; Guile does not define it
         (listening? (lambda (sock) (= 1 (getsockopt sock SOL_SOCKET SO_ACCEPTCONN))))
         (connect-and-send
          (lambda (n)
            ;; N connections that each send a byte (the sockets defer
            ;; accept until data comes)
            (map (lambda (i)
                   (let ((s (socket AF_INET SOCK_STREAM 0)))
                     (connect s AF_INET INADDR_LOOPBACK port)
                     (put-u8 s 71)
                     (force-output s)
                     s))
                 (iota n))))
         (accept-counts
          (lambda (n)
            ;; -> (A B): the connections the first and the second socket
            ;; (both non-blocking) accept until N in all, or 2 s
            (let ((deadline (+ (get-internal-real-time)
                               (* 2 internal-time-units-per-second))))
              (let loop ((a 0) (b 0))
                (define (take sock)
                  (match (false-if-exception (accept sock))
                    ((conn . _) (close-port conn) 1)
                    (_ 0)))
                (if (or (= (+ a b) n) (> (get-internal-real-time) deadline))
                    (list a b)
                    (let* ((ready (match (select sockets '() '() 0 100000)
                                    ((ready _ _) ready)))
                           (da (if (memq first ready) (take first) 0))
                           (db (if (memq second ready) (take second) 0)))
                      (loop (+ a da) (+ b db)))))))))
    (test-equal "same port" port ((@ (plucky server socket) listener-port) second))
    (test-assert "the first listens" (listening? first))
    (test-assert "the second does not yet" (not (listening? second)))
    (let ((clients (connect-and-send 16)))
      (test-equal "so every connection goes to the first" '(16 0) (accept-counts 16))
      (for-each close-port clients))
    ((@ (plucky server socket) start-listening!) second)
    (test-assert "start-listening!: the second listens" (listening? second))
    ((@ (plucky server socket) start-listening!) first)
    (test-assert "and again on the first: harmless" (listening? first))
    (let* ((clients (connect-and-send 32))
           (counts (accept-counts 32)))
      (test-equal "then both take connections: all 32 accepted" 32 (apply + counts))
      (test-assert (format #f "the second some of them (~a of 32)" (cadr counts))
        (> (cadr counts) 0))
      (for-each close-port clients))
    (for-each close-port sockets)))

(remove-tree dir)

(test-end "server/socket")
