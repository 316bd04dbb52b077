;;; tests/sys/inotify.scm --- (plucky sys inotify)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The inotify wrappers on a temporary directory: a descriptor opened
;;; non-blocking and close-on-exec; a watch on the directory sees a file
;;; written there, renamed there and deleted, each with its name;
;;; nothing pending reads as the empty list; a missing directory is a
;;; negated errno, not an exception; a removed watch says IN_IGNORED.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (plucky sys inotify)
             ((plucky sys libc) #:select (fd-close))
             (tests lib harness)
             (tests lib command))

(test-begin "sys/inotify")

(define dir (temporary-directory))
(define (file name) (string-append dir "/" name))

(define (events-named fd name)
  ;; -> the masks of the pending events about NAME, oldest first
  (filter-map (lambda (event)
                (and (equal? name (inotify-event-name event)) (inotify-event-mask event)))
              (inotify-read fd)))

(define (with-inotify proc)
  (let ((fd (inotify-open)))
    (dynamic-wind (lambda () #t) (lambda () (proc fd)) (lambda () (fd-close fd)))))

(test-group "inotify-open"
  (with-inotify
   (lambda (fd)
     (test-assert "a descriptor" (>= fd 0))
     (let ((flags (fcntl fd F_GETFL)))
       (test-assert "non-blocking" (logtest flags O_NONBLOCK)))
     (test-assert "close-on-exec" (logtest (fcntl fd F_GETFD) FD_CLOEXEC)))))

(test-group "inotify-add-watch!"
  (with-inotify
   (lambda (fd)
     (test-assert "a directory: a watch descriptor"
       (>= (inotify-add-watch! fd dir IN_CLOSE_WRITE) 0))
     (test-equal "the same directory again: the same watch"
       (inotify-add-watch! fd dir IN_CLOSE_WRITE)
       (inotify-add-watch! fd dir IN_CLOSE_WRITE))
     (test-equal "a missing one: -ENOENT" (- ENOENT)
       (inotify-add-watch! fd (file "missing") IN_CLOSE_WRITE)))))

(test-group "inotify-read"
  (with-inotify
   (lambda (fd)
     (inotify-add-watch! fd dir (logior IN_CLOSE_WRITE IN_MOVED_TO IN_DELETE))
     (test-equal "nothing pending: the empty list" '() (inotify-read fd))
     (write-file (file "a.scm") "(a)")   ; through a.scm.new, renamed
     (let ((masks (events-named fd "a.scm")))
       (test-assert "renamed over: IN_MOVED_TO, with the name"
         (any (lambda (mask) (logtest mask IN_MOVED_TO)) masks)))
     (call-with-output-file (file "a.scm") (lambda (port) (display "(b)" port)))
     (test-assert "written in place: IN_CLOSE_WRITE"
       (any (lambda (mask) (logtest mask IN_CLOSE_WRITE)) (events-named fd "a.scm")))
     (delete-file (file "a.scm"))
     (test-assert "deleted: IN_DELETE"
       (any (lambda (mask) (logtest mask IN_DELETE)) (events-named fd "a.scm")))
     (test-equal "then nothing" '() (inotify-read fd)))))

(test-group "inotify-remove-watch!"
  (with-inotify
   (lambda (fd)
     (let ((wd (inotify-add-watch! fd dir IN_CLOSE_WRITE)))
       (test-equal "0" 0 (inotify-remove-watch! fd wd))
       (test-assert "then IN_IGNORED for it"
         (any (lambda (event)
                (and (= wd (inotify-event-wd event))
                     (logtest (inotify-event-mask event) IN_IGNORED)))
              (inotify-read fd)))
       (test-equal "twice: -EINVAL" (- EINVAL) (inotify-remove-watch! fd wd))))))

(remove-tree dir)

(test-end "sys/inotify")
