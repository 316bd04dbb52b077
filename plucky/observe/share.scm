;;; (plucky observe share) --- the files through which workers share figures

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Each worker process has its own observer (a copy of the master's, made
;;; before the fork), so a page shows whichever worker answered it unless
;;; the workers share their figures.  They do through files: a directory
;;; made by `make-share-directory' in the master (for WORKERS > 1), where
;;; each worker writes its figures, whole, once a second when they
;;; changed (the loop's #:on-tick) and before answering a page
;;; (`write-share!'); the worker answering reads all the files
;;; (`read-shares') and adds them up (`observer-whole-server' of (plucky
;;; observe accounting)).  So the figures of the other workers are at
;;; most about a second old; those of workers that exited (killed, or
;;; retired by a reload) stay in, the totals being those of the server
;;; since it started.  Writing costs a busy worker a little once a
;;; second, and nothing per request.  This module knows files and data;
;;; what the data holds is the accounting's.
;;;
;;; Code:

(define-module (plucky observe share)
  #:use-module (srfi srfi-1)
  #:use-module ((ice-9 ftw) #:select (scandir))
  #:export (make-share-directory
            process-alive?
            sparse
            unsparse
            write-share!
            read-shares))

(define share-prefix "plucky-status-")

(define (make-share-directory)
  "Return the name of a new directory of this user's own (mode 700,
mkdtemp, under $XDG_RUNTIME_DIR, $TMPDIR or /tmp) holding the file
\"master\" with this process's PID; remove first the directories of
servers whose master is gone."
  (let* ((base (or (getenv "XDG_RUNTIME_DIR") (getenv "TMPDIR") "/tmp"))
         (base (if (and (file-exists? base) (file-is-directory? base)) base "/tmp")))
    (remove-stale-shares! base)
    (let ((dir (mkdtemp (string-append base "/" share-prefix "XXXXXX"))))
      (call-with-output-file (string-append dir "/master")
        (lambda (port) (write (getpid) port)))
      dir)))

(define (process-alive? pid)
  "Return #t if the process PID exists (even if it is not this user's)."
  (catch 'system-error
    (lambda () (kill pid 0) #t)
    (lambda args (= (system-error-errno args) EPERM))))

(define (remove-stale-shares! base)
  ;; Directories of servers whose master is gone: nobody reads them.
  (for-each
   (lambda (name)
     (let* ((dir (string-append base "/" name))
            (master (false-if-exception
                     (call-with-input-file (string-append dir "/master") read))))
       (when (and (integer? master) (not (process-alive? master)))
         (false-if-exception
          (begin
            (for-each (lambda (file)
                        (unless (member file '("." ".."))
                          (delete-file (string-append dir "/" file))))
                      (or (scandir dir) '()))
            (rmdir dir))))))
   (or (scandir base (lambda (name) (string-prefix? share-prefix name))) '())))

(define (sparse vector default)
  "Return VECTOR as data, shorter when most of it is DEFAULT: (length
default (index . value) …) of the values not DEFAULT."
  (let lp ((i (- (vector-length vector) 1)) (pairs '()))
    (if (< i 0)
        (cons* (vector-length vector) default pairs)
        (let ((v (vector-ref vector i)))
          (lp (- i 1) (if (eqv? v default) pairs (acons i v pairs)))))))

(define (unsparse data)
  "Return a new vector from DATA, as `sparse' made it."
  (let ((vector (make-vector (car data) (cadr data))))
    (for-each (lambda (pair) (vector-set! vector (car pair) (cdr pair))) (cddr data))
    vector))

(define (write-share! dir data)
  "Write DATA (what `write' prints and `read' reads) as this process's
file in the share directory DIR, replaced whole; return nothing useful.
A failure to write is ignored: the figures are then a second older."
  (let* ((file (format #f "~a/~a.scm" dir (getpid)))
         (temporary (string-append file ".new")))
    (false-if-exception
     (begin
       (call-with-output-file temporary (lambda (port) (write data port)))
       (rename-file temporary file)))))

(define (read-shares dir)
  "Return the data each worker wrote in the share directory DIR, a list."
  (filter-map (lambda (name)
                (false-if-exception
                 (call-with-input-file (string-append dir "/" name) read)))
              (or (scandir dir (lambda (name) (string-suffix? ".scm" name))) '())))

;;; (plucky observe share) ends here
