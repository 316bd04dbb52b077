;;; tests/fuzz/app.scm --- the handler the fuzz campaign talks to

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Serve it:  bin/plucky serve tests/fuzz/app.scm --port 8080
;;;
;;; Every answer says, in headers, what the server made of the request:
;;; X-Method (so that the fuzzer knows an answer to HEAD has no body
;;; whatever its Content-Length says) and X-Body-Length (so that it can
;;; check, for requests it did not mutate, that each answer belongs to the
;;; request it expects and got the whole body, split and pipelined as it
;;; was).  tests/fuzz/http-fuzz.py starts the server on this file;
;;; tests/server/fuzz.scm uses the same handler through `(load ...)'.
;;;
;;; Code:

(use-modules (web request) (rnrs bytevectors))

(define (fuzz-echo request body)
  (let ((method (symbol->string (request-method request)))
        (length (number->string (if (bytevector? body) (bytevector-length body) 0))))
    (values `((content-type . (text/plain))
              (x-method . ,method)
              (x-body-length . ,length))
            (string-append method " " length "\n"))))

fuzz-echo

;;; tests/fuzz/app.scm ends here
