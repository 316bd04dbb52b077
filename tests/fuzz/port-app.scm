;;; tests/fuzz/port-app.scm --- the fuzz handler, reading request bodies from a port

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Serve it:  bin/plucky serve tests/fuzz/port-app.scm --port 8080
;;; Fuzz it:   tests/fuzz/http-fuzz.py --serve --app tests/fuzz/port-app.scm
;;;
;;; The answers of tests/fuzz/app.scm (X-Method, X-Body-Length and the
;;; same body text), but made with `with-body-port': the handler gets each
;;; request body that is not empty as an input port, on a thread of the
;;; worker, and reads it to its end; X-Body-Length is the number of bytes
;;; it read.  BODY is #f when the request has none.  So the campaign that
;;; checks the loop's own body reading checks the threaded body reader
;;; (plucky server stream) and the hand-off to and from the loop as well.
;;; An error reading the body (408, 413, 400) is left to escape: the
;;; server turns it into the answer.
;;;
;;; Code:

(use-modules (plucky server) (web request) (rnrs bytevectors) (ice-9 binary-ports))

(define (body-port-length port)
  ;; -> bytes read from PORT up to its end, 0 for no port
  (if (not port)
      0
      (let ((buffer (make-bytevector 65536)))
        (let lp ((total 0))
          (let ((n (get-bytevector-n! port buffer 0 (bytevector-length buffer))))
            (if (eof-object? n)
                total
                (lp (+ total n))))))))

(define (fuzz-echo/port request body)
  (let ((method (symbol->string (request-method request)))
        (length (number->string (body-port-length body))))
    (values `((content-type . (text/plain))
              (x-method . ,method)
              (x-body-length . ,length))
            (string-append method " " length "\n"))))

(with-body-port fuzz-echo/port)

;;; tests/fuzz/port-app.scm ends here
