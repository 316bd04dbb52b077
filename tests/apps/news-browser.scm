;;; tests/apps/news-browser.scm --- the demo's news site in headless Chromium

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `make check-browser' runs this file with PLUCKY_BROWSER_TEST=1 (plain
;;; `make check' counts it as skipped, as it does the status page's
;;; browser test: Debian's Chromium is large to install).
;;;
;;; `bin/plucky serve apps/demo.scm' runs with two workers on a fresh
;;; data directory (seeded on its start); tests/apps/news-browser.py
;;; clicks through the news site as a newcomer would and prints a line a
;;; check, each of which becomes a test here.  Screenshots go to
;;; tests/out/news-*.png, to look at.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (tests lib harness)
             (tests lib command))

(test-begin "apps/news-browser")

(if (not (getenv "PLUCKY_BROWSER_TEST"))
    (begin
      (test-skip 1)
      (test-assert "news site in Chromium (make check-browser)" #f))
    (let ((data (temporary-directory)))
      (call-with-plucky
       "apps/demo.scm" (append '("--port" "0" "--workers" "2" "--status") allow-root)
       (lambda (plucky)
         (test-assert "plucky serves the demo" (plucky-port plucky))
         (run-browser-script "tests/apps/news-browser.py"
                             (format #f "http://127.0.0.1:~a/news/" (plucky-port plucky))
                             (string-append source-root "/tests/out")))
       #:environment (cons (string-append "PLUCKY_DATA=" data) (environ))
       #:timeout 120)
      (remove-tree data)))

(test-end "apps/news-browser")
