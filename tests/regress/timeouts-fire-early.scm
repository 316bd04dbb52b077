;;; tests/regress/timeouts-fire-early.scm --- no timeout fires before its time

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; CI failed on tests/server/loop.scm's "after about the timeout": an
;;; idle keep-alive connection with a 1 s timeout was closed 0.9996 s
;;; after the client had connected.  The loop reads its clock in whole
;;; milliseconds, once a round; the round that read the request began up
;;; to a millisecond before the clock said, and the deadline counted from
;;; the clock's figure.  Now a deadline (and a `loop-call-after!' timer)
;;; is one millisecond later than that figure plus the timeout.
;;;
;;; Measured: from just before the client connects to the end of file,
;;; 60 times with a 50 ms timeout, beside a client that keeps the loop
;;; busy: a quarter closed early before the change (up to 0.7 ms), none
;;; after.
;;;
;;; Code:

(use-modules (ice-9 threads)
             (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (tests lib harness)
             (tests lib server)
             (plucky server))

(define (hello request body)
  (values '((content-type . (text/plain))) "Hello, World!"))

(define timeout
  ;; seconds, the keep-alive timeout
  1/20)

(define (seconds-to-close port)
  ;; Connect, send a request, read its answer, wait for the close.
  ;; -> seconds from the connect to end of file, or #f if it never came.
  ;; From the connect: the round that accepts the connection may read the
  ;; request too, and its clock was read before the request was sent.
  (let* ((start (now-seconds))
         (client (connect-client port)))
    (client-send! client (request-text "/"))
    (client-read-response client)
    (let ((bytes closed? (client-read-until-close client #:timeout 5)))
      (client-close! client)
      (and closed? (- (now-seconds) start)))))

(test-begin "regress/timeouts-fire-early")

(call-guarded
 (lambda ()
   (call-with-server
    hello
    (lambda (server)
      ;; A neighbour asks for pages all along, so that the loop goes round
      ;; every fraction of a millisecond and sweeps as soon as its clock
      ;; says a deadline is due, rather than a whole sleep after.
      (let* ((done? #f)
             (neighbour
              (call-with-new-thread
               (lambda ()
                 (with-client (server-port server)
                   (lambda (client)
                     (let lp ()
                       (unless done?
                         (client-send! client (request-text "/"))
                         (client-read-response client)
                         (lp))))))))
             (times (dynamic-wind
                      (lambda () #t)
                      (lambda ()
                        (map (lambda (i) (seconds-to-close (server-port server)))
                             (iota 60)))
                      (lambda ()
                        (set! done? #t)
                        (join-thread neighbour))))
             (closed (filter identity times))
             (early (filter (lambda (s) (< s timeout)) closed)))
        (test-equal "every idle connection closed" 60 (length closed))
        (test-assert (format #f "none before ~a s (~a early, earliest ~,4f s)"
                             (exact->inexact timeout) (length early)
                             (if (null? closed) +nan.0 (apply min closed)))
          (null? early))))
    #:settings (make-loop-settings #:keep-alive-timeout timeout))))

(test-end "regress/timeouts-fire-early")
