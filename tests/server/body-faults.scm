;;; tests/server/body-faults.scm --- body ports when the client misbehaves
;;;
;;; Over real sockets, the faults of a `with-body-port' handler's body
;;; pipe (plucky server stream): a client that stalls after the guard
;;; handed its pipe to a thread (the handler sees an error, never a
;;; short body), a slow upload read by a handler blocked in C (the
;;; client's time, not --handler-timeout's), handlers that catch the
;;; errors and wait again (descriptors closed all the same), and clients
;;; that half-close their socket after their request.

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 ftw)
             (ice-9 binary-ports)
             (ice-9 textual-ports)
             (ice-9 exceptions)
             (rnrs bytevectors)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (tests lib server)
             (plucky server))

(define (path-of request) (uri-path (request-uri request)))

(define (text . parts)
  (values '((content-type . (text/plain))) (string-concatenate parts)))

;; What the handlers did, one file per request path, written by the
;; server's process and read by the test's.
(define effects (mkdtemp (string-append (or (getenv "TMPDIR") "/tmp") "/body-faults-XXXXXX")))

(define (effect! name value)
  (call-with-output-file (string-append effects "/" name)
    (lambda (port) (display value port))))

(define (effect name)
  (let ((file (string-append effects "/" name)))
    (and (file-exists? file) (call-with-input-file file get-string-all))))

(define (forget-effect! name)
  (let ((file (string-append effects "/" name)))
    (when (file-exists? file) (delete-file file))))

(define (count-port port)
  ;; -> the bytes PORT gives up to its end, read as Guile's suspendable
  ;; ports read (the handler suspends while they have not arrived)
  (let ((buf (make-bytevector 65536)))
    (let lp ((total 0))
      (let ((n (get-bytevector-n! port buf 0 65536)))
        (if (eof-object? n) total (lp (+ total n)))))))

(define body-handler
  (with-body-port
   (lambda (request body)
     (let ((path (path-of request)))
       (cond
        ((string=? path "/all-effect")
         ;; Blocked in C (`get-bytevector-all'), then a side effect
         ;; with what it read: a short body must never get there.
         (let ((bv (with-exception-handler
                       (lambda (e) (effect! "all-effect" "error") (raise-exception e))
                     (lambda () (get-bytevector-all body)))))
           (effect! "all-effect" (number->string (bytevector-length bv)))
           (text (number->string (bytevector-length bv)))))
        ((string=? path "/all-then-loop")
         ;; Reads in C, then computes for ever: the watchdog's.
         (get-bytevector-all body)
         (let lp () (lp)))
        ((string=? path "/all")
         (text (number->string (bytevector-length (get-bytevector-all body)))))
        ((string=? path "/count")
         (text (number->string (count-port body))))
        ((string=? path "/catch-and-wait")
         ;; Swallows what its reads raise and what its waits raise, and
         ;; waits again: given up, it is dropped where it waits.
         (guard (e (#t #f)) (count-port body))
         (guard (e (#t #f)) (sleep-ms 60000))
         (sleep-ms 60000)
         (text "not given up"))
        ((string=? path "/count-then-wait")
         ;; Reads its body, then waits (suspended) before it answers.
         (let ((n (count-port body)))
           (sleep-ms 200)
           (text (number->string n))))
        ((string=? path "/pid")
         (get-bytevector-n body 3)
         (text (number->string (getpid))))
        (else (text "plain " path)))))))

(define (descriptors pid)
  ;; PID's descriptors but the wake-up pipe Guile gives each thread (its
  ;; finalizer thread starts at the first collection, whenever that
  ;; comes); a filler thread that stayed would still show, with the
  ;; pipe's write end and the socket's dup it holds.
  (- (length (or (scandir (format #f "/proc/~a/fd" pid) string->number) '()))
     (* 2 (string->number (process-status-field pid "Threads")))))

(define (head path length . headers)
  (string-append "POST " path " HTTP/1.1\r\nHost: x\r\nContent-Length: "
                 (number->string length) "\r\n"
                 (string-concatenate (map (lambda (h) (string-append h "\r\n")) headers))
                 "\r\n"))

(define (answer client timeout)
  ;; -> (code body-text) of the final response, or #f
  (let ((response body (client-read-response client #:timeout timeout)))
    (cond
     ((not response) #f)
     ((= 100 (response-code response)) (answer client timeout))
     (else (list (response-code response) (and body (utf8->string body)))))))

(define (call-with-body-server proc . args)
  ;; Call (PROC server level) with a server of `body-handler' (ARGS for
  ;; `call-with-server') that has read a first body as a port (which
  ;; loads what body pipes need and starts the guard thread); LEVEL is
  ;; a thunk: the server's descriptors now.
  (apply call-with-server body-handler
         (lambda (server)
           (test-equal "a first upload" 200
             (with-client (server-port server)
               (lambda (client)
                 (client-send! client (string-append (head "/pid" 3) "abc"))
                 (let ((a (answer client 10))) (and a (car a))))))
           (proc server (lambda () (descriptors (server-pid server)))))
         args))

(test-begin "server/body-faults")

;;;
;;; 1. A stall after the guard's takeover: the handler sees an error
;;;

(define (test-cut-short server level cut!)
  ;; A 5 MB upload to /all-effect stops after 2 MB, then (CUT! client):
  ;; the handler blocks in C past its 64 KiB pipe and the guard hands
  ;; the pipe to a thread, which meets the body's end early.
  (forget-effect! "all-effect")
  (let ((before (level)))
    (with-client (server-port server)
      (lambda (client)
        (client-send! client (head "/all-effect" 5000000))
        (client-send! client (make-bytevector 2000000 7))
        (cut! client)))
    (test-assert "the handler saw an error, not a short body"
      (wait-until (lambda () (equal? "error" (effect "all-effect"))) #:timeout 5))
    (test-assert "descriptors back to their level"
      (wait-until (lambda () (<= (level) before)) #:timeout 5))))

(call-with-body-server
  (lambda (server level)
    (test-group "blocked in C, taken over, then the client stalls: no short body"
      (test-cut-short server level
                      (lambda (client)
                        ;; The body times out on the filler thread.
                        (test-equal "408" 408
                          (let ((a (answer client 20))) (and a (car a)))))))
    (test-group "blocked in C, taken over, then the client leaves: no short body"
      ;; Whether it leaves before the hand-over or after, the loop
      ;; thread is blocked: the thread finds the end of file.
      (test-cut-short server level (lambda (client) #t))))
  #:settings (make-loop-settings #:body-timeout 1))

;;;
;;; 2. A slow upload is the client's time, not --handler-timeout's
;;;

(define (stalling-upload port path size stall-us)
  ;; -> the answer to a request to PATH with a body of SIZE bytes, sent
  ;; in two halves STALL-US apart
  (with-client port
    (lambda (client)
      (client-send! client (head path size))
      (client-send! client (make-bytevector (quotient size 2) 1) #:timeout 30)
      (usleep stall-us)
      (client-send! client (make-bytevector (- size (quotient size 2)) 1) #:timeout 30)
      (answer client 30))))

(call-with-body-server
  (lambda (server level)
    (define port (server-port server))
    ;; The client stalls past --handler-timeout (1 s), not past
    ;; --body-timeout (5 s).
    (test-group "an upload that stalls past --handler-timeout: answered"
      (let ((workers (child-pids (server-pid server))))
        (test-equal "read through suspendable ports" '(200 "3000000")
          (stalling-upload port "/count" 3000000 1800000))
        (test-equal "read in C, taken over by a thread" '(200 "3000000")
          (stalling-upload port "/all" 3000000 1800000))
        (test-equal "the worker was not replaced" workers
          (child-pids (server-pid server)))))
    (test-group "a handler that then runs past --handler-timeout: 503"
      (test-equal "503" 503
        (let ((a (stalling-upload port "/all-then-loop" 3000000 300000)))
          (and a (car a))))))
  #:workers 2
  #:settings (make-loop-settings #:body-timeout 5)
  #:options '(#:handler-timeout 1))

;;;
;;; 3. Handlers that catch the errors and wait again: descriptors closed
;;;

(define (partial-upload port)
  ;; -> a client whose request to /catch-and-wait sent 3 bytes of 100.
  ;; With Expect, the handler runs at once (nothing is read for it
  ;; before), and its reads wait.
  (let ((client (connect-client port)))
    (client-send! client (string-append (head "/catch-and-wait" 100
                                              "Expect: 100-continue")
                                        "abc"))
    client))

(call-with-body-server
  (lambda (server level)
    (test-group "the body stalls, then the handler is given up: twice caught"
      (let* ((before (level))
             (clients (map (lambda (i) (partial-upload (server-port server))) (iota 5))))
        ;; The body times out (408, caught), the handler waits, is given
        ;; up past --handler-timeout (caught), waits again: dropped.
        (test-equal "each answered 503" (make-list 5 503)
          (map (lambda (client) (let ((a (answer client 10))) (and a (car a)))) clients))
        (for-each client-close! clients)
        (test-assert "descriptors back to their level"
          (wait-until (lambda () (<= (level) before)) #:timeout 5))))
    (test-group "the client leaves mid-body: the handler catches, waits, is dropped"
      (let* ((before (level))
             (clients (map (lambda (i) (partial-upload (server-port server))) (iota 5))))
        (test-assert "the requests wait, with their pipes"
          (wait-until (lambda () (>= (level) (+ before (* 3 5)))) #:timeout 5))
        (for-each client-close! clients)
        (test-assert "descriptors back to their level"
          (wait-until (lambda () (<= (level) before)) #:timeout 5)))))
  #:settings (make-loop-settings #:body-timeout 1)
  #:options '(#:handler-timeout 2))

;;;
;;; 4. Clients that half-close after their request: answered
;;;

(define (half-closed-upload port path size . headers)
  ;; -> the answer to a request to PATH with a body of SIZE bytes, sent
  ;; whole, after which the client shuts its sending side down
  (with-client port
    (lambda (client)
      (client-send! client (apply head path size headers))
      (when (member "Expect: 100-continue" headers)
        (let ((response body (client-read-response client #:timeout 10)))
          (test-equal "100 Continue first" 100 (and response (response-code response)))))
      (client-send! client (make-bytevector size 1) #:timeout 30)
      (shutdown (client-socket client) 1)
      (answer client 30))))

(call-with-body-server
  (lambda (server level)
    (define port (server-port server))
    (test-group "half-closed after the body: answered"
      (test-equal "a small body" '(200 "1000") (half-closed-upload port "/count" 1000))
      (test-equal "a small body, Expect: 100-continue" '(200 "1000")
        (half-closed-upload port "/count" 1000 "Expect: 100-continue"))
      (test-equal "3 MB, read through suspendable ports" '(200 "3000000")
        (half-closed-upload port "/count" 3000000))
      (test-equal "3 MB, read in C" '(200 "3000000")
        (half-closed-upload port "/all" 3000000))
      (test-equal "a handler that waits after reading" '(200 "3000000")
        (half-closed-upload port "/count-then-wait" 3000000))
      (test-equal "shut down before the body's end: 400, told" 400
        (with-client port
          (lambda (client)
            (client-send! client (head "/count" 3000000))
            (client-send! client (make-bytevector 2000000 1) #:timeout 30)
            (shutdown (client-socket client) 1)
            (let ((a (answer client 30))) (and a (car a))))))
      (test-assert "the server is still up" (server-alive? server)))))

(test-end "server/body-faults")
