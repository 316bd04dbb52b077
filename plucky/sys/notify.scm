;;; (plucky sys notify) --- what telling a service manager needs that Guile lacks

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; systemd tells a Type=notify service where to report its state in
;;; NOTIFY_SOCKET: the path of a Unix datagram socket, or a name in the
;;; abstract namespace written with a leading "@" (sd_notify(3)).  Guile's
;;; socket addresses cannot say the second (a path that starts with a
;;; NUL byte), so the address is built here as the kernel reads it and
;;; sent with sendto(2) through the FFI.  The reload message wants the
;;; time on CLOCK_MONOTONIC, which Guile 3.0.8 does not read either.
;;;
;;; Loaded only when the environment has NOTIFY_SOCKET (see (plucky
;;; server notify)): nothing here is on the start-up path otherwise.
;;;
;;; Code:

(define-module (plucky sys notify)
  #:use-module (plucky sys foreign)
  #:use-module (rnrs bytevectors)
  #:export (unix-datagram-address
            fd-send-datagram
            fd-set-send-timeout!
            monotonic-microseconds))

(define %sendto
  (libc-procedure ssize_t "sendto" (list int '* size_t int '* unsigned-int)))

(define %setsockopt
  (libc-procedure int "setsockopt" (list int int int '* unsigned-int)))

(define %clock-gettime
  (libc-procedure int "clock_gettime" (list int '*)))

;; Linux's values (SO_SNDTIMEO: the one that takes a struct timeval of
;; longs, as on every 64-bit port)
(define MSG_NOSIGNAL #x4000)
(define SO_SNDTIMEO 21)
(define CLOCK_MONOTONIC 1)

;; struct sockaddr_un: a short family, then at most 108 bytes of path
(define sun-path-size 108)
(define family-size (sizeof unsigned-short))

(define (unix-datagram-address name)
  "Return the struct sockaddr_un, as a bytevector of its exact length,
for NAME as NOTIFY_SOCKET gives it: an absolute file name, or an abstract
socket's name after \"@\".  Raise an error for anything else (a relative
name, a bare \"@\", systemd's \"vsock:\" addresses) or a name too long."
  (let* ((abstract? (string-prefix? "@" name))
         (bytes (string->utf8 (if abstract? (substring name 1) name)))
         ;; a file name ends with its NUL; an abstract one starts with one
         (path-length (+ (bytevector-length bytes) 1)))
    (when (or (not (or (string-prefix? "/" name) abstract?))
              (zero? (bytevector-length bytes))
              (> path-length sun-path-size))
      (error "not a Unix socket address" name))
    (let ((address (make-bytevector (+ family-size path-length) 0)))
      (bytevector-uint-set! address 0 AF_UNIX (native-endianness) family-size)
      (bytevector-copy! bytes 0 address (+ family-size (if abstract? 1 0))
                        (bytevector-length bytes))
      (if abstract?
          address
          ;; the trailing NUL is not part of the length the kernel takes
          (let ((exact (make-bytevector (- (bytevector-length address) 1))))
            (bytevector-copy! address 0 exact 0 (bytevector-length exact))
            exact)))))

(define (fd-send-datagram fd message address)
  "Send the bytevector MESSAGE as one datagram from the socket FD to
ADDRESS (from `unix-datagram-address'), without SIGPIPE.  Return the
number of bytes sent or a negated errno.  On a blocking socket, waits
while the receiver's queue is full, for at most the socket's send
timeout (see `fd-set-send-timeout!'), then returns -EAGAIN."
  (let retry ()
    (call-with-values
        (lambda ()
          (%sendto fd (bytevector->pointer message) (bytevector-length message)
                   MSG_NOSIGNAL
                   (bytevector->pointer address) (bytevector-length address)))
      (lambda (result errno)
        (cond
         ((>= result 0) result)
         ((= errno EINTR) (retry))
         (else (- errno)))))))

(define (fd-set-send-timeout! fd seconds)
  "Make a send on the socket FD wait at most SECONDS (an exact integer)
for room (SO_SNDTIMEO).  Return 0 or a negated errno."
  ;; struct timeval: tv_sec and tv_usec, each a long
  (let* ((size (sizeof long))
         (timeval (make-bytevector (* 2 size) 0)))
    (bytevector-sint-set! timeval 0 seconds (native-endianness) size)
    (call-with-values
        (lambda ()
          (%setsockopt fd SOL_SOCKET SO_SNDTIMEO (bytevector->pointer timeval)
                       (bytevector-length timeval)))
      (lambda (result errno)
        (if (zero? result) 0 (- errno))))))

(define (monotonic-microseconds)
  "Return the time on CLOCK_MONOTONIC in microseconds, the clock systemd
reads MONOTONIC_USEC= against."
  ;; struct timespec: tv_sec and tv_nsec, each a long on Linux (but on
  ;; x32, whose time_t is wider than its long)
  (let* ((size (sizeof long))
         (timespec (make-bytevector (* 2 size) 0)))
    (call-with-values (lambda () (%clock-gettime CLOCK_MONOTONIC
                                                 (bytevector->pointer timespec)))
      (lambda (result errno)
        (unless (zero? result)
          (error "clock_gettime failed" (strerror errno)))
        (+ (* 1000000 (bytevector-sint-ref timespec 0 (native-endianness) size))
           (quotient (bytevector-sint-ref timespec size (native-endianness) size)
                     1000))))))

;;; (plucky sys notify) ends here
