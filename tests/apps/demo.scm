;;; tests/apps/demo.scm --- the demo site's assets: stylesheets and images

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `bin/plucky serve apps/demo.scm' on a fresh data directory: each of
;;; the landing page, the news site and the blog links its stylesheet,
;;; which (plucky web static) serves from apps/…/static/ as text/css
;;; with an ETag, a Cache-Control, a 304 to If-None-Match and the gzip
;;; or zstd sibling the first start made to those that ask; the logo is
;;; an SVG image.  Alone, the news site and the blog carry their sheets
;;; inline (`stylesheet' #f).  Every page and file carries the headers of
;;; (plucky web security) (issue 25 (h)).
;;;
;;; Code:

(add-to-load-path (string-append (getcwd) "/apps"))

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 match)
             (ice-9 popen)
             (ice-9 regex)
             (ice-9 textual-ports)
             (plucky web html)
             ((news views) #:prefix news:)
             ((blog views) #:prefix blog:)
             (tests lib harness)
             (tests lib command))

(test-begin "apps/demo")

(define (curl . args)
  ;; -> (values head body): what curl -i gives for ARGS, split at the
  ;; blank line
  (let* ((port (apply open-pipe* OPEN_READ "curl" "-s" "-i" "--max-time" "20" args))
         (text (get-string-all port)))
    (close-pipe port)
    (let ((end (string-contains text "\r\n\r\n")))
      (if end
          (values (substring text 0 end) (substring text (+ end 4)))
          (values text "")))))

(define (header head name)
  ;; -> the value of header NAME in HEAD, or #f
  (let ((m (string-match (string-append "\r\n" name ": *([^\r]*)") head)))
    (and m (match:substring m 1))))

(define (status head)
  (string->number (cadr (string-split head #\space))))

(define (stylesheet-link page)
  ;; -> the href of PAGE's stylesheet link, or #f
  (let ((m (string-match "<link rel=\"stylesheet\" href=\"([^\"]+)\">" page)))
    (and m (match:substring m 1))))

(define (check-stylesheet base page-path expected)
  ;; Fetch PAGE-PATH, its stylesheet link (EXPECTED) and the stylesheet.
  (let* ((head page (curl (string-append base page-path)))
         (href (stylesheet-link page)))
    (test-equal (string-append page-path ": the page, 200") 200 (status head))
    (test-equal (string-append page-path ": links its stylesheet") expected href)
    (when href
      (let* ((url (string-append base href))
             (head body (curl url))
             (etag (header head "ETag")))
        (test-equal (string-append href ": 200") 200 (status head))
        (test-assert (string-append href ": text/css")
          (string-prefix? "text/css" (or (header head "Content-Type") "")))
        (test-assert (string-append href ": an ETag") etag)
        (test-equal (string-append href ": kept an hour")
          "public, max-age=3600" (header head "Cache-Control"))
        (test-assert (string-append href ": a stylesheet") (string-contains body "{"))
        (when etag
          (let ((head body (curl "-H" (string-append "If-None-Match: " etag) url)))
            (test-equal (string-append href ": 304 to If-None-Match") 304 (status head))
            (test-equal (string-append href ": with no body") "" body)))
        (let ((head compressed (curl "-H" "Accept-Encoding: gzip" "-D" "-" "-o" "/dev/null" url)))
          (test-equal (string-append href ": gzip when asked") "gzip"
            (header head "Content-Encoding"))
          (test-equal (string-append href ": varying by it") "Accept-Encoding"
            (header head "Vary")))
        (let ((head plain (curl "--compressed" url)))
          (test-equal (string-append href ": the same sheet once inflated") body plain))
        (let ((head zstd (curl "-H" "Accept-Encoding: zstd" "-D" "-" "-o" "/dev/null" url)))
          (test-equal (string-append href ": zstd when asked") "zstd"
            (header head "Content-Encoding")))))))

(define (check-security-headers base path)
  ;; issue 25 (h): PATH's response carries (plucky web security)'s
  ;; headers, the default policy's frame-ancestors among them
  (let ((head body (curl (string-append base path))))
    (test-equal (string-append path ": nosniff") "nosniff"
      (header head "X-Content-Type-Options"))
    (test-equal (string-append path ": no frames") "DENY" (header head "X-Frame-Options"))
    (test-assert (string-append path ": a policy that forbids frames")
      (string-contains (or (header head "Content-Security-Policy") "")
                       "frame-ancestors 'none'"))
    (test-equal (string-append path ": a referrer policy") "strict-origin-when-cross-origin"
      (header head "Referrer-Policy"))))

(define (modes-open-to-others directory)
  ;; -> the files and directories under DIRECTORY (itself included)
  ;; that others than their owner may read, write or enter, as
  ;; "PATH MODE" strings
  (let* ((port (open-pipe* OPEN_READ "find" directory "-perm" "/077" "-printf" "%p %m\n"))
         (text (get-string-all port)))
    (close-pipe port)
    (remove string-null? (string-split text #\newline))))

(let* ((parent (temporary-directory))
       ;; made by the demo at its start, as `make run' makes var/
       (data (string-append parent "/var")))
  ;; as a usual shell's: what the apps do not set is 0644 and 0755
  (umask #o022)
  (call-with-plucky
   "apps/demo.scm" (append '("--port" "0" "--workers" "1") allow-root)
   (lambda (plucky)
     (test-assert "plucky serves the demo" (plucky-port plucky))
     (when (plucky-port plucky)
       (let ((base (format #f "http://127.0.0.1:~a" (plucky-port plucky))))
         (check-stylesheet base "/" "/static/site.css")
         (check-stylesheet base "/news/" "/news/static/news.css")
         (check-stylesheet base "/blog/" "/blog/static/blog.css")
         (for-each (lambda (path) (check-security-headers base path))
                   '("/" "/news/" "/news/login" "/blog/" "/blog/admin" "/chat/"
                     "/chat/chat.js" "/static/site.css" "/static/logo.svg" "/hello"
                     "/nowhere"))
         (let ((head page (curl (string-append base "/chat/"))))
           ;; the policy allows no inline script: the chat's is a file
           (test-assert "the chat page: no inline script"
             (not (string-contains page "<script>")))
           (test-assert "its script is chat.js"
             (string-contains page "<script src=\"chat.js\"></script>")))
         (let ((head script (curl (string-append base "/chat/chat.js"))))
           (test-equal "chat.js: 200" 200 (status head))
           (test-assert "chat.js: JavaScript"
             (string-prefix? "application/javascript" (or (header head "Content-Type") "")))
           (test-assert "chat.js: the chat's script" (string-contains script "new WebSocket(")))
         (let ((head body (curl (string-append base "/static/logo.svg"))))
           (test-equal "the logo: 200" 200 (status head))
           (test-assert "an SVG image"
             (string-prefix? "image/svg+xml" (or (header head "Content-Type") ""))))
         (test-assert "its siblings made at the start"
           (every file-exists? '("apps/static/site.css.gz" "apps/static/site.css.zst"
                                 "apps/news/static/news.css.gz" "apps/blog/static/blog.css.zst")))
         (let ((head body (curl "--path-as-is" (string-append base "/static/../demo.scm"))))
           (test-assert "nothing else of apps/ is served"
             (not (string-contains body "landing"))))
         (let ((head body (curl (string-append base "/news/static/"))))
           (test-equal "no listing of an asset directory" 404 (status head)))
         ;; issue 25 (g): var/news.db (password hashes, emails,
         ;; addresses) was 0644, var/ and blog.git 0755.  A sign-up
         ;; writes the news database (its -wal); the blog's admin page
         ;; opens its sessions' database.
         (curl "-d" "name=modes&password=long+enough+password" (string-append base "/news/signup"))
         (curl (string-append base "/blog/admin"))
         (test-assert "the data files were made"
           (every file-exists? (map (lambda (name) (string-append data "/" name))
                                    '("news.db" "blog.git" "blog-secret" "blog-admin"
                                      "blog-sessions.db"))))
         (test-equal "issue 25g: the data files 0600, the directories 0700" '()
           (modes-open-to-others data)))))
   #:environment (cons (string-append "PLUCKY_DATA=" data) (environ))
   #:timeout 180)
  (remove-tree parent))

(test-group "stylesheet"
  (let ((news (html->string (news:page #:title "t" #:user #f #:label "new" #:body '())))
        (blog (html->string (blog:page "" "t" '()))))
    (test-assert "the news site alone: its sheet inline"
      (and (string-contains news "<style>") (string-contains news "#page{")
           (not (stylesheet-link news))))
    (test-assert "the blog alone: its sheet inline"
      (and (string-contains blog "<style>") (not (stylesheet-link blog))))
    (parameterize ((news:stylesheet "/news/static/news.css")
                   (blog:stylesheet "/blog/static/blog.css"))
      (let ((news (html->string (news:page #:title "t" #:user #f #:label "new" #:body '())))
            (blog (html->string (blog:page "" "t" '()))))
        (test-equal "the news site in the demo: a link" "/news/static/news.css"
          (stylesheet-link news))
        (test-assert "and no inline sheet" (not (string-contains news "<style>")))
        (test-equal "the blog in the demo: a link" "/blog/static/blog.css"
          (stylesheet-link blog))))))

(test-end "apps/demo")
