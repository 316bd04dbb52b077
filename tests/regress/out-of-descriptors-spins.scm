;;; tests/regress/out-of-descriptors-spins.scm --- no descriptor left: wait, do not spin
;;;
;;; When accept4 fails with EMFILE (the worker's RLIMIT_NOFILE is
;;; reached; max-connections defaults to 10000 while many systems start
;;; services with a soft limit of 1024), accept-ready! logged "accept:
;;; Too many open files" and returned, leaving the listener in the epoll
;;; set.  The listener is level-triggered and the connection still
;;; queued, so epoll_wait returned at once, and again: the loop spun, and
;;; logged a line each time (until 9f2ca27).  Measured with `prlimit
;;; --nofile=64:64 bin/plucky serve apps/hello.scm' and 100 connections
;;; that each sent one byte: 95,000 log lines (3.5 MB) a second, the
;;; worker busy for as long as the descriptors stayed taken; a slowloris
;;; client holds them for the header timeout, again and again.  Found
;;; while sizing the descriptor limits for bench/slowloris.
;;;
;;; Here the server runs with a limit of 64 descriptors and 80
;;; connections each send "G".  Once the first "Too many open files" is
;;; logged, the next second must add at most 20 such lines; after the
;;; connections close the server must answer again.

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (web response)
             (tests lib harness)
             (tests lib server)
             (plucky server))

(define (hello request body)
  (values '((content-type . (text/plain))) "Hello, World!"))

(define (emfile-lines server)
  (length (filter (lambda (line) (string-contains line "Too many open files"))
                  (string-split (server-log server) #\newline))))

(define (wait-for-emfile server deadline)
  ;; Poll the log until the worker reports EMFILE.  -> #t, or #f at DEADLINE
  (let lp ()
    (cond
     ((> (emfile-lines server) 0) #t)
     ((> (now-seconds) deadline) #f)
     (else (usleep 20000) (lp)))))

(test-begin "regress/out-of-descriptors-spins")

(call-guarded
 (lambda ()
   (let ((server (start-child
                  (lambda (report)
                    (setrlimit 'nofile 64 64)
                    (run-server hello #:host "127.0.0.1" #:port 0
                                #:on-listen (lambda (sockets)
                                              (report (listener-port (car sockets)))))))))
     (dynamic-wind
       (lambda () #t)
       (lambda ()
         (let ((clients (map (lambda (i)
                               (let ((client (connect-client (server-port server))))
                                 (client-send! client "G")
                                 client))
                             (iota 80))))
           (test-assert "the worker ran out of descriptors"
             (wait-for-emfile server (+ (now-seconds) 10)))
           (let* ((before (emfile-lines server))
                  (start (now-seconds)))
             ;; A deliberate one-second window: how often it logs meanwhile.
             (usleep 1000000)
             (let ((added (- (emfile-lines server) before)))
               (test-assert (format #f "at most 20 more EMFILE lines in ~,1f s (~a)"
                                    (- (now-seconds) start) added)
                 (<= added 20))))
           (for-each client-close! clients))
         (let ((response body (http-get (server-port server) "/" #:timeout 10)))
           (test-equal "answers again once the connections are gone" 200
             (and response (response-code response))))
         (test-assert "the server is alive" (server-alive? server)))
       (lambda () (stop-server server))))))

(test-end "regress/out-of-descriptors-spins")
