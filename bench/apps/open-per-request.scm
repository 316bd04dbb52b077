;;; bench/apps/open-per-request.scm --- a file opened and stat'd per request
;;
;; For comparing the open-file cache of (plucky web static): serves the
;; file PLUCKY_BENCH_FILE for every path with open(2) + fstat(2) per
;; request and a file body, the least a handler without a cache does.

(use-modules (plucky server loop))

(define file (getenv "PLUCKY_BENCH_FILE"))

(lambda (request body)
  (let ((fd (open-fdes file (logior O_RDONLY O_CLOEXEC))))
    (values '((content-type . (application/octet-stream)))
            (make-file-body fd #:length (stat:size (stat fd))))))
