;;; (plucky sys epoll) --- Linux epoll through the FFI

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The event loop asks the kernel which descriptors are ready with one
;;; epoll_wait(2) per round, into an events buffer made once and reused:
;;; no list, no allocation per round.  Each registered descriptor's
;;; epoll_data holds the descriptor number itself, which the loop uses as
;;; an index into its connection table.
;;;
;;; struct epoll_event is { uint32_t events; epoll_data_t data; }, packed
;;; on x86-64 (12 bytes) and naturally aligned elsewhere (16 bytes).
;;;
;;; Code:

(define-module (plucky sys epoll)
  #:use-module (plucky sys foreign)
  #:use-module (rnrs bytevectors)
  #:use-module (plucky sys libc)
  #:export (EPOLLIN EPOLLOUT EPOLLERR EPOLLHUP EPOLLRDHUP EPOLLEXCLUSIVE EPOLLONESHOT
            epoll-create
            epoll-add!
            epoll-modify!
            epoll-remove!
            make-epoll-events
            epoll-wait
            epoll-event-fd
            epoll-event-flags))

(define EPOLLIN #x001)
(define EPOLLOUT #x004)
(define EPOLLERR #x008)
(define EPOLLHUP #x010)
(define EPOLLRDHUP #x2000)
(define EPOLLEXCLUSIVE (ash 1 28))
(define EPOLLONESHOT (ash 1 30))

(define EPOLL_CTL_ADD 1)
(define EPOLL_CTL_DEL 2)
(define EPOLL_CTL_MOD 3)
(define EPOLL_CLOEXEC #o2000000)

(define event-size
  (if (string-prefix? "x86_64" %host-type) 12 16))
(define data-offset
  (if (= event-size 12) 4 8))


(define %epoll-create1 (libc-procedure int "epoll_create1" (list int)))
(define %epoll-ctl (libc-procedure int "epoll_ctl" (list int int int uintptr_t)))
(define %epoll-wait (libc-procedure int "epoll_wait" (list int uintptr_t int int)))

(define (epoll-create)
  "Return a new close-on-exec epoll descriptor, or raise a system error."
  (call-with-values (lambda () (%epoll-create1 EPOLL_CLOEXEC))
    (lambda (fd errno)
      (if (< fd 0)
          (scm-error 'system-error "epoll-create" "~A" (list (strerror errno))
                     (list errno))
          fd))))

;; One scratch event for epoll_ctl, made once.
(define ctl-event (make-bytevector event-size 0))
(define ctl-event-address (bytevector-address ctl-event))

(define (epoll-ctl epfd op fd events)
  (bytevector-u32-native-set! ctl-event 0 events)
  (bytevector-u64-native-set! ctl-event data-offset fd)
  (let retry ()
    (call-with-values (lambda () (%epoll-ctl epfd op fd ctl-event-address))
      (lambda (result errno)
        (cond ((>= result 0) result)
              ((= errno EINTR) (retry))
              (else (- errno)))))))

(define (epoll-add! epfd fd events)
  "Watch FD for EVENTS (a logior of EPOLLIN, EPOLLOUT…) on EPFD.
Return 0 or a negated errno."
  (epoll-ctl epfd EPOLL_CTL_ADD fd events))

(define (epoll-modify! epfd fd events)
  "Change the EVENTS watched for FD on EPFD.  Return 0 or a negated errno."
  (epoll-ctl epfd EPOLL_CTL_MOD fd events))

(define (epoll-remove! epfd fd)
  "Stop watching FD on EPFD.  Return 0 or a negated errno."
  (epoll-ctl epfd EPOLL_CTL_DEL fd 0))

(define (make-epoll-events n)
  "Return a buffer for N events, to pass to `epoll-wait' again and again."
  (make-bytevector (* n event-size) 0))

(define (epoll-wait epfd events events-address timeout-ms)
  "Wait at most TIMEOUT-MS milliseconds (-1: forever) for events on EPFD,
filling EVENTS (made by `make-epoll-events'; EVENTS-ADDRESS is its
`bytevector-address').  Return the number of events ready, 0 when the
time ran out or a signal interrupted the wait (so that the caller runs
its signal handlers and timers), or a negated errno."
  (call-with-values
      (lambda ()
        (%epoll-wait epfd events-address
                     (quotient (bytevector-length events) event-size)
                     timeout-ms))
    (lambda (n errno)
      (cond ((>= n 0) n)
            ((= errno EINTR) 0)
            (else (- errno))))))

(define-inlinable (epoll-event-fd events i)
  "Return the descriptor of ready event I in EVENTS."
  (bytevector-u32-native-ref events (+ (* i event-size) data-offset)))

(define-inlinable (epoll-event-flags events i)
  "Return the ready flags (EPOLLIN…) of event I in EVENTS."
  (bytevector-u32-native-ref events (* i event-size)))

;;; (plucky sys epoll) ends here
