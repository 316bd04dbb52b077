;;; (news site) --- the news site's state in a worker, its caches, and the helpers of its pages

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; What the pages of (news app) share: the <site> record (the
;;; database's file, this process's connection, the caches), the
;;; reading of a request's fields, and the making of a response.
;;;
;;; Caching, what makes the front page cheap: ranking the latest 1,000
;;; stories takes milliseconds, so the ranked list is kept and made
;;; again when the data changes (`db-version', one indexed read a
;;; request) or a minute has passed (ages move ranks slowly; news.arc
;;; itself re-ranks a random story every 30 seconds).  For visitors who
;;; are not logged in, the whole page is kept as bytes, as news.arc does
;;; for them, under the same key and the minute (its "N minutes ago"):
;;; `cached-page'.  A logged-in viewer's page is kept too, per viewer,
;;; split where the CSRF token goes, and each response gets a token
;;; masked afresh there (`cached-user-page'), and a form key made afresh
;;; (`form-key').  Each worker keeps its own
;;; copy.
;;;
;;; A cache filled once: when the data change or the minute turns, all
;;; the requests a worker holds miss at once.  On SQLite the first makes
;;; the page without letting go of the loop, and the rest find it; on
;;; PostgreSQL its queries suspend it, and each of the others would make
;;; the same page (a hundred rankings of 1,000 stories at once: seconds
;;; of stall, bench/news-pg).  So a miss whose key another request of the
;;; worker is filling waits for that fill and looks again (`fill-once').
;;;
;;; Code:

(define-module (news site)
  #:use-module (srfi srfi-9)
  #:use-module (rnrs bytevectors)
  #:use-module (web request)
  #:use-module (web response)
  #:use-module (web uri)
  #:use-module ((plucky server) #:select (current-request-peer suspendable? make-event
                                          event-wait event-signal!))
  #:use-module ((plucky web html) #:select (html-response))
  #:use-module ((plucky web middleware) #:select (redirect))
  #:use-module ((plucky web timing) #:select (with-phase))
  #:use-module ((plucky web forms) #:select (urlencoded->alist))
  #:use-module ((plucky web session) #:select (session-ref))
  #:use-module ((plucky web csrf) #:select (csrf-token))
  #:use-module ((plucky web crypto) #:select (random-bytes bytes->base64url))
  #:use-module (news db)
  #:use-module ((news views) #:select (per-page))
  #:export (form-params
            param
            int-param
            peer-address
            client-address
            html
            html-status
            safe-whence
            make-site
            site?
            site-file
            site-pool
            site-origin*
            site-logins
            site-db
            now
            current-user
            csrf-or-empty
            form-token
            form-key
            ranked
            page-slice
            voted-on
            cached-page
            cached-user-page
            cached-thread))

;;; Requests.

(define (form-params request body)
  (if (and body (bytevector? body))
      (urlencoded->alist body)
      '()))

(define (param params name)
  (assoc-ref params name))

(define (int-param params name)
  ;; -> a positive integer, or #f for anything else ("363/blank.php").
  (let ((text (param params name)))
    (and text
         (<= 1 (string-length text) 18)
         (string-every char-set:digit text)
         (string->number text))))

(define (peer-address request)
  ;; The client's address as the server saw it; never a header the
  ;; client could have written.
  (or (current-request-peer) "unknown"))

(define client-address
  ;; Set by `make-news-app' (tests give each visitor an address).
  (make-parameter peer-address))

;;; Responses.

;; A page's making, from its SXML tree to its bytes, is the request's
;; phase 'render (plucky web timing); the queries made meanwhile count as
;; 'db (see (news db)).  Macros, so that the tree is built inside the
;; phase.
(define-syntax-rule (html tree)
  (with-phase 'render (lambda () (html-response tree))))

(define-syntax-rule (html-status code tree)
  (with-phase 'render (lambda () (html-response tree #:code code))))

(define (safe-whence text)
  ;; Where to go back after a vote or a login: a relative path of this
  ;; site only, never "//host" or "http://…" (an open redirect).
  (if (and text
           (> (string-length text) 0)
           (< (string-length text) 200)
           (not (string-index text #\:))
           (not (string-prefix? "/" text))
           (not (string-prefix? "\\" text))
           (string-every (char-set-union char-set:letter+digit (string->char-set "?=&_-.%"))
                         text))
      text
      "news"))

;;; The app.

(define-record-type <site>
  (make-site file pool connection ranked ranked-key pages threads logins origin fills)
  site?
  (file site-file)                               ; an SQLite file, or a PostgreSQL URL
  (pool site-pool)                               ; PostgreSQL: this app's pool, or #f
  (origin site-origin*)                          ; "https://host", or #f: the request's
  (logins site-logins)                           ; <rate-limit>: failed logins
  (connection site-connection set-site-connection!) ; (pid . <news-db>)
  (ranked site-ranked set-site-ranked!)          ; list of <item>, rank order
  (ranked-key site-ranked-key set-site-ranked-key!) ; (version . minute)
  (pages site-pages)                             ; (target version minute) -> bytevector
  (threads site-threads)                         ; story id -> (version . comments)
  (fills site-fills))                            ; a cache's key -> event: a fill in flight

(define (site-db site)
  ;; This process's connection, opened at its first request; a process
  ;; forked since gets its own, and the caches start empty with it.
  (let ((connection (site-connection site)))
    (if (and connection (eqv? (car connection) (getpid)))
        (cdr connection)
        (let ((db (open-news-db (site-file site) #:pool (site-pool site))))
          (set-site-connection! site (cons (getpid) db))
          (set-site-ranked-key! site #f)
          (hash-clear! (site-pages site))
          (hash-clear! (site-threads site))
          (hash-clear! (site-fills site))
          db))))

(define fill-wait-ms 2000)              ; then the fill is deemed lost, and taken over

(define (fill-once site key lookup make)
  ;; -> (LOOKUP)'s true value, else MAKE's values, MAKE filling KEY's
  ;; entry.  While another request of this worker fills KEY (it waits on
  ;; the database), wait for it and look again; a fill that does not
  ;; end within `fill-wait-ms' (its request dropped at a wait) is taken
  ;; over.
  (let loop ()
    (or (lookup)
        (let ((pending (hash-ref (site-fills site) key)))
          (if (and pending (suspendable?))
              (begin
                (when (eq? 'late (event-wait pending #:timeout-ms fill-wait-ms #:default 'late
                                             #:kind 'cache-fill))
                  (when (eq? pending (hash-ref (site-fills site) key))
                    (hash-remove! (site-fills site) key)))
                (loop))
              (let ((event (make-event)))
                (define (done!)
                  (when (eq? event (hash-ref (site-fills site) key))
                    (hash-remove! (site-fills site) key))
                  (event-signal! event))
                (hash-set! (site-fills site) key event)
                (call-with-values
                    (lambda ()
                      (with-exception-handler
                          (lambda (e) (done!) (raise-exception e))
                        make))
                  (lambda results
                    (done!)
                    (apply values results)))))))))

(define (now) (current-time))

(define (current-user site)
  (let ((name (session-ref "user")))
    (and name (user-ref (site-db site) name))))

(define (csrf-or-empty site)
  (if (current-user site) (form-token) ""))

;; What the pages below put in their forms and logout link: the session's
;; CSRF token, masked afresh for each response, or, while a page is
;; rendered for `cached-user-page', a marker that it replaces with one.
;; The marker is made of letters, as the token is of base64url's
;; characters: both are written into the page as they are.  A form that
;; posts a story or a comment carries a key of its own too (`form-key'),
;; fresh in each response in the same way, under a marker of its own.
(define (random-marker)
  (let ((state (random-state-from-platform)))
    (list->string (map (lambda (_) (integer->char (+ 97 (random 26 state))))
                       (iota 40)))))

(define token-marker (random-marker))
(define key-marker (random-marker))

(define rendering-for-cache? (make-parameter #f))

(define (form-token)
  (if (rendering-for-cache?) token-marker (csrf-token)))

(define (fresh-form-key)
  ;; 128 random bits: no two forms ever get the same key
  (bytes->base64url (random-bytes 16)))

(define (form-key)
  "Return the key a form that posts a story or a comment carries (its
field \"key\"): a string no other response has, with which the site
stores what the form posts once however often it is sent."
  (if (rendering-for-cache?) key-marker (fresh-form-key)))

(define (ranked site)
  (let* ((db (site-db site))
         (t (now))
         (key (cons (db-version db) (quotient t 60))))
    (fill-once site (cons 'ranked key)
               (lambda ()
                 (and (equal? key (site-ranked-key site)) (site-ranked site)))
               (lambda ()
                 (let ((stories (ranked-stories db t)))
                   (set-site-ranked! site stories)
                   (set-site-ranked-key! site key)
                   stories)))))

(define (page-slice items page)
  (let* ((start (* (- page 1) per-page))
         (len (length items)))
    (if (>= start len)
        (values '() #f)
        (let ((end (min len (+ start per-page))))
          (values (list-head (list-tail items start) (- end start))
                  (< end len))))))

(define (voted-on db user items)
  (if user
      (votes-by-user-on db (user-name user) (map item-id items))
      '()))

(define* (cached-page site request make #:optional (origin ""))
  ;; The page's bytes, kept per (target, version, minute) for visitors
  ;; not logged in, as news.arc keeps its pages for them; per ORIGIN
  ;; too for a page whose links take the request's.
  (let* ((target (uri->string (request-uri request)))
         (key (list (if (string-null? origin) target (string-append origin target))
                    (db-version (site-db site))
                    (quotient (now) 60)))
         (hit (fill-once site key
                         (lambda () (hash-ref (site-pages site) key))
                         (lambda ()
                           (call-with-values make
                             (lambda (response body)
                               (when (and (or (not (response? response))
                                              (= 200 (response-code response)))
                                          (or (bytevector? body) (string? body)))
                                 (when (> (hash-count (const #t) (site-pages site)) 1000)
                                   (hash-clear! (site-pages site)))
                                 (hash-set! (site-pages site) key (cons response body)))
                               (cons response body)))))))
    (values (car hit) (cdr hit))))

(define (cached-user-page site request name make)
  ;; The page of viewer NAME, who is logged in: theirs alone (their
  ;; votes' arrows, their name and karma, their token in every form), yet
  ;; it changes no more often than a visitor's.  Kept per viewer under
  ;; the visitors' key, as the bytes between the places of the CSRF
  ;; token; each response gets a token masked afresh in those places
  ;; (bench/news: the front page logged in).
  (let* ((key (list (uri->string (request-uri request))
                    (db-version (site-db site))
                    (quotient (now) 60)
                    name))
         (hit (fill-once
               site key
               (lambda () (hash-ref (site-pages site) key))
               (lambda ()
                 (call-with-values (lambda () (parameterize ((rendering-for-cache? #t)) (make)))
                   (lambda (response body)
                     (if (bytevector? body)
                         (let ((chunks (split-at-markers body)))
                           (when (or (not (response? response)) (= 200 (response-code response)))
                             (when (> (hash-count (const #t) (site-pages site)) 1000)
                               (hash-clear! (site-pages site)))
                             (hash-set! (site-pages site) key (cons response chunks)))
                           (cons response chunks))
                         ;; not a page with forms (a feed, JSON): no token
                         ;; in it, and not kept
                         (vector response body))))))))
    (if (vector? hit)
        (values (vector-ref hit 0) (vector-ref hit 1))
        (values (car hit) (splice-token (cdr hit))))))

(define markers
  ;; what a cached page holds in place of each value made per response
  (list (cons 'token (string->utf8 token-marker))
        (cons 'key (string->utf8 key-marker))))

(define (split-at-markers bytes)
  ;; -> (CHUNK KIND CHUNK KIND … CHUNK): the bytevectors of BYTES between
  ;; the occurrences of the markers, each KIND the marker's ('token, 'key)
  (define (marker-at i)
    (let find ((markers markers))
      (and (pair? markers)
           (let* ((marker (cdar markers))
                  (n (bytevector-length marker)))
             (if (and (<= (+ i n) (bytevector-length bytes))
                      (let lp ((j 0))
                        (or (= j n)
                            (and (= (bytevector-u8-ref bytes (+ i j))
                                    (bytevector-u8-ref marker j))
                                 (lp (+ j 1))))))
                 (car markers)
                 (find (cdr markers)))))))
  (define (chunk start end)
    (let ((out (make-bytevector (- end start))))
      (bytevector-copy! bytes start out 0 (- end start))
      out))
  (let lp ((i 0) (start 0) (parts '()))
    (cond
     ((= i (bytevector-length bytes))
      (reverse (cons (chunk start i) parts)))
     ((marker-at i)
      => (lambda (marker)
           (let ((end (+ i (bytevector-length (cdr marker)))))
             (lp end end (cons* (car marker) (chunk start i) parts)))))
     (else (lp (+ i 1) start parts)))))

(define (splice-token parts)
  ;; -> PARTS (from `split-at-markers') joined, each marker replaced: by
  ;; a freshly masked CSRF token, by a fresh form key
  (let* ((token (string->utf8 (csrf-token)))
         (key (and (memq 'key parts) (string->utf8 (fresh-form-key))))
         (pieces (map (lambda (part)
                        (case part
                          ((token) token)
                          ((key) key)
                          (else part)))
                      parts))
         (out (make-bytevector (apply + (map bytevector-length pieces)))))
    (let lp ((pieces pieces) (at 0))
      (unless (null? pieces)
        (let ((n (bytevector-length (car pieces))))
          (bytevector-copy! (car pieces) 0 out at n)
          (lp (cdr pieces) (+ at n)))))
    out))

(define (cached-thread site story)
  ;; STORY's comments, read again only when the data has changed.
  (let* ((db (site-db site))
         (version (db-version db)))
    (fill-once site (list 'thread story version)
               (lambda ()
                 (let ((hit (hash-ref (site-threads site) story)))
                   (and hit (equal? (car hit) version) (cdr hit))))
               (lambda ()
                 (let ((comments (thread-comments db story)))
                   (when (> (hash-count (const #t) (site-threads site)) 200)
                     (hash-clear! (site-threads site)))
                   (hash-set! (site-threads site) story (cons version comments))
                   comments)))))

;;; (news site) ends here
