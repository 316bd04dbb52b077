;;; (plucky http date) --- the Date header, as bytes, once a second

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Every response carries "Date: Sun, 06 Nov 1994 08:49:37 GMT" (RFC 9110
;;; §5.6.7, IMF-fixdate).  Formatting it with strftime for each request
;;; would cost a string and a bytevector per response; instead the whole
;;; header line is kept as bytes and remade only when the second changes.
;;; The server loop calls `refresh-date-line!' once per event-loop round,
;;; not per request.
;;;
;;; Code:

(define-module (plucky http date)
  #:use-module (rnrs bytevectors)
  #:export (seconds->imf-fixdate
            date-line
            refresh-date-line!))

(define day-names #("Sun" "Mon" "Tue" "Wed" "Thu" "Fri" "Sat"))
(define month-names
  #("Jan" "Feb" "Mar" "Apr" "May" "Jun" "Jul" "Aug" "Sep" "Oct" "Nov" "Dec"))

(define (two-digits n)
  (if (< n 10) (string-append "0" (number->string n)) (number->string n)))

(define (seconds->imf-fixdate seconds)
  "Return the IMF-fixdate string (\"Sun, 06 Nov 1994 08:49:37 GMT\") for
SECONDS since the epoch."
  (let ((tm (gmtime seconds)))
    (string-append (vector-ref day-names (tm:wday tm)) ", "
                   (two-digits (tm:mday tm)) " "
                   (vector-ref month-names (tm:mon tm)) " "
                   (number->string (+ 1900 (tm:year tm))) " "
                   (two-digits (tm:hour tm)) ":"
                   (two-digits (tm:min tm)) ":"
                   (two-digits (tm:sec tm)) " GMT")))

(define (make-date-line seconds)
  (string->utf8 (string-append "Date: " (seconds->imf-fixdate seconds) "\r\n")))

(define current-second (current-time))
(define current-line (make-date-line current-second))

(define (date-line)
  "Return the bytevector \"Date: …\\r\\n\" for the second of the last
`refresh-date-line!'.  Callers must not modify it."
  current-line)

(define (refresh-date-line! now)
  "Remake the Date line if NOW (seconds since the epoch) is a new second."
  (unless (= now current-second)
    (set! current-second now)
    (set! current-line (make-date-line now))))

;;; (plucky http date) ends here
