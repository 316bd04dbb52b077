;;; apps/news/main.scm --- the news site alone: bin/plucky serve apps/news/main.scm
;;;
;;; The data lives in $PLUCKY_DATA/news.db (default ./var/news.db), or,
;;; when DATABASE_URL is set (postgresql://user@host:port/db), in that
;;; PostgreSQL database, which several hosts may share; either is
;;; created (migrated) and seeded on the first start: 1,000 stories, or
;;; 30 with PLUCKY_NEWS_SEED=small, none with PLUCKY_NEWS_SEED=none.  The demo site
;;; (apps/demo.scm) serves the same app under /news/.

;; The (news …) modules are in this directory, under apps/: known when
;; this file is compiled too, hence `current-filename'; Guile gives #f
;; for a file it found through a load path holding its root (plucky's
;; own), and the load path finds it.
(add-to-load-path
 (dirname (dirname (or (current-filename)
                       (search-path %load-path "apps/news/main.scm")))))

(use-modules (news app) (plucky web middleware) (plucky web security))

(define data-directory (or (getenv "PLUCKY_DATA") "var"))

(define news-database
  (or (getenv "DATABASE_URL") (string-append data-directory "/news.db")))

(unless (or (getenv "DATABASE_URL") (file-exists? data-directory))
  (mkdir data-directory #o700))         ; the server's user's alone

(define seed-size
  ;; PLUCKY_NEWS_SEED: full (the default), small or none
  (let ((size (or (getenv "PLUCKY_NEWS_SEED") "full")))
    (cond ((assoc size '(("full" . ()) ("small" . (#:users 20 #:stories 30 #:comments 100))
                         ("none" . #f)))
           => cdr)
          (else (error (format #f "PLUCKY_NEWS_SEED is full, small or none, not ~s" size))))))

(seed-news-db! news-database            ; created and seeded on the first start
               #:seed? (and seed-size #t) #:size (or seed-size '()))
(wrap (make-news-app #:database news-database
                     ;; PLUCKY_SERVER_TIMING=1: a Server-Timing header
                     #:server-timing? (equal? (getenv "PLUCKY_SERVER_TIMING") "1"))
      (with-security-headers))
