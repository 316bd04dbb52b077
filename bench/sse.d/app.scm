;;; bench/sse.d/app.scm --- plucky's side of bench/sse
;;
;; bin/plucky serve bench/sse.d/app.scm --workers 1 --max-connections 20000
;;
;; Two ways to send each of many server-sent-event streams an event a
;; second, both on the worker's loop, no thread per stream:
;;   /sleep   each stream writes an event, then (sleep-ms 1000): a timer
;;            per stream, the streams' seconds drifting apart as they
;;            started;
;;   /tick    one stream at a time is the ticker: it sleeps a second and
;;            signals the shared event `tick'; every other stream waits
;;            on it with `event-wait' (no time-out, so no timer each) and
;;            writes the tick it is handed.  When the ticker's client
;;            leaves, it signals #f on its way out and the first stream
;;            resumed takes its place.
;; An event is "data: N MS\n\n": N counts the stream's events (/sleep) or
;; the ticks (/tick), so the client sees a missed one; MS is the wall
;; clock in milliseconds when the stream wrote it (/sleep) or when the
;; tick fired (/tick), from which the client measures the delay.
;; / answers "Hello, World!" (what wrk measures beside the streams),
;; /pid the worker's pid, /count the streams open, /gc the collections
;; so far and their time in nanoseconds (Guile's gc-time-taken), /heap
;; makes a full collection and gives the heap's bytes in use after it
;; (as bench/websocket.d/echo.scm).

(use-modules (plucky server) (web request) (web uri))

(define streams 0)                      ; event streams open

(define (now-ms)
  (let ((t (gettimeofday)))
    (+ (* 1000 (car t)) (quotient (cdr t) 1000))))

(define (send-event port n ms)
  (format port "data: ~a ~a\n\n" n ms)
  (force-output port))                  ; out now, not when the buffer fills

(define (counted body)
  ;; BODY, a stream's procedure, counted in `streams' while it runs.  It
  ;; ends only by an exception (the client left): a handler, not a
  ;; dynamic-wind, since a dynamic-wind's after thunk runs at each wait.
  (lambda (port)
    (set! streams (+ streams 1))
    (with-exception-handler
     (lambda (e)
       (set! streams (- streams 1))
       (raise-exception e))
     (lambda () (body port)))))

(define (sleep-stream port)
  (let loop ((n 1))
    (send-event port n (now-ms))
    (sleep-ms 1000)
    (loop (+ n 1))))

(define tick (make-event))              ; signalled with (N . MS) each second
(define ticker? #f)                     ; a stream counts the seconds
(define ticks 0)

(define (tick-stream port)
  (if ticker?
      (let ((value (event-wait tick)))  ; #f: the ticker left
        (when value (send-event port (car value) (cdr value)))
        (tick-stream port))
      (begin
        (set! ticker? #t)
        (with-exception-handler
         (lambda (e)
           (set! ticker? #f)
           (event-signal! tick #f)      ; someone else takes over
           (raise-exception e))
         (lambda ()
           (let loop ()
             (sleep-ms 1000)
             (set! ticks (+ ticks 1))
             (let ((value (cons ticks (now-ms))))
               (event-signal! tick value)
               (send-event port (car value) (cdr value)))
             (loop)))))))

(define (text string)
  (values '((content-type . (text/plain))) string))

(define (app request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path "/sleep")
      (values '((content-type . (text/event-stream))) (counted sleep-stream)))
     ((string=? path "/tick")
      (values '((content-type . (text/event-stream))) (counted tick-stream)))
     ((string=? path "/count") (text (number->string streams)))
     ((string=? path "/pid") (text (number->string (getpid))))
     ((string=? path "/gc")
      (let ((stats (gc-stats)))
        (text (format #f "~a ~a\n" (assq-ref stats 'gc-times)
                      (assq-ref stats 'gc-time-taken)))))
     ((string=? path "/heap")
      (gc)
      (let ((stats (gc-stats)))
        (text (format #f "~a\n" (- (assq-ref stats 'heap-size)
                                    (assq-ref stats 'heap-free-size))))))
     (else (text "Hello, World!")))))

app
