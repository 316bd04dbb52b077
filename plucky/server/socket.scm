;;; (plucky server socket) --- listening sockets: TCP, Unix, inherited

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Where a server's listening sockets come from:
;;;
;;;   open-listener      bind one: "127.0.0.1", "::", a name, or
;;;                      "unix:/run/app.sock" for a Unix-domain socket
;;;                      (a stale socket file left by a dead server is
;;;                      removed; a live one is not)
;;;   open-listeners     bind N sockets to one TCP port with SO_REUSEPORT,
;;;                      one per worker: the kernel spreads connections
;;;                      over them evenly (see README, "Workers"); all
;;;                      but the first listen once their worker calls
;;;                      `start-listening!'.  SO_REUSEPORT would let them
;;;                      join any socket of the same user listening
;;;                      there, another plucky's included, and share its
;;;                      traffic: a probe refuses that first (see
;;;                      `refuse-if-served')
;;;   inherited-listeners  the sockets systemd or GNU Shepherd passed
;;;                      (LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES; the
;;;                      first is descriptor 3), as sd_listen_fds(3) reads
;;;                      them
;;;   descriptor->listener  a listening descriptor given with --fd N
;;;
;;; Each is a Guile port, so that `getsockname' and `close-port' work on
;;; it; the event loop only takes its descriptor (`port->fdes').  Every
;;; listener is non-blocking and close-on-exec.  An address that cannot
;;; be served (in use, unknown, not this machine's, not allowed) raises
;;; an `address-error?' exception whose message names it.
;;;
;;; Code:

(define-module (plucky server socket)
  #:use-module ((ice-9 exceptions) #:select (define-exception-type
                                             &error
                                             make-exception
                                             make-exception-with-message
                                             raise-exception))
  #:use-module (plucky sys libc)
  #:export (address-error?
            address-error-address
            open-listener
            open-listeners
            start-listening!
            listener-port
            listener-url
            unix-listener-path
            close-listener
            inherited-listeners
            descriptor->listener
            listener-host?))

(define SO_ACCEPTCONN 30)               ; Linux

(define unix-prefix "unix:")

(define (unix-path host)
  ;; -> the path of a "unix:/path" HOST, or #f
  (and (string-prefix? unix-prefix host)
       (substring host (string-length unix-prefix))))

(define (listener-host? host)
  "Return #t if HOST names a place `open-listener' can bind: an address,
a host name, or \"unix:\" followed by a path."
  (and (string? host)
       (not (string-null? host))
       (let ((path (unix-path host)))
         (or (not path) (not (string-null? path))))))

(define-exception-type &address-error &error
  make-address-error address-error?
  (address address-error-address))      ; "127.0.0.1:8080", "[::1]:80", "unix:/run/app.sock"

(define (host+port host port)
  ;; -> "HOST:PORT" as people write it: "[::1]:8080" for IPv6
  (string-append (if (string-index host #\:) (string-append "[" host "]") host)
                 ":" (number->string port)))

(define (address-error address why)
  ;; Raise an `address-error?' exception saying that ADDRESS cannot be
  ;; served, and WHY.
  (raise-exception
   (make-exception (make-address-error address)
                   (make-exception-with-message (string-append address ": " why)))))

(define (make-non-blocking! sock)
  (fcntl sock F_SETFL (logior O_NONBLOCK (fcntl sock F_GETFL)))
  (fcntl sock F_SETFD (logior FD_CLOEXEC (fcntl sock F_GETFD))))

(define default-backlog 1024)

(define* (open-listener host port #:key (backlog default-backlog) (reuse-port? #f)
                        (listen? #t))
  "Return a listening, non-blocking socket (a Guile port, which the caller
must keep and close with `close-listener') bound to HOST and PORT.  HOST
is a name or an IPv4 or IPv6 address (\"::\" for every address of both
families), or \"unix:PATH\" for a Unix-domain socket at PATH (PORT is
then ignored).  PORT 0 picks any free port (see `listener-port').
REUSE-PORT? sets SO_REUSEPORT, so that more sockets can bind the same
port (see `open-listeners').  With LISTEN? #f, a TCP socket is bound but
does not listen yet: see `start-listening!'."
  (let ((path (unix-path host)))
    (if path
        (open-unix-listener path backlog)
        (open-tcp-listener host port backlog reuse-port? listen?))))

(define (tcp-address host port)
  ;; -> the socket address HOST and PORT name, for a listener
  (let ((infos (catch 'getaddrinfo-error
                 (lambda ()
                   (getaddrinfo host (number->string port)
                                (logior AI_NUMERICSERV AI_PASSIVE) 0 SOCK_STREAM))
                 (lambda (key code)
                   (address-error (host+port host port)
                                  (string-append "unknown host ("
                                                 (gai-strerror code) ")"))))))
    (addrinfo:addr (car infos))))

(define (system-error-message args)
  ;; -> the strerror text of a 'system-error's ARGS, "address in use"
  ;; for the one people meet most
  (let ((errno (system-error-errno args)))
    (if (= errno EADDRINUSE)
        "address in use: another server listens there"
        (strerror errno))))

(define* (bind-tcp host port #:key reuse-port? (listen? #f) (backlog default-backlog))
  ;; -> a socket bound to HOST and PORT (listening with LISTEN?), or an
  ;; address error naming them, the socket closed
  (let* ((address (tcp-address host port))
         (sock (socket (sockaddr:fam address) SOCK_STREAM 0)))
    (catch 'system-error
      (lambda ()
        ;; Not to be refused by the TIME_WAIT connections a server that
        ;; just stopped left behind.
        (setsockopt sock SOL_SOCKET SO_REUSEADDR 1)
        (when reuse-port?
          (setsockopt sock SOL_SOCKET SO_REUSEPORT 1))
        (bind sock address)
        (when listen?
          (listen sock backlog))
        sock)
      (lambda args
        (close-port sock)
        (address-error (host+port host port) (system-error-message args))))))

(define (open-tcp-listener host port backlog reuse-port? listen?)
  (let ((sock (bind-tcp host port #:reuse-port? reuse-port? #:listen? listen?
                        #:backlog backlog)))
    (make-non-blocking! sock)
    ;; HTTP clients speak first: let accept(2) return a connection only
    ;; once its request has arrived, so the loop reads it at once instead
    ;; of waiting for another epoll round (bench/hello, Connection: close).
    (fd-set-defer-accept! (port->fdes sock) 1)
    sock))

(define (open-unix-listener path backlog)
  (remove-stale-socket! path)
  (let ((sock (socket AF_UNIX SOCK_STREAM 0)))
    (catch 'system-error
      (lambda ()
        (bind sock AF_UNIX path)
        (listen sock backlog))
      (lambda args
        (close-port sock)
        (address-error (string-append unix-prefix path) (system-error-message args))))
    (make-non-blocking! sock)
    sock))

(define (remove-stale-socket! path)
  ;; A socket file nobody accepts on is what a server that died leaves
  ;; behind: remove it.  Refuse to touch anything else.
  (let ((st (false-if-exception (lstat path))))
    (when st
      (unless (eq? (stat:type st) 'socket)
        (address-error (string-append unix-prefix path)
                       "the file there is not a socket; not removing it"))
      (let ((probe (socket AF_UNIX SOCK_STREAM 0)))
        (let ((live? (catch 'system-error
                       (lambda () (connect probe AF_UNIX path) #t)
                       (lambda args
                         (let ((errno (system-error-errno args)))
                           (if (or (= errno ECONNREFUSED) (= errno ENOENT))
                               #f
                               (apply throw args)))))))
          (close-port probe)
          (when live?
            (address-error (string-append unix-prefix path)
                           "address in use: a server accepts connections on it"))
          (false-if-exception (delete-file path)))))))

(define* (open-listeners host port count #:key (backlog default-backlog))
  "Return a list of COUNT sockets bound to the same HOST and PORT with
SO_REUSEPORT, one per worker, or a list of one listening socket when
COUNT is 1 or HOST is a Unix-domain socket (\"unix:PATH\"), which
SO_REUSEPORT does not spread.  With PORT 0 the first socket picks the
port and the others join it.  The first socket listens; each of the
others is only bound until its worker calls `start-listening!' on it,
ready to accept.  The kernel spreads connections over the sockets that
listen: had they all listened at once, a connection that came while the
workers started could wait in the queue of a worker still starting
(some 1-2 ms at start-up, bench/startup) while another one was idle; a
socket whose worker cannot start takes no connections.  Raise an
`address-error?' exception if another socket listens there already
(SO_REUSEPORT would have let these join it)."
  (if (or (<= count 1) (unix-path host))
      (list (open-listener host port #:backlog backlog))
      (let ((sockets '()))                ; those bound so far, the first last
        (with-exception-handler
            (lambda (exception)
              (for-each close-port sockets)
              (raise-exception exception))
          (lambda ()
            (let* ((first (open-listener host port #:backlog backlog #:reuse-port? #t
                                         #:listen? #f))
                   (port (listener-port first)))
              (set! sockets (list first))
              (for-each (lambda (i)
                          (set! sockets (cons (open-listener host port #:backlog backlog
                                                             #:reuse-port? #t #:listen? #f)
                                              sockets)))
                        (iota (- count 1)))
              (refuse-if-served host port)
              (catch 'system-error
                (lambda () (start-listening! first #:backlog backlog))
                (lambda args
                  (address-error (host+port host port) (system-error-message args))))
              (reverse sockets)))
          #:unwind? #t))))

(define (refuse-if-served host port)
  ;; Raise an address error if a socket listens on HOST and PORT, or on
  ;; a wildcard address covering them, other than this process's own
  ;; (bound, not listening yet).  A probe without SO_REUSEPORT binds and
  ;; listens there only if no other socket listens: the kernel decides,
  ;; atomically, by the rules that route the connections.  It runs
  ;; after this process's sockets are bound and before the first
  ;; listens; while it listens, another plucky starting at the same
  ;; moment can neither bind its sockets nor listen with its probe, and
  ;; once the first socket listens, that plucky's probe fails.  The one
  ;; interleaving left: another plucky's whole probe between this
  ;; probe's close and the first socket's listen, two system calls.
  (close-port (bind-tcp host port #:listen? #t)))

(define* (start-listening! sock #:key (backlog default-backlog))
  "Make SOCK, a socket from `open-listeners', listen: connections start
coming to it.  Harmless on a socket that listens already (a replacement
worker's, or the first): the queue keeps what it holds."
  (listen sock backlog))

(define (listener-port sock)
  "Return the TCP port the listening socket SOCK is bound to."
  (sockaddr:port (getsockname sock)))

(define (unix-listener-path sock)
  "Return the path of the Unix-domain listening socket SOCK, or #f when
SOCK is not a Unix-domain socket or has no path."
  (let ((addr (getsockname sock)))
    (and (= (sockaddr:fam addr) AF_UNIX)
         (let ((path (sockaddr:path addr)))
           (and (string? path) (not (string-null? path)) path)))))

(define (listener-url sock)
  "Return where SOCK listens, for people: \"http://127.0.0.1:8080/\",
\"http://[::1]:8080/\" or \"unix:/run/app.sock\"."
  (let* ((addr (getsockname sock))
         (family (sockaddr:fam addr)))
    (cond
     ((= family AF_UNIX)
      (string-append unix-prefix (or (sockaddr:path addr) "")))
     (else
      (let ((host (inet-ntop family (sockaddr:addr addr))))
        (string-append "http://"
                       (if (= family AF_INET6) (string-append "[" host "]") host)
                       ":" (number->string (sockaddr:port addr)) "/"))))))

(define (close-listener sock)
  "Close the listening socket SOCK; remove its file if it is a
Unix-domain socket this process bound."
  (let ((path (false-if-exception (unix-listener-path sock))))
    (close-port sock)
    (when path
      (false-if-exception (delete-file path)))))

;;;
;;; Inherited sockets
;;;

(define (descriptor->listener fd)
  "Return a port for FD, a listening stream socket this process
inherited (from a service manager, or a parent that passed it with
--fd), made non-blocking and close-on-exec.  Raise an error if FD is not
a listening stream socket."
  (define (refuse why)
    (error (string-append "descriptor " (number->string fd) " " why)))
  (let ((st (false-if-exception (stat fd))))
    (cond
     ((not st) (refuse "is not open"))
     ((not (eq? (stat:type st) 'socket)) (refuse "is not a listening stream socket"))))
  (let ((sock (fdopen fd "r+0")))
    (unless (and (false-if-exception (= SOCK_STREAM (getsockopt sock SOL_SOCKET SO_TYPE)))
                 (false-if-exception (= 1 (getsockopt sock SOL_SOCKET SO_ACCEPTCONN))))
      (refuse "is not a listening stream socket"))
    (make-non-blocking! sock)
    sock))

(define SD_LISTEN_FDS_START 3)

(define (inherited-listeners)
  "Return the listening sockets a service manager passed to this process
by socket activation, as a list of (NAME . PORT) pairs, or '() when
there are none.  Follows sd_listen_fds(3): LISTEN_PID must be this
process's PID, LISTEN_FDS says how many descriptors there are, starting
at 3, and LISTEN_FDNAMES, if set, names them (colon-separated; NAME is
#f otherwise).  The three variables are then removed from the
environment, lest a child process take the sockets for its own."
  (let ((pid (getenv "LISTEN_PID"))
        (count (getenv "LISTEN_FDS"))
        (names (getenv "LISTEN_FDNAMES")))
    (cond
     ((not (and pid count (equal? (string->number pid) (getpid))))
      '())
     (else
      (unsetenv "LISTEN_PID")
      (unsetenv "LISTEN_FDS")
      (unsetenv "LISTEN_FDNAMES")
      (let ((count (or (string->number count) 0))
            (names (if names (string-split names #\:) '())))
        (map (lambda (i)
               (cons (and (< i (length names)) (list-ref names i))
                     (descriptor->listener (+ SD_LISTEN_FDS_START i))))
             (iota count)))))))

;;; (plucky server socket) ends here
