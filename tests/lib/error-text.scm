;;; (tests lib error-text) --- what an error says, for tests of one-line messages

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

(define-module (tests lib error-text)
  #:export (error-text))

(define (error-text thunk)
  "Return the text Guile prints for the error THUNK raises, or the
symbol no-error if it returns."
  (with-exception-handler
      (lambda (e)
        (call-with-output-string
          (lambda (port) (print-exception port #f (exception-kind e) (exception-args e)))))
    (lambda () (thunk) 'no-error)
    #:unwind? #t))
