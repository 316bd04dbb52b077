;;; tests/db/state.scm --- (plucky db state): sessions and rate limits in PostgreSQL

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The stores of (plucky web session) and (plucky web limit) in a
;;; PostgreSQL of the test's own: the session's life (made, read, its
;;; data written back, a new id, destroyed, expired, purged), as
;;; tests/web/session.scm checks it on SQLite, and the rate limit's
;;; counts, as tests/web/limit.scm does; then what only several hosts
;;; show: a session made through one pool read through another, and
;;; processes taking one key's events at once never passing the limit.
;;; Skipped without a PostgreSQL server, except under CI.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (rnrs bytevectors)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (tests lib postgresql)
             (plucky web crypto)
             (plucky web session)
             (plucky web limit)
             (plucky db postgresql)
             (plucky db state))

(define pg-directory
  (mkdtemp (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-state-XXXXXX")))
(define url (start-postgresql pg-directory))

(define now 1800000000)
(define (clock) now)

(define (request-with-cookie id)
  (build-request (string->uri "http://localhost/")
                 #:headers (if id `((cookie . ,(string-append "session=" id))) '())))

(define (cookie-id response)
  ;; -> the id in RESPONSE's Set-Cookie, or #f (or "" when it is dropped)
  (let ((header (assq-ref (response-headers response) 'set-cookie)))
    (and header
         (let ((pair (car (string-split header #\;))))
           (substring pair (+ 1 (string-index pair #\=)))))))

(define* (app-of store proc #:rest options)
  ;; -> an app whose body is (PROC), under sessions kept in STORE
  (apply with-sessions
         (lambda (request body)
           (values (build-response #:headers '((content-type text/plain))) (proc)))
         #:store store #:clock clock options))

(define (call app id)
  ;; -> (response . body)
  (call-with-values (lambda () (app (request-with-cookie id) #f)) cons))

(define (count-rows db table)
  (vector-ref (pg-query-row db (string-append "SELECT count(*) FROM " table)) 0))

(test-begin "db/state")
(check-postgresql-or-skip url)

(when url
  (let* ((pool (make-pg-pool url))
         (store (pg-session-store pool))
         (login (app-of store (lambda () (session-set! "user" "ada") "in")))
         (whoami (app-of store (lambda () (object->string (session-ref "user")))))
         (logout (app-of store (lambda () (session-destroy!) "out"))))

    (test-group "pg-session-store"
      (test-equal "a visitor who only reads: no session, the table made, no row" '(#f 0)
        (let ((r (call whoami #f)))
          (list (cookie-id (car r)) (count-rows pool "plucky_sessions"))))
      (let ((id (cookie-id (car (call login #f)))))
        (test-equal "session-set! makes one row" 1 (count-rows pool "plucky_sessions"))
        (test-equal "keyed by the id's hash" (sha256 (base64url->bytes id))
          (vector-ref (pg-query-row pool "SELECT id_hash FROM plucky_sessions") 0))
        (test-equal "the next request sees it" "\"ada\"" (cdr (call whoami id)))
        (test-equal "through another pool too (another host)" "\"ada\""
          (let ((other (make-pg-pool url)))
            (let ((body (cdr (call (app-of (pg-session-store other)
                                           (lambda () (object->string (session-ref "user"))))
                                   id))))
              (pg-close other)
              body)))
        (let ((fresh (cookie-id (car (call (app-of store (lambda ()
                                                           (session-regenerate!)
                                                           (session-set! "user" "bob")
                                                           ""))
                                           id)))))
          (test-assert "session-regenerate!: a new id" (and fresh (not (equal? fresh id))))
          (test-equal "which has the data" "\"bob\"" (cdr (call whoami fresh)))
          (test-equal "the old id opens nothing" "#f" (cdr (call whoami id)))
          (test-equal "one row still" 1 (count-rows pool "plucky_sessions"))
          (test-equal "session-destroy!: the cookie dropped" "" (cookie-id (car (call logout fresh))))
          (test-equal "and the row" 0 (count-rows pool "plucky_sessions"))))
      (let* ((idle (app-of store (lambda () (session-set! "user" "ada") "") #:idle-timeout 100
                           #:touch-interval 10))
             (read (app-of store (lambda () (object->string (session-ref "user")))
                           #:idle-timeout 100 #:touch-interval 10))
             (id (cookie-id (car (call idle #f)))))
        (set! now (+ now 50))
        (test-equal "used within the idle timeout" "\"ada\"" (cdr (call read id)))
        (test-equal "which marked it seen" now
          (vector-ref (pg-query-row pool "SELECT seen FROM plucky_sessions") 0))
        (set! now (+ now 100))
        (test-equal "idle too long: refused" "#f" (cdr (call read id)))
        (test-equal "and deleted" 0 (count-rows pool "plucky_sessions")))
      (call login #f)
      (call login #f)
      (test-equal "purge-expired-sessions!: none expired yet" 0
        (purge-expired-sessions! store #:now now))
      (test-equal "then both" 2
        (purge-expired-sessions! store #:now (+ now (* 14 24 3600)))))

    (test-group "pg-rate-limit-store"
      (let ((limit (make-rate-limit #:store (pg-rate-limit-store pool) #:name "a" #:limit 3
                                    #:window 60 #:clock clock)))
        (test-equal "nothing yet: #f" #f (rate-limit-retry-after limit "k"))
        (rate-limit-hit! limit "k")
        (set! now (+ now 10))
        (rate-limit-hit! limit "k")
        (set! now (+ now 10))
        (rate-limit-hit! limit "k")
        (test-equal "three: until the first leaves the window" 40
          (rate-limit-retry-after limit "k"))
        (test-equal "another key: #f" #f (rate-limit-retry-after limit "other"))
        (rate-limit-clear! limit "k")
        (test-equal "cleared: #f" #f (rate-limit-retry-after limit "k"))
        (test-equal "take!: three taken, the fourth refused" '(#f #f #f 60)
          (map (lambda (i) (rate-limit-take! limit "t")) (iota 4)))
        (set! now (+ now 61))
        (rate-limit-hit! limit "u")
        (test-equal "events that left the window are deleted as new ones come" 0
          (vector-ref (pg-query-row pool "SELECT count(*) FROM plucky_rate_events
                                         WHERE name = 'a' AND time <= $1" (- now 60))
                      0))))

    (test-group "pg-rate-limit-store: processes taking one key at once"
      ;; four processes, each trying ten times, a limit of 7: 7 taken in
      ;; all, however they interleave
      (let* ((barrier (pipe))
             (pids (map (lambda (i)
                          (let ((pid (primitive-fork)))
                            (if (zero? pid)
                                (primitive-exit
                                 (catch #t
                                   (lambda ()
                                     (close-port (cdr barrier))
                                     (setvbuf (car barrier) 'none)
                                     (read-char (car barrier))
                                     (let ((limit (make-rate-limit
                                                   #:store (pg-rate-limit-store pool)
                                                   #:name "race" #:limit 7 #:window 600
                                                   #:clock clock)))
                                       (count not (map (lambda (j) (rate-limit-take! limit "key"))
                                                       (iota 10)))))
                                   (lambda args 100)))
                                pid)))
                        (iota 4))))
        (close-port (car barrier))
        (display "gogo" (cdr barrier))
        (close-port (cdr barrier))
        (let ((taken (map (lambda (pid) (status:exit-val (cdr (waitpid pid)))) pids)))
          (test-assert "every process ran" (every (lambda (n) (<= 0 n 10)) taken))
          (test-equal "seven taken in all" 7 (apply + taken))
          (test-equal "seven counted" 7
            (vector-ref (pg-query-row pool "SELECT count(*) FROM plucky_rate_events
                                           WHERE name = 'race'")
                        0)))))
    (pg-close pool))
  (stop-postgresql pg-directory))

(test-end "db/state")
(system* "rm" "-rf" pg-directory)
