;;; (blog views) --- the blog's pages as SXML

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Each procedure returns a page's SXML for (plucky web html).  BASE is
;;; the relative path from the page back to the blog's root ("" on the
;;; index, "../../../../" on a post), so every link is relative and the
;;; blog works under any prefix.  Bodies come through (blog markup): the
;;; post's HTML as `raw', a comment's through the whitelist.
;;;
;;; Code:

(define-module (blog views)
  #:use-module (srfi srfi-1)
  #:use-module ((srfi srfi-19) #:hide (current-time))
  #:use-module (ice-9 match)
  #:use-module ((ice-9 textual-ports) #:select (get-string-all))
  #:use-module (web uri)
  #:use-module (plucky web html)
  #:use-module (blog git)
  #:use-module (blog store)
  #:use-module (blog markup)
  #:export (blog-title
            page
            stylesheet
            post-url
            post-article
            post-page
            listing-page
            tags-page
            message-page
            login-page
            admin-page
            edit-page
            changes-page
            change-page
            readable-date))

(define stylesheet
  ;; The URL of blog/static/blog.css where a site serves it (the demo,
  ;; apps/demo.scm, with (plucky web static)), or #f: the page then
  ;; carries the sheet in a <style> element, as when the blog runs alone.
  (make-parameter #f))

(define style
  (call-with-input-file (search-path %load-path "blog/static/blog.css") get-string-all))

(define (readable-date timestamp)
  "Return TIMESTAMP (seconds) as \"8 March 2012 10:44 PM\", in UTC."
  (date->string (time-utc->date (make-time time-utc 0 timestamp) 0)
                "~e ~B ~Y ~l:~M ~p"))

(define (post-url base post)
  "Return the relative URL of POST's page from a page at BASE."
  (string-append base "archives/"
                 (encode-and-join-uri-path (string-split (post-path post) #\/))))

(define (tag-url base tag)
  (string-append base "tags/" (uri-encode tag)))

(define blog-title
  ;; the blog's name, in its pages' header, the front page's title and the
  ;; Atom feed's
  "plucky notes")

(define* (page base title body #:key (index #f) (admin? #f) (sidebar? #t))
  "Return the SXML of a whole page: TITLE, BODY (a list of SXML) and,
with INDEX, the sidebar (tags, archives, search, feed)."
  `(html (@ (lang "en"))
     (head (meta (@ (charset "utf-8")))
           (meta (@ (name "viewport") (content "width=device-width")))
           (title ,title)
           (link (@ (rel "alternate") (type "application/atom+xml")
                    (href ,(string-append base "feed/atom"))))
           ,(if (stylesheet)
                `(link (@ (rel "stylesheet") (href ,(stylesheet))))
                `(style ,style)))
     (body
      (header (h1 (a (@ (href ,(if (string-null? base) "./" base))) ,blog-title))
              (p "a plucky blog, its database a git repository"
                 ,@(if admin? `(" — " (a (@ (href ,(string-append base "admin"))) "admin")) '())))
      (main ,@body)
      ,@(if (and sidebar? index) (list (sidebar base index)) '())
      (footer "Served by plucky from git; tekuti's layout."))))

(define (sidebar base index)
  (let ((years (delete-duplicates
                (map (lambda (post) (car (string-split (post-path post) #\/)))
                     (blog-index-public-posts index)))))
    `(aside
      (form (@ (method "get") (action ,(string-append base "search")))
            (input (@ (type "text") (name "string") (placeholder "search")
                      (aria-label "search"))))
      (h3 "tags")
      (p (@ (class "cloud"))
         ,@(map (match-lambda ((tag . _) `(span (a (@ (href ,(tag-url base tag))) ,tag) " ")))
                (take-top-tags index 12))
         (a (@ (href ,(string-append base "tags"))) "all tags…"))
      (h3 "archives")
      (ul ,@(map (lambda (year)
                   `(li (a (@ (href ,(string-append base "archives/" year))) ,year)))
                 years))
      (p (a (@ (href ,(string-append base "feed/atom"))) "Atom feed")))))

(define (take-top-tags index n)
  (let ((all (sort (hash-map->list (lambda (tag posts) (cons tag (length posts)))
                                   (blog-index-tags index))
                   (lambda (a b) (or (> (cdr a) (cdr b))
                                     (and (= (cdr a) (cdr b)) (string<? (car a) (car b))))))))
    (if (> (length all) n) (take all n) all)))

(define (tag-links base post)
  (if (null? (post-tags post))
      '()
      `(" | tags: "
        ,@(append-map (lambda (tag) `((a (@ (rel "tag") (href ,(tag-url base tag))) ,tag) " "))
                      (post-tags post)))))

(define* (post-article base post body-html #:key (full? #f))
  "Return the SXML of POST as an article, BODY-HTML its body's HTML."
  `(article (@ (class ,(if (post-published? post) "post" "post draft")))
     (h2 ,(if full? (post-title post)
              `(a (@ (href ,(post-url base post))) ,(post-title post))))
     (p (@ (class "meta")) ,(readable-date (post-timestamp post))
        ,@(if (post-published? post) '() `(" (" ,(post-status post) ")"))
        ,@(tag-links base post)
        " | " (a (@ (href ,(string-append (post-url base post) "#comments")))
                 ,(format #f "~a comment~a" (post-comment-count post)
                          (if (= 1 (post-comment-count post)) "" "s"))))
     ,(raw body-html)))

(define (comment-item comment admin-form)
  `(li (@ (id ,(comment-id comment)))
     (p (cite ,(let ((url (comment-url comment)))
                 (if (or (string-prefix? "http://" url) (string-prefix? "https://" url))
                     `(a (@ (href ,url) (rel "external nofollow ugc")) ,(comment-author comment))
                     (comment-author comment))))
        " says: " (small (a (@ (href ,(string-append "#" (comment-id comment))))
                            ,(readable-date (comment-timestamp comment)))))
     ,(raw (comment->html (comment-body comment) (comment-format comment)))
     ,@(if admin-form (list (admin-form comment)) '())))

(define* (post-page base index post body-html comments related
                    #:key open? token admin-form (errors '()) (values '()))
  "Return the SXML of POST's page: the post, RELATED posts, COMMENTS and,
if OPEN?, the comment form carrying TOKEN (ERRORS and the VALUES typed
shown again after a refusal)."
  (define (value name) (or (assoc-ref values name) ""))
  (page base (post-title post)
        `(,(post-article base post body-html #:full? #t)
          ,@(if (null? related) '()
                `((h3 "related")
                  (ul ,@(map (lambda (p) `(li (a (@ (href ,(post-url base p))) ,(post-title p))))
                             related))))
          (h3 (@ (id "comments")) ,(format #f "~a comments" (length comments)))
          (ol (@ (class "comments")) ,@(map (lambda (c) (comment-item c admin-form)) comments))
          ,@(if open?
                `((h3 "leave a reply")
                  ,@(map (lambda (e) `(p (@ (class "error")) ,e)) errors)
                  (form (@ (method "post") (id "comment-form")
                           ;; Guile's Location writer drops fragments: the
                           ;; browser keeps this one across the redirect
                           ;; (RFC 9110, 10.2.2), back to the comments
                           (action ,(string-append (post-name-segment post) "#comments")))
                        (input (@ (type "hidden") (name "token") (value ,token)))
                        (label (@ (for "author")) "name")
                        (input (@ (type "text") (id "author") (name "author") (maxlength "100")
                                  (value ,(value "author"))))
                        (label (@ (for "email")) "email (not shown)")
                        (input (@ (type "text") (id "email") (name "email") (maxlength "254")
                                  (value ,(value "email"))))
                        (label (@ (for "url")) "web site")
                        (input (@ (type "text") (id "url") (name "url") (maxlength "500")
                                  (value ,(value "url"))))
                        (div (@ (class "hp") (aria-hidden "true"))
                             (label (@ (for "website")) "leave this empty")
                             (input (@ (type "text") (id "website") (name "website")
                                       (tabindex "-1") (autocomplete "off"))))
                        (label (@ (for "comment")) "comment (plain text)")
                        (textarea (@ (id "comment") (name "comment") (rows "8"))
                                  ,(value "comment"))
                        (p (button (@ (type "submit")) "post comment"))))
                '((p (@ (class "meta")) "Comments are closed."))))
        #:index index))

(define (post-name-segment post)
  ;; the post's own page, relative to itself: its last path component
  (uri-encode (last (string-split (post-path post) #\/))))

(define* (listing-page base index title posts #:key (intro '()))
  "Return the SXML of a page listing POSTS' titles under TITLE."
  (page base title
        `((h2 ,title) ,@intro
          ,@(if (null? posts)
                '((p "No posts."))
                `((ul ,@(map (lambda (post)
                               `(li (a (@ (href ,(post-url base post))) ,(post-title post))
                                    (span (@ (class "meta")) " — " ,(readable-date (post-timestamp post)))))
                             posts)))))
        #:index index))

(define (tags-page base index)
  "Return the SXML of the tag cloud: every tag, sized by its posts."
  (let* ((all (take-top-tags index 10000))
         (most (if (null? all) 1 (apply max (map cdr all)))))
    (page base "all tags"
          `((h2 "all tags")
            (p (@ (class "cloud") (id "tag-cloud"))
               ,@(map (match-lambda
                        ((tag . n)
                         `(span (a (@ (href ,(tag-url base tag))
                                      (style ,(string-append
                                                "font-size:"
                                                (number->string
                                                 (/ (round (* 100 (+ 0.8 (* 1.4 (/ (log (+ 1 n)) (log (+ 1 most)))))))
                                                    100))
                                                "em")))
                                   ,tag)
                                " ")))
                      (sort all (lambda (a b) (string<? (car a) (car b)))))))
          #:index index)))

(define* (message-page base title text #:key index)
  "Return the SXML of a page that says TEXT under TITLE."
  (page base title `((h2 ,title) (p ,text)) #:index index))

(define* (login-page base #:key (error #f))
  "Return the SXML of the admin's login form."
  (page base "log in"
        `((h2 "log in")
          ,@(if error `((p (@ (class "error")) ,error)) '())
          (form (@ (method "post") (action ,(string-append base "admin/login")))
                (label (@ (for "name")) "name")
                (input (@ (type "text") (id "name") (name "name") (autocomplete "username")))
                (label (@ (for "password")) "password")
                (input (@ (type "password") (id "password") (name "password")
                          (autocomplete "current-password")))
                (p (button (@ (type "submit")) "log in"))))
        #:sidebar? #f))

(define (csrf-input csrf)
  `(input (@ (type "hidden") (name "csrf") (value ,csrf))))

(define* (edit-page base csrf #:key post (body "") (errors '()))
  "Return the SXML of the form that writes a new post or edits POST."
  (define (field f default) (if post (f post) default))
  (page base (if post (string-append "edit: " (post-title post)) "new post")
        `((h2 ,(if post "edit post" "new post"))
          ,@(map (lambda (e) `(p (@ (class "error")) ,e)) errors)
          (form (@ (method "post")
                   (action ,(if post
                                (string-append base "admin/modify-post/" (uri-encode (post-key post)))
                                (string-append base "admin/new-post"))))
                ,(csrf-input csrf)
                (label (@ (for "title")) "title")
                (input (@ (type "text") (id "title") (name "title") (value ,(field post-title ""))))
                (label (@ (for "tags")) "tags (comma-separated)")
                (input (@ (type "text") (id "tags") (name "tags")
                          (value ,(string-join (field post-tags '()) ", "))))
                (label (@ (for "format")) "format")
                (select (@ (id "format") (name "format"))
                  ,@(map (match-lambda
                           ((value . label)
                            `(option (@ (value ,value)
                                        ,@(if (eq? (string->symbol value) (field post-format 'html))
                                              '((selected "selected")) '()))
                                     ,label)))
                         '(("html" . "HTML: an empty line makes a paragraph")
                           ("markdown" . "Markdown"))))
                (label (@ (for "body")) "body")
                (textarea (@ (id "body") (name "body") (rows "16")) ,body)
                (label (@ (for "status")) "status")
                (select (@ (id "status") (name "status"))
                  ,@(map (lambda (s) `(option (@ (value ,s) ,@(if (equal? s (field post-status "publish"))
                                                                  '((selected "selected")) '()))
                                              ,s))
                         '("publish" "draft" "private")))
                (label (input (@ (type "checkbox") (name "comments") (value "open")
                                 ,@(if (field post-comments-open? #t) '((checked "checked")) '())))
                       " comments open")
                (p (button (@ (type "submit") (id "save")) "save")))
          ,@(if post
                `((form (@ (method "post") (action ,(string-append base "admin/delete-post/"
                                                                   (uri-encode (post-key post)))))
                        ,(csrf-input csrf)
                        (button (@ (type "submit")) "delete this post"))
                  (p (a (@ (href ,(post-url base post))) "view")))
                '()))
        #:admin? #t #:sidebar? #f))

(define (admin-page base csrf posts changes)
  "Return the SXML of the admin's dashboard: POSTS (all, drafts too) and
recent CHANGES (<commit-info>s)."
  (page base "admin"
        `((h2 "admin")
          (form (@ (method "post") (action ,(string-append base "admin/logout"))) ,(csrf-input csrf)
                (button (@ (type "submit")) "log out"))
          (p (a (@ (href ,(string-append base "admin/new"))) "write a new post") " | "
             (a (@ (href ,(string-append base "admin/changes"))) "recent changes"))
          (h3 "recent changes")
          (ul ,@(map (lambda (c)
                       `(li (a (@ (href ,(string-append base "admin/changes/" (commit-info-id c))))
                               ,(string-trim-right (commit-info-message c)))))
                     changes))
          (h3 "posts")
          (ul ,@(map (lambda (post)
                       `(li (a (@ (href ,(string-append base "admin/posts/" (uri-encode (post-key post)))))
                               ,(post-title post))
                            (span (@ (class "meta")) " " ,(post-status post) " — "
                                  ,(readable-date (post-timestamp post)))))
                     posts)))
        #:admin? #t #:sidebar? #f))

(define (changes-page base changes)
  "Return the SXML of the list of recent CHANGES."
  (page base "recent changes"
        `((h2 "recent changes")
          (ul ,@(map (lambda (c)
                       `(li (a (@ (href ,(string-append base "admin/changes/" (commit-info-id c))))
                               ,(string-trim-right (commit-info-message c)))
                            (span (@ (class "meta")) " " ,(readable-date (commit-info-time c)))))
                     changes)))
        #:admin? #t #:sidebar? #f))

(define (change-page base csrf change diff)
  "Return the SXML of one CHANGE, its DIFF and the form that reverts it."
  (page base (commit-info-message change)
        `((h2 ,(string-trim-right (commit-info-message change)))
          (p (@ (class "meta")) ,(readable-date (commit-info-time change)))
          (pre ,diff)
          (form (@ (method "post") (action ,(string-append base "admin/revert-change/"
                                                           (commit-info-id change))))
                ,(csrf-input csrf)
                (button (@ (type "submit")) "undo this change")))
        #:admin? #t #:sidebar? #f))
