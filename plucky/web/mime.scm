;;; (plucky web mime) --- the media type of a file, from its extension

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; (plucky web static) asks `file-media-type' for the Content-Type of
;;; each file it opens (once per file: the open-file cache keeps the
;;; answer).  The table is a built-in list of the types a site serves,
;;; extended by /etc/mime.types when that file exists (read once, the
;;; first time a type is asked for); the built-in entries win, so that
;;; a site looks the same on every machine.  Text types get
;;; charset=utf-8.  An unknown extension is application/octet-stream.
;;;
;;; Code:

(define-module (plucky web mime)
  #:use-module (ice-9 rdelim)
  #:export (file-media-type
            compressible-type?))

(define built-in-types
  '(("html" . text/html) ("htm" . text/html) ("css" . text/css)
    ("js" . text/javascript) ("mjs" . text/javascript)
    ("json" . application/json) ("map" . application/json)
    ("webmanifest" . application/manifest+json)
    ("xml" . application/xml) ("rss" . application/rss+xml)
    ("atom" . application/atom+xml) ("txt" . text/plain) ("md" . text/markdown)
    ("csv" . text/csv) ("svg" . image/svg+xml) ("png" . image/png)
    ("jpg" . image/jpeg) ("jpeg" . image/jpeg) ("gif" . image/gif)
    ("webp" . image/webp) ("avif" . image/avif) ("ico" . image/vnd.microsoft.icon)
    ("woff" . font/woff) ("woff2" . font/woff2) ("ttf" . font/ttf) ("otf" . font/otf)
    ("wasm" . application/wasm) ("pdf" . application/pdf)
    ("zip" . application/zip) ("gz" . application/gzip) ("zst" . application/zstd)
    ("tar" . application/x-tar) ("mp4" . video/mp4) ("webm" . video/webm)
    ("mp3" . audio/mpeg) ("ogg" . audio/ogg) ("wav" . audio/wav)
    ("scm" . text/x-scheme)))

(define table #f)                       ; extension -> symbol, once read

(define (read-mime-types file into)
  ;; Add FILE's "type ext ext …" lines to the hash table INTO, keeping
  ;; entries already there.
  (call-with-input-file file
    (lambda (port)
      (let lp ()
        (let ((line (read-line port)))
          (unless (eof-object? line)
            (let ((fields (string-tokenize (car (string-split line #\#)))))
              (when (pair? fields)
                (let ((type (string->symbol (string-downcase (car fields)))))
                  (for-each (lambda (ext)
                              (let ((ext (string-downcase ext)))
                                (unless (hash-ref into ext)
                                  (hash-set! into ext type))))
                            (cdr fields)))))
            (lp)))))))

(define (types)
  (or table
      (let ((new (make-hash-table 1024)))
        (for-each (lambda (entry) (hash-set! new (car entry) (cdr entry)))
                  built-in-types)
        (when (file-exists? "/etc/mime.types")
          (false-if-exception (read-mime-types "/etc/mime.types" new)))
        (set! table new)
        new)))

(define (textual-type? type)
  (let ((name (symbol->string type)))
    (or (string-prefix? "text/" name)
        (memq type '(application/javascript application/json application/xml
                     application/manifest+json application/rss+xml
                     application/atom+xml image/svg+xml)))))

(define (file-media-type name)
  "Return the Content-Type header value, as (web http) represents it,
for a file called NAME: its type by extension, with charset utf-8 for
text, or application/octet-stream."
  (let* ((dot (string-rindex name #\.))
         (type (or (and dot (hash-ref (types) (string-downcase
                                               (substring name (+ dot 1)))))
                   'application/octet-stream)))
    (if (textual-type? type)
        (list type (cons 'charset "utf-8"))
        (list type))))

(define (compressible-type? type)
  "Return true when media type TYPE (a symbol) is worth compressing: text
and the structured text formats, not images, fonts or archives."
  (or (textual-type? type)
      (memq type '(application/wasm image/vnd.microsoft.icon font/ttf font/otf))
      (let ((name (symbol->string type)))
        (or (string-suffix? "+json" name) (string-suffix? "+xml" name)))))

;;; (plucky web mime) ends here
