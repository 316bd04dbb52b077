;;; (plucky web files) --- the data files an app keeps, its user's alone

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; An app's data (password hashes, email addresses, the addresses of
;;; posters) is for the server's user alone.  Under the usual umask
;;; (022) a file an app lets SQLite create is 0644, and SQLite gives the
;;; -wal and -shm files beside a database the database's mode, so the
;;; file must be made 0600 before SQLite first opens it:
;;;
;;;   (sqlite-open (private-file! "var/app.db"))
;;;
;;; SQLite takes an empty file for a new database.  A file an older
;;; start left open to others is stripped of their permissions (when it
;;; is ours: chmod(2) on another user's file would fail).
;;;
;;; Code:

(define-module (plucky web files)
  #:export (private-file!))

(define (private-file! file)
  "Return FILE, made empty and readable and writable by this process's
user alone (0600) if it is missing; if it exists, it and SQLite's files
beside it (FILE-wal, FILE-shm) that this user owns lose the permissions
they give to others."
  (catch 'system-error
    (lambda () (close-port (open file (logior O_WRONLY O_CREAT O_EXCL) #o600)))
    (lambda args
      (unless (= (system-error-errno args) EEXIST) (apply throw args))))
  (for-each (lambda (name)
              (let ((st (false-if-exception (stat name))))
                (when (and st (= (stat:uid st) (geteuid))
                           (not (zero? (logand (stat:perms st) #o077))))
                  (chmod name (logand (stat:perms st) #o700)))))
            (list file (string-append file "-wal") (string-append file "-shm")))
  file)

;;; (plucky web files) ends here
