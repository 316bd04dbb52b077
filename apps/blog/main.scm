;;; apps/blog/main.scm --- the blog alone: bin/plucky serve apps/blog/main.scm
;;;
;;; The blog's database is the git repository $PLUCKY_BLOG_REPOSITORY, by
;;; default $PLUCKY_DATA/blog.git ($PLUCKY_DATA: ./var), made with a
;;; sample blog on the first start; point it at a tekuti blog's
;;; repository to serve that.  The admin's sessions, the secret of the
;;; comment forms and the admin's password hash are in the data
;;; directory too (see (blog setup)).  The demo site (apps/demo.scm)
;;; serves the same app under /blog/.

;; The (blog …) modules are in this directory, under apps/: known when
;; this file is compiled too, hence `current-filename'; Guile gives #f
;; for a file it found through a load path holding its root (plucky's
;; own), then the load path finds it again.
(add-to-load-path
 (dirname (dirname (or (current-filename)
                       (search-path %load-path "apps/blog/main.scm")))))

(use-modules (blog setup) (plucky web middleware) (plucky web security))

(wrap (open-blog-app #:prefix "/") (with-security-headers))
