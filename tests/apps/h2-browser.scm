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

(browse-demo-over-https "the demo over HTTP/2 in Chromium (make check-browser)"
                        "tests/apps/h2-browser.py" 1)

(test-end "apps/h2-browser")
