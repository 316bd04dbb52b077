;;; (plucky web router) --- routes as data: method, path pattern, handler

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; An app is a list of routes, and `make-router' makes it a handler:
;;;
;;;   (define app
;;;     (router-handler
;;;      (make-router
;;;       (list (route 'GET "/" front-page #:name 'front)
;;;             (route 'GET "/item/:id:int" item-page #:name 'item)
;;;             (route '(GET POST) "/user/:name" user-page #:name 'user)
;;;             (route 'GET "/static/*path" static-file)
;;;             (mount "/blog" blog-app #:name 'blog)))))
;;;
;;; A pattern is segments between slashes: a literal ("item"), a
;;; parameter (":name", a non-empty segment, percent-decoded; ":id:int",
;;; digits read as an exact integer; ":x:string" as ":x"), or, last, a
;;; rest parameter ("*path": what remains of the path, maybe empty,
;;; segments percent-decoded and joined by "/").  A route's handler is
;;; called as (HANDLER request body params), PARAMS an alist ((id . 42)
;;; (name . "ann")); it returns (values response body) as any handler.
;;;
;;; A request flows through `dispatch':
;;;   the path is cut into segments, each percent-decoded (an invalid
;;;   escape is a 400) -> walked down a trie built once from the
;;;   patterns: at each node a literal child (a hash table by segment)
;;;   is tried first, then the parameter children in the order the
;;;   routes were given, then a rest parameter; no regular expression
;;;   -> the first node reached whose routes take the method answers;
;;;   HEAD is answered by the GET route (the server sends no body);
;;;   OPTIONS, when no route takes it, by 204 with Allow
;;;   -> a path some route matches but not with this method: 405 with
;;;   Allow; no route: 404 (NOT-FOUND, a handler, answers it)
;;;   -> the route's pattern, the mount prefix before it, is noted for
;;;   the status page's accounting (`note-request-route!' of (plucky
;;;   server), which the observer takes when it accounts for the
;;;   request: with --status), so that "/item/:id:int" is one route
;;;   however many items there are.
;;;
;;; `mount' puts an app (any handler of (request body)) under a prefix:
;;; it is called with the request whose path has the prefix taken off,
;;; and `request-mount-prefix' gives the prefix back.  Mounting a router's
;;; handler nests its routes: `router-routes' lists them and `url-for'
;;; finds them, the prefix before their patterns.
;;;
;;; An invalid percent-escape ("%zz") is kept as it is, as (plucky web
;;; forms) keeps it; escapes that decode to invalid UTF-8 are a 400.
;;;
;;; `url-for' is routing backwards: (url-for router 'item '((id . 42)))
;;; -> "/item/42", parameters percent-encoded.  `query-params' and
;;; `query-ref' read the query string.
;;;
;;; Code:

(define-module (plucky web router)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 format)
  #:use-module ((ice-9 binary-ports) #:select (open-bytevector-input-port))
  #:use-module (web request)
  #:use-module (web uri)
  #:use-module ((plucky web forms) #:select (urlencoded->alist))
  #:use-module ((plucky server) #:select (note-request-route!))
  #:autoload (web response) (build-response)
  #:export (route
            route?
            route-methods
            route-pattern
            route-name
            route-handler
            mount
            mount?
            make-router
            router?
            router-handler
            router-routes
            handler-router
            dispatch
            url-for
            request-mount-prefix
            query-params
            query-ref
            routes-command))

;;;
;;; Routes
;;;

(define-record-type <route>
  (%make-route methods pattern name handler segments)
  route?
  (methods route-methods)               ; list of symbols: (GET POST)
  (pattern route-pattern)               ; the string given: "/item/:id:int"
  (name route-name)                     ; a symbol, or #f
  (handler route-handler)               ; (handler request body params)
  (segments route-segments))            ; parsed pattern, see `parse-pattern'

(define-record-type <mount>
  (%make-mount prefix segments handler name)
  mount?
  (prefix mount-prefix)                 ; "/blog"
  (segments mount-segments)             ; ("blog")
  (handler mount-handler)               ; (handler request body)
  (name mount-name))

;; A parsed segment: a string (a literal), or a <param>.
(define-record-type <param>
  (make-param name type)
  param?
  (name param-name)                     ; symbol
  (type param-type))                    ; 'string, 'int or 'rest

(define (pattern-error pattern why)
  (error (string-append "route pattern " (object->string pattern) ": " why)))

(define (split-path path)
  ;; "/a/b" -> ("a" "b"); "/" -> (); "/a/" -> ("a" "")
  (if (string=? path "/")
      '()
      (cdr (string-split path #\/))))

(define (parse-pattern pattern)
  ;; -> the list of segments of PATTERN, a string starting with "/"
  (unless (and (string? pattern) (string-prefix? "/" pattern))
    (pattern-error pattern "must be a string that starts with /"))
  (let lp ((parts (split-path pattern)) (out '()) (names '()))
    (define (add segment name)
      (when (and name (memq name names))
        (pattern-error pattern (string-append "parameter " (symbol->string name) " twice")))
      (lp (cdr parts) (cons segment out) (if name (cons name names) names)))
    (if (null? parts)
        (reverse out)
        (let ((part (car parts)))
          (cond
           ((string-prefix? "*" part)
            (unless (null? (cdr parts))
              (pattern-error pattern "a rest parameter (*name) must come last"))
            (when (string=? part "*")
              (pattern-error pattern "a rest parameter needs a name"))
            (let ((name (string->symbol (substring part 1))))
              (add (make-param name 'rest) name)))
           ((string-prefix? ":" part)
            (let* ((fields (string-split (substring part 1) #\:))
                   (name (car fields))
                   (type (if (pair? (cdr fields)) (cadr fields) "string")))
              (unless (and (not (string-null? name))
                           (<= (length fields) 2)
                           (member type '("int" "string")))
                (pattern-error pattern (string-append "bad parameter " part
                                                      " (:name, :name:int or :name:string)")))
              (add (make-param (string->symbol name) (string->symbol type))
                   (string->symbol name))))
           ((string-null? part)
            (if (null? (cdr parts))
                (add "" #f)             ; "/a/": a trailing slash is a segment
                (pattern-error pattern "an empty segment (//)")))
           (else
            (add (uri-decode part #:decode-plus-to-space? #f) #f)))))))

(define* (route methods pattern handler #:key (name #f))
  "Return a route: requests with one of METHODS (a symbol such as 'GET, or
a list of them) whose path matches PATTERN (see the commentary of
(plucky web router)) are answered by (HANDLER request body params).
NAME, a symbol, names the route for `url-for'."
  (let ((methods (if (list? methods) methods (list methods))))
    (unless (and (pair? methods) (every symbol? methods))
      (error "route: METHODS is a symbol or a list of symbols" methods))
    (unless (procedure? handler)
      (error "route: HANDLER is a procedure of (request body params)" handler))
    (unless (or (not name) (symbol? name))
      (error "route: NAME is a symbol" name))
    (%make-route methods pattern name handler (parse-pattern pattern))))

(define* (mount prefix handler #:key (name #f))
  "Return a mount: requests whose path starts with the segments of
PREFIX (\"/blog\") go to HANDLER, an app of (request body), with the
prefix taken off their path.  NAME names the mount (shown by
`router-routes')."
  (let ((segments (parse-pattern prefix)))
    (unless (every string? segments)
      (error "mount: a prefix has no parameters" prefix))
    (when (null? segments)
      (error "mount: the prefix / would take every path; give the app itself" prefix))
    (%make-mount prefix segments handler name)))

;;;
;;; The trie
;;;

(define-record-type <node>
  (make-node literals params rest routes)
  node?
  (literals node-literals set-node-literals!) ; #f or hash table: segment -> node
  (params node-params set-node-params!)       ; ((<param> . node) …), in order given
  (rest node-rest set-node-rest!)             ; #f or (<param> . node)
  (routes node-routes set-node-routes!))      ; routes or mounts ending here, in order

(define (new-node) (make-node #f '() #f '()))

(define (child! node segment)
  ;; -> the child of NODE for SEGMENT, made if need be
  (cond
   ((string? segment)
    (let ((table (or (node-literals node)
                     (let ((table (make-hash-table 8)))
                       (set-node-literals! node table)
                       table))))
      (or (hash-ref table segment)
          (let ((child (new-node)))
            (hash-set! table segment child)
            child))))
   ((eq? (param-type segment) 'rest)
    (let ((rest (node-rest node)))
      (cond
       ((not rest)
        (let ((child (new-node)))
          (set-node-rest! node (cons segment child))
          child))
       ((eq? (param-name (car rest)) (param-name segment)) (cdr rest))
       (else (error "router: two rest parameters of different names at one place"
                    (param-name (car rest)) (param-name segment))))))
   (else
    (let ((same (find (lambda (entry)
                        (and (eq? (param-name (car entry)) (param-name segment))
                             (eq? (param-type (car entry)) (param-type segment))))
                      (node-params node))))
      (if same
          (cdr same)
          (let ((child (new-node)))
            (set-node-params! node (append (node-params node) (list (cons segment child))))
            child))))))

(define (insert! root segments entry)
  (let ((node (fold (lambda (segment node) (child! node segment)) root segments)))
    (set-node-routes! node (append (node-routes node) (list entry)))))

;;;
;;; Routers
;;;

(define-record-type <router>
  (%make-router entries trie not-found names handler)
  router?
  (entries router-entries)              ; routes and mounts, as given
  (trie router-trie)                    ; <node>
  (not-found router-not-found)          ; handler of (request body)
  (names router-names)                  ; hash table: name -> route
  (handler router-handler* set-router-handler!))

(define (default-not-found request body)
  (values (build-response #:code 404 #:headers '((content-type . (text/plain))))
          "Not found\n"))

(define* (make-router entries #:key (not-found default-not-found))
  "Return a router of ENTRIES, a list of routes (`route') and mounts
(`mount'), tried in that order where patterns overlap.  NOT-FOUND, a
handler of (request body), answers a request no entry matches.  Raise an
error for two routes of the same name."
  (let ((trie (new-node))
        (names (make-hash-table)))
    (for-each
     (lambda (entry)
       (cond
        ((route? entry)
         (let ((name (route-name entry)))
           (when name
             (when (hashq-ref names name)
               (error "make-router: two routes named" name))
             (hashq-set! names name entry)))
         (insert! trie (route-segments entry) entry))
        ((mount? entry)
         ;; the prefix itself, and anything under it
         (insert! trie (mount-segments entry) entry)
         (insert! trie (append (mount-segments entry) (list (make-param 'rest 'rest))) entry))
        (else (error "make-router: not a route or a mount" entry))))
     entries)
    (%make-router entries trie not-found names #f)))

;; router handlers -> their router, for `handler-router' (bin/plucky
;; routes, url-for across mounts).  Weak keys: a handler dropped is
;; forgotten.
(define routers (make-weak-key-hash-table))

(define (router-handler router)
  "Return the handler of (request body) that answers with ROUTER's
routes: see `dispatch'."
  (or (router-handler* router)
      (let ((handler (lambda (request body) (dispatch router request body))))
        (hashq-set! routers handler router)
        (set-router-handler! router handler)
        handler)))

(define (handler-router handler)
  "Return the router HANDLER answers with: HANDLER is a router's handler,
or a handler middleware made of one (see (plucky web middleware)), or
#f."
  (or (hashq-ref routers handler)
      (let ((inner (procedure-property handler 'plucky-inner-handler)))
        (and inner (handler-router inner)))))

;;;
;;; Dispatch
;;;

(define-inlinable (segment-ok? segment)
  (not (string-null? segment)))

(define (read-param param segment)
  ;; -> the value of SEGMENT as PARAM's type, or #f
  (case (param-type param)
    ((string) (and (segment-ok? segment) segment))
    ((int) (and (< 0 (string-length segment) 19)
                (string-every char-set:digit segment)
                (string->number segment 10)))
    (else #f)))

(define (walk node segments params method allowed)
  ;; -> (entry . params) for the first entry under NODE matching
  ;; SEGMENTS and taking METHOD; ALLOWED, #f or a one-element list,
  ;; collects the methods of the entries that match the path only (a
  ;; second walk, once the first found nothing: the common path
  ;; allocates no box).
  (if (null? segments)
      (or (take-method node params method allowed)
          (walk-rest node segments params method allowed))
      (let ((segment (car segments)))
        (or (let* ((table (node-literals node))
                   (child (and table (hash-ref table segment))))
              (and child (walk child (cdr segments) params method allowed)))
            (let lp ((children (node-params node)))
              (and (pair? children)
                   (or (let* ((param (caar children))
                              (value (read-param param segment)))
                         (and value
                              (walk (cdar children) (cdr segments)
                                    (acons (param-name param) value params)
                                    method allowed)))
                       (lp (cdr children)))))
            (walk-rest node segments params method allowed)))))

(define (walk-rest node segments params method allowed)
  (let ((rest (node-rest node)))
    (and rest
         (take-method (cdr rest)
                      (acons (param-name (car rest)) (string-join segments "/") params)
                      method allowed))))

(define (take-method node params method allowed)
  (let lp ((entries (node-routes node)))
    (and (pair? entries)
         (let ((entry (car entries)))
           (cond
            ((mount? entry) (cons entry params))
            ((or (memq method (route-methods entry))
                 (and (eq? method 'HEAD) (memq 'GET (route-methods entry))))
             (cons entry params))
            (else
             (when allowed
               (set-car! allowed (append (car allowed)
                                         (remove (lambda (m) (memq m (car allowed)))
                                                 (route-methods entry)))))
             (lp (cdr entries))))))))

(define (decode-segment segment)
  ;; -> SEGMENT percent-decoded, or #f when it decodes to invalid UTF-8
  (if (string-index segment #\%)
      (false-if-exception (uri-decode segment #:decode-plus-to-space? #f))
      segment))

(define (request-segments request)
  ;; -> the decoded segments of REQUEST's path, or #f for an invalid
  ;; percent-encoding or a path that is not absolute.  One substring and
  ;; one pair a segment, nothing else: what the router allocates on the
  ;; way is what the collector then costs each request
  ;; (bench/instructions with bench/apps/routes30.scm).
  (let* ((path (uri-path (request-uri request)))
         (end (string-length path)))
    (and (> end 0)
         (eqv? (string-ref path 0) #\/)
         (if (= end 1)
             '()
             (let lp ((start 1) (out '()))
               (let* ((slash (or (string-index path #\/ start end) end))
                      (segment (decode-segment (substring path start slash))))
                 (cond
                  ((not segment) #f)
                  ((= slash end) (reverse! (cons segment out)))
                  (else (lp (+ slash 1) (cons segment out))))))))))

(define (request-mount-prefix request)
  "Return the path prefix REQUEST's app was mounted under (\"/blog\"), or
\"\" for an app that was not mounted."
  (or (assq-ref (request-meta request) 'plucky-mount-prefix) ""))

(define (dispatch router request body)
  "Answer REQUEST, of body BODY, with ROUTER's routes: return the
(values response body) of the route that matches, of a mounted app, or
a 404, 405 (with Allow), 204 (OPTIONS, with Allow) or 400 (a path with
an invalid percent-encoding)."
  (let ((segments (request-segments request))
        (method (request-method request)))
    (if (not segments)
        (values (build-response #:code 400 #:headers '((content-type . (text/plain))))
                "Bad request: the path's percent-encoding is invalid\n")
        (let* ((found (walk (router-trie router) segments '() method #f))
               (allowed (and (not found) (list '())))
               (_ (when allowed (walk (router-trie router) segments '() method allowed))))
          (cond
           (found
            (let ((entry (car found)))
              (if (route? entry)
                  (begin
                    (let ((prefix (request-mount-prefix request)))
                      (note-request-route! (if (string-null? prefix)
                                               (route-pattern entry)
                                               (string-append prefix (route-pattern entry)))))
                    ((route-handler entry) request body (cdr found)))
                  (call-mounted entry request body))))
           ((null? (car allowed))
            ((router-not-found router) request body))
           (else
            (let* ((methods (car allowed))
                   (methods (if (and (memq 'GET methods) (not (memq 'HEAD methods)))
                                (append methods '(HEAD))
                                methods))
                   (allow `((allow . ,methods))))
              (if (eq? method 'OPTIONS)
                  (values (build-response #:code 204 #:headers allow) #f)
                  (values (build-response
                           #:code 405
                           #:headers (append allow '((content-type . (text/plain)))))
                          "Method not allowed\n")))))))))

(define (call-mounted mount request body)
  ;; MOUNT's app, given REQUEST with the prefix taken off its path
  (let* ((uri (request-uri request))
         (prefix (mount-prefix mount))
         ;; the raw path's segments past the prefix's, still encoded
         (inner-path (string-append
                      "/" (string-join (drop (split-path (uri-path uri))
                                             (length (mount-segments mount)))
                                       "/")))
         (outer (request-mount-prefix request)))
    ((mount-handler mount)
     (build-request (build-uri-reference #:path inner-path #:query (uri-query uri))
                    #:method (request-method request)
                    #:version (request-version request)
                    #:headers (request-headers request)
                    #:meta (acons 'plucky-mount-prefix (string-append outer prefix)
                                  (request-meta request))
                    ;; Guile's build-request wants a port for POST and
                    ;; PUT; plucky's requests have none (the body is
                    ;; passed to the handler)
                    #:port (or (request-port request) (open-bytevector-input-port #vu8()))
                    #:validate-headers? #f)
     body)))

;;;
;;; Reverse routing, listing
;;;

(define (encode-param param value)
  (case (param-type param)
    ((int)
     (unless (and (exact-integer? value) (>= value 0))
       (error "url-for: parameter must be a non-negative integer" (param-name param) value))
     (number->string value))
    ((rest)
     (unless (string? value)
       (error "url-for: parameter must be a string" (param-name param) value))
     (string-join (map uri-encode (string-split value #\/)) "/"))
    (else
     (unless (and (string? value) (not (string-null? value)))
       (error "url-for: parameter must be a non-empty string" (param-name param) value))
     (uri-encode value))))

(define (route-path route params)
  (let ((path (string-join
               (map (lambda (segment)
                      (if (string? segment)
                          (uri-encode segment)
                          (let ((value (assq (param-name segment) params)))
                            (unless value
                              (error "url-for: missing parameter" (param-name segment)
                                     (route-pattern route)))
                            (encode-param segment (cdr value)))))
                    (route-segments route))
               "/")))
    (string-append "/" path)))

(define (find-route router name)
  ;; -> (prefix . route) for NAME in ROUTER or the routers mounted in it
  (let ((route (hashq-ref (router-names router) name)))
    (if route
        (cons "" route)
        (any (lambda (entry)
               (and (mount? entry)
                    (let* ((inner (handler-router (mount-handler entry)))
                           (found (and inner (find-route inner name))))
                      (and found (cons (string-append (mount-prefix entry) (car found))
                                       (cdr found))))))
             (router-entries router)))))

(define* (url-for router name #:optional (params '()) #:key (query '()))
  "Return the path (a string) of the route named NAME in ROUTER or in a
router mounted in it, its parameters taken from PARAMS, an alist ((id
. 42)), and percent-encoded; QUERY, an alist of strings, becomes the
query string.  Raise an error for an unknown NAME, a missing parameter
or one of the wrong type."
  (let ((found (find-route router name)))
    (unless found
      (error "url-for: no route named" name))
    (let ((path (route-path (cdr found) params)))
      (string-append
       (car found)
       path
       (if (null? query)
           ""
           (string-append
            "?" (string-join (map (lambda (pair)
                                    (string-append (uri-encode (car pair)) "="
                                                   (uri-encode (cdr pair))))
                                  query)
                             "&")))))))

(define (router-routes router)
  "Return ROUTER's routes as a list of (METHODS PATTERN NAME), the routes
of routers mounted in it included, their patterns after the prefix; a
mounted app that is not a router is listed as (* \"/prefix/*\" NAME)."
  (append-map
   (lambda (entry)
     (if (route? entry)
         (list (list (route-methods entry) (route-pattern entry) (route-name entry)))
         (let ((inner (handler-router (mount-handler entry))))
           (if inner
               (map (lambda (listed)
                      (list (car listed)
                            (string-append (mount-prefix entry) (cadr listed))
                            (caddr listed)))
                    (router-routes inner))
               (list (list '(*) (string-append (mount-prefix entry) "/*")
                           (mount-name entry)))))))
   (router-entries router)))

(define (routes-command args load-app)
  "Print the routes of the app file named in ARGS, loaded with LOAD-APP,
one a line: methods, pattern, name; what `plucky routes APP' does.
Return the exit status."
  (if (= (length args) 1)
     (let* ((file (car args))
            (handler (load-app file))
            (router (handler-router handler)))
       (if (not router)
           (begin
             (format (current-error-port)
                     "plucky: ~a's handler was not made by (plucky web router)~%" file)
             2)
           (let* ((rows (map (lambda (row)
                               (list (string-join (map symbol->string (car row)) ",")
                                     (cadr row)
                                     (if (caddr row) (symbol->string (caddr row)) "")))
                             (router-routes router)))
                  (width (lambda (i) (fold (lambda (row w) (max w (string-length (list-ref row i))))
                                           0 rows))))
             (for-each (lambda (row)
                         (format #t "~va  ~va  ~a~%" (width 0) (car row) (width 1) (cadr row)
                                 (caddr row)))
                       rows)
             0)))
     (begin
       (format (current-error-port) "Usage: plucky routes APP~%")
       2)))

;;;
;;; Query strings
;;;

(define (query-params request)
  "Return the parameters of REQUEST's query string as an alist ((name
. value) …) of strings in the order given (see `urlencoded->alist' of
(plucky web forms)); '() when there is none."
  (let ((query (uri-query (request-uri request))))
    (if query (urlencoded->alist query) '())))

(define* (query-ref request name #:optional (default #f))
  "Return the first value of the query parameter NAME (a string) of
REQUEST, or DEFAULT."
  (let ((pair (assoc name (query-params request))))
    (if pair (cdr pair) default)))

;;; (plucky web router) ends here
