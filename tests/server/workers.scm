;;; tests/server/workers.scm --- the master: crashes, drains, reloads

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Runs `bin/plucky serve' on an app file this test writes (and
;;; rewrites, for reloads) and checks what the master promises:
;;;
;;;  - a worker killed with SIGKILL is replaced within a second, and
;;;    logged;
;;;  - SIGTERM drains: a slow request in flight gets its whole answer,
;;;    then the server exits 0;
;;;  - SIGHUP after the app changed: the new answers appear, and a client
;;;    hammering the server across the reload sees nothing but 200s;
;;;  - SIGHUP after the app broke: the error is logged and the old
;;;    workers, the very same processes, keep serving the old answers;
;;;  - each worker logs how many requests it served.
;;;
;;; The hammering client is a forked process (the test itself must watch
;;; the server meanwhile); it reports its counts through a pipe.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 format)
             (ice-9 match)
             (ice-9 rdelim)
             (ice-9 threads)
             (ice-9 regex)
             (ice-9 ftw)
             (rnrs bytevectors)
             (web response)
             (web request)
             (web uri)
             ((plucky server) #:select (worker-pid))
             (tests lib harness)
             (tests lib server)
             (tests lib command)
             (tests lib hammer))

(test-begin "server/workers")

;;;
;;; The app, in versions
;;;

(define dir (temporary-directory))
(define app (string-append dir "/app.scm"))
(define slow-marker (string-append dir "/slow-started"))

(define (app-text answer)
  ;; An app answering ANSWER on /, its PID on /pid, and slowly on /slow.
  (format #f "(use-modules (web request) (web uri))
(define (handler request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path \"/pid\")
      (values '((content-type . (text/plain))) (number->string (getpid))))
     ((string=? path \"/slow\")
      (call-with-output-file ~s (lambda (port) (display \"started\" port)))
      (sleep 1)
      (values '((content-type . (text/plain))) \"slow answer, complete\"))
     ((string=? path \"/stuck\")
      (call-with-output-file ~s (lambda (port) (display \"started\" port)))
      (sleep 60)
      (values '((content-type . (text/plain))) \"too late\"))
     (else
      (values '((content-type . (text/plain))) ~s)))))
handler
" slow-marker slow-marker answer))

(define broken-app-text
  "(define (handler request body)\n  (values '() \"unbalanced\"\nhandler\n")

(define (get port path)
  ;; -> (values code body-string), or #f #f
  (let ((response body (http-get port path)))
    (if response
        (values (response-code response) (utf8->string body))
        (values #f #f))))

(define (body-of port path)
  (let ((code body (get port path)))
    (and (eqv? code 200) body)))

(define (workers-of plucky n)
  ;; -> PLUCKY's worker PIDs once there are N of them, or #f
  (wait-until (lambda ()
                (let ((w (plucky-workers plucky)))
                  (and (= n (length w)) w)))))

(define (served-counts log)
  ;; -> the N of every "worker PID served N requests" line in LOG
  (map (lambda (m) (string->number (match:substring m 1)))
       (list-matches "worker [0-9]+ served ([0-9]+) requests" log)))

;;;
;;; The tests
;;;

(write-file app (app-text "version 1"))

(test-group "a worker killed with SIGKILL is replaced within a second"
  (with-plucky (plucky app "--workers" "2")
    (let ((workers (workers-of plucky 2)))
      (test-assert "two workers" workers)
      (when workers
        (let ((victim (car workers))
              (start (now-seconds)))
          (kill victim SIGKILL)
          (let ((replaced (wait-until
                           (lambda ()
                             (let ((w (plucky-workers plucky)))
                               (and (= 2 (length w)) (not (memv victim w)) w)))
                           #:timeout 5 #:interval 0.001)))
            (test-assert "a new worker takes its place" replaced)
            (test-assert "within a second" (and replaced (< (- (now-seconds) start) 1)))
            (test-assert "the other worker is untouched"
              (and replaced (memv (cadr workers) replaced)))
            (test-assert "the master logs it"
              (wait-until (lambda ()
                            (string-contains
                             (plucky-log plucky)
                             (format #f "worker ~a exited (signal ~a); starting another"
                                     victim SIGKILL)))))
            (test-equal "and the server answers" "version 1" (body-of (plucky-port plucky) "/"))))))))

(test-group "a worker killed while it retires is logged"
  (with-plucky (plucky app "--workers" "2")
    (let ((workers (workers-of plucky 2)))
      (test-assert "two workers" workers)
      (when workers
        (signal-plucky plucky SIGHUP)
        ;; The old workers drain for a second after the new ones serve.
        (test-assert "the reload makes them old"
          (wait-until (lambda ()
                        (string-contains (plucky-log plucky) "; old workers ("))
                      #:timeout 10 #:interval 0.001))
        (kill (car workers) SIGKILL)
        (test-assert "the master logs its death"
          (wait-until (lambda ()
                        (string-contains
                         (plucky-log plucky)
                         (format #f "worker ~a exited (signal ~a) while retiring"
                                 (car workers) SIGKILL)))
                      #:timeout 5))
        (test-assert "no other takes its place: the new workers serve"
          (not (string-contains
                (plucky-log plucky)
                (format #f "worker ~a exited (signal ~a); starting another"
                        (car workers) SIGKILL))))
        (test-equal "and the server answers" "version 1" (body-of (plucky-port plucky) "/"))))))

(test-group "SIGTERM drains: a slow request in flight completes"
  (with-plucky (plucky app "--workers" "2" "--grace" "10")
    (false-if-exception (delete-file slow-marker))
    (let ((client (connect-client (plucky-port plucky))))
      (client-send! client (request-text "/slow"))
      (test-assert "the slow handler started"
        (wait-until (lambda () (file-exists? slow-marker))))
      (signal-plucky plucky SIGTERM)
      (let ((response body (client-read-response client #:timeout 10)))
        (test-equal "the answer arrives" 200 (and response (response-code response)))
        (test-equal "complete" "slow answer, complete" (and body (utf8->string body))))
      (test-assert "then the connection closes" (client-eof? client))
      (client-close! client)
      (let ((status (wait-until (lambda () (plucky-exit-status plucky)) #:timeout 10)))
        (test-equal "and the server exits 0" 0 (and status (status:exit-val status))))
      (test-assert "no new connection is taken once it has exited"
        (not (false-if-exception (connect-client (plucky-port plucky))))))))

(test-group "--grace bounds the drain: a worker stuck in the app is killed"
  (with-plucky (plucky app "--workers" "2" "--grace" "1")
    (false-if-exception (delete-file slow-marker))
    (let ((client (connect-client (plucky-port plucky))))
      (client-send! client (request-text "/stuck"))
      (test-assert "the stuck handler started"
        (wait-until (lambda () (file-exists? slow-marker))))
      (let ((start (now-seconds)))
        (signal-plucky plucky SIGTERM)
        (let ((status (wait-until (lambda () (plucky-exit-status plucky)) #:timeout 15)))
          (test-equal "the server exits, status 0" 0 (and status (status:exit-val status)))
          (test-assert "within --grace plus 2 s, and a second for the master's turn"
            (< (- (now-seconds) start) 4.5))
          (test-assert "saying it killed the worker"
            (string-contains (plucky-log plucky) "outlived its grace period; killing it"))))
      (client-close! client))))

(test-group "SIGHUP with changed code: new answers, no request fails"
  (write-file app (app-text "version 1"))
  (with-plucky (plucky app "--workers" "2")
    (let* ((port (plucky-port plucky))
           (before (workers-of plucky 2))
           (hammer (start-hammer port 4)))
      (test-assert "two workers first" before)
      (test-equal "before: version 1" "version 1" (body-of port "/"))
      (write-file app (app-text "version 2"))
      (signal-plucky plucky SIGHUP)
      (test-assert "the new answer appears"
        (wait-until (lambda () (equal? "version 2" (body-of port "/"))) #:timeout 10))
      (test-assert "the old workers exit"
        (wait-until (lambda ()
                      (null? (lset-intersection = before (plucky-workers plucky))))
                    #:timeout 10))
      (test-assert "two workers again" (workers-of plucky 2))
      (test-assert "the master logs the reload"
        (string-contains (plucky-log plucky) "reload: new workers"))
      (match (hammer-results hammer 15)
        ((ok failed bodies failures)
         (test-assert "the hammering client made requests" (> ok 100))
         (test-equal "not one failed" '(0 ()) (list failed failures))
         (test-equal "it saw both versions" '("version 1" "version 2")
           (sort bodies string<?)))
        (other (test-assert "the hammering client reported" #f))))
    (test-equal "after: version 2" "version 2" (body-of (plucky-port plucky) "/"))))

(test-group "SIGHUP with broken code: the old workers keep serving"
  (write-file app (app-text "version 1"))
  (with-plucky (plucky app "--workers" "2")
    (let ((port (plucky-port plucky))
          (before (workers-of plucky 2)))
      (test-assert "two workers first" before)
      (write-file app broken-app-text)
      (signal-plucky plucky SIGHUP)
      (test-assert "the failure is logged"
        (wait-until (lambda () (string-contains (plucky-log plucky) "reload failed"))))
      (test-assert "with the reason"
        (string-match "could not start: .*app\\.scm" (plucky-log plucky)))
      (test-equal "the old code answers" "version 1" (body-of port "/"))
      (test-equal "from the very same workers" before
        (wait-until (lambda ()
                      (let ((w (plucky-workers plucky)))
                        (and (equal? w before) w)))))
      (test-equal "still, ten times over" (make-list 10 "version 1")
        (map (lambda (i) (body-of port "/")) (iota 10)))
      ;; Fixed, a reload succeeds.
      (write-file app (app-text "version 3"))
      (signal-plucky plucky SIGHUP)
      (test-assert "a fixed app reloads"
        (wait-until (lambda () (equal? "version 3" (body-of port "/"))) #:timeout 10)))))

(test-group "SIGHUP, and one new worker fails while the other still loads"
  ;; The first new worker to load the app fails; the other is still
  ;; loading (it sleeps) when the master abandons their generation and
  ;; tells it to retire, a signal that ends a worker not yet serving.
  ;; Its death is no news: the old workers serve, and the log must not
  ;; say that new ones do.
  (write-file app (app-text "version 1"))
  (with-plucky (plucky app "--workers" "2")
    (let ((port (plucky-port plucky))
          (before (workers-of plucky 2))
          (marker (string-append dir "/first-loaded")))
      (false-if-exception (rmdir marker))
      (write-file app (format #f "(if (false-if-exception (begin (mkdir ~s) #t))
    (error \"the first new worker fails\")
    (sleep 5))
(define (handler request body) (values '() \"never\"))
handler
" marker))
      (signal-plucky plucky SIGHUP)
      (test-assert "the reload fails"
        (wait-until (lambda () (string-contains (plucky-log plucky) "reload failed"))))
      (test-assert "the failed generation's workers are gone, the old ones left"
        (wait-until (lambda () (equal? before (plucky-workers plucky)))))
      (test-equal "the old code answers" "version 1" (body-of port "/"))
      (test-assert "the log does not say new workers serve"
        (not (string-contains (plucky-log plucky) "the new workers serve")))
      (rmdir marker))))

(test-group "SIGHUP during a reload that fails: its own reload follows"
  ;; The code of the first reload takes a second to fail; the code is
  ;; fixed and SIGHUP sent meanwhile: that reload must come once the
  ;; first has failed, not be dropped with it.
  (define (loading-markers)
    (filter (lambda (name) (string-prefix? "loading-" name))
            (or (scandir dir) '())))
  (write-file app (app-text "version 1"))
  (with-plucky (plucky app "--workers" "2")
    (let ((port (plucky-port plucky)))
      (for-each (lambda (name) (delete-file (string-append dir "/" name))) (loading-markers))
      (write-file app (format #f "(call-with-output-file (string-append ~s (number->string (getpid)))
  (lambda (p) (display 1 p)))
(sleep 1)
(error \"this code fails, slowly\")
" (string-append dir "/loading-")))
      (signal-plucky plucky SIGHUP)
      ;; Both new workers have read the failing code (each marks it as
      ;; it runs) before it is replaced: the file is replaced by a
      ;; rename, so what they read stays what it was.
      (test-assert "the first reload's workers load the failing code"
        (wait-until (lambda () (= 2 (length (loading-markers))))))
      (write-file app (app-text "version 2"))
      (signal-plucky plucky SIGHUP)
      (test-assert "it fails"
        (wait-until (lambda () (string-contains (plucky-log plucky) "reload failed"))
                    #:timeout 10))
      (test-assert "then the fixed code serves"
        (wait-until (lambda () (equal? "version 2" (body-of port "/"))) #:timeout 15))
      (for-each (lambda (name) (delete-file (string-append dir "/" name))) (loading-markers)))))

(test-group "SIGHUP while the app loads at start: a reload once it serves"
  ;; The app says it is loading, then takes a second: the SIGHUP sent
  ;; then, before plucky reads its signals from a signalfd, must neither
  ;; end it (SIGHUP's default action) nor be lost.
  (call-guarded
   (lambda ()
     (let ((marker (string-append dir "/loading"))
           (port (free-port)))
       (false-if-exception (delete-file marker))
       (write-file app (string-append
                        (format #f "(call-with-output-file ~s (lambda (p) (display 1 p)))\n(sleep 1)\n"
                                marker)
                        (app-text "version 1")))
       (let ((plucky (start-plucky app (list "--port" (number->string port) "--workers" "2"
                                             "--allow-root")
                                   #:wait? #f)))
         (test-assert "the app started loading"
           (wait-until (lambda () (file-exists? marker))))
         (signal-plucky plucky SIGHUP)
         (test-assert "plucky lives on and reloads once its workers serve"
           (wait-until (lambda () (string-contains (plucky-log plucky) "reload: new workers"))
                       #:timeout 15))
         (test-equal "and serves" "version 1" (body-of port "/"))
         (test-eq "still running" #f (plucky-exit-status plucky))
         (stop-plucky plucky)
         (delete-file (plucky-log-file plucky))
         (delete-file marker))))))

(test-group "--workers 1: no master, SIGHUP reloads in place"
  (write-file app (app-text "version 1"))
  (with-plucky (plucky app "--workers" "1")
    (let ((port (plucky-port plucky)))
      (test-equal "no worker processes: it serves itself" '() (plucky-workers plucky))
      (test-equal "version 1" "version 1" (body-of port "/"))
      (test-equal "answered by the process started" (number->string (plucky-pid plucky))
        (body-of port "/pid"))
      (write-file app broken-app-text)
      (signal-plucky plucky SIGHUP)
      (test-assert "broken code: the failure is logged"
        (wait-until (lambda () (string-contains (plucky-log plucky) "reload failed"))))
      (test-equal "and the old code serves on" "version 1" (body-of port "/"))
      (write-file app (app-text "version 2"))
      (signal-plucky plucky SIGHUP)
      (test-assert "fixed code: the new answer appears"
        (wait-until (lambda () (equal? "version 2" (body-of port "/")))))
      (test-equal "from the same process" (number->string (plucky-pid plucky))
        (body-of port "/pid"))
      ;; SIGUSR2 retires a worker; a lone process has no successor to
      ;; take its connections, so it keeps accepting.
      (signal-plucky plucky SIGUSR2)
      (test-assert "SIGUSR2: ignored, and said so"
        (wait-until (lambda () (string-contains (plucky-log plucky) "SIGUSR2 ignored"))))
      (test-equal "new connections still answered" (make-list 3 "version 2")
        (map (lambda (i) (body-of port "/")) (iota 3))))))

(test-group "workers log how many requests they served"
  (write-file app (app-text "version 1"))
  (call-guarded
   (lambda ()
     (let ((plucky (start-plucky app (list "--port" "0" "--allow-root" "--workers" "2"))))
       (test-assert "listening" (plucky-port plucky))
       (when (plucky-port plucky)
         (let ((answers (map (lambda (i) (body-of (plucky-port plucky) "/")) (iota 30))))
           (test-equal "30 answers" 30 (count string? answers)))
         (let ((status killed? (stop-plucky plucky)))
           (test-equal "stopped with exit 0" '(0 #f) (list (status:exit-val status) killed?)))
         (let ((counts (served-counts (plucky-log plucky))))
           (test-equal "two totals" 2 (length counts))
           (test-equal "adding up to 30" 30 (apply + counts))))
       (delete-file (plucky-log-file plucky))))))

(test-group "--workers defaults to one per CPU"
  (with-plucky (plucky app)
    (test-equal "as many workers as CPUs" (current-processor-count)
      (length (or (workers-of plucky (current-processor-count)) '())))))

(define (ignored-signals pid)
  ;; -> the signal numbers PID ignores, from /proc/PID/status's SigIgn
  (let ((mask (let ((value (process-status-field pid "SigIgn")))
                (and value (string->number value 16)))))
    (if mask
        (filter (lambda (n) (logbit? (- n 1) mask)) (iota 64 1))
        '())))

(test-group "the drop-in's workers: SIGHUP replaces them, SIGUSR1 does not kill them"
  ;; Guile's run-server with 'plucky: workers that do not read their
  ;; signals, under the same master.
  (call-guarded
   (lambda ()
     (let* ((server (start-child
                     (lambda (report)
                       (let ((sock (socket AF_INET SOCK_STREAM 0)))
                         (setsockopt sock SOL_SOCKET SO_REUSEADDR 1)
                         (bind sock AF_INET INADDR_LOOPBACK 0)
                         (listen sock 128)
                         (report (sockaddr:port (getsockname sock)))
                         ((@ (web server) run-server)
                          (lambda (request body)
                            (values '((content-type . (text/plain)))
                                    (if (equal? (uri-path (request-uri request)) "/worker-pid")
                                        ;; the PID the server read once, and getpid's
                                        (format #f "~a ~a" (worker-pid) (getpid))
                                        (number->string (getpid)))))
                          'plucky (list #:socket sock #:workers 2))))))
            (port (server-port server))
            (pid (server-pid server))
            (workers-now (lambda () (sort (child-pids pid) <)))
            (first (wait-until (lambda ()
                                 (let ((w (workers-now))) (and (= 2 (length w)) w))))))
       (test-assert "two workers" first)
       (test-assert "which answer" (member (body-of port "/") (map number->string (or first '()))))
       (test-assert "worker-pid: the worker's own PID, not the master's"
         (let ((pids (string-split (or (body-of port "/worker-pid") "") #\space)))
           (and (= 2 (length pids))
                (equal? (car pids) (cadr pids))
                (member (car pids) (map number->string (or first '()))))))
       (test-equal "they ignore SIGHUP, SIGUSR1 and SIGUSR2, which the master passes on"
         (map (lambda (w) (list SIGHUP SIGUSR1 SIGUSR2)) (or first '()))
         (map (lambda (w) (lset-intersection = (ignored-signals w) (list SIGHUP SIGUSR1 SIGUSR2)))
              (or first '())))
       (kill pid SIGUSR1)
       (kill pid SIGHUP)
       (let ((second (wait-until (lambda ()
                                   (let ((w (workers-now)))
                                     (and (= 2 (length w))
                                          (null? (lset-intersection = w (or first '())))
                                          w)))
                                 #:timeout 10)))
         (test-assert "SIGHUP: two new workers" second)
         (test-assert "which answer" (member (body-of port "/")
                                             (map number->string (or second '()))))
         (let ((status killed? (stop-server server)))
           (test-equal "SIGTERM stops it all, exit 0" '(0 #f)
             (list (status:exit-val status) killed?)))
         (test-equal "no worker outlives the master" '()
           (kill-survivors (or second '()))))))))

(remove-tree dir)

(test-end "server/workers")
