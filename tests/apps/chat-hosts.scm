;;; tests/apps/chat-hosts.scm --- apps/chat.scm on two hosts sharing one PostgreSQL

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Two `bin/plucky serve apps/chat.scm' processes, each its own master
;;; and workers as two hosts would run them, with DATABASE_URL naming
;;; one PostgreSQL of the test's own: a message POSTed to one arrives
;;; on the other's /events stream, and a process started afterwards
;;; shows it in its history.  Without the database they would not meet:
;;; each master's workers make a room of their own.  Skipped without a
;;; PostgreSQL server, except under CI.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (rnrs bytevectors)
             (ice-9 iconv)
             (web response)
             (tests lib harness)
             (tests lib command)
             (tests lib server)
             (tests lib postgresql))

(define pg-directory
  (mkdtemp (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-chat-pg-XXXXXX")))
(define url (start-postgresql pg-directory))

(define (serve-chat proc)
  ;; PROC called with a running chat server on URL's database
  (call-with-plucky
   "apps/chat.scm" (append '("--port" "0" "--workers" "2") allow-root)
   proc
   #:environment (cons (string-append "DATABASE_URL=" url) (environ))
   #:timeout 60))

(define (text-of client)
  (bytevector->string (client-pending client) "UTF-8"))

(define (read-until client text seconds)
  ;; -> #t once what CLIENT received holds TEXT, #f after SECONDS
  (let ((deadline (+ (current-time) seconds)))
    (let lp ()
      (cond
       ((string-contains (text-of client) text) #t)
       ((>= (current-time) deadline) #f)
       ((eq? (receive-some! client deadline) 'eof) (string-contains (text-of client) text))
       (else (lp))))))

(define (events-client port)
  (let ((client (connect-client port)))
    (client-send! client (string->utf8 "GET /events HTTP/1.1\r\nHost: chat.test\r\n\r\n"))
    client))

(define (say! port text)
  ;; -> the status of POST /say text=TEXT
  (let ((client (connect-client port))
        (body (string-append "text=" text)))
    (client-send! client (string->utf8
                          (string-append "POST /say HTTP/1.1\r\nHost: chat.test\r\n"
                                         "Content-Type: application/x-www-form-urlencoded\r\n"
                                         "Content-Length: " (number->string (string-length body))
                                         "\r\nConnection: close\r\n\r\n" body)))
    (let ((response (client-read-response client)))
      (client-close! client)
      (response-code response))))

(test-begin "apps/chat-hosts")
(check-postgresql-or-skip url)

(when url
  (test-group "a message said on one host arrives on the other's"
    (serve-chat
     (lambda (a)
       (serve-chat
        (lambda (b)
          (test-assert "both serve" (and (plucky-port a) (plucky-port b)))
          (let ((listener (events-client (plucky-port b))))
            (test-assert "B's stream is open" (read-until listener ": waiting" 20))
            (test-equal "said on A" 303 (say! (plucky-port a) "hello-from-a"))
            (test-assert "heard on B's stream"
              (read-until listener "data: hello-from-a" 10))
            (test-equal "said on B" 303 (say! (plucky-port b) "hello-from-b"))
            (test-assert "B's stream has its own host's too"
              (read-until listener "data: hello-from-b" 10))
            (client-close! listener))
          (serve-chat
           (lambda (c)
             (let ((late (events-client (plucky-port c))))
               (test-assert "a host started afterwards: both in its history"
                 (and (read-until late "data: hello-from-a" 20)
                      (read-until late "data: hello-from-b" 10)))
               (client-close! late)))))))))
  (stop-postgresql pg-directory))

(test-end "apps/chat-hosts")
(system* "rm" "-rf" pg-directory)
