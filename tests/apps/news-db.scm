;;; tests/apps/news-db.scm --- (news db) and (news rank): the news site's rules

(add-to-load-path (string-append (getcwd) "/apps"))

(use-modules (srfi srfi-64)
             (srfi srfi-1)
             (ice-9 match)
             (tests lib harness)
             (news rank)
             (news db))

(define now 1780000000)
(define hour 3600)

;; A fresh database in a temporary file per group, removed after.
(define (call-with-db proc)
  (let* ((dir (mkdtemp (string-append (or (getenv "TMPDIR") "/tmp")
                                      "/plucky-news-XXXXXX")))
         (file (string-append dir "/news.db"))
         (db (open-news-db file)))
    (dynamic-wind
      (const #t)
      (lambda () (proc db))
      (lambda ()
        (close-news-db db)
        (for-each (lambda (suffix)
                    (let ((f (string-append file suffix)))
                      (when (file-exists? f) (delete-file f))))
                  '("" "-wal" "-shm"))
        (rmdir dir)))))

(define (users! db . names)
  (for-each (lambda (name) (create-user! db name "hash" now)) names))

(define (karma db name) (user-karma (user-ref db name)))

(test-begin "apps/news-db")

(test-group "frontpage-rank"
  (define (rank points hours . rest)
    (apply frontpage-rank #:type 'story #:points points
           #:age-minutes (* 60 hours) #:url "http://example.com/" rest))
  (test-assert "more points rank higher" (> (rank 10 1) (rank 5 1)))
  (test-assert "older ranks lower" (< (rank 10 10) (rank 10 1)))
  (test-approximate "the formula: (p-1)^0.8 / (h+2)^1.8"
    (/ (expt 9 0.8) (expt 3 1.8)) (rank 10 1) 1e-9)
  (test-approximate "a text post counts 0.4"
    (* 0.4 (rank 10 1)) (rank 10 1 #:url #f) 1e-9)
  (test-approximate "a controversial story: (points/comments)^2"
    (* (expt (/ 10 40) 2) (rank 10 1)) (rank 10 1 #:comments 40) 1e-9)
  (test-assert "an image url counts at most 0.3"
    (<= (frontpage-rank #:type 'story #:points 10 #:age-minutes 60
                        #:url "http://x.org/a.PNG")
        (* 0.3 (rank 10 1))))
  (test-equal "a story with one point ranks 0" 0.0 (rank 1 1)))

(test-group "text-age"
  (test-equal "1 minute ago" (text-age 1))
  (test-equal "59 minutes ago" (text-age 59))
  (test-equal "1 hour ago" (text-age 60))
  (test-equal "3 days ago" (text-age (* 3 1440))))

(test-group "create-user!"
  (call-with-db
   (lambda (db)
     (test-assert "a new name" (create-user! db "alice" "h" now))
     (test-equal "a taken name, in any case" #f (create-user! db "ALICE" "h" now))
     (test-equal "karma starts at 1" 1 (karma db "alice"))
     (test-equal "no such user" #f (user-ref db "bob")))))

(test-group "vote!"
  (call-with-db
   (lambda (db)
     (users! db "alice" "bob" "carol")
     (let ((story (create-story! db "alice" "10.0.0.1" now "http://a.org/" "A" #f)))
       (test-equal "the author's own vote counts" 1 (item-score (item-ref db story)))
       (test-equal "an upvote" 2 (vote! db "bob" story 1 now "10.0.0.2"))
       (test-equal "the author's karma follows" 2 (karma db "alice"))
       (test-equal "a replayed vote" 'already (vote! db "bob" story 1 now "10.0.0.2"))
       (test-equal "score unchanged by the replay" 2 (item-score (item-ref db story)))
       (test-equal "one's own item" 'own (vote! db "alice" story 1 now "10.0.0.1"))
       (test-equal "no downvotes on stories" 'karma (vote! db "carol" story -1 now "10.0.0.3"))
       (test-equal "no such item" 'no-item (vote! db "carol" 999 1 now "10.0.0.3"))
       (test-equal "a vote from the author's address leaves karma"
         2 (begin (vote! db "carol" story 1 now "10.0.0.1") (karma db "alice")))
       (let ((comment (create-comment! db "bob" "10.0.0.2" now story "hi")))
         (test-equal "a downvote needs karma" 'karma (vote! db "carol" comment -1 now "10.0.0.3"))
         (test-equal "votes-by-user-on, the comment's own vote too" `((,story . 1) (,comment . 1))
           (votes-by-user-on db "bob" (list story comment))))))))

(test-group "create-comment!"
  (call-with-db
   (lambda (db)
     (users! db "alice" "bob")
     (let* ((story (create-story! db "alice" "ip" now #f "Ask: ?" "text"))
            (c1 (create-comment! db "bob" "ip" (+ now 1) story "one"))
            (c2 (create-comment! db "alice" "ip" (+ now 2) c1 "reply")))
       (test-equal "the reply's story is the root" story (item-story (item-ref db c2)))
       (test-equal "descendants counted" 2 (item-descendants (item-ref db story)))
       (test-equal "a reply to nothing" #f (create-comment! db "bob" "ip" now 999 "x"))
       (delete-item! db c2)
       (test-equal "a deleted comment leaves the count" 1
         (item-descendants (item-ref db story)))
       (test-equal "comment-tree nests replies"
         (list c1 (list c2))
         (match (comment-tree (thread-comments db story) story (+ now 10))
           (((c . ((r))))
            (list (item-id c) (list (item-id r))))))))))

(test-group "a key: the same post stored once"
  (call-with-db
   (lambda (db)
     (users! db "alice" "bob")
     (let* ((story (create-story! db "alice" "ip" now #f "Keyed" "text" #:key "s1"))
            (again (create-story! db "alice" "ip" now #f "Keyed" "text" #:key "s1"))
            (c1 (create-comment! db "bob" "ip" now story "once" #:key "k1"))
            (c2 (create-comment! db "bob" "ip" now story "once" #:key "k1"))
            (other (create-comment! db "alice" "ip" now story "once" #:key "k1"))
            (plain1 (create-comment! db "bob" "ip" now story "no key"))
            (plain2 (create-comment! db "bob" "ip" now story "no key")))
       (test-equal "a story sent twice: its id again" story again)
       (test-equal "a comment sent twice: its id again" c1 c2)
       (test-assert "another author's key is theirs" (not (= c1 other)))
       (test-assert "without a key, two comments" (not (= plain1 plain2)))
       (test-equal "descendants: the keyed comment counted once" 4
         (item-descendants (item-ref db story)))
       (test-equal "item-by-key" c1 (item-id (item-by-key db "bob" "k1")))
       (test-equal "item-by-key, no key" #f (item-by-key db "bob" #f))))))

(test-group "flag!"
  (call-with-db
   (lambda (db)
     (users! db "alice")
     (let ((story (create-story! db "alice" "ip" now "http://spam.example/" "Spam" #f))
           (flaggers (map (lambda (i) (format #f "user~a" i)) (iota 8))))
       (for-each (lambda (name)
                   (create-user! db name "h" now)
                   (vote! db name story 1 now "x")) ; karma for alice, not them
                 flaggers)
       (test-equal "low karma may not flag" 'karma (flag! db "user0" story))
       (for-each (lambda (name) (set-user-karma! db name 100)) flaggers)
       (test-equal "a flag" 'flagged (flag! db "user0" story))
       (test-equal "the same flag again removes it" 'unflagged (flag! db "user0" story))
       (test-equal "the author may not" 'own (flag! db "alice" story))
       (test-equal "past the threshold, a low-scored item dies"
         '(flagged flagged flagged flagged flagged flagged flagged killed)
         (map (lambda (name) (flag! db name story)) flaggers))))))

(test-group "ranked-stories"
  (call-with-db
   (lambda (db)
     (users! db "alice" "bob" "carol" "dave")
     (let ((old (create-story! db "alice" "a" (- now (* 20 hour)) "http://o.org/" "old" #f))
           (new (create-story! db "alice" "a" (- now hour) "http://n.org/" "new" #f))
           (none (create-story! db "alice" "a" now "http://z.org/" "zero" #f)))
       (for-each (lambda (u) (vote! db u old 1 now u) (vote! db u new 1 now u))
                 '("bob" "carol" "dave"))
       (test-equal "newer with the same points first; one point ranks last"
         (list new old none) (map item-id (ranked-stories db now)))
       (test-equal "story-with-url" new (item-id (story-with-url db "http://n.org/" 0)))
       (test-equal "not since" #f (story-with-url db "http://n.org/" now))
       (test-equal "recent-submissions by user or address"
         3 (recent-submissions db "nobody" "a" 'story 0))))))

(test-group "db-version"
  (call-with-db
   (lambda (db)
     (let ((before (db-version db)))
       (users! db "alice")
       (test-assert "changes on a commit of ours" (not (= before (db-version db))))
       (let ((other (open-news-db (news-db-file db)))
             (seen (db-version db)))
         (create-user! other "bob" "h" now)
         (test-assert "changes on another worker's commit"
           (not (= seen (db-version db))))
         (close-news-db other))))))

(test-end "apps/news-db")
