;;; (blog seed) --- a sample blog of realistic size, in tekuti's layout

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `seed-blog!' makes a bare git repository holding a blog the size of
;;; the one the seed profiled: 200 posts over the five years before now,
;;; 2,000 comments spread unevenly (a few posts draw most of them), 30
;;; tags, 3 drafts.  The posts are worth reading: each is a section of
;;; plucky's own manual (README.md and docs/*.md beside apps/), in
;;; Markdown, in the manual's order; past its last section the manual is
;;; read again ("Revisited: ...").  The comments are a few sentences of a
;;; reader's each.  A fixed random state picks tags, commenters and
;;; comments: every run makes the same blog but for the dates, which end
;;; today.
;;;
;;; All blobs are written by one `git hash-object --stdin-paths' from
;;; files in a temporary directory, then committed as one change through
;;; `commit-edits!': seconds, where a commit a post would take minutes.
;;;
;;; Code:

(define-module (blog seed)
  #:use-module (srfi srfi-1)
  #:use-module (ice-9 match)
  #:use-module (ice-9 ftw)
  #:use-module (ice-9 regex)
  #:use-module (ice-9 textual-ports)
  #:use-module (blog git)
  #:use-module (blog store)
  #:export (seed-blog!
            sample-tags))

(define sample-tags
  '("guile" "scheme" "web" "http" "performance" "gc" "security" "tls"
    "json" "websocket" "streaming" "static" "proxy" "deployment" "observe"
    "startup" "workers" "toolkit" "client" "news" "blog" "hacking"
    "benchmarks" "git" "sqlite" "linux" "epoll" "free-software" "unicode"
    "concurrency"))

(define (pick state vec)
  (vector-ref vec (random (vector-length vec) state)))

(define (manual-files)
  ;; -> README.md and docs/*.md of the tree this file is in
  (let* ((here (or (search-path %load-path "blog/seed.scm")
                   (error "blog seed: apps/ is not on the load path")))
         (root (dirname (dirname (dirname here))))
         (docs (string-append root "/docs")))
    (cons (string-append root "/README.md")
          (map (lambda (name) (string-append docs "/" name))
               (or (scandir docs (lambda (name) (string-suffix? ".md" name))) '())))))

(define local-link (make-regexp "\\[([^]]*)\\]\\(([^)h][^)]*)\\)"))

(define (post-markdown lines)
  ;; LINES of the manual -> a post's Markdown: its tables kept as they
  ;; are written (in a code block: the blog's Markdown has no tables),
  ;; links into the manual as their text alone
  (let loop ((lines lines) (out '()) (table? #f))
    (if (null? lines)
        (string-join (reverse (if table? (cons "```" out) out)) "\n")
        (let* ((line (car lines))
               (row? (string-prefix? "|" line)))
          (loop (cdr lines)
                (cons (regexp-substitute/global #f local-link line 'pre 1 'post)
                      (if (eq? row? table?) out (cons "```" out)))
                row?)))))

(define (manual-sections)
  ;; -> ((title tag markdown) ...): each "## " section of the manual, and
  ;; each file's text before its first one, titled by the file's "# "
  (append-map
   (lambda (file)
     (let* ((lines (string-split (call-with-input-file file get-string-all) #\newline))
            (stem (basename file ".md"))
            (tag (if (member stem sample-tags) stem "guile"))
            (file-title (let ((first (find (lambda (l) (string-prefix? "# " l)) lines)))
                          (if first (substring first 2) stem))))
       (let loop ((lines lines) (title file-title) (body '()) (out '()))
         (define (flush)
           (let ((text (string-trim-both (post-markdown (reverse body)))))
             (if (< (string-length text) 200) out (cons (list title tag text) out))))
         (cond
          ((null? lines) (reverse (flush)))
          ((string-prefix? "## " (car lines))
           (loop (cdr lines) (substring (car lines) 3) '() (flush)))
          ((and (string-prefix? "# " (car lines)) (null? body))
           (loop (cdr lines) title body out))
          (else (loop (cdr lines) title (cons (car lines) body) out))))))
   (manual-files)))

(define remarks
  ;; what readers say, a sentence each; a comment is one to three
  #("Thanks for writing this down; the part about keep-alive finally made sense to me."
    "I tried this on a small VPS and got the same numbers, give or take the noise."
    "How does this behave behind nginx with proxy buffering turned off?"
    "The example runs as written, which is rarer than it should be."
    "I would love a follow-up on what happens when a worker dies mid-request."
    "We moved a small internal tool to this last month and nobody noticed, which is the point."
    "Is there a reason not to make this the default?"
    "The comparison with Guile's built-in server is fair: it was never meant to be fast."
    "One nit: the second code block needs the (web response) module as well."
    "This is the clearest explanation of Range requests I have read."
    "I had no idea epoll could be used like that from Scheme."
    "Did you measure it on a machine with more than two cores?"
    "Reading this with the source open side by side helped a lot."
    "Printed it out for our team's reading group."
    "The limits section saved me from a very bad afternoon."
    "Could the same trick work for HTTP/2, or does multiplexing change everything?"
    "I like that every limit has a test; it shows in how calmly it fails."
    "Our logs look much saner since we switched the format to JSON."
    "Would you accept a patch that adds this to the docs' table?"
    "I keep coming back to this page; bookmarking it for real this time."
    "The graph on the status page is a lovely touch."
    "Does this work with the next Guile release as well?"
    "Nice to see the reasoning and not only the result."
    "This answered the question I was about to ask on the mailing list."))

(define (comment-text state)
  (string-join (map (lambda (_) (pick state remarks)) (iota (+ 1 (random 3 state)))) " "))

(define commenters
  #("Sam" "Alex" "Robin" "Kim" "Noor" "Jules" "Mika" "Priya" "Tomas" "Lena"
    "Oskar" "Yuki" "Ines" "Rafael" "Amara" "Dmitri"))

(define day 86400)

(define* (seed-blog! directory #:key (posts 200) (comments 2000) (drafts 3)
                     (now (current-time)) (years 5) (private? #f))
  "Make DIRECTORY a bare git repository holding a sample blog in tekuti's
layout (see the commentary) and return its git store.  DIRECTORY must
not exist or be empty.  With PRIVATE?, the repository is its user's
alone: directories 0700, files 0600, kept so by git (its
core.sharedRepository) as commits are added."
  (unless (file-exists? directory) (mkdir directory (if private? #o700 #o777)))
  (apply system* "git" "init" "-q" "--bare" "-b" "master"
         `(,@(if private? '("--shared=0600") '()) ,directory))
  (let* ((store (open-git-store directory))
         (state (seed->random-state 20120308))
         (sections (list->vector (manual-sections)))
         (temporary (mkdtemp (string-append (or (getenv "TMPDIR") "/tmp")
                                            "/plucky-blog-seed-XXXXXX")))
         (files '())                    ; (path-in-repository . file), reversed
         (count 0)
         (span (* years 365 day))
         (start (- now span)))
    (define (add! path text)
      (set! count (+ count 1))
      (let ((file (string-append temporary "/" (number->string count))))
        (call-with-output-file file
          (lambda (port) (set-port-encoding! port "UTF-8") (display text port)))
        (set! files (cons (cons path file) files))))
    (define (metadata title timestamp tags status)
      (string-append "timestamp: " (number->string timestamp) "\n"
                     "tags: " (string-join tags ", ") "\n"
                     "status: " status "\n"
                     "title: " title "\n"
                     "name: " (title->name title) "\n"
                     "format: markdown\n"
                     "comment_status: open\n"))
    ;; Posts, oldest first, evenly spread with some jitter.
    (let* ((total (+ posts drafts))
           (keys
            (map (lambda (i)
                   (let* ((timestamp (+ start (quotient (* i span) total)
                                        (random (quotient day 2) state)))
                          (section (vector-ref sections (modulo i (vector-length sections))))
                          (title (if (< i (vector-length sections))
                                     (car section)
                                     (string-append "Revisited: " (car section))))
                          (tags (delete-duplicates
                                 (cons (cadr section)
                                       (map (lambda (_) (list-ref sample-tags
                                                                  (random (length sample-tags) state)))
                                            (iota (random 3 state))))))
                          (status (if (< i posts) "publish" "draft"))
                          (key (make-post-key timestamp (title->name title))))
                     (add! (string-append key "/metadata") (metadata title timestamp tags status))
                     (add! (string-append key "/content") (caddr section))
                     (cons key timestamp)))
                 (iota total))))
      ;; Comments: a Zipf-like spread over the published posts.
      (let ((published (list->vector (take keys posts))))
        (do ((i 0 (+ i 1))) ((= i comments))
          (let* ((r (random 1.0 state))
                 (post (vector-ref published
                                   (min (- posts 1)
                                        (inexact->exact (floor (* posts (* r r r)))))))
                 (who (pick state commenters))
                 (text (comment-blob-text
                        (+ (cdr post) (* 3600 (+ 1 (random 200 state))))
                        who
                        (string-append (string-downcase who) "@example.org")
                        (if (zero? (random 3 state))
                            (string-append "https://" (string-downcase who) ".example.org/")
                            "")
                        (comment-text state))))
            ;; named by its id, which is known once written: a placeholder
            (add! (string-append (car post) "/comments/") text)))))
    (let* ((files (reverse files))
           (ids (string-split
                 (string-trim-right
                  (git-command store '("hash-object" "-w" "--stdin-paths")
                               (string-concatenate
                                (map (lambda (f) (string-append (cdr f) "\n")) files))))
                 #\newline))
           (edits (map (lambda (f id)
                         (let ((path (car f)))
                           (list (if (string-suffix? "/" path)
                                     (string-append path id)
                                     path)
                                 'blob id)))
                       files ids)))
      (commit-edits! store "sample blog: 200 posts, 2,000 comments"
                     (lambda (old) edits))
      (for-each (lambda (f) (delete-file (cdr f))) files)
      (rmdir temporary)
      store)))
