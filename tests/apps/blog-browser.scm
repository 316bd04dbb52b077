;;; tests/apps/blog-browser.scm --- the blog in headless Chromium

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Run with PLUCKY_BROWSER_TEST=1 (`make check-browser'); plain `make
;;; check' counts it as skipped, as it does the other browser tests.
;;;
;;; `bin/plucky serve apps/blog/main.scm' runs with two workers on a fresh
;;; data directory (the sample blog seeded on its start, the admin's
;;; password given by PLUCKY_BLOG_PASSWORD); tests/apps/blog-browser.py
;;; reads a post, comments on it, logs in to the admin and publishes a
;;; post, printing a line a check, each of which becomes a test here.
;;; Screenshots go to tests/out/blog-*.png, to look at.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (tests lib harness)
             (tests lib command))

(test-begin "apps/blog-browser")

(define password "browser test password")

(if (not (getenv "PLUCKY_BROWSER_TEST"))
    (begin
      (test-skip 1)
      (test-assert "the blog in Chromium (make check-browser)" #f))
    (let ((data (temporary-directory)))
      (call-with-plucky
       "apps/blog/main.scm" (append '("--port" "0" "--workers" "2") allow-root)
       (lambda (plucky)
         (test-assert "plucky serves the blog" (plucky-port plucky))
         (run-browser-script "tests/apps/blog-browser.py"
                             (format #f "http://127.0.0.1:~a/" (plucky-port plucky))
                             (string-append source-root "/tests/out") password))
       #:environment (append (list (string-append "PLUCKY_DATA=" data)
                                   (string-append "PLUCKY_BLOG_PASSWORD=" password))
                             (environ))
       #:timeout 180)
      (remove-tree data)))

(test-end "apps/blog-browser")
