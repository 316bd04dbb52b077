;;; (blog setup) --- the blog's files in the data directory, made on the first start

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `open-blog-app' finds or makes what the blog needs and returns its
;;; handler.  In the data directory ($PLUCKY_DATA, default ./var):
;;;
;;;   blog.git            the blog, a bare repository, seeded with the
;;;                       sample blog when missing ($PLUCKY_BLOG_REPOSITORY
;;;                       names another: a tekuti blog, served as it is)
;;;   blog-sessions.db    the admin's sessions (SQLite), nothing else
;;;   blog-secret         32 random bytes keying the comment forms' tokens
;;;   blog-admin          "NAME ARGON2ID-HASH": the admin's login; the
;;;                       password is $PLUCKY_BLOG_PASSWORD when the file
;;;                       is made, else a random one printed once; each
;;;                       later start says how to get a new one:
;;;                       `make blog-password' (`reset-admin-password!'),
;;;                       which prints it
;;;
;;; Each is made under a temporary name and moved in place with link(2)
;;; or rename(2), so that two workers starting at once make it once.
;;; All are the server's user's alone: files 0600, directories 0700
;;; (the repository made so, and kept so by git as comments are
;;; committed), the data directory 0700 when the blog makes it.  A
;;; repository that is not git, or not in tekuti's layout, stops the
;;; start with one line naming it (`plucky serve' exits with status 2).
;;; Comments close $PLUCKY_BLOG_COMMENT_DAYS days after a post (default
;;; 365; 0 closes them all) and an address may post
;;; $PLUCKY_BLOG_COMMENT_LIMIT comments in ten minutes (default 5).
;;; $PLUCKY_BLOG_ORIGIN ("https://blog.example.org") is the origin the
;;; Atom feed's links start with; unset, each request's own (see (blog
;;; app)).
;;; With PLUCKY_SERVER_TIMING=1 each response carries a Server-Timing
;;; header of its phases (see (blog app)).
;;;
;;; Code:

(define-module (blog setup)
  #:use-module (ice-9 rdelim)
  #:use-module (rnrs bytevectors)
  #:use-module (ice-9 binary-ports)
  #:use-module (sqlite3)
  #:use-module (plucky web password)
  #:use-module ((plucky web files) #:select (private-file!))
  #:use-module ((plucky web crypto) #:select (random-bytes bytes->base64url))
  #:use-module (blog git)
  #:use-module (blog seed)
  #:use-module (blog app)
  #:export (open-blog-app
            reset-admin-password!))

(define (data-directory)
  (let ((dir (or (getenv "PLUCKY_DATA") "var")))
    (unless (file-exists? dir) (mkdir dir #o700)) ; the server's user's alone
    dir))

(define (make-once! file make)
  ;; write FILE with (MAKE port) unless it exists, atomically; the file
  ;; is its user's alone from its creation, before anything is in it
  (unless (file-exists? file)
    (let ((temporary (string-append file ".tmp-" (number->string (getpid)))))
      (let ((port (open temporary (logior O_WRONLY O_CREAT O_TRUNC) #o600)))
        (chmod port #o600)              ; a leftover of a crash may have had another mode
        (make port)
        (close-port port))
      (catch 'system-error
        (lambda () (link temporary file))
        (lambda _ #f))
      (delete-file temporary))))

(define (seeded-repository dir)
  (let ((repository (string-append dir "/blog.git")))
    (unless (file-exists? repository)
      (let ((temporary (string-append repository ".tmp-" (number->string (getpid)))))
        (seed-blog! temporary #:private? #t)
        (catch 'system-error
          (lambda () (rename-file temporary repository))
          ;; another worker got there first
          (lambda _ (system* "rm" "-rf" temporary)))))
    repository))

(define (secret dir)
  (let ((file (string-append dir "/blog-secret")))
    (make-once! file (lambda (port) (put-bytevector port (random-bytes 32))))
    (call-with-input-file file get-bytevector-all #:binary #t)))

(define (write-admin-login! port password)
  (put-bytevector port (string->utf8 (string-append "admin " (hash-password password) "\n"))))

(define (new-admin-password)
  ;; -> a random password, printed: the only place it is ever shown
  (let ((password (bytes->base64url (random-bytes 12))))
    (format (current-error-port)
            "blog: the admin logs in as admin with the password ~a\n" password)
    password))

(define (admin-login dir)
  ;; -> (name . hash)
  (let ((file (string-append dir "/blog-admin")))
    (if (file-exists? file)
        (unless (getenv "PLUCKY_BLOG_PASSWORD")
          ;; the password was printed once, at the first start, which
          ;; may have failed (the port in use) with it on the screen
          (format (current-error-port)
                  "blog: the admin's password is the one set at the first start; `make blog-password' prints a new one\n"))
        (make-once! file
                    (lambda (port)
                      (write-admin-login! port (or (getenv "PLUCKY_BLOG_PASSWORD")
                                                   (new-admin-password))))))
    (let* ((line (call-with-input-file file read-line))
           (space (string-index line #\space)))
      (cons (substring line 0 space) (substring line (+ space 1))))))

(define (reset-admin-password!)
  "Give the blog's admin a new random password, print it to the current
error port, and return it.  The login file in the data directory
($PLUCKY_DATA, default ./var) is replaced at once (a reader sees the
old or the new); a running server takes the new password when it next
starts or reloads (SIGHUP)."
  (let* ((file (string-append (data-directory) "/blog-admin"))
         (temporary (string-append file ".tmp-" (number->string (getpid))))
         (password (new-admin-password)))
    (let ((port (open temporary (logior O_WRONLY O_CREAT O_TRUNC) #o600)))
      (chmod port #o600)
      (write-admin-login! port password)
      (close-port port))
    (rename-file temporary file)
    password))

(define (number-variable name default)
  (let ((text (getenv name)))
    (if text
        (or (and (string-every char-set:digit text) (not (string-null? text))
                 (string->number text))
            (throw 'blog-error (format #f "~a: not a number of days or comments: ~s" name text)))
        default)))

(define* (open-blog-app #:key (prefix "/"))
  "Return the blog's handler under PREFIX, its files in the data
directory (see the commentary), made on the first start.  Raises an
error whose message is one line when the repository is unusable."
  (catch 'blog-error
    (lambda ()
      (let* ((dir (data-directory))
             (repository (or (getenv "PLUCKY_BLOG_REPOSITORY") (seeded-repository dir)))
             (login (admin-login dir)))
        (make-blog-app #:store (open-git-store repository)
                       ;; opened in each worker: a connection must not
                       ;; cross the fork that follows the app's loading
                       #:sessions-db (lambda ()
                                       (sqlite-open (private-file! (string-append dir "/blog-sessions.db"))))
                       #:prefix prefix
                       #:secret (secret dir)
                       #:admin-name (car login)
                       #:admin-hash (cdr login)
                       #:comment-days (number-variable "PLUCKY_BLOG_COMMENT_DAYS" 365)
                       #:rate-limit (number-variable "PLUCKY_BLOG_COMMENT_LIMIT" 5)
                       #:origin (getenv "PLUCKY_BLOG_ORIGIN")
                       ;; PLUCKY_SERVER_TIMING=1: a Server-Timing header
                       #:server-timing? (equal? (getenv "PLUCKY_SERVER_TIMING") "1"))))
    (lambda (key message)
      ;; as an error of the app's file, which `plucky serve' reports on
      ;; one line before it exits with status 2
      (throw 'misc-error #f "blog: ~a" (list message) #f))))
