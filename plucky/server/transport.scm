;;; (plucky server transport) --- how the loop moves a connection's bytes

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The event loop never calls read(2), write(2) or writev(2) on a
;;; connection's descriptors itself: it goes through the connection's
;;; transport, a record of procedures with the conventions of (plucky sys
;;; libc) (a count of bytes, or a negated errno; -EAGAIN when the
;;; descriptor is not ready).  `plain-transport' is the one for sockets
;;; and pipes, the libc calls themselves, shared by every connection.  A
;;; TLS transport is one per connection, closing over its session: its
;;; record calls fail with GNUTLS_E_AGAIN where the socket is not ready,
;;; which it turns into -EAGAIN, and WANTS-WRITE? says that a read cannot
;;; go on until the socket takes the session's pending bytes.
;;;
;;; SENDFILE is #f for a transport that cannot hand the kernel a file to
;;; copy (TLS encrypts in the process): the loop then reads the file and
;;; writes its bytes.  WRITE-MORE writes a head that a sendfile(2) of
;;; the body follows at once: on a plain socket, send(2) with MSG_MORE,
;;; so that head and body leave in the same segments (bench/static).
;;;
;;; PROTOCOL says which application protocol the client and the server
;;; agreed on (TLS's ALPN: "http/1.1", later "h2"), #f when none was:
;;; what a connection speaks is read there once its first bytes are in.
;;;
;;; Code:

(define-module (plucky server transport)
  #:use-module (srfi srfi-9)
  #:use-module ((plucky sys libc)
                #:select (fd-read fd-write fd-writev fd-send-more fd-sendfile
                          fd-close fd-shutdown-write))
  #:export (make-transport
            transport?
            transport-read
            transport-write
            transport-writev
            transport-write-more
            transport-sendfile
            transport-shutdown
            transport-close
            transport-wants-write?
            transport-pending?
            transport-protocol
            plain-transport))

(define-record-type <transport>
  (%make-transport read write writev write-more sendfile shutdown close
                   wants-write? pending? protocol)
  transport?
  ;; (fd address start count) -> bytes read, 0 at end of file, or -errno
  (read transport-read)
  ;; (fd address start count) -> bytes written or -errno
  (write transport-write)
  ;; (fd iovecs-address count) -> bytes written or -errno
  (writev transport-writev)
  ;; (fd address start count) -> bytes written or -errno: as WRITE, for
  ;; bytes that a SENDFILE follows at once
  (write-more transport-write-more)
  ;; #f, or (out-fd file-fd offset count) -> bytes sent or -errno
  (sendfile transport-sendfile)
  ;; (fd) -> 0 or -errno: no more output; the peer reads end of file
  (shutdown transport-shutdown)
  ;; (fd) -> 0 or -errno: the descriptor is released
  (close transport-close)
  ;; (fd) -> true when the last read wants the socket writable first
  (wants-write? transport-wants-write?)
  ;; (fd) -> true when input the socket no longer shows waits in the
  ;; transport (a TLS record the last read could not hold): read again
  ;; without waiting for epoll
  (pending? transport-pending?)
  ;; (fd) -> the application protocol agreed with the client (TLS's
  ;; ALPN), e.g. "http/1.1", or #f when none was
  (protocol transport-protocol))

(define (never-wants-write fd) #f)
(define (never-pending fd) #f)
(define (no-protocol fd) #f)

(define* (make-transport #:key (read fd-read) (write fd-write) (writev fd-writev)
                         (write-more (if (eq? write fd-write) fd-send-more write))
                         (sendfile fd-sendfile) (shutdown fd-shutdown-write)
                         (close fd-close) (wants-write? never-wants-write)
                         (pending? never-pending) (protocol no-protocol))
  "Return a transport: the procedures the loop reads, writes, sends
files, shuts down and closes a connection's descriptors with.  Each
defaults to the libc call of (plucky sys libc) that the plain transport
uses; READ, WRITE and WRITE-MORE take (fd address start count), WRITEV
(fd iovecs-address count), SENDFILE (out-fd file-fd offset count) or
#f, SHUTDOWN and CLOSE and WANTS-WRITE? and PENDING? and PROTOCOL (fd).
PROTOCOL returns the protocol ALPN agreed on, a string, or #f.  WRITE-MORE,
for a head whose file body SENDFILE sends next, defaults to send(2) with
MSG_MORE when WRITE is the plain write(2), else to WRITE."
  (%make-transport read write writev write-more sendfile shutdown close
                   wants-write? pending? protocol))

(define plain-transport
  ;; Shared by every plain connection: nothing to allocate per accept.
  (make-transport))

;;; (plucky server transport) ends here
