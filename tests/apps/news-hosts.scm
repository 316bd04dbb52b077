;;; tests/apps/news-hosts.scm --- the news site on two hosts sharing one PostgreSQL

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; What several hosts need of (news sql) and (plucky db state), each
;;; against a PostgreSQL of the test's own:
;;;
;;;   migrations   two processes start at once on a fresh database
;;;                (PostgreSQL, and an SQLite file): both succeed, each
;;;                migration is applied once, the site seeded once
;;;   two hosts    two `bin/plucky serve apps/news/main.scm' processes
;;;                with one DATABASE_URL: a page cached on B is made
;;;                again when another process commits (NOTIFY), and not
;;;                for a change made behind the site's back; a session
;;;                opened on A is logged in on B; a vote sent twice, to
;;;                A and B, counts once; failed logins counted on A
;;;                refuse a login on B
;;;   PostgreSQL down  the site answers 503 with Retry-After, logs one
;;;                line a second, and serves again once it is back
;;;
;;; Skipped without a PostgreSQL server, except under CI.
;;;
;;; Code:

(add-to-load-path (string-append (getcwd) "/apps"))

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (ice-9 match)
             (ice-9 regex)
             (rnrs bytevectors)
             (web client)
             (web response)
             (web uri)
             (tests lib harness)
             (tests lib command)
             (tests lib postgresql)
             (plucky db postgresql)
             (news db)
             (news app))

(define pg-directory
  (mkdtemp (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-news-hosts-XXXXXX")))
(define url (start-postgresql pg-directory))

(define small '(#:users 5 #:stories 5 #:comments 10))

;;; Two processes at once: each waits for a byte on descriptor 3, which
;;; the test writes to both once both are started.

(define guile-program
  (or (search-path (parse-path (getenv "PATH")) "guile") "guile"))

(define (start-seeder location barrier log)
  (launch guile-program
          (list "-L" source-root "-C" (string-append source-root "/build")
                "-L" (string-append source-root "/apps")
                "-c" (format #f "(use-modules (news app))
                                 (let ((p (fdes->inport 3))) (setvbuf p 'none) (read-char p))
                                 (seed-news-db! ~s #:size '~s)
                                 (exit 0)"
                             location small))
          #:fds (list (cons 3 (port->fdes barrier))
                      (cons 2 (port->fdes log)))))

(define (seed-at-once location)
  ;; -> the exit statuses of two processes migrating and seeding
  ;; LOCATION at once
  (let* ((barrier (pipe))
         (log (open-file (string-append pg-directory "/seeders.log") "a"))
         (pids (list (start-seeder location (car barrier) log)
                     (start-seeder location (car barrier) log))))
    (close-port (car barrier))
    (close-port log)
    (put-bytevector* (cdr barrier) (string->utf8 "go"))
    (close-port (cdr barrier))
    (map (lambda (pid) (status:exit-val (cdr (waitpid pid)))) pids)))

(define (put-bytevector* port bv)
  (for-each (lambda (b) (write-char (integer->char b) port)) (bytevector->u8-list bv))
  (force-output port))

(define (stored location)
  ;; -> (migrations applied . users) at LOCATION
  (let ((db (open-news-db location)))
    (let ((users (user-count db)))
      (close-news-db db)
      (let ((rows (if (database-url? location)
                      (let ((c (pg-connect location)))
                        (let ((rows (pg-query c "SELECT version FROM schema_migrations ORDER BY version")))
                          (pg-close c)
                          (map (lambda (row) (vector-ref row 0)) rows)))
                      #f)))
        (cons rows users)))))

;;; HTTP, as a browser would: a cookie jar and the last CSRF token.

(define (make-visitor) (vector '() #f))  ; #(cookies token)

(define (cookie-header v)
  (if (null? (vector-ref v 0))
      '()
      `((cookie . ,(string-join (map (match-lambda ((k . val) (string-append k "=" val)))
                                     (vector-ref v 0))
                                "; ")))))

(define (take-cookies! v response)
  (for-each
   (match-lambda
     (('set-cookie . text)
      (let ((m (string-match "^([^=]+)=([^;]*)" text)))
        (when m
          (vector-set! v 0 (cons (cons (match:substring m 1) (match:substring m 2))
                                 (remove (lambda (c) (string=? (car c) (match:substring m 1)))
                                         (vector-ref v 0)))))))
     (_ #f))
   (response-headers response)))

(define* (request v port method path #:key form)
  ;; -> (status . body text)
  (let ((form (and form (if (vector-ref v 1) (append form `(("csrf" . ,(vector-ref v 1)))) form))))
    (call-with-values
        (lambda ()
          (http-request (string-append "http://127.0.0.1:" (number->string port) path)
                        #:method method
                        #:headers (append `((host . ("news.test" . #f)))
                                          (if form
                                              '((content-type application/x-www-form-urlencoded))
                                              '())
                                          (cookie-header v))
                        #:body (and form
                                    (string->utf8
                                     (string-join (map (match-lambda
                                                         ((k . val) (string-append (uri-encode k) "="
                                                                                   (uri-encode val))))
                                                       form)
                                                  "&")))
                        #:decode-body? #f))
      (lambda (response body)
        (take-cookies! v response)
        (let* ((text (if (bytevector? body) (utf8->string body) ""))
               (m (string-match "name=\"csrf\" value=\"([^\"]+)\"" text)))
          (when m (vector-set! v 1 (match:substring m 1)))
          (cons (response-code response) text))))))

(define (response-of v port path)
  ;; -> (response . body text) of a GET of PATH by V
  (call-with-values
      (lambda ()
        (http-request (string-append "http://127.0.0.1:" (number->string port) path)
                      #:headers (append '((host . ("news.test" . #f))) (cookie-header v))
                      #:decode-body? #f))
    (lambda (response body)
      (cons response (if (bytevector? body) (utf8->string body) "")))))

(define (serve-news proc)
  (call-with-plucky
   "apps/news/main.scm" (append '("--port" "0" "--workers" "1") allow-root)
   proc
   #:environment (append (list (string-append "DATABASE_URL=" url)
                               (string-append "PLUCKY_DATA=" pg-directory "/var"))
                         (environ))
   #:timeout 60))

(define (poll thunk seconds)
  ;; -> THUNK's first true value within SECONDS, or #f
  (let ((deadline (+ (current-time) seconds)))
    (let lp ()
      (or (thunk) (and (< (current-time) deadline) (lp))))))

(test-begin "apps/news-hosts")
(check-postgresql-or-skip url)

(when url
  (test-group "migrations: two processes start at once"
    (let ((admin (pg-connect url)))
      (pg-execute admin "CREATE DATABASE migrations_at_once")
      (pg-close admin))
    (let ((fresh (regexp-substitute #f (string-match "/[^/]*$" url) 'pre "/migrations_at_once")))
      (test-equal "PostgreSQL: both started" '(0 0) (seed-at-once fresh))
      (test-equal "each migration applied once, the site seeded once" '((1 2 3) . 5)
        (stored fresh)))
    (let ((file (string-append pg-directory "/news.db")))
      (test-equal "SQLite: both started" '(0 0) (seed-at-once file))
      (test-equal "the site seeded once" 5 (cdr (stored file)))))

  (seed-news-db! url #:size small)
  (test-group "two hosts on one database"
    (serve-news
     (lambda (a)
       (serve-news
        (lambda (b)
          (test-assert "both serve" (and (plucky-port a) (plucky-port b)))
          (let ((reader (make-visitor))
                (db (open-news-db url)))
            (create-user! db "teller" "no password" (current-time))
            ;; the page cache is kept a minute at most: far from the
            ;; minute's end, what follows happens within one
            (poll (lambda () (< (modulo (current-time) 60) 40)) 60)
            (test-equal "B's newest page" 200 (car (request reader (plucky-port b) 'GET "/newest")))
            (let ((c (pg-connect url)))
              (pg-execute c "INSERT INTO items (type, by, ip, time, title, text, score)
                             SELECT 'story', name, '10.9.9.9', $1, 'Written behind its back', 'x', 1
                             FROM users LIMIT 1" (current-time))
              (pg-close c))
            (test-assert "a change behind the site's back: B's cached page"
              (not (string-contains (cdr (request reader (plucky-port b) 'GET "/newest"))
                                    "Written behind its back")))
            (create-story! db "teller" "10.9.9.8" (current-time)
                           #f "Told to every host" "y")
            (test-assert "a commit of another process: B's page made again"
              (poll (lambda ()
                      (string-contains (cdr (request reader (plucky-port b) 'GET "/newest"))
                                       "Told to every host"))
                    10))
            (let ((carol (make-visitor))
                  (story (item-id (car (newest-stories db 1 0)))))
              (request carol (plucky-port a) 'GET "/login")
              (test-equal "signed up on A" 303
                (car (request carol (plucky-port a) 'POST "/signup"
                              #:form '(("name" . "carol") ("password" . "carol's password")))))
              (test-assert "logged in on B"
                (string-contains (cdr (request carol (plucky-port b) 'GET "/newest"))
                                 "user?id=carol"))
              (test-equal "votes on B" 303
                (car (request carol (plucky-port b) 'POST "/vote"
                              #:form `(("id" . ,(number->string story)) ("dir" . "up")))))
              (test-equal "the same vote again on A" 303
                (car (request carol (plucky-port a) 'POST "/vote"
                              #:form `(("id" . ,(number->string story)) ("dir" . "up")))))
              (test-equal "stored once" '(1 2)
                (let ((c (pg-connect url)))
                  (let ((votes (pg-query-row c "SELECT count(*) FROM votes
                                                 WHERE item = $1 AND \"user\" = 'carol'" story))
                        (score (pg-query-row c "SELECT score FROM items WHERE id = $1" story)))
                    (pg-close c)
                    (list (vector-ref votes 0) (vector-ref score 0))))))
            (let ((guesser (make-visitor)))
              (request guesser (plucky-port a) 'GET "/login")
              (test-assert "ten failed logins on A"
                (every (lambda (i)
                         (= 403 (car (request guesser (plucky-port a) 'POST "/login"
                                              #:form '(("login-name" . "carol")
                                                       ("login-password" . "not it"))))))
                       (iota 10)))
              (test-equal "the right password on B: refused too" 429
                (car (request guesser (plucky-port b) 'POST "/login"
                              #:form '(("login-name" . "carol")
                                       ("login-password" . "carol's password"))))))
            (close-news-db db)))))))

  (test-group "PostgreSQL down: 503 with Retry-After, one line logged, then 200"
    (serve-news
     (lambda (a)
       (let ((dora (make-visitor))
             (port (plucky-port a)))
         (request dora port 'GET "/login")
         (test-equal "signed up" 303
           (car (request dora port 'POST "/signup"
                         #:form '(("name" . "dora") ("password" . "dora's password")))))
         (test-equal "her page" 200 (car (request dora port 'GET "/newest")))
         (stop-postgresql pg-directory)
         (let* ((start (current-time))
                (responses (map (lambda (i) (response-of dora port "/newest")) (iota 20)))
                (seconds (+ 1 (- (current-time) start)))
                (log (plucky-log a))
                (lines (length (filter (lambda (line) (string-contains line "database unavailable"))
                                       (string-split log #\newline)))))
           (unless (and (<= 1 lines seconds) (string-contains log "database unavailable (08"))
             ;; a failure seen once only, on a loaded machine: show why
             (format (current-error-port) "news-hosts: ~a lines in ~a s; the server's log:~%~a~%"
                     lines seconds log))
           (test-equal "each request: 503" (make-list 20 503)
             (map (lambda (r) (response-code (car r))) responses))
           (test-equal "Retry-After: 5" 5
             (assq-ref (response-headers (car (car responses))) 'retry-after))
           (test-assert "a text that says why"
             (string-contains (cdr (car responses)) "database is unavailable"))
           (test-assert "logged in one line a second at most"
             (<= 1 lines seconds))
           (test-assert "no backtrace" (not (string-contains log "Backtrace")))
           (test-assert "the line names the error"
             (string-contains log "database unavailable (08"))
           (test-assert "libpq's message on the same line, without tabs"
             (let ((line (find (lambda (line) (string-contains line "database unavailable"))
                               (string-split log #\newline))))
               (and line
                    (not (string-index line #\tab))
                    (not (any (lambda (line) (string-prefix? "\t" line))
                              (string-split log #\newline)))
                    (string-contains line "): 503 to GET /newest")))))
         (start-postgresql pg-directory)
         (test-equal "PostgreSQL back: 200 again" 200
           (poll (lambda ()
                   (let ((code (response-code (car (response-of dora port "/newest")))))
                     (and (= code 200) code)))
                 10))
         (test-assert "still logged in"
           (string-contains (cdr (request dora port 'GET "/newest")) "user?id=dora"))))))
  (stop-postgresql pg-directory))

(test-end "apps/news-hosts")
(system* "rm" "-rf" pg-directory)
