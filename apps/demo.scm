;;; apps/demo.scm --- the demo site `make run' serves
;;;
;;;   /           a page that says what plucky is and links to the rest
;;;   /news/      the news site (apps/news/), on SQLite under the data
;;;               directory ($PLUCKY_DATA, default ./var), seeded on the
;;;               first start
;;;   /blog/      the blog (apps/blog/), whose database is the git
;;;               repository var/blog.git, made with a sample blog on the
;;;               first start (the admin's password is printed then)
;;;   /hello      apps/hello.scm
;;;   /headers    apps/headers.scm
;;;   anything else: 404
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

(use-modules (web request)
             (web response)
             (web uri)
             (plucky web html)
             (news app)
             (blog setup))

(define (load-app name)
  (load (string-append here "/" name)))

(define hello (load-app "hello.scm"))
(define headers (load-app "headers.scm"))

(define data-directory (or (getenv "PLUCKY_DATA") "var"))
(unless (file-exists? data-directory)
  (mkdir data-directory))

(define news-file (string-append data-directory "/news.db"))
(seed-news-db! news-file)              ; created and seeded on the first start
(define news (make-news-app #:file news-file #:prefix "/news/"
                           ;; PLUCKY_SERVER_TIMING=1: a Server-Timing header
                           #:server-timing? (equal? (getenv "PLUCKY_SERVER_TIMING") "1")))

(define blog (open-blog-app #:prefix "/blog/"))

(define landing-style "
body{font-family:system-ui,sans-serif;max-width:46em;margin:2em auto;padding:0 1em;
     color:#222;line-height:1.5}
h1{font-size:2.2em;margin-bottom:0}h1 small{font-size:.45em;color:#777;font-weight:normal}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(13em,1fr));gap:1em;margin:1.5em 0}
.card{border:1px solid #ddd;border-radius:8px;padding:.8em 1em}
.card h2{font-size:1.1em;margin:.2em 0}.card p{margin:.3em 0;color:#555;font-size:.95em}
a{color:#c45500}code{background:#f4f4f4;padding:0 .25em;border-radius:3px}
footer{color:#777;font-size:.9em;margin-top:2em}")

(define landing
  (html->bytevector
   `(html (@ (lang "en"))
      (head (meta (@ (charset "utf-8")))
            (meta (@ (name "viewport") (content "width=device-width")))
            (title "plucky: a web server and toolkit for Guile")
            (style ,landing-style))
      (body
       (h1 "plucky " (small "a fast HTTP/1.1 server and web toolkit for GNU Guile"))
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

(define (demo request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path "/") (values html-type landing))
     ((string-prefix? "/news/" path) (news request body))
     ((string-prefix? "/blog/" path) (blog request body))
     ((member path '("/news" "/blog"))
      (values (build-response #:code 301
                              #:headers `((location . ,(string->uri-reference
                                                        (string-append path "/")))))
              #f))
     ((string=? path "/hello") (hello request body))
     ((string=? path "/headers") (headers request body))
     (else (not-found request body)))))

demo
