;;; (tests lib hammer) --- a client that hammers a server from another process

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The reload tests (tests/server/workers.scm, tests/server/reload.scm)
;;; watch the server while a forked client sends requests across the
;;; reload, each on a keep-alive connection, and reports its counts
;;; through a pipe: `start-hammer', then `hammer-results'.
;;;
;;; Code:

(define-module (tests lib hammer)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-71)
  #:use-module (ice-9 match)
  #:use-module (rnrs bytevectors)
  #:use-module (web response)
  #:use-module (tests lib server)
  #:export (start-hammer
            hammer-results))

(define (hammer port deadline)
  ;; Send requests until DEADLINE, up to 20 on each keep-alive connection
  ;; (a new one when the server closes it).  -> (ok failed bodies
  ;; first-failures)
  (let ((ok 0) (failed 0) (bodies '()) (failures '()))
    (define (fail! why)
      (set! failed (+ failed 1))
      (set! failures (cons why failures)))
    (define (session client)
      ;; -> when to stop using CLIENT
      (let lp ((i 0))
        (when (and (< i 20) (< (now-seconds) deadline))
          (let ((response body (if (client-send! client (request-text "/"))
                                   (client-read-response client #:timeout 5)
                                   (values #f #f))))
            (cond
             ((not response)
              (fail! (format #f "no answer to request ~a on a connection: ~a"
                             (+ i 1) (or (client-error client) "closed"))))
             ((= 200 (response-code response))
              (set! ok (+ ok 1))
              (set! bodies (lset-adjoin string=? bodies (utf8->string body)))
              (unless (memq 'close (response-connection response))
                (lp (+ i 1))))
             (else
              (fail! (format #f "status ~a" (response-code response)))))))))
    (let lp ()
      (when (< (now-seconds) deadline)
        (let ((client (false-if-exception (connect-client port))))
          (if client
              (begin (session client) (client-close! client))
              (fail! "connect failed")))
        (lp)))
    (list ok failed bodies (list-head failures (min 5 (length failures))))))

(define (start-hammer port seconds)
  "Fork a client that sends requests for / to 127.0.0.1:PORT for SECONDS,
up to 20 on each keep-alive connection; return (PID . INPUT-PORT), the
pipe on which it writes its results (see `hammer-results')."
  (let ((channel (pipe)))
    (flush-all-ports)
    (let ((pid (primitive-fork)))
      (if (zero? pid)
          (begin
            (close-port (car channel))
            (write (hammer port (+ (now-seconds) seconds)) (cdr channel))
            (newline (cdr channel))
            (close-port (cdr channel))
            (primitive-exit 0))
          (begin
            (close-port (cdr channel))
            (cons pid (car channel)))))))

(define (hammer-results hammer seconds)
  "Return the results of HAMMER (from `start-hammer') as (OK FAILED
BODIES FAILURES): the requests answered 200 and those that failed, the
distinct bodies seen and the first few failures' reasons; or #f if none
came within SECONDS.  The client is reaped (killed if need be)."
  (let ((line (read-line-before (cdr hammer) (+ (now-seconds) seconds))))
    (close-port (cdr hammer))
    (unless (wait-until (lambda () (match (waitpid (car hammer) WNOHANG)
                                     ((0 . _) #f)
                                     (_ #t)))
                        #:timeout 5)
      (kill (car hammer) SIGKILL)
      (waitpid (car hammer)))
    (and (string? line) (with-input-from-string line read))))

;;; (tests lib hammer) ends here
