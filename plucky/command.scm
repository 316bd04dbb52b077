;;; (plucky command) --- the `plucky' command line

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; bin/plucky starts Guile with this module's `main'.  Each subcommand
;;; is a procedure of its arguments; options are parsed by hand (not
;;; getopt-long) because every module loaded here is start-up time, and
;;; start-up time is one of plucky's targets (bench/startup).
;;;
;;; An app file is loaded with `load', so Guile compiles it once into
;;; its cache and later starts load the compiled code; its last
;;; expression must evaluate to the handler.  `serve' loads it in the
;;; master before listening, so that a broken app never listens, and
;;; hands `run-server' a thunk that loads it afresh: each reload (SIGHUP)
;;; runs that thunk in the new workers.  With --user the master, which
;;; stays root, never loads the app: the workers do, as that user.  With
;;; --reload the master notes the files the app loaded and reloads when
;;; one changes (plucky server reload).
;;;
;;; Code:

(define-module (plucky command)
  #:use-module (plucky server)
  #:use-module (plucky server settings)
  #:use-module ((srfi srfi-1) #:select (filter-map any every append-map alist-delete))
  ;; (web response) and the rest only for --hsts and --redirect-https:
  ;; the start of an app that does not import them must not load them
  ;; (tests/server/startup).
  #:autoload (web request) (request-host request-uri)
  #:autoload (web response) (build-response response? response-version
                             response-code response-reason-phrase
                             response-headers)
  #:autoload (web uri) (build-uri uri-path uri-query)
  #:autoload (plucky server socket) (inherited-listeners descriptor->listener
                                     listener-host? address-error?)
  #:autoload (plucky server privileges) (resolve-identity)
  #:autoload (plucky server reload) (call-recording-loads open-reloader
                                     reloader->change-watch
                                     reload-changed-modules! close-reloader!)
  ;; `load' of an app file needs a module that is not declarative.
  #:declarative? #f
  #:export (main))

(define (usage)
  ;; The help: the options' lines come from their declaration (plucky
  ;; server settings), in its sections; the rest is written here.
  (define (section key)
    (string-append
     (assq-ref section-titles key) "\n"
     (options-help (map setting-name
                        (filter (lambda (s) (eq? (setting-section s) key)) settings)))))
  (string-append "\
Usage: plucky COMMAND [ARGUMENT…]

Commands:
  serve FILE [OPTION…]   serve the handler FILE evaluates to
  static DIR [OPTION…]   serve the files under DIR (every option of serve,
                         and those under Files below)
  bench TARGET [OPTION…] load a URL or an app with wrk, report like ab
                         (plucky bench --help)
  profile APP [OPTION…]  serve APP under load with statprof and print where
                         each request's time goes (plucky profile --help)
  help                   show this text
  version                show plucky's version

" (section 'where) "\
Sockets passed by systemd or GNU Shepherd (LISTEN_FDS, LISTEN_PID,
LISTEN_FDNAMES) are served instead of --host and --port.  Under systemd's
Type=notify (NOTIFY_SOCKET), plucky says READY=1 once it serves,
RELOADING=1 and READY=1 around a reload, and STOPPING=1.

" (section 'how) "
" (section 'logs) "
" (section 'status) "
" (section 'limits) "
" (section 'files) "
Deprecated names, still accepted: "
  (string-join (append-map (lambda (s)
                             (map (lambda (alias)
                                    (format #f "--~a (~a)" alias (setting-flag s)))
                                  (setting-aliases s)))
                           settings)
               ", ")
  ".

Signals (to the master):
  SIGTERM, SIGINT        drain: stop accepting, finish the requests in
                         flight, exit within --grace-s; a second SIGINT
                         stops at once
  SIGHUP                 reload: new workers load FILE afresh, then the
                         old ones drain; if FILE fails to load, the old
                         workers keep serving and the error is logged
                         (with --workers 1, FILE is loaded again in place)
  SIGUSR1                reopen the log files (after logrotate)

FILE is Scheme whose last expression is a procedure
  (lambda (request body) ... (values response body))
with the contract of Guile's (web server) run-server.  It is loaded in a
fresh module where `app-directory' names the directory FILE is in.
"))

(define version "0.1.0")

(define (fail fmt . args)
  (apply format (current-error-port) (string-append "plucky: " fmt "~%") args)
  (exit 2))

(define (parse-command-line args)
  ;; -> (values file alist-of-options): see `parse-options' of (plucky
  ;; server settings); exit 2 on a bad option, 0 after --help
  (call-with-values
      (lambda ()
        (parse-options args fail #:help (lambda () (display (usage)) (exit 0))))
    (lambda (positional options)
      (when (and (pair? positional) (pair? (cdr positional)))
        (fail "one FILE only; also got ~a" (cadr positional)))
      (values (and (pair? positional) (car positional)) options))))

(define (setting-keywords options scopes)
  ;; -> the keyword arguments of `run-server' for the settings of SCOPES
  ;; given in OPTIONS
  (append-map (lambda (o)
                (let ((s (find-setting (car o))))
                  (if (memq (setting-scope s) scopes)
                      (list (setting-keyword s) (cdr o))
                      '())))
              options))

(define (load-handler file)
  ;; -> the handler FILE evaluates to; raises an error otherwise
  (let ((handler (save-module-excursion
                  (lambda ()
                    ;; An app file may itself `load' the files of other
                    ;; apps (apps/demo.scm does), which Guile allows only
                    ;; in a module that is not declarative.
                    (let ((module (make-fresh-user-module)))
                      (set-module-declarative?! module #f)
                      ;; The app may want files beside it; Guile's
                      ;; (current-filename) is whatever the cached
                      ;; compilation recorded, so say it plainly.
                      (module-define! module 'app-directory (dirname file))
                      (set-current-module module))
                    (load file)))))
    (trace-start-up "app")
    (unless (procedure? handler)
      (error (format #f "~a must end with an expression whose value is the handler procedure; got ~s"
                     file handler)))
    handler))

(define (error-message exception)
  ;; The text of EXCEPTION as Guile would print it, on one line or more.
  (call-with-output-string
    (lambda (port)
      (print-exception port #f ((@ (ice-9 exceptions) exception-kind) exception)
                       ((@ (ice-9 exceptions) exception-args) exception)))))

(define (fail-on-error status thunk)
  ;; Call THUNK; on an exception print its message and exit with STATUS,
  ;; or with 2 if it says that an address given cannot be served.
  (with-exception-handler
      (lambda (exception)
        (if (address-error? exception)
            (fail "~a" ((@ (ice-9 exceptions) exception-message) exception))
            (begin
              (display (string-append "plucky: " (string-trim-right (error-message exception))
                                      "\n")
                       (current-error-port))
              (exit status))))
    thunk
    #:unwind? #t))

(define (stderr-is-the-connection?)
  ;; inetd gives the connection as descriptors 0, 1 and 2: messages
  ;; written to standard error would reach the client.
  (let ((in (false-if-exception (stat 0)))
        (err (false-if-exception (stat 2))))
    (and in err
         (eq? (stat:type err) 'socket)
         (= (stat:dev in) (stat:dev err))
         (= (stat:ino in) (stat:ino err)))))

(define (cache-control-option value)
  ;; -> VALUE (a string) as (web http)'s parsed Cache-Control, or exit 2
  ;; naming it
  (or (false-if-exception
       ((module-ref (resolve-interface '(web http)) 'parse-header) 'cache-control value))
      (fail "--cache-control expects a Cache-Control value (as \"public, max-age=3600\"), not ~s"
            value)))

(define (static-loader dir value)
  ;; -> a thunk that returns the handler serving DIR with the Files
  ;; options; (plucky web static) loads then, not at every start
  (lambda ()
    ((module-ref (resolve-interface '(plucky web static)) 'static-handler)
     dir
     #:listing? (and (value "--listing") #t)
     #:dotfiles? (and (value "--dotfiles") #t)
     #:follow-symlinks? (and (value "--follow-symlinks") #t)
     #:cache-control (let ((control (value "--cache-control")))
                       (if control
                           `((,(lambda (path) #t) . ,(cache-control-option control)))
                           '())))))

(define* (serve args #:optional (static? #f))
  ;; With STATIC?, `plucky static': the positional argument is a
  ;; directory to serve rather than an app FILE.
  ;; Until the server reads them from its signalfd, SIGHUP and SIGUSR1
  ;; would end the process (their default action), while it loads the
  ;; app, say: held until then, they take effect once it serves (a
  ;; reload, a reopening of the logs).
  ((@ (plucky sys signal) block-signals!) (list SIGHUP SIGUSR1))
  (call-with-values (lambda () (parse-command-line args))
    (lambda (file options)
      (cond
       (static?
        (unless file (fail "static needs a DIR (see plucky --help)"))
        (unless (and (file-exists? file) (file-is-directory? file))
          (fail "no such directory: ~a" file))
        (let ((control (assq-ref options 'cache-control)))
          (when control (cache-control-option control))))
       (else
        (unless file (fail "serve needs a FILE (see plucky --help)"))
        (unless (file-exists? file)
          (fail "no such file: ~a" file))
        (for-each (lambda (o)
                    (let ((s (find-setting (car o))))
                      (when (eq? (setting-scope s) 'static)
                        (fail "~a is an option of static, not serve" (setting-flag s)))))
                  options)))
      (let* ((file (canonicalize-path file))
             ;; NAME: "--flag"; the value given, or #f
             (value (lambda (name)
                      (assq-ref options (setting-name
                                         (find-setting (string->symbol (substring name 2)))))))
             ;; with --reload: set once the app has loaded in the master
             (reloader #f)
             (make-handler (cond
                            (static? (static-loader file value))
                            ((value "--reload")
                             (lambda ()
                               ;; in a reload's worker, forked from the
                               ;; master: the app's modules changed since
                               (when reloader (reload-changed-modules! reloader))
                               (load-handler file)))
                            (else (lambda () (load-handler file)))))
             ;; the value given, else its declared default
             (option (lambda (name)
                       (or (value name)
                           (setting-default (find-setting (string->symbol (substring name 2)))))))
             (inetd? (value "--inetd"))
             (user (value "--user"))
             (group (value "--group"))
             (host (option "--host"))
             ;; not run-server's default of 1: one per CPU
             (workers (or (value "--workers") ((@ (ice-9 threads) current-processor-count))))
             (port (option "--port"))
             (fd (option "--fd"))
             (tls (tls-pairs options))
             (ocsp (tls-ocsp-files args))
             (lifetime (option "--tls-session-lifetime-s"))
             ;; made here, before the workers are forked: they share it
             (resumption (and tls ((tls-procedure 'make-tls-resumption)
                                   #:lifetime lifetime)))
             (hsts (option "--hsts-max-age-s"))
             (redirect (option "--redirect-https"))
             (listen (listen-addresses options tls))
             ;; HTTP and HTTPS addresses both: tell requests apart
             (mixed? (and listen (any caddr listen) (not (every caddr listen)))))
        (when (and hsts (not tls))
          (fail "--hsts-max-age-s needs --tls-cert and --tls-key"))
        (when (and (value "--tls-session-lifetime-s") (not tls))
          (fail "--tls-session-lifetime-s needs --tls-cert and --tls-key"))
        (when (and redirect tls (not mixed?))
          (fail "--redirect-https is for a plain-HTTP server; not with --tls-cert \
(unless --listen gives it a plain address too)"))
        (when tls
          ;; Read here, to refuse a bad file with exit status 2; each
          ;; worker reads them again (a reload's workers, afresh).
          (fail-on-error 2 (lambda ()
                             ((tls-procedure 'free-tls-credentials!)
                              ((tls-procedure 'load-tls-credentials) tls #:ocsp ocsp)))))
        (when (and group (not user))
          (fail "--group needs --user"))
        (when (value "--reload")
          (cond
           (static? (fail "--reload is for serve: static serves each file as it is on disk"))
           (inetd? (fail "--reload needs a master process, which --inetd has not"))
           (user (fail "--reload needs the master to load the app, which --user forbids"))))
        (when (equal? (value "--status-token") "")
          (fail "--status-token needs a token, not an empty string"))
        (unless (listener-host? host)
          (fail "--host expects an address, a name or unix:PATH, not ~s" host))
        (when (and listen (or (value "--host") (value "--port") fd))
          (fail "--listen replaces --host, --port and --fd: give addresses one way"))
        (when (and inetd? (equal? (value "--access-log") "-"))
          (fail "--access-log - would write into the connection under --inetd; give a file"))
        ;; Who will serve: refuse root unless asked for.
        (let ((identity (and user (fail-on-error 2 (lambda () (resolve-identity user group))))))
          (cond
           ((and identity (not (zero? (geteuid))) (not (= (car identity) (geteuid))))
            (fail "--user ~a needs root: this process cannot switch users" user))
           ((and (not (value "--allow-root"))
                 (if identity (zero? (car identity)) (zero? (geteuid))))
            (fail "refusing to serve requests as root; give --user USER to switch to \
USER once the sockets are bound, or --allow-root"))))
        (when (and inetd? (not (value "--error-log")) (stderr-is-the-connection?))
          (let ((null (open-fdes "/dev/null" O_WRONLY)))
            (dup2 null 2)
            (close-fdes null)))
        (let* (;; Inherited descriptors first, before loading the app or
               ;; anything else opens a file: a closed --fd N must be
               ;; seen closed, not taken by a file this process opened.
               (sockets (and (not inetd?)
                             (let ((inherited (fail-on-error 1 inherited-listeners)))
                               (cond
                                ((pair? inherited)
                                 (for-each (lambda (named)
                                             (format (current-error-port)
                                                     "plucky: socket activation: ~a~%"
                                                     (or (car named) "unnamed socket")))
                                           inherited)
                                 (map cdr inherited))
                                ;; a bad --fd is the user's to mend
                                (fd (fail-on-error
                                     2 (lambda () (list (descriptor->listener fd)))))
                                (else #f)))))
               ;; systemd's Type=notify: taken out of the environment
               ;; before the app loads, so that neither it nor what it
               ;; starts sees NOTIFY_SOCKET (see (plucky server notify))
               (notify (and (not inetd?)
                            (getenv "NOTIFY_SOCKET")
                            (fail-on-error
                             1 (@ (plucky server notify) open-service-notifier))))
               (status (and (or (value "--status") (value "--status-token"))
                            (status-wrapper workers (value "--status-token"))))
               (wrap (let ((wrap (if status (car status) (lambda (handler) handler))))
                       (cond
                        (mixed? (lambda (handler)
                                  (by-scheme (if redirect
                                                 (https-redirect redirect)
                                                 (wrap handler))
                                             (if hsts
                                                 (with-hsts hsts (wrap handler))
                                                 (wrap handler)))))
                        (redirect (lambda (handler) (https-redirect redirect)))
                        (hsts (lambda (handler) (with-hsts hsts (wrap handler))))
                        (else wrap))))
               (reload (lambda ()
                         (let* ((handler (make-handler))
                                ;; A wrapper takes bodies as the app does
                                (wrapped (if (body-port-handler? handler)
                                             (with-body-port (wrap handler))
                                             (wrap handler))))
                           ;; and answers CONNECT as it does.
                           (if (connect-handler? handler)
                               (with-connect wrapped)
                               wrapped))))
               ;; Loaded here, before listening, unless the workers must
               ;; load it as another user.
               (handler (and (not user)
                             (fail-on-error
                              2 (lambda ()
                                  (if (value "--reload")
                                      (call-with-values
                                          (lambda () (call-recording-loads reload))
                                        (lambda (handler loaded)
                                          (set! reloader (open-reloader file loaded))
                                          handler))
                                      (reload))))))
               (ok (fail-on-error
                    1 (lambda ()
                        ;; the settings given, by their keywords:
                                    ;; the rest take their declared defaults
                        (apply run-server handler
                                    #:host host
                                    #:port port
                                    #:listen listen
                                    #:sockets sockets
                                    #:connections (if inetd? (list (cons 0 1)) '())
                                    #:workers workers
                                    #:reload (and (not inetd?) reload)
                                    #:observer (and status (cdr status))
                                    #:notify notify
                                    #:watch (and reloader
                                                 (reloader->change-watch reloader))
                                    #:tls (and tls
                                               (lambda ()
                                                 ((tls-procedure 'tls-transport-maker)
                                                  ((tls-procedure 'load-tls-credentials)
                                                   tls #:ocsp ocsp)
                                                  #:resumption resumption)))
                                    (setting-keywords
                                     (alist-delete 'workers
                                                   (alist-delete 'host
                                                                 (alist-delete 'port options)))
                                     '(loop parse server)))))))
          (when reloader (close-reloader! reloader))
          (exit (if (eq? ok #f) 1 0)))))))

(define (tls-pairs options)
  ;; -> ((CERT . KEY) …) in the order given, or #f; exit 2 when the
  ;; files do not come in pairs
  (let ((certs (or (assq-ref options 'tls-cert) '()))
        (keys (or (assq-ref options 'tls-key) '())))
    (cond
     ((and (null? certs) (null? keys)) #f)
     ((= (length certs) (length keys)) (map cons certs keys))
     (else (fail "--tls-cert and --tls-key come in pairs: ~a certificates, ~a keys"
                 (length certs) (length keys))))))

(define (tls-ocsp-files args)
  ;; -> for each --tls-cert of ARGS (the command line) in the order given,
  ;; the --tls-ocsp file that follows it, or #f; exit 2 for one before
  ;; any --tls-cert or a second one for a certificate.  Read from the
  ;; command line itself: the options' alist keeps each repeated
  ;; setting's values apart, not their order among others.
  (let lp ((args args) (files '()))
    (cond
     ((or (null? args) (null? (cdr args))) (reverse files))
     ((equal? (car args) "--tls-cert") (lp (cddr args) (cons #f files)))
     ((equal? (car args) "--tls-ocsp")
      (when (or (null? files) (car files))
        (fail "--tls-ocsp ~a: give it after the --tls-cert it is for, once" (cadr args)))
      (lp (cddr args) (cons (cadr args) (cdr files))))
     (else (lp (cdr args) files)))))

(define (listen-addresses options tls)
  ;; -> the --listen addresses in the order given, each (HOST PORT TLS?),
  ;; or #f; exit 2 for one that is malformed, or when TLS (the --tls-cert
  ;; pairs) and the tls: addresses do not go together
  (let ((texts (or (assq-ref options 'listen) '())))
    (and (pair? texts)
         (let ((listen (map listen-address texts)))
           (when (and (any caddr listen) (not tls))
             (fail "--listen tls:… needs --tls-cert and --tls-key"))
           (when (and tls (not (any caddr listen)))
             (fail "--tls-cert with --listen needs a tls: address"))
           listen))))

(define (listen-address text)
  ;; "tls:[::1]:8443" -> ("::1" 8443 #t); "unix:/run/a.sock" -> ("unix:/run/a.sock" 0 #f)
  (let* ((tls? (string-prefix? "tls:" text))
         (address (if tls? (substring text 4) text))
         (bad (lambda ()
                (fail "--listen expects [tls:]HOST:PORT, [tls:][IPV6]:PORT or [tls:]unix:PATH, not ~s"
                      text))))
    (if (string-prefix? "unix:" address)
        (begin
          (unless (listener-host? address) (bad))
          (list address 0 tls?))
        (let* ((colon (or (string-rindex address #\:) (bad)))
               (host (substring address 0 colon))
               (host (cond
                      ((string-null? host) "127.0.0.1")
                      ((and (string-prefix? "[" host) (string-suffix? "]" host))
                       (substring host 1 (- (string-length host) 1)))
                      ((string-index host #\:) (bad)) ; IPv6 without brackets
                      (else host)))
               (port (string->number (substring address (+ colon 1)))))
          (unless (and port (exact-integer? port) (<= 0 port 65535)
                       (listener-host? host))
            (bad))
          (list host port tls?)))))

(define (by-scheme plain secure)
  ;; -> a handler that gives each request to SECURE when it came over
  ;; TLS, to PLAIN otherwise
  (lambda (request body . state)
    (apply (if (eq? (current-request-scheme) 'https) secure plain) request body state)))

(define (tls-procedure name)
  ;; (plucky server tls) loads GnuTLS: resolved only when HTTPS is asked
  ;; for, not at every start.
  (module-ref (resolve-interface '(plucky server tls)) name))

(define (add-header response name value)
  ;; RESPONSE (a <response> or a header alist, as handlers return) with
  ;; the header NAME: VALUE added
  (if (response? response)
      (build-response #:version (response-version response)
                      #:code (response-code response)
                      #:reason-phrase (response-reason-phrase response)
                      #:headers (acons name value (response-headers response)))
      (acons name value response)))

(define (with-hsts seconds handler)
  ;; HANDLER, with Strict-Transport-Security on each of its responses
  (let ((value (format #f "max-age=~a" seconds)))
    (lambda (request body . state)
      (call-with-values (lambda () (apply handler request body state))
        (lambda (response body . state)
          (apply values (add-header response 'strict-transport-security value)
                 body state))))))

(define (https-redirect port)
  ;; -> a handler that sends every request to its https URL on PORT
  (lambda (request body . state)
    (let ((host (request-host request))
          (uri (request-uri request)))
      (apply values
             (build-response
              #:code 301
              #:headers `((location . ,(build-uri 'https
                                                  #:host (if host (car host) "localhost")
                                                  #:port (and (not (= port 443)) port)
                                                  #:path (uri-path uri)
                                                  #:query (uri-query uri)))
                          (content-type . (text/plain))))
             "Moved to HTTPS.\n"
             state))))

(define (observe name module)
  ;; (plucky observe …) and what it loads are needed only by --status;
  ;; resolve them then, not at every start.
  (module-ref (resolve-interface (list 'plucky 'observe module)) name))

(define (dev name module)
  ;; The developers' tools (plucky dev …), for bench and profile only.
  (module-ref (resolve-interface (list 'plucky 'dev module)) name))

(define (status-wrapper workers token)
  ;; -> (WRAP . OBSERVER): WRAP makes a handler serve /_plucky/… from one
  ;; observer, and OBSERVER is the hooks to pass to run-loop's
  ;; #:observer, which feeds it.  One observer for the app and all its
  ;; reloads, so that the figures outlive them (each worker process has
  ;; its own copy).
  (let ((observer ((observe 'make-observer 'accounting) #:workers workers)))
    (cons (lambda (handler)
            ;; The loop tells the observer of a handler's exceptions
            ;; (its #:on-failure hook): no catching wrapper needed.
            ((observe 'observed-handler 'status) handler observer #:token token
             #:catch-errors? #f))
          ((observe 'observer->hooks 'accounting) observer))))

(define (main args)
  "Run the plucky command with ARGS, the command line."
  (let ((args (cdr args)))
    (cond
     ((null? args) (display (usage)))
     ((string=? (car args) "serve") (serve (cdr args)))
     ((string=? (car args) "static") (serve (cdr args) #t))
     ((string=? (car args) "bench") ((dev 'bench-command 'cli) (cdr args)))
     ((string=? (car args) "profile") ((dev 'profile-command 'cli) (cdr args)))
((string=? (car args) "routes")
      (exit ((module-ref (resolve-interface '(plucky web router)) 'routes-command)
             (cdr args)
             (lambda (file)
               (unless (file-exists? file) (fail "no such file: ~a" file))
               (fail-on-error 2 (lambda () (load-handler (canonicalize-path file))))))))
     ((member (car args) '("help" "--help" "-h")) (display (usage)))
     ((member (car args) '("version" "--version")) (format #t "plucky ~a~%" version))
     (else (fail "unknown command ~s (see plucky --help)" (car args))))))

;;; (plucky command) ends here
