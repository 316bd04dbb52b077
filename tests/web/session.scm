;;; tests/web/session.scm --- (plucky web session)

(use-modules (srfi srfi-64)
             (srfi srfi-11)
             (srfi srfi-1)
             (rnrs bytevectors)
             (ice-9 popen)
             (ice-9 rdelim)
             (ice-9 textual-ports)
             (sqlite3)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (tests lib server)
             (plucky web csrf)
             (tests lib error-text)
             (plucky web crypto)
             (plucky web router)
             (plucky web session))

(define directory
  (mkdtemp (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-session-test-XXXXXX")))

(define (fresh-db name)
  (sqlite-open (string-append directory "/" name)))

(define (request-with-cookie text)
  (build-request (string->uri "http://localhost/")
                 #:headers (if text `((cookie . ,text)) '())))

(define (set-cookie-of response)
  (assq-ref (response-headers response) 'set-cookie))

(define (cookie-id response)
  ;; -> the id in RESPONSE's Set-Cookie, or #f
  (let ((header (set-cookie-of response)))
    (and header
         (let ((pair (car (string-split header #\;))))
           (substring pair (+ 1 (string-index pair #\=)))))))

(define (count-rows db)
  (let* ((statement (sqlite-prepare db "SELECT count(*) FROM plucky_sessions"))
         (row (sqlite-step statement)))
    (sqlite-finalize statement)
    (vector-ref row 0)))

;; The clock of every app made here.
(define now 1800000000)
(define (clock) now)

;; -> an app whose handler's body is (PROC), under sessions in DB
(define* (app-of db proc #:rest options)
  (apply with-sessions
         (lambda (request body)
           (values (build-response #:headers '((content-type text/plain))) (proc)))
         #:db db #:clock clock options))

;; -> (values response body) of APP for a request with cookie ID
(define (call app id)
  (app (request-with-cookie (and id (string-append "session=" id))) #f))

(define (body-of app id)
  (call-with-values (lambda () (call app id)) (lambda (response body) body)))

(define (response-of app id)
  (call-with-values (lambda () (call app id)) (lambda (response body) response)))


(define db (fresh-db "one.db"))
(define login (app-of db (lambda () (session-set! "user" "ada") "in")))
(define whoami (app-of db (lambda () (object->string (session-ref "user")))))
(define logout (app-of db (lambda () (session-destroy!) "out")))

(test-begin "web/session")

(test-group "prepare-session-database!"
  (let ((statement (sqlite-prepare db "PRAGMA journal_mode")))
    (test-equal "wal" (vector-ref (sqlite-step statement) 0))
    (sqlite-finalize statement))
  (test-equal 0 (count-rows db)))

(test-group "with-sessions: a visitor who only reads makes no session"
  (let ((response (response-of whoami #f)))
    (test-equal #f (set-cookie-of response))
    (test-equal 0 (count-rows db))))

(test-group "with-sessions: session-set! makes one"
  (let* ((response (response-of login #f))
         (id (cookie-id response)))
    (test-assert "22 base64url characters, 128 bits"
      (and (= 22 (string-length id)) (= 16 (bytevector-length (base64url->bytes id)))))
    (test-assert "the cookie's attributes"
      (string-suffix? "; Path=/; Max-Age=1209600; HttpOnly; SameSite=Lax" (set-cookie-of response)))
    (test-equal 1 (count-rows db))
    (test-equal "the next request sees it" "\"ada\"" (body-of whoami id))
    (test-equal "and gets no new cookie" #f (set-cookie-of (response-of whoami id)))
    (test-equal "the table holds the id's hash, not the id" (list (sha256 (base64url->bytes id)))
      (let ((statement (sqlite-prepare db "SELECT id_hash FROM plucky_sessions")))
        (let ((rows (sqlite-map (lambda (row) (vector-ref row 0)) statement)))
          (sqlite-finalize statement)
          rows)))
    (test-assert "two sessions have two ids" (not (equal? id (cookie-id (response-of login #f)))))))

(test-group "with-sessions: hostile cookies open nothing"
  (for-each (lambda (cookie)
              (let ((response (response-of whoami cookie)))
                (test-equal cookie "#f" (body-of whoami cookie))
                (test-assert (string-append cookie ": told to drop it")
                  (string-prefix? "session=; " (or (set-cookie-of response) "")))))
            (list (bytes->base64url (random-bytes 16))         ; well-formed, unknown
                  (bytes->base64url (random-bytes 32))         ; too long
                  "AAAA" "" "../../etc/passwd" "' OR 1=1 --" "%00"
                  (make-string 5000 #\A))))

(test-group "session-destroy!: the logged-out cookie is refused"
  (let* ((id (cookie-id (response-of login #f)))
         (rows (count-rows db))
         (response (response-of logout id)))
    (test-assert "the browser is told to forget it"
      (string-prefix? "session=; Path=/; Max-Age=0; Expires=Thu, 01 Jan 1970" (set-cookie-of response)))
    (test-equal "its row is gone" (- rows 1) (count-rows db))
    (test-equal "replayed, it opens nothing" "#f" (body-of whoami id))))

(test-group "session-regenerate!: a new id on login, the old one dead"
  (let* ((planted (cookie-id (response-of (app-of db (lambda () (session-set! "cart" '(1 2)) "")) #f)))
         (escalate (app-of db (lambda () (session-regenerate!) (session-set! "user" "bob") "")))
         (fresh (cookie-id (response-of escalate planted)))
         (read-both (app-of db (lambda () (object->string (list (session-ref "user") (session-ref "cart")))))))
    (test-assert "a new id" (and fresh (not (equal? fresh planted))))
    (test-equal "the new id has the data" "(\"bob\" (1 2))" (body-of read-both fresh))
    (test-equal "the planted id opens nothing" "(#f #f)" (body-of read-both planted))))

(test-group "with-sessions: idle timeout"
  (let* ((app (app-of db (lambda () (session-set! "user" "ada") "") #:idle-timeout 100 #:touch-interval 10))
         (read (app-of db (lambda () (object->string (session-ref "user"))) #:idle-timeout 100
                       #:touch-interval 10))
         (id (cookie-id (response-of app #f))))
    (set! now (+ now 99))
    (test-equal "used before the timeout" "\"ada\"" (body-of read id))
    (set! now (+ now 99))
    (test-equal "still alive: the last use counted" "\"ada\"" (body-of read id))
    (set! now (+ now 100))
    (test-equal "idle too long" "#f" (body-of read id))
    (set! now (- now 200))
    (test-equal "and its row was deleted" "#f" (body-of read id))))

(test-group "with-sessions: absolute expiry"
  (let* ((app (app-of db (lambda () (session-set! "user" "ada") "") #:max-age 300 #:touch-interval 10))
         (read (app-of db (lambda () (object->string (session-ref "user"))) #:max-age 300
                       #:touch-interval 10))
         (id (cookie-id (response-of app #f))))
    (let loop ((i 0))
      (when (< i 5)
        (set! now (+ now 59))
        (loop (+ i 1))))
    (test-equal "used at 295 s" "\"ada\"" (body-of read id))
    (set! now (+ now 5))
    (test-equal "gone at 300 s however busy" "#f" (body-of read id))))

(test-group "with-sessions: a handler that raises saves nothing"
  (let* ((rows (count-rows db))
         (app (app-of db (lambda () (session-set! "user" "eve") (error "boom")))))
    (test-assert (string-contains (error-text (lambda () (call app #f))) "boom"))
    (test-equal rows (count-rows db))))

(test-group "with-sessions: a header alist as the response"
  (let* ((app (with-sessions (lambda (request body)
                               (session-set! "a" 1)
                               (values '((content-type text/plain)) "x"))
                             #:db db #:clock clock))
         (headers (call-with-values (lambda () (call app #f)) (lambda (response body) response))))
    (test-assert (string-prefix? "session=" (assq-ref headers 'set-cookie)))))

(test-group "session-set!"
  (test-assert "a procedure cannot be stored"
    (string-contains (error-text (lambda () (call (app-of db (lambda () (session-set! "f" car) "")) #f)))
                     "cannot store this value"))
  (test-equal "values round-trip" "(42 \"naïve \\x00\" sym #t (1 . 2) #(1 \"a\"))"
    (let* ((values '(42 "naïve \x00" sym #t (1 . 2) #(1 "a")))
           (id (cookie-id (response-of (app-of db (lambda () (session-set! "v" values) "")) #f))))
      (body-of (app-of db (lambda () (object->string (session-ref "v")))) id))))

;; The data of a row: `data->string' writes it, `string->data' reads it.
(define data->string (@@ (plucky web session) data->string))
(define string->data (@@ (plucky web session) string->data))
(define simple-data (@@ (plucky web session) simple-data))

(define-syntax-rule (test-data-round-trip data)
  (test-equal (object->string data) data (string->data (data->string data))))

(test-group "string->data"
  (test-data-round-trip '())
  (test-data-round-trip '(("user" . "ada")))
  (test-data-round-trip '(("user" . "ada") ("csrf" . "kjhsdfkjhsdkfjhskdj-_") ("n" . -42) ("ok" . #t) ("no" . #f)))
  (test-data-round-trip '(("quote\"d" . "back\\slash") ("line" . "a\nb") ("" . "")))
  (test-data-round-trip '(("naïve" . "λ ü") ("0" . 0) ("big" . 123456789012345678901234567890)))
  (test-data-round-trip '(("x" . 1.5) ("y" . 1/3) ("s" . sym) ("c" . #\a) ("l" 1 "a") ("v" . #(1 "b"))))
  (test-data-round-trip '((sym . "a") (1 . 2) ("a" . "b")))
  (test-equal "the usual shape is read without read"
    '(("user" . "ada") ("n" . -7) ("t" . #t))
    (simple-data "((\"user\" . \"ada\") (\"n\" . -7) (\"t\" . #t))"))
  (test-equal "the rest is left to read" #f
    (simple-data "((\"a\" . \"b\\\"c\"))"))
  (test-assert "random data reads back as written"
    (let ((state (seed->random-state 14)))
      (define (random-string)
        (list->string (map (lambda (_) (string-ref "ab \"\\\n.()#-1é" (random 13 state)))
                           (iota (random 6 state)))))
      (define (random-value)
        (case (random 5 state)
          ((0) (random-string))
          ((1) (- (random 2000 state) 1000))
          ((2) (= 0 (random 2 state)))
          ((3) (list (random-string)))
          (else (string->symbol (string-append "s" (number->string (random 99 state)))))))
      (every (lambda (_)
               (let ((data (map (lambda (_) (cons (random-string) (random-value)))
                                (iota (random 4 state)))))
                 (equal? data (string->data (data->string data)))))
             (iota 2000))))
  (test-equal "text that is not data reads as no data"
    '(() () () ())
    (map string->data '("((\"a\" . " "((\"a\" . 1)" "(\"a\" . 1)" "#<procedure>"))))

(test-group "session-remove!"
  (let* ((id (cookie-id (response-of (app-of db (lambda () (session-set! "a" 1) (session-set! "b" 2) "")) #f))))
    (body-of (app-of db (lambda () (session-remove! "a") "")) id)
    (test-equal "(#f 2)" (body-of (app-of db (lambda () (object->string (list (session-ref "a") (session-ref "b"))))) id))))

(test-group "session-ref"
  (test-assert "outside with-sessions, a message that says so"
    (string-contains (error-text (lambda () (session-ref "user"))) "not inside with-sessions")))

(test-group "purge-expired-sessions!"
  (let ((db (fresh-db "purge.db")))
    (prepare-session-database! db)
    (let ((app (app-of db (lambda () (session-set! "a" 1) "") #:max-age 100)))
      (call app #f)
      (call app #f)
      (test-equal 0 (purge-expired-sessions! db #:now (+ now 99)))
      (test-equal 2 (purge-expired-sessions! db #:now (+ now 100)))
      (test-equal 0 (count-rows db)))))

(define (worker . args)
  ;; -> an input pipe from a session-worker process with ARGS
  (apply open-pipe* OPEN_READ "guile" "-L" "." "-C" "build" "tests/lib/session-worker.scm" args))

(define (worker-output port)
  (let ((text (get-string-all port)))
    (list text (status:exit-val (close-pipe port)))))

(test-group "two processes on one database"
  (let* ((path (string-append directory "/shared.db"))
         (id (car (worker-output (worker path "create" "user" "ada")))))
    (test-equal "a session made by one process is read by another" '("\"ada\"" 0)
      (worker-output (worker path "read" id "user")))
    (let* ((n 150)
           (a (worker path "hammer" (number->string n) "a"))
           (b (worker path "hammer" (number->string n) "b")))
      ;; Both run at once: each makes, reads back and changes N sessions.
      (test-equal "process a: every session its own, no busy error" (list (format #f "ok ~a" n) 0)
        (worker-output a))
      (test-equal "process b likewise" (list (format #f "ok ~a" n) 0) (worker-output b))
      (let ((db (sqlite-open path)))
        (test-equal "every session stored" (+ 1 (* 2 n)) (count-rows db))
        (sqlite-close db)))))


;;; Through a real server with two workers: a session made on one is
;;; seen by the other, and after logout its cookie opens nothing on
;;; either.
(define (server-app request body)
  (let ((path (uri-path (request-uri request)))
        (pid (number->string (getpid))))
    (values (build-response #:headers '((content-type text/plain)))
            (cond
             ((string=? path "/form") (csrf-token))
             ((string=? path "/login")
              (session-regenerate!)
              (session-set! "user" "ada")
              "in")
             ((string=? path "/logout") (session-destroy!) "out")
             (else (string-append (or (session-ref "user") "nobody") " " pid))))))

;; -> (code body set-cookie) of one request on a new connection
(define* (exchange port method path #:key cookie token)
  (with-client port
    (lambda (client)
      (client-send! client (request-text path #:method method
                                         #:headers (append (if cookie (list (string-append "Cookie: " cookie)) '())
                                                           (if token (list (string-append "X-CSRF-Token: " token)) '()))
                                         #:body (and (string=? method "POST") "")))
      (let-values (((response body) (client-read-response client)))
        (list (and response (response-code response))
              (and body (utf8->string body))
              (and response
                   (let ((header (assq-ref (response-headers response) 'set-cookie)))
                     (and header (car (string-split header #\;))))))))))

(test-group "with-sessions: two workers of a real server share the sessions"
  (let* ((path (string-append directory "/server.db"))
         (server (start-server (with-sessions (with-csrf server-app)
                                              #:db (lambda () (sqlite-open path)))
                               #:workers 2))
         (port (server-port server)))
    (dynamic-wind
      (lambda () #t)
      (lambda ()
        (let* ((form (exchange port "GET" "/form"))
               (anonymous (caddr form))
               (token (cadr form))
               (login (exchange port "POST" "/login" #:cookie anonymous #:token token))
               (cookie (caddr login)))
          (test-equal "the login is accepted" 200 (car login))
          (test-assert "with a new id" (and cookie (not (equal? cookie anonymous))))
          (test-equal "a POST without the token: 403" 403
            (car (exchange port "POST" "/login" #:cookie cookie)))
          (let ((answers (map (lambda (i) (cadr (exchange port "GET" "/whoami" #:cookie cookie))) (iota 24))))
            (test-assert "every request sees the user"
              (every (lambda (answer) (string-prefix? "ada " answer)) answers))
            (test-equal "from both workers" 2
              (length (delete-duplicates (map (lambda (answer) (cadr (string-split answer #\space))) answers)))))
          (test-equal "the planted anonymous id opens nothing" "nobody"
            (car (string-split (cadr (exchange port "GET" "/whoami" #:cookie anonymous)) #\space)))
          (test-equal "logout" '(200 "out" "session=")
            (exchange port "POST" "/logout" #:cookie cookie #:token token))
          (test-assert "the logged-out cookie, replayed, opens nothing on either worker"
            (every (lambda (i)
                     (string-prefix? "nobody " (cadr (exchange port "GET" "/whoami" #:cookie cookie))))
                   (iota 12)))))
      (lambda () (stop-server server)))))

(system* "rm" "-rf" directory)

(test-group "with-sessions: a mounted app's cookie is for its prefix"
  (define (mounted-under prefix path)
    ;; -> the Set-Cookie of LOGIN mounted at PREFIX, for a request of PATH
    (let ((site (router-handler (make-router (list (mount prefix login))))))
      (call-with-values
          (lambda () (site (build-request (string->uri (string-append "http://localhost" path)))
                           #f))
        (lambda (response body) (set-cookie-of response)))))
  (test-assert "/news: Path=/news/"
    (string-contains (mounted-under "/news" "/news/login") "; Path=/news/;"))
  (test-assert "/a/b: Path=/a/b/"
    (string-contains (mounted-under "/a/b" "/a/b/") "; Path=/a/b/;"))
  (test-assert "#:path given: that path"
    (string-contains (set-cookie-of (response-of (app-of db (lambda () (session-set! "x" 1) "")
                                                         #:path "/elsewhere/")
                                                 #f))
                     "; Path=/elsewhere/;")))

(test-end "web/session")
