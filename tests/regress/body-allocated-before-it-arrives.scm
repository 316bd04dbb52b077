;;; tests/regress/body-allocated-before-it-arrives.scm --- a declared body costs no memory before it comes
;;;
;;; Found while writing the fuzz driver (tests/fuzz/http-fuzz.py sends
;;; random Content-Length values), by reading the loop, then measured: as
;;; soon as a head declared "Content-Length: N" (N within max-body), the
;;; loop allocated a bytevector of N bytes for the body, and
;;; make-bytevector filled it, before a single byte of the body had
;;; arrived (plucky/server/loop.scm, serve-input!, "The body has not all
;;; arrived: give it storage of its own").  A 90-byte head therefore cost
;;; the server N bytes of RSS for as long as the client kept the
;;; connection open (body-timeout, 30 s by default, renewed by each byte):
;;; with the default max-body, 64 MiB per connection; 20 such connections
;;; took one worker from 38 MB to 1.2 GB, and 1,000 slowloris-style
;;; connections would ask for 64 GB.  This test failed so (+128 MiB)
;;; until 9f2ca27, where bodies get memory as they arrive.
;;;
;;; Here: max-body 16 MiB, 8 connections each send a head declaring
;;; 16 MiB (with Expect: 100-continue, so that the interim answer says
;;; the server has taken the head in and waits for the body) and nothing
;;; more.  The server's RSS must grow by less than one declared body.

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 rdelim)
             (web response)
             (tests lib harness)
             (tests lib server)
             (plucky server))

(define declared (* 16 1024 1024))
(define connections 8)

(define (hello request body)
  (values '((content-type . (text/plain))) "Hello, World!"))

(define (rss-kib pid)
  ;; VmRSS of PID, in KiB
  (let ((value (process-status-field pid "VmRSS")))
    (and value (string->number (car (string-tokenize value))))))

(test-begin "regress/body-allocated-before-it-arrives")

(call-guarded
 (lambda ()
   (call-with-server
    hello
    (lambda (server)
      (let ((response body (http-get (server-port server) "/")))
        (test-equal "warm-up answered" 200 (and response (response-code response))))
      (let* ((before (rss-kib (server-pid server)))
             (clients
              (map (lambda (i)
                     (let ((client (connect-client (server-port server))))
                       (client-send!
                        client
                        (request-text "/upload" #:method "POST"
                                      #:headers (list (format #f "Content-Length: ~a" declared)
                                                      "Expect: 100-continue")))
                       client))
                   (iota connections)))
             ;; The server has acted on each head once it answers anything:
             ;; 100 Continue (it waits for the body) or a final answer.
             (answered (map (lambda (client)
                              (let ((response body (client-read-response client #:timeout 10)))
                                (and response (response-code response))))
                            clients))
             (after (rss-kib (server-pid server))))
        (test-assert "the server took each head in" (every number? answered))
        (test-assert (format #f "RSS grew by less than one declared body (~a KiB): ~a KiB -> ~a KiB"
                             (quotient declared 1024) before after)
          (< (- after before) (quotient declared 1024)))
        (for-each client-close! clients)
        (test-assert "the server is alive" (server-alive? server))))
    #:settings (make-loop-settings #:max-body declared))))

(test-end "regress/body-allocated-before-it-arrives")
