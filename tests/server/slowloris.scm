;;; tests/server/slowloris.scm --- trickled heads are shut out, a normal client is not held up
;;;
;;; The short variant of bench/slowloris (issue 4).  Against a server whose
;;; header timeout is 3 s, 100 connections each write one byte of a request
;;; head that never ends, every 0.5-1.5 s (each its own interval), and are
;;; replaced as the server closes them, for 12 s; meanwhile one client
;;; sends sequential keep-alive requests, and one in 50 on a new
;;; connection.  The server must close every trickling connection with a
;;; 408 or a plain close, never answer it anything else, not before the
;;; header timeout counted from its first byte and not later than 3 s after
;;; it (the sweep runs once a second on a clock of whole seconds), while
;;; the normal client's p99 stays under 250 ms and a new connection is
;;; answered within a second.  The bounds are generous on purpose: the
;;; CPUs are shared; a loop that waited on a slow client would miss them
;;; by seconds.

(use-modules (srfi srfi-1)
             (srfi srfi-9)
             (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (web response)
             (tests lib harness)
             (tests lib server)
             (plucky server))

(define header-timeout 3)
(define trickle-count 100)
(define duration 12)
(define p99-bound-ms 250)
(define new-connection-bound-ms 1000)

(define (hello request body)
  (values '((content-type . (text/plain))) "Hello, World!"))

(define head
  (string->utf8
   (string-append "GET /slowloris HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  (string-concatenate
                   (map (lambda (i) (format #f "X-Trickle-~a: ~a\r\n" i i)) (iota 100))))))

(define (now) (now-seconds))

;;;
;;; Trickling connections
;;;

(define-record-type <trickler>
  (make-trickler socket interval first next sent received)
  trickler?
  (socket trickler-socket)
  (interval trickler-interval)                  ; seconds between bytes
  (first trickler-first set-trickler-first!)    ; when its first byte left, or #f
  (next trickler-next set-trickler-next!)       ; when its next byte is due
  (sent trickler-sent set-trickler-sent!)       ; bytes of HEAD sent
  (received trickler-received set-trickler-received!)) ; bytevector

(define (open-trickler port)
  (let ((sock (socket PF_INET SOCK_STREAM 0)))
    (connect sock AF_INET INADDR_LOOPBACK port)
    (make-trickler sock (+ 0.5 (random 1.0)) #f (now) 0 #vu8())))

(define (send-byte! t)
  ;; -> #f once the server has closed its side (EPIPE, ECONNRESET)
  (let ((byte (make-bytevector 1 (bytevector-u8-ref head (modulo (trickler-sent t)
                                                                 (bytevector-length head))))))
    (catch 'system-error
      (lambda ()
        (send (trickler-socket t) byte #x4000)  ; MSG_NOSIGNAL
        (set-trickler-sent! t (+ 1 (trickler-sent t)))
        (unless (trickler-first t) (set-trickler-first! t (now)))
        (set-trickler-next! t (+ (now) (trickler-interval t)))
        #t)
      (lambda args #f))))

(define (receive! t)
  ;; Read what is there.  -> #f while the connection is open, else how it
  ;; ended: '408, 'other (any other answer), 'closed (nothing), 'reset.
  (let* ((buffer (make-bytevector 4096))
         (n (catch 'system-error
              (lambda () (recv! (trickler-socket t) buffer))
              (lambda args 'reset))))
    (cond
     ((eq? n 'reset) 'reset)
     ((zero? n)
      (let ((text (utf8->string (trickler-received t))))
        (cond
         ((string-null? text) 'closed)
         ((string-prefix? "HTTP/1.1 408 " text) '408)
         (else 'other))))
     (else
      (let ((bytes (make-bytevector (+ n (bytevector-length (trickler-received t))))))
        (bytevector-copy! (trickler-received t) 0 bytes 0 (bytevector-length (trickler-received t)))
        (bytevector-copy! buffer 0 bytes (bytevector-length (trickler-received t)) n)
        (set-trickler-received! t bytes)
        #f)))))

;;;
;;; The run
;;;

(define (percentile sorted q)
  (list-ref sorted (min (- (length sorted) 1)
                        (inexact->exact (floor (* q (length sorted)))))))

(define (run port)
  ;; -> an alist of what happened
  (let* ((start (now))
         (end (+ start duration))
         (tricklers (map (lambda (i) (open-trickler port)) (iota trickle-count)))
         (closes '())                   ; (how . seconds after the first byte)
         (latencies '())                ; ms, keep-alive requests
         (fresh '())                    ; ms, requests on a new connection
         (errors '())
         (client (connect-client port))
         (request (request-text "/")))
    (define (service-tricklers!)
      (let* ((fds (map (lambda (t) (trickler-socket t)) tricklers))
             (ready (car (select fds '() '() 0))))
        (set! tricklers
              (append-map
               (lambda (t)
                 (let ((how (and (memq (trickler-socket t) ready) (receive! t))))
                   (cond
                    (how
                     (set! closes (cons (cons how (and (trickler-first t)
                                                        (- (now) (trickler-first t))))
                                        closes))
                     (close-port (trickler-socket t))
                     (list (open-trickler port)))
                    (else
                     (when (>= (now) (trickler-next t))
                       (send-byte! t))
                     (list t)))))
               tricklers))))
    (let lp ((n 1) (last-service 0))
      (when (< (now) end)
        (let ((last-service (if (> (- (now) last-service) 0.01)
                                (begin (service-tricklers!) (now))
                                last-service)))
          (let* ((t0 (now))
                 (ok? (if (zero? (modulo n 50))
                          (let ((response body (http-get port "/" #:timeout 5)))
                            (and response (= 200 (response-code response))))
                          (and (client-send! client request)
                               (let ((response body (client-read-response client #:timeout 5)))
                                 (and response (= 200 (response-code response)))))))
                 (ms (* 1000 (- (now) t0))))
            (cond
             ((not ok?) (set! errors (cons n errors)))
             ((zero? (modulo n 50)) (set! fresh (cons ms fresh)))
             (else (set! latencies (cons ms latencies))))
            (lp (+ n 1) last-service)))))
    (let ((still-open (filter-map (lambda (t)
                                    (and (trickler-first t) (- (now) (trickler-first t))))
                                  tricklers)))
      (for-each (lambda (t) (close-port (trickler-socket t))) tricklers)
      (client-close! client)
      `((closes . ,closes)
        (latencies . ,(sort latencies <))
        (fresh . ,(sort fresh <))
        (errors . ,errors)
        (still-open . ,still-open)))))

(test-begin "server/slowloris")

(call-guarded
 (lambda ()
   (call-with-server
    hello
    (lambda (server)
      (let* ((result (run (server-port server)))
             (closes (assq-ref result 'closes))
             (latencies (assq-ref result 'latencies))
             (fresh (assq-ref result 'fresh))
             (p50 (and (pair? latencies) (percentile latencies 0.5)))
             (p99 (and (pair? latencies) (percentile latencies 0.99))))
        (format #t "slowloris: ~a requests, p50 ~,2f ms, p99 ~,2f ms, max ~,2f ms; ~a new connections, max ~,2f ms; trickling connections closed: ~a~%"
                (length latencies) (or p50 0) (or p99 0) (if (pair? latencies) (last latencies) 0)
                (length fresh) (if (pair? fresh) (last fresh) 0)
                (map (lambda (how) (cons how (count (lambda (c) (eq? (car c) how)) closes)))
                     '(408 closed reset other)))
        (test-assert "the server closed at least the first wave of trickling connections"
          (>= (length closes) trickle-count))
        (test-equal "each with a 408 or a plain close, nothing else" '()
          (filter (lambda (c) (not (memq (car c) '(408 closed)))) closes))
        (test-equal (format #f "none before the header timeout (~a s) from its first byte"
                            header-timeout)
          '()
          (filter (lambda (c) (or (not (cdr c)) (< (cdr c) (- header-timeout 0.1)))) closes))
        (test-equal "none later than 3 s after it" '()
          (filter (lambda (c) (and (cdr c) (> (cdr c) (+ header-timeout 3)))) closes))
        (test-equal "no trickling connection outlived that" '()
          (filter (lambda (age) (> age (+ header-timeout 3))) (assq-ref result 'still-open)))
        (test-equal "the normal client's requests all answered 200" '()
          (assq-ref result 'errors))
        (test-assert "the normal client made requests" (> (length latencies) 100))
        (test-assert (format #f "its p99 (~,2f ms) under ~a ms" (or p99 0) p99-bound-ms)
          (and p99 (< p99 p99-bound-ms)))
        (test-assert (format #f "a new connection answered within ~a ms (slowest ~,2f ms)"
                             new-connection-bound-ms (if (pair? fresh) (last fresh) 0))
          (and (pair? fresh) (< (last fresh) new-connection-bound-ms)))
        (test-assert "the server is alive" (server-alive? server))))
    #:settings (make-loop-settings #:header-timeout header-timeout))))

(test-end "server/slowloris")
