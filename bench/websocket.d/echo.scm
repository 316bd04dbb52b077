;;; bench/websocket.d/echo.scm --- plucky's side of bench/websocket
;;
;; guile -L . -C build bench/websocket.d/echo.scm PORT
;; One worker: /ws echoes every message; / answers "Hello, World!" (what
;; wrk measures beside idle WebSockets); /pid gives the worker's pid,
;; whose memory and threads the bench reads; /heap makes a full
;; collection and gives the heap's bytes in use after it and the
;; milliseconds it took; /gc gives the collections so far and their CPU
;; time in nanoseconds (Guile's gc-time-taken), which the bench reads
;; before and after a load; /count the WebSockets open.
;; bench/websocket runs this file uncompiled (GUILE_AUTO_COMPILE=0): the
;; echo is defined once, at top level, as a compiled app's lambda would
;; be one constant, rather than a closure the evaluator would make for
;; each connection.

(use-modules (web request) (web uri) (plucky server) (plucky web websocket))

(define (echo ws message)
  (websocket-send ws message))

(define (site request body)
  (cond
   ((websocket-request? request)
    (websocket-upgrade request #:on-message echo))
   ((equal? (uri-path (request-uri request)) "/heap")
    (let* ((start (get-internal-real-time))
           (_ (gc))
           (ms (/ (- (get-internal-real-time) start) (/ internal-time-units-per-second 1000.)))
           (stats (gc-stats)))
      (values '((content-type . (text/plain)))
              (format #f "~a ~a\n"
                      (- (assq-ref stats 'heap-size) (assq-ref stats 'heap-free-size))
                      (/ (round (* 10 ms)) 10)))))
   ((equal? (uri-path (request-uri request)) "/gc")
    (let ((stats (gc-stats)))
      (values '((content-type . (text/plain)))
              (format #f "~a ~a\n" (assq-ref stats 'gc-times)
                      (assq-ref stats 'gc-time-taken)))))
   ((equal? (uri-path (request-uri request)) "/count")
    (values '((content-type . (text/plain))) (number->string (websocket-count))))
   ((equal? (uri-path (request-uri request)) "/pid")
    (values '((content-type . (text/plain))) (number->string (getpid))))
   (else
    (values '((content-type . (text/plain))) "Hello, World!"))))

(run-server site #:host "127.0.0.1"
            #:port (string->number (cadr (command-line))) #:workers 1)
