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

(browse-demo-over-https "chat over HTTPS in Chromium (make check-browser)"
                        "tests/apps/chat-browser.py" 2)

(test-end "apps/chat-browser")
