;;; (plucky http error) --- the condition a malformed message makes

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The parser does not raise on bad input: like picohttpparser's -1 it
;;; answers with a value, an &http-error, so that the event loop can send
;;; the status it carries and close the connection without unwinding.
;;; The condition is an (ice-9 exceptions) type all the same, so code
;;; that prefers to raise it (a handler reading a body, say) can.
;;;
;;; Code:

(define-module (plucky http error)
  #:use-module (ice-9 exceptions)
  #:export (&http-error
            make-http-error
            http-error?
            http-error-status
            http-error-reason
            http-error-offset))

(define-exception-type &http-error &error
  %make-http-error
  http-error?
  (status http-error-status)      ; the response code to send: 400, 414, 431, 505…
  (reason http-error-reason)      ; a short human sentence for the log and body
  (offset http-error-offset))     ; byte offset into the input where it was seen, or #f

(define* (make-http-error status reason #:optional (offset #f))
  "Return an &http-error condition that asks for response STATUS, with
REASON (a string) and the byte OFFSET at which the problem was found."
  (%make-http-error status reason offset))

;;; (plucky http error) ends here
