;;; (plucky server reload) --- `plucky serve --reload': reload when files change

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A development aid, as uvicorn's and gunicorn's --reload.  The command
;;; loads the app in the master within `call-recording-loads', which
;;; notes every file Guile loads meanwhile (through `%load-hook': the
;;; app file, the files it `load's, the modules it uses, compiled or
;;; not).  `open-reloader' keeps those that are the app's own — all but
;;; Guile's (under its data directory and site directories) and
;;; plucky's (its plucky/ and web/ trees) — and watches, with inotify
;;; (plucky sys inotify), the directories they are in rather than the
;;; files: an editor that saves by renaming a new file over the old one,
;;; or by deleting and creating it, leaves a watch on the file pointing
;;; at nothing, while the directory's watch sees every pattern.  A
;;; directory itself removed or renamed is watched again when it comes
;;; back (at the next event).
;;;
;;; The master (plucky server workers) holds the descriptor in its epoll
;;; set through a <change-watch>: on each event that names one of the
;;; app's files it waits until no other came for `quiet' seconds (an
;;; editor's burst of writes, a `git checkout', is one reload), then
;;; asks `reloader-settled?': every file changed since the last reload is
;;; read with Guile's reader, and one that does not read (a missing
;;; parenthesis) is logged as FILE:LINE:COLUMN and the reload is not
;;; started: the old code serves on until the file is saved again.
;;; Otherwise the master reloads as on SIGHUP: a new generation of
;;; workers loads the app, then the old one drains.
;;;
;;; The new workers are forked from the master, which loaded the app's
;;; modules once, at start: `load' of the app file would find them loaded
;;; and run their old code.  So each new worker first calls
;;; `reload-changed-modules!', which reloads (Guile's `reload-module')
;;; every app module whose file changed since the master started, and
;;; the app modules that use them, each after those it uses.  One limit:
;;; Guile may have inlined a small procedure of a module into the
;;; compiled code of another; the inlined copy changes only when that
;;; other module is compiled again.
;;;
;;; Code:

(define-module (plucky server reload)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 exceptions)
  #:use-module (plucky sys inotify)
  #:use-module ((plucky sys libc) #:select (fd-close errno->string))
  #:use-module ((plucky server loop) #:select (log-line))
  #:use-module ((plucky server workers) #:select (make-change-watch))
  #:export (call-recording-loads
            open-reloader
            reloader-files
            reloader->change-watch
            reloader-settled?
            reload-changed-modules!
            close-reloader!))

(define (call-recording-loads thunk)
  "Call THUNK; return its value and, as a second value, the list of the
files Guile loaded meanwhile (absolute names, in the order their loading
began)."
  (let ((files '())
        (outer %load-hook))
    (dynamic-wind
      (lambda ()
        (set! %load-hook
              (lambda (file)
                (set! files (cons file files))
                (when (procedure? outer) (outer file)))))
      (lambda ()
        (let ((value (thunk)))
          (values value (reverse files))))
      (lambda () (set! %load-hook outer)))))

(define-record-type <reloader>
  (make-reloader fd files watches modules pending changed quiet)
  reloader?
  (fd reloader-fd set-reloader-fd!)     ; the inotify descriptor, or #f once closed
  (files reloader-files)                ; the app's files watched, absolute
  (watches reloader-watches)            ; hash: wd -> directory, directory -> wd
  ;; ((file . module-name) …): the app's modules, in the order they loaded
  (modules reloader-modules)
  ;; files changed since the last reload started, the newest first
  (pending reloader-pending set-reloader-pending!)
  ;; files changed since the master loaded the app, the newest first
  (changed reloader-changed set-reloader-changed!)
  (quiet reloader-quiet))               ; seconds without change before a reload

;; What a save does to a directory entry, whichever way an editor saves.
(define file-events
  (logior IN_CLOSE_WRITE IN_MOVED_TO IN_CREATE IN_MODIFY IN_ATTRIB IN_DELETE))

;; The directory itself renamed or removed: its watch is gone (IN_IGNORED).
(define directory-events (logior IN_DELETE_SELF IN_MOVE_SELF))

(define (canonical file)
  (or (false-if-exception (canonicalize-path file)) file))

(define (own-directories)
  ;; -> the directories (with a trailing slash) of Guile's modules and
  ;; plucky's, whose files are not the app's
  (let ((here (search-path %load-path "plucky/server/reload.scm")))
    (map (lambda (dir) (string-append (canonical dir) "/"))
         (append (list (%package-data-dir) (%library-dir) (%site-dir) (%global-site-dir))
                 (if here
                     (let ((root (dirname (dirname (dirname here)))))
                       (list (string-append root "/plucky")
                             (string-append root "/web")))
                     '())))))

(define (app-files loaded)
  ;; -> the files of LOADED that are the app's, canonical, each once
  (let ((own (own-directories)))
    (delete-duplicates
     (filter (lambda (file)
               (and (file-exists? file)
                    (not (any (lambda (dir) (string-prefix? dir file)) own))))
             (map canonical loaded)))))

(define (file->module-name file)
  ;; -> the name of the module loaded from FILE through the load path,
  ;; or #f if FILE is not one
  (any (lambda (dir)
         (let ((dir (string-append (canonical dir) "/")))
           (and (string-prefix? dir file)
                (string-suffix? ".scm" file)
                (let* ((relative (substring file (string-length dir)))
                       (name (map string->symbol
                                  (string-split (string-drop-right relative 4) #\/)))
                       (module (resolve-module name #f #:ensure #f)))
                  (and module
                       (equal? (module-filename module) relative)
                       name)))))
       %load-path))

(define (watch-directory! fd watches directory)
  ;; -> #t once DIRECTORY is watched, else the negated errno
  (let ((wd (inotify-add-watch! fd directory
                                (logior file-events directory-events IN_ONLYDIR))))
    (if (< wd 0)
        wd
        (begin
          (hash-set! watches wd directory)
          (hash-set! watches directory wd)
          #t))))

(define* (open-reloader app-file loaded #:key (quiet 0.2))
  "Return a reloader watching APP-FILE and those of LOADED (the files
the app loaded: see `call-recording-loads') that are the app's own (see
the commentary), which reloads QUIET seconds after the last change.
Raise an error that says why if inotify cannot watch them.  Close it
with `close-reloader!'."
  (let ((fd (inotify-open)))
    (when (< fd 0)
      (error (format #f "--reload: inotify: ~a" (errno->string fd))))
    (let* ((files (app-files (cons app-file loaded)))
           (watches (make-hash-table))
           (modules (filter-map (lambda (file)
                                  (let ((name (file->module-name file)))
                                    (and name (cons file name))))
                                files)))
      (for-each (lambda (directory)
                  (let ((result (watch-directory! fd watches directory)))
                    (unless (eq? result #t)
                      (fd-close fd)
                      (error (format #f "--reload: cannot watch ~a: ~a"
                                     directory (errno->string result))))))
                (delete-duplicates (map dirname files)))
      (make-reloader fd files watches modules '() '() quiet))))

(define (close-reloader! reloader)
  "Close RELOADER's inotify descriptor; return unspecified.  Closing it
twice does nothing more."
  (let ((fd (reloader-fd reloader)))
    (when fd
      (fd-close fd)
      (set-reloader-fd! reloader #f))))

(define (rewatch-lost-directories! reloader)
  ;; A watched directory that was removed or renamed comes back: watch
  ;; the new one.
  (let ((watches (reloader-watches reloader)))
    (for-each (lambda (directory)
                (unless (hash-ref watches directory)
                  (watch-directory! (reloader-fd reloader) watches directory)))
              (delete-duplicates (map dirname (reloader-files reloader))))))

(define (note-change! reloader file)
  (unless (member file (reloader-pending reloader))
    (set-reloader-pending! reloader (cons file (reloader-pending reloader))))
  (unless (member file (reloader-changed reloader))
    (set-reloader-changed! reloader (cons file (reloader-changed reloader)))))

(define (read-changes! reloader)
  ;; Read the pending events; -> #t if one concerns an app's file
  (let ((events (inotify-read (reloader-fd reloader)))
        (watches (reloader-watches reloader))
        (files (reloader-files reloader)))
    (if (not (list? events))
        (begin (log-line "--reload: reading inotify: ~a" (errno->string events)) #f)
        (let ((relevant
               (filter-map
                (lambda (event)
                  (let ((mask (inotify-event-mask event))
                        (directory (hash-ref watches (inotify-event-wd event))))
                    (cond
                     ((logtest mask IN_Q_OVERFLOW)
                      ;; events lost: say the app file changed, to be safe
                      (note-change! reloader (car files))
                      #t)
                     ((logtest mask IN_IGNORED)
                      (when directory
                        (hash-remove! watches (inotify-event-wd event))
                        (hash-remove! watches directory))
                      #f)
                     ((and directory (inotify-event-name event)
                           (not (logtest mask IN_ISDIR)))
                      (let ((file (string-append directory "/" (inotify-event-name event))))
                        (and (member file files)
                             (file-exists? file) ; a deletion: wait for the new one
                             (begin (note-change! reloader file) #t))))
                     (else #f))))
                events)))
          (rewatch-lost-directories! reloader)
          (pair? relevant)))))

(define (read-error file)
  ;; -> #f if every form of FILE reads, else the reader's message, on
  ;; one line, starting with FILE:LINE:COLUMN
  (with-exception-handler
      (lambda (exception)
        (let ((message (if (and (exception-with-message? exception)
                                (exception-with-irritants? exception))
                           (apply format #f (exception-message exception)
                                  (exception-irritants exception))
                           (format #f "~a: ~s" file exception))))
          (string-join (string-split message #\newline) " ")))
    (lambda ()
      (call-with-input-file file
        (lambda (port)
          (set-port-filename! port file)
          (let lp ()
            (if (eof-object? (read port)) #f (lp))))))
    #:unwind? #t))

(define (reloader-settled? reloader)
  "Return #t if the files changed since the last reload all read (log a
line naming the first), so that the app is to be reloaded; else log each
reader error as FILE:LINE:COLUMN and return #f."
  (let* ((pending (reverse (reloader-pending reloader)))
         (errors (filter-map (lambda (file)
                               (and (file-exists? file) (read-error file)))
                             pending)))
    (cond
     ((null? pending) #f)
     ((pair? errors)
      (for-each (lambda (message)
                  (log-line "reload: ~a; the old code keeps serving" message))
                errors)
      #f)
     (else
      (set-reloader-pending! reloader '())
      (log-line "reload: ~a changed~a" (car pending)
                (let ((more (length (cdr pending))))
                  (cond ((zero? more) "")
                        ((= more 1) " (and 1 other file)")
                        (else (format #f " (and ~a other files)" more)))))
      #t))))

(define (reloader->change-watch reloader)
  "Return the <change-watch> by which a master (see `supervise' in
(plucky server workers)) hears RELOADER's changes."
  (make-change-watch #:fd (reloader-fd reloader)
                     #:read-changes (lambda () (read-changes! reloader))
                     #:settled (lambda () (reloader-settled? reloader))
                     #:quiet (reloader-quiet reloader)))

(define (module-order modules uses)
  ;; -> MODULES (names), each after those of them it uses; USES gives a
  ;; name's list of names it uses.  DONE is built the newest first.
  (define (visit name done path)
    (if (or (member name done) (member name path))
        done
        (cons name
              (fold (lambda (used done)
                      (if (member used modules)
                          (visit used done (cons name path))
                          done))
                    done (uses name)))))
  (reverse (fold (lambda (name done) (visit name done '())) '() modules)))

(define (reload-changed-modules! reloader)
  "In a new worker, before the app is loaded: reload each of the app's
modules whose file changed since the master loaded the app, and those of
the app's modules that use them, each after those it uses; return the
list of their names.  An error in a module's code is raised."
  (let* ((modules (reloader-modules reloader))
         (names (map cdr modules))
         (uses (lambda (name)
                 (map module-name (module-uses (resolve-module name)))))
         (changed (filter-map (lambda (entry)
                                (and (member (car entry) (reloader-changed reloader))
                                     (cdr entry)))
                              modules))
         ;; the changed ones and, again and again, those that use them
         (stale (let grow ((stale changed))
                  (let ((more (filter (lambda (name)
                                        (and (not (member name stale))
                                             (any (lambda (used) (member used stale))
                                                  (uses name))))
                                      names)))
                    (if (null? more) stale (grow (append stale more)))))))
    (let ((order (module-order stale uses)))
      (for-each (lambda (name) (reload-module (resolve-module name))) order)
      order)))

;;; (plucky server reload) ends here
