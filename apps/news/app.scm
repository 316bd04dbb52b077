;;; (news app) --- the news site: requests in, pages out

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `make-news-app' returns the site's handler, made of the toolkit's
;;; pieces: a request goes through the sessions middleware (who is
;;; logged in), then the CSRF check (a POST must carry the session's
;;; token), then the router, whose routes (`news-routes') are data, to
;;; one of the procedures below; each reads the database through (news db), decides
;;; what the viewer may see and do, and returns a page from (news views)
;;; or a redirect.  Every field a user sends is checked before anything
;;; is stored, and a refusal redisplays the form with a message beside
;;; the field: nothing typed is lost.
;;;
;;; The site's state in a worker and its caches are (news site)'s.
;;;
;;; All links are relative, so the site works mounted under any prefix
;;; (the demo serves it at /news/).
;;;
;;; Code:

(define-module (news app)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-11)
  #:use-module (ice-9 match)
  #:use-module (ice-9 regex)
  #:use-module (rnrs bytevectors)
  #:use-module (web request)
  #:use-module (web response)
  #:use-module (web uri)
  #:use-module ((plucky server) #:select (current-request-peer current-request-scheme))
  #:use-module ((plucky web router) #:select (route mount make-router router-handler
                                              query-params query-ref request-mount-prefix))
  #:use-module ((plucky web middleware) #:select (wrap redirect))
  #:use-module (plucky web html)
  #:use-module ((plucky web timing) #:select (with-phase with-server-timing))
  #:use-module (plucky web forms)
  #:use-module (plucky web session)
  #:use-module (plucky web password)
  #:use-module (plucky web limit)
  ;; PostgreSQL's modules and the JSON feed's are loaded at their first
  ;; call: a site on SQLite never maps the first, and a worker asked for
  ;; no /items.json not the second.  Every collection scans the compiled
  ;; data of every module loaded (bench/demo-gc's ".go roots");
  ;; tests/apps/lazy.scm checks what the demo leaves out.
  #:autoload (plucky db postgresql) (make-pg-pool pg-unavailable-middleware)
  #:autoload (plucky db state) (pg-session-store pg-rate-limit-store)
  #:use-module ((plucky web csrf) #:select (csrf-token csrf-token-valid?
                                            csrf-middleware))
  #:use-module (news rank)
  #:use-module (news db)
  #:use-module (news site)
  #:use-module (news seed)
  #:use-module (news views)
  #:autoload (plucky web json) (json-response)
  #:use-module (news feeds)
  #:autoload (news json) (item->json items->json)
  #:export (make-news-app
            seed-news-db!))

;;; Limits on what users send, checked before anything is stored.

(define title-limit 80)               ; news.arc's title-limit*
(define url-limit 2000)
(define text-limit 10000)
(define about-limit 2000)
(define email-limit 254)
(define password-min 8)
(define stories-per-window 5)         ; per user or address…
(define comments-per-window 20)
(define rate-window (* 10 60))        ; …in ten minutes
(define login-failures 10)            ; failed logins per account and per address…
(define login-window (* 15 60))       ; …in fifteen minutes, then 429
(define duplicate-url-window (* 7 24 3600))  ; a url again within a week: a vote
(define name-limit 15)
(define key-limit 64)                 ; a form key's characters (the site's are 22)
(define excerpt-length 200)           ; characters of a refused value shown again

(define key-chars
  (string->char-set "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"))

(define (post-key request form)
  ;; -> the key a POST of a story or a comment carries (its form's field
  ;; "key", or for a script an Idempotency-Key header): a string, #f
  ;; when there is none (each such POST stores a row), or 'malformed
  (let ((key (or (param form "key")
                 (assq-ref (request-headers request) 'idempotency-key))))
    (cond ((not key) #f)
          ((and (string? key) (<= 1 (string-length key) key-limit)
                (string-every key-chars key))
           key)
          (else 'malformed))))

(define (malformed-key user)
  (html-status 400 (message-page #:user user #:csrf (csrf-token) #:title "Refused"
                                 #:message (format #f "The form's key is not one this \
site makes (at most ~a letters, digits, - and _). Please reload the page and try again."
                                                   key-limit))))

(define (comment-location comment)
  ;; where a comment's form leads once it is stored: the comment in its thread
  (format #f "item?id=~a#~a" (item-story comment) (item-id comment)))

(define (excerpt value limit)
  ;; -> what a refused form shows again of VALUE: all of it when it is
  ;; within LIMIT (nothing typed is lost), else its first characters.
  ;; A page never quotes back more than a limit's worth of what was
  ;; sent: a 10 MB comment is not a 10 MB answer.
  (if (and (string? value) (> (string-length value) limit))
      (string-append (substring value 0 (min limit excerpt-length)) "…")
      value))

;;; The database: one connection per process, opened at its first
;;; request (an SQLite connection must not cross a fork, and `plucky
;;; serve' loads the app in the master before forking the workers).

(define* (seed-news-db! location #:key (seed? #t) (size '()))
  "Create the news database at LOCATION (an SQLite file, or a
postgresql:// URL: see `open-news-db') if it is missing, apply its
migrations and, when SEED? and it has no user yet, seed it with
`seed-news!' (SIZE: its keywords #:users, #:stories, #:comments and
their numbers, default its own); close it again.  Two processes (or
hosts) starting on a
fresh database seed it once: the check and the seeding are one
transaction under the site's lock."
  (let ((db (open-news-db location)))
    (when seed?
      (call-with-exclusive-transaction db
        (lambda ()
          (when (zero? (user-count db))
            ;; The seeded users' password is random and thrown away:
            ;; they exist to have written the site, not to log in.
            (apply seed-news! db #:password-hash (hash-password (random-password))
                   size)))))
    (close-news-db db)))

(define (random-password)
  (let ((state (random-state-from-platform)))
    (list->string (map (lambda (_) (integer->char (+ 97 (random 26 state))))
                       (iota 24)))))

(define (page-path path page)
  ;; PATH ("newest", "threads?id=ann") for its page number PAGE
  (cond ((= page 1) path)
        ((string-index path #\?) (format #f "~a&p=~a" path page))
        (else (format #f "~a?p=~a" path page))))

(define (page-number request)
  (or (int-param (query-params request) "p") 1))

(define (hidden-by site user)
  ;; -> the ids of the stories USER hid, '() for nobody
  (if user (hidden-ids (site-db site) (user-name user)) '()))

(define (without-hidden items hidden)
  (if (null? hidden)
      items
      (remove (lambda (item) (memv (item-id item) hidden)) items)))

(define* (story-list site request user label title items-of-page path #:key hidden?)
  ;; ITEMS-OF-PAGE: page number -> (values items more?).  HIDDEN?: the
  ;; page lists the stories USER hid (each with "unhide").
  (let ((page (page-number request)))
    (let-values (((items more?) (items-of-page page)))
      (html (story-list-page
             #:items items #:user user
             #:voted (voted-on (site-db site) user items)
             #:csrf (if user (form-token) "")
             #:now (now) #:title title #:label label
             #:start (+ 1 (* (- page 1) per-page))
             #:whence (page-path path page)
             #:more (and more? (page-path path (+ page 1)))
             #:hidden? hidden?)))))

(define (front-page site request body)
  (let ((user (current-user site)))
    (story-list site request user #f #f
                (lambda (page)
                  (page-slice (without-hidden (ranked site) (hidden-by site user)) page))
                "news")))

(define* (db-list-page site request label title path fetch #:key (hidden? #f))
  ;; A list of stories FETCH gives, (FETCH count offset), without those
  ;; the viewer hid (fetched as many more), unless HIDDEN?: the list of
  ;; those.
  (let* ((user (current-user site))
         (hidden (if hidden? '() (hidden-by site user))))
    (story-list site request user label title
                (lambda (page)
                  (let ((items (without-hidden
                                (fetch (+ per-page 1 (length hidden)) (* (- page 1) per-page))
                                hidden)))
                    (if (> (length items) per-page)
                        (values (list-head items per-page) #t)
                        (values items #f))))
                path #:hidden? hidden?)))

(define (show site request body)
  (db-list-page site request "show" "Show" "show"
                (lambda (n offset) (show-stories (site-db site) n offset))))

(define (from site request body)
  ;; the stories of one site: from?site=example.org
  (let ((domain (param (query-params request) "site")))
    (if (and domain (< 0 (string-length domain) 254)
             (not (string-any char-set:whitespace domain)))
        (db-list-page site request #f (string-append "Stories from " domain)
                      (string-append "from?site=" (uri-encode domain))
                      (lambda (n offset) (stories-from (site-db site) domain site-of n offset)))
        (not-found site request "No such site."))))

(define (user-stories what path fetch)
  ;; the handler of a list of the stories of the user ?id= names: WHAT
  ;; they are ("favorites"), at PATH, (FETCH db name count offset)
  (lambda (site request body)
    (let* ((name (param (query-params request) "id"))
           (subject (user-ref (site-db site) name)))
      (if subject
          (db-list-page site request #f (string-append name "'s " what)
                        (string-append path "?id=" (uri-encode name))
                        (lambda (n offset) (fetch (site-db site) name n offset)))
          (not-found site request "No such user.")))))

(define favorites (user-stories "favorites" "favorites" favorites-of))
(define submitted (user-stories "submissions" "submitted" stories-by))

(define (hidden site request body)
  (let ((user (current-user site)))
    (if user
        (db-list-page site request #f "Hidden" "hidden"
                      (lambda (n offset) (hidden-stories (site-db site) (user-name user) n offset))
                      #:hidden? #t)
        (redirect "login?goto=hidden"))))

(define (leaders-list site request body)
  (let ((user (current-user site)))
    (html (leaders-page #:users (leaders (site-db site)) #:user user
                        #:csrf (if user (form-token) "")))))

(define (newest site request body)
  (db-list-page site request "new" "New" "newest"
                (lambda (n offset) (newest-stories (site-db site) n offset))))

(define (ask site request body)
  (db-list-page site request "ask" "Ask" "ask"
                (lambda (n offset) (ask-stories (site-db site) n offset))))

(define (best site request body)
  (db-list-page site request "best" "Best" "best"
                (lambda (n offset) (best-stories (site-db site) n offset))))

(define (comment-list site request label title path fetch)
  ;; a page of the comments (FETCH count offset) gives, with "More"
  (let* ((db (site-db site))
         (user (current-user site))
         (page (page-number request))
         (fetched (fetch (+ per-page 1) (* (- page 1) per-page)))
         (more? (> (length fetched) per-page))
         (items (if more? (list-head fetched per-page) fetched))
         (stories (delete-duplicates
                   (filter-map (lambda (c) (let ((s (item-ref db (item-story c))))
                                             (and s (cons (item-id s) s))))
                               items))))
    (html (comments-page #:items items #:stories stories #:user user
                         #:voted (voted-on db user items)
                         #:csrf (if user (form-token) "")
                         #:now (now) #:title title #:label label
                         #:more (and more? (page-path path (+ page 1)))))))

(define (newcomments site request body)
  (comment-list site request "comments" "New Comments" "newcomments"
                (lambda (n offset) (newest-comments (site-db site) n offset))))

(define (threads site request body)
  (let* ((name (param (query-params request) "id"))
         (subject (user-ref (site-db site) name)))
    (if subject
        (comment-list site request "threads" (string-append name "'s comments")
                      (string-append "threads?id=" (uri-encode name))
                      (lambda (n offset) (comments-by (site-db site) name n offset)))
        (not-found site request "No such user."))))

(define (not-found site request message)
  (html-status 404 (message-page #:user (current-user site) #:csrf (csrf-or-empty site)
                                 #:title "Not found" #:message message)))

(define* (item-view site request #:key item error text (code 200) key)
  (let* ((db (site-db site))
         (user (current-user site))
         (story (if (eq? (item-type item) 'story) (item-id item) (item-story item)))
         (comments (cached-thread site story))
         (tree (comment-tree comments (item-id item) (now))))
    (html-status code
                 (item-page #:item item #:tree tree #:user user
                            #:voted (voted-on db user (cons item comments))
                            #:faved (if user
                                        (favorite-ids db (user-name user) (list (item-id item)))
                                        '())
                            #:parent-author (let ((parent (and (item-parent item)
                                                               (item-ref db (item-parent item)))))
                                              (and parent (item-by parent)))
                            #:csrf (if user (form-token) "")
                            #:post-key (and user (or key (form-key)))
                            #:now (now) #:error error #:text text))))

(define (item site request body)
  (let ((it (item-ref (site-db site) (int-param (query-params request) "id"))))
    (if (and it (not (item-deleted? it)))
        (item-view site request #:item it)
        (not-found site request "No such item."))))

(define (user-profile site request body)
  (let ((subject (user-ref (site-db site) (param (query-params request) "id")))
        (user (current-user site)))
    (if subject
        (html (user-page #:subject subject #:user user
                         #:csrf (if user (form-token) "") #:now (now)))
        (not-found site request "No such user."))))

;;; Accounts.

(define name-chars (string->char-set "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"))

(define (check-text value limit what)
  ;; -> #f when VALUE is acceptable text, else the message to show.
  (cond
   ((not value) #f)
   ((> (string-length value) limit)
    (format #f "Please make the ~a at most ~a characters." what limit))
   ((string-index value #\nul) (format #f "The ~a cannot contain a NUL character." what))
   ((string-index value #\xFFFD)
    (format #f "The ~a is not valid UTF-8 text." what))
   (else #f)))

(define (login-form site request body)
  (html (login-page #:csrf (csrf-token)
                    #:goto (safe-whence (param (query-params request) "goto")))))

(define (login-keys request name)
  ;; -> what failed logins count by: the account (names are unique
  ;; whatever their case) and the client's address
  (list (string-append "account:" (string-downcase name))
        (string-append "address:" ((client-address) request))))

(define (login-wait site keys)
  ;; -> the seconds until a login may be tried again under any of KEYS,
  ;; or #f when it may be now
  (fold (lambda (key wait)
          (let ((w (rate-limit-retry-after (site-logins site) key)))
            (if (and w (or (not wait) (> w wait))) w wait)))
        #f keys))

(define (login site request body)
  (let* ((db (site-db site))
         (form (form-params request body))
         (name (or (param form "login-name") ""))
         (password (or (param form "login-password") ""))
         (keys (login-keys request (excerpt name 64)))
         (wait (login-wait site keys))
         (hash (and (< (string-length name) 64) (user-password-hash db name))))
    (cond
     ;; Past the failures allowed, the password is not even tried: a
     ;; guesser learns nothing more until the window has moved on.
     (wait
      (values (too-many-requests wait #:content-type '(text/html (charset . "utf-8")))
              (html->bytevector
               (login-page #:csrf (csrf-token)
                           #:message (format #f "Too many failed logins: try again in ~a minutes."
                                             (ceiling-quotient wait 60))
                           #:values `(("login-name" . ,(excerpt name name-limit)))))))
     ;; A name without an account is verified too, against a dummy hash
     ;; (HASH #f): the time of a refusal tells no one which names exist.
     ((and (verify-password hash password) hash)
      (when (password-needs-rehash? hash)
        (set-user-password-hash! db name (hash-password password)))
      (rate-limit-clear! (site-logins site) (car keys))
      ;; A new session id at login: one planted before cannot follow.
      (session-regenerate!)
      (session-set! "user" name)
      (redirect (safe-whence (param form "goto"))))
     (else
      (for-each (lambda (key) (rate-limit-hit! (site-logins site) key)) keys)
      (html-status 403 (login-page #:csrf (csrf-token)
                                   #:message "Bad login."
                                   #:values `(("login-name" . ,(excerpt name name-limit)))))))))

(define (ceiling-quotient n d)
  (quotient (+ n d -1) d))

(define (signup site request body)
  (let* ((db (site-db site))
         (form (form-params request body))
         (name (string-trim-both (or (param form "name") "")))
         (password (or (param form "password") ""))
         (errors
          (filter
           cdr
           `(("name" . ,(cond
                         ((not (<= 2 (string-length name) name-limit))
                          "Usernames are 2 to 15 characters.")
                         ((not (string-every name-chars name))
                          "Usernames can only contain letters, digits, dashes and underscores.")
                         (else #f)))
             ("password" . ,(password-error password))))))
    (cond
     ((pair? errors)
      (html-status 400 (login-page #:csrf (csrf-token) #:errors errors
                                   #:values `(("name" . ,(excerpt name name-limit))))))
     ((create-user! db name (hash-password password) (now))
      (session-regenerate!)
      (session-set! "user" name)
      (redirect "news"))
     ((signup-replayed? site request db name password)
      ;; The same form sent again (its answer lost, a reload, a retry
      ;; through the balancer): the account it made is this one, so the
      ;; answer is the first one's, not "taken".
      (session-regenerate!)
      (session-set! "user" name)
      (redirect "news"))
     (else
      (html-status 409 (login-page #:csrf (csrf-token)
                                   #:errors '(("name" . "That username is taken."))
                                   #:values `(("name" . ,(excerpt name name-limit)))))))))

(define (signup-replayed? site request db name password)
  "Return true when the account NAME exists with PASSWORD: a signup sent
twice.  That is a login, so it is limited as one: past the failures
allowed it is not tried, and a wrong password counts as a failure
(signup must not be a way around login's limits)."
  (let ((keys (login-keys request name))
        (hash (user-password-hash db name)))
    (cond
     ((or (not hash) (login-wait site keys)) #f)
     ((verify-password hash password)
      (rate-limit-clear! (site-logins site) (car keys))
      #t)
     (else
      (for-each (lambda (key) (rate-limit-hit! (site-logins site) key)) keys)
      #f))))

(define (logout site request body)
  (session-destroy!)
  (redirect "news"))

(define (password-error password)
  ;; -> why PASSWORD cannot be one, or #f
  (cond
   ((< (string-length password) password-min)
    (format #f "Passwords are at least ~a characters." password-min))
   ((> (bytevector-length (string->utf8 password)) max-password-bytes)
    "That password is too long.")
   ((string-index password #\nul)
    "Passwords cannot contain a NUL character.")
   (else #f)))

(define (change-password-form site request body)
  (let ((user (current-user site)))
    (if user
        (html (password-page #:user user #:csrf (csrf-token)))
        (redirect "login?goto=changepw"))))

(define (change-password site request body)
  ;; The current password first: a session left open on a shared
  ;; computer must not be enough to take the account.
  (let* ((db (site-db site))
         (user (current-user site))
         (form (form-params request body))
         (current (or (param form "current") ""))
         (password (or (param form "password") "")))
    ;; failed tries count as failed logins do: a stolen session does
    ;; not make the password guessable faster
    (define keys (and user (login-keys request (user-name user))))
    (cond
     ((not user) (redirect "login?goto=changepw"))
     ((login-wait site keys)
      => (lambda (wait)
           (values (too-many-requests wait #:content-type '(text/html (charset . "utf-8")))
                   (html->bytevector
                    (password-page #:user user #:csrf (csrf-token)
                                   #:message (format #f "Too many failed tries: try again in ~a minutes."
                                                     (ceiling-quotient wait 60)))))))
     ((not (verify-password (user-password-hash db (user-name user)) current))
      (for-each (lambda (key) (rate-limit-hit! (site-logins site) key)) keys)
      (html-status 403 (password-page #:user user #:csrf (csrf-token)
                                      #:errors '(("current" . "That is not your password.")))))
     ((password-error password)
      => (lambda (message)
           (html-status 400 (password-page #:user user #:csrf (csrf-token)
                                           #:errors `(("password" . ,message))))))
     (else
      (set-user-password-hash! db (user-name user) (hash-password password))
      ;; a new session id: one seen before the change opens nothing more
      (session-regenerate!)
      (redirect (string-append "user?id=" (uri-encode (user-name user))))))))

(define (profile site request body)
  (let* ((db (site-db site))
         (user (current-user site))
         (form (form-params request body))
         (about (or (param form "about") ""))
         (email (string-trim-both (or (param form "email") "")))
         (errors (filter cdr
                         `(("about" . ,(check-text about about-limit "about text"))
                           ("email" . ,(or (check-text email email-limit "email")
                                           (and (not (string-null? email))
                                                (not (string-match "^[^@ ]+@[^@ ]+$" email))
                                                "That does not look like an email address.")))))))
    (cond
     ((not user) (redirect "login"))
     ((pair? errors)
      (html-status 400 (user-page #:subject user #:user user #:csrf (csrf-token)
                                  #:now (now) #:errors errors)))
     (else
      (update-profile! db (user-name user) about email
                       (equal? (param form "showdead") "yes"))
      (redirect (string-append "user?id=" (uri-encode (user-name user))))))))

;;; Submitting.

(define (valid-url? url)
  (and (string-match "^https?://[^/?#@ ]+\\.[^/?#@ ]+([/?#][^ ]*)?$" url)
       (not (string-any char-set:iso-control url))))

(define (submit-form site request body)
  (if (current-user site)
      (html (submit-page #:user (current-user site) #:csrf (csrf-token)
                         #:post-key (form-key)))
      (redirect "login?goto=submit")))

(define (submit site request body)
  (let* ((db (site-db site))
         (user (current-user site))
         (form (form-params request body))
         (title (string-trim-both (or (param form "title") "")))
         (url (string-trim-both (or (param form "url") "")))
         (text (string-trim-both (or (param form "text") "")))
         (errors
          (filter cdr
                  `(("title" . ,(or (and (string-null? title) "Please give a title.")
                                    (check-text title title-limit "title")
                                    (and (string-any char-set:iso-control title)
                                         "The title cannot contain control characters.")))
                    ("url" . ,(or (check-text url url-limit "url")
                                  (and (not (string-null? url)) (not (valid-url? url))
                                       "That is not a web address (http:// or https://).")))
                    ("text" . ,(or (check-text text text-limit "text")
                                   (and (string-null? url) (string-null? text)
                                        "The url and text fields can't both be blank."))))))
         (values* `(("title" . ,(excerpt title title-limit)) ("url" . ,(excerpt url url-limit))
                    ("text" . ,(excerpt text text-limit))))
         (ip ((client-address) request))
         (t (now))
         (key (post-key request form))
         (form-key* (if (string? key) key (form-key))))
    (cond
     ((not user) (redirect "login?goto=submit"))
     ((eq? key 'malformed) (malformed-key user))
     ;; sent again (its answer lost): answered as the first time
     ((item-by-key db (user-name user) key) (redirect "newest"))
     ((pair? errors)
      (html-status 400 (submit-page #:user user #:csrf (csrf-token) #:post-key form-key*
                                    #:values values* #:errors errors)))
     ((and (not (string-null? url))
           (story-with-url db url (- t duplicate-url-window)))
      => (lambda (story)
           ;; news.arc: submitting a url again upvotes the story there.
           (vote! db (user-name user) (item-id story) 1 t ip)
           (redirect (format #f "item?id=~a" (item-id story)))))
     ((>= (recent-submissions db (user-name user) ip 'story (- t rate-window))
          stories-per-window)
      (html-status 429 (submit-page #:user user #:csrf (csrf-token) #:post-key form-key*
                                    #:values values*
                                    #:message "You're submitting too fast. Please slow down.")))
     (else
      (create-story! db (user-name user) ip t
                     (if (string-null? url) #f url) title
                     (if (string-null? text) #f text)
                     #:key key)
      (redirect "newest")))))

(define (comment site request body)
  (let* ((db (site-db site))
         (user (current-user site))
         (form (form-params request body))
         (parent (item-ref db (int-param form "parent")))
         (text (string-trim-both (or (param form "text") "")))
         (error (or (and (string-null? text) "Please write something.")
                    (check-text text text-limit "comment")))
         (ip ((client-address) request))
         (t (now))
         (key (post-key request form))
         (form-key* (and (string? key) key)))
    (cond
     ((not user) (redirect "login"))
     ((eq? key 'malformed) (malformed-key user))
     ;; sent again (its answer lost): answered as the first time
     ((item-by-key db (user-name user) key) => (lambda (it) (redirect (comment-location it))))
     ((or (not parent) (item-dead? parent) (item-deleted? parent))
      (not-found site request "No such item."))
     (error (item-view site request #:item parent #:error error #:key form-key*
                       #:text (excerpt text text-limit) #:code 400))
     ((>= (recent-submissions db (user-name user) ip 'comment (- t rate-window))
          comments-per-window)
      (item-view site request #:item parent #:text text #:code 429 #:key form-key*
                 #:error "You're posting too fast. Please slow down."))
     (else
      (let ((id (create-comment! db (user-name user) ip t (item-id parent) text #:key key)))
        (if id
            (redirect (format #f "item?id=~a#~a" (or (item-story parent) (item-id parent)) id))
            ;; the parent died or was deleted meanwhile
            (not-found site request "No such item.")))))))

(define (reply-form site request body)
  (let ((user (current-user site))
        (it (item-ref (site-db site) (int-param (query-params request) "id"))))
    (cond
     ((not user) (redirect "login"))
     ((or (not it) (item-deleted? it)) (not-found site request "No such item."))
     (else (html (reply-page #:item it #:user user #:csrf (csrf-token) #:now (now)
                             #:post-key (form-key)))))))

(define (editable site request params)
  ;; -> the item PARAMS' "id" names if the current user may edit it now.
  (let ((user (current-user site))
        (it (item-ref (site-db site) (int-param params "id"))))
    (and user it
         (string=? (user-name user) (item-by it))
         (not (item-deleted? it))
         (< (quotient (- (now) (item-time it)) 60) comment-edit-minutes)
         it)))

(define (edit-form site request body)
  (let ((it (editable site request (query-params request))))
    (if it
        (html (edit-page #:item it #:user (current-user site) #:csrf (csrf-token)))
        (html-status 403 (message-page #:user (current-user site) #:csrf (csrf-or-empty site) #:title "Edit"
                                       #:message "You can't edit that.")))))

(define (edit site request body)
  (let* ((form (form-params request body))
         (it (editable site request form))
         (title (and it (eq? (item-type it) 'story)
                     (string-trim-both (or (param form "title") ""))))
         (text (string-trim-both (or (param form "text") "")))
         (error (or (and title (string-null? title) "Please give a title.")
                    (and title (check-text title title-limit "title"))
                    (check-text text text-limit "text")
                    (and it (eq? (item-type it) 'comment) (string-null? text)
                         "Please write something."))))
    (cond
     ((not it)
      (html-status 403 (message-page #:user (current-user site) #:csrf (csrf-or-empty site) #:title "Edit"
                                     #:message "You can't edit that.")))
     (error (html-status 400 (edit-page #:item it #:user (current-user site)
                                        #:csrf (csrf-token) #:error error
                                        #:title (excerpt title title-limit)
                                        #:text (excerpt text text-limit))))
     (else
      (edit-item! (site-db site) (item-id it) title
                  (if (string-null? text) #f text))
      (redirect (format #f "item?id=~a" (item-id it)))))))

(define (delete-form site request body)
  (let ((it (editable site request (query-params request))))
    (if it
        (html (message-page
               #:user (current-user site) #:title "Delete"
               #:message
               `(form (@ (method "post") (action "delete"))
                  "Delete this " ,(symbol->string (item-type it)) "? "
                  (input (@ (type "hidden") (name "id") (value ,(item-id it))))
                  (input (@ (type "hidden") (name "csrf") (value ,(csrf-token))))
                  (button (@ (type "submit")) "Yes, delete it"))))
        (html-status 403 (message-page #:user (current-user site) #:csrf (csrf-or-empty site) #:title "Delete"
                                       #:message "You can't delete that.")))))

(define (delete site request body)
  (let ((it (editable site request (form-params request body))))
    (if it
        (begin
          (delete-item! (site-db site) (item-id it))
          (redirect (if (item-story it)
                        (format #f "item?id=~a" (item-story it))
                        "news")))
        (html-status 403 (message-page #:user (current-user site) #:csrf (csrf-or-empty site) #:title "Delete"
                                       #:message "You can't delete that.")))))

;;; Votes and flags.

(define (vote site request body)
  (let* ((user (current-user site))
         (form (form-params request body))
         (id (int-param form "id"))
         (dir (match (param form "dir") ("up" 1) ("down" -1) ("un" 'un) (_ #f)))
         (whence (safe-whence (param form "whence"))))
    (cond
     ((not user) (redirect "login"))
     ((not (and id dir))
      (html-status 400 (message-page #:user user #:csrf (csrf-token) #:title "Vote"
                                     #:message "That vote is malformed.")))
     (else
      (let ((result (if (eq? dir 'un)
                        (unvote! (site-db site) (user-name user) id)
                        (vote! (site-db site) (user-name user) id dir (now)
                               ((client-address) request)))))
        (if (or (number? result) (eq? result 'already))
            (redirect whence)
            (html-status (if (memq result '(no-item no-vote)) 404 403)
                         (message-page #:user user #:csrf (csrf-token) #:title "Vote"
                                       #:message "Can't make that vote."))))))))

(define (flag site request body)
  (let* ((user (current-user site))
         (form (form-params request body))
         (id (int-param form "id")))
    (if (not user)
        (redirect "login")
        (match (and id (flag! (site-db site) (user-name user) id))
          ((or 'flagged 'unflagged 'killed)
           (redirect (safe-whence (param form "whence"))))
          (_ (html-status 403 (message-page #:user user #:csrf (csrf-token) #:title "Flag"
                                            #:message "You can't flag that.")))))))

(define (mark-story mark! title)
  ;; the handler of a POST that marks a story for its viewer (MARK!:
  ;; `favorite!' or `hide!'), or with "un" takes the mark away
  (lambda (site request body)
    (let* ((user (current-user site))
           (form (form-params request body))
           (id (int-param form "id")))
      (cond
       ((not user) (redirect "login"))
       ((and id (eq? #t (mark! (site-db site) (user-name user) id
                               (not (param form "un")) (now))))
        (redirect (safe-whence (param form "whence"))))
       (else
        (html-status 404 (message-page #:user user #:csrf (csrf-token) #:title title
                                       #:message "No such story.")))))))

(define fave (mark-story favorite! "Favorite"))
(define hide (mark-story hide! "Hide"))

;;; Moderation: the admins' page of flagged and dead items.

(define (admin site)
  ;; -> the current user if an admin, else #f
  (let ((user (current-user site)))
    (and user (user-admin? user) user)))

(define (refuse-non-admin site)
  (html-status 403 (message-page #:user (current-user site) #:csrf (csrf-or-empty site)
                                 #:title "Moderation"
                                 #:message "This page is for the site's admins.")))

(define (flagged site request body)
  (let ((user (admin site)))
    (if user
        (html (flagged-page #:items (flagged-items (site-db site) (* 3 per-page) 0)
                            #:user user #:csrf (csrf-token) #:now (now)))
        (refuse-non-admin site))))

(define (moderate site request body)
  (let* ((form (form-params request body))
         (id (int-param form "id"))
         (action (param form "action")))
    (cond
     ((not (admin site)) (refuse-non-admin site))
     ((and id (member action '("kill" "revive"))
           (eq? #t (set-item-dead! (site-db site) id (string=? action "kill"))))
      (redirect (safe-whence (param form "whence"))))
     (else
      (html-status 404 (message-page #:user (current-user site) #:csrf (csrf-token)
                                     #:title "Moderation" #:message "No such item."))))))

;;; Feeds.

(define (request-origin request)
  ;; -> "SCHEME://HOST[:PORT]" of REQUEST as its client sent it
  (let ((host (request-host request)))
    (string-append (symbol->string (or (current-request-scheme) 'http)) "://"
                   (if host (car host) "localhost")
                   (if (and host (cdr host)) (format #f ":~a" (cdr host)) ""))))

(define (site-origin site request)
  ;; the origin the feed's links start with: the configured one, else
  ;; the request's (and the feed is then cached under it: see `feed')
  (or (site-origin* site) (request-origin request)))

(define (rss site request body)
  (values (build-response #:headers '((content-type . (application/rss+xml (charset . "utf-8")))))
          (rss-feed (list-head* (ranked site) per-page) (now)
                    (string-append (site-origin site request)
                                   (request-mount-prefix request) "/"))))

(define (feed site handler)
  ;; HANDLER's feed, cached for all as `cacheable' pages are, under the
  ;; origin its links take from the request when none is configured: a
  ;; forged Host shows in no one else's feed
  (lambda (request body params)
    (cached-page site request (lambda () (handler site request body))
                 (if (site-origin* site) "" (request-origin request)))))

(define (list-head* items n)
  (if (> (length items) n) (list-head items n) items))

(define (items-json site request body)
  (let* ((params (query-params request))
         (id (int-param params "id"))
         (db (site-db site)))
    (if id
        (let ((it (item-ref db id)))
          (if (and it (not (item-deleted? it)) (not (item-dead? it)))
              (json-response it #:encoder item->json)
              (json-response '(("error" . "no such item")) #:status 404)))
        (json-response (list-head* (ranked site) per-page) #:encoder items->json))))

;;; Routes: the site's pages as data.  A page a visitor who is not
;;; logged in sees the same as any other is `cacheable' (see
;;; `cached-page'); the rest are `plain'.  Every POST passes the CSRF
;;; check of `make-news-app' first.

(define (plain site handler)
  ;; a route's handler of (request body params) calling HANDLER of
  ;; (site request body)
  (lambda (request body params)
    (handler site request body)))

(define (cacheable site handler)
  ;; HANDLER's page, from the visitors' cache or the viewer's own
  (lambda (request body params)
    (let ((make (lambda () (handler site request body))))
      (cond
       ((session-ref "user")
        => (lambda (user) (cached-user-page site request user make)))
       (else (cached-page site request make))))))

(define (logout-link site handler)
  ;; The logout link is a GET (news.arc's); it carries the token in its
  ;; query, as a form would in its body.
  (lambda (request body params)
    (if (csrf-token-valid? (or (query-ref request "csrf")
                               (assq-ref (request-headers request) 'x-csrf-token)))
        (handler site request body)
        (html-status 403 (message-page #:user (current-user site) #:csrf (csrf-or-empty site)
                                       #:title "Logout"
                                       #:message "That logout link is stale.")))))

(define (news-routes site)
  (define (get path handler name . kind)
    (route 'GET path ((if (null? kind) cacheable (car kind)) site handler) #:name name))
  (define (post path handler name)
    (route 'POST path (plain site handler) #:name name))
  (list
   (get "/" front-page 'front)
   (get "/news" front-page 'news)
   (get "/newest" newest 'newest)
   (get "/ask" ask 'ask)
   (get "/best" best 'best)
   (get "/item" item 'item)
   (get "/user" user-profile 'user)
   (get "/submitted" submitted 'submitted)
   (get "/threads" threads 'threads)
   (get "/newcomments" newcomments 'newcomments)
   (get "/show" show 'show)
   (get "/leaders" leaders-list 'leaders)
   (get "/from" from 'from)
   (get "/favorites" favorites 'favorites)
   (get "/hidden" hidden 'hidden plain)
   (get "/changepw" change-password-form 'change-password-form plain)
   (get "/flagged" flagged 'flagged plain)
   (get "/rss" rss 'rss feed)
   (get "/items.json" items-json 'items-json)
   (get "/login" login-form 'login-form plain)
   (get "/logout" logout 'logout logout-link)
   (get "/submit" submit-form 'submit-form plain)
   (get "/reply" reply-form 'reply plain)
   (get "/edit" edit-form 'edit-form plain)
   (get "/delete" delete-form 'delete-form plain)
   (post "/login" login 'login)
   (post "/signup" signup 'signup)
   (post "/submit" submit 'submit)
   (post "/comment" comment 'comment)
   (post "/vote" vote 'vote)
   (post "/flag" flag 'flag)
   (post "/edit" edit 'edit)
   (post "/delete" delete 'delete)
   (post "/profile" profile 'profile)
   (post "/fave" fave 'fave)
   (post "/hide" hide 'hide)
   (post "/changepw" change-password 'change-password)
   (post "/moderate" moderate 'moderate)))

(define (refuse-forged site)
  ;; what a POST without a valid CSRF token gets
  (lambda (request body)
    (html-status 403 (message-page
                      #:user (current-user site) #:title "Refused"
                      #:message "Your form was stale or forged (no valid CSRF token). Please go back, reload and try again."))))

(define* (make-news-app #:key database file (prefix "/") (address peer-address)
                       (origin #f) (server-timing? #f))
  "Return the handler of the news site over DATABASE (see
`seed-news-db!'): an SQLite file, whose sessions and rate limits are
kept in it too, or a postgresql:// URL, where they are kept too, shared
by every host serving the site (FILE is DATABASE's name of old).
Serving the paths under PREFIX: \"/\", or a prefix
(\"/news/\") it is then mounted under.  A site of several apps rather
mounts it itself (`mount' of (plucky web router)); its session cookie is
for the prefix it is mounted under.
ADDRESS, a procedure of the request, gives the client's address, which
votes and rate limits count by.  The RSS feed's links start with ORIGIN
(\"https://news.example.org\"), or when it is #f with the request's own
origin (its scheme, its Host), the feed then cached under it.  Each request's phases db and render
are timed for the status page; with SERVER-TIMING? true, its response
carries them in a Server-Timing header too."
  (letrec* ((location (or database file))
            ;; PostgreSQL: one pool a process for the pages, the sessions
            ;; and the limits (made now, it opens connections in each
            ;; worker as they are needed)
            (pool (and (database-url? location) (make-pg-pool location)))
            (site (make-site location pool #f #f #f (make-hash-table) (make-hash-table)
                             (make-rate-limit #:store (if pool
                                                          (pg-rate-limit-store pool)
                                                          (sqlite-rate-limit-store
                                                           (lambda () (news-db-handle (site-db site)))))
                                              #:name "news-login" #:limit login-failures
                                              #:window login-window)
                             (and origin (string-trim-right origin #\/))
                             (make-hash-table))))
    (mounted-under
     prefix
     (wrap (router-handler
           (make-router (news-routes site)
                        #:not-found (lambda (request body)
                                      (not-found site request "No such page."))))
          ;; PostgreSQL down or restarting: 503 and Retry-After, one
          ;; line logged, rather than a 500 and a backtrace a request
          ;; (outermost: the sessions are read from it too)
          (if pool (pg-unavailable-middleware) identity)
          (with-server-timing #:header? server-timing?)
          (session-middleware #:store (if pool
                                          (pg-session-store pool)
                                          (sqlite-session-store
                                           (lambda () (news-db-handle (site-db site))))))
          ;; POST only: a DELETE is the router's 405, not a refusal
          (csrf-middleware #:methods '(POST) #:refuse (refuse-forged site))
          (lambda (handler)
            (lambda (request body)
              (parameterize ((client-address address))
                (handler request body))))))))

(define (mounted-under prefix app)
  ;; APP, or a router that mounts it under PREFIX ("/news/")
  (if (string=? prefix "/")
      app
      (router-handler (make-router (list (mount (string-trim-right prefix #\/) app))))))
