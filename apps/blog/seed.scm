;;; (blog seed) --- a sample blog of realistic size, in tekuti's layout

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `seed-blog!' makes a bare git repository holding a blog the size of
;;; the one the seed profiled: 200 posts over the five years before now,
;;; 2,000 comments spread unevenly (a few posts draw most of them), 30
;;; tags, 3 drafts, bodies of about 4.5 KB so that the front page's ten
;;; posts make a page of about 50 KB.  The text is made from a word list
;;; by a fixed random state: every run makes the same blog but for the
;;; dates, which end today.
;;;
;;; All blobs are written by one `git hash-object --stdin-paths' from
;;; files in a temporary directory, then committed as one change through
;;; `commit-edits!': seconds, where a commit a post would take minutes.
;;;
;;; Code:

(define-module (blog seed)
  #:use-module (srfi srfi-1)
  #:use-module (ice-9 match)
  #:use-module (blog git)
  #:use-module (blog store)
  #:export (seed-blog!
            sample-tags))

(define sample-tags
  '("guile" "scheme" "web" "http" "performance" "gc" "compilers" "lisp"
    "javascript" "webassembly" "gnome" "igalia" "free-software" "linux"
    "benchmarks" "git" "tekuti" "profiling" "concurrency" "fibers"
    "parsing" "types" "ffi" "c" "rust" "security" "unicode" "emacs"
    "books" "travel"))

(define words
  #("the" "compiler" "heap" "allocation" "closure" "continuation" "server"
    "request" "response" "header" "socket" "epoll" "garbage" "collector"
    "pointer" "register" "instruction" "cache" "branch" "commit" "tree"
    "module" "macro" "syntax" "expansion" "optimizer" "inlining" "loop"
    "thread" "fiber" "channel" "queue" "latency" "throughput" "benchmark"
    "profile" "kernel" "buffer" "string" "bytevector" "record" "procedure"
    "variable" "binding" "scope" "frame" "stack" "call" "return" "value"
    "is" "was" "will" "can" "should" "makes" "takes" "gives" "finds" "keeps"
    "fast" "slow" "small" "large" "simple" "subtle" "careful" "precise"
    "and" "but" "so" "then" "because" "when" "while" "of" "in" "on" "with"
    "a" "an" "this" "that" "every" "each" "some" "no" "one" "two" "three"))

(define (pick state vec)
  (vector-ref vec (random (vector-length vec) state)))

(define (sentence state)
  (let* ((n (+ 6 (random 14 state)))
         (ws (map (lambda (_) (pick state words)) (iota n)))
         (text (string-join ws " ")))
    (string-append (string (char-upcase (string-ref text 0)))
                   (substring text 1) ".")))

(define (paragraph state)
  (let ((n (+ 3 (random 5 state))))
    (string-join (map (lambda (_) (sentence state)) (iota n)) " ")))

(define (html-body state size)
  ;; paragraphs separated by empty lines (tekuti's "wordpress" format),
  ;; with a link, some emphasis and now and then code, up to SIZE bytes
  (let loop ((out '()) (length 0) (n 0))
    (if (>= length size)
        (string-join (reverse out) "\n\n")
        (let ((para (case (random 8 state)
                      ((0) (string-append "<pre>(define (f x)\n  (* x "
                                          (number->string (random 100 state))
                                          "))</pre>"))
                      ((1) (string-append (paragraph state) " See <a href=\"https://www.gnu.org/software/guile/\">Guile</a>."))
                      ((2) (string-append "<em>" (sentence state) "</em> " (paragraph state)))
                      (else (paragraph state)))))
          (loop (cons para out) (+ length (string-length para) 2) (+ n 1))))))

(define (title state)
  (let ((ws (map (lambda (_) (pick state words)) (iota (+ 2 (random 5 state))))))
    (string-join ws " ")))

(define commenters
  #("Aleix" "Ludovic" "Mark" "Chris" "Jessica" "Andy" "Amirouche" "Arne"
    "Maxime" "Ricardo" "Taylan" "David" "Nala" "Zoe" "Pjotr" "Efraim"))

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
                     "comment_status: open\n"))
    ;; Posts, oldest first, evenly spread with some jitter.
    (let* ((total (+ posts drafts))
           (keys
            (map (lambda (i)
                   (let* ((timestamp (+ start (quotient (* i span) total)
                                        (random (quotient day 2) state)))
                          (title (string-append (title state) " "
                                                (number->string (+ i 1))))
                          (tags (delete-duplicates
                                 (map (lambda (_) (list-ref sample-tags
                                                            (random (length sample-tags) state)))
                                      (iota (+ 1 (random 4 state))))))
                          (status (if (< i posts) "publish" "draft"))
                          (key (make-post-key timestamp (title->name title))))
                     (add! (string-append key "/metadata") (metadata title timestamp tags status))
                     (add! (string-append key "/content")
                           (html-body state (+ 3800 (random 800 state))))
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
                        (string-join (map (lambda (_) (paragraph state))
                                          (iota (+ 1 (random 2 state))))
                                     "\n\n"))))
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
