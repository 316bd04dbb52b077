;;; tests/http/status.scm --- (plucky http status)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Status lines are made on first use and kept (not at load time: see
;;; the module's commentary).  Every standard line, for both versions,
;;; must be the bytes of "HTTP/1.x CODE REASON\r\n" whichever is asked
;;; for first, be the same object when asked again, and never be mixed
;;; up between the versions; a line with a reason of the handler's own
;;; is never kept.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (srfi srfi-1)
             (rnrs bytevectors)
             (tests lib harness)
             (plucky http status))

(test-begin "http/status")

(define (expected minor code)
  (string-append "HTTP/1." (number->string minor) " " (number->string code) " "
                 (status-reason code) "\r\n"))

(define (line minor code)
  (utf8->string (status-line (cons 1 minor) code #f)))

(test-group "status-reason"
  (test-equal "200" "OK" (status-reason 200))
  (test-equal "404" "Not Found" (status-reason 404))
  (test-equal "431" "Request Header Fields Too Large" (status-reason 431))
  (test-equal "an unassigned code" "Unknown" (status-reason 299))
  (test-equal "out of range" "Unknown" (status-reason 600))
  (test-equal "not a number" "Unknown" (status-reason 'ok)))

(test-group "status-line: a few, byte for byte"
  ;; Asked before any other: 1.0 first, so a mix-up of the two kept
  ;; tables would show in the 1.1 lines below.
  (test-equal "1.0 404" "HTTP/1.0 404 Not Found\r\n" (line 0 404))
  (test-equal "1.1 404" "HTTP/1.1 404 Not Found\r\n" (line 1 404))
  (test-equal "1.1 200" "HTTP/1.1 200 OK\r\n" (line 1 200))
  (test-equal "1.0 200" "HTTP/1.0 200 OK\r\n" (line 0 200))
  (test-equal "1.1 599" "HTTP/1.1 599 Unknown\r\n" (line 1 599))
  (test-equal "1.1 100" "HTTP/1.1 100 Continue\r\n" (line 1 100)))

(test-group "status-line: every standard code, both versions"
  (test-assert "1.1, codes 599 down to 100"
    (every (lambda (code) (equal? (line 1 code) (expected 1 code)))
           (reverse (iota 500 100))))
  (test-assert "1.0, codes 100 up to 599"
    (every (lambda (code) (equal? (line 0 code) (expected 0 code)))
           (iota 500 100)))
  (test-assert "asked again: the same bytes, kept"
    (every (lambda (code)
             (and (eq? (status-line '(1 . 1) code #f) (status-line '(1 . 1) code #f))
                  (eq? (status-line '(1 . 0) code #f) (status-line '(1 . 0) code #f))
                  (not (eq? (status-line '(1 . 1) code #f)
                            (status-line '(1 . 0) code #f)))))
           (iota 500 100))))

(test-group "status-line: not kept"
  (test-equal "a reason of its own" "HTTP/1.1 200 Fine\r\n"
    (utf8->string (status-line '(1 . 1) 200 "Fine")))
  (test-equal "the standard line is unchanged by it" "HTTP/1.1 200 OK\r\n" (line 1 200))
  (test-assert "a fresh line each time"
    (not (eq? (status-line '(1 . 1) 200 "Fine") (status-line '(1 . 1) 200 "Fine"))))
  (test-equal "a code out of range" "HTTP/1.1 600 Unknown\r\n"
    (utf8->string (status-line '(1 . 1) 600 #f))))

(test-end "http/status")

;;; tests/http/status.scm ends here
