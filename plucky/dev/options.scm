;;; (plucky dev options) --- the docs' option tables, from the declaration

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The option tables of the README and docs/ are made from the settings
;;; of (plucky server settings), as `plucky serve --help' is.  Each lives
;;; between two lines of its file,
;;;
;;;   <!-- options: NAME (made by plucky/dev/options.scm; edit there) -->
;;;   …
;;;   <!-- options: end -->
;;;
;;; and NAME says which table (`tables' below).  After changing a
;;; setting, write them again:
;;;
;;;   guile -L . -c '((@ (plucky dev options) main) (command-line))'
;;;
;;; tests/dev/options.scm fails while a table is stale.
;;;
;;; Code:

(define-module (plucky dev options)
  #:use-module (srfi srfi-1)
  #:use-module (ice-9 textual-ports)
  #:use-module (plucky server settings)
  #:export (tables
            table-text
            refresh-text
            stale-tables
            write-tables!
            main))

(define (markdown-cell text)
  (string-join (string-split text #\|) "\\|"))

(define (takes s)
  (let ((type (setting-type s))
        (range (setting-range s)))
    (cond
     ((eq? type 'flag) "")
     ((and (eq? type 'integer) range) (format #f "~a–~a" (car range) (cadr range)))
     ((eq? type 'integer) "a whole number")
     ((eq? type 'string) "text")
     (else (string-join (map symbol->string type) ", ")))))

(define (default-text s)
  (cond
   ((setting-default-text s))
   ((eq? (setting-type s) 'flag) "off")
   ((not (setting-default s)) "none")
   (else (format #f "~a" (setting-default s)))))

(define (option-cell s)
  (string-append "`" (setting-flag s)
                 (if (setting-metavar s) (string-append " " (setting-metavar s)) "")
                 "`"))

(define (full-table names)
  ;; every column, for docs/options.md
  (string-append
   "| option | `run-server` keyword | takes | default | unit | what |\n"
   "|---|---|---|---|---|---|\n"
   (string-concatenate
    (map (lambda (name)
           (let ((s (find-setting name)))
             (format #f "| ~a~a | ~a | ~a | ~a | ~a | ~a |\n"
                     (option-cell s)
                     (if (null? (setting-aliases s))
                         ""
                         (string-append
                          " (was "
                          (string-join (map (lambda (a) (format #f "`--~a`" a))
                                            (setting-aliases s))
                                       ", ")
                          ")"))
                     (if (memq (setting-scope s) '(server loop parse))
                         (format #f "`#:~a`" (setting-name s))
                         "—")
                     (takes s) (default-text s) (or (setting-unit s) "")
                     (markdown-cell (setting-doc s)))))
         names))))

(define (short-table names)
  ;; option and what, the default in the text: the README's
  (string-append
   "| option | what |\n"
   "|---|---|\n"
   (string-concatenate
    (map (lambda (name)
           (let ((s (find-setting name)))
             (format #f "| ~a | ~a~a |\n"
                     (option-cell s) (markdown-cell (setting-doc s))
                     (if (or (eq? (setting-type s) 'flag) (not (or (setting-default s)
                                                                   (setting-default-text s))))
                         ""
                         (string-append " (default: " (default-text s) ")")))))
         names))))

(define (in-section . sections)
  (filter-map (lambda (s) (and (memq (setting-section s) sections) (setting-name s)))
              settings))

;; (NAME FILE MAKE): the table NAME, in FILE (relative to the root), is
;; (MAKE).
(define tables
  `((all "docs/options.md" ,(lambda () (full-table (map setting-name settings))))
    (readme "README.md"
            ,(lambda ()
               (short-table '(host port listen workers grace-s user group access-log
                              log-format error-log status max-body-bytes max-connections
                              keep-alive-timeout-s header-timeout-s body-timeout-s
                              write-timeout-s))))
    (limits "docs/http.md" ,(lambda () (full-table (in-section 'limits))))))

(define (begin-line name)
  (format #f "<!-- options: ~a (made by plucky/dev/options.scm; edit there) -->" name))

(define end-line "<!-- options: end -->")

(define (table-text name)
  "Return the text of the table NAME (a key of `tables'), as it should be."
  ((caddr (assq name tables))))

(define (refresh-text text name)
  "Return TEXT with the table NAME between its lines made afresh, or #f
if TEXT has no such lines."
  (let* ((begin (begin-line name))
         (start (string-contains text begin))
         (end (and start (string-contains text end-line start))))
    (and start end
         (string-append (substring text 0 (+ start (string-length begin)))
                        "\n" (table-text name)
                        (substring text end)))))

(define (file-text root file)
  (call-with-input-file (string-append root "/" file) get-string-all))

(define (stale-tables root)
  "Return the tables under ROOT that are not as the declaration makes
them, as (NAME FILE), with 'missing for a file without the table's lines."
  (filter-map (lambda (table)
                (let* ((name (car table))
                       (file (cadr table))
                       (text (file-text root file))
                       (fresh (refresh-text text name)))
                  (cond ((not fresh) (list name file 'missing))
                        ((string=? fresh text) #f)
                        (else (list name file)))))
              tables))

(define (write-tables! root)
  "Write each table of `tables' under ROOT afresh; return the files
changed."
  (filter-map (lambda (table)
                (let* ((name (car table))
                       (file (cadr table))
                       (text (file-text root file))
                       (fresh (refresh-text text name)))
                  (unless fresh
                    (error "no table lines in" file (begin-line name)))
                  (and (not (string=? fresh text))
                       (begin
                         (call-with-output-file (string-append root "/" file)
                           (lambda (port) (put-string port fresh)))
                         file))))
              tables))

(define (main args)
  "Write the tables afresh under the root (the first of ARGS, else the
current directory) and print the files changed."
  (let ((root (if (> (length args) 1) (cadr args) (getcwd))))
    (for-each (lambda (file) (format #t "wrote ~a~%" file)) (write-tables! root))))

;;; (plucky dev options) ends here
