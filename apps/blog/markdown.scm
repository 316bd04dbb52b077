;;; (blog markdown) --- the Markdown of the author's posts, to HTML

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Debian 12 packages no Markdown reader for Guile, and tekuti's newer
;;; posts are in its own Markdown ("marxdown"), so this is the common core
;;; both use: paragraphs, ATX headings (#), fenced (```) and indented code,
;;; block quotes (>), lists (-, *, + and 1.), rules (---); inline `code`,
;;; **strong**, *emphasis* and _emphasis_, [links](url) and <url>.  As in
;;; Markdown, the author's own HTML passes through: a paragraph that
;;; starts with a block tag is kept as it is, and tags inside a line are
;;; kept; a "<" or "&" that starts no tag or entity is escaped.  Posts are
;;; the author's, trusted as their HTML posts are; comments never come
;;; here.
;;;
;;; Code:

(define-module (blog markdown)
  #:use-module (srfi srfi-1)
  #:use-module (ice-9 regex)
  #:export (markdown->html))

(define (escape-code text)
  ;; inside code: everything escaped
  (call-with-output-string
    (lambda (port)
      (string-for-each (lambda (c)
                         (case c
                           ((#\&) (display "&amp;" port))
                           ((#\<) (display "&lt;" port))
                           ((#\>) (display "&gt;" port))
                           (else (write-char c port))))
                       text))))

(define tag-or-entity (make-regexp "^(<[/!a-zA-Z][^<>]*>|&(#[0-9]+|#x[0-9a-fA-F]+|[a-zA-Z][a-zA-Z0-9]*);)"))

(define (escape-text text)
  ;; outside code: the author's tags and entities kept, stray < and & escaped
  (call-with-output-string
    (lambda (port)
      (let loop ((i 0))
        (when (< i (string-length text))
          (let ((c (string-ref text i)))
            (if (memv c '(#\< #\&))
                (let ((m (regexp-exec tag-or-entity (substring text i))))
                  (if m
                      (begin (display (match:substring m 0) port)
                             (loop (+ i (match:end m))))
                      (begin (display (if (char=? c #\<) "&lt;" "&amp;") port)
                             (loop (+ i 1)))))
                (begin (write-char c port) (loop (+ i 1))))))))))

(define inline-patterns
  ;; tried in order at each point of a line; each -> (regexp . writer)
  (list (cons (make-regexp "^`([^`]+)`")
              (lambda (m) (string-append "<code>" (escape-code (match:substring m 1)) "</code>")))
        (cons (make-regexp "^\\[([^]]+)\\]\\(([^) ]+)\\)")
              (lambda (m) (string-append "<a href=\"" (escape-code (match:substring m 2)) "\">"
                                         (inline (match:substring m 1)) "</a>")))
        (cons (make-regexp "^<(https?://[^ <>]+)>")
              (lambda (m) (let ((url (escape-code (match:substring m 1))))
                            (string-append "<a href=\"" url "\">" url "</a>"))))
        (cons (make-regexp "^\\*\\*([^*]+)\\*\\*")
              (lambda (m) (string-append "<strong>" (inline (match:substring m 1)) "</strong>")))
        (cons (make-regexp "^\\*([^* ][^*]*)\\*")
              (lambda (m) (string-append "<em>" (inline (match:substring m 1)) "</em>")))
        (cons (make-regexp "^_([^_ ][^_]*)_")
              (lambda (m) (string-append "<em>" (inline (match:substring m 1)) "</em>")))))

(define (inline text)
  ;; one paragraph's text, its inline markup made HTML
  (call-with-output-string
    (lambda (port)
      (let loop ((i 0) (plain 0))
        (define (flush) (display (escape-text (substring text plain i)) port))
        (if (>= i (string-length text))
            (flush)
            (let ((c (string-ref text i)))
              (or (and (memv c '(#\` #\[ #\< #\* #\_))
                       (let ((rest (substring text i)))
                         (any (lambda (pattern)
                                (let ((m (regexp-exec (car pattern) rest)))
                                  (and m
                                       (begin (flush)
                                              (display ((cdr pattern) m) port)
                                              (loop (+ i (match:end m)) (+ i (match:end m)))
                                              #t))))
                              inline-patterns)))
                  (loop (+ i 1) plain))))))))

(define heading (make-regexp "^(#{1,6}) +(.*)$"))
(define list-item (make-regexp "^ {0,3}([-*+]|[0-9]+\\.) +(.*)$"))
(define block-tag (make-regexp "^<(p|div|pre|ul|ol|h[1-6]|blockquote|table|figure|dl|hr|img|iframe|object|video|audio|section)[ >/]" regexp/icase))

(define (blank? line) (string-every char-set:whitespace line))

(define (take-until lines stop?)
  ;; -> (values the lines before the first STOP? one, the rest)
  (let loop ((lines lines) (out '()))
    (if (or (null? lines) (stop? (car lines)))
        (values (reverse out) lines)
        (loop (cdr lines) (cons (car lines) out)))))

(define (markdown->html text)
  "Return the HTML of the Markdown TEXT (the subset the commentary
lists)."
  (let loop ((lines (string-split (string-delete #\return text) #\newline)) (out '()))
    (cond
     ((null? lines) (string-join (reverse out) "\n"))
     ((blank? (car lines)) (loop (cdr lines) out))
     ((string-prefix? "```" (car lines))
      (call-with-values (lambda () (take-until (cdr lines) (lambda (l) (string-prefix? "```" l))))
        (lambda (code rest)
          (loop (if (null? rest) rest (cdr rest))
                (cons (string-append "<pre><code>" (escape-code (string-join code "\n"))
                                     "</code></pre>")
                      out)))))
     ((string-prefix? "    " (car lines))
      (call-with-values (lambda () (take-until lines (lambda (l) (and (not (blank? l))
                                                                      (not (string-prefix? "    " l))))))
        (lambda (code rest)
          (loop rest (cons (string-append "<pre><code>"
                                          (escape-code (string-join
                                                        (map (lambda (l) (if (>= (string-length l) 4)
                                                                             (substring l 4) ""))
                                                             (reverse (drop-while blank? (reverse code))))
                                                        "\n"))
                                          "</code></pre>")
                           out)))))
     ((regexp-exec heading (car lines))
      => (lambda (m)
           (let ((level (number->string (string-length (match:substring m 1)))))
             (loop (cdr lines)
                   (cons (string-append "<h" level ">" (inline (string-trim-right (string-trim-right (match:substring m 2) #\#))) "</h" level ">")
                         out)))))
     ((member (string-trim-both (car lines)) '("---" "***" "___"))
      (loop (cdr lines) (cons "<hr>" out)))
     ((string-prefix? ">" (car lines))
      (call-with-values (lambda () (take-until lines (lambda (l) (not (string-prefix? ">" l)))))
        (lambda (quoted rest)
          (loop rest (cons (string-append "<blockquote>"
                                          (markdown->html
                                           (string-join (map (lambda (l) (string-trim (substring l 1) #\space))
                                                             quoted)
                                                        "\n"))
                                          "</blockquote>")
                           out)))))
     ((regexp-exec list-item (car lines))
      => (lambda (m)
           (let ((tag (if (char-numeric? (string-ref (match:substring m 1) 0)) "ol" "ul")))
             (call-with-values (lambda () (take-until lines blank?))
               (lambda (items rest)
                 (loop rest
                       (cons (string-append
                              "<" tag ">"
                              (string-concatenate
                               (map (lambda (l)
                                      (let ((m (regexp-exec list-item l)))
                                        (string-append "<li>" (inline (if m (match:substring m 2)
                                                                          (string-trim-both l)))
                                                       "</li>")))
                                    items))
                              "</" tag ">")
                             out)))))))
     (else
      (call-with-values (lambda () (take-until lines blank?))
        (lambda (para rest)
          (let ((text (string-join para "\n")))
            (loop rest (cons (if (regexp-exec block-tag text)
                                 text
                                 (string-append "<p>" (inline text) "</p>"))
                             out)))))))))
