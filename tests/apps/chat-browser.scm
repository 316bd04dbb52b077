;;; tests/apps/chat-browser.scm --- the demo's chat over HTTPS and wss:// in Chromium

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `make check-browser' runs this file with PLUCKY_BROWSER_TEST=1 (plain
;;; `make check' counts it as skipped).
;;;
;;; openssl makes a test CA and a certificate it signs for 127.0.0.1;
;;; `bin/plucky serve apps/demo.scm' serves HTTPS with it, two workers.
;;; tests/apps/chat-browser.py trusts the CA as a user would (an NSS
;;; database in a throw-away HOME, made with certutil: no flag that
;;; ignores certificate errors), loads the landing page and the chat in
;;; two tabs, and checks that what one tab says over wss:// shows in the
;;; other.  Screenshots go to tests/out/chat-*.png.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (tests lib harness)
             (tests lib command))

(test-begin "apps/chat-browser")

(if (not (getenv "PLUCKY_BROWSER_TEST"))
    (begin
      (test-skip 1)
      (test-assert "chat over HTTPS in Chromium (make check-browser)" #f))
    (let ((data (temporary-directory))
          (certs (temporary-directory)))
      (test-eqv "openssl made the test CA" 0
        (status:exit-val (make-certificates! certs)))
      (call-with-plucky
       "apps/demo.scm"
       (append (list "--port" "0" "--workers" "2"
                     "--tls-cert" (string-append certs "/leaf.pem")
                     "--tls-key" (string-append certs "/leaf.key"))
               allow-root)
       (lambda (plucky)
         (test-assert "plucky serves the demo over HTTPS" (plucky-port plucky))
         (run-browser-script "tests/apps/chat-browser.py"
                             (format #f "https://127.0.0.1:~a/" (plucky-port plucky))
                             (string-append certs "/ca.pem")
                             (string-append source-root "/tests/out")))
       #:environment (cons (string-append "PLUCKY_DATA=" data) (environ))
       #:timeout 120)
      (remove-tree data)
      (remove-tree certs)))

(test-end "apps/chat-browser")
