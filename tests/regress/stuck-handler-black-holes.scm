;;; tests/regress/stuck-handler-black-holes.scm --- a stuck handler ends in a 503
;;;
;;; With --workers 2, after one request whose handler looped forever,
;;; about half of the new connections got no answer until SIGTERM: the
;;; stuck worker accepted them (its socket, or its turn on the shared
;;; one) and never got back to them.  Now a handler call that runs past
;;; --handler-timeout is interrupted and answered with a 503, and the
;;; worker carries on; a handler blocked in C, which Guile cannot
;;; interrupt (asyncs run only in Scheme: `sleep' is interrupted, a
;;; foreign call to sleep(3) is not), has its request logged and its
;;; worker replaced.

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (system foreign)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (tests lib server)
             (plucky server))

(define c-sleep
  (pointer->procedure unsigned-int (dynamic-func "sleep" (dynamic-link))
                      (list unsigned-int)))

(define (handler request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path "/loop") (let lp ((i 0)) (lp (+ i 1))))
     ((string=? path "/guile-sleep") (sleep 1000))
     ((string=? path "/c-sleep") (c-sleep 1000))
     (else (values '((content-type . (text/plain))) "ok")))))

(define (start workers)
  (start-child
   (lambda (report)
     (run-server handler #:host "127.0.0.1" #:port 0 #:workers workers
                 #:handler-timeout 1
                 #:on-listen (lambda (sockets) (report (listener-port (car sockets))))))))

(define (get port path)
  ;; -> (values status code or #f, seconds it took)
  (let ((start (now-seconds)))
    (with-client port
      (lambda (client)
        (client-send! client (request-text path #:headers '("Connection: close")))
        (let ((response body (client-read-response client #:timeout 8)))
          (values (and response (response-code response))
                  (- (now-seconds) start)))))))

(define (answered-of-20 port)
  (count (lambda (i) (eqv? 200 (get port "/"))) (iota 20)))

(define-syntax-rule (with-server (server workers) body ...)
  (let ((server (start workers)))
    (dynamic-wind (lambda () #t) (lambda () body ...) (lambda () (stop-server server)))))

(test-begin "regress/stuck-handler-black-holes")

(call-guarded
 (lambda ()
   (with-server (server 1)
     (let ((code seconds (get (server-port server) "/loop")))
       (test-equal "a handler that loops: 503" 503 code)
       (test-assert (format #f "within the timeout and 100 ms (~a)" seconds) (< seconds 1.1)))
     (test-equal "the next request, on a new connection: served" 200
       (get (server-port server) "/"))
     (test-equal "a handler in Guile's sleep: 503" 503 (get (server-port server) "/guile-sleep"))
     (test-assert "the backtrace is logged"
       (string-contains (server-log server) "handler failed on GET /loop")))
   (with-server (server 2)
     (let ((stuck (connect-client (server-port server))))
       (client-send! stuck (request-text "/loop"))
       (test-equal "--workers 2: every one of 20 new connections answered" 20
         (answered-of-20 (server-port server)))
       (let ((response body (client-read-response stuck #:timeout 5)))
         (test-equal "--workers 2: the stuck request got its 503" 503
           (and response (response-code response))))
       (client-close! stuck)))
   (with-server (server 2)
     (let ((stuck (connect-client (server-port server))))
       (client-send! stuck (request-text "/c-sleep"))
       (test-assert "blocked in C: the request is logged"
         (wait-until (lambda ()
                       (string-contains (server-log server) "not interruptible"))
                     #:timeout 8))
       (test-assert "the log line names method, target and how long"
         (string-contains (server-log server) "on GET /c-sleep from"))
       (test-equal "blocked in C: every one of 20 new connections answered" 20
         (answered-of-20 (server-port server)))
       (client-close! stuck)))))

(test-end "regress/stuck-handler-black-holes")
