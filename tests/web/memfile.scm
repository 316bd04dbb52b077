;;; tests/web/memfile.scm --- bytes kept in a memfd, sent as file bodies

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A memfile's descriptor stays open while the cache or any body holds
;;; it, and closes with the last of them; once closed, no body is taken.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (tests lib harness)
             (rnrs bytevectors)
             ((plucky server connection)
              #:select (file-body? file-body-length file-body->bytevector close-file-body!))
             (plucky web memfile))

(test-begin "web/memfile")

(define (open-memfds)
  ;; -> how many memfds this process holds open
  (let ((stream (opendir "/proc/self/fd")))
    (let lp ((n 0))
      (let ((name (readdir stream)))
        (if (eof-object? name)
            (begin (closedir stream) n)
            (lp (if (let ((target (false-if-exception
                                   (readlink (string-append "/proc/self/fd/" name)))))
                      (and target (string-contains target "memfd:plucky-page")))
                    (+ n 1)
                    n)))))))

(define page (string->utf8 (string-append "<!DOCTYPE html>" (make-string 20000 #\x))))

(test-group "bytevector->memfile"
  (let* ((before (open-memfds))
         (memfile (bytevector->memfile page)))
    (test-assert "a memfile" (memfile? memfile))
    (test-equal "its size" (bytevector-length page) (memfile-size memfile))
    (test-equal "one memfd more" (+ before 1) (open-memfds))
    (memfile-drop! memfile)
    (test-equal "dropped with no body: closed" before (open-memfds))))

(test-group "memfile-body"
  (let* ((before (open-memfds))
         (memfile (bytevector->memfile page))
         (a (memfile-body memfile))
         (b (memfile-body memfile)))
    (test-assert "a file body" (file-body? a))
    (test-equal "of the whole page" (bytevector-length page) (file-body-length a))
    (test-equal "the page's bytes" page (file-body->bytevector a))
    (memfile-drop! memfile)
    (test-equal "dropped: open while bodies hold it" (+ before 1) (open-memfds))
    (close-file-body! a)
    (close-file-body! a)
    (test-equal "a body released twice counts once" (+ before 1) (open-memfds))
    (test-equal "the other still reads the page" page (file-body->bytevector b))
    (close-file-body! b)
    (test-equal "closed with the last body" before (open-memfds))
    (test-eq "no body once closed" #f (memfile-body memfile))))

(test-end "web/memfile")
