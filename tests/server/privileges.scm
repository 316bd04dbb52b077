;;; tests/server/privileges.scm --- bind as root, serve as nobody

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Run as root (skipped otherwise): `plucky serve --user nobody' on a
;;; port below 1024 binds it as root, and its workers run as nobody —
;;; checked in /proc/PID/status (real, effective, saved and filesystem
;;; IDs, supplementary groups) and by the app itself, which answers with
;;; the user it runs as — yet serve; so do the workers of a reload; the
;;; access log the root master creates is reopened by the nobody workers
;;; after SIGUSR1.  Without --user or --allow-root, root is refused.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 format)
             (ice-9 regex)
             (rnrs bytevectors)
             (web response)
             (tests lib harness)
             (tests lib server)
             (tests lib command))

(test-begin "server/privileges")

(define root? (zero? (geteuid)))

(define dir (temporary-directory))
(define app (string-append dir "/app.scm"))
(define (app-text tag)
  (format #f "(define (handler request body)
  (values '((content-type . (text/plain)))
          (string-append ~s \" uid \" (number->string (getuid)) \" gid \" (number->string (getgid)))))
handler
" tag))
(write-file app (app-text "v1"))

(define nobody (and root? (getpwnam "nobody")))

(define (body-of port path)
  (let ((response body (http-get port path)))
    (and response (= 200 (response-code response)) (utf8->string body))))

(define (privileged-free-port)
  ;; A port below 1024 that nobody listens on right now (binding one
  ;; needs root: the point of the test).
  (find (lambda (port)
          (let ((sock (socket AF_INET SOCK_STREAM 0)))
            (setsockopt sock SOL_SOCKET SO_REUSEADDR 1)
            (let ((free? (false-if-exception
                          (begin (bind sock AF_INET INADDR_LOOPBACK port) #t))))
              (close-port sock)
              free?)))
        (iota 200 800)))

(define (workers-of plucky n)
  (wait-until (lambda ()
                (let ((w (plucky-workers plucky)))
                  (and (= n (length w)) w)))))

(define (run-to-exit args)
  ;; -> (values exit-status log) of a `plucky serve' that should refuse
  (let* ((plucky (start-plucky app args #:wait? #f))
         (status (wait-until (lambda () (plucky-exit-status plucky)))))
    (unless status (stop-plucky plucky))
    (let ((log (plucky-log plucky)))
      (delete-file (plucky-log-file plucky))
      (values (and status (status:exit-val status)) log))))

(unless root?
  (test-skip 1))
(test-group "--user nobody: bound as root, served as nobody"
  (call-guarded
   (lambda ()
     (let* ((port (privileged-free-port))
            (uid (passwd:uid nobody))
            (gid (passwd:gid nobody))
            (log-file (string-append dir "/access.log")))
       (test-assert "a free port below 1024" port)
       (call-with-plucky app (list "--port" (number->string port) "--workers" "2"
                                   "--user" "nobody" "--access-log" log-file
                                   "--log-format" "common")
         (lambda (plucky)
           (test-equal "listening on the privileged port" port (plucky-port plucky))
           (let ((workers (workers-of plucky 2)))
             (test-assert "two workers" workers)
             (for-each
              (lambda (pid)
                ;; A worker drops privileges right after it is forked:
                ;; give it the moment that takes.
                (test-equal "worker uids: real, effective, saved, filesystem"
                  (make-list 4 uid)
                  (wait-until (lambda ()
                                (let ((ids (proc-status-field pid "Uid")))
                                  (and (equal? ids (make-list 4 uid)) ids)))
                              #:timeout 5))
                (test-equal "worker gids" (make-list 4 gid) (proc-status-field pid "Gid"))
                (test-equal "supplementary groups: its group alone" (list gid)
                  (proc-status-field pid "Groups")))
              (or workers '()))
             (test-equal "the master stays root" '(0 0 0 0)
               (proc-status-field (plucky-pid plucky) "Uid")))
           (test-equal "the app runs as nobody and answers"
             (format #f "v1 uid ~a gid ~a" uid gid) (body-of port "/"))
           (test-equal "the access log belongs to nobody" uid (stat:uid (stat log-file)))
           ;; A reload: the new workers drop privileges before loading.
           (write-file app (app-text "v2"))
           (signal-plucky plucky SIGHUP)
           (test-equal "after a reload, new code, still as nobody"
             (format #f "v2 uid ~a gid ~a" uid gid)
             (wait-until (lambda ()
                           (let ((body (body-of port "/")))
                             (and body (string-prefix? "v2" body) body)))))
           (test-assert "the old workers leave"
             (workers-of plucky 2))
           ;; logrotate: rename, SIGUSR1; the master (root) makes the new
           ;; file and gives it to nobody, whose workers reopen it.
           (rename-file log-file (string-append log-file ".1"))
           (signal-plucky plucky SIGUSR1)
           (test-assert "a new log file appears"
             (wait-until (lambda () (file-exists? log-file))))
           (test-equal "owned by nobody" uid (and (file-exists? log-file)
                                                  (stat:uid (stat log-file))))
           (test-assert "the workers, as nobody, reopen it"
             (wait-until (lambda ()
                           (every (lambda (pid) (has-open? pid log-file))
                                  (plucky-workers plucky)))))
           (body-of port "/after-reopen")
           (test-assert "the workers write to it"
             (wait-until (lambda () (string-contains (read-file log-file) "/after-reopen"))
                         #:timeout 5))
           (test-assert "and did not fail to"
             (not (string-contains (plucky-log plucky) "reopening"))))))))
  (write-file app (app-text "v1")))

(unless root?
  (test-skip 1))
(test-group "--user nobody --group daemon, one worker"
  (call-guarded
   (lambda ()
     (call-with-plucky app (list "--port" "0" "--workers" "1" "--user" "nobody"
                                 "--group" "daemon")
       (lambda (plucky)
         ;; One worker: no master, the process itself drops privileges,
         ;; after it listens and before it reads a request: check once it
         ;; has answered one.
         (let ((daemon (group:gid (getgrnam "daemon")))
               (pid (plucky-pid plucky))
               (first-answer (body-of (plucky-port plucky) "/")))
           (test-assert "it answers" first-answer)
           (test-equal "the process's user is nobody" (make-list 4 (passwd:uid nobody))
             (proc-status-field pid "Uid"))
           (test-equal "its group is daemon" (make-list 4 daemon)
             (proc-status-field pid "Gid"))
           (test-equal "and its only supplementary group" (list daemon)
             (proc-status-field pid "Groups"))
           (test-assert "it serves"
             (let ((body (body-of (plucky-port plucky) "/")))
               (and body (string-suffix? (format #f "gid ~a" daemon) body))))))))))

(unless root?
  (test-skip 1))
(test-group "--user nobody on unix:PATH: the socket file is nobody's"
  (call-guarded
   (lambda ()
     (let* ((path (string-append dir "/plucky.sock"))
            (plucky (start-plucky app (list "--host" (string-append "unix:" path)
                                            "--workers" "2" "--user" "nobody")
                                  #:wait? #f)))
       (test-assert "listening"
         (wait-until (lambda () (string-contains (plucky-log plucky) "listening on unix:"))))
       (test-equal "owned by nobody, who can thus let a proxy of its group in"
         (passwd:uid nobody) (and (file-exists? path) (stat:uid (stat path))))
       (stop-plucky plucky)
       (delete-file (plucky-log-file plucky))))))

(unless root?
  (test-skip 1))
(test-group "--user with an app that does not load: the workers say why, exit 1"
  ;; The master does not load the app itself (it stays root): the first
  ;; workers do, and when they cannot, there is nothing to serve with.
  (write-file app "(define (handler request body)\n  (values '() \"unbalanced\"\nhandler\n")
  (let ((status log (run-to-exit '("--port" "0" "--workers" "2" "--user" "nobody"))))
    (test-equal "exit 1" 1 status)
    (test-assert "a worker could not start, and says where"
      (string-match "worker [0-9]+ could not start: .*app\\.scm" log))
    (test-assert "the master gives up" (string-contains log "giving up")))
  (write-file app (app-text "v1")))

(unless root?
  (test-skip 1))
(test-group "root is refused without --user or --allow-root"
  (let ((status log (run-to-exit '("--port" "0"))))
    (test-equal "exit 2" 2 status)
    (test-assert "with a clear message"
      (string-contains log "refusing to serve requests as root"))
    (test-assert "before listening" (not (string-contains log "listening"))))
  (let ((status log (run-to-exit '("--port" "0" "--user" "root"))))
    (test-equal "--user root: exit 2 as well" 2 status))
  (let ((status log (run-to-exit '("--port" "0" "--user" "0"))))
    (test-equal "--user 0: exit 2 as well" 2 status)))

(remove-tree dir)

(test-end "server/privileges")
