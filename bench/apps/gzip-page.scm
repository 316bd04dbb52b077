;;; bench/apps/gzip-page.scm --- a 50 KB HTML page compressed on the fly
;;
;; For bench/static: the page in the file PLUCKY_BENCH_PAGE, read once,
;; answered from memory through (plucky web compress) at gzip level
;; PLUCKY_BENCH_GZIP_LEVEL (default 6), gzip only, as nginx's `gzip on'.
;; `/' answers too, for the bench's readiness probe.

(use-modules (plucky web compress)
             ((rnrs io ports) #:select (get-bytevector-all))
             (rnrs bytevectors))

(define page
  (utf8->string (call-with-input-file (getenv "PLUCKY_BENCH_PAGE") get-bytevector-all
                                      #:binary #t)))

((compress-middleware #:codings '(gzip)
                      #:level (string->number (or (getenv "PLUCKY_BENCH_GZIP_LEVEL") "6")))
 (lambda (request body)
   (values '((content-type . (text/html))) page)))
