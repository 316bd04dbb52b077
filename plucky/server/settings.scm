;;; (plucky server settings) --- every setting of a server, declared once

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Each setting is declared once, below, as data: its name (which is
;;; both its flag, --NAME, and its keyword, #:NAME), its type and range,
;;; its default, its unit, the section of the help it is listed in, and
;;; its doc; as Warp's `defaultSettings' and Guile's `declare-header!'.
;;; A name carries its unit when it is not the obvious one
;;; (keep-alive-timeout-s, max-body-bytes); the names before the units
;;; were added stay as deprecated aliases.  From the declaration come:
;;;
;;;   `plucky serve --help'        `options-help' (plucky command)
;;;   the command line's values     `parse-options': a bad one is a
;;;                                 one-line message naming it
;;;   `run-server''s keywords       `keyword-settings' (plucky server)
;;;   the docs' option tables       (plucky dev options), checked by
;;;                                 tests/dev/options.scm
;;;
;;; SCOPE says who takes a setting: 'loop (the loop's settings,
;;; `make-loop-settings'), 'parse (the request head's limits,
;;; `make-parse-limits'), 'server (a keyword of `run-server'), 'command
;;; (`plucky serve' and `plucky static' only) or 'static (`plucky static'
;;; only).  A new option is one more `setting' in `settings', in the
;;; section its help goes in; a 'command or 'static one is then read by
;;; (plucky command) where it acts.
;;;
;;; Code:

(define-module (plucky server settings)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module ((ice-9 exceptions)
                #:select (raise-exception make-exception make-error
                          make-exception-with-message))
  #:use-module ((plucky http parse)
                #:select (%default-parse-limits parse-limits-max-request-line
                          parse-limits-max-header-bytes parse-limits-max-header-count))
  #:export (settings
            setting?
            setting-name
            setting-aliases
            setting-type
            setting-range
            setting-default
            setting-unit
            setting-section
            setting-doc
            setting-scope
            setting-metavar
            setting-repeatable?
            setting-optional?
            setting-default-text
            setting-flag
            setting-keyword
            find-setting
            default-of
            section-titles
            check-setting-value
            parse-options
            keyword-settings
            options-help))

(define-record-type <setting>
  (make-setting name aliases type range default unit section doc scope metavar
                repeatable? optional? default-text)
  setting?
  (name setting-name)                   ; symbol: --NAME and #:NAME
  (aliases setting-aliases)             ; deprecated names, symbols
  ;; 'integer (whole, within RANGE), 'string, 'flag (no value, #t when
  ;; given), or a list of the symbols allowed
  (type setting-type)
  (range setting-range)                 ; (LEAST MOST) for 'integer, else #f
  (default setting-default)             ; when not given; #f: none
  (unit setting-unit)                   ; "seconds", "bytes", … or #f
  (section setting-section)             ; symbol: a key of `section-titles'
  (doc setting-doc)                     ; the help's text, after the flag
  (scope setting-scope)                 ; who takes it: see the commentary
  (metavar setting-metavar)             ; the value's name in the help
  (repeatable? setting-repeatable?)     ; each given value kept, in order
  (optional? setting-optional?)         ; #f is a value (no such thing)
  ;; the default as the help says it, when not the value itself
  (default-text setting-default-text))

(define* (setting name #:key (aliases '()) (type 'integer) (range #f) (default #f)
                  (unit #f) section doc (scope 'command) (metavar #f)
                  (repeatable? #f) (optional? #f) (default-text #f))
  (make-setting name aliases type range default unit section doc scope
                (or metavar
                    (cond ((eq? type 'flag) #f)
                          ((equal? unit "seconds") "S")
                          ((equal? unit "bytes") "BYTES")
                          ((eq? type 'integer) "N")
                          ((pair? type) "FORMAT")
                          (else "VALUE")))
                repeatable? optional? default-text))

(define (setting-flag s)
  "Return the command-line flag of S, \"--NAME\"."
  (string-append "--" (symbol->string (setting-name s))))

(define (setting-keyword s)
  "Return the keyword of S, #:NAME."
  (symbol->keyword (setting-name s)))

(define section-titles
  ;; the help's sections, in order: (KEY . TITLE)
  '((where . "Options of serve — where:")
    (how . "How:")
    (logs . "Logs:")
    (status . "Status:")
    (limits . "Limits:")
    (files . "Files (static only):")))

;; Timeouts and the grace period stop at a day; the parse limits at what
;; `make-parse-limits' takes.  A value out of range is refused, never
;; wrapped or raised to the least: the port would wrap modulo 65536.
(define day 86400)

(define settings
  (list
   ;; where
   (setting 'host #:type 'string #:default "127.0.0.1" #:section 'where #:scope 'server
            #:metavar "HOST"
            #:doc "address to listen on: a name, an IPv4 or IPv6 address (\"::\" for all \
of both), or unix:PATH for a Unix-domain socket")
   (setting 'port #:range '(0 65535) #:default 8080 #:section 'where #:scope 'server
            #:metavar "PORT" #:doc "TCP port; 0 picks a free one")
   (setting 'listen #:type 'string #:section 'where #:repeatable? #t #:metavar "ADDRESS"
            #:doc "instead of --host and --port, and repeatable: HOST:PORT, [IPV6]:PORT \
or unix:PATH, with tls: before it for HTTPS there (--tls-cert), e.g. --listen :8080 \
--listen tls::8443 (HOST empty: 127.0.0.1)")
   (setting 'fd #:range `(0 ,(- (expt 2 31) 1)) #:section 'where
            #:doc "serve the listening socket inherited as descriptor N instead of \
opening one")
   (setting 'inetd #:type 'flag #:section 'where
            #:doc "serve the one connection on standard input and output, then exit \
(inetd, systemd Accept=yes)")
   (setting 'tls-cert #:type 'string #:section 'where #:repeatable? #t #:metavar "FILE"
            #:doc "speak HTTPS with the certificate (and chain) in FILE")
   (setting 'tls-key #:type 'string #:section 'where #:repeatable? #t #:metavar "FILE"
            #:doc "and its private key (PEM); repeat the pair for several names: the \
client's SNI chooses")
   (setting 'tls-ocsp #:type 'string #:section 'where #:repeatable? #t #:metavar "FILE"
            #:doc "staple the OCSP response in FILE (DER) for the --tls-cert given before it")
   (setting 'tls-session-lifetime-s #:aliases '(tls-session-lifetime) #:range `(1 ,(* 7 day))
            #:default 3600 #:unit "seconds" #:section 'where
            #:doc "seconds a TLS session can be resumed, by ticket or session ID; the key \
of the tickets changes every 3 S")
   (setting 'hsts-max-age-s #:aliases '(hsts) #:range `(0 ,(* 2 366 day)) #:unit "seconds"
            #:section 'where
            #:doc "with --tls-cert: Strict-Transport-Security, max-age S seconds, on \
every response")
   (setting 'redirect-https #:range '(1 65535) #:section 'where #:metavar "PORT"
            #:doc "answer every request with a 301 to the same URL over https on PORT \
(a plain-HTTP server beside an HTTPS one; with --listen, on its addresses without tls:)")
   ;; how
   (setting 'workers #:range '(1 1024) #:default 1 #:section 'how #:scope 'server
            #:default-text "one per CPU under plucky serve, 1 under run-server"
            #:doc "worker processes; a master process replaces any that dies; with 1 \
there is no master: the process serves itself")
   (setting 'grace-s #:aliases '(grace) #:range `(0 ,day) #:default 30 #:unit "seconds"
            #:section 'how #:scope 'server
            #:doc "seconds to finish the requests in flight when stopping or reloading")
   (setting 'health-path #:type 'string #:section 'how #:scope 'server #:metavar "PATH"
            #:doc "answer PATH (e.g. /_plucky/health) in the server, for a load \
balancer's health checks: 200 while serving, 503 from SIGTERM on; the app never sees it")
   (setting 'drain-delay-s #:range `(0 ,day) #:default 0 #:unit "seconds" #:section 'how
            #:scope 'server
            #:doc "after SIGTERM, seconds to accept and answer on (every answer with \
Connection: close, --health-path saying 503) before draining: longer than a load \
balancer takes to see the host down")
   (setting 'handler-timeout-s #:aliases '(handler-timeout) #:range `(0 ,day) #:default 30
            #:unit "seconds" #:section 'how #:scope 'server #:optional? #t
            #:doc "a handler call past S seconds ends in a 503; one blocked in C gets \
its worker replaced (0: no limit)")
   (setting 'gc-free-space-divisor #:range '(1 100) #:section 'how #:scope 'server
            #:metavar "N" #:default-text "1 (GC_FREE_SPACE_DIVISOR if set)"
            #:doc "collect once the memory allocated since the last collection reaches \
the heap the collector marks divided by N: 1 collects least often, for a heap up to \
about twice the live data; 3 (libgc's own default) keeps the resident memory lower \
for about three times the collections, each as long (bench/rss)")
   (setting 'user #:type 'string #:section 'how #:scope 'server #:metavar "USER"
            #:doc "after binding as root, serve as USER; the workers switch before they \
load FILE")
   (setting 'group #:type 'string #:section 'how #:scope 'server #:metavar "GROUP"
            #:doc "with --user: this group instead of USER's")
   (setting 'allow-root #:type 'flag #:section 'how
            #:doc "serve requests as root (refused otherwise)")
   (setting 'reload #:type 'flag #:section 'how
            #:doc "for development: reload (as on SIGHUP) when FILE or a file it loaded \
changes — the Scheme files of the app, not Guile's or plucky's; a file that does not \
read is logged and the old code serves on (not with static, --inetd or --user)")
   ;; logs
   (setting 'access-log #:type 'string #:section 'logs #:scope 'server #:metavar "FILE"
            #:default-text "none"
            #:doc "a line per request to FILE, or - for standard output")
   ;; combined, not common: it adds the Referer and the User-Agent, which
   ;; is what nginx and Apache log by default and what log analysers
   ;; expect, and it was already what `plucky serve' wrote.
   (setting 'log-format #:type '(common combined json) #:default 'combined #:section 'logs
            #:scope 'server #:doc "common, combined or json")
   (setting 'error-log #:type 'string #:section 'logs #:scope 'server #:metavar "FILE"
            #:doc "messages and backtraces to FILE instead of standard error")
   ;; status
   (setting 'status #:type 'flag #:section 'status
            #:doc "serve /_plucky/status (a page with charts), /_plucky/metrics \
(Prometheus) and /_plucky/status.json, to loopback clients only, and account for \
requests (plucky observe)")
   (setting 'status-token #:type 'string #:section 'status #:metavar "T"
            #:doc "serve them to any client that gives ?token=T or Authorization: \
Bearer T, and only to those")
   ;; limits
   (setting 'max-body-bytes #:aliases '(max-body) #:range `(0 ,(expt 2 40))
            #:default (* 64 1024 1024) #:unit "bytes" #:section 'limits #:scope 'loop
            #:doc "largest request body accepted, else 413")
   (setting 'max-connections #:range `(1 ,(expt 2 20)) #:default 10000 #:section 'limits
            #:scope 'loop #:doc "open connections per worker")
   (setting 'max-threads #:range '(1 1024) #:default 32 #:section 'limits #:scope 'loop
            #:doc "threads per worker for `blocking` calls and for streamed answers \
marked stream-on-thread; more wait (bodies read as ports take none)")
   (setting 'keep-alive-timeout-s #:aliases '(keep-alive-timeout) #:range `(0 ,day)
            #:default 60 #:unit "seconds" #:section 'limits #:scope 'loop
            #:doc "seconds an idle connection is kept")
   (setting 'header-timeout-s #:aliases '(header-timeout) #:range `(1 ,day) #:default 10
            #:unit "seconds" #:section 'limits #:scope 'loop
            #:doc "seconds a client has to send a request head, else 408")
   (setting 'body-timeout-s #:aliases '(body-timeout) #:range `(1 ,day) #:default 30
            #:unit "seconds" #:section 'limits #:scope 'loop
            #:doc "seconds a request body may stall, else 408")
   (setting 'write-timeout-s #:aliases '(write-timeout) #:range `(1 ,day) #:default 30
            #:unit "seconds" #:section 'limits #:scope 'loop
            #:doc "seconds a response may stall, else the connection closes")
   (setting 'max-request-line-bytes #:aliases '(max-request-line) #:range `(1 ,(expt 2 28))
            #:default (parse-limits-max-request-line %default-parse-limits) #:unit "bytes"
            #:section 'limits #:scope 'parse #:doc "longest request line, else 414")
   (setting 'max-header-bytes #:range `(1 ,(expt 2 28))
            #:default (parse-limits-max-header-bytes %default-parse-limits) #:unit "bytes"
            #:section 'limits #:scope 'parse #:doc "largest header block, else 431")
   (setting 'max-header-count #:range `(1 ,(expt 2 28))
            #:default (parse-limits-max-header-count %default-parse-limits)
            #:section 'limits #:scope 'parse #:doc "most header fields, else 431")
   ;; files
   (setting 'listing #:type 'flag #:section 'files #:scope 'static
            #:doc "list a directory that has no index.html")
   (setting 'dotfiles #:type 'flag #:section 'files #:scope 'static
            #:doc "serve names that begin with a dot")
   (setting 'follow-symlinks #:type 'flag #:section 'files #:scope 'static
            #:doc "serve symlinks that lead out of DIR")
   (setting 'cache-control #:type 'string #:section 'files #:scope 'static #:metavar "V"
            #:doc "the Cache-Control of every file, as \"public, max-age=3600\" (default: none)")))

(define (find-setting name)
  "Return the setting named NAME (a symbol), or whose deprecated alias
NAME is, or #f."
  (or (find (lambda (s) (eq? (setting-name s) name)) settings)
      (find (lambda (s) (memq name (setting-aliases s))) settings)))

(define (default-of name)
  "Return the default of the setting NAME."
  (setting-default (find-setting name)))

;;;
;;; Values
;;;

(define (setting-takes s)
  ;; -> what S takes, as a message says it
  (let ((type (setting-type s))
        (range (setting-range s)))
    (cond
     ((and (eq? type 'integer) range)
      (format #f "a whole number from ~a to ~a" (car range) (cadr range)))
     ((eq? type 'integer) "a whole number")
     ((eq? type 'string) "a string")
     ((eq? type 'flag) "#t or #f")
     (else (string-join (map symbol->string type) ", ")))))

(define (check-setting-value s value)
  "Return #f if VALUE is one the setting S takes, else a phrase saying
what S takes, for a message that names VALUE."
  (let ((type (setting-type s))
        (range (setting-range s)))
    (and (not (or (and (not value) (setting-optional? s))
                  (case type
                    ((integer) (and (exact-integer? value)
                                    (or (not range) (<= (car range) value (cadr range)))))
                    ((string) (string? value))
                    ((flag) #t)
                    (else (and (memq value type) #t)))))
         (setting-takes s))))

(define (text->value s text)
  ;; -> the value of S that the command line's TEXT says, or #f
  (let ((type (setting-type s)))
    (cond
     ((eq? type 'integer) (string->number text 10))
     ((pair? type) (let ((v (string->symbol text))) (and (memq v type) v)))
     (else text))))

(define (flag->setting flag)
  (and (string-prefix? "--" flag)
       (find-setting (string->symbol (substring flag 2)))))

(define* (parse-options args fail #:key (scopes '(loop parse server command static))
                        (help #f))
  "Return two values: the positional arguments of ARGS (command-line
strings), in order, and an alist (NAME . VALUE) of the settings given,
NAME a setting's name (an alias is taken for its setting), VALUE typed
(a whole number, a string, a symbol, #t for a flag; a list, in order,
for a repeatable one).  Only settings whose scope is in SCOPES are
taken.  A bad option or value calls (FAIL FORMAT ARG …), a one-line
message that names it, which must not return.  -h or --help calls HELP."
  (let lp ((args args) (positional '()) (options '()))
    (cond
     ((null? args)
      (values (reverse positional)
              (map (lambda (o)
                     (if (setting-repeatable? (find-setting (car o)))
                         (cons (car o) (reverse (cdr o)))
                         o))
                   (reverse options))))
     ((and help (member (car args) '("-h" "--help"))) (help))
     ((string-prefix? "-" (car args))
      (let* ((flag (car args))
             (s (flag->setting flag)))
        (unless (and s (memq (setting-scope s) scopes))
          (fail "unknown option ~a (see --help)" flag))
        (if (eq? (setting-type s) 'flag)
            (lp (cdr args) positional (acons (setting-name s) #t options))
            (begin
              (when (null? (cdr args))
                (fail "~a needs a value" flag))
              (let* ((text (cadr args))
                     (value (text->value s text))
                     (wrong (if value (check-setting-value s value) (setting-takes s))))
                (when wrong
                  (fail "~a expects ~a, not ~s" flag wrong text))
                (lp (cddr args) positional
                    (if (setting-repeatable? s)
                        (let ((before (or (assq-ref options (setting-name s)) '())))
                          (acons (setting-name s) (cons value before)
                                 (alist-delete (setting-name s) options eq?)))
                        (acons (setting-name s) value
                               (alist-delete (setting-name s) options eq?)))))))))
     (else (lp (cdr args) (cons (car args) positional) options)))))

(define (setting-error fmt . args)
  ;; raise an error whose message is FMT with ARGS, on one line
  (raise-exception (make-exception (make-error)
                                   (make-exception-with-message (apply format #f fmt args)))))

(define* (keyword-settings who args #:key (scopes '(loop parse server)) (except '()))
  "Return a procedure of a setting's name that gives its value in ARGS,
a list of keyword arguments (#:NAME VALUE …, deprecated aliases
included), or its default.  Keywords in EXCEPT (plumbing the caller
takes itself) are skipped; any other that names no setting of SCOPES, or
a value the setting does not take, raises an error that names WHO (a
symbol: the procedure called), the keyword and the value."
  (let lp ((rest args) (given '()))
    (cond
     ((null? rest)
      (lambda (name)
        (let ((s (find-setting name)))
          (unless s (error "no such setting:" name))
          (let ((found (assq (setting-name s) given)))
            (if found (cdr found) (setting-default s))))))
     ((or (not (keyword? (car rest))) (null? (cdr rest)))
      (setting-error "~a: expected #:KEYWORD VALUE, got ~s" who (car rest)))
     ((memq (car rest) except) (lp (cddr rest) given))
     (else
      (let* ((keyword (car rest))
             (value (cadr rest))
             (s (find-setting (keyword->symbol keyword))))
        (unless (and s (memq (setting-scope s) scopes))
          (setting-error "~a: unknown keyword #:~a" who (keyword->symbol keyword)))
        (let ((wrong (check-setting-value s value)))
          (when wrong
            (setting-error "~a: #:~a expects ~a, not ~s" who
                           (keyword->symbol keyword) wrong value)))
        (lp (cddr rest) (acons (setting-name s) value given)))))))

;;;
;;; Help
;;;

(define (wrap text width)
  ;; -> TEXT's words in lines of at most WIDTH characters
  (let lp ((words (string-tokenize text)) (line "") (lines '()))
    (cond
     ((null? words) (reverse (if (string-null? line) lines (cons line lines))))
     ((string-null? line) (lp (cdr words) (car words) lines))
     ((> (+ (string-length line) 1 (string-length (car words))) width)
      (lp words "" (cons line lines)))
     (else (lp (cdr words) (string-append line " " (car words)) lines)))))

(define (default-phrase s)
  ;; -> "default …" as the help says it, or #f
  (let ((text (setting-default-text s))
        (default (setting-default s)))
    (cond
     (text (string-append "default: " text))
     ((or (not default) (eq? (setting-type s) 'flag)) #f)
     (else (format #f "default ~a" default)))))

(define (options-help names)
  "Return the help's lines, as one string, of the settings NAMES (in that
order): the flag and its value's name in a column, the doc and the
default wrapped beside it."
  (string-concatenate
   (map (lambda (name)
          (let* ((s (find-setting name))
                 (head (string-append "  " (setting-flag s)
                                      (if (setting-metavar s)
                                          (string-append " " (setting-metavar s))
                                          "")))
                 (default (default-phrase s))
                 (doc (if default
                          (string-append (setting-doc s) " (" default ")")
                          (setting-doc s)))
                 (lines (wrap doc 48))
                 (column 25))
            (string-append
             (if (< (string-length head) (- column 1))
                 (string-append (string-pad-right head column) (car lines) "\n")
                 (string-append head "\n" (make-string column #\space) (car lines) "\n"))
             (string-concatenate
              (map (lambda (line) (string-append (make-string column #\space) line "\n"))
                   (cdr lines))))))
        names)))

;;; (plucky server settings) ends here
