;;; (news rank) --- news.arc's ranking, as pure procedures

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The front page orders stories the way news.arc does (its
;;; `frontpage-rank'): points less one, to the power 0.8, divided by the
;;; age in hours plus two, to the power 1.8 (gravity), times a penalty:
;;;
;;;   - a story without a url (an "Ask" post) counts 0.4 of its rank;
;;;   - a controversial story, one with more than 20 comments than it has
;;;     points, counts (points / comments)^2, at most 1;
;;;   - a story whose url is an image counts at most 0.3.
;;;
;;; A comment's rank, which orders the replies of a thread, is the same
;;; formula at half weight.  Nothing here touches the database: (news db)
;;; reads the fields, these procedures rank them.
;;;
;;; Code:

(define-module (news rank)
  #:use-module (ice-9 match)
  #:export (gravity
            timebase-minutes
            front-threshold
            frontpage-rank
            controversy-factor
            lightweight-url?
            text-age))

(define gravity 1.8)
(define timebase-minutes 120)        ; "+ 2 hours" of the formula
(define front-threshold 1)           ; points a story needs for the front page
(define no-url-factor 0.4)
(define lightweight-factor 0.3)
(define comment-factor 0.5)

(define (controversy-factor points comments)
  "Return the penalty of a story with POINTS and COMMENTS: 1 unless it
has more than 20 comments, else (POINTS / COMMENTS)^2, at most 1."
  (if (> comments 20)
      (min 1 (expt (/ (max points 0) comments) 2))
      1))

(define (lightweight-url? url)
  "Return #t when URL ends in an image's extension (png, jpg, jpeg)."
  (and url
       (let ((dot (string-rindex url #\.)))
         (and dot
              (member (string-downcase (substring url (+ dot 1)))
                      '("png" "jpg" "jpeg"))
              #t))))

(define* (frontpage-rank #:key type points age-minutes url (comments 0))
  "Return the rank of an item of TYPE ('story or 'comment) with POINTS
(score less sock-puppet votes), AGE-MINUTES old, with URL (#f or \"\" for
a text post) and COMMENTS below it: news.arc's gravity formula with its
penalties."
  (let* ((base (- points 1))
         (base (if (> base 0) (expt base 0.8) base))
         (rank (/ base (expt (/ (+ (max age-minutes 0) timebase-minutes) 60.0)
                             gravity))))
    (* rank
       (cond
        ((not (eq? type 'story)) comment-factor)
        ((or (not url) (string-null? url)) no-url-factor)
        ((lightweight-url? url)
         (min lightweight-factor (controversy-factor points comments)))
        (else (controversy-factor points comments))))))

(define (plural n word)
  (string-append (number->string n) " " word (if (= n 1) "" "s")))

(define (text-age minutes)
  "Return MINUTES as news.arc says an age: \"3 hours ago\"."
  (string-append
   (cond
    ((>= minutes 1440) (plural (quotient minutes 1440) "day"))
    ((>= minutes 60) (plural (quotient minutes 60) "hour"))
    (else (plural (max minutes 0) "minute")))
   " ago"))
