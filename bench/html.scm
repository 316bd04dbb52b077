;;; bench/html.scm --- (plucky web html) against Guile's sxml->xml

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Writes two pages N times each (default 2000) with `write-html' and
;;; with Guile's `sxml->xml', both to a fresh string port per page (what
;;; a handler's body procedure is given), and prints the time per page
;;; in microseconds, the bytes allocated per page, and the ratio Guile /
;;; plucky; then the time of `html->bytevector' (what `html-response'
;;; does: no port) and its ratio.  Time is this process's CPU time, which
;;; the other load of a shared machine disturbs less than the wall
;;; clock's, the fastest of 5 rounds of N/5, the rounds of the writers
;;; alternating; bytes are the last round's.  The last column is the
;;; share of all CPUs that other processes used meanwhile.
;;;
;;;   headers   the page of apps/headers.scm for a browser's request of
;;;             14 header fields (its `headers-page', loaded from the app)
;;;   news      a news front page: 30 stories, each a table row of rank,
;;;             vote link, title link, site, points, user, age and
;;;             comments, in news.arc's markup
;;;
;;;   make && guile -L . -C build bench/html.scm [N]
;;;
;;; Code:

(use-modules (plucky web html)
             (sxml simple)
             (web request)
             (web uri)
             (srfi srfi-11)
             (ice-9 format)
             (ice-9 rdelim)
             (ice-9 threads))

(define n (if (> (length (command-line)) 1) (string->number (cadr (command-line))) 2000))

(define headers-page
  ;; apps/headers.scm's tree builder, from the app itself
  (let ((module (make-fresh-user-module)))
    (save-module-excursion
     (lambda ()
       (set-current-module module)
       (load (string-append (dirname (dirname (current-filename))) "/apps/headers.scm"))))
    (module-ref module 'headers-page)))

(define browser-request
  (build-request
   (string->uri-reference "/headers?lang=en")
   #:headers
   `((host . ("localhost" . 8080))
     (connection . (keep-alive))
     (cache-control . ((max-age . 0)))
     (upgrade-insecure-requests . "1")
     (user-agent . "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36")
     (accept . ((text/html) (application/xhtml+xml) (application/xml (q . 900)) (*/* (q . 800))))
     (sec-fetch-site . "none")
     (sec-fetch-mode . "navigate")
     (sec-fetch-user . "?1")
     (sec-fetch-dest . "document")
     (accept-encoding . ((1000 . "gzip") (1000 . "deflate") (1000 . "br")))
     (accept-language . ((1000 . "en-US") (900 . "en")))
     (cookie . "session=0123456789abcdef; theme=dark")
     (dnt . "1"))))

(define (story i)
  `(tr (@ (class "athing") (id ,(number->string (+ 40000 i))))
       (td (@ (align "right") (valign "top") (class "title"))
           (span (@ (class "rank")) ,(number->string (+ i 1)) "."))
       (td (@ (valign "top") (class "votelinks"))
           (center (a (@ (id ,(string-append "up_" (number->string (+ 40000 i))))
                         (href ,(string-append "vote?id=" (number->string (+ 40000 i))
                                               "&how=up&goto=news")))
                      (div (@ (class "votearrow") (title "upvote"))))))
       (td (@ (class "title"))
           (span (@ (class "titleline"))
                 (a (@ (href ,(string-append "https://example.com/articles/" (number->string i)
                                             "?ref=news&utm=x")))
                    "Show News: a story about <things> & \"other\" things, number "
                    ,(number->string i))
                 (span (@ (class "sitebit comhead"))
                       " (" (a (@ (href "from?site=example.com"))
                               (span (@ (class "sitestr")) "example.com")) ")")))
       (td (@ (class "subtext"))
           (span (@ (class "score")) ,(number->string (* 7 i)) " points")
           " by " (a (@ (href ,(string-append "user?id=user" (number->string i)))
                        (class "hnuser")) ,(string-append "user" (number->string i)))
           " " (span (@ (class "age") (title "2026-11-26T01:00:00"))
                     (a (@ (href ,(string-append "item?id=" (number->string (+ 40000 i)))))
                        ,(number->string (+ 1 (modulo i 23))) " hours ago"))
           " | " (a (@ (href ,(string-append "item?id=" (number->string (+ 40000 i)))))
                    ,(number->string (* 3 i)) " comments"))))

(define (news-page)
  `(html (@ (lang "en"))
         (head (meta (@ (charset "utf-8")))
               (meta (@ (name "viewport") (content "width=device-width, initial-scale=1")))
               (link (@ (rel "stylesheet") (href "/news.css")))
               (title "News"))
         (body
          (center
           (table (@ (id "hnmain") (border "0") (cellpadding "0") (cellspacing "0") (width "85%"))
                  (tr (td (@ (bgcolor "#ff6600"))
                          (span (@ (class "pagetop"))
                                (b (@ (class "hnname")) (a (@ (href "news")) "News"))
                                (a (@ (href "newest")) "new") " | "
                                (a (@ (href "newcomments")) "comments") " | "
                                (a (@ (href "ask")) "ask") " | "
                                (a (@ (href "submit")) "submit"))))
                  (tr (td (table (@ (border "0") (cellpadding "0") (cellspacing "0"))
                                 ,@(map story (iota 30)))))
                  (tr (td (a (@ (href "news?p=2") (class "morelink") (rel "next")) "More"))))))))

(define (time-round thunk count)
  ;; -> (values nanoseconds-per-call bytes-per-call) over COUNT calls
  (let ((allocated (assq-ref (gc-stats) 'heap-total-allocated))
        (start (get-internal-run-time)))
    (do ((i 0 (+ i 1))) ((= i count)) (thunk))
    (values (/ (* (- (get-internal-run-time) start) (/ 1e9 internal-time-units-per-second))
               count)
            (/ (- (assq-ref (gc-stats) 'heap-total-allocated) allocated) count))))

(define (cpu-ticks)
  ;; -> (all CPUs' busy ticks . this process's ticks), from /proc
  (let ((machine (call-with-input-file "/proc/stat"
                   (lambda (port)
                     ;; cpu user nice system idle iowait irq softirq steal
                     (let ((fields (map string->number (cdr (string-tokenize (read-line port))))))
                       (+ (list-ref fields 0) (list-ref fields 1) (list-ref fields 2)
                          (list-ref fields 5) (list-ref fields 6) (list-ref fields 7))))))
        (self (call-with-input-file "/proc/self/stat"
                (lambda (port)
                  ;; utime and stime: fields 14 and 15, after "(comm)"
                  (let* ((line (read-line port))
                         (fields (string-tokenize (substring line (string-rindex line #\))))))
                    (+ (string->number (list-ref fields 12))
                       (string->number (list-ref fields 13))))))))
    (cons machine self)))

(define (others-share before after seconds)
  ;; -> the percent of all CPUs that other processes used over SECONDS
  (let ((others (- (- (car after) (car before)) (- (cdr after) (cdr before)))))
    (* 100.0 (/ (max 0 others) (* seconds 100 (current-processor-count))))))

(define (round-percent x) (inexact->exact (round x)))

(define (compare name tree)
  ;; Rounds of each writer alternate, so that both see the same load.
  (let ((plucky (lambda () (call-with-output-string (lambda (port) (write-html tree port)))))
        (bytes (lambda () (html->bytevector tree)))
        (guile (lambda ()
                 (call-with-output-string
                   (lambda (port)
                     (display "<!DOCTYPE html>\n" port)
                     (sxml->xml tree port)))))
        (per-round (max 1 (quotient n 5))))
    (plucky) (guile) (bytes)            ; warm up the JIT and the tables
    (let ((ticks (cpu-ticks))
          (start (get-internal-real-time)))
      (let lp ((i 0) (p-ns #f) (p-bytes 0) (g-ns #f) (g-bytes 0) (v-ns #f))
        (if (< i 5)
            (let*-values (((p b) (time-round plucky per-round))
                          ((g gb) (time-round guile per-round))
                          ((v vb) (time-round bytes per-round)))
              (lp (+ i 1) (if p-ns (min p p-ns) p) b (if g-ns (min g g-ns) g) gb
                  (if v-ns (min v v-ns) v)))
            (format #t "~8a ~6d B  plucky ~7,1f us ~6d B  sxml->xml ~7,1f us ~6d B  ratio ~5,2fx  \
bytevector ~6,1f us ratio ~5,2fx  others ~d%~%"
                    name (string-length (plucky))
                    (/ p-ns 1000) (round p-bytes) (/ g-ns 1000) (round g-bytes)
                    (/ g-ns p-ns) (/ v-ns 1000) (/ g-ns v-ns)
                    (round-percent (others-share ticks (cpu-ticks)
                                  (/ (- (get-internal-real-time) start)
                                     internal-time-units-per-second 1.0)))))))))

(format #t "pages written ~a times each (fastest of 5 rounds), Guile ~a~%~%" n (version))
(compare "headers" (headers-page browser-request))
(compare "news" (news-page))

;;; bench/html.scm ends here
