;;; tests/sys/libc.scm --- (plucky sys libc) and (plucky sys epoll)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The FFI wrappers against real descriptors: pipes, a socketpair and a
;;; listening TCP socket on 127.0.0.1.  The point of the conventions in
;;; (plucky sys libc) is that failures come back as negated errno values,
;;; never as exceptions; each group checks a success and a failure.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (tests lib harness)
             (rnrs bytevectors)
             ((rnrs io ports) #:select (put-bytevector))
             (plucky sys libc)
             ((plucky sys foreign) #:select (libc-procedure int))
             (plucky sys epoll))

(test-begin "sys/libc")

;;;
;;; Helpers
;;;

;; -> (values read-fd write-fd read-port write-port); the ports are kept
;; so that the caller closes them (and with them the descriptors).
(define (make-pipe)
  (let ((p (pipe)))
    (values (port->fdes (car p)) (port->fdes (cdr p)) (car p) (cdr p))))

(define (close-pipe-ports . ports)
  (for-each close-port ports))

;; Read up to COUNT bytes from FD -> bytevector of what came, or the
;; negated errno.
(define (read-some fd count)
  (let* ((buf (make-bytevector count 0))
         (n (fd-read fd (bytevector-address buf) 0 count)))
    (if (< n 0)
        n
        (let ((out (make-bytevector n)))
          (bytevector-copy! buf 0 out 0 n)
          out))))

(define (write-all fd bv)
  (fd-write fd (bytevector-address bv) 0 (bytevector-length bv)))

;; A descriptor number that is certainly not open: one we just closed.
(define (closed-fd)
  (let ((p (pipe)))
    (let ((fd (dup->fdes (car p))))
      (close-port (car p))
      (close-port (cdr p))
      (fd-close fd)
      fd)))

;;;
;;; fd-read, fd-write
;;;

(test-group "fd-write then fd-read on a pipe"
  (call-with-values make-pipe
    (lambda (rfd wfd rport wport)
      (test-equal "write returns the count" 5 (write-all wfd (string->utf8 "hello")))
      (test-equal "read returns the bytes" (string->utf8 "hello") (read-some rfd 64))
      (close-pipe-ports rport wport))))

(test-group "fd-read and fd-write honour START"
  (call-with-values make-pipe
    (lambda (rfd wfd rport wport)
      (let ((src (string->utf8 "0123456789")))
        (test-equal "wrote from offset 3" 4
          (fd-write wfd (bytevector-address src) 3 4))
        (let ((buf (make-bytevector 8 (char->integer #\.))))
          (test-equal "read into offset 2" 4
            (fd-read rfd (bytevector-address buf) 2 6))
          (test-equal "bytes landed at the offset" "..3456.."
            (utf8->string buf))))
      (close-pipe-ports rport wport))))

(test-group "fd-read at end of file"
  (call-with-values make-pipe
    (lambda (rfd wfd rport wport)
      (close-port wport)
      (test-equal "0 once the writer is gone" 0
        (let ((buf (make-bytevector 4)))
          (fd-read rfd (bytevector-address buf) 0 4)))
      (close-port rport))))

(test-group "EAGAIN is a value"
  (call-with-values make-pipe
    (lambda (rfd wfd rport wport)
      (test-equal "fd-set-nonblocking! succeeds" 0 (fd-set-nonblocking! rfd))
      (test-equal "empty non-blocking pipe -> (- EAGAIN)" (- EAGAIN) (read-some rfd 16))
      (test-equal "errno-EAGAIN is EAGAIN" EAGAIN errno-EAGAIN)
      (write-all wfd #vu8(1 2 3))
      (test-equal "data after EAGAIN still arrives" #vu8(1 2 3) (read-some rfd 16))
      (test-equal "empty again -> (- EAGAIN)" (- EAGAIN) (read-some rfd 16))
      (close-pipe-ports rport wport))))

(test-group "a full non-blocking pipe -> (- EAGAIN) on write"
  (call-with-values make-pipe
    (lambda (rfd wfd rport wport)
      (fd-set-nonblocking! wfd)
      (let ((chunk (make-bytevector 65536 0)))
        ;; A pipe holds 64 KiB by default; writing until it refuses must
        ;; end with EAGAIN, and within a bounded number of writes.
        (let lp ((i 0) (total 0))
          (let ((n (write-all wfd chunk)))
            (cond
             ((and (>= n 0) (< i 1000)) (lp (+ i 1) (+ total n)))
             (else
              (test-equal "write on a full pipe" (- EAGAIN) n)
              (test-assert "something was written first" (> total 0)))))))
      (close-pipe-ports rport wport))))

(test-group "a bad descriptor gives (- EBADF)"
  (let ((fd (closed-fd)))
    (test-equal "fd-read" (- EBADF) (read-some fd 4))
    (test-equal "fd-write" (- EBADF) (write-all fd #vu8(1)))
    (test-equal "fd-close" (- EBADF) (fd-close fd))
    (test-equal "fd-read on -1" (- EBADF) (read-some -1 4))
    (test-equal "fd-set-nonblocking!" (- EBADF) (fd-set-nonblocking! fd))
    (test-equal "errno->string" (strerror EBADF) (errno->string (- EBADF)))))

;;;
;;; fd-send-more
;;;

(test-group "fd-send-more"
  (let* ((pair (socketpair AF_UNIX SOCK_STREAM 0))
         (a (port->fdes (car pair)))
         (b (port->fdes (cdr pair)))
         (bv (string->utf8 "HTTP/1.1 200 OK\r\n\r\n")))
    (fd-set-nonblocking! b)
    (test-equal "writes the bytes from START" (- (bytevector-length bv) 5)
      (fd-send-more a (bytevector-address bv) 5 (- (bytevector-length bv) 5)))
    (test-equal "which the peer reads" (string->utf8 "1.1 200 OK\r\n\r\n")
      (read-some b 100))
    (close-port (car pair))
    (close-port (cdr pair)))
  (call-with-values make-pipe
    (lambda (rfd wfd rport wport)
      (test-equal "send(2): a pipe is not a socket -> (- ENOTSOCK)" (- ENOTSOCK)
        (fd-send-more wfd (bytevector-address #vu8(1)) 0 1))
      (close-pipe-ports rport wport)))
  (test-equal "a bad descriptor -> (- EBADF)" (- EBADF)
    (fd-send-more (closed-fd) (bytevector-address #vu8(1)) 0 1)))

;;;
;;; fd-memfd-create
;;;

(test-group "fd-memfd-create"
  (let ((fd (fd-memfd-create "plucky-test")))
    (test-assert "a descriptor" (>= fd 0))
    (test-assert "named in /proc"
      (string-contains (readlink (format #f "/proc/self/fd/~a" fd)) "memfd:plucky-test"))
    (test-assert "close-on-exec"
      (not (zero? (logand (fcntl fd F_GETFD) FD_CLOEXEC))))
    (test-equal "takes bytes" 3 (write-all fd #vu8(7 8 9)))
    (call-with-values make-pipe
      (lambda (rfd wfd rport wport)
        (test-equal "which sendfile sends" 3 (fd-sendfile wfd fd 0 3))
        (test-equal "those bytes" #vu8(7 8 9) (read-some rfd 10))
        (close-pipe-ports rport wport)))
    (fd-close fd)))

;;;
;;; fd-open-read
;;;

(define (c-string text)
  (string->utf8 (string-append text "\x00")))

(test-group "fd-open-read"
  (let* ((port (mkstemp! (string-copy "/tmp/plucky-test-open-XXXXXX")))
         (file (port-filename port))
         (name (c-string file)))
    (display "abc" port)
    (close-port port)
    (let ((fd (fd-open-read (bytevector-address name))))
      (test-assert "a descriptor" (>= fd 0))
      (test-assert "close-on-exec"
        (not (zero? (logand (fcntl fd F_GETFD) FD_CLOEXEC))))
      (test-equal "of the file" (string->utf8 "abc") (read-some fd 10))
      (test-equal "read-only" (- EBADF) (write-all fd #vu8(1)))
      (fd-close fd))
    (delete-file file)
    (test-equal "a missing file: -ENOENT, nothing raised" (- ENOENT)
      (fd-open-read (bytevector-address name)))))

(test-group "fd-pread and fd-link-count"
  (let* ((dir (mkdtemp (string-copy "/tmp/plucky-test-pread-XXXXXX")))
         (file (string-append dir "/ref"))
         (buffer (make-bytevector 8 0)))
    (call-with-output-file file (lambda (port) (display "abcdef" port)))
    (let ((fd (fd-open-read (bytevector-address (c-string file)))))
      (test-equal "from the offset given" 3 (fd-pread fd (bytevector-address buffer) 0 3 2))
      (test-equal "those bytes" (string->utf8 "cde") (u8-list->bytevector (list-head (bytevector->u8-list buffer) 3)))
      (test-equal "the file's own offset untouched: pread from 0 again" 3
        (fd-pread fd (bytevector-address buffer) 0 3 0))
      (test-equal "and a read(2) starts at 0" (string->utf8 "abc") (read-some fd 3))
      (test-equal "one name" 1 (fd-link-count fd))
      (rename-file file (string-append dir "/moved"))
      (test-equal "renamed: one name still" 1 (fd-link-count fd))
      (call-with-output-file file (lambda (port) (display "new" port)))
      (rename-file file (string-append dir "/moved"))
      (test-equal "another file renamed over it: none" 0 (fd-link-count fd))
      (fd-close fd))
    (let ((fd (fd-open-read (bytevector-address (c-string (string-append dir "/moved"))))))
      (delete-file (string-append dir "/moved"))
      (test-equal "removed: none" 0 (fd-link-count fd))
      (fd-close fd)
      (test-equal "a closed descriptor: -EBADF" (- EBADF) (fd-link-count fd)))
    (rmdir dir)))

;;;
;;; fd-sendfile
;;;

(test-group "fd-sendfile"
  (let* ((file (string-copy "/tmp/plucky-sendfile-XXXXXX"))
         (out (mkstemp! file))
         (data (let ((bv (make-bytevector 300000)))
                 (let lp ((i 0))
                   (when (< i 300000)
                     (bytevector-u8-set! bv i (modulo i 251))
                     (lp (+ i 1))))
                 bv)))
    (put-bytevector out data)
    (close-port out)
    (let ((in (open-input-file file #:binary #t)))
      (delete-file file)
      (call-with-values make-pipe
        (lambda (rfd wfd rport wport)
          (fd-set-nonblocking! wfd)
          (fd-set-nonblocking! rfd)
          (test-equal "from OFFSET, COUNT bytes" 10 (fd-sendfile wfd (port->fdes in) 1000 10))
          (test-equal "those bytes"
            (let ((bv (make-bytevector 10)))
              (bytevector-copy! data 1000 bv 0 10)
              bv)
            (read-some rfd 100))
          (test-equal "the file's own offset is left alone" 0 (seek in 0 SEEK_CUR))
          (test-equal "at the end of the file: 0" 0 (fd-sendfile wfd (port->fdes in) 300000 10))
          ;; A pipe holds 64 KiB: sending the whole file fills it.
          (let lp ((offset 0))
            (let ((n (fd-sendfile wfd (port->fdes in) offset (- 300000 offset))))
              (if (and (> n 0) (< offset 300000))
                  (lp (+ offset n))
                  (begin
                    (test-equal "a full pipe -> (- EAGAIN)" (- EAGAIN) n)
                    (test-assert "after some bytes" (> offset 0))))))
          (close-pipe-ports rport wport)
          (test-equal "a bad descriptor -> (- EBADF)" (- EBADF)
            (fd-sendfile (closed-fd) (port->fdes in) 0 10))))
      (close-port in))))

;;;
;;; fd-writev
;;;

(test-group "fd-writev"
  (call-with-values make-pipe
    (lambda (rfd wfd rport wport)
      (let ((head (string->utf8 "head:"))
            (body (string->utf8 "the body"))
            (iovecs (make-iovecs 2)))
        (iovec-set! iovecs 0 (bytevector-address head) (bytevector-length head))
        (iovec-set! iovecs 1 (bytevector-address body) (bytevector-length body))
        (test-equal "returns the total" 13 (fd-writev wfd (bytevector-address iovecs) 2))
        (test-equal "both pieces, in order" "head:the body" (utf8->string (read-some rfd 64)))
        ;; Only the first entry when COUNT is 1.
        (test-equal "count 1 writes one entry" 5
          (fd-writev wfd (bytevector-address iovecs) 1))
        (test-equal "just the first piece" "head:" (utf8->string (read-some rfd 64)))
        ;; An entry pointing into the middle of a bytevector.
        (iovec-set! iovecs 0 (+ 4 (bytevector-address body)) 4)
        (iovec-set! iovecs 1 (bytevector-address head) 4)
        (fd-writev wfd (bytevector-address iovecs) 2)
        (test-equal "addresses with offsets" "bodyhead" (utf8->string (read-some rfd 64)))
        (test-equal "bad descriptor" (- EBADF)
          (fd-writev (closed-fd) (bytevector-address iovecs) 2)))
      (close-pipe-ports rport wport))))

;;;
;;; Sockets: accept, shutdown, TCP_NODELAY
;;;

(define (listening-socket)
  (let ((sock (socket AF_INET SOCK_STREAM 0)))
    (bind sock AF_INET INADDR_LOOPBACK 0)
    (listen sock 8)
    (fcntl sock F_SETFL (logior O_NONBLOCK (fcntl sock F_GETFL)))
    sock))

(define (fdes->borrowed-port fd)
  ;; A port on FD that does not own it (revealed), for getsockopt.
  (let ((port (fdopen fd "r+")))
    (set-port-revealed! port 1)
    port))

(test-group "fd-accept"
  (let* ((listener (listening-socket))
         (lfd (port->fdes listener)))
    (test-equal "nothing waiting -> (- EAGAIN)" (- EAGAIN) (fd-accept lfd))
    (let ((client (socket AF_INET SOCK_STREAM 0)))
      (connect client AF_INET INADDR_LOOPBACK (sockaddr:port (getsockname listener)))
      ;; The connection is complete on loopback once connect returns.
      (let ((fd (fd-accept lfd)))
        (test-assert "a new descriptor" (> fd 2))
        (test-assert "it is non-blocking"
          (not (zero? (logand O_NONBLOCK (fcntl fd F_GETFL)))))
        (test-assert "it is close-on-exec"
          (not (zero? (logand FD_CLOEXEC (fcntl fd F_GETFD)))))
        (test-equal "TCP_NODELAY on it" 0 (fd-set-tcp-nodelay! fd))
        (test-equal "and the option is set" 1
          (getsockopt (fdes->borrowed-port fd) IPPROTO_TCP TCP_NODELAY))
        (test-equal "read with nothing sent -> (- EAGAIN)" (- EAGAIN) (read-some fd 4))
        (write-all fd (string->utf8 "ping"))
        (test-equal "the client reads what fd-write sent" "ping"
          (let ((buf (make-bytevector 4)))
            (recv! client buf)
            (utf8->string buf)))
        (test-equal "fd-shutdown-write" 0 (fd-shutdown-write fd))
        (test-equal "the client then reads end of file" 0
          (recv! client (make-bytevector 4)))
        (test-equal "fd-close" 0 (fd-close fd)))
      (close-port client))
    (test-equal "accept on a non-listening descriptor fails" (- EINVAL)
      (let ((s (socket AF_INET SOCK_STREAM 0)))
        (let ((r (fd-accept (port->fdes s))))
          (close-port s)
          r)))
    (close-port listener)))

(test-group "fd-socket, fd-connect, fd-socket-error, fd-send"
  (let* ((listener (listening-socket))
         (port (sockaddr:port (getsockname listener)))
         (address (sockaddr->bytevector (make-socket-address AF_INET INADDR_LOOPBACK port)))
         (fd (fd-socket AF_INET)))
    (test-equal "a struct sockaddr_in: 16 bytes, the port big-endian" (list 16 port)
      (list (bytevector-length address) (bytevector-u16-ref address 2 (endianness big))))
    (test-equal "a struct sockaddr_in6: 28 bytes" 28
      (bytevector-length (sockaddr->bytevector (make-socket-address AF_INET6 1 port))))
    (test-assert "a new socket, non-blocking and close-on-exec"
      (and (> fd 2)
           (not (zero? (logand O_NONBLOCK (fcntl fd F_GETFL))))
           (not (zero? (logand FD_CLOEXEC (fcntl fd F_GETFD))))))
    (let ((r (fd-connect fd address)))
      (test-assert "connecting: 0 or (- EINPROGRESS)" (memv r (list 0 (- EINPROGRESS)))))
    (test-assert "writable once connected" (fd-wait fd 'write 5000))
    (test-equal "no error: connected" 0 (fd-socket-error fd))
    (let ((peer (car (accept listener))))
      (test-equal "fd-send" 4 (let ((bv (string->utf8 "ping")))
                                (fd-send fd (bytevector-address bv) 0 4)))
      (test-equal "the peer reads it" "ping"
        (let ((buf (make-bytevector 4))) (recv! peer buf) (utf8->string buf)))
      (close-port peer)
      ;; The peer's close resets the connection on the next send: -EPIPE
      ;; or -ECONNRESET, as a value, and no SIGPIPE.
      (let ((bv (make-bytevector 65536 0)))
        (test-assert "sending to a closed peer fails with a value"
          (let lp ((i 0))
            (let ((n (fd-send fd (bytevector-address bv) 0 65536)))
              (cond ((memv n (list (- EPIPE) (- ECONNRESET))) #t)
                    ((or (< n 0) (= i 100)) n)
                    (else (fd-wait fd 'write 1000) (lp (+ i 1)))))))))
    (fd-close fd)
    (close-port listener)
    (let ((fd (fd-socket AF_INET)))
      ;; The listener is closed: nothing listens on PORT any more.
      (fd-connect fd address)
      (fd-wait fd 'write 5000)
      (test-equal "a refused connection: (- ECONNREFUSED)" (- ECONNREFUSED)
        (fd-socket-error fd))
      (fd-close fd))))

(test-group "TCP_NODELAY on a pipe fails with a value"
  (call-with-values make-pipe
    (lambda (rfd wfd rport wport)
      (test-equal "(- ENOTSOCK)" (- ENOTSOCK) (fd-set-tcp-nodelay! rfd))
      (close-pipe-ports rport wport))))

;;;
;;; epoll
;;;

(define (wait-events epfd events timeout-ms)
  (epoll-wait epfd events (bytevector-address events) timeout-ms))

(test-group "epoll reports a readable pipe"
  (call-with-values make-pipe
    (lambda (rfd wfd rport wport)
      (let ((epfd (epoll-create))
            (events (make-epoll-events 8)))
        (test-assert "epoll-create gives a descriptor" (>= epfd 0))
        (test-equal "epoll-add!" 0 (epoll-add! epfd rfd EPOLLIN))
        (test-equal "nothing ready: times out with 0" 0 (wait-events epfd events 50))
        (write-all wfd #vu8(42))
        (test-equal "one event" 1 (wait-events epfd events 1000))
        (test-equal "for the read end" rfd (epoll-event-fd events 0))
        (test-assert "with EPOLLIN" (not (zero? (logand EPOLLIN (epoll-event-flags events 0)))))
        (test-equal "level-triggered: still ready until read" 1 (wait-events epfd events 0))
        (read-some rfd 8)
        (test-equal "drained: times out again" 0 (wait-events epfd events 0))
        (test-equal "adding twice -> (- EEXIST)" (- EEXIST) (epoll-add! epfd rfd EPOLLIN))
        (fd-close epfd))
      (close-pipe-ports rport wport))))

(test-group "epoll-wait times out"
  (let ((epfd (epoll-create))
        (events (make-epoll-events 4)))
    (let ((start (get-internal-real-time)))
      (test-equal "0 after the timeout" 0 (wait-events epfd events 100))
      (test-assert "and it did wait (>= 90 ms)"
        (>= (- (get-internal-real-time) start)
            (* 90/1000 internal-time-units-per-second))))
    (fd-close epfd)))

(test-group "epoll with several descriptors, modify and remove"
  (call-with-values make-pipe
    (lambda (rfd1 wfd1 rport1 wport1)
      (call-with-values make-pipe
        (lambda (rfd2 wfd2 rport2 wport2)
          (let ((epfd (epoll-create))
                (events (make-epoll-events 8)))
            (epoll-add! epfd rfd1 EPOLLIN)
            (epoll-add! epfd rfd2 EPOLLIN)
            (epoll-add! epfd wfd1 EPOLLOUT)
            (write-all wfd2 #vu8(7))
            (let ((n (wait-events epfd events 1000)))
              (test-equal "two ready" 2 n)
              (let ((ready (map (lambda (i)
                                  (cons (epoll-event-fd events i)
                                        (epoll-event-flags events i)))
                                (iota n))))
                (test-assert "the read end with data, EPOLLIN"
                  (let ((e (assv rfd2 ready)))
                    (and e (not (zero? (logand EPOLLIN (cdr e)))))))
                (test-assert "the empty pipe's write end, EPOLLOUT"
                  (let ((e (assv wfd1 ready)))
                    (and e (not (zero? (logand EPOLLOUT (cdr e)))))))
                (test-assert "not the empty read end" (not (assv rfd1 ready)))))
            (test-equal "epoll-modify!" 0 (epoll-modify! epfd wfd1 EPOLLIN))
            (test-equal "epoll-remove!" 0 (epoll-remove! epfd rfd2))
            (test-equal "nothing ready after modify and remove" 0
              (wait-events epfd events 0))
            (test-equal "removing again -> (- ENOENT)" (- ENOENT) (epoll-remove! epfd rfd2))
            (test-equal "modifying a descriptor not watched -> (- ENOENT)" (- ENOENT)
              (epoll-modify! epfd rfd2 EPOLLIN))
            (close-port wport1)
            (test-equal "the reader of a closed pipe gets EPOLLHUP" 1
              (wait-events epfd events 1000))
            (test-assert "EPOLLHUP"
              (and (= rfd1 (epoll-event-fd events 0))
                   (not (zero? (logand EPOLLHUP (epoll-event-flags events 0))))))
            (fd-close epfd))
          (close-pipe-ports rport2 wport2)))
      (close-pipe-ports rport1))))

(test-group "epoll-event-fd with many events"
  ;; Every slot of the events buffer is read at the right offset.
  (let* ((pipes (map (lambda (i) (call-with-values make-pipe list)) (iota 5)))
         (epfd (epoll-create))
         (events (make-epoll-events 8)))
    (for-each (lambda (p)
                (epoll-add! epfd (car p) EPOLLIN)
                (write-all (cadr p) #vu8(1)))
              pipes)
    (let ((n (wait-events epfd events 1000)))
      (test-equal "five events" 5 n)
      (test-equal "the five read ends"
        (sort (map car pipes) <)
        (sort (map (lambda (i) (epoll-event-fd events i)) (iota n)) <)))
    (fd-close epfd)
    (for-each (lambda (p) (close-port (caddr p)) (close-port (cadddr p))) pipes)))

(test-group "call-retrying-eintr"
  (let ((%close (libc-procedure int "close" (list int)))
        (%getpid (libc-procedure int "getpid" '())))
    (test-equal "a result" (getpid) (call-retrying-eintr %getpid))
    (test-equal "a failure: the negated errno" (- EBADF) (call-retrying-eintr %close -1))))

(test-end "sys/libc")
