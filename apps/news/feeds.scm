;;; (news feeds) --- the news site for programs: RSS

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; /rss is the front page as RSS 2.0, as news.arc gives it.  The JSON
;;; feed, /items.json, is (news json), a module of its own because
;;; (news app) loads it at its first request (see there).
;;;
;;; Code:

(define-module (news feeds)
  ;; (sxml simple) brings Guile's XML parser too: loaded at the first
  ;; feed (tests/apps/lazy.scm)
  #:autoload (sxml simple) (sxml->xml)
  #:use-module ((ice-9 format) #:select (format))
  #:use-module (news db)
  #:use-module (news views)
  #:export (rss-feed))

(define day-names #("Sun" "Mon" "Tue" "Wed" "Thu" "Fri" "Sat"))
(define month-names #("Jan" "Feb" "Mar" "Apr" "May" "Jun" "Jul" "Aug" "Sep" "Oct" "Nov" "Dec"))

(define (rfc-822-date seconds)
  ;; "Sun, 29 Nov 2026 07:43:56 +0000", RSS's date, in English whatever
  ;; the locale
  (let ((t (gmtime seconds)))
    (format #f "~a, ~2,'0d ~a ~d ~2,'0d:~2,'0d:~2,'0d +0000"
            (vector-ref day-names (tm:wday t)) (tm:mday t)
            (vector-ref month-names (tm:mon t)) (+ 1900 (tm:year t))
            (tm:hour t) (tm:min t) (tm:sec t))))

(define (rss-feed stories now base)
  "Return STORIES as an RSS 2.0 document, a string; its links are
absolute, starting with BASE, the site's URL (\"https://host/news/\"),
and each item has its pubDate."
  (call-with-output-string
    (lambda (port)
      (display "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n" port)
      (sxml->xml
       `(rss (@ (version "2.0"))
          (channel
           (title ,site-name)
           (link ,(string-append base "news"))
           (description "Links for the curious, on plucky.")
           ,@(map (lambda (item)
                    (let ((link (string-append base "item?id=" (number->string (item-id item)))))
                      `(item (title ,(item-title item))
                             (link ,(or (item-url item) link))
                             (comments ,link)
                             (pubDate ,(rfc-822-date (item-time item)))
                             (guid (@ (isPermaLink "false")) ,(number->string (item-id item))))))
                  stories)))
       port))))
