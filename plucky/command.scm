;;; (plucky command) --- the `plucky' command line

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; bin/plucky starts Guile with this module's `main'.  Each subcommand
;;; is a procedure of its arguments; options are parsed by hand (not
;;; getopt-long) because every module loaded here is start-up time, and
;;; start-up time is one of plucky's targets.
;;;
;;; An app file is loaded with `load', so Guile compiles it once into
;;; its cache and later starts load the compiled code; its last
;;; expression must evaluate to the handler.
;;;
;;; Code:

(define-module (plucky command)
  #:use-module (plucky server)
  ;; `load' of an app file needs a module that is not declarative.
  #:declarative? #f
  #:export (main))

(define usage "\
Usage: plucky COMMAND [ARGUMENT…]

Commands:
  serve FILE [OPTION…]   serve the handler FILE evaluates to
  bench TARGET [OPTION…] load a URL or an app with wrk, report like ab
                         (plucky bench --help)
  profile APP [OPTION…]  serve APP under load with statprof and print where
                         each request's time goes (plucky profile --help)
  help                   show this text
  version                show plucky's version

Options of serve:
  --host HOST            address to listen on: a name, an IPv4 or IPv6
                         address; \"::\" for all of both (default 127.0.0.1)
  --port PORT            TCP port; 0 picks a free one (default 8080)
  --workers N            worker processes (default 1); with more than
                         one, a master process restarts any that dies
  --max-body BYTES       largest request body accepted, else 413
                         (default 67108864)
  --max-connections N    open connections per worker (default 10000)
  --keep-alive-timeout S seconds an idle connection is kept (default 60)
  --header-timeout S     seconds a client has to send a request head,
                         else 408 (default 10)
  --body-timeout S       seconds a request body may stall (default 30)
  --write-timeout S      seconds a response may stall (default 30)
  --max-request-line B   longest request line, else 414 (default 8192)
  --max-header-bytes B   largest header block, else 431 (default 32768)
  --max-header-count N   most header fields, else 431 (default 100)
  --status               serve /_plucky/status (a page with charts),
                         /_plucky/metrics (Prometheus) and
                         /_plucky/status.json, to loopback clients only,
                         and account for every request (plucky observe)
  --status-token T       serve them to any client that gives ?token=T or
                         Authorization: Bearer T, and only to those

FILE is Scheme whose last expression is a procedure
  (lambda (request body) ... (values response body))
with the contract of Guile's (web server) run-server.  It is loaded in a
fresh module where `app-directory' names the directory FILE is in.
")

(define version "0.1.0")

(define (fail fmt . args)
  (apply format (current-error-port) (string-append "plucky: " fmt "~%") args)
  (exit 2))

(define (number-option name value)
  (let ((n (and value (string->number value))))
    (unless (and n (exact-integer? n) (>= n 0))
      (fail "~a expects a non-negative whole number, not ~s" name value))
    n))

(define option-names
  '("--host" "--port" "--workers" "--max-body" "--max-connections"
    "--keep-alive-timeout" "--header-timeout" "--body-timeout"
    "--write-timeout" "--max-request-line" "--max-header-bytes"
    "--max-header-count" "--status-token"))

(define flag-names
  '("--status"))

(define (parse-options args)
  ;; -> (values file alist-of-options)
  (let lp ((args args) (file #f) (options '()))
    (cond
     ((null? args) (values file options))
     ((member (car args) '("-h" "--help")) (display usage) (exit 0))
     ((member (car args) flag-names)
      (lp (cdr args) file (acons (car args) #t options)))
     ((member (car args) option-names)
      (when (null? (cdr args))
        (fail "~a needs a value" (car args)))
      (lp (cddr args) file (acons (car args) (cadr args) options)))
     ((string-prefix? "-" (car args))
      (fail "unknown option ~a (see plucky --help)" (car args)))
     (file (fail "one FILE only; also got ~a" (car args)))
     (else (lp (cdr args) (car args) options)))))

(define (load-handler file)
  (unless (file-exists? file)
    (fail "no such file: ~a" file))
  (let ((handler (save-module-excursion
                  (lambda ()
                    ;; An app file may itself `load' the files of other
                    ;; apps (apps/demo.scm does), which Guile allows only
                    ;; in a module that is not declarative.
                    (let ((module (make-fresh-user-module))
                          (path (canonicalize-path file)))
                      (set-module-declarative?! module #f)
                      ;; The app may want files beside it; Guile's
                      ;; (current-filename) is whatever the cached
                      ;; compilation recorded, so say it plainly.
                      (module-define! module 'app-directory (dirname path))
                      (set-current-module module)
                      (load path))))))
    (unless (procedure? handler)
      (fail "~a must end with an expression whose value is the handler procedure; got ~s"
            file handler))
    handler))

(define (serve args)
  (call-with-values (lambda () (parse-options args))
    (lambda (file options)
      (unless file (fail "serve needs a FILE (see plucky --help)"))
      (let* ((option (lambda (name default)
                       (let ((value (assoc-ref options name)))
                         (if value (number-option name value) default))))
             (handler (load-handler file))
             (settings (make-loop-settings
                        #:parse-limits (make-parse-limits
                                        #:max-request-line (option "--max-request-line" 8192)
                                        #:max-header-bytes (option "--max-header-bytes" 32768)
                                        #:max-header-count (option "--max-header-count" 100))
                        #:max-body (option "--max-body" (* 64 1024 1024))
                        #:max-connections (option "--max-connections" 10000)
                        #:keep-alive-timeout (option "--keep-alive-timeout" 60)
                        #:header-timeout (option "--header-timeout" 10)
                        #:body-timeout (option "--body-timeout" 30)
                        #:write-timeout (option "--write-timeout" 30))))
        (call-with-values
            (lambda ()
              (if (or (assoc-ref options "--status") (assoc-ref options "--status-token"))
                  ;; Loaded only when asked for: start-up time.
                  ((observe-cli 'status-wrap) handler
                   #:workers (max 1 (option "--workers" 1))
                   #:token (assoc-ref options "--status-token"))
                  (values handler #f)))
          (lambda (handler observer)
            (run-server handler
                        #:host (or (assoc-ref options "--host") "127.0.0.1")
                        #:port (option "--port" 8080)
                        #:workers (max 1 (option "--workers" 1))
                        #:settings settings
                        #:observer observer)))))))

(define (observe-cli name)
  ;; (plucky observe cli) and what it loads are needed only by bench,
  ;; profile and --status; resolve it then, not at every start.
  (module-ref (resolve-interface '(plucky observe cli)) name))

(define (main args)
  "Run the plucky command with ARGS, the command line."
  (let ((args (cdr args)))
    (cond
     ((null? args) (display usage))
     ((string=? (car args) "serve") (serve (cdr args)))
     ((string=? (car args) "bench") ((observe-cli 'bench-command) (cdr args)))
     ((string=? (car args) "profile") ((observe-cli 'profile-command) (cdr args)))
     ((member (car args) '("help" "--help" "-h")) (display usage))
     ((member (car args) '("version" "--version")) (format #t "plucky ~a~%" version))
     (else (fail "unknown command ~s (see plucky --help)" (car args))))))

;;; (plucky command) ends here
