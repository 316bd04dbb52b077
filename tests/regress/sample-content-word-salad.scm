;;; tests/regress/sample-content-word-salad.scm --- the samples' name and text
;;;
;;; Issue 25 (l).  The blog was titled "wingolog", a real person's blog,
;;; and the sample blog's posts and comments, like the news site's
;;; comments, were words drawn at random ("the heap is closure epoll
;;; was ...").  The blog is now "plucky notes"; its sample posts are the
;;; sections of plucky's own manual (README.md, docs/*.md), its comments
;;; and the news site's sentences a reader would write.

(add-to-load-path (string-append (getcwd) "/apps"))

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (ice-9 ftw)
             (ice-9 popen)
             (ice-9 rdelim)
             (ice-9 regex)
             (ice-9 textual-ports)
             (sqlite3)
             (tests lib harness)
             (plucky web html)
             (blog seed)
             (blog views)
             (news db)
             (news seed))

(define dir (mkdtemp (string-copy "/tmp/plucky-samples-XXXXXX")))

(define (git . args)
  (let* ((port (apply open-pipe* OPEN_READ "git" (string-append "--git-dir=" dir "/blog.git") args))
         (text (get-string-all port)))
    (close-pipe port)
    text))

(define (lines text) (remove string-null? (string-split text #\newline)))

(define manual-headings
  ;; every "# " and "## " heading of the manual
  (append-map (lambda (file)
                (filter-map (lambda (line)
                              (cond ((string-prefix? "## " line) (substring line 3))
                                    ((string-prefix? "# " line) (substring line 2))
                                    (else #f)))
                            (lines (call-with-input-file file get-string-all))))
              (cons "README.md"
                    (map (lambda (name) (string-append "docs/" name))
                         (scandir "docs" (lambda (name) (string-suffix? ".md" name)))))))

(define (written-like-prose? text)
  ;; each sentence of TEXT begins with a capital letter, and no word
  ;; follows itself (words drawn at random often do: "the the")
  (and (every (lambda (sentence)
                (let ((s (string-trim sentence)))
                  (or (string-null? s) (char-upper-case? (string-ref s 0)))))
              (string-split (regexp-substitute/global #f "[.?!] " text 'pre "\n" 'post)
                            #\newline))
       (let loop ((words (string-tokenize (string-downcase text) char-set:letter)))
         (or (null? words) (null? (cdr words))
             (and (not (string=? (car words) (cadr words)))
                  (loop (cdr words)))))))

(test-begin "regress/sample-content-word-salad")

(test-assert "the blog's name is its own" (not (string-contains blog-title "wingolog")))
(test-assert "and its pages carry it"
  (let ((html (html->string (page "" blog-title '()))))
    (and (string-contains html (string-append ">" blog-title "<"))
         (not (string-contains html "wingolog")))))

(seed-blog! (string-append dir "/blog.git") #:posts 30 #:comments 60 #:drafts 0)
(let* ((keys (lines (git "ls-tree" "--name-only" "master")))
       (metadata (map (lambda (key) (git "show" (string-append "master:" key "/metadata"))) keys))
       (titles (map (lambda (text)
                      (let ((line (find (lambda (l) (string-prefix? "title: " l)) (lines text))))
                        (substring line 7)))
                    metadata)))
  (test-equal "30 posts" 30 (length keys))
  (test-assert "each titled by a heading of the manual"
    (every (lambda (title) (member title manual-headings)) titles))
  (test-assert "in Markdown"
    (every (lambda (text) (string-contains text "format: markdown")) metadata))
  (test-assert "a post's text is its section of the manual"
    (let ((content (git "show" (string-append "master:" (car keys) "/content")))
          (readme (call-with-input-file "README.md" get-string-all)))
      (string-contains readme (car (lines content)))))
  (let ((comments (append-map (lambda (key)
                                (let ((names (lines (git "ls-tree" "--name-only"
                                                         (string-append "master:" key "/comments")))))
                                  (map (lambda (name)
                                         (git "show" (string-append "master:" key "/comments/" name)))
                                       names)))
                              (filter (lambda (key)
                                        (string-contains (git "ls-tree" "master" (string-append key "/"))
                                                         "comments"))
                                      keys))))
    (test-equal "60 comments" 60 (length comments))
    (test-assert "written as prose"
      (every (lambda (blob)
               ;; the body follows the blank line after the fields
               (let ((at (string-contains blob "\n\n")))
                 (and at (written-like-prose? (string-trim-both (substring blob at))))))
             comments))))

(let ((db (open-news-db (string-append dir "/news.db"))))
  (seed-news! db #:password-hash "x" #:users 20 #:stories 30 #:comments 100)
  (let* ((statement (sqlite-prepare (news-db-handle db)
                                    "SELECT text FROM items WHERE type = 'comment'"))
         (texts (sqlite-map (lambda (row) (vector-ref row 0)) statement)))
    (sqlite-finalize statement)
    (test-equal "the news site: 100 comments" 100 (length texts))
    (test-assert "written as prose" (every written-like-prose? texts)))
  (close-news-db db))

(system* "rm" "-rf" dir)

(test-end "regress/sample-content-word-salad")
