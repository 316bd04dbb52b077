;;; (tests lib command) --- run bin/plucky as a service manager would

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The tests of workers, reloads, socket activation, inetd, privileges
;;; and the access log run the real command, bin/plucky, the way systemd,
;;; Shepherd or inetd start it: `launch' forks and execs it with exactly
;;; the descriptors asked for (a listening socket as descriptor 3, a pipe
;;; or a socket as standard input and output…) and every other
;;; descriptor of the test process closed, its standard error in a log
;;; file the test reads with `plucky-log'.
;;;
;;; Every wait is a poll with a deadline (`wait-until'); every process
;;; started here is stopped by its PID, and its workers (found in /proc)
;;; are killed if they outlive it.
;;;
;;; Code:

(define-module (tests lib command)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 match)
  #:use-module (ice-9 rdelim)
  #:use-module (ice-9 regex)
  #:use-module (ice-9 popen)
  #:use-module (srfi srfi-64)
  #:use-module (tests lib server)
  #:use-module ((tests lib harness) #:select (call-guarded))
  ;; wait-until lives in (tests lib server), which uses it too
  #:re-export (wait-until)
  #:export (source-root
            plucky-program
            temporary-directory
            remove-tree
            write-file
            read-file
            compiled-in-fresh-guile
            fresh-guile-value

            launch
            plucky?
            plucky-pid
            plucky-log
            plucky-log-file
            plucky-port
            plucky-workers
            plucky-status
            start-plucky
            stop-plucky
            signal-plucky
            plucky-exit-status
            call-with-plucky
            with-plucky

            proc-status-field
            has-open?
            run-browser-script
            make-certificates!
            browse-demo-over-https

            allow-root
            write-text-app))

(define source-root
  ;; tests/lib/harness.scm is found from the load path
  (dirname (dirname (dirname (search-path %load-path "tests/lib/harness.scm")))))

(define plucky-program (string-append source-root "/bin/plucky"))

(define allow-root
  ;; what bin/plucky needs to serve when the tests run as root
  (if (zero? (geteuid)) '("--allow-root") '()))

(define (write-text-app dir text)
  "Write DIR/app.scm, an app that answers every request with TEXT as
text/plain, and return its file name."
  (let ((app (string-append dir "/app.scm")))
    (write-file app (format #f "(define (handler request body)
  (values '((content-type . (text/plain))) ~s))
handler
" text))
    app))

(define (temporary-directory)
  "Make and return a new directory under $TMPDIR (or /tmp), readable by
every user (the privileges tests serve from it as nobody)."
  (let ((dir (mkdtemp (string-append (or (getenv "TMPDIR") "/tmp")
                                     "/plucky-test-XXXXXX"))))
    (chmod dir #o755)
    dir))

(define (remove-tree dir)
  "Delete DIR and everything under it."
  (let ((st (false-if-exception (lstat dir))))
    (when st
      (if (eq? (stat:type st) 'directory)
          (begin
            (for-each (lambda (name)
                        (unless (member name '("." ".."))
                          (remove-tree (string-append dir "/" name))))
                      (let ((d (opendir dir)))
                        (let lp ((names '()))
                          (let ((entry (readdir d)))
                            (if (eof-object? entry)
                                (begin (closedir d) names)
                                (lp (cons entry names)))))))
            (rmdir dir))
          (delete-file dir)))))

(define (compiled-in-fresh-guile text expression)
  "Compile TEXT, the source of a module, in this Guile, then start a fresh
`guile' that loads the compiled file and evaluates EXPRESSION (a string),
which writes its answer; return the first line it wrote.  What a compiled
module holds at run time, without the compile-time modules this Guile
has loaded."
  (let* ((dir (temporary-directory))
         (source (string-append dir "/module.scm"))
         (compiled (string-append dir "/module.go")))
    (write-file source text)
    ((@ (system base compile) compile-file) source #:output-file compiled)
    (let* ((port ((@ (ice-9 popen) open-pipe*) OPEN_READ "guile" "--no-auto-compile" "-c"
                  (string-append "(load-compiled " (object->string compiled) ")"
                                 expression)))
           (line ((@ (ice-9 rdelim) read-line) port)))
      ((@ (ice-9 popen) close-pipe) port)
      (remove-tree dir)
      line)))

(define (fresh-guile-value . texts)
  "Evaluate the forms in TEXTS (strings, joined) at top level in turn in
a fresh `guile -c' with this tree's modules on its load paths; return
the value of the last, written and read back, or the output itself (a
string) when it is not one datum.  For what is a property of a whole
process: which modules are loaded, say."
  (let* ((program (string-append
                   "(let ((port (open-input-string "
                   (call-with-output-string
                     (lambda (port) (write (string-join texts " ") port)))
                   ")))"
                   " (let loop ((value #f))"
                   "   (let ((form (read port)))"
                   "     (if (eof-object? form)"
                   "         (write value)"
                   "         (loop (primitive-eval form))))))"))
         (port ((@ (ice-9 popen) open-pipe*) OPEN_READ "guile" "--no-auto-compile"
                "-L" source-root "-C" (string-append source-root "/build")
                "-c" program))
         (text (read-string port)))
    ((@ (ice-9 popen) close-pipe) port)
    (catch #t
      (lambda () (call-with-input-string text read))
      (lambda _ text))))

(define (write-file file text)
  "Write TEXT to FILE (readable by all), replacing it atomically: a
worker loading FILE sees either the old text or the new."
  (let ((temporary (string-append file ".new")))
    (call-with-output-file temporary (lambda (port) (display text port)))
    (chmod temporary #o644)
    (rename-file temporary file)))

(define (read-file file)
  "Return the contents of FILE, or \"\" if it does not exist."
  (if (file-exists? file)
      (let ((text (call-with-input-file file (lambda (port) (read-delimited "" port)))))
        (if (eof-object? text) "" text))
      ""))

;;;
;;; Starting a process with chosen descriptors
;;;

(define (open-descriptors)
  (let ((dir (opendir "/proc/self/fd")))
    (let lp ((fds '()))
      (let ((entry (readdir dir)))
        (cond
         ((eof-object? entry) (closedir dir) fds)
         ((string->number entry) => (lambda (fd) (lp (cons fd fds))))
         (else (lp fds)))))))

(define* (launch program args #:key (fds '()) (environment #f))
  "Fork and exec PROGRAM with ARGS.  FDS is a list of (TARGET . SOURCE):
the child gets descriptor SOURCE of this process as TARGET (0, 1 and 2
default to /dev/null); every other descriptor is closed.  ENVIRONMENT,
if given, is the child's whole environment (a list of \"NAME=VALUE\"),
or a procedure that returns it, called in the child (which can thus
name its own PID, as LISTEN_PID must).  Return the child's PID."
  (flush-all-ports)
  (let ((pid (primitive-fork)))
    (if (zero? pid)
        (catch #t
          (lambda ()
            (let* ((null (open-fdes "/dev/null" O_RDWR))
                   (fds (append fds
                                (filter-map (lambda (target)
                                              (and (not (assv target fds))
                                                   (cons target null)))
                                            '(0 1 2))))
                   ;; Out of the way first, so that placing one does not
                   ;; clobber the source of another.
                   (moved (map (lambda (entry i)
                                 (dup2 (cdr entry) (+ 200 i))
                                 (cons (car entry) (+ 200 i)))
                               fds (iota (length fds)))))
              (for-each (lambda (entry) (dup2 (cdr entry) (car entry))) moved)
              (for-each (lambda (fd)
                          (unless (assv fd moved)
                            (false-if-exception (close-fdes fd))))
                        (open-descriptors))
              ;; As under a service manager: no terminal, so no COLUMNS
              ;; (Guile's backtrace printer reads it).
              (unsetenv "COLUMNS")
              (unsetenv "LINES")
              (if environment
                  (apply execle program
                         (if (procedure? environment) (environment) environment)
                         program args)
                  (apply execl program program args))))
          (lambda args (primitive-exit 127)))
        pid)))

;;;
;;; bin/plucky as a server
;;;

(define-record-type <plucky>
  (make-plucky pid log-file port status)
  plucky?
  (pid plucky-pid)
  (log-file plucky-log-file)
  (port plucky-port set-plucky-port!)
  (status plucky-status set-plucky-status!))      ; #f while running

(define (plucky-log plucky)
  "Return what PLUCKY has written to its standard error so far."
  (read-file (plucky-log-file plucky)))

(define listening-rx
  (make-regexp "listening on https?://(127\\.0\\.0\\.1|\\[::1\\]):([0-9]+)/"))

(define* (start-plucky app args #:key (fds '()) (environment #f) (log-file #f)
                       (timeout 20) (wait? #t) (error-log #f))
  "Start `bin/plucky serve APP ARGS…' with standard error and output to
a log file (LOG-FILE, or a new temporary one).  With WAIT?, wait until
it says it listens on a TCP port (in its log, or in ERROR-LOG if it was
given --error-log) and note the port (see `plucky-port'), or until it
exits.  Return a <plucky>."
  (let* ((log-file (or log-file
                       (let* ((port (mkstemp! (string-copy "/tmp/plucky-test-log-XXXXXX")))
                              (name (port-filename port)))
                         (close-port port)
                         name)))
         (log (open-file log-file "a"))
         (pid (launch plucky-program (cons* "serve" app args)
                      #:fds (append fds
                                    (list (cons 1 (port->fdes log))
                                          (cons 2 (port->fdes log))))
                      #:environment environment))
         (plucky (make-plucky pid log-file #f #f)))
    (close-port log)
    (when wait?
      (wait-until (lambda ()
                    (or (regexp-exec listening-rx (read-file (or error-log log-file)))
                        (plucky-exit-status plucky)))
                  #:timeout timeout)
      (let ((m (regexp-exec listening-rx (read-file (or error-log log-file)))))
        (when m
          (set-plucky-port! plucky (string->number (match:substring m 2))))))
    plucky))

;; (with-plucky (PLUCKY APP ARG ...) BODY ...): BODY with PLUCKY bound to
;; `plucky serve APP --port 0 --allow-root ARG ...' once it listens (a
;; test says whether it does), stopped however BODY exits.
(define-syntax-rule (with-plucky (plucky app args ...) body ...)
  (call-guarded
   (lambda ()
     (call-with-plucky app (list "--port" "0" "--allow-root" args ...)
       (lambda (plucky)
         (test-assert "listening" (plucky-port plucky))
         (when (plucky-port plucky)
           body ...))))))

(define (plucky-exit-status plucky)
  "Return PLUCKY's exit status once it has exited (reaping it), else #f."
  (or (plucky-status plucky)
      (match (waitpid (plucky-pid plucky) WNOHANG)
        ((0 . _) #f)
        ((_ . status) (set-plucky-status! plucky status) status))))

(define (plucky-workers plucky)
  "Return the PIDs of PLUCKY's live worker processes."
  (sort (child-pids (plucky-pid plucky)) <))

(define (signal-plucky plucky signal)
  "Send SIGNAL to PLUCKY's master, if it still runs."
  (unless (plucky-exit-status plucky)
    (kill (plucky-pid plucky) signal)))

(define* (stop-plucky plucky #:key (timeout 10))
  "Stop PLUCKY with SIGTERM (SIGKILL after TIMEOUT seconds) and kill any
worker that outlives it.  Return two values: the exit status and whether
SIGKILL was needed."
  (let ((workers (plucky-workers plucky)))
    (signal-plucky plucky SIGTERM)
    (let* ((status (wait-until (lambda () (plucky-exit-status plucky)) #:timeout timeout))
           (killed? (not status)))
      (when killed?
        (false-if-exception (kill (plucky-pid plucky) SIGKILL))
        (set-plucky-status! plucky (cdr (waitpid (plucky-pid plucky)))))
      (kill-survivors workers)
      (values (plucky-status plucky) killed?))))

(define (call-with-plucky app args proc . options)
  "Start plucky (as `start-plucky' with APP, ARGS and OPTIONS), call PROC
with it, and stop it however PROC exits; then delete its log, unless
PLUCKY_TEST_KEEP_LOGS is set.  Return PROC's values."
  (let ((plucky (apply start-plucky app args options)))
    (dynamic-wind
      (lambda () #t)
      (lambda () (proc plucky))
      (lambda ()
        (unless (plucky-status plucky)
          (stop-plucky plucky))
        (if (getenv "PLUCKY_TEST_KEEP_LOGS")
            (format (current-error-port) "plucky log: ~a~%" (plucky-log-file plucky))
            (false-if-exception (delete-file (plucky-log-file plucky))))))))

(define (proc-status-field pid field)
  "Return the value of FIELD (\"Uid\", \"Groups\"…) in /proc/PID/status as
a list of numbers, or #f."
  (let ((value (process-status-field pid field)))
    (and value (map string->number (string-tokenize value)))))

(define (has-open? pid file)
  "Return #t if process PID has FILE open (as its name is now)."
  (let ((dir (false-if-exception (opendir (format #f "/proc/~a/fd" pid)))))
    (and dir
         (let lp ()
           (let ((entry (readdir dir)))
             (cond
              ((eof-object? entry) (closedir dir) #f)
              ((equal? file (false-if-exception
                             (readlink (format #f "/proc/~a/fd/~a" pid entry))))
               (closedir dir)
               #t)
              (else (lp))))))))

(define (make-certificates! dir)
  "Make in DIR, with openssl, a test CA (ca.pem) and a certificate it
signs for localhost and 127.0.0.1 (leaf.pem, leaf.key), for a browser
that trusts the CA as a user would; return the shell's status."
  (system
   (string-append
    "set -e; cd " dir "; exec 2>/dev/null >/dev/null;"
    "openssl ecparam -name prime256v1 -genkey -noout -out ca.key;"
    "openssl req -x509 -new -key ca.key -subj /CN=plucky-browser-test-ca -days 2 -out ca.pem;"
    "openssl ecparam -name prime256v1 -genkey -noout -out leaf.key;"
    "openssl req -new -key leaf.key -subj /CN=localhost -out leaf.csr;"
    "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > leaf.ext;"
    "openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2"
    " -extfile leaf.ext -out leaf.pem")))

(define (browse-demo-over-https what script workers)
  "Unless PLUCKY_BROWSER_TEST is set, count the test WHAT as skipped
(`make check-browser' sets it).  Else serve apps/demo.scm over HTTPS
with WORKERS workers, its certificate signed by a test CA
(`make-certificates!'), and run the Python SCRIPT with the demo's URL,
the CA's file and tests/out (`run-browser-script')."
  (if (not (getenv "PLUCKY_BROWSER_TEST"))
      (begin
        (test-skip 1)
        (test-assert what #f))
      (let ((data (temporary-directory))
            (certs (temporary-directory)))
        (test-eqv "openssl made the test CA" 0
          (status:exit-val (make-certificates! certs)))
        (call-with-plucky
         "apps/demo.scm"
         (append (list "--port" "0" "--workers" (number->string workers)
                       "--tls-cert" (string-append certs "/leaf.pem")
                       "--tls-key" (string-append certs "/leaf.key"))
                 allow-root)
         (lambda (plucky)
           (test-assert "plucky serves the demo over HTTPS" (plucky-port plucky))
           (run-browser-script script
                               (format #f "https://127.0.0.1:~a/" (plucky-port plucky))
                               (string-append certs "/ca.pem")
                               (string-append source-root "/tests/out")))
         #:environment (cons (string-append "PLUCKY_DATA=" data) (environ))
         #:timeout 120)
        (remove-tree data)
        (remove-tree certs))))

(define (run-browser-script script . args)
  "Run the Python SCRIPT (a file name under the source tree, with ARGS)
and make a test of each line it prints, \"ok - WHAT\" or \"not ok -
WHAT: WHY\", then one that it exited 0; return nothing.  The browser
tests' scripts print so (see tests/lib/cdp.py's `check')."
  (let ((pipe (apply open-pipe* OPEN_READ "timeout" "300" "/usr/bin/python3"
                     (string-append source-root "/" script) args)))
    (let loop ()
      (let ((line (read-line pipe)))
        (unless (eof-object? line)
          (cond
           ((string-match "^ok - (.*)$" line)
            => (lambda (m) (test-assert (match:substring m 1) #t)))
           ((string-match "^not ok - (.*)$" line)
            => (lambda (m) (test-assert (match:substring m 1) #f))))
          (loop))))
    (test-equal (string-append script " exited 0") 0
      (status:exit-val (close-pipe pipe)))
    (values)))

;;; (tests lib command) ends here
