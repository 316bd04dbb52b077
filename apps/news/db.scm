;;; (news db) --- the news site's data, in SQLite

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Everything the news site stores, and every rule news.arc applies when
;;; it stores it: who may vote on what and what a vote does to karma,
;;; when flags kill an item, how fast a user or an address may submit.
;;; The pages ((news app)) ask; this module answers and writes.
;;;
;;; One SQLite file is shared by every worker process, each with its own
;;; connection (opened in the worker, never across a fork): WAL mode, so
;;; that readers never wait for the writer, and a busy timeout, so that
;;; two workers writing at once queue instead of failing.  Every write
;;; that touches several rows (a vote: the vote, the item's score, the
;;; author's karma) is one transaction.
;;;
;;; Caches in the pages are keyed by `db-version', a counter that every
;;; transaction of this module raises as it commits, whichever worker's
;;; connection makes it.  (SQLite's data_version pragma would count the
;;; sessions' writes too, which change nothing a page caches.)
;;;
;;; Items are stories and comments, in one table as in news.arc: a
;;; comment's PARENT is the item it answers and its STORY the story at
;;; the root of its thread; a story's DESCENDANTS counts its live
;;; comments.  Votes are kept one row per (item, user), which is what
;;; makes a replayed vote a no-op.
;;;
;;; Code:

(define-module (news db)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 match)
  #:use-module (news sql)
  #:use-module ((plucky web timing) #:select (with-phase))
  #:use-module (news rank)
  #:re-export (call-with-transaction call-with-exclusive-transaction database-url?)
  #:export (open-news-db
            close-news-db
            news-db?
            news-db-location
            news-db-file
            news-db-handle
            news-db-backend
            db-version
            set-user-admin!

            <user> user? user-name user-created user-karma user-about
            user-email user-showdead? user-admin?
            create-user! user-ref user-password-hash set-user-password-hash!
            update-profile! set-user-karma! user-count

            <item> item? item-id item-type item-by item-ip item-time
            item-url item-title item-text item-score item-sockvotes
            item-dead? item-deleted? item-parent item-story
            item-descendants item-flags item-points
            item-ref item-by-key create-story! create-comment! edit-item!
            delete-item! story-with-url item-count

            ranked-stories newest-stories ask-stories best-stories
            newest-comments stories-by comments-by thread-comments
            comment-tree

            vote! unvote! votes-by-user-on flag! recent-submissions
            can-downvote?

            leaders show-stories stories-from
            favorite! favorites-of favorite-ids
            hide! hidden-ids hidden-stories
            flagged-items set-item-dead!

            karma-to-downvote downvote-minutes lowest-score karma-to-flag
            flags-to-kill comment-edit-minutes leader-count))

;;; Rules, as news.arc sets them.

(define karma-to-downvote 20)      ; more than this to downvote comments…
(define downvote-minutes 1440)     ; …younger than a day (news.arc's downvote-time*)…
(define lowest-score -4)           ; …whose score is above this (lowest-score*)
(define leader-count 20)           ; users on the leaders page (nleaders*)
(define karma-to-flag 30)          ; flagging items (news.arc's flag-threshold*)
(define flags-to-kill 7)           ; more flags than this kill an item…
(define kill-score-limit 10)       ; …whose points are under this
(define comment-edit-minutes 120)  ; news.arc's user-changetime*

;;; The connection: (news sql), on SQLite or PostgreSQL.

(define migrations
  ;; (NUMBER NAME (sqlite SCRIPT) (postgresql STATEMENT …)): see `migrate!'
  ;; of (news sql).  The first is written IF NOT EXISTS: a database made
  ;; before migrations were recorded takes it as it is.
  '((1 "the news site's tables"
       (sqlite "
CREATE TABLE IF NOT EXISTS meta (
  version INTEGER NOT NULL            -- raised by every commit of (news db)
);
INSERT INTO meta (version) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM meta);
CREATE TABLE IF NOT EXISTS users (
  name TEXT PRIMARY KEY,
  created INTEGER NOT NULL,
  password TEXT NOT NULL,          -- an Argon2id encoded hash, parameters included
  karma INTEGER NOT NULL DEFAULT 1,
  about TEXT NOT NULL DEFAULT '',
  email TEXT NOT NULL DEFAULT '',  -- shown to nobody but its owner
  showdead INTEGER NOT NULL DEFAULT 0,
  admin INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS items (
  id INTEGER PRIMARY KEY,
  type TEXT NOT NULL CHECK (type IN ('story', 'comment')),
  by TEXT NOT NULL REFERENCES users(name),
  ip TEXT NOT NULL,
  time INTEGER NOT NULL,
  url TEXT,
  title TEXT,
  text TEXT,
  score INTEGER NOT NULL DEFAULT 0,
  sockvotes INTEGER NOT NULL DEFAULT 0,
  dead INTEGER NOT NULL DEFAULT 0,
  deleted INTEGER NOT NULL DEFAULT 0,
  parent INTEGER REFERENCES items(id),
  story INTEGER REFERENCES items(id),
  descendants INTEGER NOT NULL DEFAULT 0,
  flags INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS items_type_id ON items(type, id);
CREATE INDEX IF NOT EXISTS items_story ON items(story);
CREATE INDEX IF NOT EXISTS items_by ON items(by, id);
CREATE INDEX IF NOT EXISTS items_url ON items(url) WHERE url IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_ip_time ON items(ip, time);
CREATE TABLE IF NOT EXISTS votes (
  item INTEGER NOT NULL REFERENCES items(id),
  user TEXT NOT NULL REFERENCES users(name),
  dir INTEGER NOT NULL CHECK (dir IN (-1, 1)),
  time INTEGER NOT NULL,
  ip TEXT NOT NULL,
  PRIMARY KEY (item, user)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS votes_user ON votes(user, item);
CREATE TABLE IF NOT EXISTS flags (
  item INTEGER NOT NULL REFERENCES items(id),
  user TEXT NOT NULL REFERENCES users(name),
  PRIMARY KEY (item, user)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS favorites (   -- a user's saved stories, shown to all
  user TEXT NOT NULL REFERENCES users(name),
  item INTEGER NOT NULL REFERENCES items(id),
  time INTEGER NOT NULL,
  PRIMARY KEY (user, item)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hidden (      -- stories a user asked not to see
  user TEXT NOT NULL REFERENCES users(name),
  item INTEGER NOT NULL REFERENCES items(id),
  time INTEGER NOT NULL,
  PRIMARY KEY (user, item)
) WITHOUT ROWID;
")
       ;; the same, in PostgreSQL's words, where "user" is a reserved word
       (postgresql
        "CREATE TABLE meta (version BIGINT NOT NULL)"
        "INSERT INTO meta (version) VALUES (0)"
        "CREATE TABLE users (
           name TEXT PRIMARY KEY,
           created BIGINT NOT NULL,
           password TEXT NOT NULL,
           karma INTEGER NOT NULL DEFAULT 1,
           about TEXT NOT NULL DEFAULT '',
           email TEXT NOT NULL DEFAULT '',
           showdead INTEGER NOT NULL DEFAULT 0,
           admin INTEGER NOT NULL DEFAULT 0)"
        "CREATE TABLE items (
           id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
           type TEXT NOT NULL CHECK (type IN ('story', 'comment')),
           by TEXT NOT NULL REFERENCES users(name),
           ip TEXT NOT NULL,
           time BIGINT NOT NULL,
           url TEXT,
           title TEXT,
           text TEXT,
           score INTEGER NOT NULL DEFAULT 0,
           sockvotes INTEGER NOT NULL DEFAULT 0,
           dead INTEGER NOT NULL DEFAULT 0,
           deleted INTEGER NOT NULL DEFAULT 0,
           parent BIGINT REFERENCES items(id),
           story BIGINT REFERENCES items(id),
           descendants INTEGER NOT NULL DEFAULT 0,
           flags INTEGER NOT NULL DEFAULT 0)"
        "CREATE INDEX items_type_id ON items(type, id)"
        "CREATE INDEX items_story ON items(story)"
        "CREATE INDEX items_by ON items(by, id)"
        "CREATE INDEX items_url ON items(url) WHERE url IS NOT NULL"
        "CREATE INDEX items_ip_time ON items(ip, time)"
        "CREATE TABLE votes (
           item BIGINT NOT NULL REFERENCES items(id),
           \"user\" TEXT NOT NULL REFERENCES users(name),
           dir INTEGER NOT NULL CHECK (dir IN (-1, 1)),
           time BIGINT NOT NULL,
           ip TEXT NOT NULL,
           PRIMARY KEY (item, \"user\"))"
        "CREATE INDEX votes_user ON votes(\"user\", item)"
        "CREATE TABLE flags (
           item BIGINT NOT NULL REFERENCES items(id),
           \"user\" TEXT NOT NULL REFERENCES users(name),
           PRIMARY KEY (item, \"user\"))"
        "CREATE TABLE favorites (
           \"user\" TEXT NOT NULL REFERENCES users(name),
           item BIGINT NOT NULL REFERENCES items(id),
           time BIGINT NOT NULL,
           PRIMARY KEY (\"user\", item))"
        "CREATE TABLE hidden (
           \"user\" TEXT NOT NULL REFERENCES users(name),
           item BIGINT NOT NULL REFERENCES items(id),
           time BIGINT NOT NULL,
           PRIMARY KEY (\"user\", item))"))
    ;; Names are unique whatever their case (news.arc's rule), and a
    ;; constraint says so: two signups racing on two hosts cannot both
    ;; take one.
    (2 "user names unique without case"
       (sqlite "CREATE UNIQUE INDEX IF NOT EXISTS users_name_nocase ON users (lower(name))")
       (postgresql "CREATE UNIQUE INDEX users_name_nocase ON users (lower(name))"))
    ;; A story's or comment's form carries a key of its own (see
    ;; `create-story!'): sent again, by a client that lost the answer,
    ;; it finds the row the first made.  Unique per author: two copies
    ;; racing on two hosts store one row.
    (3 "the key of the form that posted an item"
       (sqlite "ALTER TABLE items ADD COLUMN post_key TEXT;
CREATE UNIQUE INDEX IF NOT EXISTS items_post_key ON items (by, post_key);")
       (postgresql "ALTER TABLE items ADD COLUMN post_key TEXT"
                   "CREATE UNIQUE INDEX items_post_key ON items (by, post_key)"))))

(define* (open-news-db location #:key (pool #f))
  "Return a connection to the news database at LOCATION, an SQLite file
(readable by the server's user alone: password hashes, email addresses,
the addresses of posters) or a postgresql:// URL (through POOL, when
given, of `make-pg-pool'), after applying the migrations it lacks (see
`migrate!' of (news sql))."
  (let ((db (open-sql location #:pool pool)))
    (migrate! db migrations)
    db))

(define (close-news-db db)
  "Close DB's connection; return unspecified."
  (close-sql db))

(define (news-db? x) (sql? x))
(define (news-db-location db) (sql-location db))
(define (news-db-file db) (sql-location db))      ; the name of old
(define (news-db-handle db) (sql-handle db))      ; (sqlite3)'s, or a pg pool
(define (news-db-backend db) (sql-backend db))

(define (db-version db)
  "Return a value that changes whenever any worker changes DB's data."
  (data-version db))

(define (set-user-admin! db name admin?)
  "Make user NAME an admin (ADMIN? true) or not."
  (call-with-transaction db
    (lambda ()
      (execute! db "UPDATE users SET admin = ? WHERE name = ?" (if admin? 1 0) name))))

;;; Users.

(define-record-type <user>
  (make-user name created karma about email showdead? admin?)
  user?
  (name user-name)
  (created user-created)
  (karma user-karma)
  (about user-about)
  (email user-email)
  (showdead? user-showdead?)
  (admin? user-admin?))

(define (row->user row)
  (match row
    (#(name created karma about email showdead admin)
     (make-user name created karma about email (= showdead 1) (= admin 1)))))

(define (create-user! db name password-hash now)
  "Add user NAME with PASSWORD-HASH, created at NOW (seconds); return #t,
or #f when the name is taken (compared without case, as news.arc does:
the unique index users_name_nocase decides, so two signups racing on
two hosts cannot both have it)."
  (call-with-transaction db
    (lambda ()
      (and (query-1 db "INSERT INTO users (name, created, password) VALUES (?, ?, ?)
                        ON CONFLICT DO NOTHING RETURNING 1"
                    name now password-hash)
           #t))))

(define (user-ref db name)
  "Return the user called NAME, or #f."
  (and (string? name)
       (let ((row (query-1 db "SELECT name, created, karma, about, email,
                                      showdead, admin
                               FROM users WHERE name = ?" name)))
         (and row (row->user row)))))

(define (user-password-hash db name)
  "Return the encoded password hash of user NAME, or #f."
  (query-value db "SELECT password FROM users WHERE name = ?" name))

(define (set-user-password-hash! db name hash)
  "Store HASH as user NAME's password hash (after a rehash)."
  (call-with-transaction db
    (lambda ()
      (execute! db "UPDATE users SET password = ? WHERE name = ?" hash name))))

(define (update-profile! db name about email showdead?)
  "Store NAME's ABOUT text, EMAIL and SHOWDEAD? preference."
  (call-with-transaction db
    (lambda ()
      (execute! db "UPDATE users SET about = ?, email = ?, showdead = ?
                    WHERE name = ?" about email (if showdead? 1 0) name))))

(define (user-count db)
  "Return how many users there are."
  (query-value db "SELECT count(*) FROM users"))

;; Karma moves with votes; this sets it outright, for seeding and admins.
(define (set-user-karma! db name karma)
  "Set user NAME's KARMA."
  (call-with-transaction db
    (lambda ()
      (execute! db "UPDATE users SET karma = ? WHERE name = ?" karma name))))

;;; Items.

(define-record-type <item>
  (make-item id type by ip time url title text score sockvotes
             dead? deleted? parent story descendants flags)
  item?
  (id item-id)
  (type item-type)                      ; 'story or 'comment
  (by item-by)
  (ip item-ip)
  (time item-time)                      ; seconds since the epoch
  (url item-url)                        ; #f for a text post or a comment
  (title item-title)
  (text item-text)
  (score item-score)
  (sockvotes item-sockvotes)
  (dead? item-dead?)
  (deleted? item-deleted?)
  (parent item-parent)                  ; comments: the item answered
  (story item-story)                    ; comments: the thread's story
  (descendants item-descendants)        ; stories: live comments below
  (flags item-flags))

(define item-columns
  "id, type, by, ip, time, url, title, text, score, sockvotes, dead,
   deleted, parent, story, descendants, flags")

(define (row->item row)
  (match row
    (#(id type by ip time url title text score sockvotes dead deleted
          parent story descendants flags)
     (make-item id (string->symbol type) by ip time url title text score
                sockvotes (= dead 1) (= deleted 1) parent story
                descendants flags))))

(define (items db where . args)
  (map row->item
       (apply query db (string-append "SELECT " item-columns
                                      " FROM items " where)
              args)))

(define (item-points item)
  "Return ITEM's points as ranking counts them: votes less sock-puppets'."
  (- (item-score item) (item-sockvotes item)))

(define (item-ref db id)
  "Return the item numbered ID, or #f."
  (and (exact-integer? id)
       (match (items db "WHERE id = ?" id)
         ((item) item)
         (() #f))))

(define (item-count db type)
  "Return how many items of TYPE ('story or 'comment) there are."
  (query-value db "SELECT count(*) FROM items WHERE type = ?"
               (symbol->string type)))

(define (story-with-url db url since)
  "Return the live story submitted with URL at or after SINCE, or #f."
  (match (items db "WHERE url = ? AND type = 'story' AND dead = 0
                    AND deleted = 0 AND time >= ? ORDER BY id DESC LIMIT 1"
                url since)
    ((item) item)
    (() #f)))

(define (insert-item! db type by ip now url title text parent story key)
  ;; -> the new item's id, or #f when BY has an item of KEY already (a
  ;; NULL key is never a duplicate)
  (query-value db "INSERT INTO items (type, by, ip, time, url, title, text,
                                      parent, story, post_key)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT DO NOTHING RETURNING id"
               (symbol->string type) by ip now url title text parent story key))

(define (item-by-key db by key)
  "Return the item user BY posted with the form key KEY, or #f (always
#f when KEY is #f)."
  (and key
       (match (items db "WHERE by = ? AND post_key = ?" by key)
         ((item) item)
         (() #f))))

(define* (create-story! db by ip now url title text #:key (key #f))
  "Add a story by user BY from address IP at NOW with URL (or #f), TITLE
and TEXT (or #f), and its author's vote for it; return its id.  KEY, a
string or #f, is the key of the form it came from: when BY posted an
item with KEY before, nothing is added and that item's id is returned
(a form sent again stores one story)."
  (call-with-transaction db
    (lambda ()
      (let ((id (insert-item! db 'story by ip now url title text #f #f key)))
        (if id
            (begin (record-vote! db by id 1 now ip) id)
            (item-id (item-by-key db by key)))))))

(define* (create-comment! db by ip now parent text #:key (key #f))
  "Add a comment by BY from IP at NOW answering item PARENT with TEXT, and
its author's vote for it; return its id, or #f when PARENT is not a live
item.  KEY: as for `create-story!'; a comment BY posted with KEY before
is not added again, and its id is returned."
  (call-with-transaction db
    (lambda ()
      (let ((parent-item (item-ref db parent)))
        (and parent-item
             (not (item-dead? parent-item))
             (not (item-deleted? parent-item))
             (let* ((story (or (item-story parent-item)
                               (item-id parent-item)))
                    (id (insert-item! db 'comment by ip now #f #f text
                                      parent story key)))
               (if id
                   (begin
                     (execute! db "UPDATE items SET descendants = descendants + 1
                                   WHERE id = ?" story)
                     (record-vote! db by id 1 now ip)
                     id)
                   (item-id (item-by-key db by key)))))))))

(define (edit-item! db id title text)
  "Store TITLE (stories) and TEXT of item ID."
  (call-with-transaction db
    (lambda ()
      (execute! db "UPDATE items SET title = coalesce(?, title), text = ?
                    WHERE id = ?" title text id))))

(define (delete-item! db id)
  "Mark item ID deleted; a deleted comment leaves its thread's count."
  (call-with-transaction db
    (lambda ()
      ;; the row's own UPDATE decides, not a read before it: two
      ;; deletes racing take one comment from the count once
      (let ((item (and (query-1 db "UPDATE items SET deleted = 1 WHERE id = ? AND deleted = 0
                                    RETURNING id" id)
                       (item-ref db id))))
        (when item
          (when (and (eq? (item-type item) 'comment) (not (item-dead? item)))
            (execute! db "UPDATE items SET descendants = descendants - 1
                          WHERE id = ?" (item-story item))))))))

;;; Lists.

(define consider-for-front-page 1000)   ; news.arc ranks the latest 1000

(define (ranked-stories db now)
  "Return the live stories of the front page in rank order at NOW: the
latest 1000 with at least one point, by `frontpage-rank'."
  (let* ((candidates
          (items db "WHERE type = 'story' AND dead = 0 AND deleted = 0
                     ORDER BY id DESC LIMIT ?" consider-for-front-page))
         (ranked
          (map (lambda (item)
                 (cons (frontpage-rank
                        #:type 'story
                        #:points (item-points item)
                        #:age-minutes (quotient (- now (item-time item)) 60)
                        #:url (item-url item)
                        #:comments (item-descendants item))
                       item))
               (filter (lambda (item)
                         (>= (item-points item) front-threshold))
                       candidates))))
    (map cdr (sort ranked (lambda (a b) (> (car a) (car b)))))))

(define (newest-stories db limit offset)
  "Return LIMIT live stories, newest first, skipping OFFSET."
  (items db "WHERE type = 'story' AND dead = 0 AND deleted = 0
             ORDER BY id DESC LIMIT ? OFFSET ?" limit offset))

(define (ask-stories db limit offset)
  "Return LIMIT live text posts (no url), newest first, skipping OFFSET."
  (items db "WHERE type = 'story' AND url IS NULL AND dead = 0
             AND deleted = 0 ORDER BY id DESC LIMIT ? OFFSET ?" limit offset))

(define (best-stories db limit offset)
  "Return LIMIT live stories by points, skipping OFFSET."
  (items db "WHERE type = 'story' AND dead = 0 AND deleted = 0
             ORDER BY score - sockvotes DESC, id DESC LIMIT ? OFFSET ?"
         limit offset))

(define (newest-comments db limit offset)
  "Return LIMIT live comments, newest first, skipping OFFSET."
  (items db "WHERE type = 'comment' AND dead = 0 AND deleted = 0
             ORDER BY id DESC LIMIT ? OFFSET ?" limit offset))

(define (stories-by db name limit offset)
  "Return LIMIT of user NAME's live stories, newest first."
  (items db "WHERE by = ? AND type = 'story' AND deleted = 0
             ORDER BY id DESC LIMIT ? OFFSET ?" name limit offset))

(define (comments-by db name limit offset)
  "Return LIMIT of user NAME's comments, newest first."
  (items db "WHERE by = ? AND type = 'comment' AND deleted = 0
             ORDER BY id DESC LIMIT ? OFFSET ?" name limit offset))

(define (thread-comments db story)
  "Return every comment of STORY's thread (by id), dead and deleted too:
the page decides what each viewer sees."
  (items db "WHERE story = ? ORDER BY id" story))

(define (comment-tree comments root now)
  "Return the replies to ROOT among COMMENTS as a list of (COMMENT .
REPLIES) trees, each level in news.arc's order: by rank at NOW."
  (let ((children (make-hash-table)))
    (for-each (lambda (c)
                (hashv-set! children (item-parent c)
                            (cons (cons (frontpage-rank
                                         #:type 'comment
                                         #:points (item-points c)
                                         #:age-minutes (quotient (- now (item-time c)) 60))
                                        c)
                                  (hashv-ref children (item-parent c) '()))))
              comments)
    (let build ((parent root))
      (map (lambda (ranked) (let ((c (cdr ranked))) (cons c (build (item-id c)))))
           (sort (hashv-ref children parent '())
                 (lambda (a b) (> (car a) (car b))))))))

;;; Votes and flags.

(define (record-vote! db user id dir now ip)
  ;; -> #t, or #f when USER had voted on ID already: the primary key
  ;; (item, user) decides, so two copies of one vote racing on two hosts
  ;; count once
  (and (query-1 db "INSERT INTO votes (item, \"user\", dir, time, ip)
                    VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1"
                id user dir now ip)
       (begin
         (execute! db "UPDATE items SET score = score + ? WHERE id = ?" dir id)
         #t)))

(define (vote! db user id dir now ip)
  "Record USER's vote DIR (1 up, -1 down) on item ID from address IP at
NOW; return the item's new score, or a symbol saying why not: 'no-item,
'dead, 'already (one vote per user and item), 'own (an author votes for
their item when submitting it, and never again), 'karma (downvotes need
karma and are for comments only)."
  (call-with-transaction db
    (lambda ()
      (let ((item (item-ref db id))
            (voter (user-ref db user)))
        (cond
         ((or (not item) (not voter)) 'no-item)
         ((or (item-dead? item) (item-deleted? item)) 'dead)
         ((string=? (item-by item) user) 'own)
         ((and (= dir -1)
               (not (can-downvote? voter item now
                                   (and (item-parent item)
                                        (let ((parent (item-ref db (item-parent item))))
                                          (and parent (item-by parent)))))))
          'karma)
         ((not (record-vote! db user id dir now ip)) 'already)
         (else
          ;; The author's karma follows, but not from their own address:
          ;; news.arc's guard against voting for oneself by a second account.
          (unless (string=? (item-ip item) ip)
            (execute! db "UPDATE users SET karma = karma + ? WHERE name = ?"
                      dir (item-by item)))
          (+ (item-score item) dir)))))))

(define (can-downvote? user item now parent-author)
  "Return #t if USER (a <user>) may downvote ITEM at NOW, as news.arc
rules: a comment only, not a reply to one of USER's own (PARENT-AUTHOR
is the name of the item it answers, or #f), by a user of more than
`karma-to-downvote' karma, younger than `downvote-minutes' (an admin's
downvote has no age limit), whose score is above `lowest-score'."
  (and (eq? (item-type item) 'comment)
       (not (string=? (user-name user) (item-by item)))
       (not (equal? parent-author (user-name user)))
       (> (user-karma user) karma-to-downvote)
       (or (user-admin? user)
           (< (quotient (- now (item-time item)) 60) downvote-minutes))
       (> (item-score item) lowest-score)))

(define (unvote! db user id)
  "Take back USER's vote on item ID, and what it did to the score and
the author's karma; return the item's new score, or 'no-vote (none to
take back) or 'own (an author's vote for their own item stays)."
  (call-with-transaction db
    (lambda ()
      (let ((item (item-ref db id)))
        (cond
         ((not item) 'no-vote)
         ((string=? (item-by item) user) 'own)
         ;; the DELETE says which vote it took: two unvotes racing take
         ;; one back once
         ((query-1 db "DELETE FROM votes WHERE item = ? AND \"user\" = ? RETURNING dir, ip"
                   id user)
          => (lambda (vote)
          (let ((dir (vector-ref vote 0)))
            (execute! db "UPDATE items SET score = score - ? WHERE id = ?" dir id)
            ;; the karma `vote!' gave, taken back
            (unless (string=? (item-ip item) (vector-ref vote 1))
              (execute! db "UPDATE users SET karma = karma - ? WHERE name = ?"
                        dir (item-by item)))
            (- (item-score item) dir))))
         (else 'no-vote))))))

(define (votes-by-user-on db user ids)
  "Return an alist (ID . DIR) of USER's votes on the items IDS."
  (if (or (not user) (null? ids))
      '()
      (map (match-lambda (#(item dir) (cons item dir)))
           (apply query db
                  (string-append
                   "SELECT item, dir FROM votes WHERE \"user\" = ? AND item IN ("
                   (string-join (map (const "?") ids) ",") ")")
                  user ids))))

(define (flag! db user id)
  "Toggle USER's flag on item ID; return 'flagged, 'unflagged, 'killed
(the flag that passed the threshold), or 'no-item, 'own or 'karma when
USER may not flag it."
  (call-with-transaction db
    (lambda ()
      (let ((item (item-ref db id))
            (flagger (user-ref db user)))
        (cond
         ((or (not item) (not flagger)) 'no-item)
         ((string=? (item-by item) user) 'own)
         ((and (not (user-admin? flagger))
               (<= (user-karma flagger) karma-to-flag))
          'karma)
         ;; a toggle: the DELETE or the INSERT says which it was
         ((query-1 db "DELETE FROM flags WHERE item = ? AND \"user\" = ? RETURNING 1" id user)
          (execute! db "UPDATE items SET flags = flags - 1 WHERE id = ?" id)
          'unflagged)
         ((not (query-1 db "INSERT INTO flags (item, \"user\") VALUES (?, ?)
                            ON CONFLICT DO NOTHING RETURNING 1" id user))
          'flagged)
         (else
          (execute! db "UPDATE items SET flags = flags + 1 WHERE id = ?" id)
          (if (and (not (item-dead? item))
                   (> (+ 1 (item-flags item)) flags-to-kill)
                   (< (item-points item) kill-score-limit))
              (begin
                (execute! db "UPDATE items SET dead = 1 WHERE id = ?" id)
                (when (eq? (item-type item) 'comment)
                  (execute! db "UPDATE items SET descendants = descendants - 1
                                WHERE id = ?" (item-story item)))
                'killed)
              'flagged)))))))

(define (recent-submissions db user ip type since)
  "Return how many items of TYPE user USER or address IP submitted since
SINCE: what the rate limits count."
  (query-value db "SELECT count(*) FROM items
                   WHERE type = ? AND time >= ? AND (by = ? OR ip = ?)"
               (symbol->string type) since user ip))

;;; Lists news.arc's readers expect.

(define (leaders db)
  "Return the users of most karma, most first: `leader-count' of them,
those of more than 1 and not admins (news.arc's leaders page)."
  (map row->user
       (query db "SELECT name, created, karma, about, email, showdead, admin
                  FROM users WHERE karma > 1 AND admin = 0
                  ORDER BY karma DESC, name LIMIT ?" leader-count)))

(define (show-stories db limit offset)
  "Return LIMIT live stories whose title begins \"Show:\" or \"Show HN:\"
(what their authors made), newest first, skipping OFFSET."
  (items db "WHERE type = 'story' AND dead = 0 AND deleted = 0
             AND (lower(title) LIKE 'show:%' OR lower(title) LIKE 'show hn:%')
             ORDER BY id DESC LIMIT ? OFFSET ?" limit offset))

(define (like-escape text)
  ;; TEXT with LIKE's wildcards escaped by a backslash
  (string-concatenate
   (map (lambda (c) (if (memv c '(#\% #\_ #\\)) (string #\\ c) (string c)))
        (string->list text))))

(define (stories-from db site site-of limit offset)
  "Return LIMIT live stories whose url's site, as (SITE-OF url) gives
it, is SITE, newest first, skipping OFFSET: among the latest 1,000 whose
url holds SITE."
  (let* ((candidates (items db "WHERE type = 'story' AND dead = 0 AND deleted = 0
                                AND lower(url) LIKE ? ESCAPE '\\' ORDER BY id DESC LIMIT 1000"
                            (string-append "%" (like-escape (string-downcase site)) "%")))
         (matching (filter (lambda (item) (equal? (site-of (item-url item)) site))
                           candidates))
         (rest (if (> (length matching) offset) (list-tail matching offset) '())))
    (if (> (length rest) limit) (list-head rest limit) rest)))

(define (mark! db table user id on? now)
  ;; USER's row for item ID in TABLE (favorites or hidden), made or
  ;; taken away; -> #t, or 'no-item
  (call-with-transaction db
    (lambda ()
      (let ((item (item-ref db id)))
        (cond
         ((or (not item) (item-deleted? item) (not (eq? (item-type item) 'story))) 'no-item)
         (on?
          (execute! db (string-append "INSERT INTO " table
                                      " (\"user\", item, time) VALUES (?, ?, ?)"
                                      " ON CONFLICT DO NOTHING")
                    user id now)
          #t)
         (else
          (execute! db (string-append "DELETE FROM " table " WHERE \"user\" = ? AND item = ?")
                    user id)
          #t))))))

(define (favorite! db user id on? now)
  "Save story ID among USER's favorites (ON? true) or take it away;
return #t, or 'no-item."
  (mark! db "favorites" user id on? now))

(define (favorites-of db name limit offset)
  "Return LIMIT of user NAME's favorite stories, newest first."
  (items db "WHERE id IN (SELECT item FROM favorites WHERE \"user\" = ?)
             AND deleted = 0 AND dead = 0
             ORDER BY id DESC LIMIT ? OFFSET ?" name limit offset))

(define (favorite-ids db user ids)
  "Return those of IDS that USER saved among their favorites."
  (if (or (not user) (null? ids))
      '()
      (map (lambda (row) (vector-ref row 0))
           (apply query db
                  (string-append "SELECT item FROM favorites WHERE \"user\" = ? AND item IN ("
                                 (string-join (map (const "?") ids) ",") ")")
                  user ids))))

(define (hide! db user id on? now)
  "Hide story ID from USER's lists (ON? true) or show it again; return
#t, or 'no-item."
  (mark! db "hidden" user id on? now))

(define (hidden-ids db user)
  "Return the ids of the stories USER hid."
  (map (lambda (row) (vector-ref row 0))
       (query db "SELECT item FROM hidden WHERE \"user\" = ?" user)))

(define (hidden-stories db user limit offset)
  "Return LIMIT of the stories USER hid, newest first."
  (items db "WHERE id IN (SELECT item FROM hidden WHERE \"user\" = ?) AND deleted = 0
             ORDER BY id DESC LIMIT ? OFFSET ?" user limit offset))

;;; Moderation, for admins.

(define (flagged-items db limit offset)
  "Return LIMIT items that are flagged or dead, not deleted, newest
first: what an admin looks at."
  (items db "WHERE (flags > 0 OR dead = 1) AND deleted = 0
             ORDER BY id DESC LIMIT ? OFFSET ?" limit offset))

(define (set-item-dead! db id dead?)
  "Kill item ID (DEAD? true) or bring it back; a comment's thread counts
it again, or no more.  Return #t, or 'no-item."
  (call-with-transaction db
    (lambda ()
      (let ((item (item-ref db id)))
        (cond
         ((or (not item) (item-deleted? item)) 'no-item)
         ;; the UPDATE decides whether it changed anything, not the read
         ((not (query-1 db "UPDATE items SET dead = ? WHERE id = ? AND dead <> ? RETURNING 1"
                        (if dead? 1 0) id (if dead? 1 0)))
          #t)
         (else
          (when (eq? (item-type item) 'comment)
            (execute! db "UPDATE items SET descendants = descendants + ? WHERE id = ?"
                      (if dead? -1 1) (item-story item)))
          #t))))))
