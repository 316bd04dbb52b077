;;; (blog git) --- the blog's database: a git repository, read and written

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Reads go through Debian's guile-git (libgit2): a commit's tree, a
;;; tree's entries, a blob's bytes, a commit's time, message and parents.
;;; They happen only when a page is not cached, so their cost is a cache
;;; miss's (bench/blog measures it).
;;;
;;; The branch's commit, which every request checks, is not asked of
;;; libgit2 (which would also stat packed-refs and the reflog
;;; directory): `branch-commit' reads the ref file, refs/heads/master,
;;; on every call, as tekuti does.  The file stays open between calls, in
;;; the calling thread (the loop's, which answers the blog's requests),
;;; and is opened again by its name once git has replaced or removed it,
;;; which statx(2) tells.  A repository moved away under its name and
;;; another put there (`mv', a symlink flipped) is not noticed: the file
;;; kept open still has its name, in the old one.  A repository whose
;;; refs were packed (`git gc', `git pack-refs') has no ref file; then
;;; packed-refs is read instead, and the next write makes the loose file
;;; again.
;;;
;;; Writes are git plumbing run as processes, because guile-git 0.5 cannot
;;; build trees: the new blobs are written with `hash-object -w', a
;;; temporary index is loaded from the branch's tree (`read-tree'),
;;; edited (`update-index --index-info'), written (`write-tree') and
;;; committed (`commit-tree'), and the branch moved with `update-ref NEW
;;; OLD', which fails when another writer moved it first.  Then the edit
;;; is made again on the new commit: nothing is lost.  The blog's own
;;; writers (threads, workers) first take an flock on GIT-DIR/plucky-blog.lock,
;;; so they queue rather than retry against each other: with 50 at once,
;;; retries alone livelock, each attempt being five processes long
;;; (tests/apps/blog.scm posts 50 comments at once and counts them).  A
;;; writer from outside (`git push') is the one the retries are for.
;;;
;;; Code:

(define-module (blog git)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-11)
  #:use-module (ice-9 binary-ports)
  #:use-module (ice-9 match)
  ;; git itself runs only to write (a comment, a post): loaded then, so
  ;; that a worker that only reads leaves it out of every collection's
  ;; roots (tests/apps/lazy.scm)
  #:autoload (ice-9 popen) (pipeline)
  #:use-module (ice-9 rdelim)
  #:use-module (ice-9 threads)
  #:use-module (rnrs bytevectors)
  #:use-module ((plucky web timing) #:select (with-phase))
  ;; guile-git's submodules: (git) re-exports them in a way #:select
  ;; cannot see through.
  #:use-module ((git bindings) #:select (libgit2-init!))
  #:use-module ((git repository) #:select (repository-open))
  #:use-module ((git oid) #:select (string->oid oid->string))
  #:use-module ((git commit) #:select (commit-lookup commit-tree-id commit-time
                                       commit-message commit-parents commit-id))
  #:use-module ((git tree) #:select (tree-lookup tree-walk tree-entry-name
                                     tree-entry-type tree-entry-id))
  #:use-module ((git blob) #:select (blob-lookup blob-content))
  #:export (open-git-store
            git-store?
            git-store-directory
            branch-commit
            commit-info
            commit-info?
            commit-info-id
            commit-info-tree
            commit-info-time
            commit-info-message
            commit-info-parents
            tree-entries
            tree-entry-ref
            blob-bytes
            blob-text
            write-blob!
            commit-edits!
            commit-log
            commit-changes
            commit-diff
            git-command))

(libgit2-init!)

(define-record-type <git-store>
  (make-git-store directory git-dir repository ref ref-file)
  git-store?
  (directory git-store-directory)       ; as given
  (git-dir git-store-git-dir)           ; the repository's git directory
  (repository git-store-opened set-git-store-opened!) ; (pid . guile-git's repository)
  (ref git-store-ref)                   ; "refs/heads/master"
  (ref-file git-store-ref-file))        ; GIT-DIR/refs/heads/master

(define (open-repository git-dir)
  (catch #t
    (lambda () (repository-open git-dir))
    (lambda _
      (throw 'blog-error (format #f "~a: libgit2 cannot open it" git-dir)))))

(define (git-store-repository store)
  ;; libgit2's repository, opened in this process: `plucky serve' loads
  ;; the app before it forks its workers, and libgit2's descriptors and
  ;; caches are not to be shared across a fork
  (let ((opened (git-store-opened store)))
    (if (eqv? (car opened) (getpid))
        (cdr opened)
        (let ((repository (open-repository (git-store-git-dir store))))
          (set-git-store-opened! store (cons (getpid) repository))
          repository))))

(define (git-directory-of directory)
  ;; -> DIRECTORY if it is a bare repository, DIRECTORY/.git if that is
  ;; one, else #f.
  (define (git-dir? dir)
    (and (file-exists? (string-append dir "/HEAD"))
         (file-exists? (string-append dir "/objects"))
         (file-exists? (string-append dir "/refs"))))
  (cond ((git-dir? directory) directory)
        ((git-dir? (string-append directory "/.git"))
         (string-append directory "/.git"))
        (else #f)))

(define* (open-git-store directory #:key (branch "master"))
  "Return a git store for the repository at DIRECTORY (bare, or a work
tree with .git), whose data is on BRANCH.  Raises `blog-error' with a
one-line message when DIRECTORY is not a git repository."
  (let ((git-dir (git-directory-of directory)))
    (unless git-dir
      (throw 'blog-error (format #f "~a: not a git repository" directory)))
    (let ((ref (string-append "refs/heads/" branch)))
      (make-git-store directory git-dir
                      (cons (getpid) (open-repository git-dir))
                      ref (string-append git-dir "/" ref)))))

;;; The branch's commit.

(define hex-length 40)

;; A thread's reader for `read-hex-line': the file it reads, kept open,
;; and what it read there last.
(define-record-type <ref-reader>
  (make-ref-reader file port stamp hex)
  ref-reader?
  (file ref-reader-file set-ref-reader-file!)    ; the file named last, or #f
  (port ref-reader-port set-ref-reader-port!)    ; an input port of it, or #f
  (stamp ref-reader-stamp set-ref-reader-stamp!) ; (mtime mtime-ns size) when read
  (hex ref-reader-hex set-ref-reader-hex!))      ; the hex read then, or #f

(define ref-readers (make-thread-local-fluid #f))

(define (ref-reader)
  (or (fluid-ref ref-readers)
      (let ((reader (make-ref-reader #f #f #f #f)))
        (fluid-set! ref-readers reader)
        reader)))

(define (same-stamp? st stamp)
  ;; STAT of the open file says it is as it was when STAMP was taken:
  ;; it still has a name (git moves a ref by renaming a new file over
  ;; the old, and deletes a ref it packs: either leaves the old file
  ;; with none), and its time and size did not move
  (and (> (stat:nlink st) 0)
       (eqv? (stat:mtime st) (car stamp))
       (eqv? (stat:mtimensec st) (cadr stamp))
       (eqv? (stat:size st) (caddr stamp))))

(define (read-hex-line file)
  ;; -> the first 40 characters of FILE if they are hex, else #f.  The
  ;; reader keeps FILE open and asks the kernel about the open file
  ;; (fstat(2)), which costs less than the open(2) and close(2) around
  ;; each read that it replaces, which walked every component of the
  ;; path (bench/blog, the index); FILE is read again only when it
  ;; moved, and the same hex string is returned until then: the check
  ;; of every request reads nothing and makes no string.
  (let ((reader (ref-reader)))
    (unless (equal? file (ref-reader-file reader))
      (close-reader! reader)
      (set-ref-reader-file! reader file))
    (let* ((port (ref-reader-port reader))
           (stamp (ref-reader-stamp reader)))
      (if (and port stamp (same-stamp? (stat port) stamp))
          (ref-reader-hex reader)
          (begin
            (close-reader! reader)
            (read-ref! reader file))))))

(define (close-reader! reader)
  (let ((port (ref-reader-port reader)))
    (when port (close-port port))
    (set-ref-reader-port! reader #f)
    (set-ref-reader-stamp! reader #f)
    (set-ref-reader-hex! reader #f)))

(define (read-ref! reader file)
  ;; -> the hex FILE holds, read afresh and kept, or #f (no such file)
  (let ((port (catch 'system-error
                (lambda () (open-input-file file #:binary #t))
                (lambda _ #f))))
    (and port
         (let* ((st (stat port))
                (bytes (get-bytevector-n port hex-length))
                (hex (and (bytevector? bytes)
                          (= (bytevector-length bytes) hex-length)
                          (let ((text (utf8->string bytes)))
                            (and (string-every char-set:hex-digit text) text)))))
           (set-ref-reader-port! reader port)
           (set-ref-reader-stamp! reader (list (stat:mtime st) (stat:mtimensec st)
                                               (stat:size st)))
           (set-ref-reader-hex! reader hex)
           hex))))

(define (packed-ref store)
  ;; -> the branch's commit as packed-refs gives it, or #f
  (catch 'system-error
    (lambda ()
      (call-with-input-file (string-append (git-store-git-dir store) "/packed-refs")
        (lambda (port)
          (let loop ()
            (let ((line (read-line port)))
              (cond ((eof-object? line) #f)
                    ((and (> (string-length line) (+ hex-length 1))
                          (string=? (substring line (+ hex-length 1))
                                    (git-store-ref store)))
                     (substring line 0 hex-length))
                    (else (loop))))))))
    (lambda _ #f)))

(define (branch-commit store)
  "Return the commit the store's branch points to, as 40 hex digits, or
#f if the branch does not exist yet."
  (or (read-hex-line (git-store-ref-file store))
      (packed-ref store)))

;;; Reads.

(define-record-type <commit-info>
  (make-commit-info id tree time message parents)
  commit-info?
  (id commit-info-id)                   ; hex
  (tree commit-info-tree)               ; hex of its tree
  (time commit-info-time)               ; seconds since the epoch
  (message commit-info-message)
  (parents commit-info-parents))        ; list of hex

(define (commit-info store hex)
  "Return a <commit-info> for the commit HEX of STORE."
  (let ((commit (commit-lookup (git-store-repository store) (string->oid hex))))
    (make-commit-info hex (oid->string (commit-tree-id commit))
                      (commit-time commit) (commit-message commit)
                      (map (lambda (c) (oid->string (commit-id c)))
                           (commit-parents commit)))))

(define git-object-tree 2)
(define git-object-blob 3)

(define (tree-entries store hex)
  "Return the entries of the tree HEX of STORE, in git's order, as a
list of (NAME TYPE ID): TYPE is 'tree, 'blob or 'other, ID hex.  Only
that tree's own entries: subtrees are not walked."
  (let ((tree (tree-lookup (git-store-repository store) (string->oid hex)))
        (entries '()))
    (tree-walk tree 0
               (lambda (root entry)
                 (let ((type (tree-entry-type entry)))
                   (set! entries
                     (cons (list (tree-entry-name entry)
                                 (cond ((= type git-object-tree) 'tree)
                                       ((= type git-object-blob) 'blob)
                                       (else 'other))
                                 (oid->string (tree-entry-id entry)))
                           entries))
                   ;; a positive value: do not descend into a subtree
                   (if (= type git-object-tree) 1 0))))
    (reverse entries)))

(define (tree-entry-ref entries name)
  "Return the entry called NAME of ENTRIES (from `tree-entries'), or #f."
  (find (lambda (entry) (string=? (car entry) name)) entries))

(define (blob-bytes store hex)
  "Return the content of the blob HEX of STORE as a bytevector."
  (blob-content (blob-lookup (git-store-repository store) (string->oid hex))))

(define (blob-text store hex)
  "Return the content of the blob HEX of STORE as a string: UTF-8, each
invalid byte read as U+FFFD.  The time it takes is the request's phase
'git (plucky web timing)."
  (with-phase 'git
    (lambda ()
      (let ((port (open-bytevector-input-port (blob-bytes store hex))))
        (set-port-encoding! port "UTF-8")
        (set-port-conversion-strategy! port 'substitute)
        (let ((text (read-string port)))
          (if (eof-object? text) "" text))))))

;;; Processes.

(define* (git-command store args #:optional (input #f) (environment '()))
  "Return the standard output of git ARGS run on STORE's repository, as
a string, giving it INPUT (a string or bytevector, or #f) on its
standard input, with ENVIRONMENT (\"NAME=VALUE\" strings) added.
Raises 'git-error with git's message when git exits non-zero."
  (let-values (((from to pids)
                (pipeline `(("env" ,@environment "git"
                             ,(string-append "--git-dir=" (git-store-git-dir store))
                             ,@args)))))
    (when input
      (if (bytevector? input)
          (put-bytevector to input)
          (begin (set-port-encoding! to "UTF-8") (display input to))))
    (close-port to)
    (set-port-encoding! from "UTF-8")
    (let* ((output (let ((text (read-string from))) (if (eof-object? text) "" text)))
           (status (begin (close-port from) (cdr (waitpid (car pids))))))
      (unless (zero? (status:exit-val status))
        (throw 'git-error (format #f "git ~a exited ~a" (car args)
                                  (status:exit-val status))))
      output)))

(define (write-blob! store content)
  "Write CONTENT (a string, written as UTF-8, or a bytevector) as a blob
of STORE and return its id."
  (string-trim-right (git-command store '("hash-object" "-w" "--stdin") content)))

(define zero-id (make-string hex-length #\0))

(define (edit->index-line edit)
  (match edit
    ((path 'delete) (string-append "0 " zero-id "\t" path "\n"))
    ((path 'blob id) (string-append "100644 " id "\t" path "\n"))))

(define (temporary-index-file)
  (let* ((port (mkstemp (string-append (or (getenv "TMPDIR") "/tmp")
                                        "/plucky-blog-index-XXXXXX")))
         (name (port-filename port)))
    (close-port port)
    (delete-file name)               ; read-tree makes it; an empty file is not an index
    name))

(define write-mutex (make-mutex))       ; flock does not exclude threads

(define (call-with-write-lock store thunk)
  (with-mutex write-mutex
    ;; empty, but made 0600 as git makes the repository's files when it
    ;; is private (core.sharedRepository 0600)
    (let ((port (open (string-append (git-store-git-dir store) "/plucky-blog.lock")
                      (logior O_WRONLY O_APPEND O_CREAT) #o600)))
      (dynamic-wind
        (lambda () (flock port LOCK_EX))
        thunk
        (lambda () (close-port port))))))

(define* (commit-edits! store message make-edits #:key (attempts 20))
  "Commit to STORE's branch the edits MAKE-EDITS returns, with MESSAGE,
and return the new commit's id.  MAKE-EDITS is called with the branch's
current commit (hex, or #f on an empty branch) and returns a list of
edits, each (PATH 'blob ID) or (PATH 'delete), PATH from the root; it
may return #f to commit nothing (then the result is #f).  When another
writer moved the branch meanwhile, MAKE-EDITS is called again on the new
commit, up to ATTEMPTS times."
  (call-with-write-lock store
    (lambda () (commit-edits/locked! store message make-edits attempts))))

(define (commit-edits/locked! store message make-edits attempts)
  (let retry ((n 1))
    (let* ((old (branch-commit store))
           (edits (make-edits old)))
      (and edits
           (let* ((index (temporary-index-file))
                  (env (list (string-append "GIT_INDEX_FILE=" index))))
             (dynamic-wind
               (const #t)
               (lambda ()
                 (if old
                     (git-command store (list "read-tree" old) #f env)
                     (git-command store '("read-tree" "--empty") #f env))
                 (git-command store '("update-index" "--index-info")
                              (string-concatenate (map edit->index-line edits)) env)
                 (let* ((tree (string-trim-right (git-command store '("write-tree") #f env)))
                        (commit (string-trim-right
                                 (git-command store
                                              `("commit-tree" ,tree
                                                ,@(if old (list "-p" old) '()))
                                              message
                                              '("GIT_AUTHOR_NAME=blog" "GIT_AUTHOR_EMAIL=blog@localhost"
                                                "GIT_COMMITTER_NAME=blog" "GIT_COMMITTER_EMAIL=blog@localhost")))))
                   (if (catch 'git-error
                         (lambda ()
                           (git-command store `("update-ref" "-m" "blog"
                                                ,(git-store-ref store) ,commit
                                                ,(or old zero-id)))
                           #t)
                         (lambda _ #f))
                       commit
                       (if (< n attempts)
                           (retry (+ n 1))
                           (throw 'git-error "the branch kept moving: gave up")))))
               (lambda ()
                 (when (file-exists? index) (delete-file index)))))))))

;;; History.

(define* (commit-log store #:key (start #f) (limit 20))
  "Return up to LIMIT <commit-info>s of STORE's branch, newest first,
from START (hex) or the branch's commit, following first parents."
  (let loop ((hex (or start (branch-commit store))) (n 0) (out '()))
    (if (or (not hex) (= n limit))
        (reverse out)
        (let ((info (commit-info store hex)))
          (loop (and (pair? (commit-info-parents info))
                     (car (commit-info-parents info)))
                (+ n 1) (cons info out))))))

(define (commit-changes store hex)
  "Return the paths commit HEX of STORE changed against its first
parent, as a list of (PATH OLD-ID NEW-ID), an id #f where the path did
not exist."
  (let ((output (git-command store (list "diff-tree" "-r" "--no-renames"
                                         "--root" "--no-commit-id" hex))))
    (filter-map
     (lambda (line)
       ;; ":100644 100644 OLD NEW M\tPATH"
       (let ((tab (string-index line #\tab)))
         (and tab
              (let ((fields (string-split (substring line 1 tab) #\space)))
                (and (= (length fields) 5)
                     (list (substring line (+ tab 1))
                           (and (not (string=? (list-ref fields 2) zero-id))
                                (list-ref fields 2))
                           (and (not (string=? (list-ref fields 3) zero-id))
                                (list-ref fields 3))))))))
     (string-split output #\newline))))

(define (commit-diff store hex)
  "Return the patch of commit HEX of STORE against its first parent, as
text."
  (git-command store (list "diff-tree" "-p" "--root" "--no-commit-id" hex)))
