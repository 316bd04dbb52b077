;;; tests/server/log.scm --- the access log and the error log

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `plucky serve --access-log FILE' in each format, lines checked with
;;; regular expressions; lines reaching the file within a couple of
;;; seconds while the server runs (the buffer is flushed once a second);
;;; none lost when the server stops right after the requests or reloads;
;;; logrotate's way of reopening (rename, SIGUSR1, new lines in a new
;;; file); the error log reopened the same way.  Plus the date format
;;; itself, from (plucky server log).
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 format)
             (ice-9 regex)
             (rnrs bytevectors)
             (web response)
             (tests lib harness)
             (tests lib server)
             (tests lib command)
             (plucky server log))

(test-begin "server/log")

(define dir (temporary-directory))
(define app (write-text-app dir "logged"))

(define* (get port path #:key (headers '()))
  ;; -> the status code, or #f
  (with-client port
    (lambda (client)
      (client-send! client (request-text path #:headers headers))
      (let ((response body (client-read-response client)))
        (and response (response-code response))))))

(define (lines-of file)
  (filter (lambda (line) (not (string-null? line)))
          (string-split (read-file file) #\newline)))

(define (wait-for-lines file n)
  ;; -> FILE's lines once it has N (or more), or #f
  (wait-until (lambda ()
                (let ((lines (lines-of file)))
                  (and (>= (length lines) n) lines)))
              #:timeout 5))

(define (workers-of plucky n)
  (wait-until (lambda ()
                (let ((w (plucky-workers plucky)))
                  (and (= n (length w)) w)))))

(define clf-date-rx
  "\\[[0-3][0-9]/(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)/[0-9]{4}:[0-2][0-9]:[0-5][0-9]:[0-6][0-9] [+-][0-9]{4}\\]")

(define (common-rx path code)
  (make-regexp (string-append "^127\\.0\\.0\\.1 - - " clf-date-rx " \"GET "
                              (regexp-quote path) " HTTP/1\\.1\" " (number->string code)
                              " [1-9][0-9]*$")))

;;;
;;; The date
;;;

(test-group "clf-date"
  (let ((tz (getenv "TZ")))
    (setenv "TZ" "UTC0")
    (tzset)
    (test-equal "the epoch, in UTC" "01/Jan/1970:00:00:00 +0000" (clf-date 0))
    (test-equal "a November afternoon" "21/Nov/2026:13:55:36 +0000" (clf-date 1795269336))
    (setenv "TZ" "EST5EDT,M3.2.0,M11.1.0")
    (tzset)
    (test-equal "west of Greenwich, in summer" "04/Jul/2026:08:00:00 -0400"
      (clf-date 1783166400))
    (if tz (setenv "TZ" tz) (unsetenv "TZ"))
    (tzset)))

;;;
;;; Formats
;;;

(test-group "--log-format common"
  (call-guarded
   (lambda ()
     (let ((file (string-append dir "/common.log")))
       (call-with-plucky app (append (list "--port" "0" "--workers" "2" "--access-log" file
                                           "--log-format" "common")
                                     allow-root)
         (lambda (plucky)
           (let ((port (plucky-port plucky)))
             (test-equal "three answers" '(200 200 200)
               (map (lambda (path) (get port path)) '("/a" "/b?x=1&y=2" "/c%20d")))
             (let ((start (now-seconds))
                   (lines (wait-for-lines file 3)))
               (test-assert "the lines reach the file while the server runs" lines)
               (test-assert "within about a second" (< (- (now-seconds) start) 2.5))
               (when lines
                 (test-assert "/a" (find (lambda (l) (regexp-exec (common-rx "/a" 200) l)) lines))
                 (test-assert "/b?x=1&y=2, with its query"
                   (find (lambda (l) (regexp-exec (common-rx "/b?x=1&y=2" 200) l)) lines))
                 (test-assert "/c%20d, as sent"
                   (find (lambda (l) (regexp-exec (common-rx "/c%20d" 200) l)) lines))))
             ;; A request refused before any handler saw it.
             (with-client port
               (lambda (client)
                 (client-send! client "NONSENSE\r\n\r\n")
                 (client-read-response client)))
             (test-assert "a refused request: \"-\" and its 400"
               (wait-until
                (lambda ()
                  (find (lambda (l)
                          (string-match (string-append "^127\\.0\\.0\\.1 - - " clf-date-rx
                                                       " \"-\" 400 [1-9][0-9]*$")
                                        l))
                        (lines-of file)))
                #:timeout 5)))))))))

(test-group "--log-format combined"
  (call-guarded
   (lambda ()
     (let ((file (string-append dir "/combined.log")))
       (call-with-plucky app (append (list "--port" "0" "--workers" "1" "--access-log" file
                                           "--log-format" "combined")
                                     allow-root)
         (lambda (plucky)
           (let ((port (plucky-port plucky)))
             (get port "/with" #:headers '("Referer: http://example.org/from"
                                            "User-Agent: tester/1.0 \"quoted\""))
             (get port "/without")
             (let ((lines (wait-for-lines file 2)))
               (test-assert "referer and user agent, a quote escaped"
                 (and lines
                      (find (lambda (l)
                              (string-match
                               (string-append "^127\\.0\\.0\\.1 - - " clf-date-rx
                                              " \"GET /with HTTP/1\\.1\" 200 [0-9]+"
                                              " \"http://example\\.org/from\""
                                              " \"tester/1\\.0 \\\\x22quoted\\\\x22\"$")
                               l))
                            lines)))
               (test-assert "dashes when there are none"
                 (and lines
                      (find (lambda (l)
                              (string-match "\"GET /without HTTP/1\\.1\" 200 [0-9]+ \"-\" \"-\"$" l))
                            lines)))))))))))

(test-group "--log-format json"
  (call-guarded
   (lambda ()
     (let ((file (string-append dir "/json.log")))
       (call-with-plucky app (append (list "--port" "0" "--workers" "1" "--access-log" file
                                           "--log-format" "json")
                                     allow-root)
         (lambda (plucky)
           (get (plucky-port plucky) "/j?q=1" #:headers '("User-Agent: a \"b\" \\c"))
           (let ((lines (wait-for-lines file 1)))
             (test-assert "one object per line, every field"
               (and lines
                    (string-match
                     (string-append
                      "^\\{\"time\":\"[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9][+-][0-9]{2}:[0-9]{2}\""
                      ",\"remote_addr\":\"127\\.0\\.0\\.1\",\"method\":\"GET\",\"target\":\"/j\\?q=1\""
                      ",\"protocol\":\"HTTP/1\\.1\",\"status\":200,\"bytes\":[1-9][0-9]*"
                      ",\"referer\":null,\"user_agent\":\"a \\\\\"b\\\\\" \\\\\\\\c\"\\}$")
                     (car lines)))))))))))

(test-group "the protocol of each request: HTTP/1.0, HTTP/1.1, HTTP/2"
  (call-guarded
   (lambda ()
     (let ((file (string-append dir "/protocols.log")))
       (call-with-plucky app (append (list "--port" "0" "--workers" "1" "--access-log" file
                                           "--log-format" "common")
                                     allow-root)
         (lambda (plucky)
           (let ((url (format #f "http://127.0.0.1:~a/p" (plucky-port plucky))))
             (for-each (lambda (flag)
                         (system* "curl" "-s" "-o" "/dev/null" "--max-time" "10" flag url))
                       '("--http1.0" "--http1.1" "--http2-prior-knowledge"))
             (let ((lines (wait-for-lines file 3)))
               (test-equal "as the client spoke"
                 '("HTTP/1.0" "HTTP/1.1" "HTTP/2")
                 (and lines
                      (map (lambda (line)
                             (let ((m (string-match "\"GET /p (HTTP/[0-9.]+)\"" line)))
                               (and m (match:substring m 1))))
                           lines)))))))))))

;;;
;;; No line lost
;;;

(test-group "no line lost when the server stops at once"
  (call-guarded
   (lambda ()
     (let ((file (string-append dir "/stop.log")))
       (let ((plucky (start-plucky app (append (list "--port" "0" "--workers" "2"
                                                     "--access-log" file)
                                               allow-root))))
         (test-equal "50 answers" 50
           (count (lambda (i) (eqv? 200 (get (plucky-port plucky) (format #f "/~a" i))))
                  (iota 50)))
         (let ((status killed? (stop-plucky plucky)))
           (test-equal "stopped, exit 0" '(0 #f) (list (status:exit-val status) killed?)))
         (test-equal "50 lines" 50 (length (lines-of file)))
         (delete-file (plucky-log-file plucky)))))))

(test-group "no line lost across a reload"
  (call-guarded
   (lambda ()
     (let ((file (string-append dir "/reload.log")))
       (call-with-plucky app (append (list "--port" "0" "--workers" "2" "--access-log" file)
                                     allow-root)
         (lambda (plucky)
           (let ((port (plucky-port plucky))
                 (before (workers-of plucky 2)))
             (test-equal "30 answers" 30
               (count (lambda (i) (eqv? 200 (get port (format #f "/~a" i)))) (iota 30)))
             (signal-plucky plucky SIGHUP)
             (test-assert "the old workers exit"
               (and before
                    (wait-until (lambda ()
                                  (null? (lset-intersection = before (plucky-workers plucky))))
                                #:timeout 10)))
             (test-equal "30 lines" 30 (length (lines-of file))))))))))

;;;
;;; Reopening
;;;

(test-group "SIGUSR1 reopens the logs (logrotate)"
  (call-guarded
   (lambda ()
     (let ((file (string-append dir "/rotate.log"))
           (errors (string-append dir "/errors.log")))
       (call-with-plucky app (append (list "--port" "0" "--workers" "2" "--access-log" file
                                           "--error-log" errors)
                                     allow-root)
         (lambda (plucky)
           (let ((port (plucky-port plucky)))
             (test-assert "messages go to the error log"
               (wait-until (lambda () (string-contains (read-file errors) "listening on"))))
             (get port "/before")
             (test-assert "the first line" (wait-for-lines file 1))
             (rename-file file (string-append file ".1"))
             (rename-file errors (string-append errors ".1"))
             (signal-plucky plucky SIGUSR1)
             (test-assert "a new access log appears"
               (wait-until (lambda () (file-exists? file))))
             (test-assert "a new error log too"
               (wait-until (lambda () (file-exists? errors))))
             ;; The workers reopen when their loops read the signal; a
             ;; request served before that still goes to the old file, as
             ;; with any server (hence logrotate's delaycompress).
             (test-assert "every worker has reopened both"
               (wait-until (lambda ()
                             (every (lambda (pid)
                                      (and (has-open? pid file) (has-open? pid errors)))
                                    (plucky-workers plucky)))))
             (for-each (lambda (i) (get port (format #f "/after/~a" i))) (iota 20))
             (let ((lines (wait-for-lines file 20)))
               (test-equal "the new lines go to the new file" 20
                 (and lines (count (lambda (l) (string-contains l "/after/")) lines)))
               (test-assert "and only the new lines"
                 (and lines (not (any (lambda (l) (string-contains l "/before")) lines)))))
             (test-equal "the renamed file keeps the old line and nothing more" 1
               (length (lines-of (string-append file ".1"))))
             (signal-plucky plucky SIGHUP)
             (test-assert "new messages go to the new error log"
               (wait-until (lambda () (string-contains (read-file errors) "reload:"))
                           #:timeout 10))
             (test-assert "not to the old"
               (not (string-contains (read-file (string-append errors ".1")) "reload:")))))
         #:error-log errors)))))

(remove-tree dir)

(test-end "server/log")
