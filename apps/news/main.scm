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

(use-modules (news app) (plucky web middleware) (plucky web security)
             ((plucky server) #:select (current-request-peer))
             ((web request) #:select (request-headers)))

(define data-directory (or (getenv "PLUCKY_DATA") "var"))

(define news-database
  (or (getenv "DATABASE_URL") (string-append data-directory "/news.db")))

(unless (or (getenv "DATABASE_URL") (file-exists? data-directory))
  (mkdir data-directory #o700))         ; the server's user's alone

;; Behind a load balancer (scripts/cluster, docs/scale-out.md) every
;; connection comes from the balancer, and votes and rate limits would
;; count every visitor as one.  NEWS_TRUSTED_PROXY names the balancer's
;; address: a request from it counts by the address the balancer put
;; last in X-Forwarded-For (what came before it, the client may have
;; written).  A request from anywhere else counts by its own address.
(define trusted-proxy (getenv "NEWS_TRUSTED_PROXY"))

(define (client-address request)
  (let ((peer (or (current-request-peer) "unknown")))
    (or (and trusted-proxy (string=? peer trusted-proxy)
             (let ((forwarded (assq-ref (request-headers request) 'x-forwarded-for)))
               (and (string? forwarded)
                    (let ((last (string-trim-both
                                 (car (last-pair (string-split forwarded #\,))))))
                      (and (< 0 (string-length last) 46) last)))))
        peer)))

(define seed-size
  ;; PLUCKY_NEWS_SEED: full (the default), small or none
  (let ((size (or (getenv "PLUCKY_NEWS_SEED") "full")))
    (cond ((assoc size '(("full" . ()) ("small" . (#:users 20 #:stories 30 #:comments 100))
                         ("none" . #f)))
           => cdr)
          (else (error (format #f "PLUCKY_NEWS_SEED is full, small or none, not ~s" size))))))

(seed-news-db! news-database            ; created and seeded on the first start
               #:seed? (and seed-size #t) #:size (or seed-size '()))
(wrap (make-news-app #:database news-database #:address client-address
                     ;; PLUCKY_SERVER_TIMING=1: a Server-Timing header
                     #:server-timing? (equal? (getenv "PLUCKY_SERVER_TIMING") "1"))
      (with-security-headers))
