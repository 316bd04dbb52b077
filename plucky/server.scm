;;; (plucky server) --- run a handler: listening sockets, workers, the loop

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The entry point of plucky's own API:
;;;
;;;   (run-server handler #:host "127.0.0.1" #:port 8080 #:workers 2)
;;;
;;; HANDLER has the contract of Guile's (web server): it is called as
;;; (HANDLER request body . state) and returns (values response body
;;; . state).  `run-server' opens the listening socket(s), then either
;;; runs the event loop (plucky server loop) itself, with one worker, or
;;; forks WORKERS processes that each run one loop on the shared sockets
;;; while this process watches them and starts a new one when one dies.
;;;
;;; Code:

(define-module (plucky server)
  #:use-module (srfi srfi-1)
  #:use-module (plucky sys libc)
  #:use-module (plucky sys signal)
  #:use-module (plucky http parse)
  #:use-module (plucky server loop)
  #:re-export (make-loop-settings
               make-parse-limits
               stop-loop!
               drain-loop!)
  #:export (open-listener
            listener-port
            supervise-workers
            run-server))

(define* (open-listener host port #:key (backlog 1024))
  "Return a listening, non-blocking TCP socket (a Guile port, which the
caller must keep and close) bound to HOST (a name or an IPv4 or IPv6
address; \"::\" for every address of both families) and PORT (0: any
free port; see `listener-port')."
  (let* ((info (car (getaddrinfo host (number->string port)
                                 (logior AI_NUMERICSERV AI_PASSIVE)
                                 0 SOCK_STREAM)))
         (sock (socket (addrinfo:fam info) SOCK_STREAM 0)))
    (setsockopt sock SOL_SOCKET SO_REUSEADDR 1)
    (bind sock (addrinfo:addr info))
    (listen sock backlog)
    (fcntl sock F_SETFL (logior O_NONBLOCK (fcntl sock F_GETFL)))
    ;; HTTP clients speak first: let accept(2) return a connection only
    ;; once its request has arrived, so the loop reads it at once instead
    ;; of waiting for another epoll round (bench/hello, Connection: close).
    (fd-set-defer-accept! (port->fdes sock) 1)
    sock))

(define (listener-port sock)
  "Return the TCP port the listening socket SOCK is bound to."
  (sockaddr:port (getsockname sock)))

(define (listener-url sock)
  (let* ((addr (getsockname sock))
         (family (sockaddr:fam addr))
         (host (inet-ntop family (sockaddr:addr addr))))
    (format #f "http://~a:~a/"
            (if (= family AF_INET6) (string-append "[" host "]") host)
            (sockaddr:port addr))))

(define (log-line fmt . args)
  (let ((port (current-error-port)))
    (apply format port (string-append "plucky: " fmt "~%") args)
    (force-output port)))

(define worker-signals (list SIGTERM SIGINT SIGHUP SIGUSR1))

(define (serve-in-this-process sockets handler state settings exclusive? grace
                               observer)
  ;; SIGTERM drains; SIGINT drains the first time and stops the second.
  (stop-finalizer-thread!)
  (block-signals! worker-signals)
  (let ((signal-fd (open-signalfd worker-signals))
        (interrupted? #f))
    (define (on-signal signal)
      (cond
       ((= signal SIGTERM) (drain-loop! grace))
       ((= signal SIGINT)
        (if interrupted?
            (stop-loop!)
            (begin (set! interrupted? #t) (drain-loop! grace))))))
    (let ((state (run-loop (map port->fdes sockets) handler
                           #:state state #:settings settings
                           #:exclusive? exclusive?
                           #:signal-fd signal-fd #:on-signal on-signal
                           #:observer observer)))
      (fd-close signal-fd)
      (unblock-signals! worker-signals)
      state)))

(define master-signals (list SIGTERM SIGINT SIGCHLD SIGHUP SIGUSR1))

(define (describe-status status)
  (cond ((status:exit-val status) => (lambda (v) (format #f "status ~a" v)))
        ((status:term-sig status) => (lambda (s) (format #f "signal ~a" s)))
        (else "unknown")))

(define (supervise-workers workers child)
  "Fork WORKERS processes that each run the thunk CHILD, and keep that
many running — a worker that dies is replaced at once and the event
logged — until SIGTERM or SIGINT, which are passed on to the workers.
Return once they have all exited.  CHILD runs with the signals unblocked
that this process reads from a signalfd (plucky sys signal); if it
returns, the worker exits with status 0."
  (stop-finalizer-thread!)
  (block-signals! master-signals)
  (let* ((signal-fd (open-signalfd master-signals))
         (start (lambda ()
                  (let ((pid (primitive-fork)))
                    (when (zero? pid)
                      (fd-close signal-fd)
                      (unblock-signals! master-signals)
                      (child)
                      (primitive-exit 0))
                    pid))))
    (let lp ((pids (map (lambda (i) (start)) (iota workers)))
             (stopping? #f))
      (unless (null? pids)
        (let ((signal (read-signal signal-fd)))
          (cond
           ((= signal SIGCHLD)
            (let reap ((pids pids))
              (let ((dead (false-if-exception (waitpid WAIT_ANY WNOHANG))))
                (if (and dead (> (car dead) 0))
                    (reap (if stopping?
                              (delete (car dead) pids)
                              (begin
                                (log-line "worker ~a exited (~a); starting another"
                                          (car dead) (describe-status (cdr dead)))
                                (cons (start) (delete (car dead) pids)))))
                    (lp pids stopping?)))))
           ((or (= signal SIGTERM) (= signal SIGINT))
            (for-each (lambda (pid) (false-if-exception (kill pid signal))) pids)
            (lp pids #t))
           (else (lp pids stopping?))))))
    (fd-close signal-fd)
    (unblock-signals! master-signals)))

(define* (run-server handler #:key
                     (host "127.0.0.1")
                     (port 8080)
                     (workers 1)
                     (state '())
                     (settings (make-loop-settings))
                     (sockets #f)
                     (grace 30)
                     (observer #f)
                     (on-listen #f))
  "Serve HTTP on HOST:PORT with HANDLER until SIGINT or SIGTERM.
HANDLER is called as (HANDLER request body . STATE) and returns (values
response body . STATE), as under Guile's `run-server'.  WORKERS is the
number of processes serving the socket: 1 serves in this process and
returns the final state; more fork that many workers and return when
they have all exited.  SOCKETS, if given, is a list of listening sockets
to use instead of opening one on HOST:PORT.  SETTINGS holds limits and
timeouts (`make-loop-settings').  On SIGTERM or SIGINT the server
drains: it stops accepting, finishes the requests in flight and exits
within GRACE seconds; a second SIGINT stops it at once.  OBSERVER, if
given, is told where each request's time goes (see `run-loop' and (plucky
observe accounting)).  ON-LISTEN, if given, is called with the list of
sockets once they listen."
  (let ((sockets (or sockets (list (open-listener host port)))))
    (ignore-signal! SIGPIPE)
    (for-each (lambda (sock)
                (log-line "listening on ~a (~a worker~a)" (listener-url sock)
                          workers (if (= workers 1) "" "s")))
              sockets)
    (when on-listen (on-listen sockets))
    (let ((result (if (<= workers 1)
                      (serve-in-this-process sockets handler state settings #f grace
                                             observer)
                      (supervise-workers
                       workers
                       (lambda ()
                         (serve-in-this-process sockets handler state settings
                                                #t grace observer))))))
      (for-each close-port sockets)
      result)))

;;; (plucky server) ends here
