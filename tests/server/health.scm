;;; tests/server/health.scm --- --health-path and --drain-delay-s

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Runs `bin/plucky serve' as HAProxy sees it in front of a host
;;; (scripts/cluster): the health path answers 200 while the server
;;; serves and 503 from SIGTERM on; for --drain-delay-s after SIGTERM the
;;; server still accepts and answers new connections and the next request
;;; of a keep-alive one, each answer with Connection: close; a request in
;;; flight at SIGTERM gets its whole answer; then the server drains and
;;; exits 0.  Without --health-path the path is the app's.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             (web response)
             (tests lib harness)
             (tests lib server)
             (tests lib command))

(test-begin "server/health")

(define dir (temporary-directory))
(define app (string-append dir "/app.scm"))
(define slow-marker (string-append dir "/slow-started"))

;; The slow request suspends (sleep-ms) rather than blocks its worker: a
;; health check meanwhile, on the same worker, is answered.
(write-file app (format #f "(use-modules (web request) (web uri) (plucky server))
(define (handler request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path \"/slow\")
      (call-with-output-file ~s (lambda (port) (display \"started\" port)))
      (sleep-ms 2000)
      (values '((content-type . (text/plain))) \"slow answer, complete\"))
     (else
      (values '((content-type . (text/plain))) (string-append \"app \" path))))))
handler
" slow-marker))

(define (get port path)
  ;; -> (values code body-string connection-header), or #f #f #f
  (let ((response body (http-get port path #:timeout 5)))
    (if response
        (values (response-code response) (utf8->string body)
                (response-connection response))
        (values #f #f #f))))

(define (code-of port path)
  (let ((code body connection (get port path)))
    code))

(test-group "without --health-path the path is the app's"
  (with-plucky (plucky app "--workers" "1")
    (let ((code body connection (get (plucky-port plucky) "/_plucky/health")))
      (test-equal "the app answers" "app /_plucky/health" body))))

(define (drain-test workers)
  (with-plucky (plucky app "--workers" workers "--health-path" "/_plucky/health"
                       "--drain-delay-s" "2" "--grace-s" "5")
    (let ((port (plucky-port plucky)))
      (let ((code body connection (get port "/_plucky/health")))
        (test-equal "serving: 200" 200 code)
        (test-equal "serving: its body" "serving\n" body))
      (let ((code body connection (get port "/other")))
        (test-equal "other paths are the app's" "app /other" body))
      (with-client port
        (lambda (client)
          (client-send! client (request-text "/_plucky/health" #:method "HEAD"))
          (let ((response body (client-read-response client #:head? #t)))
            (test-equal "HEAD: 200" 200 (and response (response-code response)))
            (test-equal "HEAD: no body" 0 (and body (bytevector-length body))))))
      (false-if-exception (delete-file slow-marker))
      (let ((slow (connect-client port))
            (idle (connect-client port)))
        ;; IDLE: a keep-alive connection of the balancer, used before
        (client-send! idle (request-text "/before"))
        (let ((response body (client-read-response idle)))
          (test-equal "keep-alive: answered before" 200 (and response (response-code response))))
        (client-send! slow (request-text "/slow"))
        (test-assert "the slow request started"
          (wait-until (lambda () (file-exists? slow-marker))))
        (let ((start (now-seconds)))
          (signal-plucky plucky SIGTERM)
          (test-assert "the health path answers 503 at once"
            (wait-until (lambda () (eqv? 503 (code-of port "/_plucky/health"))) #:timeout 1))
          (let ((code body connection (get port "/_plucky/health")))
            (test-equal "draining: its body" "draining\n" body))
          (let ((code body connection (get port "/new")))
            (test-equal "a new connection in the delay is answered" 200 code)
            (test-equal "with Connection: close" '(close) connection))
          (client-send! idle (request-text "/after"))
          (let ((response body (client-read-response idle)))
            (test-equal "keep-alive: its next request is answered" 200
              (and response (response-code response)))
            (test-equal "with Connection: close" '(close)
              (and response (response-connection response))))
          (test-assert "still within the delay" (< (- (now-seconds) start) 2))
          (let ((response body (client-read-response slow #:timeout 10)))
            (test-equal "the request in flight: answered" 200
              (and response (response-code response)))
            (test-equal "the request in flight: complete" "slow answer, complete"
              (and body (utf8->string body))))
          (let ((status (wait-until (lambda () (plucky-exit-status plucky)) #:timeout 10)))
            (test-equal "then the server exits 0" 0 (and status (status:exit-val status)))
            (test-assert "after the delay" (>= (- (now-seconds) start) 2))))
        (client-close! slow)
        (client-close! idle)))))

(test-group "SIGTERM with --drain-delay-s, one process"
  (drain-test "1"))

(test-group "SIGTERM with --drain-delay-s, a master and two workers"
  (drain-test "2"))

(test-group "without --drain-delay-s SIGTERM drains at once"
  (with-plucky (plucky app "--workers" "2" "--health-path" "/_plucky/health")
    (let ((start (now-seconds)))
      (signal-plucky plucky SIGTERM)
      (let ((status (wait-until (lambda () (plucky-exit-status plucky)) #:timeout 10)))
        (test-equal "exits 0" 0 (and status (status:exit-val status)))
        (test-assert "within a second" (< (- (now-seconds) start) 1))))))

(remove-tree dir)
(test-end "server/health")
