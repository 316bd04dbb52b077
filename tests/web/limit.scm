;;; tests/web/limit.scm --- (plucky web limit)

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (sqlite3)
             (web http)
             (web response)
             (tests lib harness)
             (plucky web limit))

(define directory
  (mkdtemp (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-limit-test-XXXXXX")))
(define file (string-append directory "/limits.db"))

(define now 1000000)
(define (clock) now)

(define db (sqlite-open file))

(test-begin "web/limit")

(test-group "make-rate-limit"
  (test-assert "a rate limit" (rate-limit? (make-rate-limit #:db db)))
  (test-equal "its settings" '("logins" 3 60)
    (let ((limit (make-rate-limit #:db db #:name "logins" #:limit 3 #:window 60)))
      (list (rate-limit-name limit) (rate-limit-limit limit) (rate-limit-window limit))))
  (test-error "a database is needed" #t (make-rate-limit #:db "limits.db"))
  (test-error "a limit of 0 is refused" #t (make-rate-limit #:db db #:limit 0)))

(define limit (make-rate-limit #:db db #:name "a" #:limit 3 #:window 60 #:clock clock))

(test-group "rate-limit-hit! and rate-limit-retry-after"
  (test-equal "nothing yet: #f" #f (rate-limit-retry-after limit "k"))
  (rate-limit-hit! limit "k")
  (set! now (+ now 10))
  (rate-limit-hit! limit "k")
  (test-equal "two of three: #f" #f (rate-limit-retry-after limit "k"))
  (set! now (+ now 10))
  (rate-limit-hit! limit "k")
  (test-equal "three: until the first leaves the window" 40 (rate-limit-retry-after limit "k"))
  (test-equal "another key: #f" #f (rate-limit-retry-after limit "other"))
  (test-equal "another limit's name: #f" #f
    (rate-limit-retry-after (make-rate-limit #:db db #:name "b" #:limit 3 #:window 60 #:clock clock)
                            "k"))
  (set! now (+ now 40))
  (test-equal "the first gone: #f" #f (rate-limit-retry-after limit "k"))
  (rate-limit-hit! limit "k")
  (rate-limit-hit! limit "k")
  ;; t+10, t+20, t+60, t+60: below three once t+10 and t+20 have left
  (test-equal "four within the window: until the second of them leaves" 20
    (rate-limit-retry-after limit "k"))
  (test-equal "old events deleted as new ones come" 0
    (vector-ref (sqlite-step (sqlite-prepare db (format #f "SELECT count(*) FROM plucky_rate_events WHERE name = 'a' AND time <= ~a" (- now 60)))) 0)))

(test-group "rate-limit-clear!"
  (rate-limit-clear! limit "k")
  (test-equal "cleared: #f" #f (rate-limit-retry-after limit "k")))

(test-group "rate-limit-take!"
  (test-equal "three taken" '(#f #f #f)
    (map (lambda (_) (rate-limit-take! limit "t")) (iota 3)))
  (test-equal "the fourth refused, with the wait" 60 (rate-limit-take! limit "t"))
  (test-equal "and not counted" 60 (rate-limit-take! limit "t"))
  (set! now (+ now 60))
  (test-equal "a window on: taken" #f (rate-limit-take! limit "t")))

(define (wait-for-children pids timeout)
  ;; -> the exit values of PIDS, #f for one that had not exited within
  ;; TIMEOUT seconds (it is killed)
  (let ((deadline (+ (current-time) timeout)))
    (map (lambda (pid)
           (let lp ()
             (let ((result (waitpid pid WNOHANG)))
               (cond
                ((not (zero? (car result))) (status:exit-val (cdr result)))
                ((> (current-time) deadline) (kill pid SIGKILL) (waitpid pid) #f)
                (else (usleep 10000) (lp))))))
         pids)))

(test-group "rate-limit-take!: workers share the limit"
  ;; four processes, each with its own connection, take 10 times each
  ;; from a limit of 7: exactly 7 are taken in all
  (let* ((shared (make-rate-limit #:db (lambda () (sqlite-open file)) #:name "workers"
                                  #:limit 7 #:window 600))
         (pids (map (lambda (_)
                      (let ((pid (primitive-fork)))
                        (if (zero? pid)
                            (primitive-exit
                             (count not (map (lambda (_) (rate-limit-take! shared "w")) (iota 10))))
                            pid)))
                    (iota 4)))
         (taken (wait-for-children pids 30)))
    (test-assert "all four done" (every integer? taken))
    (test-equal "7 taken in all" 7 (and (every integer? taken) (apply + taken)))))

(test-group "too-many-requests"
  (let ((response (too-many-requests 42)))
    (test-equal "429" 429 (response-code response))
    (test-equal "Retry-After" 42 (assq-ref (response-headers response) 'retry-after))
    (test-equal "the header as sent" "Retry-After: 42\r\n"
      (call-with-output-string
        (lambda (port) (write-header 'retry-after 42 port))))))

(test-end "web/limit")

(sqlite-close db)
(system* "rm" "-rf" directory)
