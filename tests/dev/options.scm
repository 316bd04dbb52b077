;;; tests/dev/options.scm --- settings declared once: parsing, keywords, docs

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; (plucky server settings) is the one declaration of the settings; the
;;; command line's parsing, `run-server''s keywords, `plucky --help' and
;;; the docs' tables are made from it.  Here: the parsing and the
;;; keywords against each setting's range, the deprecated names, and the
;;; docs' tables against the declaration (stale when someone changed one
;;; without the other: `write-tables!' of (plucky dev options) mends it).
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 textual-ports)
             ((ice-9 control) #:select (let/ec))
             (tests lib harness)
             (tests lib command)
             (plucky server settings)
             (plucky dev options))

(test-begin "dev/options")

(define (parse . args)
  ;; -> (values positional options), or the message FAIL was called with
  (let/ec return
    (parse-options args (lambda (fmt . args) (return (apply format #f fmt args) #f)))))

(define (keyword-error . args)
  ;; -> the message of the error keyword-settings raises for ARGS, or #f
  (with-exception-handler
      (lambda (e) ((@ (ice-9 exceptions) exception-message) e))
    (lambda () (apply keyword-settings 'run-server args '()) #f)
    #:unwind? #t))

(test-group "every setting"
  (for-each
   (lambda (s)
     (test-assert (format #f "~a: a doc and a section" (setting-name s))
       (and (string? (setting-doc s)) (assq (setting-section s) section-titles)))
     (test-equal (format #f "~a: its default is a value it takes" (setting-name s))
       #f (and (setting-default s) (check-setting-value s (setting-default s))))
     (test-assert (format #f "~a: a name that says its unit" (setting-name s))
       (or (not (setting-unit s))
           (string-suffix? (if (equal? (setting-unit s) "seconds") "-s" "-bytes")
                           (symbol->string (setting-name s))))))
   settings))

(test-group "parse-options"
  (let ((positional options (parse "app.scm" "--port" "0" "--status" "--log-format" "json")))
    (test-equal "the file" '("app.scm") positional)
    (test-equal "typed values" '((port . 0) (status . #t) (log-format . json)) options))
  (let ((positional options (parse "--grace" "5" "--max-body" "10")))
    (test-equal "a deprecated name is its setting's" '((grace-s . 5) (max-body-bytes . 10))
      options))
  (let ((positional options (parse "--listen" ":1" "--port" "1" "--listen" ":2" "--port" "2")))
    (test-equal "repeatable: every value, in order; else the last"
      '((listen ":1" ":2") (port . 2)) options))
  (for-each
   (lambda (s)
     (let ((range (setting-range s)))
       (when range
         (for-each (lambda (n)
                     (let ((message (parse (setting-flag s) (number->string n))))
                       (test-assert (format #f "~a ~a: refused, naming both" (setting-flag s) n)
                         (and (string? message)
                              (string-contains message (setting-flag s))
                              (string-contains message (format #f "\"~a\"" n))))))
                   (list (- (car range) 1) (+ (cadr range) 1))))))
   settings)
  (test-equal "not a number" "--port expects a whole number from 0 to 65535, not \"eighty\""
    (parse "--port" "eighty"))
  (test-equal "not a format" "--log-format expects common, combined, json, not \"xml\""
    (parse "--log-format" "xml"))
  (test-equal "unknown" "unknown option --bogus (see --help)" (parse "--bogus"))
  (test-equal "no value" "--port needs a value" (parse "--port")))

(test-group "keyword-settings"
  (let ((setting (keyword-settings 'run-server '(#:port 0 #:keep-alive-timeout 5 #:state ())
                                   #:except '(#:state))))
    (test-equal "given" 0 (setting 'port))
    (test-equal "by a deprecated keyword" 5 (setting 'keep-alive-timeout-s))
    (test-equal "else the declared default" (setting-default (find-setting 'write-timeout-s))
      (setting 'write-timeout-s)))
  (test-equal "out of range"
    "run-server: #:port expects a whole number from 0 to 65535, not 99999"
    (keyword-error #:port 99999))
  (test-equal "unknown" "run-server: unknown keyword #:bogus" (keyword-error #:bogus 1))
  (test-equal "a command-line option only is not a keyword"
    "run-server: unknown keyword #:inetd" (keyword-error #:inetd #t))
  (test-equal "#f for no limit" #f
    ((keyword-settings 'run-server '(#:handler-timeout-s #f)) 'handler-timeout-s)))

(test-group "options-help"
  (let ((text (options-help '(keep-alive-timeout-s))))
    (test-assert "the flag, its doc and its default"
      (and (string-prefix? "  --keep-alive-timeout-s S" text)
           (string-contains text "idle connection")
           (string-contains text (format #f "(default ~a)"
                                         (setting-default (find-setting 'keep-alive-timeout-s))))))
    (test-assert "no line past 79 columns"
      (every (lambda (line) (< (string-length line) 80))
             (string-split (options-help (map setting-name settings)) #\newline)))))

(test-group "the docs' tables"
  (test-equal "as the declaration makes them (else: guile -L . -c \
'((@ (plucky dev options) main) (command-line))')"
    '() (stale-tables source-root))
  (let* ((text (call-with-input-file (string-append source-root "/README.md") get-string-all))
         (at (string-contains text "| `--port PORT`"))
         (changed (string-append (substring text 0 at) "| `--port PORTS`"
                                 (substring text (+ at (string-length "| `--port PORT`"))))))
    (test-assert "a table edited by hand is not as the declaration makes it"
      (not (string=? (refresh-text changed 'readme) changed)))
    (test-equal "made afresh, it is" text (refresh-text changed 'readme))))

(test-end "dev/options")
