;;; (news seed) --- realistic data for the news site

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `seed-news!' fills an empty database with a site that looks lived in:
;;; by default 200 users, 1,000 stories over the last two weeks (a few an
;;; hour, as on a busy site), 10,000 threaded comments that follow the
;;; stories' popularity, and votes whose counts are heavy-tailed (most
;;; stories get a handful, a few get hundreds).  Each vote is a row, made
;;; through (news db)'s own `vote!', so karma, scores and the rules agree
;;; with what the site would have recorded; all of it is one transaction.
;;;
;;; Comments (and the text of Ask stories) are a few sentences drawn
;;; from a list of what commenters say, not words at random.  The data is
;;; a function of the random seed: the same seed, the same site, which the
;;; benchmarks rely on (bench/news).
;;;
;;; Code:

(define-module (news seed)
  #:use-module (srfi srfi-1)
  #:use-module (news db)
  #:export (seed-news!))

(define adjectives
  #("quiet" "rusty" "brave" "lazy" "clever" "purple" "swift" "sleepy" "bold"
    "tiny" "grumpy" "lucky" "mellow" "nimble" "odd" "proud" "shy" "witty"
    "zesty" "frosty"))

(define nouns
  #("fox" "owl" "lambda" "cons" "otter" "parser" "kernel" "badger" "heron"
    "macro" "thunk" "falcon" "socket" "walrus" "closure" "comet" "gopher"
    "monad" "raven" "pixel"))

(define subjects
  #("a Scheme compiler" "SQLite" "epoll" "garbage collection" "HTTP/1.1"
    "a tiny web server" "Guile" "continuations" "static typing" "Lisp machines"
    "the Linux scheduler" "TLS 1.3" "WebAssembly" "a text editor" "Unicode"
    "B-trees" "hash tables" "the JVM" "CRDTs" "a 6502 emulator" "Forth"
    "ray tracing" "regular expressions" "Git's object model" "DNS"))

(define title-forms
  #("How ~a works" "Why ~a is harder than it looks" "Show: ~a in 500 lines"
    "The history of ~a" "~a, explained with diagrams" "Rewriting ~a in Rust"
    "What I learned building ~a" "A gentle introduction to ~a"
    "~a considered harmful" "Notes on ~a (2019)" "Making ~a ten times faster"
    "The unreasonable effectiveness of ~a"))

(define ask-forms
  #("Ask: how do you learn ~a?" "Ask: is ~a worth it in 2026?"
    "Ask: best resources on ~a?" "Ask: who still uses ~a?"))

(define domains
  #("example.com" "blog.example.org" "lwn.example" "acm.example.org"
    "papers.example.edu" "github.example.com" "medium.example.com"
    "news.example.net" "wiki.example.org" "research.example.com"))

(define remarks
  ;; what commenters say, a sentence each; a comment is one to four
  #("I ran into the same thing last year, and the fix was a smaller buffer, not a faster parser."
    "Do you have numbers for the p99, or only the median?"
    "The article skips the hard part: what happens when the disk is full."
    "This matches what we saw in production, almost to the millisecond."
    "Worth reading the original paper; the blog post leaves out the proofs."
    "I disagree with the conclusion, but the measurements look careful."
    "We tried this at work and went back after a month: the tooling was not there yet."
    "Simple designs age better; this is a good example of why."
    "The benchmark runs the client and the server on the same core, so take the figures with some salt."
    "Nice write-up. The diagrams alone are worth the click."
    "Has anyone tried this on ARM? The memory model might change the story."
    "It is slower on small inputs, which is the case most users have."
    "The interesting bit is in the footnotes."
    "I maintain a project in this space; happy to answer questions."
    "Every few years someone rediscovers this, and every time it is still true."
    "The comments here are better than the article, as usual."
    "I would like to see the same test with TLS turned on."
    "Correct me if I am wrong, but this is what Lisp machines did in the eighties."
    "Good point about latency: the average hides everything that matters."
    "Our team switched after reading this, and the pager has been quiet since."
    "The title oversells it a little, but the content is solid."
    "There is a subtle bug in the second example: the loop never frees the buffer."
    "Tests that start a real server caught more of our bugs than all the mocks did."
    "I learned more from this thread than from a semester of the course."
    "Does it still hold with a thousand connections, or only with ten?"))

(define (pick state vec)
  (vector-ref vec (random (vector-length vec) state)))

(define (user-names n state)
  ;; Adjective + noun, with a number where that pair is taken.
  (let loop ((i 0) (names '()) (seen (make-hash-table)))
    (if (= i n)
        (reverse names)
        (let* ((base (string-append (pick state adjectives) (pick state nouns)))
               (name (if (hash-ref seen base)
                         (string-append base (number->string (random 1000 state)))
                         base)))
          (if (hash-ref seen name)
              (loop i names seen)
              (begin
                (hash-set! seen name #t)
                (loop (+ i 1) (cons name names) seen)))))))

(define (paragraphs state)
  ;; -> a comment's text: a few of the remarks
  (string-join (map (lambda (_) (pick state remarks))
                    (iota (+ 1 (random 4 state))))
               " "))

;; Heavy-tailed points: most stories a few, some hundreds (a Pareto
;; draw, capped by the number of users who can vote).
(define (draw-votes state cap)
  (min cap (inexact->exact (floor (/ 1.0 (expt (- 1.0 (random:uniform state))
                                               1.1))))))

(define (shuffle! vec state)
  (let loop ((i (- (vector-length vec) 1)))
    (when (> i 0)
      (let* ((j (random (+ i 1) state))
             (t (vector-ref vec i)))
        (vector-set! vec i (vector-ref vec j))
        (vector-set! vec j t)
        (loop (- i 1)))))
  vec)

(define (voters state users n)
  (let ((all (shuffle! (list->vector users) state)))
    (list-head (vector->list all) (min n (vector-length all)))))

(define* (seed-news! db #:key password-hash (now (current-time))
                     (users 200) (stories 1000) (comments 10000)
                     (days 14) (seed 2026))
  "Fill DB with USERS users (each with PASSWORD-HASH), STORIES stories
over the last DAYS days before NOW and COMMENTS comments, with votes;
return the list of user names.  The same SEED gives the same data."
  (let* ((state (seed->random-state seed))
         (names (user-names users state))
         (span (* days 86400))
         (ip (lambda (name) (string-append "10.0." (number->string (string-length name))
                                           "." (number->string (string-hash name 250)))))
         (story-ids (make-vector stories #f))
         (story-times (make-hash-table))
         (story-weight (make-vector stories 1)))
    (call-with-transaction db
      (lambda ()
        (for-each (lambda (name)
                    (create-user! db name password-hash
                                  (- now span (random (* 365 86400) state))))
                  names)
        ;; Stories, oldest first, evenly over the span.
        (do ((i 0 (+ i 1))) ((= i stories))
          (let* ((time (- now (- span (quotient (* i span) stories))
                          (- (random 600 state))))
                 (by (list-ref names (random users state)))
                 (subject (pick state subjects))
                 (ask? (< (random 10 state) 1))
                 (title (format #f (pick state (if ask? ask-forms title-forms))
                                subject))
                 (title (if (> (string-length title) 80) (substring title 0 80) title))
                 (url (and (not ask?)
                           (format #f "https://~a/~a/~a" (pick state domains)
                                   (+ 2010 (random 16 state)) (+ i 1))))
                 (text (and ask? (paragraphs state)))
                 (id (create-story! db by (ip by) time url title text))
                 (n (draw-votes state (- users 1))))
            (vector-set! story-ids i id)
            (hashv-set! story-times id time)
            (vector-set! story-weight i (+ 1 n))
            (for-each (lambda (voter)
                        (vote! db voter id 1 (+ time (random 3600 state))
                               (ip voter)))
                      (voters state (delete by names) n))))
        ;; Comments: each on a story chosen by its weight, half of them
        ;; replies to an earlier comment of the same thread.
        (let* ((total (reduce + 0 (vector->list story-weight)))
               (cumulative (let ((v (make-vector stories 0)))
                             (let loop ((i 0) (sum 0))
                               (when (< i stories)
                                 (let ((sum (+ sum (vector-ref story-weight i))))
                                   (vector-set! v i sum)
                                   (loop (+ i 1) sum))))
                             v))
               (threads (make-hash-table)))
          (define (weighted-story)
            (let ((r (random total state)))
              (let search ((lo 0) (hi (- stories 1)))
                (if (= lo hi)
                    lo
                    (let ((mid (quotient (+ lo hi) 2)))
                      (if (< r (vector-ref cumulative mid))
                          (search lo mid)
                          (search (+ mid 1) hi)))))))
          (do ((i 0 (+ i 1))) ((= i comments))
            (let* ((s (weighted-story))
                   (story (vector-ref story-ids s))
                   (earlier (hashv-ref threads story '()))
                   (parent (if (and (pair? earlier) (< (random 2 state) 1))
                               (list-ref earlier (random (length earlier) state))
                               story))
                   (story-time (hashv-ref story-times story))
                   (time (min now (+ story-time 60
                                     (random (max 1 (quotient (- now story-time) 2))
                                             state))))
                   (by (list-ref names (random users state)))
                   (id (create-comment! db by (ip by) time parent (paragraphs state))))
              (hashv-set! threads story (cons id earlier))
              (for-each (lambda (voter)
                          (vote! db voter id 1 time (ip voter)))
                        (voters state names (random 4 state))))))
        ;; A few users with karma enough to downvote and flag.
        (for-each (lambda (name) (set-user-karma! db name (+ 40 (random 500 state))))
                  (list-head names (min 10 users)))))
    names))
