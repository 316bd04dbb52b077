;;; (blog markup) --- bodies to HTML: the author's trusted, commenters' not

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A post's body is the author's HTML in tekuti's "wordpress" format:
;;; paragraphs separated by an empty line, a paragraph that does not start
;;; with a block tag wrapped in <p>.  It is trusted, as the admin who
;;; wrote it is.  A Markdown post (tekuti's "marxdown") goes through
;;; (blog markdown).
;;;
;;; A comment is not trusted.  Those posted here are stored escaped
;;; (`escape-comment'), so that tekuti, reading the same repository,
;;; shows them as text too; those a tekuti blog holds may carry the small
;;; XHTML subset tekuti let through.  `comment->html' writes either kind
;;; through a whitelist: a few inline and block tags without attributes,
;;; links to http(s) only with rel="nofollow", entities as they are;
;;; everything else, a <script> included, becomes text.
;;;
;;; Code:

(define-module (blog markup)
  #:use-module (srfi srfi-1)
  #:use-module (ice-9 regex)
  #:use-module (blog markdown)
  #:export (escape-html
            escape-comment
            post->html
            comment->html))

(define (escape-html text)
  "Return TEXT with &, <, > and \" written as HTML entities."
  (call-with-output-string
    (lambda (port)
      (string-for-each
       (lambda (c)
         (case c
           ((#\&) (display "&amp;" port))
           ((#\<) (display "&lt;" port))
           ((#\>) (display "&gt;" port))
           ((#\") (display "&quot;" port))
           (else (write-char c port))))
       text))))

(define (escape-comment text)
  "Return the comment TEXT as it is stored: escaped, carriage returns
dropped."
  (escape-html (string-delete #\return text)))

(define (paragraphs text)
  ;; TEXT's paragraphs: runs of lines between blank ones
  (let loop ((lines (string-split text #\newline)) (current '()) (out '()))
    (define (flush)
      (if (null? current) out
          (cons (string-join (reverse current) "\n") out)))
    (cond ((null? lines) (reverse (flush)))
          ((string-every char-set:whitespace (car lines))
           (loop (cdr lines) '() (flush)))
          (else (loop (cdr lines) (cons (car lines) current) out)))))

(define block-start
  (make-regexp "^[ \t]*<(p|div|pre|ul|ol|h[1-6]|blockquote|table|figure|dl|hr|img|iframe|object)[ >/]"
               regexp/icase))

(define (post->html text format)
  "Return the HTML of a post's body TEXT in FORMAT ('html or 'markdown)."
  (if (eq? format 'markdown)
      (markdown->html text)
      (string-join
       (map (lambda (para)
              (if (regexp-exec block-start para)
                  para
                  (string-append "<p>" para "</p>")))
            (paragraphs text))
       "\n")))

;;; Comments, through the whitelist.

(define allowed-tags
  '("a" "b" "i" "em" "strong" "code" "tt" "pre" "blockquote" "p" "br"
    "ul" "ol" "li" "q" "cite" "h1" "h2" "h3" "h4" "h5" "h6" "hr"))

(define void-tags '("br" "hr"))

(define tag-pattern (make-regexp "<(/?)([a-zA-Z][a-zA-Z0-9]*)([^<>]*)>"))
(define href-pattern (make-regexp "href *= *(\"([^\"]*)\"|'([^']*)')" regexp/icase))
(define entity-pattern (make-regexp "^&(#[0-9]{1,7}|#x[0-9a-fA-F]{1,6}|[a-zA-Z][a-zA-Z0-9]{1,31});"))

(define (write-text text port)
  ;; TEXT with entities kept and anything else that could be markup escaped
  (let loop ((i 0))
    (when (< i (string-length text))
      (let ((c (string-ref text i)))
        (case c
          ((#\&)
           (let ((m (regexp-exec entity-pattern (substring text i (min (string-length text) (+ i 40))))))
             (if m
                 (begin (display (match:substring m 0) port)
                        (loop (+ i (string-length (match:substring m 0)))))
                 (begin (display "&amp;" port) (loop (+ i 1))))))
          ((#\<) (display "&lt;" port) (loop (+ i 1)))
          ((#\>) (display "&gt;" port) (loop (+ i 1)))
          ((#\") (display "&quot;" port) (loop (+ i 1)))
          (else (write-char c port) (loop (+ i 1))))))))

(define (safe-href attributes)
  (let ((m (regexp-exec href-pattern attributes)))
    (and m
         (let ((url (or (match:substring m 2) (match:substring m 3))))
           (and (or (string-prefix-ci? "http://" url) (string-prefix-ci? "https://" url))
                (not (string-any (lambda (c) (memv c '(#\" #\< #\> #\space))) url))
                url)))))

(define (write-comment-markup text port)
  ;; the whitelist: allowed tags written afresh, the rest as text; tags
  ;; left open are closed at the end
  (let loop ((start 0) (open '()))
    (let ((m (regexp-exec tag-pattern text start)))
      (if (not m)
          (begin
            (write-text (substring text start) port)
            (for-each (lambda (tag) (format port "</~a>" tag)) open))
          (let ((closing? (string=? (match:substring m 1) "/"))
                (tag (string-downcase (match:substring m 2))))
            (write-text (substring text start (match:start m)) port)
            (cond
             ((not (member tag allowed-tags))
              (write-text (match:substring m 0) port)
              (loop (match:end m) open))
             ((member tag void-tags)
              (unless closing? (format port "<~a>" tag))
              (loop (match:end m) open))
             (closing?
              (if (member tag open)
                  ;; close what was opened inside it too
                  (let close ((open open))
                    (format port "</~a>" (car open))
                    (if (string=? (car open) tag)
                        (loop (match:end m) (cdr open))
                        (close (cdr open))))
                  (loop (match:end m) open)))
             ((string=? tag "a")
              (let ((href (safe-href (match:substring m 3))))
                (if href
                    (format port "<a href=\"~a\" rel=\"nofollow ugc\">" href)
                    (display "<a>" port))
                (loop (match:end m) (cons tag open))))
             (else
              (format port "<~a>" tag)
              (loop (match:end m) (cons tag open)))))))))

(define* (comment->html text #:optional (format 'html))
  "Return the HTML of a comment's stored TEXT: paragraphs at empty lines,
line breaks kept, markup through the whitelist (see the commentary).  A
comment in FORMAT 'markdown (tekuti's \"marxdown\") is made HTML by
(blog markdown) first, then goes through the whitelist all the same."
  (call-with-output-string
    (lambda (port)
      (if (eq? format 'markdown)
          (write-comment-markup (markdown->html text) port)
          (for-each (lambda (para)
                      (display "<p>" port)
                      (write-comment-markup
                       (regexp-substitute/global #f "\n" (string-trim-both para) 'pre "<br>" 'post)
                       port)
                      (display "</p>\n" port))
                    (paragraphs text))))))
