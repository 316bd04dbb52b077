;;; (news feeds) --- the news site for programs: RSS and JSON

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; /rss is the front page as RSS 2.0, as news.arc gives it; /items.json
;;; the front page's stories, and /items.json?id=N one item, as JSON
;;; objects with HN's API field names (id, type, by, time, url, title,
;;; text, score, descendants, parent; a field an item has not is left
;;; out).  The object is a JSON type of (plucky web json), `news-item',
;;; whose encoder writes the record straight to bytes.
;;;
;;; Code:

(define-module (news feeds)
  #:use-module (sxml simple)
  #:use-module (ice-9 binary-ports)
  #:use-module ((ice-9 format) #:select (format))
  #:use-module (plucky web json)
  #:use-module (news db)
  #:use-module (news views)
  #:export (rss-feed
            item->json
            items->json))

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

(define-json-type news-item (<news-item> make-news-item news-item?)
  #:encoder news-item->json
  (id news-item-id "id" integer)
  (type news-item-type "type" string)
  (by news-item-by "by" string json-absent)
  (time news-item-time "time" integer)
  (url news-item-url "url" string json-absent)
  (title news-item-title "title" string json-absent)
  (text news-item-text "text" string json-absent)
  (score news-item-score "score" integer json-absent)
  (descendants news-item-descendants "descendants" integer json-absent)
  (parent news-item-parent "parent" integer json-absent))

(define (item->news-item item)
  (define (field value) (or value json-absent))
  (make-news-item (item-id item)
                  (symbol->string (item-type item))
                  (field (item-by item))
                  (item-time item)
                  (field (item-url item))
                  (field (item-title item))
                  (field (item-text item))
                  (field (item-score item))
                  (if (eq? (item-type item) 'story) (field (item-descendants item)) json-absent)
                  (field (item-parent item))))

(define (item->json item)
  "Return ITEM as a JSON object, UTF-8 in a bytevector."
  (news-item->json (item->news-item item)))

(define (items->json items)
  "Return the list ITEMS as a JSON array of objects, UTF-8 in a
bytevector."
  (call-with-values open-bytevector-output-port
    (lambda (port get-bytes)
      (put-u8 port 91)                  ; [
      (let lp ((items items) (first? #t))
        (unless (null? items)
          (unless first? (put-u8 port 44)) ; ,
          (news-item->json (item->news-item (car items)) port)
          (lp (cdr items) #f)))
      (put-u8 port 93)                  ; ]
      (get-bytes))))

