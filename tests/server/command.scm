;;; tests/server/command.scm --- bin/plucky, the command

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Runs bin/plucky as a user would: --help, bad arguments, and `serve'
;;; of the apps on port 0, reading the chosen port from the "listening
;;; on" line the command writes to standard error, then fetching pages
;;; with curl.  Every process is started here, waited for with a bound,
;;; and stopped by its PID.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (tests lib harness)
             (tests lib server)
             (ice-9 rdelim)
             (ice-9 regex)
             (ice-9 format)
             ((plucky server settings) #:select (settings setting-flag setting-aliases
                                                 setting-range)))

(test-begin "server/command")

;;;
;;; Helpers
;;;

(define root
  ;; the source tree: tests/lib/harness.scm is found from the load path
  (dirname (dirname (dirname (search-path %load-path "tests/lib/harness.scm")))))

(define plucky (string-append root "/bin/plucky"))

;; plucky serve refuses to serve as root unless told to; the tests may
;; run as root.
(define allow-root (if (zero? (geteuid)) '("--allow-root") '()))
(define (app name) (string-append root "/apps/" name))

;; Run PROGRAM with ARGS to completion (at most TIMEOUT seconds).
;; -> (values exit-status stdout stderr); exit-status #f if it had to be
;; stopped.
(define* (run program args #:key (timeout 30))
  (let* ((process (spawn program args))
         (deadline (+ (now-seconds) timeout))
         (out (read-all-before (process-stdout process) deadline))
         (err (read-all-before (process-stderr process) deadline))
         (status (process-wait process #:timeout (max 0.1 (- deadline (now-seconds))))))
    (if status
        (begin
          (close-port (process-stdout process))
          (close-port (process-stderr process))
          (values (status:exit-val status) out err))
        (begin
          (process-stop process)
          (values #f out err)))))

(define listening-rx (make-regexp "listening on http://127\\.0\\.0\\.1:([0-9]+)/"))

;; Start `plucky serve FILE ARGS…' on port 0 and read the port it chose.
;; -> (values process port), port #f if no listening line came within
;; the bound (the process is then stopped already).
(define* (serve file #:optional (args '()) #:key (timeout 30))
  (let* ((process (spawn plucky (append (list "serve" file "--port" "0") allow-root args)))
         (deadline (+ (now-seconds) timeout)))
    (let lp ((seen '()))
      (let ((line (read-line-before (process-stderr process) deadline)))
        (cond
         ((not (string? line))
          (process-stop process)
          (format #t "plucky serve ~a wrote no listening line; stderr:~%~a~%"
                  file (string-join (reverse seen) "\n"))
          (values process #f))
         ((regexp-exec listening-rx line)
          => (lambda (m) (values process (string->number (match:substring m 1)))))
         (else (lp (cons line seen))))))))


;; Run BODY with PROCESS and PORT bound to a `plucky serve' of FILE;
;; stop it afterwards and check that SIGTERM was enough.
(define-syntax-rule (with-serve (process port file args ...) body ...)
  (call-guarded
   (lambda ()
     (let ((process port (serve file (list args ...))))
       (test-assert (string-append "serve " (basename file) ": listening line with the port")
         port)
       (when port
         (dynamic-wind
           (lambda () #t)
           (lambda () body ...)
           (lambda ()
             (let ((status killed? (process-stop process)))
               (test-equal (string-append "serve " (basename file) ": SIGTERM stops it, exit 0")
                 '(0 #f)
                 (list (status:exit-val status) killed?))))))))))

;; curl URL -> (values exit-status output), headers included (-i)
(define (curl . args)
  (let ((status out err (apply run "curl" (list (append '("-s" "-S" "-i" "--max-time" "10")
                                                         args)))))
    (values status out)))

(define (curl-body output)
  ;; the part of curl -i output after the blank line
  (let ((i (string-contains output "\r\n\r\n")))
    (if i (substring output (+ i 4)) output)))

(define (url port path) (format #f "http://127.0.0.1:~a~a" port path))

(define curl-user-agent
  ;; "curl/7.88.1", from the first line of curl --version
  (let ((status out err (run "curl" '("--version"))))
    (string-append "curl/" (cadr (string-split (car (string-split out #\newline)) #\space)))))

;;;
;;; --help and arguments
;;;

(define option-rx (make-regexp "--[a-z][a-z-]*"))

(define (options-in text)
  (delete-duplicates (map match:substring (list-matches option-rx text))))

(test-group "--help"
  (let ((status out err (run plucky '("--help"))))
    (test-equal "exits 0" 0 status)
    (test-assert "prints the usage" (string-prefix? "Usage: plucky" out))
    (test-assert "mentions serve" (string-contains out "serve FILE"))
    (let ((documented (options-in out))
          ;; --help: `plucky bench --help' is mentioned, and accepted
          ;; and the deprecated names, listed as such
          (accepted (cons "--help"
                          (append-map (lambda (s)
                                        (cons (setting-flag s)
                                              (map (lambda (a) (format #f "--~a" a))
                                                   (setting-aliases s))))
                                      settings))))
      (test-equal "every option serve accepts is documented" '()
        (lset-difference string=? accepted documented))
      (test-equal "every documented option is accepted" '()
        (lset-difference string=? documented accepted))))
  (let ((status out err (run plucky '("serve" "--help"))))
    (test-equal "serve --help exits 0 too" 0 status)
    (test-assert "with the usage" (string-prefix? "Usage: plucky" out)))
  (let ((status out err (run plucky '("help"))))
    (test-equal "help exits 0" 0 status)))

(test-group "version"
  (let ((status out err (run plucky '("version"))))
    (test-equal "exits 0" 0 status)
    (test-assert "prints plucky and a version" (string-match "^plucky [0-9]+\\.[0-9]+" out))))

(test-group "bad arguments exit 2 with a message"
  (let ((status out err (run plucky (list "serve" (app "hello.scm") "--bogus"))))
    (test-equal "unknown option: exit 2" 2 status)
    (test-assert "names it" (string-contains err "--bogus")))
  (let ((status out err (run plucky '("frobnicate"))))
    (test-equal "unknown command: exit 2" 2 status)
    (test-assert "names it" (string-contains err "frobnicate")))
  (let ((status out err (run plucky (list "serve" (app "hello.scm") "--port"))))
    (test-equal "option without its value: exit 2" 2 status)
    (test-assert "says so" (string-contains err "--port")))
  (let ((status out err (run plucky (list "serve" (app "hello.scm") "--port" "eighty"))))
    (test-equal "a value that is not a number: exit 2" 2 status)
    (test-assert "quotes it" (string-contains err "eighty")))
  (let ((status out err (run plucky (list "serve" (app "hello.scm") "--workers" "-1"))))
    (test-equal "a negative number: exit 2" 2 status))
  (let ((status out err (run plucky '("serve"))))
    (test-equal "serve without a file: exit 2" 2 status))
  (let ((status out err (run plucky (list "serve" (app "hello.scm") (app "headers.scm")))))
    (test-equal "two files: exit 2" 2 status))
  (let ((status out err (run plucky '("serve" "/nonexistent/app.scm" "--port" "0"))))
    (test-equal "a missing file: exit 2" 2 status)
    (test-assert "names it" (string-contains err "/nonexistent/app.scm"))))

(test-group "options that do not fit together exit 2 with a message"
  (define (refused args says)
    (let ((status out err (run plucky (append (list "serve" (app "hello.scm") "--port" "0")
                                              allow-root args))))
      (test-equal (string-append (string-join args " ") ": exit 2") 2 status)
      (test-assert (string-append (string-join args " ") ": says " says)
        (string-contains err says))))
  (refused '("--log-format" "xml") "--log-format")
  (refused '("--group" "nogroup") "--group needs --user")
  (refused '("--host" "unix:") "--host")
  (refused '("--inetd" "--access-log" "-") "--access-log")
  (refused '("--user" "no-such-user-here") "no such user: no-such-user-here")
  (refused '("--fd" "x") "--fd")
  (refused '("--reload" "--inetd") "--reload needs a master process")
  (refused '("--reload" "--user" "nobody") "--reload needs the master to load the app")
  (let ((status out err (run plucky (append (list "static" (string-append root "/apps")
                                                  "--port" "0" "--reload")
                                            allow-root))))
    (test-equal "static --reload: exit 2" 2 status)
    (test-assert "static --reload: says why, on one line"
      (and (string-contains err "--reload is for serve")
           (not (string-index (string-trim-right err) #\newline))))))

(test-group "a numeric option out of its range exits 2, naming it and the value"
  ;; Each bound of each numeric option, one past it: never wrapped (a
  ;; port of 99999 served 34463) nor raised to the least (--workers 0
  ;; ran one).  "--port 0" first, so that a value let through would not
  ;; take a real port: the last of an option given twice counts.
  (define (refused name value)
    (let ((status out err (run plucky (append (list "serve" (app "hello.scm") "--port" "0")
                                              allow-root (list name value))
                               #:timeout 10)))
      (test-equal (string-append name " " value ": exit 2") 2 status)
      (test-assert (string-append name " " value ": one line naming both")
        (and (string-contains err name)
             (string-contains err (string-append "\"" value "\""))
             (not (string-index (string-trim-right err) #\newline))))))
  (for-each (lambda (option)
              (let ((name (car option)) (least (cadr option)) (most (caddr option)))
                (refused name (number->string (- least 1)))
                (refused name (number->string (+ most 1)))))
            (filter-map (lambda (s)
                          (and (setting-range s)
                               (cons (setting-flag s) (setting-range s))))
                        settings))
  (refused "--port" "99999")
  (refused "--workers" "0")
  (refused "--max-threads" "0")
  (refused "--grace" "1.5"))

(test-group "an address that cannot be served exits 2, naming it"
  (define (refused host says)
    (let ((status out err (run plucky (append (list "serve" (app "hello.scm") "--port" "0"
                                                    "--host" host)
                                              allow-root)
                               #:timeout 10)))
      (test-equal (string-append host ": exit 2") 2 status)
      (test-assert (string-append host ": says " says) (string-contains err says))))
  (refused "no-such-host.invalid" "no-such-host.invalid:0: unknown host")
  ;; an address of no interface of this machine (TEST-NET-1, RFC 5737)
  (refused "192.0.2.1" "192.0.2.1:0: "))

(test-group "serve of a file that is not a handler"
  (let ((file (let* ((port (mkstemp! (string-copy "/tmp/plucky-test-app-XXXXXX")))
                     (name (port-filename port)))
                (display "(define answer 42)\n\"the last expression is a string\"\n" port)
                (close-port port)
                name)))
    (let ((status out err (run plucky (append (list "serve" file "--port" "0") allow-root)
                               #:timeout 30)))
      (test-assert "exits non-zero" (and status (not (zero? status))))
      (test-assert "names the file" (string-contains err file))
      (test-assert "says a handler procedure was expected"
        (string-contains err "handler procedure"))
      (test-assert "shows what it got" (string-contains err "the last expression is a string"))
      (test-assert "does not start listening" (not (string-contains err "listening on"))))
    (delete-file file)))

;;;
;;; serve
;;;

(test-group "serve apps/hello.scm"
  (with-serve (process port (app "hello.scm"))
    (let ((status out (curl (url port "/"))))
      (test-equal "curl succeeds" 0 status)
      (test-assert "200" (string-prefix? "HTTP/1.1 200 OK\r\n" out))
      (test-equal "Hello, World!" "Hello, World!" (curl-body out))
      (test-assert "text/plain;charset=utf-8"
        (string-contains out "Content-Type: text/plain;charset=utf-8\r\n")))
    (let ((status out (curl "--http1.0" (url port "/"))))
      (test-equal "HTTP/1.0 too" "Hello, World!" (curl-body out)))
    (let ((status out (curl (url port "/") (url port "/again"))))
      (test-equal "two URLs on one curl connection" 2
        (length (list-matches "Hello, World!" out))))))

(test-group "serve apps/headers.scm"
  (with-serve (process port (app "headers.scm"))
    (let* ((status out (curl "-H" "X-Test-Header: marker-1234" (url port "/some/path?q=1")))
           (body (curl-body out)))
      (test-equal "curl succeeds" 0 status)
      (test-assert "HTML" (string-contains out "Content-Type: text/html;charset=utf-8\r\n"))
      (test-assert "a doctype" (string-prefix? "<!DOCTYPE html>" body))
      (test-assert "a <table>" (string-contains body "<table"))
      (test-assert "a user-agent row with curl's user agent"
        (string-match (string-append "<td><tt>user-agent</tt></td><td><tt>[^<]*"
                                     (regexp-quote curl-user-agent))
                      body))
      (test-assert "our own header" (string-contains body "marker-1234"))
      (test-assert "the request target" (string-contains body "/some/path?q=1")))))

(test-group "serve apps/demo.scm"
  ;; The demo's data (the news site's SQLite file, the blog's repository)
  ;; goes to a directory of the test's, made and seeded at the start.
  (let ((data (mkdtemp (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-demo-XXXXXX"))))
    (setenv "PLUCKY_DATA" data)
    (with-serve (process port (app "demo.scm"))
      (test-assert "/ is the landing page, linking to the apps"
        (let ((status out (curl (url port "/"))))
          (and (string-contains out "<h1>plucky")
               (string-contains out "href=\"/news/\"")
               (string-contains out "href=\"/blog/\""))))
      (test-assert "/news/ is the news site's front page, seeded"
        (let ((status out (curl (url port "/news/"))))
          (and (string-prefix? "HTTP/1.1 200" out)
               (= 30 (length (list-matches "class=\"athing\"" out))))))
      (test-assert "/blog/ is the blog's index"
        (let ((status out (curl (url port "/blog/"))))
          (string-prefix? "HTTP/1.1 200" out)))
      (test-equal "/hello is hello" "Hello, World!"
        (let ((status out (curl (url port "/hello")))) (curl-body out)))
      (test-assert "/headers is the table"
        (let ((status out (curl (url port "/headers")))) (string-contains out "<table")))
      (test-assert "anything else is a 404"
        (let ((status out (curl (url port "/nowhere"))))
          (string-prefix? "HTTP/1.1 404" out))))
    (unsetenv "PLUCKY_DATA")
    (system* "rm" "-rf" data)))

(test-group "serve with every option"
  (with-serve (process port (app "hello.scm")
                       "--host" "127.0.0.1" "--workers" "1" "--max-body" "10"
                       "--max-connections" "50" "--keep-alive-timeout" "5"
                       "--header-timeout" "5" "--body-timeout" "5" "--write-timeout" "5"
                       "--max-request-line" "100" "--max-header-bytes" "4096"
                       "--max-header-count" "5")
    (test-equal "still serves" "Hello, World!"
      (let ((status out (curl (url port "/")))) (curl-body out)))
    (test-assert "--max-body: 11 bytes is a 413"
      (let ((status out (curl "--data-binary" "12345678901" (url port "/"))))
        (string-prefix? "HTTP/1.1 413" out)))
    (test-assert "--max-request-line: a long target is a 414"
      (let ((status out (curl (url port (string-append "/" (make-string 200 #\a))))))
        (string-prefix? "HTTP/1.1 414" out)))
    (test-assert "--max-header-count: 6 fields is a 431"
      ;; curl sends Host, User-Agent and Accept
      (let ((status out (curl "-H" "X-A: 1" "-H" "X-B: 2" "-H" "X-C: 3" (url port "/"))))
        (string-prefix? "HTTP/1.1 431" out)))))

(test-group "static DIR"
  (let ((status out err (run plucky '("static" "/nonexistent-plucky-dir"))))
    (test-equal "no such directory: exit 2" 2 status)
    (test-assert "names it" (string-contains err "/nonexistent-plucky-dir")))
  (let ((status out err (run plucky (list "serve" (app "hello.scm") "--listing"))))
    (test-equal "a static option given to serve: exit 2" 2 status))
  ;; issue 25 (n): plucky static had no --cache-control
  (let ((status out err (run plucky (list "serve" (app "hello.scm") "--cache-control" "no-cache"))))
    (test-equal "--cache-control given to serve: exit 2" 2 status))
  (let ((status out err (run plucky '("static" "/tmp" "--cache-control" "max-age=soon"))))
    (test-equal "--cache-control that does not read: exit 2" 2 status)
    (test-assert "names the value, on one line"
      (and (string-contains err "\"max-age=soon\"")
           (= 1 (length (filter (lambda (line) (string-prefix? "plucky:" line))
                                (string-split err #\newline)))))))
  (let ((dir (mkdtemp (string-copy "/tmp/plucky-static-command-XXXXXX"))))
    (call-with-output-file (string-append dir "/hello.txt")
      (lambda (port) (display "static hello\n" port)))
    (mkdir (string-append dir "/sub"))
    (let* ((process (spawn plucky (append (list "static" dir "--port" "0" "--workers" "1"
                                                "--listing" "--access-log" "-"
                                                "--cache-control" "public, max-age=600")
                                          allow-root)))
           (deadline (+ (now-seconds) 30))
           (port (let lp ()
                   (let ((line (read-line-before (process-stderr process) deadline)))
                     (cond
                      ((not (string? line)) #f)
                      ((regexp-exec listening-rx line)
                       => (lambda (m) (string->number (match:substring m 1))))
                      (else (lp)))))))
      (test-assert "listening" port)
      (when port
        (test-equal "serves a file" "static hello"
          (let ((status out (curl (url port "/hello.txt")))) (curl-body out)))
        (test-assert "--listing: lists a directory"
          (let ((status out (curl (url port "/sub/")))) (string-prefix? "HTTP/1.1 200" out)))
        (test-assert "--cache-control: on a file"
          (let ((status out (curl (url port "/hello.txt"))))
            (string-contains out "\r\nCache-Control: public, max-age=600\r\n")))
        (test-assert "a missing file: 404"
          (let ((status out (curl (url port "/nope")))) (string-prefix? "HTTP/1.1 404" out)))
        (test-assert "--access-log: a line per request"
          (let ((line (read-line-before (process-stdout process) (+ (now-seconds) 10))))
            (and (string? line) (string-contains line "GET /hello.txt")))))
      (process-stop process))
    (system* "rm" "-rf" dir)))

(test-end "server/command")
