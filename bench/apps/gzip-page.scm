;;; bench/apps/gzip-page.scm --- a 50 KB HTML page compressed on the fly
;;
;; For bench/static and bench/instructions-gzip: the page in the file
;; PLUCKY_BENCH_PAGE, read once, answered from memory through (plucky web
;; compress) at gzip level PLUCKY_BENCH_GZIP_LEVEL (default 6), gzip only,
;; as nginx's `gzip on'.  PLUCKY_BENCH_BODY says what the handler returns:
;; bytevector (the default: the page's UTF-8 bytes, as nginx holds the
;; file's bytes) or string (the page as a string, as a template renders
;; it: the middleware then encodes it to UTF-8 on every response, which
;; bench/instructions-gzip shows apart).  With PLUCKY_BENCH_ETAG=1 the
;; page carries a strong ETag, so that the middleware compresses it once
;; and sends the kept bytes after (its cache).  `/' answers too, for the
;; bench's readiness probe.

(use-modules (plucky web compress)
             ((rnrs io ports) #:select (get-bytevector-all))
             (rnrs bytevectors))

(define page-bytes
  (call-with-input-file (getenv "PLUCKY_BENCH_PAGE") get-bytevector-all #:binary #t))

(define page
  (let ((body (or (getenv "PLUCKY_BENCH_BODY") "bytevector")))
    (cond ((string=? body "bytevector") page-bytes)
          ((string=? body "string") (utf8->string page-bytes))
          (else (error "PLUCKY_BENCH_BODY must be bytevector or string:" body)))))

(define headers
  (if (equal? (getenv "PLUCKY_BENCH_ETAG") "1")
      '((content-type . (text/html (charset . "utf-8"))) (etag . ("page-1" . #t)))
      '((content-type . (text/html (charset . "utf-8"))))))

((compress-middleware #:codings '(gzip)
                      #:level (string->number (or (getenv "PLUCKY_BENCH_GZIP_LEVEL") "6")))
 (lambda (request body)
   (values headers page)))
