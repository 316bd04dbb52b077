;;; tests/sys/notify.scm --- (plucky sys notify)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The address NOTIFY_SOCKET names, byte for byte as the kernel reads it;
;;; datagrams sent to a socket bound at a file name and to one bound in the
;;; abstract namespace (bound through the FFI, and checked in
;;; /proc/net/unix, where the kernel lists it as "@name", so that the test
;;; does not only agree with itself); a negated errno when nobody listens;
;;; and the monotonic clock.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (ice-9 format)
             (ice-9 match)
             (ice-9 rdelim)
             (rnrs bytevectors)
             (system foreign)
             (tests lib harness)
             (plucky sys notify))

(test-begin "sys/notify")

(define family-size (sizeof unsigned-short))

(define (family-of address)
  (bytevector-uint-ref address 0 (native-endianness) family-size))

(define (path-bytes address)
  ;; -> the bytes after the family, as a list
  (let ((bv (make-bytevector (- (bytevector-length address) family-size))))
    (bytevector-copy! address family-size bv 0 (bytevector-length bv))
    (bytevector->u8-list bv)))

(define (receive sock)
  ;; -> the next datagram on SOCK as a string, or #f after 5 s
  (match (select (list sock) '() '() 5 0)
    (((_) _ _)
     (let* ((buf (make-bytevector 4096))
            (n (recv! sock buf))
            (bv (make-bytevector n)))
       (bytevector-copy! buf 0 bv 0 n)
       (utf8->string bv)))
    (_ #f)))

(define bind-address
  ;; bind(2) with an address from unix-datagram-address: Guile's `bind'
  ;; cannot name an abstract socket
  (let ((%bind (pointer->procedure int (dynamic-func "bind" (dynamic-link))
                                   (list int '* unsigned-int))))
    (lambda (sock address)
      (%bind (port->fdes sock) (bytevector->pointer address) (bytevector-length address)))))

(define (proc-net-unix-paths)
  ;; -> the paths the kernel lists for Unix sockets, "@name" for abstract ones
  (call-with-input-file "/proc/net/unix"
    (lambda (port)
      (read-line port)                  ; the header
      (let lp ((paths '()))
        (let ((line (read-line port)))
          (if (eof-object? line)
              paths
              (let ((fields (string-tokenize line)))
                (lp (if (= (length fields) 8) (cons (list-ref fields 7) paths) paths)))))))))

(test-group "unix-datagram-address"
  (let ((address (unix-datagram-address "/run/systemd/notify")))
    (test-eqv "the family is AF_UNIX" AF_UNIX (family-of address))
    (test-equal "a file name: its bytes, no NUL counted"
      (bytevector->u8-list (string->utf8 "/run/systemd/notify"))
      (path-bytes address)))
  (let ((address (unix-datagram-address "@plucky/notify")))
    (test-eqv "abstract: AF_UNIX too" AF_UNIX (family-of address))
    (test-equal "abstract: a NUL for the @, then the name, nothing after"
      (cons 0 (bytevector->u8-list (string->utf8 "plucky/notify")))
      (path-bytes address)))
  (test-assert "an empty name is refused"
    (not (false-if-exception (unix-datagram-address ""))))
  (test-assert "so is a bare @"
    (not (false-if-exception (unix-datagram-address "@"))))
  (test-assert "and a relative name, which sd_notify does not take"
    (not (false-if-exception (unix-datagram-address "run/notify"))))
  (test-assert "and a vsock: address"
    (not (false-if-exception (unix-datagram-address "vsock:2:1234"))))
  (test-assert "107 bytes of file name fit"
    (unix-datagram-address (string-append "/" (make-string 106 #\a))))
  (test-assert "108 do not (the NUL must fit too)"
    (not (false-if-exception (unix-datagram-address (string-append "/" (make-string 107 #\a)))))))

(test-group "fd-send-datagram to a file name"
  (let* ((path (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-notify-test-"
                              (number->string (getpid))))
         (receiver (socket AF_UNIX SOCK_DGRAM 0))
         (sender (socket AF_UNIX SOCK_DGRAM 0)))
    (false-if-exception (delete-file path))
    (bind receiver AF_UNIX path)
    (let ((message (string->utf8 "READY=1\nSTATUS=ok")))
      (test-eqv "sent whole" (bytevector-length message)
        (fd-send-datagram (port->fdes sender) message (unix-datagram-address path)))
      (test-equal "received as sent" "READY=1\nSTATUS=ok" (receive receiver)))
    (close-port receiver)
    (delete-file path)
    (test-assert "nobody there: a negated errno, no exception"
      (< (fd-send-datagram (port->fdes sender) (string->utf8 "READY=1")
                           (unix-datagram-address path))
         0))
    (close-port sender)))

(test-group "fd-send-datagram to an abstract name"
  (let* ((name (string-append "@plucky-notify-test-" (number->string (getpid))))
         (address (unix-datagram-address name))
         (receiver (socket AF_UNIX SOCK_DGRAM 0))
         (sender (socket AF_UNIX SOCK_DGRAM 0)))
    (test-eqv "bound" 0 (bind-address receiver address))
    (test-assert "the kernel lists it under that name"
      (member name (proc-net-unix-paths)))
    (test-assert "sent"
      (> (fd-send-datagram (port->fdes sender) (string->utf8 "STOPPING=1") address) 0))
    (test-equal "received" "STOPPING=1" (receive receiver))
    (close-port receiver)
    (close-port sender)))

(test-group "fd-set-send-timeout!: a full queue waits that long, then -EAGAIN"
  ;; A receiver that never reads: its queue fills, and each send after
  ;; that waits for the timeout and fails.
  (let* ((path (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-notify-full-"
                              (number->string (getpid))))
         (receiver (socket AF_UNIX SOCK_DGRAM 0))
         (sender (socket AF_UNIX SOCK_DGRAM 0))
         (address (begin (false-if-exception (delete-file path))
                         (bind receiver AF_UNIX path)
                         (unix-datagram-address path)))
         (message (string->utf8 "STATUS=filling")))
    (test-eqv "set" 0 (fd-set-send-timeout! (port->fdes sender) 1))
    (let fill ((sent 0))
      (if (and (< sent 100000)
               (> (fd-send-datagram (port->fdes sender) message address) 0))
          (fill (+ sent 1))
          (test-assert "the queue filled" (< sent 100000))))
    (let* ((start (get-internal-real-time))
           (result (fd-send-datagram (port->fdes sender) message address))
           (waited (/ (- (get-internal-real-time) start) 1.0 internal-time-units-per-second)))
      (test-eqv "then a send fails with -EAGAIN" (- EAGAIN) result)
      (test-assert (format #f "after waiting about the second (~,2f s)" waited)
        (<= 0.9 waited 5)))
    (close-port receiver)
    (close-port sender)
    (delete-file path)))

(test-group "monotonic-microseconds"
  (let* ((a (monotonic-microseconds))
         (start (get-internal-real-time)))
    ;; a busy wait of 20 ms by Guile's clock
    (let lp () (when (< (- (get-internal-real-time) start)
                        (quotient internal-time-units-per-second 50))
                 (lp)))
    (let ((b (monotonic-microseconds)))
      (test-assert "an exact integer" (exact-integer? a))
      (test-assert "moves on by about what Guile's clock saw (20 ms, under 5 s)"
        (<= 20000 (- b a) 5000000)))))

(test-end "sys/notify")

;;; tests/sys/notify.scm ends here
