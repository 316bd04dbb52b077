;;; (plucky http status) --- reason phrases and precomputed status lines

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A response starts with "HTTP/1.1 200 OK\r\n".  Rather than print the
;;; version, the code and the phrase for each response, each status line
;;; is made once, as bytes, the first time it is needed, and kept: the
;;; writer copies it from then on.  Not at load time: making all 1,000
;;; lines (codes 100-599, two versions) would cost every start-up
;;; (callgrind, bench/startup-instructions), where a server mostly
;;; answers with a handful of codes.
;;;
;;; Code:

(define-module (plucky http status)
  #:use-module (rnrs bytevectors)
  #:export (status-reason
            status-line))

(define reasons
  '((100 . "Continue") (101 . "Switching Protocols") (103 . "Early Hints")
    (200 . "OK") (201 . "Created") (202 . "Accepted")
    (203 . "Non-Authoritative Information") (204 . "No Content")
    (205 . "Reset Content") (206 . "Partial Content")
    (300 . "Multiple Choices") (301 . "Moved Permanently") (302 . "Found")
    (303 . "See Other") (304 . "Not Modified") (307 . "Temporary Redirect")
    (308 . "Permanent Redirect")
    (400 . "Bad Request") (401 . "Unauthorized") (402 . "Payment Required")
    (403 . "Forbidden") (404 . "Not Found") (405 . "Method Not Allowed")
    (406 . "Not Acceptable") (407 . "Proxy Authentication Required")
    (408 . "Request Timeout") (409 . "Conflict") (410 . "Gone")
    (411 . "Length Required") (412 . "Precondition Failed")
    (413 . "Content Too Large") (414 . "URI Too Long")
    (415 . "Unsupported Media Type") (416 . "Range Not Satisfiable")
    (417 . "Expectation Failed") (421 . "Misdirected Request")
    (422 . "Unprocessable Content") (425 . "Too Early") (426 . "Upgrade Required")
    (428 . "Precondition Required") (429 . "Too Many Requests")
    (431 . "Request Header Fields Too Large")
    (451 . "Unavailable For Legal Reasons")
    (500 . "Internal Server Error") (501 . "Not Implemented")
    (502 . "Bad Gateway") (503 . "Service Unavailable")
    (504 . "Gateway Timeout") (505 . "HTTP Version Not Supported")))

(define reason-table
  (let ((v (make-vector 600 #f)))
    (for-each (lambda (p) (vector-set! v (car p) (cdr p))) reasons)
    v))

(define (status-reason code)
  "Return the standard reason phrase for CODE, or \"Unknown\"."
  (or (and (exact-integer? code) (<= 0 code 599) (vector-ref reason-table code))
      "Unknown"))

(define (make-line minor code reason)
  (string->utf8 (string-append "HTTP/1." (number->string minor) " "
                               (number->string code) " " reason "\r\n")))

;; index: code (100..599) -> the line's bytes, or #f until first used;
;; one vector per minor version.
(define lines-1.0 (make-vector 600 #f))
(define lines-1.1 (make-vector 600 #f))

(define (standard-line minor code)
  ;; -> the kept line for MINOR and CODE, made on first use
  (let ((lines (if (eqv? minor 0) lines-1.0 lines-1.1)))
    (or (vector-ref lines code)
        (let ((line (make-line minor code (status-reason code))))
          (vector-set! lines code line)
          line))))

(define (status-line version code reason)
  "Return the bytes \"HTTP/1.x CODE REASON\\r\\n\" for VERSION (a pair
such as (1 . 1)), CODE and REASON (#f for the standard phrase).  Standard
lines are made once and kept; the caller must not modify the result."
  (if (and (not reason) (exact-integer? code) (<= 100 code 599))
      (standard-line (if (eqv? (cdr version) 0) 0 1) code)
      (make-line (if (eqv? (cdr version) 0) 0 1) code
                 (or reason (status-reason code)))))

;;; (plucky http status) ends here
