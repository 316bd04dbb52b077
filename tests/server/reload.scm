;;; tests/server/reload.scm --- plucky serve --reload: reloads when files change

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `bin/plucky serve --reload' on an app file this test writes, which
;;; uses a module of its own (in a directory on the load path, beside
;;; it): edited in place, renamed over, its module edited, the next
;;; answers show the new text while a client hammering the server sees
;;; nothing but 200s; a file that does not read is logged with its line
;;; and the old code serves on, from the same workers, until it is
;;; fixed; a burst of saves is one reload; an idle master takes no CPU
;;; time.  The pieces alone: (plucky server reload)'s procedures.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 match)
             (ice-9 regex)
             (rnrs bytevectors)
             (web response)
             (plucky server reload)
             (tests lib harness)
             (tests lib server)
             (tests lib command)
             (tests lib hammer))

(test-begin "server/reload")

(define dir (temporary-directory))
(define app (string-append dir "/app.scm"))
(define module-file (string-append dir "/reloadtest/greeting.scm"))
(mkdir (string-append dir "/reloadtest"))

(define (app-text answer)
  ;; An app answering ANSWER and its module's greeting on /, its PID on /pid.
  (format #f "(add-to-load-path ~s)
(use-modules (web request) (web uri) (reloadtest greeting))
(define (handler request body)
  (values '((content-type . (text/plain)))
          (if (string=? (uri-path (request-uri request)) \"/pid\")
              (number->string (getpid))
              (string-append ~s \" \" (greeting)))))
handler
" dir answer))

(define (module-text greeting)
  (format #f "(define-module (reloadtest greeting) #:export (greeting))
(define (greeting) ~s)
" greeting))

(define (write-in-place file text)
  ;; as an editor that truncates and writes the file itself
  (call-with-output-file file (lambda (port) (display text port))))

(define (body-of port path)
  (let ((response body (http-get port path)))
    (and response (= 200 (response-code response)) (utf8->string body))))

(define (count-matches rx text)
  (length (list-matches rx text)))

(define (cpu-ticks pid)
  ;; -> utime + stime of PID, in clock ticks (/proc/PID/stat)
  (let* ((text (read-file (format #f "/proc/~a/stat" pid)))
         ;; after the command name in parentheses, fields 3 on
         (fields (string-tokenize (substring text (+ 2 (string-rindex text #\)))))))
    (+ (string->number (list-ref fields 11)) (string->number (list-ref fields 12)))))

(define-syntax-rule (with-reloading (plucky args ...) body ...)
  (call-guarded
   (lambda ()
     (call-with-plucky app (list "--port" "0" "--allow-root" "--reload" args ...)
       (lambda (plucky)
         (test-assert "listening" (plucky-port plucky))
         (when (plucky-port plucky)
           body ...))))))

(define (answers? port text)
  (wait-until (lambda () (equal? text (body-of port "/"))) #:timeout 15))

;;;
;;; The server
;;;

(write-file module-file (module-text "hello"))
(write-file app (app-text "version 1"))

(test-group "--reload: edits in place, renames over, a module's; no request fails"
  (with-reloading (plucky "--workers" "2")
    (let* ((port (plucky-port plucky))
           (hammer (start-hammer port 12)))
      (test-equal "before: version 1" "version 1 hello" (body-of port "/"))
      (write-in-place app (app-text "version 2"))
      (test-assert "written in place: the new answer appears"
        (answers? port "version 2 hello"))
      (test-assert "the master names the file"
        (string-contains (plucky-log plucky) (string-append "reload: " app " changed")))
      (write-file app (app-text "version 3"))
      (test-assert "renamed over: the new answer appears"
        (answers? port "version 3 hello"))
      (write-file module-file (module-text "world"))
      (test-assert "the module edited: its new code answers"
        (answers? port "version 3 world"))
      (test-assert "naming the module's file"
        (string-contains (plucky-log plucky)
                         (string-append "reload: " module-file " changed")))
      (match (hammer-results hammer 20)
        ((ok failed bodies failures)
         (test-assert "the hammering client made requests" (> ok 100))
         (test-equal "not one failed" '(0 ()) (list failed failures))
         (test-assert "it saw the versions"
           (lset<= string=? '("version 1 hello" "version 3 world") bodies)))
        (other (test-assert "the hammering client reported" #f))))))

(test-group "--reload: a file that does not read keeps the old code serving"
  (write-file module-file (module-text "hello"))
  (write-file app (app-text "version 1"))
  (with-reloading (plucky "--workers" "1")
    (let* ((port (plucky-port plucky))
           (pid (string->number (body-of port "/pid"))))
      (write-file app "(define (handler request body)\n  (values '() \"unbalanced\"\nhandler\n")
      (test-assert "the error is logged on one line, with the file and line"
        (wait-until (lambda ()
                      (string-match (string-append "reload: " (regexp-quote app)
                                                   ":[0-9]+:[0-9]+: [^\n]*; the old code keeps serving\n")
                                    (plucky-log plucky)))))
      (test-equal "the old code answers" "version 1 hello" (body-of port "/"))
      (test-equal "from the same worker: no reload started" pid
        (string->number (body-of port "/pid")))
      (test-assert "no new worker was started"
        (not (string-contains (plucky-log plucky) "reload: starting")))
      (write-file app (app-text "version 2"))
      (test-assert "fixed, it reloads" (answers? port "version 2 hello")))))

(test-group "--reload: a burst of saves is one reload; the idle master sleeps"
  (write-file app (app-text "version 1"))
  (with-reloading (plucky "--workers" "1")
    (let ((port (plucky-port plucky)))
      (for-each (lambda (i) (write-in-place app (app-text (format #f "burst ~a" i))))
                (iota 10))
      (test-assert "the last answer appears" (answers? port "burst 9 hello"))
      (test-assert "the new worker serves"
        (wait-until (lambda () (string-contains (plucky-log plucky) "reload: new workers"))))
      (test-equal "one reload" 1 (count-matches "reload: starting" (plucky-log plucky)))
      (test-equal "one line naming the file" 1
        (count-matches (regexp-quote (string-append "reload: " app " changed"))
                       (plucky-log plucky)))
      (let ((before (cpu-ticks (plucky-pid plucky))))
        (usleep 1000000)
        (test-assert "the master idles: under 3 ticks of CPU in a second"
          (< (- (cpu-ticks (plucky-pid plucky)) before) 3))))))

;;;
;;; The pieces
;;;

(test-group "call-recording-loads"
  (let ((value loaded (call-recording-loads (lambda () (load app)))))
    (test-assert "returns the thunk's value" (procedure? value))
    (test-assert "with the files loaded: the app's and its module's"
      (lset<= string=? (list app module-file) (map canonicalize-path loaded)))))

(test-group "open-reloader"
  (let* ((value loaded (call-recording-loads (lambda () (load app))))
         (reloader (open-reloader
                    app (append loaded
                                (list module-file
                                      (search-path %load-path "web/uri.scm")
                                      (search-path %load-path "plucky/server/loop.scm"))))))
    (test-equal "watches the app's files, not Guile's nor plucky's"
      (sort (list app module-file) string<?)
      (sort (reloader-files reloader) string<?))
    (close-reloader! reloader)
    (close-reloader! reloader)
    (test-assert "closing twice is harmless" #t)))

(test-group "reloader-settled?"
  (let* ((reloader (open-reloader app (list app)))
         (watch-fd (lambda () ((@@ (plucky server reload) reloader-fd) reloader)))
         (read! (lambda () ((@@ (plucky server reload) read-changes!) reloader))))
    (test-assert "nothing changed: #f" (not (reloader-settled? reloader)))
    (write-file (string-append dir "/unrelated.scm") "(")
    (test-assert "a file that is not the app's: no change"
      (begin (usleep 50000) (not (read!))))
    (write-file app "(oops")
    (test-assert "the app renamed over: a change" (wait-until read!))
    (test-assert "that does not read: #f" (not (reloader-settled? reloader)))
    (write-file app (app-text "version 1"))
    (wait-until read!)
    (test-assert "fixed: #t" (reloader-settled? reloader))
    (test-assert "then nothing pending: #f" (not (reloader-settled? reloader)))
    (delete-file app)
    (write-in-place app (app-text "version 2"))
    (test-assert "deleted and created again: a change" (wait-until read!))
    (test-assert "which reads: #t" (reloader-settled? reloader))
    (test-assert "the descriptor is open" (watch-fd))
    (close-reloader! reloader)))

(test-group "reload-changed-modules!"
  (load app)
  (let* ((value loaded (call-recording-loads (lambda () (load app))))
         (reloader (open-reloader app (cons module-file loaded)))
         (greeting (module-ref (resolve-interface '(reloadtest greeting)) 'greeting)))
    (test-equal "nothing changed: nothing reloaded" '() (reload-changed-modules! reloader))
    (write-file module-file (module-text "changed"))
    (wait-until (lambda () ((@@ (plucky server reload) read-changes!) reloader)))
    (test-equal "the changed module is reloaded" '((reloadtest greeting))
      (reload-changed-modules! reloader))
    (test-equal "its new code runs" "changed"
      ((module-ref (resolve-interface '(reloadtest greeting)) 'greeting)))
    (close-reloader! reloader)))

(remove-tree dir)

(test-end "server/reload")
