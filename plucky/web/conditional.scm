;;; (plucky web conditional) --- validators, preconditions, ranges, codings

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The rules of RFC 9110 §13 (conditional requests), §14 (range
;;; requests) and §12.5.3 (Accept-Encoding), as pure procedures of a
;;; request and the validators of a representation, for (plucky web
;;; static) and any handler that serves something with an ETag or a
;;; modification time:
;;;
;;;   `precondition'     If-Match, If-Unmodified-Since, If-None-Match,
;;;                      If-Modified-Since in the order of §13.2.2:
;;;                      -> #f (go on), 304 or 412
;;;   `request-ranges'   Range with If-Range, resolved against the size:
;;;                      -> #f (send it all), 'unsatisfiable (416), or
;;;                      a list of (start . end) byte spans, END excluded
;;;   `choose-coding'    which of the available codings Accept-Encoding
;;;                      prefers (q-values, identity;q=0, *)
;;;
;;; Header values come as (web request) gives them: Guile's parsed form,
;;; or the raw string for a value Guile's parser rejected (plucky's
;;; parser keeps those, see (plucky http parse)).  A Range Guile rejects
;;; ("bytes=0-1, 5-" with its space) is parsed here; other raw values
;;; are ignored, as the RFC says of a condition a server cannot read.
;;;
;;; Code:

(define-module (plucky web conditional)
  #:use-module (web request)
  #:use-module (srfi srfi-19)
  #:export (make-strong-etag
            seconds->http-date
            precondition
            request-ranges
            choose-coding))

(define (make-strong-etag ino size mtime-ns)
  "Return a strong entity tag, as (web http) represents one, that names
the contents of a file of inode INO, SIZE bytes, modified at MTIME-NS
nanoseconds since the epoch."
  (cons (string-append (number->string ino 16) "-" (number->string size 16)
                       "-" (number->string mtime-ns 16))
        #t))

(define (seconds->http-date seconds)
  "Return the SRFI-19 date (web http) writes as the HTTP-date of
SECONDS since the epoch."
  (time-utc->date (make-time time-utc 0 seconds) 0))

(define (date->seconds value)
  ;; -> seconds since the epoch of a parsed HTTP-date, or #f for anything
  ;; else (a raw string Guile could not read)
  (and (date? value) (time-second (date->time-utc value))))

(define (tag-match? tags etag strong?)
  ;; Does the If-Match / If-None-Match value TAGS ('* or a list of
  ;; (tag . strong?)) match ETAG?  STRONG?: the strong comparison.
  (cond
   ((eq? tags '*) #t)
   ((not (list? tags)) #f)
   (else
    (let lp ((tags tags))
      (and (pair? tags)
           (let ((tag (car tags)))
             (or (and (pair? tag)
                      (string? (car tag))
                      (string=? (car tag) (car etag))
                      (or (not strong?) (and (cdr tag) (cdr etag))))
                 (lp (cdr tags)))))))))

(define (precondition request etag modified)
  "Return #f when REQUEST's preconditions pass for a representation of
entity tag ETAG (a pair, as `make-strong-etag' makes) and modification
time MODIFIED (seconds), else the status to answer instead: 412, or 304
for a GET or HEAD whose copy is current (RFC 9110 §13.2.2)."
  (let* ((headers (request-headers request))
         (if-match (assq-ref headers 'if-match))
         (if-none-match (assq-ref headers 'if-none-match))
         (get? (memq (request-method request) '(GET HEAD))))
    (cond
     ((and if-match (not (string? if-match)) (not (tag-match? if-match etag #t)))
      412)
     ((and (not if-match)
           (let ((since (date->seconds (assq-ref headers 'if-unmodified-since))))
             (and since (> modified since))))
      412)
     ((and if-none-match (not (string? if-none-match)))
      (and (tag-match? if-none-match etag #f)
           (if get? 304 412)))
     ((and get? (not if-none-match)
           (let ((since (date->seconds (assq-ref headers 'if-modified-since))))
             (and since (<= modified since))))
      304)
     (else #f))))

;;;
;;; Range
;;;

(define max-ranges
  ;; More ranges than this in one request is not a reader seeking: the
  ;; whole representation is sent instead, as the RFC allows.
  32)

(define (parse-range-text text)
  ;; "bytes=0-1, 5-, -3" -> (bytes (0 . 1) (5 . #f) (#f . 3)), or #f
  (let ((eq (string-index text #\=)))
    (and eq
         (let ((unit (string-trim-both (substring text 0 eq))))
           (and (string-ci=? unit "bytes")
                (let lp ((specs (string-split (substring text (+ eq 1)) #\,))
                         (out '()))
                  (if (null? specs)
                      (and (pair? out) (cons 'bytes (reverse out)))
                      (let* ((spec (string-trim-both (car specs)))
                             (dash (string-index spec #\-)))
                        (cond
                         ((string-null? spec) (lp (cdr specs) out)) ; "0-1,,2-3"
                         ((not dash) #f)
                         (else
                          (let ((first (digits (substring spec 0 dash)))
                                (last (digits (substring spec (+ dash 1)))))
                            (and (or first last)
                                 (or (string-null? (substring spec 0 dash)) first)
                                 (or (string-null? (substring spec (+ dash 1))) last)
                                 (lp (cdr specs) (cons (cons first last) out))))))))))))))

(define (digits text)
  ;; -> the number TEXT writes in decimal digits only, or #f
  (and (not (string-null? text))
       (string-every char-numeric? text)
       (string->number text 10)))

(define (resolve-spans specs size)
  ;; -> the satisfiable spans of SPECS, (start . end) with END excluded,
  ;; in the order asked; #f when a spec is invalid (last before first)
  (let lp ((specs specs) (out '()))
    (if (null? specs)
        (reverse out)
        (let ((first (caar specs)) (last (cdar specs)))
          (cond
           ((and first last (< last first)) #f)
           ((and first (>= first size)) (lp (cdr specs) out))
           (first (lp (cdr specs)
                      (cons (cons first (if last (min (+ last 1) size) size)) out)))
           ((and last (> last 0) (> size 0))
            (lp (cdr specs) (cons (cons (max 0 (- size last)) size) out)))
           (else (lp (cdr specs) out)))))))

(define (request-ranges request size etag modified)
  "Return what of a representation of SIZE bytes, entity tag ETAG and
modification time MODIFIED (seconds) REQUEST asks for with Range: #f for
all of it (no Range, one this server does not serve, or an If-Range
that no longer holds), the symbol unsatisfiable (answer 416), or the
list of (start . end) byte spans, END excluded, in the order asked."
  (let* ((headers (request-headers request))
         (range (assq-ref headers 'range))
         (range (if (string? range) (parse-range-text range) range)))
    (and (eq? (request-method request) 'GET)
         (pair? range)
         (eq? (car range) 'bytes)
         (<= (length (cdr range)) max-ranges)
         (if-range-holds? (assq-ref headers 'if-range) etag modified)
         (let ((spans (resolve-spans (cdr range) size)))
           (cond
            ((not spans) #f)
            ((null? spans) 'unsatisfiable)
            ;; Overlapping spans that add up to more than the whole:
            ;; the whole is cheaper to send.
            ((> (apply + (map (lambda (s) (- (cdr s) (car s))) spans)) size) #f)
            (else spans))))))

(define (if-range-holds? value etag modified)
  ;; RFC 9110 §13.1.5: a strong tag that matches, or exactly the date.
  (cond
   ((not value) #t)
   ((and (pair? value) (string? (car value)))
    (and (cdr value) (cdr etag) (string=? (car value) (car etag))))
   ((date->seconds value) => (lambda (seconds) (= seconds modified)))
   (else #f)))

;;;
;;; Accept-Encoding
;;;

(define (coding-q value name)
  ;; -> the q (0-1000) VALUE, Accept-Encoding as Guile parses it, gives
  ;; the coding NAME, or #f when it does not mention it
  (let lp ((entries value))
    (and (pair? entries)
         (let ((entry (car entries)))
           ;; the lengths first: string-ci=? folds case a character at
           ;; a time, and most codings differ in length
           (if (and (pair? entry) (string? (cdr entry))
                    (= (string-length (cdr entry)) (string-length name))
                    (string-ci=? (cdr entry) name))
               (car entry)
               (lp (cdr entries)))))))

(define (choose-coding request available)
  "Return the content coding to answer REQUEST with: one of the symbols
of AVAILABLE (say (zstd gzip), in order of preference when q-values
tie), or identity, or #f when the client accepts none of them, not even
identity (then answer 406).  Accept-Encoding's q-values, `*' and
identity;q=0 are honoured (RFC 9110 §12.5.3); without the header, or
with a value that cannot be read, identity."
  (let ((value (assq-ref (request-headers request) 'accept-encoding)))
    (if (not (list? value))
        'identity
        (let* ((star (coding-q value "*"))
               (q (lambda (name)
                    (or (coding-q value name)
                        ;; identity is acceptable unless excluded
                        (and (string=? name "identity") (not (and star (zero? star)))
                             1000)
                        star
                        0))))
          (let lp ((codings available) (best 'identity) (best-q (q "identity")))
            (if (null? codings)
                (and (> best-q 0) best)
                (let ((this (q (symbol->string (car codings)))))
                  (if (and (> this 0) (or (> this best-q) (and (= this best-q) (eq? best 'identity))))
                      (lp (cdr codings) (car codings) this)
                      (lp (cdr codings) best best-q)))))))))

;;; (plucky web conditional) ends here
