;;; tests/regress/blog-admin-password-lost.scm --- the blog's admin password, lost
;;;
;;; Issue 25 (j).  The blog's first start prints the admin's random
;;; password, once.  When that first `make run' failed after seeding (its
;;; port in use), the password scrolled by with the error, and no later
;;; run printed it again: the admin could never log in.  Now each later
;;; start says how to get a new one, and `make blog-password' prints one
;;; that the login file then holds (a running server takes it when it
;;; restarts or reloads).

(add-to-load-path (string-append (getcwd) "/apps"))

(use-modules (srfi srfi-64)
             (ice-9 popen)
             (ice-9 rdelim)
             (ice-9 regex)
             (ice-9 textual-ports)
             (tests lib harness)
             (plucky web password))

(define dir (mkdtemp (string-copy "/tmp/plucky-blog-password-XXXXXX")))
(define login-file (string-append dir "/blog-admin"))

(define (admin-hash)
  (let* ((line (call-with-input-file login-file read-line))
         (space (string-index line #\space)))
    (substring line (+ space 1))))

(define password-rx (make-regexp "logs in as admin with the password ([^ \n]+)"))

(define (make-blog-password)
  ;; -> (exit-status . everything make printed)
  (let* ((port (open-pipe* OPEN_READ "sh" "-c"
                           (string-append "exec make -s --no-print-directory blog-password DATA="
                                          dir " 2>&1")))
         (text (get-string-all port)))
    (cons (status:exit-val (close-pipe port)) text)))

(test-begin "regress/blog-admin-password-lost")

(unsetenv "PLUCKY_BLOG_PASSWORD")
(let* ((first (make-blog-password))
       (m (regexp-exec password-rx (cdr first)))
       (password (and m (match:substring m 1))))
  (test-equal "make blog-password: exit 0" 0 (car first))
  (test-assert "prints the password" password)
  (test-assert "the login file holds its hash"
    (and password (verify-password (admin-hash) password)))
  (test-equal "the login file is 0600" #o600 (stat:perms (stat login-file)))
  (let* ((second (make-blog-password))
         (m (regexp-exec password-rx (cdr second)))
         (again (and m (match:substring m 1))))
    (test-assert "again: another password" (and again (not (equal? again password))))
    (test-assert "the new one logs in" (and again (verify-password (admin-hash) again)))
    (test-assert "the old one no more" (not (verify-password (admin-hash) password)))))

;; the blog's start, as `bin/plucky serve apps/blog/main.scm' makes it
;; (the sample blog seeded, as on a first `make run')
(test-assert "a later start says how to get a new password"
  (let* ((port (open-pipe* OPEN_READ "sh" "-c"
                           (string-append
                            "PLUCKY_DATA=" dir " exec guile -L . -C build -L apps -c "
                            "'(use-modules (blog setup)) (open-blog-app)' 2>&1")))
         (text (get-string-all port)))
    (close-pipe port)
    (string-contains text "`make blog-password' prints a new one")))

(system* "rm" "-rf" dir)

(test-end "regress/blog-admin-password-lost")
