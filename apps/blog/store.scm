;;; (blog store) --- posts and comments in tekuti's repository layout

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The layout is tekuti's, read as it is, so that a tekuti blog is served
;;; without converting anything.  The branch's root tree holds one subtree
;;; per post, named by the post's key: its date and name made one path
;;; component, "2012%2f03%2f08%2fan-in-depth-look" (the path
;;; "2012/03/08/an-in-depth-look", URI-encoded once more, lower-case).  A
;;; post's tree holds:
;;;
;;;   metadata   lines "NAME: VALUE": timestamp (seconds), title, name,
;;;              tags (comma-separated), status ("publish" is public;
;;;              "draft" and "private" are the author's), comment_status
;;;              ("open" or "closed"), format (absent: HTML, tekuti's
;;;              "wordpress"; "markdown" or "marxdown": Markdown)
;;;   content    the body
;;;   comments/  one blob a comment, named by its own id: header lines
;;;              (timestamp, author, author_email, author_url), an empty
;;;              line, the body
;;;
;;; Anything else in the repository (tekuti's "index" branch, other
;;; files in a post's tree) is left alone.
;;;
;;; `load-blog-index' reads the posts' metadata of a commit into a
;;; <blog-index>: every post sorted newest first, found by path, and the
;;; public posts by tag.  A post whose tree did not change since the
;;; previous index is reused, as tekuti does, so that a comment costs a
;;; re-read of one post, not of 200.  Bodies and comments are read when
;;; a page needs them.
;;;
;;; Code:

(define-module (blog store)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module ((srfi srfi-19) #:hide (current-time))
  #:use-module (ice-9 match)
  #:use-module (ice-9 regex)
  #:use-module (web uri)
  #:use-module (blog git)
  #:export (post?
            post-key post-tree post-path post-title post-timestamp post-tags
            post-status post-name post-comments-open? post-format
            post-content-id post-comments-id post-comment-count
            post-published?
            comment?
            comment-id comment-timestamp comment-author comment-email
            comment-url comment-format comment-body
            blog-index?
            blog-index-commit blog-index-time blog-index-posts
            blog-index-public-posts blog-index-tags
            load-blog-index check-blog-layout
            index-post-by-path posts-tagged
            post-content post-comments
            make-post-key title->name parse-metadata
            comment-blob-text
            add-comment! save-post! delete-post! delete-comment! revert-commit!))

;;; Records.

(define-record-type <post>
  (make-post key tree path title timestamp tags status name comments-open?
             format content-id comments-id comment-count)
  post?
  (key post-key)                        ; the tree's name in the root
  (tree post-tree)                      ; the post tree's id
  (path post-path)                      ; "2012/03/08/name": the URL's tail
  (title post-title)
  (timestamp post-timestamp)            ; seconds
  (tags post-tags)                      ; list of strings
  (status post-status)                  ; "publish", "draft", "private"…
  (name post-name)
  (comments-open? post-comments-open?)
  (format post-format)                  ; 'html or 'markdown
  (content-id post-content-id)          ; blob id, or #f
  (comments-id post-comments-id)        ; tree id, or #f
  (comment-count post-comment-count))

(define (post-published? post)
  "Return #t if POST is public (its status is \"publish\")."
  (equal? (post-status post) "publish"))

(define-record-type <comment>
  (make-comment id timestamp author email url format body)
  comment?
  (id comment-id)                       ; the blob's name in comments/
  (timestamp comment-timestamp)
  (author comment-author)
  (email comment-email)
  (url comment-url)
  (format comment-format)               ; 'html (tekuti's "wordpress") or 'markdown
  (body comment-body))                  ; as stored: escaped text or tekuti's XHTML

(define-record-type <blog-index>
  (make-blog-index commit time posts public-posts by-path tags)
  blog-index?
  (commit blog-index-commit)            ; hex
  (time blog-index-time)                ; the commit's time, seconds
  (posts blog-index-posts)              ; every post, newest first
  (public-posts blog-index-public-posts) ; the published ones, newest first
  (by-path blog-index-by-path)          ; path -> post
  (tags blog-index-tags))               ; tag -> public posts, newest first

;;; Metadata.

(define metadata-line (make-regexp "^([^: ]+): *(.*)$"))

(define (parse-metadata text)
  "Return the alist of symbol -> string of TEXT's \"NAME: VALUE\" lines
(tekuti's metadata and comment headers); other lines are ignored."
  (filter-map (lambda (line)
                (let ((m (regexp-exec metadata-line line)))
                  (and m (cons (string->symbol (match:substring m 1))
                               (string-trim-both (match:substring m 2))))))
              (string-split text #\newline)))

(define (split-tags text)
  (delete-duplicates
   (remove string-null? (map string-trim-both (string-split (or text "") #\,)))))

(define (key->path key)
  ;; "2012%2f03%2f08%2fname" -> "2012/03/08/name"; the components
  ;; decoded, so that the URL the site writes and the one a browser sends
  ;; back (decoded by the router) compare equal.
  (string-join (split-and-decode-uri-path (uri-decode key)) "/"))

(define (make-post-key timestamp name)
  "Return tekuti's key of a post of NAME written at TIMESTAMP (seconds):
its date and name as one path component."
  (string-downcase
   (uri-encode (encode-and-join-uri-path
                (list (date->string (time-utc->date (make-time time-utc 0 timestamp) 0)
                                    "~Y")
                      (date->string (time-utc->date (make-time time-utc 0 timestamp) 0)
                                    "~m")
                      (date->string (time-utc->date (make-time time-utc 0 timestamp) 0)
                                    "~d")
                      name)))))

(define (title->name title)
  "Return the name a post of TITLE gets in its URL: lower-case letters,
digits and dashes."
  (let* ((lower (string-downcase title))
         (dashed (string-map (lambda (c) (if (char-alphabetic? c) c
                                             (if (char-numeric? c) c #\-)))
                             lower))
         (ascii (string-filter (lambda (c) (or (char<=? #\a c #\z) (char-numeric? c)
                                               (char=? c #\-)))
                               dashed))
         (collapsed (regexp-substitute/global #f "-+" ascii 'pre "-" 'post))
         (trimmed (string-trim-both collapsed #\-)))
    (if (string-null? trimmed) "post" trimmed)))

(define (read-post store key tree)
  ;; -> a <post> of the tree TREE named KEY, or #f if it has no metadata
  (let* ((entries (tree-entries store tree))
         (metadata (tree-entry-ref entries "metadata"))
         (content (tree-entry-ref entries "content"))
         (comments (tree-entry-ref entries "comments")))
    (and metadata (eq? (cadr metadata) 'blob)
         (let* ((fields (parse-metadata (blob-text store (caddr metadata))))
                (field (lambda (name) (assq-ref fields name)))
                (comments-id (and comments (eq? (cadr comments) 'tree)
                                  (caddr comments))))
           (make-post key tree (key->path key)
                      (or (field 'title) "(untitled)")
                      (or (and=> (field 'timestamp) string->number) 0)
                      (split-tags (field 'tags))
                      (or (field 'status) "publish")
                      (or (field 'name) "")
                      (equal? (field 'comment_status) "open")
                      (if (member (field 'format) '("markdown" "marxdown")) 'markdown 'html)
                      (and content (caddr content))
                      comments-id
                      (if comments-id
                          (length (tree-entries store comments-id))
                          0))))))

;;; The index of a commit.

(define (newest-first posts)
  (sort posts (lambda (a b) (> (post-timestamp a) (post-timestamp b)))))

(define* (load-blog-index store commit #:optional (previous #f))
  "Return the <blog-index> of COMMIT (hex) of STORE, reusing the posts of
PREVIOUS, an older index, whose trees did not change."
  (let* ((info (commit-info store commit))
         (old (make-hash-table))
         (_ (when previous
              (for-each (lambda (post) (hash-set! old (post-tree post) post))
                        (blog-index-posts previous))))
         (posts (newest-first
                 (filter-map (match-lambda
                               ((name 'tree id)
                                (let ((same (hash-ref old id)))
                                  (if (and same (string=? (post-key same) name))
                                      same
                                      (read-post store name id))))
                               (_ #f))
                             (tree-entries store (commit-info-tree info)))))
         (public (filter post-published? posts))
         (by-path (make-hash-table))
         (tags (make-hash-table)))
    (for-each (lambda (post) (hash-set! by-path (post-path post) post)) posts)
    (for-each (lambda (post)
                (for-each (lambda (tag)
                            (hash-set! tags tag (cons post (hash-ref tags tag '()))))
                          (post-tags post)))
              (reverse public))
    (make-blog-index commit (commit-info-time info) posts public by-path tags)))

(define (check-blog-layout store)
  "Return #t if STORE's branch exists and is in tekuti's layout; else
raise 'blog-error with a one-line message naming what is wrong."
  (let ((commit (branch-commit store)))
    (unless commit
      (throw 'blog-error (format #f "~a: no branch ~a"
                                 (git-store-directory store) "master")))
    (let ((info (catch #t
                  (lambda () (commit-info store commit))
                  (lambda _ (throw 'blog-error
                                   (format #f "~a: the branch's commit ~a cannot be read"
                                           (git-store-directory store) commit))))))
      (for-each (match-lambda
                  ((name 'tree id)
                   (unless (tree-entry-ref (tree-entries store id) "metadata")
                     (throw 'blog-error
                            (format #f "~a: not in tekuti's layout: the tree ~s has no metadata"
                                    (git-store-directory store) name))))
                  ((name _ _)
                   (throw 'blog-error
                          (format #f "~a: not in tekuti's layout: ~s at the root is not a post's tree"
                                  (git-store-directory store) name))))
                (tree-entries store (commit-info-tree info)))
      #t)))

(define (index-post-by-path index path)
  "Return the post of INDEX at PATH (\"2012/03/08/name\"), or #f."
  (hash-ref (blog-index-by-path index) path))

(define (posts-tagged index tag)
  "Return the public posts of INDEX tagged TAG, newest first."
  (hash-ref (blog-index-tags index) tag '()))

;;; Bodies and comments, read when a page needs them.  A blob's id names
;;; its content for ever, hence the table by id.

(define contents (make-hash-table))

(define (post-content store post)
  "Return the body of POST as text (\"\" if it has none)."
  (let ((id (post-content-id post)))
    (if (not id)
        ""
        (or (hash-ref contents id)
            (let ((text (blob-text store id)))
              (when (> (hash-count (const #t) contents) 5000)
                (hash-clear! contents))
              (hash-set! contents id text)
              text)))))

(define (parse-comment id text)
  (let* ((split (or (string-contains text "\n\n") (string-length text)))
         (fields (parse-metadata (substring text 0 split)))
         (body (if (< split (string-length text)) (substring text (+ split 2)) "")))
    (make-comment id
                  (or (and=> (assq-ref fields 'timestamp) string->number) 0)
                  (or (assq-ref fields 'author) "anonymous")
                  (or (assq-ref fields 'author_email) "")
                  (or (assq-ref fields 'author_url) "")
                  (if (member (assq-ref fields 'format) '("markdown" "marxdown")) 'markdown 'html)
                  body)))

(define (post-comments store post)
  "Return the comments of POST, oldest first."
  (if (not (post-comments-id post))
      '()
      (sort (filter-map (match-lambda
                          ((name 'blob id) (parse-comment name (blob-text store id)))
                          (_ #f))
                        (tree-entries store (post-comments-id post)))
            (lambda (a b) (< (comment-timestamp a) (comment-timestamp b))))))

;;; Writes.  Each finds the post again in the branch's newest commit:
;;; the index a request was served from may be older.

(define (current-post-tree store commit key)
  ;; -> the id of the tree KEY in COMMIT's root, or #f
  (and commit
       (match (tree-entry-ref (tree-entries store (commit-info-tree (commit-info store commit)))
                              key)
         ((_ 'tree id) id)
         (_ #f))))

(define (one-line text)
  (string-map (lambda (c) (if (memv c '(#\newline #\return)) #\space c)) text))

(define (comment-blob-text timestamp author email url body)
  "Return the text of a comment blob in tekuti's format."
  (string-append "timestamp: " (number->string timestamp) "\n"
                 "author: " (one-line author) "\n"
                 "author_email: " (one-line email) "\n"
                 "author_url: " (one-line url) "\n"
                 "\n" body))

(define (add-comment! store post text message)
  "Add the comment TEXT (a blob's text, `comment-blob-text') to POST in
STORE's branch and return the comment's id, or #f if the post is gone."
  (let* ((id (write-blob! store text))
         (key (post-key post)))
    (and (commit-edits! store message
                        (lambda (commit)
                          (and (current-post-tree store commit key)
                               `((,(string-append key "/comments/" id) blob ,id)))))
         id)))

(define (post-files store tree prefix)
  ;; -> the paths of the blobs under TREE, PREFIX/… from the root
  (append-map (match-lambda
                ((name 'tree id) (post-files store id (string-append prefix "/" name)))
                ((name _ _) (list (string-append prefix "/" name))))
              (tree-entries store tree)))

(define (metadata-text fields)
  (string-concatenate
   (map (match-lambda ((name . value)
                       (string-append (symbol->string name) ": " (one-line value) "\n")))
        fields)))

(define* (save-post! store #:key old-key title body tags status comments-open?
                     timestamp (format "html") message)
  "Write a post to STORE's branch, a new one if OLD-KEY is #f, else the
post OLD-KEY (renamed, with its comments, if its title or date changed
its key).  Return its key, or #f if OLD-KEY is gone."
  (let* ((name (title->name title))
         (key (make-post-key timestamp name))
         (metadata (write-blob! store
                                (metadata-text
                                 `((timestamp . ,(number->string timestamp))
                                   (tags . ,(string-join tags ", "))
                                   (status . ,status)
                                   (title . ,title)
                                   (name . ,name)
                                   (comment_status . ,(if comments-open? "open" "closed"))
                                   (format . ,format)))))
         (content (write-blob! store body)))
    (and (commit-edits!
          store message
          (lambda (commit)
            (let ((old-tree (and old-key (current-post-tree store commit old-key))))
              (and (or (not old-key) old-tree)
                   (append
                    (if (and old-tree (not (string=? old-key key)))
                        ;; renamed: the comments move too
                        (append-map (lambda (path)
                                      (let ((rest (substring path (string-length old-key))))
                                        (if (member rest '("/metadata" "/content"))
                                            `((,path delete))
                                            `((,path delete)
                                              (,(string-append key rest) blob
                                               ,(blob-id-at store commit path))))))
                                    (post-files store old-tree old-key))
                        '())
                    `((,(string-append key "/metadata") blob ,metadata)
                      (,(string-append key "/content") blob ,content)))))))
         key)))

(define (blob-id-at store commit path)
  (let loop ((tree (commit-info-tree (commit-info store commit)))
             (parts (string-split path #\/)))
    (match (tree-entry-ref (tree-entries store tree) (car parts))
      ((_ _ id) (if (null? (cdr parts)) id (loop id (cdr parts)))))))

(define (delete-post! store key message)
  "Delete the post KEY and its comments from STORE's branch; return the
new commit, or #f if it was gone."
  (commit-edits! store message
                 (lambda (commit)
                   (let ((tree (current-post-tree store commit key)))
                     (and tree
                          (map (lambda (path) `(,path delete))
                               (post-files store tree key)))))))

(define (delete-comment! store key id message)
  "Delete the comment ID of post KEY from STORE's branch; return the new
commit, or #f if it was gone."
  (commit-edits! store message
                 (lambda (commit)
                   (let ((tree (current-post-tree store commit key)))
                     (and tree
                          (member id (map car (post-comment-entries store tree)))
                          `((,(string-append key "/comments/" id) delete)))))))

(define (post-comment-entries store tree)
  (match (tree-entry-ref (tree-entries store tree) "comments")
    ((_ 'tree id) (tree-entries store id))
    (_ '())))

(define (revert-commit! store hex message)
  "Undo the change of commit HEX on STORE's branch (each path it touched
back to what it was before it), as a new commit; return it, or #f if
there was nothing to undo."
  (let ((changes (commit-changes store hex)))
    (and (pair? changes)
         (commit-edits! store message
                        (lambda (commit)
                          (map (match-lambda
                                 ((path #f _) `(,path delete))
                                 ((path old _) `(,path blob ,old)))
                               changes))))))
