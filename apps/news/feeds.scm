;;; (news feeds) --- the news site for programs: RSS and JSON

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; /rss is the front page as RSS 2.0, as news.arc gives it; /items.json
;;; the front page's stories, and /items.json?id=N one item, as JSON
;;; objects with HN's API field names (id, type, by, time, url, title,
;;; text, score, descendants, parent).  JSON is written by Debian's
;;; guile-json for now; (plucky web json) will take its place.
;;;
;;; Code:

(define-module (news feeds)
  #:use-module (ice-9 match)
  #:use-module (sxml simple)
  #:use-module (web response)
  #:use-module (json)
  #:use-module (news db)
  #:use-module (news views)
  #:export (rss-feed
            item->json-alist
            json-response))

(define (rss-feed stories now)
  "Return STORIES as an RSS 2.0 document, a string."
  (call-with-output-string
    (lambda (port)
      (display "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n" port)
      (sxml->xml
       `(rss (@ (version "2.0"))
          (channel
           (title ,site-name)
           (link "news")
           (description "Links for the curious, on plucky.")
           ,@(map (lambda (item)
                    (let ((link (string-append "item?id=" (number->string (item-id item)))))
                      `(item (title ,(item-title item))
                             (link ,(or (item-url item) link))
                             (comments ,link)
                             (guid (@ (isPermaLink "false")) ,(number->string (item-id item))))))
                  stories)))
       port))))

(define (item->json-alist item)
  "Return ITEM as an alist guile-json writes as an object."
  (filter-pairs
   `(("id" . ,(item-id item))
     ("type" . ,(symbol->string (item-type item)))
     ("by" . ,(item-by item))
     ("time" . ,(item-time item))
     ("url" . ,(item-url item))
     ("title" . ,(item-title item))
     ("text" . ,(item-text item))
     ("score" . ,(item-score item))
     ("descendants" . ,(and (eq? (item-type item) 'story) (item-descendants item)))
     ("parent" . ,(item-parent item)))))

(define (filter-pairs alist)
  (filter (match-lambda ((_ . value) value)) alist))

(define (json-response value)
  "Return a 200 response and VALUE written as JSON."
  (values (build-response #:headers '((content-type . (application/json))))
          (scm->json-string value)))
