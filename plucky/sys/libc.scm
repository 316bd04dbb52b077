;;; (plucky sys libc) --- the few libc calls Guile lacks, on raw descriptors

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Guile's socket procedures work on ports, and a port allocates a read
;;; and a write buffer, a large cost per request in the seed profile
;;; ("port buffer allocation", bench/instructions).  plucky keeps each
;;; connection as a bare file descriptor and calls read(2), write(2),
;;; writev(2), accept4(2) and friends through the FFI instead.
;;;
;;; Conventions shared by every wrapper here:
;;;  - EINTR is retried inside the wrapper; a caller never sees it.
;;;  - Success returns a non-negative integer; failure returns the
;;;    negated errno (so -EAGAIN means "would block"): no exception, no
;;;    allocation, one comparison at the call site.
;;;  - Buffers are passed as (bytevector, start, count) and reach C as an
;;;    integer address.  Taking `bytevector->pointer' on every call would
;;;    allocate a pointer object and register a weak reference (a global
;;;    hash table insert); instead a buffer's base address is computed
;;;    once with `bytevector-address' and kept beside it.  Guile's
;;;    collector does not move objects, so the address stays valid while
;;;    the bytevector is reachable — callers keep the bytevector itself
;;;    alive in their connection record for as long as they use the address.
;;;
;;; Code:

(define-module (plucky sys libc)
  #:use-module (plucky sys foreign)
  #:use-module (rnrs bytevectors)
  #:export (bytevector-address
            address->bytevector
            page-size
            fd-read
            fd-write
            fd-writev
            fd-send-more
            fd-sendfile
            fd-close
            fd-open-read
            fd-pread
            fd-link-count
            fd-memfd-create
            fd-shutdown-write
            fd-shutdown
            fd-wait
            fd-accept
            fd-accept/peer
            fd-peer-address
            sockaddr->string
            fd-set-tcp-nodelay!
            fd-set-defer-accept!
            fd-ack-now!
            fd-set-nonblocking!
            fd-socket
            fd-connect
            fd-socket-error
            fd-send
            fd-peek
            sockaddr->bytevector
            set-parent-death-signal!
            make-iovecs
            iovec-set!
            errno-EAGAIN
            errno-EPIPE
            errno-ECONNRESET
            errno-EMFILE
            errno-ENFILE
            errno->string
            call-retrying-eintr))

(define errno-EAGAIN EAGAIN)
(define errno-EPIPE EPIPE)
(define errno-ECONNRESET ECONNRESET)
(define errno-EMFILE EMFILE)
(define errno-ENFILE ENFILE)
(define errno-EINTR EINTR)

(define (errno->string negated-errno)
  "Return the system's message for NEGATED-ERRNO, as the wrappers return it."
  (strerror (- negated-errno)))

(define (bytevector-address bv)
  "Return the address of the first byte of BV as an integer.  The caller
must keep BV reachable while it uses the address."
  (pointer-address (bytevector->pointer bv)))

(define (address->bytevector address count)
  "Return a bytevector that is a view of the COUNT bytes of memory at
ADDRESS (an integer), not a copy.  The caller must keep that memory
alive and in place while it uses the view."
  (pointer->bytevector (make-pointer address) count))

(define (page-size)
  "Return the size of a page of memory, in bytes (getpagesize(3))."
  ((pointer->procedure int (symbol-address "getpagesize") '())))

;; Each %call returns two values: the C result and errno.  The macro
;; retries EINTR and folds errno into a negative result.  A macro of the
;; compiler only: see (plucky sys inline) for why.
(eval-when (expand)
  (define-syntax-rule (retrying-eintr call)
    (let retry ()
      (call-with-values (lambda () call)
        (lambda (result errno)
          (cond
           ((>= result 0) result)
           ((= errno errno-EINTR) (retry))
           (else (- errno))))))))

;; For the wrappers of other modules, off the hot path: a procedure.
(define (call-retrying-eintr procedure . args)
  "Return the C result of (PROCEDURE ARG …), PROCEDURE from
`libc-procedure', calling it again while it fails with EINTR; a failure
as the negated errno."
  (retrying-eintr (apply procedure args)))

(define %read (libc-procedure ssize_t "read" (list int uintptr_t size_t)))
(define %write (libc-procedure ssize_t "write" (list int uintptr_t size_t)))
(define %writev (libc-procedure ssize_t "writev" (list int uintptr_t int)))
(define %send (libc-procedure ssize_t "send" (list int uintptr_t size_t int)))
(define %sendfile (libc-procedure ssize_t "sendfile" (list int int uintptr_t size_t)))
(define %close (libc-procedure int "close" (list int)))
(define %open (libc-procedure int "open" (list uintptr_t int)))
(define %pread (libc-procedure ssize_t "pread" (list int uintptr_t size_t long)))
;; #f where the C library has no statx (glibc before 2.28, older musl):
;; `fd-link-count' then says ENOSYS rather than the module failing to load.
(define %statx
  (catch #t
    (lambda () (libc-procedure int "statx" (list int uintptr_t int unsigned-int uintptr_t)))
    (lambda _ #f)))
(define %memfd-create (libc-procedure int "memfd_create" (list uintptr_t unsigned-int)))
(define %shutdown (libc-procedure int "shutdown" (list int int)))
(define %accept4 (libc-procedure int "accept4" (list int uintptr_t uintptr_t int)))
(define %setsockopt
  (libc-procedure int "setsockopt" (list int int int uintptr_t unsigned-int)))
(define %fcntl (libc-procedure int "fcntl" (list int int int)))
(define %poll (libc-procedure int "poll" (list uintptr_t unsigned-long int)))
(define %socket (libc-procedure int "socket" (list int int int)))
(define %connect (libc-procedure int "connect" (list int uintptr_t unsigned-int)))
(define %getpeername (libc-procedure int "getpeername" (list int uintptr_t uintptr_t)))
(define %getsockopt
  (libc-procedure int "getsockopt" (list int int int uintptr_t uintptr_t)))
(define %recv (libc-procedure ssize_t "recv" (list int uintptr_t size_t int)))

(define (fd-read fd address start count)
  "Read at most COUNT bytes from FD into the buffer at ADDRESS (from
`bytevector-address') plus START.  Return the number of bytes read (0 at
end of file) or a negated errno, -EAGAIN when nothing is ready."
  (retrying-eintr (%read fd (+ address start) count)))

(define (fd-write fd address start count)
  "Write at most COUNT bytes to FD from ADDRESS plus START.  Return the
number written or a negated errno."
  (retrying-eintr (%write fd (+ address start) count)))

;;; An iovec array is a bytevector of (base, length) pairs of machine
;;; words: struct iovec { void *iov_base; size_t iov_len; }.
(define word-size (sizeof uintptr_t))

(define (make-iovecs n)
  "Return a bytevector that holds N struct iovec entries."
  (make-bytevector (* n 2 word-size) 0))

(define (iovec-set! iovecs i address count)
  "Set entry I of IOVECS to COUNT bytes at ADDRESS."
  (bytevector-uint-set! iovecs (* i 2 word-size) address (native-endianness) word-size)
  (bytevector-uint-set! iovecs (+ (* i 2 word-size) word-size) count
                        (native-endianness) word-size))

(define (fd-writev fd iovecs-address count)
  "Write the COUNT iovec entries at IOVECS-ADDRESS to FD with one
writev(2).  Return the number of bytes written or a negated errno."
  (retrying-eintr (%writev fd iovecs-address count)))

(define MSG_MORE #x8000)

(define (fd-send-more fd address start count)
  "Write at most COUNT bytes to the socket FD from ADDRESS plus START
with send(2) and MSG_MORE: the kernel holds them back, as TCP_CORK
would, until the next write without it (a `fd-sendfile' of the bytes
that follow), so that a response's head and the start of its file
leave in the same segments.  Return the number written or a negated
errno."
  (retrying-eintr (%send fd (+ address start) count MSG_MORE)))

;; Memory a call fills or reads by address, one per thread, as threads
;; may call at once: a thread-local fluid holding (bytevector . address),
;; made on the thread's first call (`bytevector-address' makes a pointer
;; object on each call).
(define (thread-cell fluid size)
  (or (fluid-ref fluid)
      (let* ((bv (make-bytevector size 0))
             (cell (cons bv (bytevector-address bv))))
        (fluid-set! fluid cell)
        cell)))

;; sendfile(2) reads the file offset from, and writes it back to, an
;; off_t in memory.
(define sendfile-offset (make-thread-local-fluid #f))

(define (fd-sendfile out-fd in-fd offset count)
  "Copy at most COUNT bytes of the file IN-FD, from byte OFFSET on, to
OUT-FD with one sendfile(2), without reading them into the process.
Return the number of bytes sent (0 at the end of the file) or a negated
errno, -EAGAIN when OUT-FD, non-blocking, takes nothing now.  The file's
own offset is left alone."
  (let ((cell (thread-cell sendfile-offset 8)))
    (bytevector-s64-native-set! (car cell) 0 offset)
    (retrying-eintr (%sendfile out-fd in-fd (cdr cell) count))))

(define (fd-close fd)
  "Close FD.  Return 0 or a negated errno.  EINTR is not retried: on
Linux the descriptor is released even when close(2) is interrupted, and a
retry could close a descriptor another part of the program just opened."
  (call-with-values (lambda () (%close fd))
    (lambda (result errno)
      (if (>= result 0) result (- errno)))))

(define (fd-open-read path-address)
  "Return a new descriptor of the file whose name, a NUL-terminated byte
string, is at PATH-ADDRESS (from `bytevector-address'), opened for
reading and close-on-exec; or a negated errno (-ENOENT when there is no
such file).  Unlike `open-fdes', it raises nothing and allocates nothing:
a file read on every request (apps/blog's ref) costs no exception handler."
  (retrying-eintr (%open path-address (logior O_RDONLY O_CLOEXEC))))

(define (fd-pread fd address start count offset)
  "Read at most COUNT bytes of the file FD from byte OFFSET into the
buffer at ADDRESS plus START, leaving the file's own offset alone.
Return the number of bytes read (0 at end of file) or a negated errno."
  (retrying-eintr (%pread fd (+ address start) count offset)))

;; statx(2)'s struct statx, one per thread (see `thread-cell'), and the
;; empty name that makes it describe the descriptor itself.  Its
;; layout is the same on every architecture: stx_nlink is the 32 bits at
;; byte 16.
(define statx-cell (make-thread-local-fluid #f))
(define empty-name (make-bytevector 1 0))
(define empty-name-address (bytevector-address empty-name))
(define AT_EMPTY_PATH #x1000)
(define STATX_NLINK #x4)

(define (fd-link-count fd)
  "Return the number of names the file FD is open on has (0 once it was
removed, or replaced by a rename over its name), or a negated errno
(-ENOSYS without statx(2))."
  (let ((cell (thread-cell statx-cell 256)))
    (if (not %statx)
        (- ENOSYS)
        (let ((result (retrying-eintr (%statx fd empty-name-address AT_EMPTY_PATH
                                              STATX_NLINK (cdr cell)))))
          (if (< result 0)
              result
              (bytevector-u32-native-ref (car cell) 16))))))

(define MFD_CLOEXEC 1)

(define (fd-memfd-create name)
  "Return a new descriptor of an anonymous file in memory (memfd_create(2),
close-on-exec), NAME (a string) showing in /proc/self/fd, or a negated
errno.  What is written to it can be sent with `fd-sendfile' as a
file's bytes are."
  (let ((bv (string->utf8 (string-append name "\x00"))))
    (retrying-eintr (%memfd-create (bytevector-address bv) MFD_CLOEXEC))))

(define SHUT_WR 1)

(define (fd-shutdown-write fd)
  "Shut down the sending side of the socket FD (the peer reads end of
file).  Return 0 or a negated errno."
  (retrying-eintr (%shutdown fd SHUT_WR)))

(define SHUT_RDWR 2)

(define (fd-shutdown fd)
  "Shut down both directions of the socket FD: a thread blocked reading
or writing it wakes with end of file or an error.  The descriptor stays
open.  Return 0 or a negated errno."
  (retrying-eintr (%shutdown fd SHUT_RDWR)))

(define POLLIN 1)
(define POLLOUT 4)

(define (fd-wait fd direction milliseconds)
  "Wait until FD is ready for DIRECTION ('read or 'write), has an error or
hung up, or MILLISECONDS have passed.  Return #t when it is ready (or in
error: the next read or write says which), #f on time-out.  For a thread
that does blocking I/O on a non-blocking descriptor; after an EINTR (the
collector stopping the world, for one) it waits for the time that is left."
  ;; struct pollfd { int fd; short events; short revents; }, per call:
  ;; threads may wait at once.
  (let ((pollfd (make-bytevector 8 0)))
    (bytevector-s32-native-set! pollfd 0 fd)
    (bytevector-s16-native-set! pollfd 4 (if (eq? direction 'read) POLLIN POLLOUT))
    ;; An EINTR is retried with the time that is left, not the whole
    ;; time: under load the collector stops the world (signalling every
    ;; thread) more often than a time-out lasts, and a wait that started
    ;; again from the top would never end (found by tests/fuzz with
    ;; port-app.scm: body time-outs that fired only once the load stopped).
    (let ((deadline (+ (get-internal-real-time)
                       (quotient (* milliseconds internal-time-units-per-second) 1000))))
      (let retry ((milliseconds milliseconds))
        (call-with-values (lambda () (%poll (bytevector-address pollfd) 1 milliseconds))
          (lambda (result errno)
            (cond
             ((>= result 0) (> result 0))
             ((= errno errno-EINTR)
              (let ((left (quotient (* (- deadline (get-internal-real-time)) 1000)
                                    internal-time-units-per-second)))
                (and (> left 0) (retry left))))
             (else #f))))))))

(define (fd-accept/peer fd sockaddr sockaddr-address length-address)
  "Like `fd-accept', and also store the peer's address in SOCKADDR (a
bytevector of at least 128 bytes at SOCKADDR-ADDRESS) with its length at
LENGTH-ADDRESS (a socklen_t, set by the caller to SOCKADDR's size).
Return the new descriptor or a negated errno.  See `sockaddr->string'."
  (retrying-eintr (%accept4 fd sockaddr-address length-address
                            (logior SOCK_NONBLOCK SOCK_CLOEXEC))))

(define (sockaddr->string sockaddr)
  "Return the address held in the struct sockaddr SOCKADDR (a bytevector,
as filled by `fd-accept/peer') as a string: \"192.0.2.1\", \"::1\", or
\"unix\" for a Unix-domain peer."
  (let ((family (bytevector-u16-native-ref sockaddr 0)))
    (cond
     ((= family AF_INET)
      (inet-ntop AF_INET (bytevector-u32-ref sockaddr 4 (endianness big))))
     ((= family AF_INET6)
      (inet-ntop AF_INET6 (bytevector-uint-ref sockaddr 8 (endianness big) 16)))
     ((= family AF_UNIX) "unix")
     (else "unknown"))))

(define (fd-peer-address fd)
  "Return the address of the peer of the connected socket FD as
`sockaddr->string' gives it, or #f when getpeername(2) fails."
  (let ((sockaddr (make-bytevector 136 0)))
    (bytevector-u32-native-set! sockaddr 128 128) ; socklen_t: the room
    (and (>= (%getpeername fd (bytevector-address sockaddr)
                           (+ (bytevector-address sockaddr) 128))
             0)
         (sockaddr->string sockaddr))))

(define (fd-accept fd)
  "Accept one connection on the listening socket FD, non-blocking and
close-on-exec.  Return the new descriptor or a negated errno (-EAGAIN
when no connection is waiting)."
  (retrying-eintr (%accept4 fd 0 0 (logior SOCK_NONBLOCK SOCK_CLOEXEC))))

;; setsockopt takes a pointer to an int; one static 1, made once.
(define int-one (let ((bv (make-bytevector (sizeof int) 0)))
                  (bytevector-sint-set! bv 0 1 (native-endianness) (sizeof int))
                  bv))
(define int-one-address (bytevector-address int-one))

(define (fd-set-tcp-nodelay! fd)
  "Turn off Nagle's algorithm on the TCP socket FD, so that a response
written in one piece leaves at once.  Return 0 or a negated errno."
  (retrying-eintr
   (%setsockopt fd IPPROTO_TCP TCP_NODELAY int-one-address (sizeof int))))

(define TCP_QUICKACK 12)

(define (fd-ack-now! fd)
  "Have the kernel acknowledge at once what the TCP socket FD has
received, rather than after the delayed-ACK timer (up to 40 ms), which
a client whose Nagle's algorithm holds its next write back waits for.
Return 0 or a negated errno."
  (retrying-eintr
   (%setsockopt fd IPPROTO_TCP TCP_QUICKACK int-one-address (sizeof int))))

(define TCP_DEFER_ACCEPT 9)

(define (fd-set-defer-accept! fd seconds)
  "Ask the kernel to hand connections on the listening socket FD to
accept(2) only once the client has sent data, waiting up to SECONDS.
Return 0 or a negated errno."
  (let ((value (make-bytevector (sizeof int) 0)))
    (bytevector-sint-set! value 0 seconds (native-endianness) (sizeof int))
    (retrying-eintr
     (%setsockopt fd IPPROTO_TCP TCP_DEFER_ACCEPT (bytevector-address value)
                  (sizeof int)))))

(define (fd-set-nonblocking! fd)
  "Put FD in non-blocking mode.  Return 0 or a negated errno."
  (let ((flags (retrying-eintr (%fcntl fd F_GETFL 0))))
    (if (< flags 0)
        flags
        (retrying-eintr (%fcntl fd F_SETFL (logior flags O_NONBLOCK))))))

(define %prctl
  (libc-procedure int "prctl" (list int unsigned-long unsigned-long unsigned-long
                                    unsigned-long)))

(define PR_SET_PDEATHSIG 1)

(define (set-parent-death-signal! signal)
  "Ask the kernel to send SIGNAL to this process when its parent dies
(Linux's prctl(PR_SET_PDEATHSIG)).  Return 0 or a negated errno."
  (retrying-eintr (%prctl PR_SET_PDEATHSIG signal 0 0 0)))

;;;
;;; Outgoing connections, for (plucky web client)
;;;

(define (fd-socket family)
  "Return a new TCP socket of FAMILY (AF_INET or AF_INET6), non-blocking
and close-on-exec, as a bare descriptor; or a negated errno."
  (retrying-eintr (%socket family (logior SOCK_STREAM SOCK_NONBLOCK SOCK_CLOEXEC) 0)))

(define (sockaddr->bytevector address)
  "Return the struct sockaddr_in or sockaddr_in6 for ADDRESS, a Guile
socket address (`make-socket-address', `addrinfo:addr') of family
AF_INET or AF_INET6, as a bytevector for `fd-connect'."
  (let ((family (sockaddr:fam address)))
    (cond
     ((= family AF_INET)
      ;; { sa_family_t family; in_port_t port; struct in_addr; zero[8] }
      (let ((bv (make-bytevector 16 0)))
        (bytevector-u16-native-set! bv 0 AF_INET)
        (bytevector-u16-set! bv 2 (sockaddr:port address) (endianness big))
        (bytevector-u32-set! bv 4 (sockaddr:addr address) (endianness big))
        bv))
     ((= family AF_INET6)
      ;; { family; port; uint32 flowinfo; struct in6_addr; uint32 scope_id }
      (let ((bv (make-bytevector 28 0)))
        (bytevector-u16-native-set! bv 0 AF_INET6)
        (bytevector-u16-set! bv 2 (sockaddr:port address) (endianness big))
        (bytevector-u32-set! bv 4 (sockaddr:flowinfo address) (endianness big))
        (bytevector-uint-set! bv 8 (sockaddr:addr address) (endianness big) 16)
        (bytevector-u32-native-set! bv 24 (sockaddr:scopeid address))
        bv))
     (else (error "sockaddr->bytevector: not an IP address" address)))))

(define (fd-connect fd sockaddr)
  "Start connecting the socket FD to SOCKADDR (from `sockaddr->bytevector').
Return 0 when connected, or a negated errno: -EINPROGRESS when FD is
non-blocking and the connection is under way (wait until FD is writable,
then ask `fd-socket-error').  An EINTR is not retried (connect(2) may not
be called again on the same socket): it is returned as -EINPROGRESS,
which it means on Linux."
  (call-with-values
      (lambda () (%connect fd (bytevector-address sockaddr) (bytevector-length sockaddr)))
    (lambda (result errno)
      (cond
       ((>= result 0) 0)
       ((= errno errno-EINTR) (- EINPROGRESS))
       (else (- errno))))))

(define (fd-socket-error fd)
  "Return the pending error of the socket FD (SO_ERROR) as a negated
errno, 0 when there is none: after a non-blocking `fd-connect', 0 means
connected.  A failure of getsockopt(2) itself is returned the same way."
  (let ((value (make-bytevector 8 0)))
    (bytevector-u32-native-set! value 4 4)    ; socklen_t: sizeof (int)
    (let ((result (retrying-eintr
                   (%getsockopt fd SOL_SOCKET SO_ERROR (bytevector-address value)
                                (+ 4 (bytevector-address value))))))
      (if (< result 0)
          result
          (- (bytevector-s32-native-ref value 0))))))

(define MSG_NOSIGNAL #x4000)

(define (fd-send fd address start count)
  "Write at most COUNT bytes to the socket FD from ADDRESS plus START with
send(2) and MSG_NOSIGNAL: a peer that has closed gives -EPIPE rather than
SIGPIPE, which would kill a script that has not ignored it.  Return the
number written or a negated errno."
  (retrying-eintr (%send fd (+ address start) count MSG_NOSIGNAL)))

(define MSG_PEEK 2)

(define (fd-peek fd address start count)
  "Copy at most COUNT bytes waiting on the socket FD to ADDRESS plus START
with recv(2) and MSG_PEEK, leaving them to be read.  Return their number
(0 at end of file) or a negated errno, -EAGAIN when none is waiting."
  (retrying-eintr (%recv fd (+ address start) count MSG_PEEK)))

;;; (plucky sys libc) ends here
