;;; bench/websocket.d/echo.scm --- plucky's side of bench/websocket
;;
;; guile -L . -C build bench/websocket.d/echo.scm PORT
;; One worker: /ws echoes every message; / answers "Hello, World!" (what
;; wrk measures beside idle WebSockets); /pid gives the worker's pid, whose
;; memory and threads the bench reads.

(use-modules (web request) (web uri) (plucky server) (plucky web websocket))

(define (site request body)
  (cond
   ((websocket-request? request)
    (websocket-upgrade request
                       #:on-message (lambda (ws message) (websocket-send ws message))))
   ((equal? (uri-path (request-uri request)) "/pid")
    (values '((content-type . (text/plain))) (number->string (getpid))))
   (else
    (values '((content-type . (text/plain))) "Hello, World!"))))

(run-server site #:host "127.0.0.1"
            #:port (string->number (cadr (command-line))) #:workers 1)
