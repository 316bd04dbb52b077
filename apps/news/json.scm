;;; (news json) --- the news site for programs: JSON

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; /items.json is the front page's stories, and /items.json?id=N one
;;; item, as JSON objects with HN's API field names (id, type, by, time,
;;; url, title, text, score, descendants, parent; a field an item has
;;; not is left out).  The object is a JSON type of (plucky web json),
;;; `news-item', whose encoder writes the record straight to bytes.
;;;
;;; (news app) loads this module, and with it (plucky web json), at the
;;; first request for the feed (#:autoload): a worker that serves none
;;; leaves their compiled data, which every collection scans, unmapped.
;;;
;;; Code:

(define-module (news json)
  #:use-module (ice-9 binary-ports)
  #:use-module (plucky web json)
  #:use-module (news db)
  #:export (item->json
            items->json))

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

