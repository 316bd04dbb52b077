;;; tests/apps/blog.scm --- the blog, in-process, on a tekuti repository

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A repository in tekuti's layout is made with git commands (one post,
;;; one comment holding tekuti's XHTML), and the app is called as the
;;; server would call it.  Then: the pages, the cache and its 304s, a
;;; change committed from outside showing on the next request, comments
;;; (and hostile ones: refused, or stored escaped), 50 comments posted at
;;; once from 50 threads (all in git after), the admin, and repositories
;;; the app must refuse at start-up.
;;;
;;; Code:

(add-to-load-path (string-append (getcwd) "/apps"))

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 match)
             (ice-9 regex)
             (ice-9 threads)
             (rnrs bytevectors)
             (sqlite3)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             ((plucky server connection)
              #:select (file-body? file-body->bytevector close-file-body!))
             (plucky web password)
             ((plucky server hooks) #:select (take-handler-phases! want-handler-phases!))
             (blog git)
             (blog store)
             (blog app))

(define dir (mkdtemp (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-blog-XXXXXX")))
(define repo (string-append dir "/tekuti"))
(define key "2012%2f03%2f08%2fan-in-depth-look")

(define (sh . words)
  (zero? (status:exit-val (apply system* words))))

(define (git . args)
  (apply sh "git" "-C" repo "-c" "user.name=t" "-c" "user.email=t@example.org" args))

(define (write-file file text)
  (call-with-output-file file (lambda (port) (display text port))))

;; tekuti's layout, made as tekuti would: a tree per post, its comments
;; named by their blob's id.
(mkdir repo)
(git "init" "-q" "-b" "master")
(mkdir (string-append repo "/" key))
(mkdir (string-append repo "/" key "/comments"))
(write-file (string-append repo "/" key "/metadata")
            (string-append "timestamp: " (number->string (- (current-time) 3600)) "\n"
                           "tags: guile, web\nstatus: publish\ntitle: an in-depth look\n"
                           "name: an-in-depth-look\ncomment_status: open\n"))
(write-file (string-append repo "/" key "/content") "What ho!\n\nA <b>long</b> article.")
(write-file (string-append repo "/c")
            "timestamp: 1331246700\nauthor: Aleix\nauthor_email: a@example.org\nauthor_url: http://example.org/\n\nNice <a href=\"http://example.org/x\">post</a><script>alert(1)</script>")
(define tekuti-comment
  (let ((port ((@ (ice-9 popen) open-pipe*) OPEN_READ "git" "-C" repo "hash-object" "-w" "c")))
    (let ((id ((@ (ice-9 rdelim) read-line) port))) ((@ (ice-9 popen) close-pipe) port) id)))
(rename-file (string-append repo "/c") (string-append repo "/" key "/comments/" tekuti-comment))
;; a newer tekuti's post and comment, in its Markdown ("marxdown")
(define md-key "2012%2f03%2f09%2fin-markdown")
(mkdir (string-append repo "/" md-key))
(mkdir (string-append repo "/" md-key "/comments"))
(write-file (string-append repo "/" md-key "/metadata")
            "timestamp: 1331300000\ntags: guile\nstatus: publish\ntitle: in markdown\nname: in-markdown\ncomment_status: closed\nformat: marxdown\n")
(write-file (string-append repo "/" md-key "/content") "# A heading\n\nSome *emphasis* and `(code)`.")
(write-file (string-append repo "/" md-key "/comments/0123456789abcdef0123456789abcdef01234567")
            "timestamp: 1331300100\nauthor: Mallory\nformat: marxdown\n\nA **bold** <script>alert(3)</script> [link](javascript:alert(4))")
(git "add" ".")
(git "commit" "-q" "-m" "tekuti")

(define store (open-git-store repo))
(define sessions (sqlite-open (string-append dir "/sessions.db")))
(define app (make-blog-app #:store store #:sessions-db sessions #:prefix "/blog/"
                           #:secret (make-bytevector 32 7)
                           #:admin-hash (hash-password "correct horse battery")
                           #:rate-limit 1000
                           #:address (lambda (request)
                                       (assq-ref (request-headers request) 'x-test-peer))))

;;; Calling the app, with a cookie jar.

(define jar (make-hash-table))
(define (cookie-header)
  (let ((pairs (hash-map->list (lambda (k v) (string-append k "=" v)) jar)))
    (if (null? pairs) '() `((cookie . ,(string-join pairs "; "))))))
(define (take-cookies! headers)
  (for-each (match-lambda
              (('set-cookie . value)
               (let ((m (string-match "^([^=]+)=([^;]*)" (if (string? value) value (format #f "~a" value)))))
                 (when m
                   (if (string-null? (match:substring m 2))
                       (hash-remove! jar (match:substring m 1))
                       (hash-set! jar (match:substring m 1) (match:substring m 2))))))
              (_ #f))
            headers))

(define (encode-form form)
  (string-join (map (match-lambda
                      ((k . (? bytevector? raw))
                       (string-append k "=" (string-concatenate
                                             (map (lambda (b) (format #f "%~2,'0x" b))
                                                  (bytevector->u8-list raw)))))
                      ((k . v) (string-append (uri-encode k) "=" (uri-encode v))))
                    form)
               "&"))

;; -> (values status headers text)
(define* (call method path #:key form (headers '()) (jar? #t) (peer "192.0.2.1") (app app)
               (host '("blog.test" . #f)))
  (let* ((body (and form (string->utf8 (encode-form form))))
         (request (build-request (string->uri-reference path) #:method method
                                 #:port (open-input-string "")
                                 #:headers `((host . ,host)
                                             (x-test-peer . ,peer)
                                             ;; a form's type, as browsers send it
                                             ,@(if body
                                                   '((content-type application/x-www-form-urlencoded))
                                                   '())
                                             ,@(if jar? (cookie-header) '())
                                             ,@headers))))
    (call-with-values (lambda () (app request body))
      (lambda (response body)
        (when jar? (take-cookies! (response-headers response)))
        (values (response-code response) (response-headers response)
                (cond ((bytevector? body) (utf8->string body))
                      ((string? body) body)
                      ((file-body? body)   ; a cached page, from a memfd
                       (let ((bytes (file-body->bytevector body)))
                         (close-file-body! body)
                         (utf8->string bytes)))
                      (else "")))))))

(define memfile-app
  ;; every cached page in a memfd: the sample's pages are small
  (make-blog-app #:store store #:sessions-db sessions #:prefix "/blog/"
                 #:secret (make-bytevector 32 7) #:memfile-threshold 0))

(define* (raw-call path #:key (headers '()))
  ;; -> the response and body exactly as the app returns them, for a
  ;; visitor without a session
  (memfile-app (build-request (string->uri-reference path) #:method 'GET
                      #:port (open-input-string "")
                      #:headers `((host "blog.test" . #f) ,@headers))
       #f))

(define (open-memfds)
  ;; -> how many memfds this process holds open
  (count (lambda (name)
           (let ((target (false-if-exception
                          (readlink (string-append "/proc/self/fd/" name)))))
             (and target (string-contains target "memfd:plucky-page"))))
         (scandir* "/proc/self/fd")))

(define (scandir* dir)
  (let ((stream (opendir dir)))
    (let lp ((names '()))
      (let ((name (readdir stream)))
        (if (eof-object? name)
            (begin (closedir stream) names)
            (lp (if (member name '("." "..")) names (cons name names))))))))

(define* (other-app #:key (rate-limit 1000) (comment-days 365) (options '()))
  ;; a blog on the same store, with its own cache; OPTIONS: more
  ;; keywords and values for `make-blog-app'
  (apply make-blog-app #:store store #:sessions-db sessions #:prefix "/blog/"
         #:secret (make-bytevector 32 7)
         #:admin-hash (hash-password "correct horse battery")
         #:rate-limit rate-limit #:comment-days comment-days
         #:address (lambda (request)
                     (assq-ref (request-headers request) 'x-test-peer))
         options))

(define (status-of . args) (let ((s h t (apply call args))) s))
(define (text-of . args) (let ((s h t (apply call args))) t))

(define post-path "/blog/archives/2012/03/08/an-in-depth-look")
(define (form-token)
  (let ((m (string-match "name=\"token\" value=\"([^\"]+)\"" (text-of 'GET post-path #:jar? #f))))
    (and m (match:substring m 1))))
(define (comment-count)
  (length (tree-entries store (caddr (tree-entry-ref
                                      (tree-entries store (post-tree (index-post-by-path
                                                                      (load-blog-index store (branch-commit store))
                                                                      "2012/03/08/an-in-depth-look")))
                                      "comments")))))

(test-begin "apps/blog")

(test-group "a tekuti repository, read as it is"
  (test-assert "the index shows its post"
    (string-contains (text-of 'GET "/blog/" #:jar? #f) "an in-depth look"))
  (let ((page (text-of 'GET post-path #:jar? #f)))
    (test-assert "the post's body" (string-contains page "A <b>long</b> article."))
    (test-assert "its comment, its link kept with nofollow"
      (string-contains page "<a href=\"http://example.org/x\" rel=\"nofollow ugc\">post</a>"))
    (test-assert "its script as text" (string-contains page "&lt;script&gt;alert(1)"))
    (test-assert "no script tag" (not (string-contains page "<script>"))))
  (let ((page (text-of 'GET "/blog/archives/2012/03/09/in-markdown" #:jar? #f)))
    (test-assert "a marxdown post: its heading" (string-contains page "<h1>A heading</h1>"))
    (test-assert "a marxdown post: inline markup"
      (string-contains page "Some <em>emphasis</em> and <code>(code)</code>."))
    (test-assert "a marxdown comment: its markup" (string-contains page "A <strong>bold</strong>"))
    (test-assert "a marxdown comment: its script as text" (string-contains page "&lt;script&gt;alert(3)"))
    (test-assert "a marxdown comment: no javascript: link" (not (string-contains page "javascript:alert(4)\""))))
  (test-equal "a tag page" 200 (status-of 'GET "/blog/tags/guile" #:jar? #f))
  (test-equal "an unknown tag" 404 (status-of 'GET "/blog/tags/cobol" #:jar? #f))
  (test-assert "the tag cloud" (string-contains (text-of 'GET "/blog/tags" #:jar? #f) "tags/web"))
  (test-equal "archives by year" 200 (status-of 'GET "/blog/archives/2012" #:jar? #f))
  (test-equal "archives by day" 200 (status-of 'GET "/blog/archives/2012/03/08" #:jar? #f))
  (test-equal "an empty month" 404 (status-of 'GET "/blog/archives/2013/01" #:jar? #f))
  (test-assert "the feed, with=guile"
    (string-contains (text-of 'GET "/blog/feed/atom?with=guile" #:jar? #f) "<entry>"))
  (test-assert "the feed, without=guile"
    (not (string-contains (text-of 'GET "/blog/feed/atom?without=guile" #:jar? #f) "<entry>")))
  (test-assert "the feed, with=web without=guile: none"
    (not (string-contains (text-of 'GET "/blog/feed/atom?with=web&without=guile" #:jar? #f) "<entry>")))
  (test-assert "the feed, without=web: only the other"
    (let ((feed (text-of 'GET "/blog/feed/atom?without=web" #:jar? #f)))
      (and (string-contains feed "in markdown") (not (string-contains feed "an in-depth look")))))
  (test-assert "search"
    (string-contains (text-of 'GET "/blog/search?string=LONG" #:jar? #f) "an in-depth look")))

(test-group "issue 25a: the feed's links, whatever Host a client sends"
  ;; A fetch with a forged Host filled the cache of the feed, whose
  ;; links are absolute: every later reader got links to that host.
  (call-guarded
   (lambda ()
     (define* (feed app #:key (host '("blog.test" . #f)))
       (text-of 'GET "/blog/feed/atom" #:jar? #f #:app app #:host host))
     (let ((fresh (other-app)))           ; its cache empty
       (test-assert "a forged Host: that host's links, to that client"
         (string-contains (feed fresh #:host '("evil.example" . #f)) "http://evil.example/blog/"))
       (let ((later (feed fresh)))
         (test-assert "the next reader: none of them" (not (string-contains later "evil.example")))
         (test-assert "the next reader: its own host's" (string-contains later "http://blog.test/blog/")))
       (test-assert "the next reader again, from the cache: none of them"
         (not (string-contains (feed fresh) "evil.example"))))
     (let ((canonical (other-app #:options '(#:origin "https://blog.example.org/"))))
       (let ((forged (feed canonical #:host '("evil.example" . #f))))
         (test-assert "a canonical origin: its links" (string-contains forged "https://blog.example.org/blog/"))
         (test-assert "a canonical origin: the Host ignored" (not (string-contains forged "evil.example")))))
     (let ((over-tls (other-app #:options `(#:scheme ,(const 'https)))))
       (test-assert "a request over TLS: https links"
         (string-contains (feed over-tls #:host '("blog.test" . 8443)) "https://blog.test:8443/blog/")))
     (test-equal "a canonical origin with a path: refused" 'blog-error
       (catch 'blog-error (lambda () (other-app #:options '(#:origin "https://blog.example.org/x")) #f)
         (lambda (key . _) key))))))

(test-group "the cache: large pages from a memfd"
  (let* ((first-response first (raw-call "/blog/"))
         (second-response second (raw-call "/blog/")))
    (test-assert "rendered: bytes" (bytevector? first))
    (test-assert "then from the cache: a file body" (file-body? second))
    (test-equal "the same bytes" first (file-body->bytevector second))
    (test-equal "the same head" (response-headers first-response)
      (response-headers second-response))
    (let ((before (open-memfds)))
      ;; the view moves on with a commit; SECOND is still being "sent"
      (write-file (string-append repo "/" key "/content") "Moved on.")
      (git "commit" "-q" "-a" "-m" "moved on")
      (let ((response third (raw-call "/blog/")))
        (test-assert "after a commit: rendered afresh" (bytevector? third))
        (test-assert "the new page" (not (equal? first third))))
      ;; the new page is kept in a memfd of its own
      (test-equal "the old page's memfd stays open while a body sends from it"
        (+ before 1) (open-memfds))
      (test-equal "the body still reads the old page" first (file-body->bytevector second))
      (close-file-body! second)
      (test-equal "and closes once it is sent" before (open-memfds))
      (close-file-body! second)
      (test-equal "a body released twice counts once" before (open-memfds)))
    (let* ((response body (raw-call "/blog/"))
           (etag (assq-ref (response-headers response) 'etag))
           (not-modified nothing (raw-call "/blog/" #:headers `((if-none-match . (,etag))))))
      (test-assert "cached again: a file body" (file-body? body))
      (close-file-body! body)
      (test-equal "If-None-Match still answers 304" 304 (response-code not-modified)))))

(test-group "the cache"
  (let ((status headers text (call 'GET "/blog/" #:jar? #f)))
    (test-equal "the ETag is the commit" (branch-commit store) (car (assq-ref headers 'etag)))
    (test-equal "If-None-Match: 304" 304
      (status-of 'GET "/blog/" #:jar? #f
                 #:headers `((if-none-match . (,(assq-ref headers 'etag))))))
    (test-equal "If-Modified-Since: 304" 304
      (status-of 'GET "/blog/" #:jar? #f
                 #:headers `((if-modified-since . ,(assq-ref headers 'last-modified))))))
  ;; a change from outside, as a `git push' would make it
  (write-file (string-append repo "/" key "/content") "Rewritten from outside.")
  (git "commit" "-q" "-a" "-m" "outside")
  (test-assert "shows on the next request"
    (string-contains (text-of 'GET post-path #:jar? #f) "Rewritten from outside."))
  ;; `git gc' packs the refs: no ref file is left, packed-refs has it
  (git "pack-refs" "--all")
  (test-assert "packed refs: no ref file"
    (not (file-exists? (string-append repo "/.git/refs/heads/master"))))
  (let ((status headers text (call 'GET "/blog/" #:jar? #f)))
    (test-equal "packed refs: the same commit" (branch-commit store) (car (assq-ref headers 'etag)))
    (test-assert "packed refs: a commit" (string? (branch-commit store)))))

;; the phases the app timed for its last request, as the server's
;; observer takes them: ((name . ns) …)
(define (phases-of method path)
  (want-handler-phases! #t)               ; as the status page's observer does
  (take-handler-phases!)
  (call method path #:jar? #f)
  (let ((phases (take-handler-phases!)))
    (want-handler-phases! #f)
    (or phases '())))

(test-group "the phases it times"
  (let ((miss (phases-of 'GET "/blog/tags/"))
        (hit (phases-of 'GET "/blog/tags/")))
    (test-equal "a miss: the ref check, then the page made"
      '(ref-check render) (filter (lambda (name) (memq name '(ref-check render))) (map car miss)))
    (test-equal "a hit: the ref check only" '(ref-check) (map car hit))
    (test-assert "in nanoseconds" (every exact-integer? (map cdr (append miss hit)))))
  (test-assert "a post's page reads its body from git"
    (assq 'git (phases-of 'GET "/blog/archives/2012/03/08/an-in-depth-look?fresh")))
  (test-equal "no header unless asked" #f
    (let ((s h t (call 'GET "/blog/" #:jar? #f))) (assq 'server-timing h)))
  (test-assert "#:server-timing? #t: the header"
    (let ((s h t (call 'GET "/blog/" #:jar? #f
                       #:app (make-blog-app #:store store #:sessions-db sessions #:prefix "/blog/"
                                            #:secret (make-bytevector 32 7)
                                            #:admin-hash (hash-password "correct horse battery")
                                            #:server-timing? #t))))
      (string-prefix? "ref-check;dur=" (or (assq-ref h 'server-timing) "")))))

(test-group "comments"
  (let ((before (comment-count)))
    (test-equal "a comment redirects back" 303
      (status-of 'POST post-path #:jar? #f
                 #:form `(("token" . ,(form-token)) ("author" . "Bob <i>")
                          ("comment" . "Hello <script>alert(2)</script>"))))
    (test-equal "it is in git" (+ before 1) (comment-count))
    (let ((page (text-of 'GET post-path #:jar? #f)))
      (test-assert "shown escaped" (string-contains page "Hello &lt;script&gt;alert(2)"))
      (test-assert "the author escaped once" (string-contains page "Bob &lt;i&gt;")))
    (test-equal "no token: 403" 403
      (status-of 'POST post-path #:jar? #f #:form '(("author" . "x") ("comment" . "y"))))
    (test-equal "a forged token: 403" 403
      (status-of 'POST post-path #:jar? #f #:form '(("token" . "AAAA") ("author" . "x") ("comment" . "y"))))
    (test-equal "the honeypot filled: 400" 400
      (status-of 'POST post-path #:jar? #f #:form `(("token" . ,(form-token)) ("author" . "x")
                                                  ("website" . "spam") ("comment" . "y"))))
    (test-equal "invalid UTF-8: 400" 400
      (status-of 'POST post-path #:jar? #f #:form `(("token" . ,(form-token)) ("author" . "x")
                                                  ("comment" . ,#vu8(#xff #xfe #x41)))))
    (test-equal "a NUL: 400" 400
      (status-of 'POST post-path #:jar? #f #:form `(("token" . ,(form-token)) ("author" . "x")
                                                  ("comment" . "a\x00;b"))))
    (let ((status headers text (call 'POST post-path #:jar? #f
                                     #:form `(("token" . ,(form-token)) ("author" . "x")
                                              ("comment" . ,(make-string 20000 #\a))))))
      (test-equal "too long: 400" 400 status)
      ;; issue 25f: the refusal quoted back all that was sent
      (test-assert "too long: the page quotes an excerpt only"
        (not (string-contains text (make-string 1000 #\a)))))
    (test-equal "a javascript: web address: 400" 400
      (status-of 'POST post-path #:jar? #f #:form `(("token" . ,(form-token)) ("author" . "x")
                                                  ("url" . "javascript:alert(1)") ("comment" . "y"))))
    (test-equal "none of those stored" (+ before 1) (comment-count))))

(test-group "50 comments at once"
  (let* ((before (comment-count))
         (token (form-token))
         (threads (map (lambda (i)
                         (call-with-new-thread
                          (lambda ()
                            (status-of 'POST post-path #:jar? #f
                                       #:peer (format #f "198.51.100.~a" i)
                                       #:form `(("token" . ,token) ("author" . ,(format #f "client ~a" i))
                                                ("comment" . ,(format #f "comment ~a" i)))))))
                       (iota 50)))
         (statuses (map join-thread threads)))
    (test-equal "all redirected" (make-list 50 303) statuses)
    (test-equal "all in git" (+ before 50) (comment-count))))

(test-group "the rate limit and closed comments"
  (let ((limited (other-app #:rate-limit 2))
        (token (form-token)))
    (define (post!)
      (status-of 'POST post-path #:jar? #f #:app limited #:peer "203.0.113.9"
                 #:form `(("token" . ,token) ("author" . "flood") ("comment" . "again"))))
    (test-equal "two comments from one address, then 429" '(303 303 429)
      (list (post!) (post!) (post!)))
    (test-equal "another address may still" 303
      (status-of 'POST post-path #:jar? #f #:app limited #:peer "203.0.113.10"
                 #:form `(("token" . ,token) ("author" . "other") ("comment" . "hi"))))
    ;; issue 25 (e): each worker counted apart, so two workers took
    ;; twice the limit (10 comments against the documented 5)
    (let ((status headers text
                  (call 'POST post-path #:jar? #f #:app (other-app #:rate-limit 2)
                        #:peer "203.0.113.9"
                        #:form `(("token" . ,token) ("author" . "flood") ("comment" . "elsewhere")))))
      (test-equal "issue 25e: another worker (another app on the same database): 429" 429 status)
      (test-assert "issue 25e: with a Retry-After"
        (integer? (assq-ref headers 'retry-after)))))
  (let ((closed (other-app #:comment-days 0)))
    (test-assert "a post past the age shows no form"
      (not (string-contains (text-of 'GET post-path #:jar? #f #:app closed) "comment-form")))
    (test-equal "and refuses a comment: 403" 403
      (status-of 'POST post-path #:jar? #f #:app closed
                 #:form `(("token" . ,(form-token)) ("author" . "late") ("comment" . "too late"))))))

(test-group "the admin"
  (test-equal "the login form" 200 (status-of 'GET "/blog/admin"))
  (test-equal "a wrong password: 403" 403
    (status-of 'POST "/blog/admin/login" #:form '(("name" . "admin") ("password" . "wrong"))))
  (test-equal "the right one: 303" 303
    (status-of 'POST "/blog/admin/login" #:form '(("name" . "admin") ("password" . "correct horse battery"))))
  (let* ((page (text-of 'GET "/blog/admin/new"))
         (csrf (match:substring (string-match "name=\"csrf\" value=\"([^\"]+)\"" page) 1)))
    (test-equal "a post without the CSRF token: 403" 403
      (status-of 'POST "/blog/admin/new-post" #:form '(("title" . "x") ("body" . "y") ("status" . "publish"))))
    (test-equal "a new draft" 303
      (status-of 'POST "/blog/admin/new-post"
                 #:form `(("csrf" . ,csrf) ("title" . "Secret plans") ("body" . "draft")
                          ("tags" . "plans") ("status" . "draft"))))
    (test-assert "the admin sees it" (string-contains (text-of 'GET "/blog/admin") "Secret plans"))
    (test-assert "visitors do not" (not (string-contains (text-of 'GET "/blog/" #:jar? #f) "Secret plans")))
    (test-equal "a published post" 303
      (status-of 'POST "/blog/admin/new-post"
                 #:form `(("csrf" . ,csrf) ("title" . "Plucky serves the blog") ("body" . "Hello.")
                          ("tags" . "plucky, web") ("status" . "publish") ("comments" . "open"))))
    (test-assert "on the index" (string-contains (text-of 'GET "/blog/" #:jar? #f) "Plucky serves the blog"))
    (test-assert "recent changes" (string-contains (text-of 'GET "/blog/admin/changes") "new post"))
    (let ((newest (branch-commit store)))
      (test-equal "revert it" 303
        (status-of 'POST (string-append "/blog/admin/revert-change/" newest) #:form `(("csrf" . ,csrf))))
      (test-assert "gone from the index"
        (not (string-contains (text-of 'GET "/blog/" #:jar? #f) "Plucky serves the blog"))))
    (let ((before (comment-count)))
      (test-equal "delete a comment" 303
        (status-of 'POST (string-append "/blog/admin/delete-comment/" (uri-encode key) "/" tekuti-comment)
                   #:form `(("csrf" . ,csrf))))
      (test-equal "one fewer" (- before 1) (comment-count)))))

(test-group "issue 25b: failed logins of the admin, per name and per address, across workers"
  (define (login! name password peer)
    ;; -> (status retry-after)
    (let ((status headers text (call 'POST "/blog/admin/login" #:jar? #f #:peer peer
                                     #:form `(("name" . ,name) ("password" . ,password)))))
      (list status (assq-ref headers 'retry-after))))
  (test-equal "10 wrong passwords: each a 403" (make-list 10 403)
    (map (lambda (i) (car (login! "admin" (format #f "guess ~a" i) "198.18.0.1"))) (iota 10)))
  (let ((result (login! "admin" "guess 11" "198.18.0.1")))
    (test-equal "the 11th: 429" 429 (car result))
    (test-assert "with a Retry-After within the 15 minutes"
      (and (integer? (cadr result)) (<= 1 (cadr result) 900))))
  (test-equal "the right password, from the guesser: 429 still" 429
    (car (login! "admin" "correct horse battery" "198.18.0.1")))
  (test-equal "per name: the right password from elsewhere: 429" 429
    (car (login! "admin" "correct horse battery" "198.18.0.2")))
  (test-equal "another worker (another app on the same database): 429" 429
    (car (let ((status headers text (call 'POST "/blog/admin/login" #:jar? #f #:peer "198.18.0.3"
                                          #:app (other-app)
                                          #:form '(("name" . "admin")
                                                   ("password" . "correct horse battery")))))
           (list status))))
  ;; the per-address count: another name from the guesser
  (for-each (lambda (i) (login! (format #f "name ~a" i) "x" "198.18.0.4")) (iota 10))
  (test-equal "per address: 10 failures with other names, then 429" 429
    (car (login! "someone" "x" "198.18.0.4")))
  ;; the window moved on, as 15 minutes later
  (call-guarded
   (lambda ()
     (sqlite-exec sessions "UPDATE plucky_rate_events SET time = time - 901 WHERE name = 'blog-login'")
     (test-equal "15 minutes on: the right password logs in" 303
       (car (login! "admin" "correct horse battery" "198.18.0.1"))))))

(test-group "issue 25c: a login's time does not tell the admin's name"
  ;; A wrong name was refused without verifying the password: at once,
  ;; where a wrong password for the admin's name took an Argon2 hash.
  (define peers 0)
  (define (login! name)
    ;; each from an address of its own: failures from one count toward
    ;; its limit (issue 25b)
    (set! peers (+ peers 1))
    (status-of 'POST "/blog/admin/login" #:peer (format #f "192.0.2.~a" (+ 100 peers))
               #:form `(("name" . ,name) ("password" . "not it"))))
  (define (median-seconds thunk)
    (let ((times (sort (map (lambda (_)
                              (let ((start (get-internal-real-time)))
                                (thunk)
                                (/ (- (get-internal-real-time) start) internal-time-units-per-second)))
                            (iota 5))
                       <)))
      (exact->inexact (list-ref times 2))))
  (let ((known (median-seconds (lambda () (login! "admin"))))
        (unknown (median-seconds (lambda () (login! "someone")))))
    (test-equal "both refused" '(403 403) (list (login! "admin") (login! "someone")))
    (test-assert "as slowly (at least half the time)" (>= unknown (/ known 2)))))

(test-group "branch-commit"
  ;; another repository, its ref read on this thread between the blog's
  (let ((other (string-append dir "/refs-elsewhere")))
    (define (commit! message)
      (sh "git" "-C" other "-c" "user.name=t" "-c" "user.email=t@example.org"
          "commit" "-q" "--allow-empty" "-m" message))
    (sh "git" "init" "-q" "-b" "master" other)
    (let ((other-store (open-git-store other)))
      (test-equal "no commit yet: #f" #f (branch-commit other-store))
      (commit! "one")
      (let ((one (branch-commit other-store))
            (mine (branch-commit store)))
        (test-assert "its commit" (and (string? one) (= 40 (string-length one))))
        (test-assert "each store its own" (not (equal? one mine)))
        (test-equal "read again, alternately" (list one mine one)
          (list (branch-commit other-store) (branch-commit store) (branch-commit other-store)))
        (commit! "two")
        (let ((two (branch-commit other-store)))
          (test-assert "a moved ref: the new commit" (and (string? two) (not (equal? one two))))
          (test-equal "and the same string while it stays" #t
            (eq? two (branch-commit other-store))))
        ;; the ref's directory removed and made again, as `git pack-refs'
        ;; may do to a branch's: read in the new one, not the old
        (let ((heads (string-append other "/.git/refs/heads")))
          (delete-file (string-append heads "/master"))
          (rmdir heads)
          (mkdir heads)
          (call-with-output-file (string-append heads "/master")
            (lambda (port) (display one port) (newline port)))
          (test-equal "the ref's directory made again: the ref in it" one
            (branch-commit other-store))
          (test-equal "and again" one (branch-commit other-store)))
        (call-with-output-file (string-append other "/.git/refs/heads/master")
          (lambda (port) (display "not a commit id, though forty bytes long!\n" port)))
        (test-equal "a ref file that is not hex: #f" #f (branch-commit other-store))))))

(test-group "repositories refused at start-up"
  (test-equal "not a git repository" 'blog-error
    (catch 'blog-error (lambda () (open-git-store dir) #f) (lambda (k . _) k)))
  (let ((other (string-append dir "/other")))
    (mkdir other)
    (sh "git" "-C" other "init" "-q" "-b" "master")
    (write-file (string-append other "/README") "not a blog")
    (sh "git" "-C" other "add" ".")
    (sh "git" "-C" other "-c" "user.name=t" "-c" "user.email=t@x" "commit" "-q" "-m" "x")
    (test-assert "not in tekuti's layout: one line naming it"
      (catch 'blog-error
        (lambda () (check-blog-layout (open-git-store other)) #f)
        (lambda (k message) (and (string-contains message "README")
                                 (not (string-index message #\newline))))))))

(test-end "apps/blog")

(system* "rm" "-rf" dir)
