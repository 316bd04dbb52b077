;;; tests/apps/blog-server.scm --- the blog under bin/plucky: workers, start-up

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `bin/plucky serve apps/blog/main.scm' with two workers on a fresh
;;; data directory (the sample seeded on its start): 50 clients post a
;;; comment each at once, landing on both workers, whose writes race on
;;; the branch; every comment must be in git after and on the post's
;;; page.  Then the start-up refusals: a repository that is not git and a
;;; bad setting each stop plucky with one line and exit status 2.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (ice-9 match)
             (srfi srfi-64)
             (ice-9 popen)
             (ice-9 rdelim)
             (ice-9 regex)
             (ice-9 threads)
             (ice-9 textual-ports)
             (tests lib harness)
             (tests lib command))

(define (output . command)
  ;; -> what COMMAND writes on its standard output
  (let* ((port (apply open-pipe* OPEN_READ command))
         (text (get-string-all port)))
    (close-pipe port)
    text))

(define (comment-count repository key)
  (length (remove string-null?
                  (string-split (output "git" "-C" repository "ls-tree"
                                        (string-append "master:" key "/comments"))
                                #\newline))))

(test-begin "apps/blog-server")

(let ((data (temporary-directory)))
  (call-with-plucky
   "apps/blog/main.scm" (append '("--port" "0" "--workers" "2") allow-root)
   (lambda (plucky)
     (test-assert "plucky serves the blog" (plucky-port plucky))
     (let* ((base (format #f "http://127.0.0.1:~a/" (plucky-port plucky)))
            (index (output "curl" "-s" base))
            (path (match:substring (string-match "href=\"(archives/[^\"#]+)\"" index) 1))
            (page (output "curl" "-s" (string-append base path)))
            (token (match:substring (string-match "name=\"token\" value=\"([^\"]+)\"" page) 1))
            (repository (string-append data "/blog.git"))
            ;; the post's key in git: its date and slug, "/" escaped
            ;; (two posts may share a slug: tekuti keys by both)
            (name (string-join (cdr (string-split path #\/)) "%2f"))
            (key (find (lambda (k) (string-ci=? name k))
                       (string-split (output "git" "-C" repository "ls-tree" "--name-only" "master")
                                     #\newline)))
            (before (comment-count repository key))
            (threads
             (map (lambda (i)
                    (call-with-new-thread
                     (lambda ()
                       (output "curl" "-s" "-o" "/dev/null" "-w" "%{http_code}" "--max-time" "120"
                               "--data-urlencode" (string-append "token=" token)
                               "--data-urlencode" (format #f "author=client ~a" i)
                               "--data-urlencode" (format #f "comment=at once ~a" i)
                               (string-append base path)))))
                  (iota 50)))
            (codes (map join-thread threads)))
       (test-equal "50 comments at once: all redirected" (make-list 50 "303") codes)
       (test-equal "all 50 in git" (+ before 50) (comment-count repository key))
       (let ((after (output "curl" "-s" (string-append base path))))
         (test-equal "all 50 on the post's page" 50
           (length (delete-duplicates
                    (map (lambda (m) (match:substring m 0))
                         (list-matches "at once [0-9]+" after))))))))
   #:environment (append (list (string-append "PLUCKY_DATA=" data)
                               "PLUCKY_BLOG_COMMENT_LIMIT=1000"
                               "PLUCKY_BLOG_PASSWORD=server test password")
                         (environ))
   #:timeout 180)
  (remove-tree data))

(define (refused environment)
  ;; -> (exit-status . log) of a start that must fail
  (let ((data (temporary-directory)))
    (let ((plucky (start-plucky "apps/blog/main.scm"
                                (append '("--port" "0" "--workers" "1") allow-root)
                                #:environment (append (list (string-append "PLUCKY_DATA=" data))
                                                      environment (environ))
                                #:timeout 60)))
      (wait-until (lambda () (plucky-exit-status plucky)) #:timeout 60)
      (let ((result (cons (and=> (plucky-exit-status plucky) status:exit-val)
                          (plucky-log plucky))))
        (remove-tree data)
        result))))

(define (plucky-lines log)
  ;; the lines plucky wrote, Guile's compilation notes aside
  (filter (lambda (line) (string-prefix? "plucky:" line))
          (string-split log #\newline)))

(let ((result (refused (list (string-append "PLUCKY_BLOG_REPOSITORY=" (temporary-directory))))))
  (test-equal "not a git repository: exit status 2" 2 (car result))
  (test-assert "not a git repository: one line saying so"
    (match (plucky-lines (cdr result))
      ((line) (string-contains line "not a git repository"))
      (_ #f))))

(let ((result (refused '("PLUCKY_BLOG_COMMENT_DAYS=soon"))))
  (test-equal "a bad setting: exit status 2" 2 (car result))
  (test-assert "a bad setting: one line naming it"
    (match (plucky-lines (cdr result))
      ((line) (string-contains line "PLUCKY_BLOG_COMMENT_DAYS"))
      (_ #f))))

(test-end "apps/blog-server")
