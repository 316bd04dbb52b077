;;; bench/pg-roundtrip/app.scm --- a single-row query's round trip, inside a request
;;;
;;; Served by bench/pg-roundtrip/run with bin/plucky serve, DATABASE_URL
;;; set.  GET /rt?N runs `SELECT $1::int' N times, one after the other,
;;; within the request (each wait suspends the request, as a handler's
;;; query does) and answers the microseconds per round trip.  GET
;;; /blocking?N runs the same loop on a compute thread, where the waits
;;; block in poll(2) as a script's do.  GET / answers 200 (readiness).

(use-modules (web request) (web uri) (plucky server) (plucky db postgresql))

(define db (make-pg-pool (getenv "DATABASE_URL") #:size 1))

(define (loop n)
  ;; -> microseconds per round trip of N queries
  (pg-query-row db "SELECT $1::int" 0)             ; prepared, connected
  (let ((start (get-internal-real-time)))
    (let lp ((i 0))
      (when (< i n)
        (pg-query-row db "SELECT $1::int" (remainder i 10000))
        (lp (+ i 1))))
    (/ (- (get-internal-real-time) start)
       (* n (/ internal-time-units-per-second 1000000.)))))

(define (text s) (values '((content-type . (text/plain))) s))

(lambda (request body)
  (let ((path (uri-path (request-uri request)))
        (n (string->number (or (uri-query (request-uri request)) "1"))))
    (cond
     ((string=? path "/rt") (text (number->string (loop n))))
     ((string=? path "/blocking") (text (number->string (blocking (lambda () (loop n))))))
     (else (text "ready")))))
