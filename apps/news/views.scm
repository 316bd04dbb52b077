;;; (news views) --- the news site's pages, as SXML

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Each page is a procedure from data to an SXML tree that (plucky web
;;; html) writes out; nothing here reads the database or the request, so
;;; the pages can be tested and timed alone.  The look is news.arc's: an
;;; orange bar, numbered stories with an arrow to vote, a grey line under
;;; each, comments indented by depth.
;;;
;;; What a viewer may do shows only when they may do it: the arrow when
;;; they have not voted and the item is not theirs, "flag" above the karma
;;; threshold, "edit" and "delete" within the edit window.  The pages
;;; (news app) checks each rule again when the request comes: a link
;;; that shows is a convenience, never a permission.
;;;
;;; Every form carries the session's CSRF token (the CSRF argument, a
;;; hidden field named "csrf").  Text a user typed is always text: the
;;; HTML writer escapes it, and `format-text' turns blank lines into
;;; paragraphs and web addresses into links (rel="nofollow") as SXML,
;;; never by pasting markup.
;;;
;;; Code:

(define-module (news views)
  #:use-module (srfi srfi-1)
  #:use-module (ice-9 match)
  #:use-module ((ice-9 textual-ports) #:select (get-string-all))
  #:use-module (ice-9 regex)
  #:use-module ((web uri) #:select (uri-encode))
  #:use-module (news rank)
  #:use-module (news db)
  #:export (page
            stylesheet
            story-list-page
            item-page
            comments-page
            user-page
            submit-page
            login-page
            reply-page
            edit-page
            message-page
            leaders-page
            password-page
            flagged-page
            format-text
            site-of
            site-name
            per-page))

(define site-name "plucky news")
(define per-page 30)

(define stylesheet
  ;; The URL of news/static/news.css where a site serves it (the demo,
  ;; apps/demo.scm, with (plucky web static)), or #f: the page then
  ;; carries the sheet in a <style> element, as when the news site runs alone.
  (make-parameter #f))

(define style
  (call-with-input-file (search-path %load-path "news/static/news.css") get-string-all))

(define (bar . items)
  ;; Items separated by " | ", skipping #f.
  (let loop ((items (filter identity items)) (out '()))
    (match items
      (() (reverse out))
      ((item) (reverse (cons item out)))
      ((item . rest) (loop rest (cons* " | " item out))))))

(define* (page #:key title user label body (csrf ""))
  "Return the SXML of a whole page titled TITLE (appended to the site's
name) for USER (a <user> or #f), with the top bar's link LABEL in bold,
around BODY (a list of SXML nodes); CSRF is the session's token, which
the logout link carries."
  `(html (@ (lang "en"))
     (head (meta (@ (charset "utf-8")))
           (meta (@ (name "viewport") (content "width=device-width")))
           (title ,(if title (string-append title " | " site-name) site-name))
           (link (@ (rel "alternate") (type "application/rss+xml")
                    (href "rss")))
           ,(if (stylesheet)
                `(link (@ (rel "stylesheet") (href ,(stylesheet))))
                `(style ,style)))
     (body
      (div (@ (id "page"))
        (div (@ (id "top"))
          (b (a (@ (href "./")) ,site-name))
          (span
           ,@(bar (top-link "new" "newest" label)
                  (and user (top-link "threads"
                                      (string-append "threads?id=" (user-name user))
                                      label))
                  (top-link "comments" "newcomments" label)
                  (top-link "ask" "ask" label)
                  (top-link "show" "show" label)
                  (top-link "best" "best" label)
                  (top-link "leaders" "leaders" label)
                  (and user (user-admin? user) (top-link "flagged" "flagged" label))
                  (top-link "submit" "submit" label)))
          (span (@ (class "right"))
            ,@(if user
                  `((a (@ (href ,(string-append "user?id=" (user-name user))))
                       ,(user-name user))
                    " (" ,(user-karma user) ") | "
                    (a (@ (href ,(string-append "logout?csrf=" csrf))) "logout"))
                  `((a (@ (href "login")) "login")))))
        ,@body
        (div (@ (class "footer"))
          (a (@ (href "rss")) "RSS") " | "
          (a (@ (href "../")) "plucky") " | "
          (a (@ (href "items.json")) "JSON"))))))

(define (top-link text href label)
  (if (equal? text label)
      `(b (a (@ (href ,href)) ,text))
      `(a (@ (href ,href)) ,text)))

(define (site-of url)
  ;; "https://www.blog.example.org:8080/x" -> "blog.example.org", by hand:
  ;; a regexp here was most of the front page's time (bench/news).
  (and url
       (let* ((scheme-end (string-contains url "://"))
              (start (and scheme-end (+ scheme-end 3)))
              (start (and start (if (string-prefix? "www." (substring url start))
                                    (+ start 4)
                                    start)))
              (end (and start
                        (or (string-index url (char-set #\/ #\: #\? #\#) start)
                            (string-length url)))))
         (and start (> end start) (substring url start end)))))

(define (minutes-since now time)
  (quotient (max 0 (- now time)) 60))

(define (item-form action item csrf whence fields label class title)
  ;; A one-button form that POSTs ACTION for ITEM: an arrow, "unvote",
  ;; "hide"… FIELDS, a list of (name . value), go with it.
  `(form (@ (method "post") (action ,action) (class "vote-form")
            (style "display:inline"))
     (input (@ (type "hidden") (name "id") (value ,(item-id item))))
     ,@(map (lambda (field)
              `(input (@ (type "hidden") (name ,(car field)) (value ,(cdr field)))))
            fields)
     (input (@ (type "hidden") (name "whence") (value ,whence)))
     (input (@ (type "hidden") (name "csrf") (value ,csrf)))
     (button (@ (type "submit") (class ,class) (title ,title)
                (style "border:0;background:none;cursor:pointer;padding:0;color:inherit;font-size:inherit"))
             ,label)))

(define* (vote-link item user voted csrf whence #:key now parent-author)
  ;; The arrows, when USER may still vote on ITEM: up, and down on a
  ;; comment news.arc lets them downvote (`can-downvote?': NOW and the
  ;; PARENT-AUTHOR of a comment are needed to tell).
  (if (and user
           (not (assv (item-id item) voted))
           (not (string=? (user-name user) (item-by item))))
      `(span (@ (class "votearrows"))
         ,(item-form "vote" item csrf whence '(("dir" . "up")) "▲" "up" "upvote")
         ,@(if (and now (can-downvote? user item now parent-author))
               `((br) ,(item-form "vote" item csrf whence '(("dir" . "down")) "▼" "down"
                                  "downvote"))
               '()))
      (if user '(span (@ (class "up")) " ") #f)))

(define (unvote-link item user voted csrf whence)
  ;; " | unvote" after USER's vote on ITEM (not their own item's)
  (if (and user (assv (item-id item) voted)
           (not (string=? (user-name user) (item-by item))))
      `(" | " ,(item-form "vote" item csrf whence '(("dir" . "un")) "unvote" "linkish" "unvote"))
      '()))

(define* (story-rows item n now user voted csrf whence #:key hidden? (faved '()) item-page?)
  ;; ITEM's two rows: its title, then its points, author, age, comments
  ;; and what USER may do (unvote, hide or unhide — HIDDEN? —, and on
  ;; the ITEM-PAGE? favorite: FAVED lists the ids USER saved)
  (let ((url (item-url item))
        (dead? (item-dead? item)))
    `((tr (@ (class ,(if dead? "athing dead" "athing")))
        (td (@ (class "rank")) ,(and n (string-append (number->string n) ".")))
        (td (@ (class "vote")) ,(vote-link item user voted csrf whence))
        (td (@ (class "title"))
          (a (@ (href ,(or url (string-append "item?id="
                                              (number->string (item-id item)))))
                ,@(if url '((rel "nofollow")) '()))
             ,(item-title item))
          ,@(let ((site (site-of url)))
              (if site
                  `(" " (span (@ (class "site"))
                          "(" (a (@ (href ,(string-append "from?site=" (uri-encode site))))
                                 ,site)
                          ")"))
                  '()))))
      (tr (@ (class "sub"))
        (td (@ (colspan 2)))
        (td (span (@ (id ,(string-append "score_" (number->string (item-id item)))))
                  ,(item-score item) ,(if (= 1 (item-score item)) " point" " points"))
            " by " (a (@ (href ,(string-append "user?id=" (item-by item)))) ,(item-by item))
            " "
            (a (@ (href ,(string-append "item?id=" (number->string (item-id item)))))
               ,(text-age (minutes-since now (item-time item))))
            " | "
            (a (@ (href ,(string-append "item?id=" (number->string (item-id item)))))
               ,(let ((n (item-descendants item)))
                  (cond ((= n 0) "discuss")
                        ((= n 1) "1 comment")
                        (else (string-append (number->string n) " comments")))))
            ,@(unvote-link item user voted csrf whence)
            ,@(if user
                  `(" | " ,(if hidden?
                               (item-form "hide" item csrf whence '(("un" . "t")) "unhide" "linkish" "unhide")
                               (item-form "hide" item csrf whence '() "hide" "linkish" "hide")))
                  '())
            ,@(if (and user item-page?)
                  `(" | " ,(if (memv (item-id item) faved)
                               (item-form "fave" item csrf whence '(("un" . "t")) "un-favorite" "linkish"
                                          "un-favorite")
                               (item-form "fave" item csrf whence '() "favorite" "linkish" "favorite")))
                  '()))))))

(define* (story-list-page #:key items user voted csrf now title label
                          (start 1) more whence hidden?)
  "Return the page listing ITEMS (stories) numbered from START, with a
\"More\" link to MORE when there are more; VOTED is an alist (ID . DIR)
of USER's votes on them."
  (page #:title title #:user user #:label label #:csrf csrf
        #:body
        `((table (@ (class "stories"))
            ,@(append-map (lambda (item n)
                            (story-rows item n now user voted csrf
                                        (or whence "news") #:hidden? hidden?))
                          items (iota (length items) start))
            ,@(if more
                  `((tr (td (@ (colspan 2)))
                        (td (@ (class "more")) (a (@ (href ,more) (rel "next")) "More"))))
                  '())))))

;;; Text.

(define url-regexp (make-regexp "https?://[^][ \t\n<>\"'()]+[^][ \t\n<>\"'().,;:!?]"))

(define (linkify text)
  ;; TEXT as a list of strings and (a …) elements.
  (let loop ((start 0) (out '()))
    (let ((m (regexp-exec url-regexp text start)))
      (if m
          (loop (match:end m)
                (cons* `(a (@ (href ,(match:substring m)) (rel "nofollow"))
                           ,(match:substring m))
                       (substring text start (match:start m))
                       out))
          (reverse (cons (substring text start) out))))))

(define (format-text text)
  "Return TEXT, as a user typed it, as a list of SXML paragraphs: blank
lines separate paragraphs, lines indented by two spaces are code, web
addresses become links."
  (let* ((text (string-trim-both (or text "")))
         (paragraphs (filter (lambda (p) (not (string-null? (string-trim-both p))))
                             (split-paragraphs text))))
    (map (lambda (p)
           (if (string-prefix? "  " p)
               `(pre (code ,p))
               `(p ,@(linkify p))))
         paragraphs)))

(define (split-paragraphs text)
  (let loop ((lines (string-split text #\newline)) (current '()) (out '()))
    (define (flush) (if (null? current)
                        out
                        (cons (string-join (reverse current) "\n") out)))
    (match lines
      (() (reverse (flush)))
      ((line . rest)
       (if (string-null? (string-trim-both line))
           (loop rest '() (flush))
           (loop rest (cons (string-trim-right line) current) out))))))

;;; Items and comments.

(define (can-edit? user item now)
  (and user
       (string=? (user-name user) (item-by item))
       (not (item-deleted? item))
       (< (minutes-since now (item-time item)) comment-edit-minutes)))

(define* (comment-head item user now csrf whence voted #:optional parent-author)
  `(div (@ (class "comhead"))
     ,(vote-link item user voted csrf whence #:now now #:parent-author parent-author) " "
     (a (@ (href ,(string-append "user?id=" (item-by item)))) ,(item-by item))
     " "
     (a (@ (href ,(string-append "item?id=" (number->string (item-id item)))))
        ,(text-age (minutes-since now (item-time item))))
     ,@(if (and user (string=? (user-name user) (item-by item)))
           `(" | " ,(item-score item) ,(if (= 1 (item-score item)) " point" " points"))
           '())
     ,@(unvote-link item user voted csrf whence)
     ,@(if (can-edit? user item now)
           `(" | " (a (@ (href ,(string-append "edit?id=" (number->string (item-id item)))))
                      "edit")
             " | " (a (@ (href ,(string-append "delete?id=" (number->string (item-id item)))))
                      "delete"))
           '())
     ,@(if (and user (not (string=? (user-name user) (item-by item)))
                (> (user-karma user) karma-to-flag))
           `(" | " (form (@ (method "post") (action "flag") (style "display:inline"))
                     (input (@ (type "hidden") (name "id") (value ,(item-id item))))
                     (input (@ (type "hidden") (name "whence") (value ,whence)))
                     (input (@ (type "hidden") (name "csrf") (value ,csrf)))
                     (button (@ (type "submit") (class "linkish")
                                (style "border:0;background:none;color:#828282;font-size:8pt;padding:0;cursor:pointer"))
                             "flag")))
           '())))

(define (visible? item user)
  (and (not (item-deleted? item))
       (or (not (item-dead? item))
           (and user (or (string=? (user-name user) (item-by item))
                         (user-showdead? user))))))

(define* (comment-tree-sxml tree user now csrf whence voted #:optional parent-author)
  ;; PARENT-AUTHOR: the name of the item TREE's comments answer
  `(ul (@ (class "tree"))
     ,@(filter-map
        (match-lambda
          ((item . replies)
           (let ((shown? (visible? item user)))
             (and (or shown? (pair? replies))
                  `(li (@ (id ,(number->string (item-id item))))
                     ,@(if shown?
                           `(,(comment-head item user now csrf whence voted parent-author)
                             (div (@ (class ,(if (item-dead? item) "comment dead" "comment")))
                               ,@(format-text (item-text item))
                               ,@(if user
                                     `((p (a (@ (href ,(string-append
                                                         "reply?id="
                                                         (number->string (item-id item)))))
                                             (small "reply"))))
                                     '())))
                           '((div (@ (class "comhead")) "[deleted]")))
                     ,@(if (pair? replies)
                           (list (comment-tree-sxml replies user now csrf whence voted
                                                    (item-by item)))
                           '()))))))
        tree)))

(define* (item-page #:key item tree user voted csrf now error text (faved '()) parent-author
                    post-key)
  "Return the page of ITEM (a story or a comment) with the comment TREE
below it (from `comment-tree') and, for a logged-in USER, a form to
comment, showing ERROR and the TEXT they typed when it was refused; the
form carries POST-KEY (see `key-field')."
  (let ((whence (string-append "item?id=" (number->string (item-id item)))))
    (page #:title (or (item-title item) "comment") #:user user #:csrf csrf
          #:body
          `((table (@ (class "stories"))
              ,@(if (eq? (item-type item) 'story)
                    (story-rows item #f now user voted csrf whence #:faved faved #:item-page? #t)
                    `((tr (td) (td ,(comment-head item user now csrf whence voted
                                                  parent-author))))))
            ,@(if (and (item-text item) (eq? (item-type item) 'story))
                  `((div (@ (class "comment") (style "margin-left:40px"))
                      ,@(format-text (item-text item))))
                  (if (eq? (item-type item) 'comment)
                      `((div (@ (class "comment") (style "margin-left:40px"))
                          ,@(format-text (item-text item))))
                      '()))
            ,@(if user
                  `((form (@ (method "post") (action "comment") (class "news")
                             (style "margin:10px 40px"))
                      (input (@ (type "hidden") (name "parent") (value ,(item-id item))))
                      (input (@ (type "hidden") (name "csrf") (value ,csrf)))
                      ,@(key-field post-key)
                      ,@(if error `((p (@ (class "error")) ,error)) '())
                      (textarea (@ (name "text") (rows 6) (cols 60)
                                   (aria-label "comment")) ,(or text ""))
                      (br)
                      (button (@ (type "submit")) "add comment")))
                  `((p (@ (style "margin:10px 40px"))
                       (a (@ (href "login")) "Log in") " to comment.")))
            ,(comment-tree-sxml tree user now csrf whence voted (item-by item))))))

(define* (comments-page #:key items stories user voted csrf now title label more)
  "Return a page listing comment ITEMS, each with the title of its story
(STORIES: an alist story id -> <item>), newest first."
  (page #:title title #:user user #:label label #:csrf csrf
        #:body
        `((div (@ (style "padding:6px 10px"))
            ,@(map (lambda (item)
                     (let ((story (assv-ref stories (item-story item))))
                       `(div
                         ,(comment-head item user now csrf label voted)
                         ,@(if story
                               `((div (@ (class "comhead")) "on: "
                                      (a (@ (href ,(string-append "item?id="
                                                                  (number->string (item-id story)))))
                                         ,(item-title story))))
                               '())
                         (div (@ (class "comment")) ,@(format-text (item-text item))))))
                   items)
            ,@(if more `((p (@ (class "more")) (a (@ (href ,more) (rel "next")) "More"))) '())))))

;;; Forms.

(define (field label name type value error . attributes)
  `(tr (td (label (@ (for ,name)) ,label))
       (td ,(if (eq? type 'textarea)
                `(textarea (@ (id ,name) (name ,name) (rows 4) (cols 50) ,@attributes)
                           ,(or value ""))
                `(input (@ (id ,name) (name ,name) (type ,type) (size 50)
                           (value ,(or value "")) ,@attributes)))
           ,@(if error `((div (@ (class "error")) ,error)) '()))))

(define (csrf-field csrf)
  `(input (@ (type "hidden") (name "csrf") (value ,csrf))))

(define (key-field post-key)
  ;; -> the form's key as a hidden field, or nothing without one: sent
  ;; again with the form, it makes the site store what the form posts
  ;; once (`create-comment!', `create-story!')
  (if post-key
      `((input (@ (type "hidden") (name "key") (value ,post-key))))
      '()))

(define* (submit-page #:key user csrf (values '()) (errors '()) message post-key)
  "Return the form to submit a story, with VALUES (an alist of field
name to string) redisplayed and ERRORS (field name to message) beside
their fields, and POST-KEY (see `key-field')."
  (define (value name) (assoc-ref values name))
  (define (error name) (assoc-ref errors name))
  (page #:title "Submit" #:user user #:label "submit" #:csrf csrf
        #:body
        `((form (@ (method "post") (action "submit") (class "news")
                   (style "padding:10px"))
            ,(csrf-field csrf)
            ,@(key-field post-key)
            ,@(if message `((p (@ (class "error")) ,message)) '())
            (table
             ,(field "title" "title" "text" (value "title") (error "title")
                     '(maxlength 80) '(required #t))
             ,(field "url" "url" "url" (value "url") (error "url"))
             (tr (td) (td (b "or")))
             ,(field "text" "text" 'textarea (value "text") (error "text"))
             (tr (td) (td (button (@ (type "submit")) "submit")))
             (tr (td) (td (p "Leave url blank to submit a question for discussion. "
                             "If there is no url, the text will appear at the top "
                             "of the thread."))))))))

(define* (reply-page #:key item user csrf error text now post-key)
  "Return the form to reply to comment ITEM, carrying POST-KEY (see
`key-field')."
  (page #:title "Add Comment" #:user user #:csrf csrf
        #:body
        `((div (@ (style "padding:10px"))
            ,(comment-head item user now csrf "" '())
            (div (@ (class "comment")) ,@(format-text (item-text item)))
            (form (@ (method "post") (action "comment") (class "news"))
              (input (@ (type "hidden") (name "parent") (value ,(item-id item))))
              ,(csrf-field csrf)
              ,@(key-field post-key)
              ,@(if error `((p (@ (class "error")) ,error)) '())
              (textarea (@ (name "text") (rows 6) (cols 60) (aria-label "reply"))
                        ,(or text ""))
              (br)
              (button (@ (type "submit")) "reply"))))))

(define* (edit-page #:key item user csrf error text title)
  "Return the form to edit ITEM's title (stories) and text."
  (page #:title "Edit" #:user user #:csrf csrf
        #:body
        `((form (@ (method "post") (action "edit") (class "news") (style "padding:10px"))
            (input (@ (type "hidden") (name "id") (value ,(item-id item))))
            ,(csrf-field csrf)
            ,@(if error `((p (@ (class "error")) ,error)) '())
            (table
             ,@(if (eq? (item-type item) 'story)
                   (list (field "title" "title" "text" (or title (item-title item)) #f
                                '(maxlength 80)))
                   '())
             ,(field "text" "text" 'textarea (or text (item-text item) "") #f)
             (tr (td) (td (button (@ (type "submit")) "update"))))))))

(define* (login-page #:key user csrf message (values '()) (errors '()) goto)
  "Return the page with the log-in form and the create-account form."
  (define (value name) (assoc-ref values name))
  (define (error name) (assoc-ref errors name))
  (page #:title "Login" #:user user #:csrf csrf
        #:body
        `((div (@ (style "padding:10px;color:#000"))
            ,@(if message `((p (@ (class "error")) ,message)) '())
            (h3 "Login")
            (form (@ (method "post") (action "login") (class "news"))
              ,(csrf-field csrf)
              (input (@ (type "hidden") (name "goto") (value ,(or goto "news"))))
              (table
               ,(field "username" "login-name" "text" (value "login-name") #f
                       '(autocomplete "username"))
               ,(field "password" "login-password" "password" #f #f
                       '(autocomplete "current-password"))
               (tr (td) (td (button (@ (type "submit")) "login")))))
            (h3 "Create Account")
            (form (@ (method "post") (action "signup") (class "news"))
              ,(csrf-field csrf)
              (table
               ,(field "username" "name" "text" (value "name") (error "name")
                       '(autocomplete "username") '(maxlength 15))
               ,(field "password" "password" "password" #f (error "password")
                       '(autocomplete "new-password"))
               (tr (td) (td (button (@ (type "submit")) "create account")))))))))

(define* (user-page #:key subject user csrf now (errors '()) message)
  "Return the profile of SUBJECT (a <user>); its owner gets a form to
change their about text, email (shown to nobody else) and whether they
see dead items."
  (let ((own? (and user (string=? (user-name user) (user-name subject)))))
    (page #:title (string-append "Profile: " (user-name subject)) #:user user #:csrf csrf
          #:body
          `((div (@ (style "padding:10px;color:#000"))
              ,@(if message `((p (@ (class "error")) ,message)) '())
              (table
               (tr (td "user:") (td ,(user-name subject)))
               (tr (td "created:")
                   (td ,(text-age (minutes-since now (user-created subject)))))
               (tr (td "karma:") (td ,(user-karma subject)))
               ,@(if own?
                     '()
                     `((tr (td "about:") (td ,@(format-text (user-about subject)))))))
              ,@(if own?
                    `((form (@ (method "post") (action "profile") (class "news"))
                        ,(csrf-field csrf)
                        (table
                         ,(field "about" "about" 'textarea (user-about subject)
                                 (assoc-ref errors "about"))
                         ,(field "email" "email" "email" (user-email subject)
                                 (assoc-ref errors "email"))
                         (tr (td (label (@ (for "showdead")) "showdead"))
                             (td (input (@ (type "checkbox") (id "showdead")
                                           (name "showdead") (value "yes")
                                           (checked ,(user-showdead? subject))))))
                         (tr (td) (td (button (@ (type "submit")) "update"))))))
                    '())
              (p (a (@ (href ,(string-append "submitted?id=" (user-name subject))))
                    "submissions")
                 " | "
                 (a (@ (href ,(string-append "threads?id=" (user-name subject))))
                    "comments")
                 " | "
                 (a (@ (href ,(string-append "favorites?id=" (user-name subject))))
                    "favorites")
                 ,@(if own?
                       '(" | " (a (@ (href "hidden")) "hidden")
                         " | " (a (@ (href "changepw")) "change password"))
                       '())))))))

(define* (message-page #:key user title message (csrf ""))
  "Return a page that says MESSAGE (text or SXML)."
  (page #:title title #:user user #:csrf csrf
        #:body `((div (@ (class "msg")) ,message))))

(define* (leaders-page #:key users user (csrf ""))
  "Return the page of USERS (<user>s, most karma first) and their karma."
  (page #:title "Leaders" #:user user #:label "leaders" #:csrf csrf
        #:body
        `((table (@ (class "leaders") (style "padding:10px"))
            ,@(map (lambda (leader n)
                     `(tr (td (@ (class "rank")) ,(string-append (number->string n) "."))
                          (td (a (@ (href ,(string-append "user?id=" (user-name leader))))
                                 ,(user-name leader)))
                          (td (@ (style "text-align:right;padding-left:2em"))
                              ,(user-karma leader))))
                   users (iota (length users) 1))))))

(define* (password-page #:key user csrf message (errors '()))
  "Return USER's form to change their password: the current one, then
the new one."
  (define (error name) (assoc-ref errors name))
  (page #:title "Change Password" #:user user #:csrf csrf
        #:body
        `((div (@ (style "padding:10px;color:#000"))
            ,@(if message `((p (@ (class "error")) ,message)) '())
            (form (@ (method "post") (action "changepw") (class "news"))
              ,(csrf-field csrf)
              (table
               ,(field "current password" "current" "password" #f (error "current")
                       '(autocomplete "current-password"))
               ,(field "new password" "password" "password" #f (error "password")
                       '(autocomplete "new-password"))
               (tr (td) (td (button (@ (type "submit")) "change")))))))))

(define* (flagged-page #:key items user csrf now)
  "Return the admins' page of flagged and dead ITEMS, each with its
flags and a button that kills it or brings it back."
  (page #:title "Flagged" #:user user #:label "flagged" #:csrf csrf
        #:body
        `((table (@ (class "stories") (style "padding:10px"))
            ,@(map (lambda (item)
                     `(tr (@ (class ,(if (item-dead? item) "athing dead" "athing")))
                          (td ,(item-flags item) ,(if (= 1 (item-flags item)) " flag" " flags"))
                          (td (a (@ (href ,(string-append "item?id=" (number->string (item-id item)))))
                                 ,(or (item-title item)
                                      (let ((text (or (item-text item) "")))
                                        (if (> (string-length text) 80)
                                            (string-append (substring text 0 80) "…")
                                            text))))
                              " by " (a (@ (href ,(string-append "user?id=" (item-by item))))
                                        ,(item-by item))
                              " " ,(text-age (minutes-since now (item-time item))))
                          (td ,(if (item-dead? item)
                                   (item-form "moderate" item csrf "flagged" '(("action" . "revive"))
                                              "revive" "linkish" "revive")
                                   (item-form "moderate" item csrf "flagged" '(("action" . "kill"))
                                              "kill" "linkish" "kill")))))
                   items)))))
