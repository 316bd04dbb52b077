;;; tests/apps/lazy.scm --- what the demo leaves unloaded until it is used

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Every collection scans the compiled data of every module a worker
;;; has loaded (docs/guile-upstream.md 9), so a module the worker never
;;; uses costs each collection its scan and the worker its memory.  The
;;; apps load these at their first use (#:autoload, `module-autoload!'):
;;;
;;;   PostgreSQL's client, its sessions and limits, libpq: with
;;;     DATABASE_URL set (tests/apps/news-pg.scm, news-hosts.scm and
;;;     chat-hosts.scm run that path);
;;;   the JSON feed and (plucky web json): at the first /items.json;
;;;   (sxml simple), with Guile's XML parser: at the first RSS or Atom
;;;     feed;
;;;   (plucky web websocket): at the chat's first /ws;
;;;   (ice-9 popen): at the blog's first write, which runs git.
;;;
;;; A fresh Guile loads apps/demo.scm, on SQLite, as `plucky serve'
;;; does (its files compiled: Guile's cache, as `plucky serve' has it),
;;; and says which of these it loaded.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (tests lib harness)
             (tests lib command))

(test-begin "apps/lazy")

(define lazy
  '((plucky db postgresql) (plucky db postgresql connection) (plucky db state)
    (plucky sys libpq) (news json) (plucky web json) (sxml simple)
    (plucky web websocket) (ice-9 popen)))

(define apps (canonicalize-path (string-append source-root "/apps")))

(define* (demo-loaded data #:optional (expression "#f"))
  ;; -> (VALUE MODULE …): the modules of `lazy' loaded in a fresh Guile
  ;; that loaded the demo (the handler, `demo') on the data directory
  ;; DATA, then evaluated EXPRESSION (a string), whose value is VALUE
  (fresh-guile-value
   "(define (loaded? name)
      (let ((m (resolve-module name #f #:ensure #f)))
        (and m (module-public-interface m) #t)))"
   (string-append "(setenv \"PLUCKY_DATA\" " (object->string data) ")")
   "(unsetenv \"DATABASE_URL\")"
   ;; compiled, as `plucky serve' loads them unless told not to:
   ;; expanding a module's source resolves each name it uses, which
   ;; loads an autoloaded module at once
   "(set! %load-should-auto-compile #t)"
   "(define demo-module (make-fresh-user-module))"
   "(set-module-declarative?! demo-module #f)"
   (string-append "(module-define! demo-module 'app-directory "
                  (object->string apps) ")")
   (string-append "(define demo (save-module-excursion (lambda ()
                     (set-current-module demo-module)
                     (load " (object->string (string-append apps "/demo.scm"))
                  "))))")
   "(use-modules (web request) (web response) (web uri) (rnrs bytevectors))"
   (string-append "(let ((value " expression "))
                     (cons value (filter loaded? '" (object->string lazy) ")))")))

(let ((data (temporary-directory)))
  ;; A first Guile compiles what is stale into the cache (the compiler
  ;; expands each module, which loads what it autoloads) and seeds DATA.
  (demo-loaded data)
  (test-equal "the demo on SQLite loads none of them" '(#f)
    (demo-loaded data))
  (test-equal "/news/items.json: a JSON array, which loads its modules"
    '((200 #\[) (news json) (plucky web json))
    (demo-loaded data
                 "(call-with-values
                        (lambda ()
                          (demo (build-request (string->uri \"http://127.0.0.1/news/items.json\"))
                                #f))
                      (lambda (response body)
                        ;; a response, or the shorthand: headers alone
                        (list (if (response? response) (response-code response) 200)
                              (and (bytevector? body) (positive? (bytevector-length body))
                                   (integer->char (bytevector-u8-ref body 0))))))"))
  (remove-tree data))

(define (compiled? module-file)
  ;; -> true when build/ holds MODULE-FILE ("plucky/web/static")
  ;; compiled from its present source: else Guile loads (and expands)
  ;; the source, which loads what it autoloads
  (let ((go (string-append source-root "/build/" module-file ".go"))
        (scm (string-append source-root "/" module-file ".scm")))
    (and (file-exists? go) (>= (stat:mtime (stat go)) (stat:mtime (stat scm))))))

;; (plucky web static) alone, as `plucky static' serves a directory: no
;; R6RS ports (their records and hash tables) and no (ice-9 ftw) until
;; a directory is listed.
(if (not (compiled? "plucky/web/static"))
    (begin
      (test-skip 1)
      (test-assert "(plucky web static) compiled (make)" #f))
    (test-equal "(plucky web static): ftw at the first listing, never R6RS ports"
      '(() ((ice-9 ftw)) 200)
      (fresh-guile-value
       "(define (loaded names)
          (filter (lambda (name)
                    (let ((m (resolve-module name #f #:ensure #f)))
                      (and m (module-public-interface m))))
                  names))"
       "(use-modules (plucky web static) (web request) (web response) (web uri))"
       "(define before (loaded '((ice-9 ftw) (rnrs io ports))))"
       (string-append
        "(define code
           (call-with-values
               (lambda ()
                 ((static-handler " (object->string (string-append source-root "/apps"))
        "                 #:listing? #t)
                  (build-request (string->uri \"http://127.0.0.1/static/\"))
                  #f))
             (lambda (response body)   ; a response, or headers alone
               (if (response? response) (response-code response) 200))))")
       "(list before (loaded '((ice-9 ftw) (rnrs io ports))) code)")))

(test-end "apps/lazy")
