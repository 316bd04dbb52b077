;;; tests/db/listen.scm --- pg-listen: LISTEN/NOTIFY as events of the worker's loop
;;;
;;; A PostgreSQL of its own (tests/lib/postgresql), a plucky server whose
;;; handler starts one listener per worker: notifications reach requests
;;; waiting on a channel, and a procedure, with no request holding the
;;; connection; the listener connects again after PostgreSQL restarts;
;;; pg-unlisten closes its session.

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (ice-9 exceptions)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (tests lib server)
             (tests lib command)
             (tests lib postgresql)
             (plucky server)
             (plucky db postgresql))

(test-runner-current (plucky-test-runner))
(test-begin "db/listen")

(define scratch (temporary-directory))
(define url (start-postgresql scratch))
(check-postgresql-or-skip url)

(define (text code . parts)
  (values (build-response #:code code #:headers '((content-type . (text/plain))))
          (string-concatenate parts)))

;;; The server: /start makes the listeners, /wait takes the next
;;; notification of "news" (or says none within a second), /heard the
;;; payloads the procedure got on the channel with a quote in its name.

(define messages (make-channel))
(define news #f)
(define odd #f)
(define heard '())
(define connects 0)

(define (handler request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path "/start")
      (unless news
        (set! news (pg-listen (string-append url "?application_name=plucky-listen")
                              "news" messages
                              #:on-connect (lambda () (set! connects (+ connects 1)))))
        (set! odd (pg-listen (string-append url "?application_name=plucky-listen")
                             (list "we\"ird; DROP TABLE t" "other")
                             (lambda (n) (set! heard (cons (pg-notification-payload n) heard))))))
      (text 200 "listening"))
     ((string=? path "/wait")
      (let ((n (channel-get messages #:timeout-ms 3000)))
        (text 200 (if n (pg-notification-payload n) "none"))))
     ((string=? path "/heard")
      (text 200 (string-join (reverse heard) ",")))
     ((string=? path "/state")
      (text 200 (format #f "~a ~a" connects (and news (pg-listener-connected? news)))))
     ((string=? path "/stop")
      (pg-unlisten news)
      (pg-unlisten odd)
      (text 200 "stopped"))
     ((string=? path "/bad")
      (text 200 (guard (e (#t "refused"))
                  (pg-listen url "" messages)
                  "accepted")))
     (else (text 404 "no")))))

(define server (and url (start-server handler)))
(define port (and server (server-port server)))
(define db (and url (pg-connect url)))

(define (notify! channel payload)
  (pg-query db "SELECT pg_notify($1, $2)" channel payload))

(define (sessions)
  (vector-ref (pg-query-row db "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'plucky-listen'") 0))

(define (get path) (car (get-all port (list path) #:timeout 10)))

(define-syntax-rule (when-server name body ...)
  (if server
      (test-group name (call-guarded (lambda () body ...)))
      (begin (test-skip 1) (test-assert name #f))))

(when-server "notifications reach waiting requests"
  (test-equal "started" '(200 . "listening") (get "/start"))
  (test-equal "two sessions listen" 2 (sessions))
  (test-equal "nothing said: the wait times out" '(200 . "none") (get "/wait"))
  (let ((clients (send-requests port (make-list 10 "/wait"))))
    ;; the ten wait in the worker, suspended; one notification each
    (test-assert "ten requests waiting, the worker free"
      (wait-until (lambda () (equal? (get "/state") '(200 . "1 #t"))) #:timeout 5))
    (for-each (lambda (i) (notify! "news" (number->string i))) (iota 10))
    (test-equal "each got one, oldest first"
      (map (lambda (i) (cons 200 (number->string i))) (iota 10))
      (read-responses clients))))

(when-server "queued when nobody waits, in order"
  (for-each (lambda (i) (notify! "news" (string-append "q" (number->string i)))) (iota 50))
  (test-equal "taken later, in order"
    (map (lambda (i) (cons 200 (string-append "q" (number->string i)))) (iota 50))
    (map (lambda (i) (get "/wait")) (iota 50))))

(when-server "a procedure, and a channel name that needs quoting"
  (notify! "we\"ird; DROP TABLE t" "a")
  (notify! "other" "b")
  (notify! "unheard" "c")
  (test-assert "both channels heard, the third not"
    (wait-until (lambda () (equal? (get "/heard") '(200 . "a,b"))) #:timeout 5))
  (test-equal "an empty channel name is refused" '(200 . "refused") (get "/bad")))

(when-server "PostgreSQL restarted: the listener connects again"
  (stop-postgresql scratch)
  (test-assert "PostgreSQL back" (start-postgresql scratch))
  (set! db (pg-connect url))
  (test-assert "connected again (on-connect called a second time)"
    (wait-until (lambda () (equal? (get "/state") '(200 . "2 #t"))) #:timeout 10))
  (notify! "news" "after")
  (test-equal "notifications flow again" '(200 . "after") (get "/wait"))
  (test-assert "the worker lives on" (server-alive? server)))

(when-server "pg-unlisten closes the sessions"
  (test-equal "stopped" '(200 . "stopped") (get "/stop"))
  (test-assert "no session left"
    (wait-until (lambda () (zero? (sessions))) #:timeout 5))
  (notify! "news" "late")
  (test-equal "nothing delivered after" '(200 . "none") (get "/wait")))

(when server (stop-server server))
(when db (pg-close db))
(when url
  (stop-postgresql scratch)
  (test-assert "PostgreSQL stopped" (not (postgresql-pid scratch))))
(remove-tree scratch)

(test-end "db/listen")
