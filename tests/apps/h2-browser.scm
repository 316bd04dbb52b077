;;; tests/apps/h2-browser.scm --- the demo over HTTP/2 in Chromium

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `make check-browser' runs this file with PLUCKY_BROWSER_TEST=1 (plain
;;; `make check' counts it as skipped).
;;;
;;; openssl makes a test CA and a certificate it signs for 127.0.0.1;
;;; `bin/plucky serve apps/demo.scm' serves HTTPS with it, offering ALPN
;;; h2.  tests/apps/h2-browser.py trusts the CA as a user would, loads the
;;; landing page and checks that it and its assets came over HTTP/2
;;; (`nextHopProtocol' is "h2").  The screenshot goes to
;;; tests/out/h2-landing.png.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (tests lib harness)
             (tests lib command))

(test-begin "apps/h2-browser")

(if (not (getenv "PLUCKY_BROWSER_TEST"))
    (begin
      (test-skip 1)
      (test-assert "the demo over HTTP/2 in Chromium (make check-browser)" #f))
    (let ((data (temporary-directory))
          (certs (temporary-directory)))
      (test-eqv "openssl made the test CA" 0
        (status:exit-val (make-certificates! certs)))
      (call-with-plucky
       "apps/demo.scm"
       (append (list "--port" "0" "--workers" "1"
                     "--tls-cert" (string-append certs "/leaf.pem")
                     "--tls-key" (string-append certs "/leaf.key"))
               allow-root)
       (lambda (plucky)
         (test-assert "plucky serves the demo over HTTPS" (plucky-port plucky))
         (run-browser-script "tests/apps/h2-browser.py"
                             (format #f "https://127.0.0.1:~a/" (plucky-port plucky))
                             (string-append certs "/ca.pem")
                             (string-append source-root "/tests/out")))
       #:environment (cons (string-append "PLUCKY_DATA=" data) (environ))
       #:timeout 120)
      (remove-tree data)
      (remove-tree certs)))

(test-end "apps/h2-browser")
