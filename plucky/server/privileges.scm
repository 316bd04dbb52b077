;;; (plucky server privileges) --- bind as root, serve as somebody else

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Ports below 1024 need root (or CAP_NET_BIND_SERVICE) to bind; nothing
;;; else a web server does should run as root.  So `plucky serve --user
;;; www-data' binds as root, and each worker, first thing after it is
;;; forked and before it loads the app or reads a request, becomes
;;; www-data: supplementary groups, then group, then user — in that
;;; order, because once the user has changed the process may no longer
;;; change its groups.  The master stays root, as nginx's does, to reopen
;;; log files and start workers; it never reads a request nor runs the
;;; app's code.
;;;
;;; Code:

(define-module (plucky server privileges)
  #:export (resolve-identity
            drop-privileges!
            running-as-root?))

(define (running-as-root?)
  "Return #t if this process runs with root's user ID, real or effective."
  (or (zero? (getuid)) (zero? (geteuid))))

(define (resolve-identity user group)
  "Return (UID . GID) for USER (a name or a number) and GROUP (a name, a
number, or #f for USER's own group).  Raise an error naming what does
not exist."
  (define (lookup what getter name)
    (or (false-if-exception (getter (or (string->number name) name)))
        (error (string-append "no such " what ": " name))))
  (let* ((pw (lookup "user" getpwnam user))
         (gid (if group
                  (group:gid (lookup "group" getgrnam group))
                  (passwd:gid pw))))
    (cons (passwd:uid pw) gid)))

(define (drop-privileges! identity)
  "Become the user and group of IDENTITY, a pair (UID . GID): set the
supplementary groups to GID alone, then the group, then the user.  Raise
an error if any step fails or if root's privileges could be regained."
  (let ((uid (car identity))
        (gid (cdr identity)))
    (setgroups (vector gid))
    (setgid gid)
    (setuid uid)
    (unless (and (= (getuid) uid) (= (geteuid) uid)
                 (= (getgid) gid) (= (getegid) gid))
      (error "could not drop privileges" identity))
    (unless (zero? uid)
      ;; setuid(0) must fail now; if it does not, nothing was dropped.
      (when (false-if-exception (begin (setuid 0) #t))
        (error "still able to become root after dropping privileges")))))

;;; (plucky server privileges) ends here
