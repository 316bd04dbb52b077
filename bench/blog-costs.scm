;;; bench/blog-costs.scm --- what the blog's cache saves, in microseconds

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Usage: guile -L . -L apps bench/blog-costs.scm REPOSITORY
;;;
;;; Prints, for the blog in REPOSITORY (a sample from apps/blog/seed.scm):
;;;   ref-check   `branch-commit': the per-request read of refs/heads/master
;;;   index-read  `load-blog-index' of the commit, nothing reused: what a
;;;               worker pays once after a change it cannot reuse
;;;   reindex     the same with every post reused: the walk of the root
;;;               tree, what a comment costs beside re-reading its one post
;;;   render-index, render-post  a cache miss of that page: the page
;;;               made from the index, bodies and comments read from git
;;; each the mean of many runs, one line "NAME MICROSECONDS".  Bodies are
;;; read once per blob id and kept (see (blog store)), so the renders
;;; after the first read them from memory, like a worker's later misses.

;;; bench/blog runs it on its sample after the load.
;;;
;;; Code:

(use-modules (blog git) (blog store) (blog markup) (blog views)
             (plucky web html) (srfi srfi-1))

(define repository (cadr (command-line)))
(define store (open-git-store repository))

(define (mean-us n thunk)
  (thunk)                               ; warm
  (let ((start (get-internal-real-time)))
    (do ((i 0 (+ i 1))) ((= i n)) (thunk))
    (/ (- (get-internal-real-time) start) (* n (/ internal-time-units-per-second 1e6)))))

(define (report name us)
  (format #t "~a ~,1f~%" name us))

(define commit (branch-commit store))
(define index (load-blog-index store commit))
(report 'ref-check (mean-us 20000 (lambda () (branch-commit store))))
(report 'index-read (mean-us 5 (lambda () (load-blog-index store commit))))
(report 'reindex (mean-us 20 (lambda () (load-blog-index store commit index))))
(define (render-index)
  (html->bytevector
   (page "" blog-title
         (map (lambda (post)
                (post-article "" post (post->html (post-content store post) (post-format post))))
              (take (blog-index-public-posts index) 10))
         #:index index)))
(report 'render-index (mean-us 200 render-index))
(define post (car (blog-index-public-posts index)))
(report 'render-post
        (mean-us 200 (lambda ()
                       (html->bytevector
                        (post-page "../../../../" index post
                                   (post->html (post-content store post) (post-format post))
                                   (post-comments store post) '()
                                   #:open? #t #:token "t")))))
