;;; (blog app) --- the blog: requests in, pages out, the cache between

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `make-blog-app' returns the blog's handler.  A request flows:
;;;
;;;  1. the ref check: `branch-commit' reads refs/heads/master (one file
;;;     read).  If the commit moved — a comment, the admin, or a `git push'
;;;     from outside — the worker's page cache is dropped and the index
;;;     (every post's metadata) read again from the new commit, reusing
;;;     the posts whose trees did not change;
;;;  2. a GET or HEAD from a visitor who is not logged in (no session
;;;     cookie) is answered from the cache when it can be: the page's bytes
;;;     keyed by its URL, with the commit as ETag and the commit's time as
;;;     Last-Modified, and a 304 when If-None-Match or If-Modified-Since
;;;     say the client has it.  A miss renders the page and keeps it;
;;;  3. anything else (the admin, with its session; a comment's POST) goes
;;;     through the sessions (when it has a cookie, or is the admin's)
;;;     and the CSRF check of the admin's forms to the router, whose
;;;     routes (`blog-routes', `admin-routes') are data; pages for the
;;;     logged-in admin, who sees drafts, are never cached.
;;;
;;; Steps 2 and 3 are middlewares of (plucky web middleware) around a
;;; (plucky web router): `make-blog-app' composes them.
;;;
;;; This is the seed's design (tekuti's): the cache is keyed by the
;;; branch's commit, so nothing is ever stale, and a cached page costs a
;;; ref read and a hash lookup (bench/blog measures both).  Each worker
;;; keeps its own cache.
;;;
;;; Each request's phases are timed (plucky web timing) for the status
;;; page: 'ref-check (step 1's read of the ref), 'git (reading the index
;;; or a blob from the repository), 'render (a cache miss's page made,
;;; its git reads apart).
;;;
;;; Comments from visitors carry no session: a page in the cache is the
;;; same bytes for everyone, so its form cannot hold a per-visitor CSRF
;;; token.  It holds instead a token made from the post and the day with
;;; the blog's secret (HMAC-SHA-256), good for two days: a POST without a
;;; token, with another post's, or with an old one is refused.  What
;;; stops spam is the honeypot field (hidden from people, filled by
;;; bots) and a rate limit per address.  The admin's forms carry the
;;; session's token, as the news site's do.
;;;
;;; The limits are counted in the sessions' database ((plucky web
;;; limit)), which every worker shares: comments per address, and
;;; failed logins of the admin per name and per address (past 10 in 15
;;; minutes a login is answered 429 with Retry-After, the password not
;;; tried).
;;;
;;; All links are relative, so the blog works mounted under any prefix
;;; (the demo serves it at /blog/).  The Atom feed's alone are absolute:
;;; they start with the blog's canonical origin when one is configured
;;; ("https://blog.example.org"), else with the request's own (its
;;; scheme, https when it came over TLS, and its Host) -- and then the
;;; feed is cached under that origin, so that a request with a forged
;;; Host gets links to that host and nobody else does.
;;;
;;; Code:

(define-module (blog app)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-11)
  #:use-module ((srfi srfi-19) #:hide (current-time))
  #:use-module (ice-9 match)
  #:use-module (ice-9 threads)
  #:use-module (rnrs bytevectors)
  ;; (sxml simple) brings Guile's XML parser too: loaded at the first
  ;; Atom feed (tests/apps/lazy.scm)
  #:autoload (sxml simple) (sxml->xml)
  #:use-module (web request)
  #:use-module (web response)
  #:use-module (web uri)
  #:use-module ((plucky server) #:select (current-request-peer current-request-scheme))
  #:use-module ((plucky web router) #:select (route mount make-router router-handler
                                              request-mount-prefix query-params))
  #:use-module ((plucky web middleware) #:select (wrap redirect))
  #:use-module ((plucky web csrf) #:select (csrf-token csrf-field csrf-middleware))
  #:use-module (plucky web memfile)
  #:use-module (plucky web html)
  #:use-module ((plucky web timing) #:select (with-phase with-server-timing))
  #:use-module (plucky web forms)
  #:use-module (plucky web session)
  #:use-module (plucky web password)
  #:use-module (plucky web limit)
  #:use-module ((plucky web crypto) #:select (bytes->base64url hmac-sha256
                                              bytevector=?/constant-time
                                              base64url->bytes))
  #:use-module (blog git)
  #:use-module (blog store)
  #:use-module (blog markup)
  #:use-module (blog views)
  #:export (make-blog-app))

;;; Limits on what visitors send.

(define author-limit 100)
(define email-limit 254)
(define url-limit 500)
(define comment-limit 10000)            ; characters
(define body-limit (* 64 1024))         ; bytes of a comment's whole POST
(define cache-limit 1000)               ; pages kept per worker
;; Pages from this size on are kept in a memfd and sent with sendfile(2)
;; (plucky web memfile); smaller ones are copied behind the head, one
;; write(2) for both, which costs less than a write and a sendfile.
(define default-memfile-threshold 16384)
(define day 86400)
(define login-failures 10)              ; failed logins per name and per address…
(define login-window (* 15 60))         ; …in fifteen minutes, then 429

;;; The blog's state in this worker.

(define-record-type <blog>
  (%make-blog store secret admin-name admin-hash comment-days
              comments address lock memfile-threshold origin scheme logins)
  blog?
  (store blog-store)
  (secret blog-secret)                  ; bytevector: the comment tokens' key
  (admin-name blog-admin-name)
  (admin-hash blog-admin-hash)          ; Argon2id
  (comment-days blog-comment-days)      ; comments close this many days on; #f: never
  (comments blog-comments)              ; <rate-limit>: comments per address
  (address blog-address)                ; request -> the client's address
  (lock blog-lock)                      ; the index and cache
  (memfile-threshold blog-memfile-threshold) ; bytes: pages kept in a memfd
  (origin blog-origin)                  ; "https://host[:port]", or #f: the request's
  (scheme blog-scheme)                  ; request -> 'http or 'https
  (logins blog-logins))                 ; <rate-limit>: failed logins

(define* (make-blog #:key store secret admin-name admin-hash comment-days
                    comments address memfile-threshold origin scheme logins)
  (%make-blog store secret admin-name admin-hash comment-days
              comments address (make-mutex) memfile-threshold origin scheme logins))

;; What the current commit gives: its index and the cached pages.
(define-record-type <view>
  (make-view commit day index etag last-modified pages not-modified)
  view?
  (commit view-commit)
  (day view-day)                        ; the comment tokens' day
  (index view-index)
  (etag view-etag)                      ; (commit . #t): strong
  (last-modified view-last-modified)    ; a date
  ;; "path?query" -> (response . body): body a bytevector, or a
  ;; <memfile> for a large page
  (pages view-pages)
  (not-modified view-not-modified))     ; the 304 response, made once

(define-record-type <page>
  (make-page code content-type bytes)
  page?
  (code page-code)
  (content-type page-content-type)
  (bytes page-bytes))

(define (current-view blog state)
  ;; -> the view of the branch's commit, made again if it moved (or the
  ;; day did: the post pages' comment tokens are the day's).  The check
  ;; of every request allocates nothing but its thunk; the making of a
  ;; view is apart, under the lock.
  (let ((commit (with-phase 'ref-check (lambda () (branch-commit (blog-store blog)))))
        (day (today))
        (old (car state)))
    (if (view-fresh? old commit day)
        old
        (renew-view! blog state commit day))))

(define (view-fresh? view commit day)
  (and view (equal? (view-commit view) commit) (= (view-day view) day)))

(define (renew-view! blog state commit day)
  ;; -> the view of COMMIT on DAY, made unless another thread just did
  (with-mutex (blog-lock blog)
    (let ((old (car state)))
      (if (view-fresh? old commit day)
          old
          (let* ((index (if (and old (equal? (view-commit old) commit))
                            (view-index old)
                            (with-phase 'git
                              (lambda ()
                                (load-blog-index (blog-store blog) commit
                                                 (and old (view-index old)))))))
                 (etag (cons commit #t))
                 (last-modified (time-utc->date
                                 (make-time time-utc 0 (blog-index-time index)) 0))
                 (view (make-view commit day index etag last-modified
                                  (make-hash-table)
                                  (build-response
                                   #:code 304
                                   #:headers `((etag . ,etag)
                                               (last-modified . ,last-modified))))))
            (set-car! state view)
            (when old (drop-pages! old))
            view)))))

(define (drop-pages! view)
  ;; The memfiles of VIEW's pages are closed once their last response
  ;; is sent: VIEW is no longer current.
  (hash-for-each (lambda (key hit)
                   (when (memfile? (cdr hit))
                     (memfile-drop! (cdr hit))))
                 (view-pages view)))

(define (keep-page blog response bytes)
  ;; -> what the cache keeps of a page: (response . bytes), or (response
  ;; . memfile) for a large one when a memfd can be made
  (cons response
        (or (and (>= (bytevector-length bytes) (blog-memfile-threshold blog))
                 (bytevector->memfile bytes))
            bytes)))

(define (hit-body hit)
  ;; -> the body that sends a cached page, or #f when its memfile was
  ;; closed meanwhile (the view moved on: the caller renders afresh)
  (let ((body (cdr hit)))
    (if (memfile? body) (memfile-body body) body)))

(define (cache-key request)
  (let ((uri (request-uri request)))
    (if (uri-query uri)
        (string-append (uri-path uri) "?" (uri-query uri))
        (uri-path uri))))

(define (cached-response blog state request)
  ;; -> (response . bytes) for a visitor's GET or HEAD the cache can
  ;; answer, else #f: the fast path, before any routing
  (and (memq (request-method request) '(GET HEAD))
       (let* ((view (current-view blog state))
              (hit (hash-ref (view-pages view) (cache-key request))))
         (and hit
              (if (not-modified? request view)
                  (cons (view-not-modified view) #f)
                  (let ((body (hit-body hit)))
                    (and body (cons (car hit) body))))))))

;;; Requests.

(define (base-for segments trailing-slash?)
  ;; the relative path back to the root from a page at SEGMENTS
  (let ((depth (if (null? segments) 0
                   (- (length segments) (if trailing-slash? 0 1)))))
    (string-concatenate (make-list depth "../"))))

(define (form-params body)
  (if (bytevector? body) (urlencoded->alist body) '()))

(define (session-cookie? request)
  (let ((cookie (assq-ref (request-headers request) 'cookie)))
    (and cookie (string-contains (if (string? cookie) cookie (format #f "~a" cookie))
                                 "session="))))

;;; Responses.

(define* (bytes-response page view #:optional (extra '()))
  (values (build-response #:code (page-code page)
                          #:headers `((content-type . ,(page-content-type page))
                                      (etag . ,(view-etag view))
                                      (last-modified . ,(view-last-modified view))
                                      (cache-control . (no-cache))
                                      ,@extra))
          (page-bytes page)))

(define (not-modified? request view)
  (let ((match (request-if-none-match request))
        (since (request-if-modified-since request)))
    (cond (match (and (list? match)
                      (any (lambda (etag) (equal? (car etag) (view-commit view))) match)))
          (since (>= (time-second (date->time-utc since))
                     (time-second (date->time-utc (view-last-modified view)))))
          (else #f))))

(define (not-modified view)
  (values (view-not-modified view) #f))

(define (html-page code tree)
  (make-page code '(text/html (charset . "utf-8")) (html->bytevector tree)))

(define (page-now page)
  ;; a page for the logged-in admin: never cached, no validators
  (values (build-response #:code (page-code page)
                          #:headers `((content-type . ,(page-content-type page))
                                      (cache-control . (no-store))))
          (page-bytes page)))

(define (plain code text)
  (values (build-response #:code code #:headers '((content-type . (text/plain (charset . "utf-8")))))
          (string-append text "\n")))

;;; Public pages: procedures of (blog view base segments params) -> a <page>.

(define (index-page blog view base)
  (let* ((index (view-index view))
         (posts (let ((all (blog-index-public-posts index)))
                  (if (> (length all) 10) (take all 10) all))))
    (html-page 200
               (page base blog-title
                     (map (lambda (post)
                            (post-article base post (post-body-html blog post)))
                          posts)
                     #:index index))))

(define (post-body-html blog post)
  (post->html (post-content (blog-store blog) post) (post-format post)))

(define (related-posts index post)
  ;; the five public posts sharing most tags with POST, newest first among equals
  (let* ((tags (post-tags post))
         (scored (filter-map (lambda (other)
                               (and (not (eq? other post))
                                    (let ((n (count (lambda (t) (member t tags)) (post-tags other))))
                                      (and (> n 0) (cons n other)))))
                             (blog-index-public-posts index)))
         (sorted (stable-sort scored (lambda (a b) (> (car a) (car b))))))
    (map cdr (if (> (length sorted) 5) (take sorted 5) sorted))))

(define (comments-open? blog post now)
  (and (post-comments-open? post)
       (post-published? post)
       (or (not (blog-comment-days blog))
           (< (- now (post-timestamp post)) (* day (blog-comment-days blog))))))

(define (comment-token blog post day-number)
  (bytes->base64url
   (hmac-sha256 (blog-secret blog)
                (string-append (post-key post) "|" (number->string day-number)))))

(define (today) (quotient (current-time) day))

(define (valid-token? blog post token)
  (and (string? token)
       (let ((given (base64url->bytes token)))
         (and given
              (any (lambda (d)
                     (bytevector=?/constant-time
                      given (base64url->bytes (comment-token blog post d))))
                   (list (today) (- (today) 1)))))))

(define* (show-post blog view base post #:key admin-form (errors '()) (values '()) (code 200))
  (let ((index (view-index view))
        (store (blog-store blog)))
    (html-page code
               (post-page base index post (post-body-html blog post)
                          (post-comments store post)
                          (related-posts index post)
                          #:open? (comments-open? blog post (current-time))
                          #:token (comment-token blog post (today))
                          #:admin-form admin-form
                          #:errors errors #:values values))))

(define (date-prefix segments)
  ;; ("2012" "03") -> "2012/03/" when the parts are numbers, else #f
  (and (every (lambda (s) (and (<= 1 (string-length s) 4) (string-every char-set:digit s)))
              segments)
       (string-append (string-join segments "/") "/")))

(define (archive-page view base segments)
  (let* ((index (view-index view))
         (prefix (date-prefix segments)))
    (if (not prefix)
        (html-page 404 (message-page base "not found" "No such archive." #:index index))
        (let ((posts (filter (lambda (post) (string-prefix? prefix (post-path post)))
                             (blog-index-public-posts index))))
          (html-page (if (null? posts) 404 200)
                     (listing-page base index
                                   (if (null? segments) "archives"
                                       (string-append "archives: " (string-join segments "/")))
                                   posts))))))

(define (tag-page view base tag)
  (let* ((index (view-index view))
         (posts (posts-tagged index tag)))
    (html-page (if (null? posts) 404 200)
               (listing-page base index (string-append "posts tagged \"" tag "\"") posts
                             #:intro `((p (a (@ (href ,(string-append base "feed/atom?with="
                                                                      (uri-encode tag))))
                                             "Atom feed of this tag")))))))

(define (search-page blog view base text)
  (let* ((index (view-index view))
         (needle (string-downcase text))
         (posts (if (string-null? needle) '()
                    (filter (lambda (post)
                              (or (string-contains (string-downcase (post-title post)) needle)
                                  (string-contains-ci (post-content (blog-store blog) post) needle)))
                            (blog-index-public-posts index)))))
    (html-page 200 (listing-page base index (string-append "search: \"" text "\"") posts))))

(define (request-origin blog request)
  ;; -> "SCHEME://HOST[:PORT]" of REQUEST as its client sent it
  (let ((host (request-host request)))
    (string-append (symbol->string ((blog-scheme blog) request)) "://"
                   (if host (car host) "localhost")
                   (if (and host (cdr host)) (format #f ":~a" (cdr host)) ""))))

(define (site-url blog request)
  ;; -> the blog's absolute URL, for the feed's links: from the
  ;; configured origin, else from the request's (see `feed-cache-key')
  (string-append (or (blog-origin blog) (request-origin blog request))
                 (request-mount-prefix request) "/"))

(define (feed-cache-key blog request key)
  ;; -> the feed's cache key: KEY when the origin is configured, else
  ;; KEY under the request's origin, whose Host then shows in no one
  ;; else's feed.  The fast path (`cached-response') never finds these
  ;; keys: a feed's hit goes through the router.
  (if (blog-origin blog)
      key
      (string-append (request-origin blog request) " " key)))

(define (atom-date timestamp)
  (date->string (time-utc->date (make-time time-utc 0 timestamp) 0) "~Y-~m-~dT~H:~M:~SZ"))

(define (feed-page blog view request params)
  (let* ((index (view-index view))
         (with (filter-map (match-lambda (("with" . tag) tag) (_ #f)) params))
         (without (filter-map (match-lambda (("without" . tag) tag) (_ #f)) params))
         (posts (filter (lambda (post)
                          (and (every (lambda (t) (member t (post-tags post))) with)
                               (not (any (lambda (t) (member t (post-tags post))) without))))
                        (blog-index-public-posts index)))
         (posts (if (> (length posts) 10) (take posts 10) posts))
         (site (site-url blog request))
         (url (lambda (post) (string-append site (substring (post-url "" post) 0)))))
    (make-page 200 '(application/atom+xml (charset . "utf-8"))
               (string->utf8
                (call-with-output-string
                  (lambda (port)
                    (display "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n" port)
                    (sxml->xml
                     `(feed (@ (xmlns "http://www.w3.org/2005/Atom"))
                            (title ,blog-title)
                            (id ,site)
                            (link (@ (rel "alternate") (href ,site)))
                            (link (@ (rel "self") (href ,(string-append site "feed/atom"))))
                            (updated ,(atom-date (if (null? posts) 0 (post-timestamp (car posts)))))
                            ,@(map (lambda (post)
                                     `(entry (title ,(post-title post))
                                             (id ,(url post))
                                             (link (@ (rel "alternate") (href ,(url post))))
                                             (author (name "the author"))
                                             (published ,(atom-date (post-timestamp post)))
                                             (updated ,(atom-date (post-timestamp post)))
                                             ,@(map (lambda (t) `(category (@ (term ,t)))) (post-tags post))
                                             (content (@ (type "html")) ,(post-body-html blog post))))
                                   posts))
                     port)))))))

;;; The routes: the blog's pages as data.  Each handler is given the
;;; visit: the view of the branch's commit, the relative path back to
;;; the blog's root from the page, and whether the admin is logged in.

(define-record-type <visit>
  (make-visit view base admin?)
  visit?
  (view visit-view)                     ; <view> of the current commit
  (base visit-base)                     ; "../../": back to the root
  (admin? visit-admin?))                ; the admin is logged in

(define (visit-of blog state request)
  (let* ((path (uri-path (request-uri request)))
         (segments (split-and-decode-uri-path path)))
    (make-visit (current-view blog state)
                (base-for segments (string-suffix? "/" path))
                (and (session-cookie? request) (equal? (session-ref "admin") #t)))))

(define (visit-index visit)
  (view-index (visit-view visit)))

(define (page-route blog state handler)
  ;; a route's handler of (request body params) calling HANDLER of
  ;; (blog visit request body params)
  (lambda (request body params)
    (handler blog (visit-of blog state request) request body params)))

(define (cached blog state visit request key make)
  ;; a public page: from the cache, or made by MAKE (-> a <page>) and
  ;; kept under KEY; the admin's are made afresh
  (let ((view (visit-view visit)))
    (if (visit-admin? visit)
        (page-now (make))
        (let* ((hit (hash-ref (view-pages view) key))
               (body (and hit (hit-body hit))))
          (cond ((not-modified? request view) (not-modified view))
                (body (values (car hit) body))
                (else
                 (let-values (((response bytes)
                               (with-phase 'render (lambda () (bytes-response (make) view)))))
                   ;; Only into the current view: a view replaced
                   ;; meanwhile has had its memfiles dropped.
                   (when (and (not hit) (eq? (car state) view)
                              (< (hash-count (const #t) (view-pages view)) cache-limit))
                     (hash-set! (view-pages view) key (keep-page blog response bytes)))
                   (values response bytes))))))))

(define (public blog state make)
  ;; a cached public page: (MAKE blog visit request params) -> a <page>
  (lambda (request body params)
    (let ((visit (visit-of blog state request)))
      (cached blog state visit request (cache-key request)
              (lambda () (make blog visit request params))))))

(define (not-found-tree visit)
  (message-page (visit-base visit) "not found" "There is no such page here."
                #:index (visit-index visit)))

(define (not-found-page blog visit)
  (with-phase 'render
    (lambda ()
      (bytes-response (html-page 404 (not-found-tree visit)) (visit-view visit)))))

(define (find-post visit params)
  ;; -> the post the route's PARAMS name, if the viewer may see it
  (let ((post (index-post-by-path (visit-index visit)
                                  (string-join (map (lambda (name) (assq-ref params name))
                                                    '(year month day name))
                                               "/"))))
    (and post (or (post-published? post) (visit-admin? visit)) post)))

(define (post-route blog state)
  (page-route
   blog state
   (lambda (blog visit request body params)
     (let ((post (find-post visit params))
           (base (visit-base visit)))
       (cond ((not post) (not-found-page blog visit))
             ((eq? (request-method request) 'POST)
              (post-comment blog (visit-view visit) request body base post))
             ((visit-admin? visit)
              (page-now (show-post blog (visit-view visit) base post
                                   #:admin-form (admin-comment-form blog base post))))
             (else
              (cached blog state visit request (cache-key request)
                      (lambda () (show-post blog (visit-view visit) base post)))))))))

(define (archives-route blog state)
  (public blog state
          (lambda (blog visit request params)
            (let ((date (assq-ref params 'date)))
              (archive-page (visit-view visit) (visit-base visit)
                            (if (string-null? date) '() (string-split date #\/)))))))

(define (feed-route blog state)
  (lambda (request body params)
    (let ((visit (visit-of blog state request)))
      (cached blog state visit request (feed-cache-key blog request (cache-key request))
              (lambda () (feed-page blog (visit-view visit) request (query-params request)))))))

(define (search-route blog state)
  (page-route
   blog state
   (lambda (blog visit request body params)
     (let ((text (or (assoc-ref (if (eq? (request-method request) 'POST)
                                    (form-params body)
                                    (query-params request))
                                "string")
                     "")))
       (bytes-response (search-page blog (visit-view visit) (visit-base visit)
                                    (if (> (string-length text) 200) (substring text 0 200) text))
                       (visit-view visit))))))

(define (blog-routes blog state)
  (define (index blog visit request params)
    (index-page blog (visit-view visit) (visit-base visit)))
  (append
   (list (route 'GET "/" (public blog state index) #:name 'index)
         (route 'GET "/index.html" (public blog state index))
         (route '(GET POST) "/archives/:year/:month/:day/:name" (post-route blog state)
                #:name 'post)
         (route 'GET "/archives/*date" (archives-route blog state) #:name 'archives)
         (route 'GET "/tags"
                (public blog state (lambda (blog visit request params)
                                     (html-page 200 (tags-page (visit-base visit)
                                                               (visit-index visit)))))
                #:name 'tags)
         (route 'GET "/tags/:tag"
                (public blog state (lambda (blog visit request params)
                                     (tag-page (visit-view visit) (visit-base visit)
                                               (assq-ref params 'tag))))
                #:name 'tag)
         (route 'GET "/feed" (feed-route blog state))
         (route 'GET "/feed/atom" (feed-route blog state) #:name 'feed)
         (route '(GET POST) "/search" (search-route blog state) #:name 'search))
   (admin-routes blog state)))

;;; Comments.

(define (bad-text? text)
  ;; invalid UTF-8 (read as U+FFFD) or control characters but newlines and tabs
  (string-any (lambda (c) (or (char=? c #\xFFFD)
                              (and (char<? c #\space) (not (memv c '(#\newline #\return #\tab))))
                              (char=? c #\delete)))
              text))

(define (comment-errors fields)
  (let ((author (or (assoc-ref fields "author") ""))
        (email (or (assoc-ref fields "email") ""))
        (url (or (assoc-ref fields "url") ""))
        (comment (or (assoc-ref fields "comment") "")))
    (filter-map
     (match-lambda ((bad? . message) (and bad? message)))
     `((,(any bad-text? (list author email url comment))
        . "The comment holds bytes that are not text (invalid UTF-8 or control characters).")
       (,(string-null? (string-trim-both author)) . "Please give a name.")
       (,(> (string-length author) author-limit) . "The name is too long (100 characters at most).")
       (,(> (string-length email) email-limit) . "The email address is too long.")
       (,(and (not (string-null? email)) (not (string-index email #\@)))
        . "The email address needs an @.")
       (,(> (string-length url) url-limit) . "The web address is too long.")
       (,(and (not (string-null? url))
              (not (string-prefix? "http://" url)) (not (string-prefix? "https://" url)))
        . "The web address must start with http:// or https://.")
       (,(string-null? (string-trim-both comment)) . "The comment is empty.")
       (,(> (string-length comment) comment-limit)
        . "The comment is too long (10,000 characters at most).")))))

(define excerpt-length 200)           ; characters of a refused value shown again

(define (excerpt-field field)
  ;; -> FIELD, (name . value) of a refused comment form, as the form
  ;; shows it again: all of it within its limit (nothing typed is
  ;; lost), else its first characters only
  (match field
    ((name . value)
     (let ((limit (match name
                    ("author" author-limit) ("email" email-limit)
                    ("url" url-limit) ("comment" comment-limit) (_ excerpt-length))))
       (if (> (string-length value) limit)
           (cons name (string-append (substring value 0 (min limit excerpt-length)) "…"))
           field)))))

(define (post-comment blog view request body base post)
  (let* ((fields (form-params body))
         (now (current-time)))
    (cond
     ((and (bytevector? body) (> (bytevector-length body) body-limit))
      (plain 413 "The comment is too large."))
     ((not (comments-open? blog post now))
      (plain 403 "Comments on this post are closed."))
     ((not (valid-token? blog post (assoc-ref fields "token")))
      (plain 403 "The form's token is missing or expired: reload the page and post again."))
     ((not (string-null? (or (assoc-ref fields "website") "")))
      (plain 400 "Refused: the field meant to stay empty was filled."))
     ((pair? (comment-errors fields))
      (bytes-response (show-post blog view base post #:code 400
                                 #:errors (comment-errors fields)
                                 #:values (if (any bad-text? (map cdr fields)) '()
                                              (map excerpt-field fields)))
                      view))
     ((rate-limit-take! (blog-comments blog) ((blog-address blog) request))
      => (lambda (wait)
           (values (too-many-requests wait)
                   (format #f "Too many comments from your address: try again in ~a minutes.\n"
                           (quotient (+ wait 59) 60)))))
     (else
      (let* ((author (string-trim-both (assoc-ref fields "author")))
             (text (comment-blob-text now author
                                      (or (assoc-ref fields "email") "")
                                      (or (assoc-ref fields "url") "")
                                      (escape-comment (assoc-ref fields "comment"))))
             (id (add-comment! (blog-store blog) post text
                               (format #f "comment on \"~a\" by ~a" (post-title post) author))))
        (if id
            ;; The fragment names the comment; Guile's Location writer
            ;; drops it, and the browser then keeps the form's #comments.
            (redirect (string-append (uri-encode (last (string-split (post-path post) #\/)))
                                     "#" id))
            (plain 404 "The post is gone.")))))))

;;; The admin.  Its forms carry the session's CSRF token ((plucky web
;;; csrf)), which `make-blog-app' checks for every POST under admin/
;;; but the login's.

(define (admin-comment-form blog base post)
  (lambda (comment)
    `(form (@ (method "post")
              (action ,(string-append base "admin/delete-comment/" (uri-encode (post-key post))
                                      "/" (comment-id comment))))
           ,(csrf-field)
           (button (@ (type "submit")) "delete this comment"))))

(define (html-now code tree)
  (values (build-response #:code code
                          #:headers '((content-type . (text/html (charset . "utf-8")))
                                      (cache-control . (no-store))))
          (html->bytevector tree)))

(define (split-tag-field text)
  (delete-duplicates
   (remove string-null? (map string-trim-both (string-split (or text "") #\,)))))

(define (login-keys blog request name)
  ;; -> what failed logins count by: the name given (cut short: it is
  ;; a key, not a page) and the client's address
  (list (string-append "name:" (if (> (string-length name) 64) (substring name 0 64) name))
        (string-append "address:" ((blog-address blog) request))))

(define (admin-url visit)
  (string-append (visit-base visit) "admin"))

(define (post-by-key visit key)
  (find (lambda (p) (string=? (post-key p) key)) (blog-index-posts (visit-index visit))))

(define (admin-login blog visit request body params)
  (let* ((fields (form-params body))
         (base (visit-base visit))
         (name (or (assoc-ref fields "name") ""))
         (password (or (assoc-ref fields "password") ""))
         (keys (login-keys blog request name))
         (wait (fold (lambda (key wait)
                       (let ((w (rate-limit-retry-after (blog-logins blog) key)))
                         (if (and w (or (not wait) (> w wait))) w wait)))
                     #f keys)))
    (cond
     ;; past the failures allowed, the password is not tried
     (wait
      (values (too-many-requests wait #:content-type '(text/html (charset . "utf-8")))
              (html->bytevector
               (login-page base #:error (format #f "Too many failed logins: try again in ~a minutes."
                                                (quotient (+ wait 59) 60))))))
     ;; The password is verified whatever the name, so that a wrong
     ;; name takes as long to refuse as a wrong password.
     ((and (verify-password (blog-admin-hash blog) password)
           (string=? name (blog-admin-name blog)))
      (rate-limit-clear! (blog-logins blog) (car keys))
      (session-regenerate!)
      (session-set! "admin" #t)
      (redirect (admin-url visit)))
     (else
      (for-each (lambda (key) (rate-limit-hit! (blog-logins blog) key)) keys)
      (html-now 403 (login-page base #:error "Wrong name or password."))))))

(define (admin-home blog visit request body params)
  (if (visit-admin? visit)
      (html-now 200 (admin-page (visit-base visit) (csrf-token)
                                (blog-index-posts (visit-index visit))
                                (commit-log (blog-store blog) #:limit 5)))
      (html-now 200 (login-page (visit-base visit)))))

(define (save-post blog visit body old-key)
  ;; a new post (OLD-KEY #f) or a post changed, from the edit form
  (let* ((fields (form-params body))
         (title (string-trim-both (or (assoc-ref fields "title") "")))
         (text (or (assoc-ref fields "body") ""))
         (status (or (assoc-ref fields "status") "draft"))
         (old (and old-key (post-by-key visit old-key))))
    (cond
     ((or (string-null? title) (bad-text? title) (bad-text? text)
          (> (string-length title) 200) (not (member status '("publish" "draft" "private"))))
      (html-now 400 (edit-page (visit-base visit) (csrf-token) #:post old #:body text
                               #:errors '("A post needs a title (200 characters at most), text and a status."))))
     (else
      (let ((key (save-post! (blog-store blog) #:old-key old-key #:title title #:body text
                             #:tags (split-tag-field (assoc-ref fields "tags"))
                             #:status status
                             #:comments-open? (equal? (assoc-ref fields "comments") "open")
                             ;; tekuti's name, so that tekuti reads it too
                             #:format (if (equal? (assoc-ref fields "format") "markdown")
                                          "marxdown" "html")
                             #:timestamp (if old (post-timestamp old) (current-time))
                             #:message (format #f "~a: \"~a\"" (if old "post modified" "new post")
                                               title))))
        (if key
            (redirect (string-append (admin-url visit) "/posts/" (uri-encode key)))
            (plain 404 "The post is gone.")))))))

(define (admin-routes blog state)
  (define (admin-only handler)
    ;; HANDLER for the logged-in admin; others go to the login form
    (page-route blog state
                (lambda (blog visit request body params)
                  (cond
                   ((visit-admin? visit) (handler blog visit request body params))
                   ((eq? (request-method request) 'GET) (redirect (admin-url visit)))
                   (else (plain 403 "Log in first."))))))
  (define store (blog-store blog))
  (list
   (route 'GET "/admin" (page-route blog state admin-home) #:name 'admin)
   (route 'POST "/admin/login" (page-route blog state admin-login) #:name 'admin-login)
   (route 'GET "/admin/login"
          (page-route blog state (lambda (blog visit . _) (redirect (admin-url visit)))))
   (route 'POST "/admin/logout"
          (admin-only (lambda (blog visit . _)
                        (session-destroy!)
                        (redirect (visit-base visit))))
          #:name 'admin-logout)
   (route 'GET "/admin/new"
          (admin-only (lambda (blog visit . _) (html-now 200 (edit-page (visit-base visit) (csrf-token)))))
          #:name 'admin-new)
   (route 'GET "/admin/posts/:key"
          (admin-only (lambda (blog visit request body params)
                        (let ((post (post-by-key visit (assq-ref params 'key))))
                          (if post
                              (html-now 200 (edit-page (visit-base visit) (csrf-token) #:post post
                                                       #:body (post-content store post)))
                              (plain 404 "No such post.")))))
          #:name 'admin-post)
   (route 'POST "/admin/new-post"
          (admin-only (lambda (blog visit request body params) (save-post blog visit body #f)))
          #:name 'admin-new-post)
   (route 'POST "/admin/modify-post/:key"
          (admin-only (lambda (blog visit request body params)
                        (save-post blog visit body (assq-ref params 'key))))
          #:name 'admin-modify-post)
   (route 'POST "/admin/delete-post/:key"
          (admin-only (lambda (blog visit request body params)
                        (let ((key (assq-ref params 'key)))
                          (delete-post! store key (format #f "post deleted: ~a" key))
                          (redirect (admin-url visit)))))
          #:name 'admin-delete-post)
   (route 'POST "/admin/delete-comment/:key/:id"
          (admin-only (lambda (blog visit request body params)
                        (let* ((key (assq-ref params 'key))
                               (post (post-by-key visit key)))
                          (delete-comment! store key (assq-ref params 'id)
                                           (format #f "comment deleted on \"~a\""
                                                   (if post (post-title post) key)))
                          (redirect (if post (post-url (visit-base visit) post)
                                        (admin-url visit))))))
          #:name 'admin-delete-comment)
   (route 'GET "/admin/changes"
          (admin-only (lambda (blog visit . _)
                        (html-now 200 (changes-page (visit-base visit)
                                                    (commit-log store #:limit 30)))))
          #:name 'admin-changes)
   (route 'GET "/admin/changes/:hex"
          (admin-only (lambda (blog visit request body params)
                        (let ((hex (assq-ref params 'hex)))
                          (if (and (= (string-length hex) 40) (string-every char-set:hex-digit hex))
                              (html-now 200 (change-page (visit-base visit) (csrf-token)
                                                         (commit-info store hex)
                                                         (commit-diff store hex)))
                              (plain 404 "No such admin page.")))))
          #:name 'admin-change)
   (route 'POST "/admin/revert-change/:hex"
          (admin-only (lambda (blog visit request body params)
                        (let ((hex (assq-ref params 'hex)))
                          (revert-commit! store hex (format #f "revert ~a" hex))
                          (redirect (string-append (admin-url visit) "/changes")))))
          #:name 'admin-revert-change)))

;;; The handler.

(define (peer-address request)
  (format #f "~a" (or (current-request-peer) "unknown")))

(define (peer-scheme request)
  (or (current-request-scheme) 'http))

(define (check-origin origin)
  ;; -> ORIGIN without a trailing slash, or a 'blog-error naming it
  (let ((text (and origin (string-trim-right origin #\/))))
    (unless (or (not origin)
                (let ((uri (string->uri text)))
                  (and uri (memq (uri-scheme uri) '(http https)) (uri-host uri)
                       (string-null? (uri-path uri)) (not (uri-query uri))
                       (not (uri-fragment uri)) (not (uri-userinfo uri)))))
      (throw 'blog-error
             (format #f "the canonical origin must be http(s)://HOST[:PORT], not ~s" origin)))
    text))

(define (admin-path? request)
  (string-prefix? "/admin" (uri-path (request-uri request))))

(define (from-the-cache blog state)
  ;; A middleware: a visitor's GET or HEAD the cache can answer is
  ;; answered before any routing, and a visitor without a session
  ;; cookie skips the session store: the common case costs a ref read
  ;; and a hash lookup (bench/blog).
  (lambda (handler)
    (lambda (request body)
      (if (or (session-cookie? request) (admin-path? request))
          (handler request body)
          (match (cached-response blog state request)
            ((response . bytes) (values response bytes))
            (#f (handler request body)))))))

(define (sessions-when-needed db)
  ;; A middleware: the session store is read for a request that has a
  ;; session cookie, or is the admin's; others go on without
  (lambda (handler)
    (let ((with-session (with-sessions handler #:db db)))
      (lambda (request body)
        (if (or (session-cookie? request) (admin-path? request))
            (with-session request body)
            (handler request body))))))

(define (mounted-under prefix app)
  ;; APP, or a router that mounts it under PREFIX ("/blog/")
  (if (string=? prefix "/")
      app
      (router-handler (make-router (list (mount (string-trim-right prefix #\/) app))))))

(define* (make-blog-app #:key store sessions-db (prefix "/") secret
                        (admin-name "admin") admin-hash (comment-days 365)
                        (rate-limit 5) (rate-window 600) (address peer-address)
                        (memfile-threshold default-memfile-threshold)
                        origin (scheme peer-scheme) (server-timing? #f))
  "Return the blog's handler, serving the git store STORE (checked to be
in tekuti's layout first: a 'blog-error otherwise) under PREFIX: \"/\",
or a prefix (\"/blog/\") it is then mounted under; a site of several
apps rather mounts it itself (`mount' of (plucky web router)).  Its
admin logs in as ADMIN-NAME with the password ADMIN-HASH (Argon2id)
verifies; sessions live in SESSIONS-DB (SQLite: an open database, or a
procedure that opens one, called once in each worker), their cookie for
the prefix the blog is mounted under.  SECRET (a bytevector)
keys the comment forms' tokens.  Comments close COMMENT-DAYS after a
post (#f: never); an address may post RATE-LIMIT comments in
RATE-WINDOW seconds, counted in SESSIONS-DB across workers, as are failed
logins (10 in 15 minutes per name and per address, then 429); ADDRESS
maps a request to its client's address.
The Atom feed's links start with ORIGIN (\"https://blog.example.org\"),
or when it is #f with the request's own origin: SCHEME maps a request to
'https when it came over TLS, else 'http.
Cached pages of MEMFILE-THRESHOLD bytes or more are kept in a memfd and
sent with sendfile(2).  Each request's phases (ref-check, git, render)
are timed for the status page; with SERVER-TIMING? true, its response
carries them in a Server-Timing header too."
  (check-blog-layout store)
  (let* ((blog (make-blog #:store store #:secret secret
                          #:admin-name admin-name #:admin-hash admin-hash
                          #:comment-days comment-days
                          ;; shared by the workers: in the sessions' database
                          #:comments (make-rate-limit #:db sessions-db #:name "blog-comments"
                                                      #:limit rate-limit #:window rate-window)
                          #:logins (make-rate-limit #:db sessions-db #:name "blog-login"
                                                    #:limit login-failures #:window login-window)
                          #:address address
                          #:memfile-threshold memfile-threshold
                          #:origin (check-origin origin) #:scheme scheme))
         (state (list #f)))
    (current-view blog state)
    (mounted-under
     prefix
     (wrap (router-handler
            (make-router (blog-routes blog state)
                         ;; kept in the cache as the pages are, a
                         ;; miss and a hit costing what theirs do
                         #:not-found (let ((page (public blog state
                                                         (lambda (blog visit request params)
                                                           (html-page 404 (not-found-tree visit))))))
                                       (lambda (request body) (page request body '())))))
           (with-server-timing #:header? server-timing?)
           (from-the-cache blog state)
           (sessions-when-needed sessions-db)
           ;; the admin's forms; a visitor's comment carries the post's
           ;; token instead (`comment-token'), and the login none
           (csrf-middleware #:methods '(POST)
                            #:exempt? (lambda (request)
                                        (or (not (admin-path? request))
                                            (string=? (uri-path (request-uri request))
                                                      "/admin/login")))
                            #:refuse (lambda (request body)
                                       (plain 403 "The form's token is missing or wrong: reload the page.")))))))
