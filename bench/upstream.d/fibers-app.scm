;;; bench/upstream.d/fibers-app.scm --- bench/upstream's rows on Fibers' web server
;;;
;;; Copyright (C) 2026 the plucky authors
;;; SPDX-License-Identifier: LGPL-3.0-or-later
;;;
;;; Run it:  $FIBERS_DIR/env guile bench/upstream.d/fibers-app.scm PORT sleep [URL]
;;;          $FIBERS_DIR/env guile bench/upstream.d/fibers-app.scm PORT upstream URL
;;;
;;; Fibers' idiom: (fibers web server)'s run-server, a fiber per
;;; connection, blocking-looking calls that suspend the fiber.
;;;   sleep     (sleep 0.05) from (fibers), then "ok";
;;;   upstream  Guile's (web client) http-request on a socket from
;;;             open-socket-for-uri made non-blocking, so that run-fibers'
;;;             suspendable ports park the fiber rather than the thread.
;;;             Idle upstream connections wait in a pool (a list in an
;;;             atomic box: fibers may be preempted, so no mutex) and are
;;;             reused, as Go's Transport reuses them.
;;; run-fibers starts one scheduler per CPU it may run on: pinned to one
;;; CPU by taskset, one thread, as one plucky worker.

(use-modules (fibers)
             (fibers web server)
             (ice-9 atomic)
             (ice-9 match)
             (web client)
             (web response)
             (web uri))

(define (set-nonblocking! port)
  (fcntl port F_SETFL (logior O_NONBLOCK (fcntl port F_GETFL))))

(define idle (make-atomic-box '()))     ; idle connections to the upstream

(define (take-connection uri)
  (let loop ()
    (match (atomic-box-ref idle)
      (() (let ((port (open-socket-for-uri uri)))
            (set-nonblocking! port)
            port))
      ((and ports (port . rest))
       (if (eq? (atomic-box-compare-and-swap! idle ports rest) ports)
           port
           (loop))))))

(define (give-back! port)
  (let loop ()
    (let ((ports (atomic-box-ref idle)))
      (unless (eq? (atomic-box-compare-and-swap! idle ports (cons port ports)) ports)
        (loop)))))

(define (text string)
  (values '((content-type . (text/plain))) string))

(define (upstream-handler uri)
  (lambda (request body)
    (let ((port (take-connection uri)))
      (catch #t
        (lambda ()
          (call-with-values
              (lambda () (http-request uri #:port port #:keep-alive? #t))
            (lambda (response upstream-body)
              (if (memq 'close (response-connection response))
                  (close-port port)
                  (give-back! port))
              (text upstream-body))))
        (lambda (key . args)
          (close-port port)
          (values (build-response #:code 502) "upstream failed"))))))

(define (sleep-handler request body)
  (sleep 0.05)
  (text "ok"))

(match (command-line)
  ((_ port "sleep" . _)
   (run-server sleep-handler #:port (string->number port)))
  ((_ port "upstream" url)
   (run-server (upstream-handler (string->uri url)) #:port (string->number port))))
