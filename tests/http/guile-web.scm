;;; tests/http/guile-web.scm --- (plucky http guile-web)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; (plucky http guile-web) registers Guile's (web http) ahead of its code,
;;; which loads at the first call of one of its procedures, and then with
;;; SRFI-19 left unloaded until a date needs it (see its commentary).
;;; Which modules are loaded is a property of the whole process, so each
;;; case runs in a fresh Guile (`fresh', (tests lib command)'s
;;; `fresh-guile-value'), which prints the value of its
;;; last expression for the test to compare.  The cases: (web http)'s
;;; code and SRFI-19 stay unloaded through plucky's start and a simple
;;; request; every road to (web http) (a header Guile parses, an import
;;; with a prefix, a private name, (web response)) loads it and sees
;;; Guile's own bindings; dates that (web http) makes before SRFI-19 is
;;; loaded, the Expires date among them, are SRFI-19 dates once it is;
;;; loading it by any road (an import, a prefixed import, a header that
;;; needs a SRFI-19 procedure) gives the same; Guile's validators and
;;; writers accept them; with SRFI-19 loaded first, nothing changes.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (ice-9 match)
             (tests lib harness)
             (tests lib command))

(test-begin "http/guile-web")

(define fresh fresh-guile-value)

(define srfi-19-loaded?
  "(and (resolve-module '(srfi srfi-19) #f #:ensure #f)
        (module-public-interface (resolve-module '(srfi srfi-19) #f #:ensure #f))
        #t)")

(define rfc-1123 "\"Sun, 06 Nov 1994 08:49:37 GMT\"")

(define web-http-loaded?
  "((@ (plucky http guile-web) web-http-loaded?))")

(define deferred-loaded?
  ;; the deferred modules whose code has run
  "((@ (srfi srfi-1) filter-map) (lambda (e) (and ((@ (plucky http guile-web) code-loaded?) (car e)) (car e)))
               (@ (plucky http guile-web) deferred-modules))")

(test-group "start-up"
  (test-equal "plucky's modules leave SRFI-19 and the deferred modules' code unloaded, (web request) loaded"
    '(#f () #t)
    (fresh "(use-modules (plucky command))"
           (string-append "(list " srfi-19-loaded? " " deferred-loaded?
                          " (and (module-public-interface (resolve-module '(web request))) #t))")))
  (test-equal "so does a request parsed and answered"
    '(#f () 200 #t)
    (fresh "(use-modules (plucky http parse) (plucky http response) (rnrs bytevectors))"
           "(define bv (string->utf8 \"GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n\"))"
           "(define request (parse-request-head bv 0 (bytevector-length bv)))"
           "(define out (make-output))"
           "(write-response! out request '((content-type . (text/plain))) \"hi\" #f)"
           "(define text (utf8->string (output-bytes out)))"
           (string-append "(list " srfi-19-loaded? " " deferred-loaded?
                          " (string->number (substring text 9 12))"
                          " (and (string-contains text \"\\r\\nContent-Type: text/plain;charset=utf-8\\r\\n\") #t))"))))

(test-group "the deferred modules"
  ;; For each: a sample call and its value.  In a fresh Guile that loaded
  ;; plucky first: the interface has the names Guile's has, the code is
  ;; not loaded until the call, the call gives Guile's answer, and then
  ;; every name of the interface holds a procedure.
  (for-each
   (match-lambda
     ((name call value)
      (let ((names (fresh (format #f "(sort (module-map (lambda (n v) (symbol->string n)) (resolve-interface '~s)) string<?)" name))))
        (test-equal (format #f "~s: Guile's names, loaded at the first call, Guile's answer" name)
          (list names #f value #t #t)
          (fresh "(use-modules (plucky server) (srfi srfi-1))"
                 (format #f "(use-modules (~a #:prefix p:))" name)
                 (format #f "(define names (sort (module-map (lambda (n v) (symbol->string n)) (resolve-interface '~s)) string<?))" name)
                 (format #f "(define before ((@ (plucky http guile-web) code-loaded?) '~s))" name)
                 (format #f "(define value ~a)" call)
                 (format #f "(list names before value ((@ (plucky http guile-web) code-loaded?) '~s) (every (lambda (v) (procedure? (variable-ref v))) (module-map (lambda (n v) v) (resolve-interface '~s))))"
                         name name))))))
   '(((ice-9 regex) "(p:match:substring (p:string-match \"b+\" \"abbc\"))" "bb")
     ((ice-9 rdelim) "(call-with-input-string \"ab\\ncd\" p:read-line)" "ab")
     ((ice-9 binary-ports) "(p:get-bytevector-all (p:open-bytevector-input-port #vu8(1 2 3)))" #vu8(1 2 3))
     ((ice-9 iconv) "(p:bytevector->string #vu8(104 105) \"ISO-8859-1\")" "hi")
     ((ice-9 textual-ports) "(call-with-input-string \"xyz\" p:get-string-all)" "xyz")
     ((web http) "(p:header->string 'accept)" "Accept")))
  (test-equal "a re-exported name is the variable of the module it comes from"
    '(#t #t)
    (fresh "(use-modules (plucky server))"
           "(list (eq? (module-variable (resolve-interface '(ice-9 textual-ports)) 'get-string-n!)"
           "           (module-variable (resolve-interface '(ice-9 binary-ports)) 'get-string-n!))"
           "      (eq? (module-variable (resolve-interface '(ice-9 textual-ports)) 'put-string)"
           "           (module-variable (resolve-interface '(ice-9 ports internal)) 'put-string)))"))
  (test-equal "threads that call at once all get Guile's answer"
    '("ab" "ab" "ab" "ab" "ab" "ab" "ab" "ab")
    (fresh "(use-modules (plucky server) (ice-9 threads) ((ice-9 rdelim) #:prefix p:))"
           "(define m (make-mutex)) (define c (make-condition-variable)) (define go? #f)"
           "(define threads"
           "  (map (lambda (i)"
           "         (call-with-new-thread"
           "          (lambda ()"
           "            (with-mutex m (let wait () (unless go? (wait-condition-variable c m) (wait))))"
           "            (catch #t (lambda () (call-with-input-string \"ab\\ncd\" p:read-line))"
           "              (lambda args (format #f \"~s\" args))))))"
           "       (iota 8)))"
           "(with-mutex m (set! go? #t) (broadcast-condition-variable c))"
           "(map join-thread threads)"))
  (test-equal "a binding patched before the code loads keeps the patch, as if patched after"
    '("X-Patched" (text/html) #t)
    (fresh "(use-modules (plucky server))"
           "(module-define! (resolve-module '(web http)) 'header->string (lambda _ \"X-Patched\"))"
           "(define parsed ((@ (web http) parse-header) 'accept \"text/html\"))"
           "(list ((@ (web http) header->string) 'accept) (car parsed)"
           "      ((@ (plucky http guile-web) web-http-loaded?)))"))
  ;; Guile's finalizer thread off, as plucky's processes have it: started
  ;; by a collection while no descriptor is left, it cannot make its pipe
  ;; and aborts the process (1 start in 20 to 50 with both CPUs busy).
  (test-equal "a load that fails (no descriptor left) is tried again by the next call"
    '(#t #f ((text/html)) #t)
    (fresh "(use-modules (plucky server))"
           "((@ (plucky sys signal) stop-finalizer-thread!))"
           "(setrlimit 'nofile 64 64)"
           "(define ports (let lp ((acc '())) (let ((p (false-if-exception (open-input-file \"/dev/null\")))) (if p (lp (cons p acc)) acc))))"
           "(define failed? (catch #t (lambda () ((@ (web http) parse-header) 'accept \"text/html\") #f) (lambda _ #t)))"
           "(define after-failure ((@ (plucky http guile-web) web-http-loaded?)))"
           "(for-each close-port ports)"
           "(list failed? after-failure ((@ (web http) parse-header) 'accept \"text/html\")"
           "      ((@ (plucky http guile-web) web-http-loaded?)))"))
  (test-equal "an exception thrown into the loading thread as the code's procedures appear leaves them whole"
    '(#t (text/html))
    (fresh "(use-modules (plucky server) (ice-9 threads))"
           "(define var (module-variable (resolve-interface '(web http)) 'parse-header))"
           "(define loader (variable-ref var))"
           "(define main (current-thread))"
           "(define watcher (call-with-new-thread (lambda () (let spin () (when (eq? (variable-ref var) loader) (spin))) (system-async-mark (lambda () (throw 'interrupted)) main))))"
           "(catch #t (lambda () ((@ (web http) header->string) 'accept) (join-thread watcher)) (lambda _ #f))"
           "(list ((@ (plucky http guile-web) web-http-loaded?))"
           "      ((@ (web http) parse-header) 'content-type \"text/html\"))"))
  (test-equal "a module loaded before plucky is left as it is"
    '(#t #f)
    (fresh "(use-modules (ice-9 rdelim) (plucky server))"
           "(list ((@ (plucky http guile-web) code-loaded?) '(ice-9 rdelim))"
           "      ((@ (plucky http guile-web) code-loaded?) '(ice-9 regex)))")))

(test-group "(web http) at first use"
  (test-equal "a request as curl sends it leaves it unloaded: Accept: */* is parsed when plucky is compiled"
    '(#f ((*/*)) #f #t)
    (fresh "(use-modules (plucky http parse) (rnrs bytevectors) (web request))"
           "(define bv (string->utf8 \"GET / HTTP/1.1\\r\\nHost: x\\r\\nUser-Agent: curl/8.0\\r\\nAccept: */*\\r\\n\\r\\n\"))"
           "(define (accept) (assq-ref (request-headers (parse-request-head bv 0 (bytevector-length bv))) 'accept))"
           "(define a (accept))"
           "(define b (accept))"
           (string-append "(list " web-http-loaded? " a (eq? a b)"
                          " (equal? a ((@ (web http) parse-header) 'accept \"*/*\")))")))
  (test-equal "a header Guile parses loads it, and gets Guile's value"
    '(#f #t #t)
    (fresh "(use-modules (plucky http parse) (rnrs bytevectors) (web request))"
           (string-append "(define before " web-http-loaded? ")")
           "(define bv (string->utf8 \"GET / HTTP/1.1\\r\\nHost: x\\r\\nAccept: text/html;q=0.5, */*\\r\\n\\r\\n\"))"
           "(define request (parse-request-head bv 0 (bytevector-length bv)))"
           (string-append "(list before " web-http-loaded?
                          " (equal? (assq-ref (request-headers request) 'accept)"
                          "         ((@ (web http) parse-header) 'accept \"text/html;q=0.5, */*\")))")))
  (test-equal "an import with a prefix sees every export, Guile's own once called"
    '(25 #f ((text/html (q . 500))) #t #t)
    (fresh "(use-modules (plucky server))"
           "(use-modules ((web http) #:prefix h:))"
           "(define n (length (module-map (lambda (n v) n) (resolve-interface '(web http)))))"
           (string-append "(define before " web-http-loaded? ")")
           "(define value (h:parse-header 'accept \"text/html;q=0.5\"))"
           (string-append "(list n before value " web-http-loaded?
                          " (eq? h:parse-header (module-ref (resolve-module '(web http)) 'parse-header)))")))
  (test-equal "#:select and #:hide too"
    '("Accept" #t)
    (fresh "(use-modules (plucky server))"
           "(use-modules ((web http) #:select (header->string)) ((web http) #:hide (header->string) #:prefix x:))"
           "(list (header->string 'accept) (procedure? x:parse-header))"))
  (test-equal "a private name loads it"
    '(#f x-foo #t)
    (fresh "(use-modules (plucky server))"
           (string-append "(define before " web-http-loaded? ")")
           "(define name ((@@ (web http) string->header) \"X-Foo\"))"
           (string-append "(list before name " web-http-loaded? ")")))
  (test-equal "a procedure taken before the code loads works after"
    '("Content-Type" "Accept")
    (fresh "(use-modules (plucky server))"
           "(define p (@ (web http) header->string))"
           "(define first (p 'content-type))"
           "(list first (p 'accept))"))
  (test-equal "(web response) loaded later builds and checks responses; SRFI-19 stays unloaded"
    '(((content-type text/plain)) #t #f)
    (fresh "(use-modules (plucky server) (web response))"
           "(define r (build-response #:headers '((content-type text/plain))))"
           (string-append "(list (response-headers r)"
                          " (catch #t (lambda () (build-response #:headers '((content-length . \"x\"))) #f) (lambda _ #t))"
                          " " srfi-19-loaded? ")"))))

(test-group "dates made before SRFI-19 is loaded"
  (test-equal "parsing a date header does not load it"
    '(#f (1994 11 6 8 49 37 0))
    (fresh "(use-modules (plucky server) (web http))"
           (string-append "(define d (parse-header 'if-modified-since " rfc-1123 "))")
           (string-append "(list " srfi-19-loaded?
                          " (map (lambda (i) (struct-ref d i)) '(6 5 4 3 2 1 7)))")))
  (test-equal "they are SRFI-19 dates once it is"
    '(#t #t 1994 "Sun, 06 Nov 1994 08:49:37 GMT" #t)
    (fresh "(use-modules (plucky server) (web http))"
           (string-append "(define d (parse-header 'if-modified-since " rfc-1123 "))")
           "(define e (parse-header 'expires \"0\"))"
           "(use-modules (srfi srfi-19))"
           "(list (date? d) (date? e) (date-year d)"
           "      (call-with-output-string (lambda (p) ((header-writer 'date) d p)))"
           "      (equal? (date->time-utc d) (date->time-utc (make-date 0 37 49 8 6 11 1994 0))))"))
  (test-equal "the Expires date, 0 and -1"
    '(#t 1970 1 1 "Thu, 01 Jan 1970 00:00:00 GMT" #t)
    (fresh "(use-modules (plucky server) (web http) (srfi srfi-19))"
           "(define e (parse-header 'expires \"0\"))"
           "(list (date? e) (date-year e) (date-month e) (date-day e)"
           "      (call-with-output-string (lambda (p) ((header-writer 'expires) e p)))"
           "      (eq? e (parse-header 'expires \"-1\")))")))

(test-group "SRFI-19 loaded by other roads"
  (test-equal "an import with a prefix sees every binding"
    '(#t #t 80)
    (fresh "(use-modules (plucky server))"
           "(use-modules ((srfi srfi-19) #:prefix d:) (web http))"
           (string-append "(define d (parse-header 'last-modified " rfc-1123 "))")
           "(list (d:date? d) (d:date? (d:current-date))"
           "      (length (module-map (lambda (n v) n) (resolve-interface '(srfi srfi-19)))))"))
  (test-equal "a date with a zone, which needs SRFI-19's procedures"
    '(#t #t (1994 11 6 7 49 37 0))
    (fresh "(use-modules (plucky server) (web http))"
           "(define d (parse-header 'date \"Sun, 06 Nov 1994 08:49:37 +0100\"))"
           (string-append "(list " srfi-19-loaded?
                          " ((@ (srfi srfi-19) date?) d)"
                          " (map (lambda (f) (f d)) (list (@ (srfi srfi-19) date-year) (@ (srfi srfi-19) date-month) (@ (srfi srfi-19) date-day) (@ (srfi srfi-19) date-hour) (@ (srfi srfi-19) date-minute) (@ (srfi srfi-19) date-second) (@ (srfi srfi-19) date-zone-offset))))")))
  (test-equal "Guile's validators accept its dates in a response"
    '(#t "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n")
    (fresh "(use-modules (plucky server) (web response) (srfi srfi-19))"
           "(define r (build-response #:headers `((date . ,(make-date 0 37 49 8 6 11 1994 0)) (last-modified . ,(current-date 0)))))"
           "(list (date? (assq-ref (response-headers r) 'last-modified))"
           "      (call-with-output-string (lambda (p) ((@ (web http) write-header) 'date (assq-ref (response-headers r) 'date) p))))"))
  (test-equal "a record type defined before SRFI-19 loads is ordinary; the claims gone, so is SRFI-9"
    '(#t 1 #t #f)
    (fresh "(use-modules (plucky server) (srfi srfi-9))"
           "(define-record-type <point> (make-point x) point? (x point-x))"
           "(use-modules (srfi srfi-19))"
           ;; the record types of (web uri) and (web request) are claimed
           ;; until their code runs: build-request runs both
           "(define claims-pending? (and (module-local-variable (resolve-module '(srfi srfi-9)) 'make-record-type) #t))"
           "((@ (web request) build-request) ((@ (web uri) build-uri) 'http #:host \"x\"))"
           "(list (point? (make-point 1)) (point-x (make-point 1)) claims-pending?"
           "      (module-local-variable (resolve-module '(srfi srfi-9)) 'make-record-type))")))

(test-group "(web uri) and (web request) at first use"
  ;; Their record types are made ahead (claimed) and their exported
  ;; macros, accessors and predicates, are made here to expand as
  ;; SRFI-9's: records made before the code loads are its records after,
  ;; and code compiled against either runs with either.
  (define request-text
    "(define bv (string->utf8 \"GET /a?b HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n\"))")
  (test-equal "a request parsed before their code loads: accessors, then their procedures after"
    '(() GET "/a" "b" #t #t #t ((ice-9 regex) (web uri) (web request)) "/a?b" #t)
    (fresh "(use-modules (plucky http parse) (rnrs bytevectors) (web request) (web uri))"
           request-text
           "(define r (parse-request-head bv 0 (bytevector-length bv)))"
           (string-append "(define before " deferred-loaded? ")")
           "(define fields (list (request-method r) (uri-path (request-uri r)) (uri-query (request-uri r))))"
           "(define preds (list (request? r) (uri-reference? (request-uri r))))"
           ;; uri->string and build-request are procedures: they load the code
           "(define text (uri->string (request-uri r)))"
           "(define built (build-request (string->uri \"http://x/a\")))"
           (string-append "(append (list before) fields preds"
                          " (list (request? built)) (list " deferred-loaded? " text (request? r)))")))
  (let ((errors "(define-record-type <point> (make-point x) point? (x point-x))
                 (define (error-of thunk) (catch #t thunk (lambda (key who . _) (list key who))))
                 (list (error-of (lambda () (request-method (make-point 1))))
                       (error-of (lambda () (request-method 'x)))
                       (error-of (lambda () (map request-method (list (make-point 1))))))"))
    (test-equal "an accessor given another value raises what Guile's does"
      (fresh "(use-modules (web request) (srfi srfi-9))" errors)
      (fresh "(use-modules (plucky server) (web request) (srfi srfi-9))" errors)))
  (test-equal "a load that fails after taking the record type leaves it claimed for the next"
    "/a?b"
    ;; (web uri)'s code defines <uri>, then compiles regular expressions:
    ;; the first of those fails once
    (fresh "(use-modules (plucky http parse) (rnrs bytevectors) (web request) (web uri))"
           request-text
           "(define r (parse-request-head bv 0 (bytevector-length bv)))"
           "(define real make-regexp) (define armed #t)"
           "(module-set! the-root-module 'make-regexp (lambda args (if armed (begin (set! armed #f) (error \"once\")) (apply real args))))"
           "(catch #t (lambda () (uri->string (request-uri r))) (lambda _ #f))"
           "(module-set! the-root-module 'make-regexp real)"
           "(uri->string (request-uri r))"))
  (let ((dir (temporary-directory)))
    ;; modules in which `@@' is not bound: the macros' expansions must
    ;; not need it there
    (write-file (string-append dir "/r6.scm") "
(library (r6-user) (export g) (import (rnrs base) (web request))
  (define (g r) (list (request-method r) (request? r) (map request-method (list r)))))")
    (write-file (string-append dir "/pure.scm") "
(define-module (pure-user) #:pure
  #:use-module ((guile) #:select (list define lambda))
  #:use-module (web request)
  #:export (h))
(define (h r) (list (request-method r) (request? r)))")
    (test-equal "their macros in an R6RS library and a pure module"
      '((GET #t (GET)) (GET #t))
      (fresh "(use-modules (plucky server))"
             (format #f "(load ~s) (load ~s)" (string-append dir "/r6.scm") (string-append dir "/pure.scm"))
             "(define r ((@ (web request) build-request) ((@ (web uri) string->uri) \"http://x/a\")))"
             "(list ((@ (r6-user) g) r) ((@ (pure-user) h) r))"))
    (remove-tree dir))
  (test-equal "a record type defined in an anonymous module, a claim pending, names no module"
    0
    (fresh "(use-modules (plucky server) (srfi srfi-9))"
           "(define (make) (define-record-type <p> (m x) p? (x px)) m)"
           "(define (count) (hash-count (const #t) (module-submodules (resolve-module '() #f))))"
           "(define before (count))"
           "(do ((i 0 (1+ i))) ((= i 100)) (save-module-excursion (lambda () (set-current-module (make-module)) (make))))"
           "(- (count) before)"))
  (let* ((dir (temporary-directory))
         (source (string-append dir "/uses-request.scm"))
         (compiled (string-append dir "/uses-request.go")))
    (write-file source "
(define-module (uses-request)
  #:use-module (web request)
  #:use-module (web uri)
  #:export (describe))
(define (describe r)
  (list (request? r) (request-method r) (uri-path (request-uri r))
        (map (lambda (f) (f r)) (list request-method request-version))))
")
    (define (compile-in . preamble)
      (apply fresh (append preamble
                           (list (format #f "((@ (system base compile) compile-file) ~s #:output-file ~s)"
                                         source compiled)
                                 "#t"))))
    (define (run-in . preamble)
      (apply fresh (append preamble
                           (list "(use-modules (rnrs bytevectors))"
                                 (format #f "(save-module-excursion (lambda () (load-compiled ~s)))" compiled)
                                 request-text
                                 "(define r ((@ (plucky http parse) parse-request-head) bv 0 (bytevector-length bv)))"
                                 "((@ (uses-request) describe) r)"))))
    (define expected '(#t GET "/a" (GET (1 . 1))))
    (test-equal "compiled while they wait for their code, run where Guile's modules are loaded first"
      expected
      (begin
        (compile-in "(use-modules (plucky server))")
        (run-in "(use-modules (web request) (web uri) (web http))"
                "((@ (web uri) build-uri) 'http #:host \"x\")"
                "(use-modules (plucky server))")))
    (test-equal "compiled against Guile's modules, run while they wait for their code"
      (list expected '())
      (begin
        (compile-in "(use-modules (web request) (web uri))")
        (list (run-in "(use-modules (plucky server))")
              (fresh "(use-modules (plucky server) (rnrs bytevectors))"
                     (format #f "(save-module-excursion (lambda () (load-compiled ~s)))" compiled)
                     request-text
                     "((@ (uses-request) describe) ((@ (plucky http parse) parse-request-head) bv 0 (bytevector-length bv)))"
                     deferred-loaded?))))
    (remove-tree dir)))

(test-group "SRFI-19 loaded first"
  (test-equal "nothing changes"
    '(#t #t 1994)
    (fresh "(use-modules (srfi srfi-19) (plucky server) (web http))"
           (string-append "(define d (parse-header 'if-modified-since " rfc-1123 "))")
           "(list (date? d) (date? (parse-header 'expires \"0\")) (date-year d))")))

(test-end "http/guile-web")

;;; tests/http/guile-web.scm ends here
