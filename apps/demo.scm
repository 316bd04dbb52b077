;;; apps/demo.scm --- the demo site `make run' serves
;;;
;;;   /           a page that says what plucky is and links to the rest
;;;   /news/      the news site (apps/news/), on SQLite under the data
;;;               directory ($PLUCKY_DATA, default ./var), or on the
;;;               PostgreSQL database DATABASE_URL names, seeded on the
;;;               first start
;;;   /blog/      the blog (apps/blog/), whose database is the git
;;;               repository var/blog.git, made with a sample blog on the
;;;               first start (the admin's password is printed then)
;;;   /chat/      apps/chat.scm: a chat room over WebSocket (server-sent
;;;               events where WebSocket is missing), across workers
;;;   /hello      apps/hello.scm
;;;   /headers    apps/headers.scm
;;;   /static/, /news/static/, /blog/static/
;;;               the stylesheets and images of apps/static/,
;;;               apps/news/static/ and apps/blog/static/, served by
;;;               (plucky web static): cached an hour by browsers, then
;;;               revalidated (ETag), gzip or zstd to those that take it
;;;   anything else: 404
;;;
;;; The news site and the blog link their stylesheets here; alone
;;; (apps/news/main.scm, apps/blog/main.scm), they carry them inline.
;;; The precompressed siblings (FILE.gz, FILE.zst) are made beside each
;;; stylesheet and SVG when this file loads and they are missing or
;;; older than the file (they are not in git).
;;;
;;; The status page, /_plucky/status, is plucky's own (`--status', which
;;; `make run' passes): it shows loopback clients where each request's
;;; time goes.

(define here
  ;; `plucky serve' says where this file is; elsewhere, ask Guile.
  (if (defined? 'app-directory)
      app-directory
      (dirname (current-filename))))

;; The apps' modules, (news …) and (blog …), are in apps/news/ and
;; apps/blog/.  Where this file is must be known when it is compiled too,
;; hence `current-filename'; Guile gives #f for a file it found through a
;; load path holding its root (plucky's own), and the load path finds it.
(add-to-load-path
 (dirname (or (current-filename) (search-path %load-path "apps/demo.scm"))))

(use-modules (srfi srfi-1)
             (ice-9 binary-ports)
             (ice-9 ftw)
             (web request)
             (web response)
             (web uri)
             (plucky web html)
             (plucky web router)
             (plucky web middleware)
             (plucky web static)
             (plucky web compress)
             (plucky web security)
             (news app)
             (blog setup)
             ((news views) #:select ((stylesheet . news-stylesheet)))
             ((blog views) #:select ((stylesheet . blog-stylesheet))))

(define (load-app name)
  (load (string-append here "/" name)))

(define hello (load-app "hello.scm"))
(define headers (load-app "headers.scm"))
(define chat (load-app "chat.scm"))

(define data-directory (or (getenv "PLUCKY_DATA") "var"))
(unless (file-exists? data-directory)
  (mkdir data-directory #o700))         ; the server's user's alone

(define news-database
  (or (getenv "DATABASE_URL") (string-append data-directory "/news.db")))
(seed-news-db! news-database)          ; created and seeded on the first start
(define news (make-news-app #:database news-database
                           ;; PLUCKY_SERVER_TIMING=1: a Server-Timing header
                           #:server-timing? (equal? (getenv "PLUCKY_SERVER_TIMING") "1")))

(define blog (open-blog-app))            ; `demo' mounts it at /blog

(define asset-directories '("static" "news/static" "blog/static"))

(define (precompress! directory)
  ;; FILE.gz and FILE.zst beside each stylesheet and SVG of DIRECTORY,
  ;; made afresh when missing or older than FILE; a directory this
  ;; process cannot write is served without them.
  (for-each
   (lambda (name)
     (let ((file (string-append directory "/" name)))
       (for-each
        (lambda (coding suffix level)
          (let ((sibling (string-append file suffix)))
            (unless (and (file-exists? sibling)
                         (>= (stat:mtime (stat sibling)) (stat:mtime (stat file))))
              (false-if-exception
               (let ((temporary (string-append sibling ".new")))
                 (call-with-output-file temporary
                   (lambda (port)
                     (put-bytevector
                      port (compress-bytevector
                            (call-with-input-file file get-bytevector-all #:binary #t)
                            coding level)))
                   #:binary #t)
                 (rename-file temporary sibling))))))
        '(gzip zstd) '(".gz" ".zst") '(9 19))))
   (or (scandir directory (lambda (name)
                            (or (string-suffix? ".css" name) (string-suffix? ".svg" name))))
       '())))

(for-each (lambda (dir) (precompress! (string-append here "/" dir))) asset-directories)

(define assets
  ;; Rooted at apps/, but `demo' hands it only the paths under the asset
  ;; directories.
  (static-handler here #:cache-control '(("\\.(css|svg)$" . "public, max-age=3600"))))

(define landing
  (html->bytevector
   `(html (@ (lang "en"))
      (head (meta (@ (charset "utf-8")))
            (meta (@ (name "viewport") (content "width=device-width")))
            (title "plucky: a web server and toolkit for Guile")
            (link (@ (rel "stylesheet") (href "/static/site.css")))
            (link (@ (rel "icon") (type "image/svg+xml") (href "/static/favicon.svg"))))
      (body
       (header
        (img (@ (src "/static/logo.svg") (alt "")))
        (h1 "plucky " (small "a fast HTTP/1.1 server and web toolkit for GNU Guile")))
       (p "This site is served by plucky: an epoll event loop per worker "
          "process, written in Scheme, that runs the handlers of Guile's own "
          (code "(web server)") " unchanged — "
          (code "(run-server handler 'plucky)") " — with keep-alive, "
          "pipelining, streaming bodies, strict parsing, reloads without a "
          "dropped request and a status page that explains every request's time.")
       (div (@ (class "cards"))
         (div (@ (class "card"))
           (h2 (a (@ (href "/news/")) "News"))
           (p "A news.arc-class site on SQLite: accounts, stories, threaded "
              "comments, votes, karma, ranking. Built with plucky's toolkit: "
              "HTML writer, sessions, CSRF, Argon2id passwords."))
         (div (@ (class "card"))
           (h2 (a (@ (href "/blog/")) "Blog"))
           (p "A blog whose database is a git repository, in tekuti's "
              "layout: posts, comments, tags, archives, an Atom feed and an "
              "admin. Pages are cached by commit; a push shows at once."))
         (div (@ (class "card"))
           (h2 (a (@ (href "/chat/")) "Chat"))
           (p "A chat room over WebSocket, compressed (permessage-deflate), "
              "on each worker's event loop, with server-sent events as the "
              "fallback; messages cross between workers."))
         (div (@ (class "card"))
           (h2 (a (@ (href "/_plucky/status")) "Status"))
           (p "Requests per second, latency percentiles and where each "
              "request's time goes, per route, live."))
         (div (@ (class "card"))
           (h2 (a (@ (href "/hello")) "Hello"))
           (p "The benchmark's handler: \"Hello, World!\" in plain text."))
         (div (@ (class "card"))
           (h2 (a (@ (href "/headers")) "Headers"))
           (p "Your request's headers, each as the Scheme value Guile's "
              "parsers give the handler.")))
       (p "Serve your own: write a handler in " (code "app.scm") ", then "
          (code "bin/plucky serve app.scm") ". The README says the rest.")
       (footer "plucky — LGPL-3.0-or-later")))))

(define html-type '((content-type . (text/html (charset . "utf-8")))))

(define (not-found request body)
  (values (build-response #:code 404 #:headers '((content-type . (text/plain))))
          (string-append "Not found: " (uri-path (request-uri request)) "\n")))

;;; Each app and asset directory is an entry of the router: the apps
;;; under their prefixes (`mount'), the assets by the rest of their path.

(define (landing-page request body params)
  (values html-type landing))

(define (asset request body params)
  ;; ASSETS is rooted at apps/: the path as it came names the file
  (assets request body))

(define (whole-app handler)
  ;; a route for an app of (request body), given the request as it came
  (lambda (request body params)
    (handler request body)))

(define (with-slash request body params)
  ;; "/news" -> "/news/": the apps' links are relative to their root
  (values (build-response #:code 301
                          #:headers `((location . ,(string->uri-reference
                                                    (string-append (uri-path (request-uri request))
                                                                   "/")))))
          #f))

(define (with-stylesheet parameter url)
  ;; a middleware: the app's pages link its stylesheet at URL
  (lambda (handler)
    (lambda (request body)
      (parameterize ((parameter url))
        (handler request body)))))

(define demo
  (make-router
   (append
    (list (route 'GET "/" landing-page #:name 'landing)
          (route '(GET POST) "/hello" (whole-app hello) #:name 'hello)
          (route '(GET POST) "/headers" (whole-app headers) #:name 'headers))
    (map (lambda (directory)
           (route 'GET (string-append "/" directory "/*path") asset))
         asset-directories)
    (map (lambda (path) (route 'GET path with-slash)) '("/news" "/blog" "/chat"))
    (list (mount "/news" (wrap news (with-stylesheet news-stylesheet "/news/static/news.css"))
                 #:name 'news)
          (mount "/blog" (wrap blog (with-stylesheet blog-stylesheet "/blog/static/blog.css"))
                 #:name 'blog)
          (mount "/chat" chat #:name 'chat)))
   #:not-found not-found))

(wrap (router-handler demo) (with-security-headers))
