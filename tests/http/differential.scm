;;; tests/http/differential.scm --- plucky's request parser against Guile's read-request

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Every file of tests/data/requests is the head of a request a real
;;; client sent (curl, wget, ab, wrk, Python, Go, Node, Java, Perl, Guile,
;;; git, pip, npm, text browsers, headless Chromium and Firefox; see the
;;; README there and scripts/capture-requests).  Each one is parsed twice:
;;;
;;;   - by `parse-request-head' of (plucky http parse), whole;
;;;   - by Guile's `read-request' on a bytevector input port;
;;;
;;; and the two (web request) records must agree on the method, every
;;; field of the URI, the version, the header names in order and each
;;; header's value under `equal?', each checked on its own so that a
;;; failure names the file and the header.  plucky must also consume the
;;; head exactly: the index it returns is the length of the file.
;;;
;;; Where plucky differs from Guile on purpose, the file is listed in
;;; `*deliberate-differences*' with the kind of difference and why, and
;;; the test checks that difference precisely instead of skipping:
;;;
;;;   unknown-method   Guile knows nine methods and raises on any other;
;;;                    plucky takes any token and interns it.  Checked:
;;;                    Guile refuses, plucky's method is the token as a
;;;                    symbol, and the rest agrees with Guile reading the
;;;                    same head with the method replaced by GET.
;;;   (raw-header H)   Guile's parser for header H rejects the value, and
;;;                    then `read-request' raises and Guile's server
;;;                    answers 400; plucky keeps the value as the raw
;;;                    string.  Checked: Guile refuses, plucky's H is the
;;;                    string as sent less surrounding whitespace, and the
;;;                    rest agrees with Guile reading the head without H.
;;;   authority-form   CONNECT host:port.  Guile reads "host" as a URI
;;;                    scheme and "port" as the path; plucky gives a URI
;;;                    of just host and port.  Checked: those URI fields;
;;;                    the rest agrees with Guile.
;;;   asterisk-form    OPTIONS *.  Guile's URI is #f; plucky's is a URI
;;;                    whose path is "*".  Checked: that; the rest agrees.
;;;   (refused STATUS) plucky refuses what Guile accepts, where accepting
;;;                    is a smuggling risk (obs-fold: Guile joins the
;;;                    lines).  Checked: plucky answers an &http-error
;;;                    with STATUS, and Guile did accept it.
;;;
;;; An entry is checked in both directions: if Guile stops refusing a
;;; listed value, the test fails and the entry must go.
;;;
;;; Besides the comparison, every file is fed split at every byte
;;; boundary: each prefix [0, k), copied into a bytevector of exactly k
;;; bytes so that a read past the end raises, must give `incomplete'
;;; (or, for a refused file, `incomplete' until the bad byte and then the
;;; same error); the whole head, placed at an offset inside a larger
;;; bytevector with other bytes before and after it (a pipelined
;;; request), must give the same request and the index just past it.
;;; The corpus must hold at least `*minimum-corpus-size*' files, so that
;;; the test fails if it shrinks.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (tests lib harness)
             (ice-9 ftw)
             (ice-9 match)
             (rnrs bytevectors)
             (rnrs io ports)
             (web request)
             (web uri)
             (plucky http error)
             (plucky http parse))

(define *minimum-corpus-size* 200)

(define *deliberate-differences*
  ;; file -> (kind reason), KIND as in the Commentary
  '(("curl-mkcol.http" unknown-method
     "WebDAV MKCOL: Guile refuses methods outside its nine")
    ("curl-propfind.http" unknown-method
     "WebDAV PROPFIND: Guile refuses methods outside its nine")
    ("curl-purge.http" unknown-method
     "PURGE, as sent to caches: Guile refuses methods outside its nine")
    ("go-nethttp-custom-method.http" unknown-method
     "CalDAV REPORT from Go: Guile refuses methods outside its nine")
    ("curl-range-items-dojo.http" (raw-header range)
     "Dojo's JsonRest sends Range: items=0-24; Guile parses only bytes ranges")
    ("chromium-fetch-dojo-store.http" (raw-header range)
     "Dojo's JsonRest sends Range: items=0-24; Guile parses only bytes ranges")
    ("firefox-fetch-dojo-store.http" (raw-header range)
     "Dojo's JsonRest sends Range: items=0-24; Guile parses only bytes ranges")
    ("curl-content-type-trailing-semicolon.http" (raw-header content-type)
     "a stray ';' after the last parameter, common in the wild; Guile refuses it")
    ("python-httpclient-if-modified-since-length.http" (raw-header if-modified-since)
     "Netscape and old IE appended '; length=N' to the date; Guile refuses it")
    ("curl-connect-tunnel-1.http" authority-form
     "Guile reads CONNECT example.org:80 as scheme example.org, path 80")
    ("curl-options-star.http" asterisk-form
     "Guile's URI for OPTIONS * is #f")
    ("python-httpclient-options.http" asterisk-form
     "Guile's URI for OPTIONS * is #f")
    ("python-httpclient-putrequest.http" (refused 400)
     "http.client's putheader with two values folds the line (obs-fold); RFC 9112
      §5.2 lets a server refuse it, and plucky does: a proxy may join it differently")))


;;;
;;; Reading the corpus and the two parsers
;;;

(define corpus-directory (test-data-file "requests"))

(define corpus-files
  (or (scandir corpus-directory (lambda (name) (string-suffix? ".http" name)))
      '()))

(define (read-corpus-file name)
  (call-with-input-file (string-append corpus-directory "/" name)
    get-bytevector-all #:binary #t))

(define (guile-parse bv)
  ;; -> a request, or (raised KEY ARGS) for what read-request threw
  (catch #t
    (lambda () (read-request (open-bytevector-input-port bv)))
    (lambda (key . args) (list 'raised key args))))

(define (guile-raised? result) (and (pair? result) (eq? (car result) 'raised)))

(define (plucky-parse bv start end)
  ;; -> (result index); (raised KEY ARGS) as result if the parser threw
  (catch #t
    (lambda () (call-with-values (lambda () (parse-request-head bv start end)) list))
    (lambda (key . args) (list (list 'raised key args) #f))))

(define (describe result)
  ;; -> something readable in a failure report
  (cond
   ((request? result) 'request)
   ((http-error? result)
    (list 'http-error (http-error-status result) (http-error-reason result)
          (http-error-offset result)))
   (else result)))

(define (uri-fields uri)
  ;; -> (scheme userinfo host port path query fragment), or #f
  (and uri
       (list (uri-scheme uri) (uri-userinfo uri) (uri-host uri) (uri-port uri)
             (uri-path uri) (uri-query uri) (uri-fragment uri))))


;;;
;;; Editing a head, to let Guile read what it can of a deliberate difference
;;;

(define (latin-1->string bv)
  ;; Guile reads a request as latin-1: one byte, one character.
  (list->string (map integer->char (bytevector->u8-list bv))))

(define (string->latin-1 str)
  (u8-list->bytevector (map char->integer (string->list str))))

(define (head-lines bv)
  ;; -> the lines of the head, decoded as latin-1 like Guile does, without
  ;;    their CRLF and without the final empty line
  (let loop ((text (latin-1->string bv)) (lines '()))
    (let ((crlf (string-contains text "\r\n")))
      (if (or (not crlf) (zero? crlf))
          (reverse lines)
          (loop (substring text (+ crlf 2)) (cons (substring text 0 crlf) lines))))))

(define (lines->head lines)
  (string->latin-1 (string-append (string-join lines "\r\n") "\r\n\r\n")))

(define (field-line-name line)
  ;; -> the header symbol of a field line, lower-cased as Guile does, or #f
  (let ((colon (string-index line #\:)))
    (and colon (string->symbol (string-downcase (substring line 0 colon))))))

(define (raw-field-value bv name)
  ;; -> the value of the first field NAME as sent, without the whitespace
  ;;    around it
  (any (lambda (line)
         (and (eq? (field-line-name line) name)
              (string-trim-both (substring line (+ 1 (string-index line #\:)))
                                (char-set #\space #\tab))))
       (cdr (head-lines bv))))

(define (head-without-field bv name)
  (let ((lines (head-lines bv)))
    (lines->head (cons (car lines)
                       (remove (lambda (line) (eq? (field-line-name line) name))
                               (cdr lines))))))

(define (head-with-method bv method)
  ;; -> the head with the method token of its request line replaced
  (let* ((lines (head-lines bv))
         (line (car lines)))
    (lines->head (cons (string-append method (substring line (string-index line #\space)))
                       (cdr lines)))))

(define (request-line-method bv)
  (let ((line (car (head-lines bv))))
    (substring line 0 (string-index line #\space))))


;;;
;;; Comparing two requests, one check per part
;;;

(define* (compare-requests file plucky guile #:key (method? #t) (uri? #t)
                           (without-header #f))
  ;; PLUCKY and GUILE are requests.  Leave out the parts the caller checks
  ;; itself: the method, the URI, the header WITHOUT-HEADER.
  (define (label what) (string-append file ": " what))
  (when method?
    (test-equal (label "method") (request-method guile) (request-method plucky)))
  (when uri?
    (test-equal (label "uri") (uri-fields (request-uri guile))
                (uri-fields (request-uri plucky))))
  (test-equal (label "version") (request-version guile) (request-version plucky))
  (let ((plucky-headers (remove (lambda (h) (eq? (car h) without-header))
                                (request-headers plucky)))
        (guile-headers (request-headers guile)))
    (test-equal (label "header names")
                (map car guile-headers) (map car plucky-headers))
    (when (equal? (map car guile-headers) (map car plucky-headers))
      (for-each (lambda (g p)
                  (test-equal (label (string-append "header " (symbol->string (car g))))
                              (cdr g) (cdr p)))
                guile-headers plucky-headers))))

(define (deliberate-difference file)
  ;; -> (kind reason) or #f
  (let ((entry (assoc file *deliberate-differences*)))
    (and entry (cdr entry))))

(define (expected-status file)
  ;; -> the status plucky must refuse FILE with, or #f if it must accept it
  (match (deliberate-difference file)
    ((('refused status) reason) status)
    (_ #f)))

(define (check-file file)
  (let* ((bv (read-corpus-file file))
         (plucky (plucky-parse bv 0 (bytevector-length bv)))
         (result (car plucky))
         (index (cadr plucky))
         (guile (guile-parse bv)))
    (define (label what) (string-append file ": " what))
    (define (plucky-accepted)
      ;; -> #t when plucky gave a request for the whole head
      (test-equal (label "plucky parses it") 'request (describe result))
      (and (request? result)
           (begin (test-equal (label "index is the end of the head")
                              (bytevector-length bv) index)
                  #t)))
    (match (deliberate-difference file)
      (#f
       (test-equal (label "Guile parses it") 'request (describe guile))
       (when (and (plucky-accepted) (not (guile-raised? guile)))
         (compare-requests file result guile)))
      (('unknown-method reason)
       (test-assert (label "Guile refuses the method") (guile-raised? guile))
       (when (plucky-accepted)
         (test-equal (label "method") (string->symbol (request-line-method bv))
                     (request-method result))
         (let ((guile (guile-parse (head-with-method bv "GET"))))
           (test-equal (label "Guile parses it as GET") 'request (describe guile))
           (unless (guile-raised? guile)
             (compare-requests file result guile #:method? #f)))))
      ((('raw-header name) reason)
       (test-assert (label (format #f "Guile refuses header ~a" name)) (guile-raised? guile))
       (when (plucky-accepted)
         (test-equal (label (format #f "header ~a is the raw string" name))
                     (raw-field-value bv name)
                     (assq-ref (request-headers result) name))
         (let ((guile (guile-parse (head-without-field bv name))))
           (test-equal (label (format #f "Guile parses it without ~a" name))
                       'request (describe guile))
           (unless (guile-raised? guile)
             (compare-requests file result guile #:without-header name)))))
      (('authority-form reason)
       (test-assert (label "Guile reads the host as a URI scheme")
         (and (request? guile)
              (uri-scheme (request-uri guile))
              (not (uri-host (request-uri guile)))))
       (when (plucky-accepted)
         (let ((line (car (head-lines bv))))
           (test-equal (label "authority-form URI")
                       (let* ((target (cadr (string-split line #\space)))
                              (colon (string-rindex target #\:)))
                         (list #f #f (substring target 0 colon)
                               (string->number (substring target (+ colon 1))) "" #f #f))
                       (uri-fields (request-uri result))))
         (unless (guile-raised? guile)
           (compare-requests file result guile #:uri? #f))))
      (('asterisk-form reason)
       (test-equal (label "Guile parses it") 'request (describe guile))
       (unless (guile-raised? guile)
         (test-equal (label "Guile's URI") #f (request-uri guile)))
       (when (plucky-accepted)
         (test-equal (label "asterisk-form URI") '(#f #f #f #f "*" #f #f)
                     (uri-fields (request-uri result)))
         (unless (guile-raised? guile)
           (compare-requests file result guile #:uri? #f))))
      ((('refused status) reason)
       (test-equal (label "Guile accepts it") 'request (describe guile))
       (test-equal (label "plucky refuses it") (list 'http-error status)
                   (let ((d (describe result)))
                     (if (pair? d) (list-head d 2) d)))))))


;;;
;;; Feeding a head in pieces
;;;

(define (prefix bv k)
  ;; -> a fresh bytevector of the first K bytes of BV, so that reading
  ;;    past K raises instead of seeing the rest of the head
  (let ((copy (make-bytevector k)))
    (bytevector-copy! bv 0 copy 0 k)
    copy))

(define (split-failures file)
  ;; -> ((k . what) ...) for each prefix length K whose answer is wrong:
  ;;    `incomplete' for a head plucky accepts, and for one it refuses
  ;;    `incomplete' until some prefix, then the same status from there on
  (let* ((bv (read-corpus-file file))
         (n (bytevector-length bv))
         (status (expected-status file)))
    (let loop ((k 0) (refused? #f) (failures '()))
      (if (= k n)
          (reverse failures)
          (let* ((result (car (plucky-parse (prefix bv k) 0 k)))
                 (ok? (cond
                       ((eq? result 'incomplete) (not refused?))
                       ((and status (http-error? result))
                        (= status (http-error-status result)))
                       (else #f))))
            (loop (+ k 1)
                  (or refused? (http-error? result))
                  (if ok? failures (cons (cons k (describe result)) failures))))))))

(define *before* (string->utf8 "\r\nleftover"))
(define *after* (string->utf8 "GET /next HTTP/1.1\r\nHost: pipelined\r\n\r\n"))

(define (embedded-parse bv)
  ;; -> (result index) for BV placed after *before* and followed by *after*
  (let* ((n (bytevector-length bv))
         (start (bytevector-length *before*))
         (big (make-bytevector (+ start n (bytevector-length *after*)))))
    (bytevector-copy! *before* 0 big 0 start)
    (bytevector-copy! bv 0 big start n)
    (bytevector-copy! *after* 0 big (+ start n) (bytevector-length *after*))
    (plucky-parse big start (bytevector-length big))))


;;;
;;; The tests
;;;

(test-begin "http/differential")

(test-group "corpus"
  (test-assert (format #f "at least ~a request files (found ~a)"
                       *minimum-corpus-size* (length corpus-files))
    (<= *minimum-corpus-size* (length corpus-files)))
  (for-each
   (lambda (file)
     (let* ((bv (read-corpus-file file))
            (text (latin-1->string bv)))
       (test-assert (string-append file ": one head, CRLF line ends, ending in a blank line")
         (and (string-suffix? "\r\n\r\n" text)
              (= (string-contains text "\r\n\r\n") (- (string-length text) 4))
              (every (lambda (i) (and (> i 0) (char=? (string-ref text (- i 1)) #\return)))
                     (let loop ((i 0) (found '()))
                       (let ((lf (string-index text #\newline i)))
                         (if lf (loop (+ lf 1) (cons lf found)) found))))))))
   corpus-files)
  (for-each
   (lambda (entry)
     (test-assert (string-append "listed difference " (car entry) " is in the corpus")
       (member (car entry) corpus-files)))
   *deliberate-differences*))

(test-group "parse-request-head against read-request"
  (for-each check-file corpus-files))

(test-group "parse-request-head split at every byte"
  (for-each
   (lambda (file)
     (test-equal (string-append file ": every proper prefix") '() (split-failures file)))
   corpus-files))

(test-group "parse-request-head inside a larger buffer"
  (for-each
   (lambda (file)
     (unless (expected-status file)
       (let* ((bv (read-corpus-file file))
              (whole (plucky-parse bv 0 (bytevector-length bv)))
              (embedded (embedded-parse bv)))
         (test-equal (string-append file ": index just past the head")
                     (+ (bytevector-length *before*) (bytevector-length bv))
                     (cadr embedded))
         (test-assert (string-append file ": the same request")
           (and (request? (car embedded)) (equal? (car whole) (car embedded)))))))
   corpus-files))

(test-end "http/differential")

;;; tests/http/differential.scm ends here
