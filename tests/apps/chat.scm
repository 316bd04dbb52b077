;;; tests/apps/chat.scm --- apps/chat.scm with several workers

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `bin/plucky serve apps/chat.scm --workers 2'; tests/apps/chat-workers.py
;;; puts two WebSocket clients on different workers (it asks /worker on a
;;; connection, then upgrades that connection) and checks that each hears
;;; the other, and that the history reached both workers.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (ice-9 popen)
             (ice-9 rdelim)
             (tests lib harness)
             (tests lib command))

(test-begin "apps/chat")

(define (script-lines . args)
  ;; -> the lines the client script printed
  (let* ((pipe (apply open-pipe* OPEN_READ "timeout" "90" "/usr/bin/python3"
                      (string-append source-root "/tests/apps/chat-workers.py")
                      args))
         (lines (let lp ((out '()))
                  (let ((line (read-line pipe)))
                    (if (eof-object? line) (reverse out) (lp (cons line out)))))))
    (close-pipe pipe)
    lines))

(test-group "chat: a room across workers"
  (call-with-plucky
   "apps/chat.scm" (append '("--port" "0" "--workers" "2") allow-root)
   (lambda (plucky)
     (test-assert "plucky serves the chat" (plucky-port plucky))
     (let ((lines (script-lines (number->string (plucky-port plucky)))))
       (test-equal "the client ran" 5 (length lines))
       (for-each (lambda (line) (test-assert line (string-prefix? "ok " line)))
                 lines)))
   #:timeout 60))

(test-end "apps/chat")
