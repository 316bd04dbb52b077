;;; (plucky web session) --- server-side sessions in the app's SQLite database, or a store

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A session is a small alist of the app's data ("user" -> 42, the CSRF
;;; token, a flash message) kept on the server, in a table of the app's
;;; SQLite database, and found again through a cookie that holds nothing
;;; but a random id.  The database is the one place every worker process
;;; reads and writes, so a visitor's next request may land on any worker.
;;;
;;;   (define db (sqlite-open "var/app.db"))   ; at load: once per worker
;;;   (define app (with-sessions handler #:db db))
;;;
;;;   ;; inside HANDLER, for the request being handled:
;;;   (session-ref "user")            -> the value, or #f
;;;   (session-set! "user" 42)        creates the session if need be
;;;   (session-regenerate!)           a new id for the same data: on login
;;;   (session-destroy!)              on logout
;;;
;;; The current session is a parameter, `current-session', that
;;; `with-sessions' binds around the handler: the procedures above need
;;; no argument, so helpers deep in the page code (the CSRF field of a
;;; form) reach it without every handler passing it down.  Outside
;;; `with-sessions' they raise an error that says so.
;;;
;;; A request flows like this.  `with-sessions' reads the cookie
;;; (default name "session"), decodes the 128-bit id, and looks up the
;;; row whose key is SHA-256 of the id.  A row past its absolute expiry
;;; (created + MAX-AGE) or idle for IDLE-TIMEOUT seconds is deleted and
;;; the request has no session, like one with an unknown id or a
;;; malformed cookie; the response then tells the browser to drop the
;;; cookie.  The handler runs.  Then, in this order: the old row is
;;; deleted if the handler destroyed the session or gave it a new id; a
;;; new row is inserted for a new id, and a Set-Cookie sent; otherwise
;;; changed data is written back, or, if the row was last marked as seen
;;; more than TOUCH-INTERVAL seconds ago, its time is.  A session is made
;;; only when the handler stores something, so a visitor who only reads
;;; pages costs one indexed read and no write.  A handler that raises
;;; saves nothing.
;;;
;;; Why the id is stored hashed: the table then holds nothing that opens
;;; a session.  A copy of the database (a backup, a file left readable,
;;; an SQL injection that can only read) does not let its reader log in
;;; as anyone; the cost is one SHA-256 of 16 bytes a request.  No salt or
;;; slow hash is needed: the id is 128 random bits, not a password.  The
;;; lookup by hash is an ordinary index search, not a constant-time
;;; comparison, and need not be: what its timing could leak is a prefix
;;; of a SHA-256, which brings no id closer.
;;;
;;; Why 128 bits from libgcrypt's CSPRNG: OWASP's floor for session ids
;;; is 64 bits of entropy; 128 put guessing out of reach even for an
;;; attacker who can try a billion ids a second for years.
;;;
;;; Where the rows live is a store: a record of procedures
;;; (`make-session-store') that load, insert, update and delete them.
;;; #:db makes the SQLite one below; #:store takes another, such as the
;;; PostgreSQL store of (plucky db postgresql) (`pg-session-store'),
;;; which every host of a site shares.  The store sees only the hash of
;;; an id and the data as text.
;;;
;;; Concurrency.  `prepare-session-database!' (which `with-sessions'
;;; calls) puts the database in WAL mode, so readers never wait for a
;;; writer, and sets a busy timeout on the connection, so a writer waits
;;; for another process's write instead of failing.  Two requests of one
;;; visitor handled at once by two workers each write the data they
;;; changed: the last write wins.  Data is kept as the text `write'
;;; makes; only strings, numbers, symbols, booleans, characters, lists
;;; and vectors of them can be stored.  Each worker needs its own
;;; connection, as an SQLite connection must not cross a fork: an app
;;; that `plucky serve' runs loads in each worker after the fork, so a
;;; `sqlite-open' at its top level is right; a handler made before
;;; calling `run-server' with several workers gives #:db a procedure
;;; that opens the database, called once in each process.
;;;
;;; Code:

(define-module (plucky web session)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module (sqlite3)
  #:use-module (plucky web crypto)
  #:use-module (plucky web cookies)
  #:use-module ((plucky web router) #:select (request-mount-prefix))
  #:export (with-sessions
            session-middleware
            current-session
            session-ref
            session-set!
            session-remove!
            session-regenerate!
            session-destroy!
            session-active?
            make-session-store
            session-store?
            sqlite-session-store
            prepare-session-database!
            purge-expired-sessions!))


;;;
;;; The table
;;;

(define (run db sql . args)
  ;; -> the first row of SQL with ARGS bound, a vector, or #f.  The
  ;; statement is reset at once: one left stepped would hold its read
  ;; transaction open, and this connection would go on seeing the
  ;; database as it was then.
  (let ((statement (sqlite-prepare db sql #:cache? #t)))
    (dynamic-wind
      (lambda () #t)
      (lambda ()
        (apply sqlite-bind-arguments statement args)
        (sqlite-step statement))
      (lambda () (sqlite-reset statement)))))

(define (call-with-write-transaction db thunk)
  ;; BEGIN IMMEDIATE takes the write lock first, waiting under the busy
  ;; timeout; a deferred transaction that reads then writes could fail
  ;; at once with SQLITE_BUSY instead.
  (sqlite-exec db "BEGIN IMMEDIATE")
  (with-exception-handler
      (lambda (e)
        (false-if-exception (sqlite-exec db "ROLLBACK"))
        (raise-exception e))
    (lambda ()
      (thunk)
      (sqlite-exec db "COMMIT"))))

(define* (prepare-session-database! db #:key (busy-timeout 5000))
  "Return DB, an open (sqlite3) database, after putting it in WAL mode,
setting its busy timeout to BUSY-TIMEOUT milliseconds and creating the
table plucky_sessions if it is not there.  `with-sessions' calls it."
  (sqlite-busy-timeout db busy-timeout)
  (sqlite-exec db "PRAGMA journal_mode=WAL")
  (sqlite-exec db "CREATE TABLE IF NOT EXISTS plucky_sessions (
                     id_hash BLOB PRIMARY KEY,  -- SHA-256 of the id
                     data TEXT NOT NULL,        -- the alist, as written
                     created INTEGER NOT NULL,  -- seconds since the epoch
                     seen INTEGER NOT NULL,     -- last marked as seen
                     expires INTEGER NOT NULL   -- created + max-age
                   ) WITHOUT ROWID")
  db)


;;;
;;; The session of a request
;;;

(define-record-type <session-store>
  (%make-session-store prepare load insert! update! remove! replace! purge!)
  session-store?
  (prepare session-store-prepare)       ; -> unspecified, at each request first
  (load session-store-load)             ; HASH -> #(DATA CREATED SEEN EXPIRES), or #f
  (insert! session-store-insert!)       ; HASH DATA CREATED EXPIRES: a new row, seen CREATED
  (update! session-store-update!)       ; HASH DATA-OR-#f SEEN: the data (unless #f) and seen
  (remove! session-store-remove!)       ; HASH: the row deleted
  (replace! session-store-replace!)     ; OLD NEW DATA CREATED EXPIRES: remove! OLD, insert! NEW, atomically
  (purge! session-store-purge!))        ; NOW IDLE-CUTOFF -> rows deleted: expires <= NOW or seen <= CUTOFF

(define* (make-session-store #:key (prepare (lambda () #t)) load insert! update! remove!
                             replace! purge!)
  "Return a session store: where `with-sessions' keeps its rows, as seven
procedures.  (PREPARE) is called at the start of each request (it may
open this process's connection, or make the table, the first time).  Each row is keyed by HASH, the SHA-256 of the session's id
(a bytevector), and holds DATA (a string), CREATED, SEEN and EXPIRES
(seconds since the epoch).  (LOAD HASH) returns #(DATA CREATED SEEN
EXPIRES) or #f; (INSERT! HASH DATA CREATED EXPIRES) adds a row seen at
CREATED; (UPDATE! HASH DATA SEEN) stores DATA (unless it is #f) and
SEEN; (REMOVE! HASH) deletes the row; (REPLACE! OLD NEW DATA CREATED
EXPIRES) deletes OLD and inserts NEW in one transaction; (PURGE! NOW
CUTOFF) deletes the rows that expire at or before NOW or were last seen
at or before CUTOFF, and returns how many."
  (%make-session-store prepare load insert! update! remove! replace! purge!))

(define (sqlite-session-store db)
  "Return the session store (see `make-session-store') of the table
plucky_sessions in DB: an open (sqlite3) database, prepared by
`prepare-session-database!' now, or a procedure of no argument that
opens one, then called once in each process (an SQLite connection must
not cross a fork) and prepared."
  (let ((connect (cond
                  ((sqlite-db? db) (prepare-session-database! db) (lambda () db))
                  ((procedure? db) (per-process-connection db))
                  (else
                   (error "with-sessions: #:db is neither an open sqlite3 database nor a procedure that opens one:"
                          db)))))
    (make-session-store
     #:prepare connect
     #:load (lambda (hash)
              (run (connect) "SELECT data, created, seen, expires FROM plucky_sessions WHERE id_hash = ?"
                   hash))
     #:insert! (lambda (hash data created expires)
                 (run (connect) "INSERT INTO plucky_sessions (id_hash, data, created, seen, expires)
                                 VALUES (?, ?, ?, ?, ?)" hash data created created expires))
     #:update! (lambda (hash data seen)
                 (if data
                     (run (connect) "UPDATE plucky_sessions SET data = ?, seen = ? WHERE id_hash = ?"
                          data seen hash)
                     (run (connect) "UPDATE plucky_sessions SET seen = ? WHERE id_hash = ?" seen hash)))
     #:remove! (lambda (hash)
                 (run (connect) "DELETE FROM plucky_sessions WHERE id_hash = ?" hash))
     #:replace! (lambda (old new data created expires)
                  (let ((db (connect)))
                    (call-with-write-transaction db
                      (lambda ()
                        (run db "DELETE FROM plucky_sessions WHERE id_hash = ?" old)
                        (run db "INSERT INTO plucky_sessions (id_hash, data, created, seen, expires)
                                 VALUES (?, ?, ?, ?, ?)" new data created created expires)))))
     #:purge! (lambda (now cutoff)
                (let ((db (connect)))
                  (run db "DELETE FROM plucky_sessions WHERE expires <= ? OR seen <= ?" now cutoff)
                  (vector-ref (run db "SELECT changes()") 0))))))

(define* (purge-expired-sessions! db #:key (idle-timeout #f) (now (current-time)))
  "Return the number of sessions deleted from DB (an open (sqlite3)
database, or a session store): those past their expiry at NOW, and, if
IDLE-TIMEOUT (seconds) is given, those not seen for that long.
`with-sessions' refuses them anyway; this reclaims their rows, from
time to time."
  ((session-store-purge! (if (session-store? db) db (sqlite-session-store db)))
   now (if idle-timeout (- now idle-timeout) -1)))

(define-record-type <store>
  (make-store backend cookie-name max-age idle-timeout touch-interval cookie-options)
  store?
  (backend store-backend)                ; <session-store>
  (cookie-name store-cookie-name)
  (max-age store-max-age)                ; seconds from creation
  (idle-timeout store-idle-timeout)      ; seconds since last seen
  (touch-interval store-touch-interval)  ; seconds between writes of `seen'
  (cookie-options store-cookie-options)) ; keywords for set-cookie

(define-record-type <session>
  (make-session store row-hash data created seen refused?)
  session?
  (store session-store)
  (row-hash session-row-hash)            ; key of the row loaded, or #f
  (new-id session-new-id set-session-new-id!) ; a fresh id to store, or #f
  (data session-data set-session-data!)  ; ((key . value) ...)
  (created session-created)
  (seen session-seen)
  (dirty? session-dirty? set-session-dirty!)
  (destroyed? session-destroyed? set-session-destroyed!)
  (refused? session-refused?))           ; a cookie came that opened nothing

(define current-session
  ;; The <session> of the request being handled, inside `with-sessions'.
  (make-parameter #f))

(define (the-session who)
  (or (current-session)
      (error (string-append (symbol->string who) ": no session here (the handler is not inside with-sessions)"))))

(define id-bytes 16)                    ; 128 bits

(define (fresh-id)
  (bytes->base64url (random-bytes id-bytes)))

(define (id-hash id)
  ;; -> the row key of ID, a cookie's text, or #f if it is not an id
  (let ((bytes (base64url->bytes id)))
    (and bytes (= id-bytes (bytevector-length bytes)) (sha256 bytes))))

(define (load-session store request now)
  (let* ((cookie (request-cookie request (store-cookie-name store)))
         (hash (and cookie (id-hash cookie)))
         (row (and hash ((session-store-load (store-backend store)) hash))))
    (cond
     ((not row) (make-session store #f '() now now (and cookie #t)))
     ((or (>= now (vector-ref row 3))
          (>= (- now (vector-ref row 2)) (store-idle-timeout store)))
      ((session-store-remove! (store-backend store)) hash)
      (make-session store #f '() now now #t))
     (else
      (make-session store hash (string->data (vector-ref row 0)) (vector-ref row 1)
                    (vector-ref row 2) #f)))))

(define (live? session)
  (or (session-new-id session)
      (and (session-row-hash session) (not (session-destroyed? session)))))

(define (save-session! session now request)
  ;; -> the headers to add to the response to REQUEST
  (let* ((store (session-store session))
         (backend (store-backend store))
         (hash (session-row-hash session))
         (id (session-new-id session))
         ;; made only for a response that sets or drops the cookie
         (options (lambda () (cookie-options store request))))
    (cond
     ((and hash id)
      ((session-store-replace! backend) hash (id-hash id) (data->string (session-data session))
       now (+ now (store-max-age store))))
     (id
      ((session-store-insert! backend) (id-hash id) (data->string (session-data session))
       now (+ now (store-max-age store))))
     ((not hash))
     ((session-destroyed? session)
      ((session-store-remove! backend) hash))
     ((session-dirty? session)
      ((session-store-update! backend) hash (data->string (session-data session)) now))
     ((>= (- now (session-seen session)) (store-touch-interval store))
      ((session-store-update! backend) hash #f now)))
    (cond
     (id (list (apply set-cookie (store-cookie-name store) id #:max-age (store-max-age store)
                      (options))))
     ((or (session-destroyed? session) (session-refused? session))
      (list (delete-cookie (store-cookie-name store) #:path (option (options) #:path)
                           #:secure? (option (options) #:secure?))))
     (else '()))))

(define (cookie-options store request)
  ;; -> the keywords for set-cookie: the store's, the path of its
  ;; cookie (#f) made the prefix REQUEST's app is mounted under
  (let ((options (store-cookie-options store)))
    (if (option options #:path)
        options
        (let lp ((options options))
          ;; a copy whose #:path is given (set-cookie takes the last
          ;; of two)
          (if (eq? (car options) #:path)
              (cons* #:path (string-append (request-mount-prefix request) "/") (cddr options))
              (cons* (car options) (cadr options) (lp (cddr options))))))))

(define (option options keyword)
  ;; -> the value of KEYWORD in OPTIONS, a keyword list
  (cadr (memq keyword options)))


;;;
;;; Data
;;;

(define (storable? value)
  (or (string? value) (symbol? value) (boolean? value) (char? value) (null? value)
      (and (number? value) (real? value))
      (and (pair? value) (storable? (car value)) (storable? (cdr value)))
      (and (vector? value) (vector-every storable? value))))

(define (vector-every pred v)
  (let loop ((i 0))
    (or (= i (vector-length v))
        (and (pred (vector-ref v i)) (loop (+ i 1))))))

(define (data->string data)
  (object->string data write))

(define (string->data text)
  ;; The text was written by `data->string'; anything else (a row edited
  ;; by hand) reads as no data rather than an error on every request.
  (or (simple-data text)
      (let ((data (false-if-exception (call-with-input-string text read))))
        (if (and (list? data) (storable? data)) data '()))))

;; Most sessions hold a few strings under string keys (the user's name,
;; the CSRF secret), and `read', through a string port, costs more than
;; the rest of loading the row (bench/news, the front page logged in).
;; `simple-data' reads that common shape itself, exactly as `read' would,
;; and gives up on anything else, which `read' then reads.

(define (simple-data text)
  ;; -> the alist TEXT writes if it is a list of pairs whose cars are
  ;; strings and whose cdrs are strings, decimal integers or booleans,
  ;; every string free of backslashes, spaced as `write' spaces; else #f
  (let ((n (string-length text)))
    (define (char-at? i c)
      (and (< i n) (char=? (string-ref text i) c)))
    (define (simple-string i k)
      ;; the string starting at I -> (K string next-index), or #f
      (and (char-at? i #\")
           (let ((end (string-index text #\" (+ i 1))))
             (and end
                  (not (string-index text #\\ (+ i 1) end))
                  (k (substring text (+ i 1) end) (+ end 1))))))
    (define (simple-value i k)
      (cond
       ((char-at? i #\") (simple-string i k))
       ((char-at? i #\#)
        (cond ((char-at? (+ i 1) #\t) (k #t (+ i 2)))
              ((char-at? (+ i 1) #\f) (k #f (+ i 2)))
              (else #f)))
       (else
        (let* ((start (if (char-at? i #\-) (+ i 1) i))
               (end (let lp ((j start))
                      (if (and (< j n) (char-numeric? (string-ref text j))) (lp (+ j 1)) j))))
          (and (> end start)
               (char-at? end #\))
               (k (string->number (substring text i end)) end))))))
    (define (entries i)
      ;; the entries from I, just past "(" or a space -> a list, or #f
      (and (char-at? i #\()
           (simple-string
            (+ i 1)
            (lambda (key i)
              (and (char-at? i #\space) (char-at? (+ i 1) #\.) (char-at? (+ i 2) #\space)
                   (simple-value
                    (+ i 3)
                    (lambda (value i)
                      (and (char-at? i #\))
                           (cond
                            ((char-at? (+ i 1) #\space)
                             (let ((rest (entries (+ i 2))))
                               (and rest (cons (cons key value) rest))))
                            ((and (char-at? (+ i 1) #\)) (= (+ i 2) n))
                             (list (cons key value)))
                            (else #f))))))))))
    (cond
     ((string=? text "()") '())
     ((char-at? 0 #\() (entries 1))
     (else #f))))


;;;
;;; What a handler calls
;;;

(define* (session-ref key #:optional (default #f))
  "Return the value stored under KEY (compared with `equal?') in the
current request's session, or DEFAULT (#f) if there is none."
  (let ((entry (assoc key (session-data (the-session 'session-ref)))))
    (if entry (cdr entry) default)))

(define (session-set! key value)
  "Store VALUE under KEY in the current request's session, creating the
session (and its cookie) if the request has none.  VALUE must be made of
strings, numbers, symbols, booleans, characters, lists and vectors; the
change is saved when the handler returns."
  (let ((session (the-session 'session-set!)))
    (unless (storable? value)
      (error "session-set!: a session cannot store this value (only strings, numbers, symbols, booleans, characters, lists, vectors):"
             value))
    (unless (live? session)
      (set-session-new-id! session (fresh-id)))
    (set-session-data! session (cons (cons key value)
                                     (filter-out key (session-data session))))
    (set-session-dirty! session #t)))

(define (filter-out key data)
  (let loop ((data data))
    (cond ((null? data) '())
          ((equal? (caar data) key) (loop (cdr data)))
          (else (cons (car data) (loop (cdr data)))))))

(define (session-remove! key)
  "Remove KEY and its value from the current request's session."
  (let ((session (the-session 'session-remove!)))
    (when (assoc key (session-data session))
      (set-session-data! session (filter-out key (session-data session)))
      (set-session-dirty! session #t))))

(define (session-regenerate!)
  "Give the current request's session a new id, keeping its data, and
forget the old id: call it when the visitor logs in (or gains any
privilege), so that an id an attacker planted beforehand (session
fixation) opens nothing afterwards.  Creates the session if there is
none."
  (set-session-new-id! (the-session 'session-regenerate!) (fresh-id)))

(define (session-destroy!)
  "End the current request's session: its row is deleted, its data
dropped, and the browser told to forget the cookie.  The old cookie,
replayed, opens nothing.  A later `session-set!' in the same request
starts a new session."
  (let ((session (the-session 'session-destroy!)))
    (set-session-destroyed! session #t)
    (set-session-new-id! session #f)
    (set-session-data! session '())))

(define (session-active?)
  "Return #t if the current request has a session, found or made."
  (and (live? (the-session 'session-active?)) #t))


;;;
;;; The middleware
;;;

(define (per-process-connection open)
  ;; -> a procedure that returns the database (OPEN) opened, and
  ;; prepared, in the calling process: once per process, so that a
  ;; handler made before `run-server' forks its workers gives each worker
  ;; a connection of its own.
  (let ((pid #f) (db #f))
    (lambda ()
      (unless (eqv? pid (getpid))
        (set! db (prepare-session-database! (open)))
        (set! pid (getpid)))
      db)))

(define* (with-sessions handler #:key db store (cookie-name "session")
                        (max-age (* 14 24 3600)) (idle-timeout (* 2 24 3600))
                        (touch-interval 60) (path #f) (secure? (secure-cookies?))
                        (same-site 'lax) (clock current-time))
  "Return a handler that calls HANDLER with `current-session' bound to
the session of the request (see the commentary) and saves the session
after it, in STORE (see `make-session-store') or DB, adding the
Set-Cookie the response needs.  DB is an
open (sqlite3) database, or a procedure of no argument that opens one,
which is then called once in each process, at its first request: the
form for a handler made before `run-server' forks its workers, since an
SQLite connection must not cross a fork.  The cookie is COOKIE-NAME, for PATH
(default #f: the prefix the app is mounted under, see `mount' of (plucky
web router), then \"/\": \"/\" for an app that is not mounted), HttpOnly,
SameSite SAME-SITE, Secure if SECURE? (default: `secure-cookies?' now,
by default 'auto: Secure for each request that came over TLS).
A session lasts at most MAX-AGE seconds from its creation (default 14
days) and IDLE-TIMEOUT seconds from the last request that used it
(default 2 days; the time it was last seen is written at most once every
TOUCH-INTERVAL seconds).  CLOCK returns the time in seconds."
  (when (and store (not (session-store? store)))
    (error "with-sessions: #:store is not a session store (make-session-store):" store))
  (unless (cookie-name? cookie-name)
    (error "with-sessions: the cookie name is not a token:" cookie-name))
  (let ((store (make-store (or store (sqlite-session-store db))
                           cookie-name max-age idle-timeout touch-interval
                           (list #:path path #:secure? secure? #:same-site same-site))))
    (lambda (request body . state)
      ((session-store-prepare (store-backend store)))
      (let* ((now (clock))
             (session (load-session store request now)))
        (call-with-values
            (lambda ()
              (parameterize ((current-session session))
                (apply handler request body state)))
          (lambda (response body . state)
            (apply values
                   (response-with-headers response (save-session! session now request))
                   body state)))))))

(define (session-middleware . options)
  "Return a middleware (see (plucky web middleware)) that puts a handler
inside `with-sessions' with OPTIONS, its keywords: (wrap handler
(session-middleware #:db db)) is (with-sessions handler #:db db)."
  (lambda (handler)
    (apply with-sessions handler options)))

;;; (plucky web session) ends here
