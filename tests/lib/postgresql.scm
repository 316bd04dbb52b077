;;; (tests lib postgresql) --- a PostgreSQL of the tests' own, by scripts/pg-temp
;;;
;;; `start-postgresql' runs scripts/pg-temp in a scratch directory and
;;; returns the URL to connect with; `stop-postgresql' stops it by the PID
;;; in its postmaster.pid.  Without Debian's PostgreSQL server the tests
;;; are skipped, except under CI (CI set), where that is a failure:
;;; scripts/install-deps check installs it.

(define-module (tests lib postgresql)
  #:use-module (ice-9 popen)
  #:use-module (ice-9 rdelim)
  #:use-module (srfi srfi-64)
  #:use-module ((tests lib command) #:select (source-root))
  #:export (postgresql-installed?
            pg-temp
            start-postgresql
            stop-postgresql
            postgresql-pid
            check-postgresql-or-skip))

(define (postgresql-installed?)
  "Return true when a PostgreSQL server is installed under
/usr/lib/postgresql (Debian's layout)."
  (and (file-exists? "/usr/lib/postgresql")
       (let ((dir (opendir "/usr/lib/postgresql")))
         (let lp ((found #f))
           (let ((entry (readdir dir)))
             (cond
              ((eof-object? entry) (closedir dir) found)
              ((file-exists? (string-append "/usr/lib/postgresql/" entry "/bin/initdb"))
               (lp #t))
              (else (lp found))))))))

(define (pg-temp command dir)
  "Run scripts/pg-temp COMMAND DIR; return the line it printed (start:
the URL), or #f if it failed."
  (let* ((port (open-pipe* OPEN_READ (string-append source-root "/scripts/pg-temp") command dir))
         (line (read-line port))
         (status (close-pipe port)))
    (and (zero? (status:exit-val status))
         (if (eof-object? line) "" line))))

(define (start-postgresql dir)
  "Start a PostgreSQL of its own in DIR (made by initdb at its first
start); return its URL, or #f when there is no server to run."
  (and (postgresql-installed?) (pg-temp "start" dir)))

(define (stop-postgresql dir)
  "Stop the PostgreSQL of DIR (fast shutdown), waiting until it exited."
  (pg-temp "stop" dir))

(define (postgresql-pid dir)
  "The PID of DIR's postmaster, from its postmaster.pid, or #f."
  (false-if-exception
   (call-with-input-file (string-append dir "/data/postmaster.pid")
     (lambda (port) (string->number (read-line port))))))

(define (check-postgresql-or-skip url)
  "Say why the tests are skipped when URL is #f; under CI, fail."
  (cond
   (url #t)
   ((getenv "CI")
    (test-assert "PostgreSQL runs (CI: scripts/install-deps check installs it)" #f))
   (else
    (format #t "no PostgreSQL server under /usr/lib/postgresql: skipped~%"))))
