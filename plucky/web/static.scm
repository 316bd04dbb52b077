;;; (plucky web static) --- serving a directory tree: files, ranges, conditions

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `static-handler' serves the files under a root directory;
;;; `static-middleware' does the same in front of an app, which gets the
;;; requests no file answers.  A request flows through here like this:
;;;
;;;   1. `path-segments': the target's path, percent-decoded one segment
;;;      at a time, refused (404) when a segment is empty, `.' or `..',
;;;      holds a slash, a backslash or a NUL once decoded, is not valid
;;;      UTF-8 (overlong forms included), or is a dotfile (unless
;;;      allowed).  Nothing is ever joined from undecoded text, so no
;;;      encoding of `..' reaches the file system.
;;;   2. The open-file cache (`lookup'): path -> <entry>, an open
;;;      descriptor with its stat results and its response headers made
;;;      once.  An entry is checked against the file system (one stat of
;;;      its path) at most once a second; a file that changed is opened
;;;      afresh.  A hot file thus costs no open(2) and no stat(2) per
;;;      request, and its header values are the same objects each time,
;;;      which (plucky http response) renders from its cache.  An entry
;;;      is made only for a regular file whose real path is inside the
;;;      root (symlinks out of it are refused unless allowed).
;;;   3. Precompressed siblings (FILE.zst, FILE.br, FILE.gz) chosen by
;;;      Accept-Encoding (plucky web conditional), with Vary.
;;;   4. Preconditions (304, 412), then Range (206, multipart/byteranges,
;;;      416), all in (plucky web conditional).
;;;   5. The body: a file body (plucky server loop) that the loop sends
;;;      after the head with sendfile(2).  The entry counts the bodies
;;;      that hold its descriptor (the file body's release thunk), and
;;;      closes it only when it has left the cache and none does: a
;;;      descriptor number is never reused for another file while a
;;;      response still sends from it.
;;;
;;; The cache belongs to the thread that first used it (a worker's
;;; loop); a handler called on another thread (under `with-body-port')
;;; reads the file into memory instead.  Directories: a redirect that
;;; adds the trailing slash, then index.html, then a listing if asked
;;; for.  A method other than GET and HEAD on a path that names a file
;;; or a directory is answered 405 with Allow by `static-handler' (and
;;; passed on to the app by `static-middleware').
;;;
;;; Code:

(define-module (plucky web static)
  #:use-module (rnrs bytevectors)
  ;; (ice-9 binary-ports), not (rnrs io ports), which re-exports these
  ;; and brings the R6RS records, conditions and hash tables: every
  ;; module a worker loads is scanned at each collection (bench/demo-gc's
  ;; ".go roots").  For that reason too, (ice-9 ftw) and its vlists are
  ;; loaded at the first directory listing, which few sites enable.
  #:use-module ((ice-9 binary-ports) #:select (open-bytevector-output-port put-bytevector))
  #:use-module (srfi srfi-9)
  #:autoload (ice-9 ftw) (scandir)
  #:use-module (ice-9 regex)
  #:use-module ((ice-9 threads) #:select (current-thread))
  #:use-module (web request)
  #:use-module (web response)
  #:use-module (web uri)
  #:use-module (web http)
  #:use-module ((plucky sys libc) #:select (fd-read bytevector-address fd-close))
  #:use-module ((plucky server) #:select (make-file-body))
  #:use-module (plucky web mime)
  #:use-module (plucky web conditional)
  #:export (static-handler
            static-middleware
            path-segments))

;;;
;;; Paths
;;;

(define (hex-value c)
  (let ((i (char->integer c)))
    (cond ((<= 48 i 57) (- i 48))
          ((<= 65 i 70) (- i 55))
          ((<= 97 i 102) (- i 87))
          (else #f))))

(define (percent-decode text)
  ;; -> a bytevector of TEXT with %XX decoded (other characters taken as
  ;; latin-1 bytes, as the parser decoded the target), or #f
  (let ((n (string-length text)))
    (let lp ((i 0) (out '()))
      (cond
       ((= i n) (u8-list->bytevector (reverse out)))
       ((char=? (string-ref text i) #\%)
        (let ((hi (and (< (+ i 2) n) (hex-value (string-ref text (+ i 1)))))
              (lo (and (< (+ i 2) n) (hex-value (string-ref text (+ i 2))))))
          (and hi lo (lp (+ i 3) (cons (+ (* 16 hi) lo) out)))))
       ((> (char->integer (string-ref text i)) 255) #f)
       (else (lp (+ i 1) (cons (char->integer (string-ref text i)) out)))))))

(define (valid-utf-8? bv)
  ;; Strict: no overlong forms, no surrogates, nothing past U+10FFFF.
  (let ((n (bytevector-length bv)))
    (define (cont? i) (and (< i n) (= (logand (bytevector-u8-ref bv i) #xC0) #x80)))
    (let lp ((i 0))
      (if (= i n)
          #t
          (let ((b (bytevector-u8-ref bv i)))
            (cond
             ((< b #x80) (lp (+ i 1)))
             ((<= #xC2 b #xDF) (and (cont? (+ i 1)) (lp (+ i 2))))
             ((<= #xE0 b #xEF)
              (and (cont? (+ i 1)) (cont? (+ i 2))
                   (let ((b1 (bytevector-u8-ref bv (+ i 1))))
                     (and (not (and (= b #xE0) (< b1 #xA0)))  ; overlong
                          (not (and (= b #xED) (>= b1 #xA0))) ; surrogate
                          (lp (+ i 3))))))
             ((<= #xF0 b #xF4)
              (and (cont? (+ i 1)) (cont? (+ i 2)) (cont? (+ i 3))
                   (let ((b1 (bytevector-u8-ref bv (+ i 1))))
                     (and (not (and (= b #xF0) (< b1 #x90)))
                          (not (and (= b #xF4) (>= b1 #x90)))
                          (lp (+ i 4))))))
             (else #f)))))))

(define (path-segments path dotfiles?)
  "Return the list of decoded segments (strings) of PATH, the raw path of
a request target, and whether it ends with a slash, as two values; or #f
when PATH names nothing a static root may serve: a segment that is empty
(inside the path), `.', `..', a dotfile (unless DOTFILES?), or that once
decoded holds a slash, a backslash, a NUL or invalid UTF-8."
  (and (string-prefix? "/" path)
       (let* ((parts (cdr (string-split path #\/)))
              (slash? (and (pair? parts) (string-null? (car (last-pair parts)))))
              (parts (if slash? (reverse (cdr (reverse parts))) parts)))
         (let lp ((parts parts) (out '()))
           (if (null? parts)
               (values (reverse out) slash?)
               (let* ((part (car parts))
                      (plain? (plain-segment? part))
                      (bytes (and (not plain?) (percent-decode part))))
                 (if plain?
                     ;; Nothing encoded, nothing to decode.
                     (and (not (member part '("." "..")))
                          (or dotfiles? (not (string-prefix? "." part)))
                          (lp (cdr parts) (cons part out)))
                 (and bytes
                      (> (bytevector-length bytes) 0)
                      (not (bytevector-index bytes 0))
                      (not (bytevector-index bytes 47))   ; /
                      (not (bytevector-index bytes 92))   ; \
                      (valid-utf-8? bytes)
                      (let ((name (utf8->string bytes)))
                        (and (not (member name '("." "..")))
                             (or dotfiles? (not (string-prefix? "." name)))
                             (lp (cdr parts) (cons name out))))))))))))

(define (plain-segment? part)
  ;; Printable ASCII without `%' or `\', not empty: the common segment,
  ;; taken as it is (a loop, not string-every and a closure per
  ;; character: bench/static's 304).
  (let ((n (string-length part)))
    (and (> n 0)
         (let lp ((i 0))
           (or (= i n)
               (let ((c (char->integer (string-ref part i))))
                 (and (< 32 c 127) (not (= c 37)) (not (= c 92))
                      (lp (+ i 1)))))))))

(define (bytevector-index bv byte)
  (let ((n (bytevector-length bv)))
    (let lp ((i 0))
      (and (< i n)
           (if (= (bytevector-u8-ref bv i) byte) i (lp (+ i 1)))))))

;;;
;;; The open-file cache
;;;

(define-record-type <entry>
  (%make-entry fd size ino dev mtime-ns modified checked users cached?
               headers not-modified coding siblings bytes release)
  entry?
  (fd entry-fd)                         ; open, read-only
  (size entry-size)
  (ino entry-ino)
  (dev entry-dev)
  (mtime-ns entry-mtime-ns)
  (modified entry-modified)             ; seconds, Last-Modified
  (checked entry-checked set-entry-checked!) ; seconds: last stat of the path
  (users entry-users set-entry-users!)       ; bodies sending from FD
  (cached? entry-cached? set-entry-cached!)  ; still in the table?
  ;; the 200 answer's headers, the same list each time: Content-Type,
  ;; ETag, Last-Modified, Accept-Ranges, [Cache-Control], [Vary],
  ;; [Content-Encoding]
  (headers entry-headers)
  (not-modified entry-not-modified)     ; the 304 response, made once
  (coding entry-coding)                 ; identity, gzip or zstd
  (siblings entry-siblings)             ; codings of precompressed siblings: (gzip)
  (bytes entry-bytes)                   ; #f, or the contents of a small file
  ;; the thunk each file body from FD calls once, when it is sent: made
  ;; once, not a closure per response (see `with-release')
  (release entry-release set-entry-release!))

(define (with-release entry)
  ;; -> ENTRY, with its release thunk (the loop calls a file body's
  ;; thunk once: see close-file-body!)
  (set-entry-release! entry (lambda () (release-entry! entry)))
  entry)

(define (entry-etag entry) (assq-ref (entry-headers entry) 'etag))

(define-record-type <cache>
  (make-cache table owner count held paths path-count)
  cache?
  (table cache-table)                   ; hash: key -> <entry>
  (owner cache-owner set-cache-owner!)  ; the thread that uses it, once known
  (count cache-count set-cache-count!)
  (held cache-held set-cache-held!)     ; bytes of file contents the entries hold
  ;; hash: a request's raw path, as sent -> <shortcut>
  (paths cache-paths)
  (path-count cache-path-count set-cache-path-count!))

;; What a path that named a file gave last time.  A hot file's request
;; then costs one hash lookup of its raw path: no decoding, no joining
;; of the file's name, no lookup of that name (bench/static's 50k and
;; 304).  A shortcut holds only while its entry is in the cache and
;; fresh; otherwise the request takes the long way, which makes a new one.
(define-record-type <shortcut>
  (make-shortcut entry file segments)
  shortcut?
  (entry shortcut-entry)                ; the identity <entry>
  (file shortcut-file)                  ; its file name, root included
  (segments shortcut-segments))         ; the decoded segments of the path

;; A small file's contents are kept in its entry and sent as a bytevector:
;; (plucky http response) copies it behind the head, so head and body
;; leave with one write(2), where a file body costs a write and a
;; sendfile.  Only small ones: the copy grows with the file, and for
;; larger files sendfile costs no more CPU a request (plucky profile of a
;; static-handler).  Bounded by `memory-limit' per cache; past it,
;; entries send with sendfile.
(define small-file 16384)
(define memory-limit (* 32 1024 1024))

(define (release-entry! entry)
  ;; One body less sends from ENTRY's descriptor.
  (let ((users (- (entry-users entry) 1)))
    (set-entry-users! entry users)
    (when (and (zero? users) (not (entry-cached? entry)))
      (fd-close (entry-fd entry)))))

(define (drop-entry! cache key entry)
  (hash-remove! (cache-table cache) key)
  (set-cache-count! cache (- (cache-count cache) 1))
  (set-entry-cached! entry #f)
  (when (entry-bytes entry)
    (set-cache-held! cache (- (cache-held cache) (bytevector-length (entry-bytes entry)))))
  (when (zero? (entry-users entry))
    (fd-close (entry-fd entry))))

(define (same-file? entry st)
  (and (eqv? (stat:ino st) (entry-ino entry))
       (eqv? (stat:dev st) (entry-dev entry))
       (eqv? (stat:size st) (entry-size entry))
       (eqv? (mtime-ns st) (entry-mtime-ns entry))))

(define (mtime-ns st)
  (+ (* (stat:mtime st) 1000000000) (stat:mtimensec st)))

(define (safe-stat file)
  (false-if-exception (stat file)))

;;;
;;; Options
;;;

(define-record-type <site>
  (%make-site root real-root index listing? dotfiles? symlinks? coding
              cache-control revalidate cache-size cache)
  site?
  (root site-root)                      ; the directory, as given
  (real-root site-real-root)            ; its real path, ending in /
  (index site-index)                    ; "index.html", or #f
  (listing? site-listing?)
  (dotfiles? site-dotfiles?)
  (symlinks? site-symlinks?)            ; follow symlinks out of the root?
  (coding site-codings)                 ; precompressed codings looked for: (zstd br gzip)
  (cache-control site-cache-control)    ; ((predicate . value) …)
  (revalidate site-revalidate)          ; seconds between stats of an entry
  (cache-size site-cache-size)
  (cache site-cache))

(define (cache-control-rules rules)
  ;; ((PATTERN . VALUE) …) -> ((predicate . parsed value) …)
  (map (lambda (rule)
         (let ((pattern (car rule))
               (value (if (string? (cdr rule))
                          (parse-header 'cache-control (cdr rule))
                          (cdr rule))))
           (cons (if (procedure? pattern)
                     pattern
                     (let ((rx (make-regexp pattern)))
                       (lambda (path) (regexp-exec rx path))))
                 value)))
       rules))

(define* (make-site root #:key (index "index.html") (listing? #f) (dotfiles? #f)
                    (follow-symlinks? #f) (precompressed '(zstd br gzip))
                    (cache-control '()) (revalidate 1) (cache-size 4096))
  (unless (and (file-exists? root) (file-is-directory? root))
    (error "static: not a directory" root))
  (let ((real (canonicalize-path root)))
    (%make-site root (if (string-suffix? "/" real) real (string-append real "/"))
                index listing? dotfiles? follow-symlinks? precompressed
                (cache-control-rules cache-control) revalidate cache-size
                (make-cache (make-hash-table 256) #f 0 0 (make-hash-table 256) 0))))

;;;
;;; Entries
;;;

(define (inside-root? site file)
  ;; Is FILE's real path under the root?  (Follows every symlink.)
  (or (site-symlinks? site)
      (let ((real (false-if-exception (canonicalize-path file))))
        (and real (string-prefix? (site-real-root site) (string-append real "/"))))))

(define (coding-suffix coding)
  (case coding ((gzip) ".gz") ((zstd) ".zst") ((br) ".br") (else "")))

(define (siblings site file)
  ;; -> the codings of FILE's precompressed siblings that exist
  (filter (lambda (coding)
            (let ((st (safe-stat (string-append file (coding-suffix coding)))))
              (and st (eq? (stat:type st) 'regular))))
          (site-codings site)))

(define (cache-control-for site relative)
  (let lp ((rules (site-cache-control site)))
    (and (pair? rules)
         (if ((caar rules) relative) (cdar rules) (lp (cdr rules))))))

(define (open-entry site file relative coding type codings now)
  ;; -> a new <entry> for FILE (served as RELATIVE, of media TYPE, with
  ;; content coding CODING), or #f if it is not a regular file inside
  ;; the root
  (let ((st (safe-stat file)))
    (and st (eq? (stat:type st) 'regular)
         (inside-root? site file)
         (let ((fd (false-if-exception (open-fdes file (logior O_RDONLY O_CLOEXEC)))))
           (and fd
                (let* ((st (stat fd))
                       (modified (stat:mtime st))
                       (etag (make-strong-etag (stat:ino st) (stat:size st) (mtime-ns st)))
                       (control (cache-control-for site relative))
                       (validators `((etag . ,etag)
                                     (last-modified . ,(seconds->http-date modified))
                                     ,@(if control `((cache-control . ,control)) '())
                                     ,@(if (pair? codings) '((vary accept-encoding)) '())))
                       (headers `((content-type . ,type)
                                  ,@validators
                                  (accept-ranges bytes)
                                  ,@(if (eq? coding 'identity)
                                        '()
                                        `((content-encoding ,coding))))))
                  (if (eq? (stat:type st) 'regular)
                      (let ((entry (%make-entry fd (stat:size st) (stat:ino st) (stat:dev st)
                                                (mtime-ns st) modified now 0 #t headers
                                                (build-response #:code 304 #:headers validators)
                                                coding (if (eq? coding 'identity) codings '())
                                                #f #f)))
                        (with-release (hold-contents site entry)))
                      (begin (close-fdes fd) #f))))))))

(define (hold-contents site entry)
  ;; -> ENTRY, or a copy holding its contents when the file is small and
  ;; the cache has room for them
  (let ((cache (site-cache site))
        (size (entry-size entry)))
    (if (and (<= size small-file)
             (<= (+ (cache-held cache) size) memory-limit))
        (let ((bytes (read-span entry 0 size)))
          (if bytes
              (begin
                (set-cache-held! cache (+ (cache-held cache) size))
                (%make-entry (entry-fd entry) size (entry-ino entry) (entry-dev entry)
                             (entry-mtime-ns entry) (entry-modified entry)
                             (entry-checked entry) 0 #t (entry-headers entry)
                             (entry-not-modified entry) (entry-coding entry)
                             (entry-siblings entry) bytes #f))
              entry))
        entry)))

(define (lookup site file relative coding now)
  ;; -> the current <entry> of FILE as CODING, from the cache or opened
  ;; now; #f when there is no such file
  (let* ((cache (site-cache site))
         (key (if (eq? coding 'identity) file (string-append file "\x00" (symbol->string coding))))
         (entry (hash-ref (cache-table cache) key)))
    (cond
     ((and entry (fresh-entry? site entry now))
      entry)
     ((and entry
           (let ((st (safe-stat (if (eq? coding 'identity)
                                    file
                                    (string-append file (coding-suffix coding))))))
             (and st (same-file? entry st)
                  (or (not (eq? coding 'identity))
                      (equal? (siblings site file) (entry-siblings entry))))))
      (set-entry-checked! entry now)
      entry)
     (else
      (when entry (drop-entry! cache key entry))
      (let* ((type (file-media-type (if (pair? relative) (car (last-pair relative)) file)))
             ;; The identity entry knows its siblings; a sibling's Vary
             ;; says the same.
             (codings (siblings site file))
             (new (open-entry site (string-append file (coding-suffix coding))
                              (relative-path relative) coding type codings now)))
        (when new
          (when (>= (cache-count cache) (site-cache-size site))
            (clear-cache! cache))
          (hash-set! (cache-table cache) key new)
          (set-cache-count! cache (+ 1 (cache-count cache))))
        new)))))

(define (clear-cache! cache)
  (hash-for-each (lambda (key entry) (drop-entry! cache key entry))
                 (hash-copy (cache-table cache)))
  (clear-paths! cache))

(define (clear-paths! cache)
  (hash-clear! (cache-paths cache))
  (set-cache-path-count! cache 0))

(define (fresh-entry? site entry now)
  ;; Is ENTRY in the cache, and was its file checked recently enough?
  (and (entry-cached? entry)
       (< (- now (entry-checked entry)) (site-revalidate site))))

(define (remember-path! site path entry file segments)
  ;; Make PATH a shortcut to ENTRY, bounded as the cache is: many
  ;; spellings of one file's path (percent-encoded ones) cost a clearing,
  ;; never memory.
  (let ((cache (site-cache site)))
    (when (>= (cache-path-count cache) (site-cache-size site))
      (clear-paths! cache))
    (unless (hash-ref (cache-paths cache) path)
      (set-cache-path-count! cache (+ 1 (cache-path-count cache))))
    (hash-set! (cache-paths cache) path (make-shortcut entry file segments))))

(define (hash-copy table)
  (let ((copy (make-hash-table)))
    (hash-for-each (lambda (k v) (hash-set! copy k v)) table)
    copy))

(define (relative-path segments)
  (string-append "/" (string-join segments "/")))

;;;
;;; Answers
;;;

(define (plain code text . headers)
  (values (build-response #:code code
                          #:headers `((content-type text/plain (charset . "utf-8"))
                                      ,@headers))
          text))

(define (read-span entry start end)
  ;; -> a bytevector of ENTRY's bytes [START, END), or #f if the file is
  ;; shorter now
  (let* ((bv (make-bytevector (- end start)))
         (address (bytevector-address bv)))
    (seek (entry-fd entry) start SEEK_SET)
    (let lp ((at 0))
      (if (= at (- end start))
          bv
          (let ((n (fd-read (entry-fd entry) address at (- end start at))))
            (and (> n 0) (lp (+ at n))))))))

(define (file-body site entry start end)
  ;; -> the body that sends ENTRY's bytes [START, END)
  (let ((cache (site-cache site)))
    (if (eq? (cache-owner cache) (current-thread))
        (begin
          (set-entry-users! entry (+ 1 (entry-users entry)))
          (make-file-body (entry-fd entry) #:offset start #:length (- end start)
                          #:release (entry-release entry)))
        (or (read-span entry start end) (error "static: file shrank" start end)))))

(define (headers-without headers name)
  (let lp ((headers headers) (out '()))
    (cond ((null? headers) (reverse out))
          ((eq? (caar headers) name) (lp (cdr headers) out))
          (else (lp (cdr headers) (cons (car headers) out))))))

(define boundary "plucky-byteranges-7d0c3f")

(define (multipart-body entry spans type)
  ;; -> the multipart/byteranges body of SPANS of ENTRY, or #f
  (let ((size (entry-size entry))
        (type-line (call-with-output-string
                     (lambda (port) (write-header 'content-type type port)))))
    (call-with-values open-bytevector-output-port
      (lambda (port get)
        (let lp ((spans spans))
          (if (null? spans)
              (begin
                (put-bytevector port (string->utf8 (string-append "\r\n--" boundary "--\r\n")))
                (get))
              (let* ((span (car spans))
                     (bytes (read-span entry (car span) (cdr span))))
                (and bytes
                     (begin
                       (put-bytevector
                        port (string->utf8
                              (string-append "\r\n--" boundary "\r\n" type-line
                                             "Content-Range: bytes "
                                             (number->string (car span)) "-"
                                             (number->string (- (cdr span) 1)) "/"
                                             (number->string size) "\r\n\r\n")))
                       (put-bytevector port bytes)
                       (lp (cdr spans)))))))))))

(define (serve-entry site request entry)
  ;; -> (values response body) for ENTRY
  (let ((headers (entry-headers entry))
        (size (entry-size entry))
        (etag (entry-etag entry))
        (modified (entry-modified entry)))
    (case (precondition request etag modified)
      ((304) (values (entry-not-modified entry) #f))
      ((412) (plain 412 "Precondition Failed\n"))
      (else
       (let ((spans (request-ranges request size etag modified)))
         (cond
          ((not spans)
           (values headers (or (entry-bytes entry) (file-body site entry 0 size))))
          ((eq? spans 'unsatisfiable)
           (plain 416 "Range Not Satisfiable\n"
                  `(content-range bytes * ,size)))
          ((null? (cdr spans))
           (let ((span (car spans)))
             (values (build-response
                      #:code 206
                      #:headers `((content-range bytes (,(car span) . ,(- (cdr span) 1))
                                                 ,size)
                                  ,@headers)
                      #:validate-headers? #f)
                     (file-body site entry (car span) (cdr span)))))
          (else
           (let ((body (multipart-body entry spans (assq-ref headers 'content-type))))
             (if body
                 (values (build-response
                          #:code 206
                          #:headers `((content-type multipart/byteranges
                                                    (boundary . ,boundary))
                                      ,@(headers-without headers 'content-type))
                          #:validate-headers? #f)
                         body)
                 (plain 503 "File changed\n"))))))))))

;;;
;;; Directories
;;;

(define (html-escape text)
  (call-with-output-string
    (lambda (port)
      (string-for-each
       (lambda (c)
         (case c
           ((#\<) (display "&lt;" port))
           ((#\>) (display "&gt;" port))
           ((#\&) (display "&amp;" port))
           ((#\") (display "&quot;" port))
           ((#\') (display "&#39;" port))
           (else (write-char c port))))
       text))))

(define (listing site dir relative dotfiles?)
  ;; -> (values response body): an HTML list of DIR's entries
  (let* ((names (or (scandir dir (lambda (name)
                                   (and (not (member name '("." "..")))
                                        (or dotfiles? (not (string-prefix? "." name)))))
                             string<?)
                    '()))
         (title (html-escape (string-append (relative-path relative)
                                            (if (null? relative) "" "/")))))
    (values '((content-type text/html (charset . "utf-8")))
            (string-append
             "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of "
             title "</title></head>\n<body><h1>Index of " title "</h1>\n<ul>\n"
             (if (null? relative) "" "<li><a href=\"../\">../</a></li>\n")
             (string-concatenate
              (map (lambda (name)
                     (let* ((st (false-if-exception (stat (string-append dir "/" name))))
                            (slash (if (and st (eq? (stat:type st) 'directory)) "/" "")))
                       (string-append "<li><a href=\"" (html-escape (uri-encode name)) slash
                                      "\">" (html-escape name) slash "</a></li>\n")))
                   names))
             "</ul></body></html>\n"))))

;;;
;;; The handler
;;;

(define (serve site request)
  ;; -> (values response body), or (values #f #f) when no file answers
  (let ((method (request-method request))
        (cache (site-cache site)))
    (unless (cache-owner cache)
      (set-cache-owner! cache (current-thread)))
    (if (not (memq method '(GET HEAD)))
        (values #f #f)
        (let* ((path (uri-path (request-uri request)))
               (shortcut (hash-ref (cache-paths cache) path))
               (now (current-time)))
          (if (and shortcut (fresh-entry? site (shortcut-entry shortcut) now))
              (serve-found site request (shortcut-entry shortcut)
                           (shortcut-file shortcut) (shortcut-segments shortcut) now)
              (call-with-values
                  (lambda () (path-segments path (site-dotfiles? site)))
                (case-lambda
                  ((segments slash?)
                   (serve-path site request path segments slash? now))
                  ((nothing) (values #f #f)))))))))

(define (names-file? site request)
  ;; Does the request's path name a file or a directory that a GET
  ;; would serve?
  (call-with-values
      (lambda () (path-segments (uri-path (request-uri request)) (site-dotfiles? site)))
    (case-lambda
      ((segments slash?)
       (let* ((file (string-append (site-root site) "/" (string-join segments "/")))
              (st (safe-stat file)))
         (and st (memq (stat:type st) '(regular directory))
              (inside-root? site file))))
      ((nothing) #f))))

(define (serve-path site request path segments slash? now)
  (let ((file (string-append (site-root site) "/" (string-join segments "/"))))
    (cond
     ((and (not slash?) (pair? segments))
      (call-with-values (lambda () (serve-file site request path file segments now))
        (lambda (response body)
          (cond
           (response (values response body))
           ((let ((st (safe-stat file)))
              (and st (eq? (stat:type st) 'directory) (inside-root? site file)))
            ;; A directory named without its slash: relative links in its
            ;; index would resolve against the parent.
            (let ((uri (request-uri request)))
              (values (build-response
                       #:code 301
                       #:headers `((location . ,(build-uri-reference
                                                 #:path (string-append (uri-path uri) "/")
                                                 #:query (uri-query uri)))
                                   (content-type text/plain (charset . "utf-8"))))
                      "Moved Permanently\n")))
           (else (values #f #f))))))
     (else
      ;; The index first: a cached one costs no stat of the directory (its
      ;; entry was made only for a file whose real path is inside the root).
      (call-with-values
          (lambda ()
            (if (site-index site)
                (serve-file site request path
                            (string-append file "/" (site-index site))
                            (append segments (list (site-index site))) now)
                (values #f #f)))
        (lambda (response body)
          (cond
           (response (values response body))
           ((and (site-listing? site)
                 (let ((st (safe-stat file)))
                   (and st (eq? (stat:type st) 'directory) (inside-root? site file))))
            (listing site file segments (site-dotfiles? site)))
           (else (values #f #f)))))))))

(define (serve-file site request path file segments now)
  ;; -> (values response body) for FILE, which the request's PATH names,
  ;; or (values #f #f) when FILE is not served
  (let ((entry (lookup site file segments 'identity now)))
    (if entry
        (begin
          (remember-path! site path entry file segments)
          (serve-found site request entry file segments now))
        (values #f #f))))

(define (serve-found site request entry file segments now)
  ;; -> (values response body) for ENTRY, FILE's identity entry, or for
  ;; the precompressed sibling the request's Accept-Encoding chooses
  (let* ((available (entry-siblings entry))
         (coding (if (null? available)
                     'identity
                     (choose-coding request available))))
    (cond
     ((not coding)
      (plain 406 "Not Acceptable\n" '(vary accept-encoding)))
     ((eq? coding 'identity)
      (serve-entry site request entry))
     (else
      (serve-entry site request
                   (or (lookup site file segments coding now) entry))))))

;;;
;;; What apps use
;;;

(define (site-options->site root options)
  (apply make-site root options))

(define (static-handler root . options)
  "Return a handler that serves the files under the directory ROOT (GET
and HEAD; 405 with Allow for another method on a path that names a
file; 404 for any path that names no file).
Keyword OPTIONS:
  #:index NAME          the file served for a directory (index.html; #f
                        for none)
  #:listing? BOOL       list a directory without an index (#f)
  #:dotfiles? BOOL      serve names that begin with a dot (#f)
  #:follow-symlinks? BOOL  serve symlinks whose target is outside ROOT (#f)
  #:precompressed LIST  the siblings looked for, FILE.zst, FILE.br and
                        FILE.gz by default: '(zstd br gzip), preferred
                        in that order when the client's q-values tie;
                        '() for none
  #:cache-control RULES ((PATTERN . VALUE) …): the first PATTERN (a
                        regular expression or a procedure of the path)
                        that matches the request's path gives the
                        Cache-Control VALUE (a string or (web http)'s
                        parsed form)
  #:revalidate SECONDS  how stale the open-file cache's view of a file
                        may be (1)
  #:cache-size N        files kept open (4096)"
  (let ((site (site-options->site root options)))
    (lambda (request body)
      (call-with-values (lambda () (serve site request))
        (lambda (response body)
          (cond
           (response (values response body))
           ((and (not (memq (request-method request) '(GET HEAD)))
                 (names-file? site request))
            (plain 405 "Method Not Allowed\n" '(allow GET HEAD)))
           (else (plain 404 "Not Found\n"))))))))

(define (static-middleware root . options)
  "Return a middleware: a procedure that takes a handler APP and returns
a handler that serves the files under ROOT as `static-handler' does
(with the same OPTIONS), and calls APP for every request no file
answers."
  (let ((site (site-options->site root options)))
    (lambda (app)
      (lambda (request body)
        (call-with-values (lambda () (serve site request))
          (lambda (response response-body)
            (if response
                (values response response-body)
                (app request body))))))))

;;; (plucky web static) ends here
