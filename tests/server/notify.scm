;;; tests/server/notify.scm --- telling systemd the server's state

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `bin/plucky serve' with NOTIFY_SOCKET set, as systemd runs a
;;; Type=notify service: this test binds the datagram socket systemd
;;; would, and reads what plucky says there, with two workers and with
;;; one: READY=1 once it serves (the app answers by then), RELOADING=1
;;; with MONOTONIC_USEC= on SIGHUP and READY=1 once the reload is over,
;;; also when the new code is broken (the status says so), STOPPING=1 on
;;; SIGTERM; the app and its workers do not see NOTIFY_SOCKET.  Then an
;;; abstract socket ("@name"), a NOTIFY_SOCKET that names nothing (plucky
;;; serves on), and `open-service-notifier' alone.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 match)
             (ice-9 regex)
             (rnrs bytevectors)
             (system foreign)
             (web response)
             (tests lib harness)
             (tests lib server)
             (tests lib command)
             (plucky server notify)
             (plucky sys notify))

(test-begin "server/notify")

(define dir (temporary-directory))
(define app (string-append dir "/app.scm"))

(define (app-text version)
  ;; answers VERSION and what it saw of NOTIFY_SOCKET as it loaded and
  ;; sees now
  (format #f "(define at-load (or (getenv \"NOTIFY_SOCKET\") \"unset\"))
(define (handler request body)
  (values '((content-type . (text/plain)))
          (string-append ~s \" \" at-load \" \" (or (getenv \"NOTIFY_SOCKET\") \"unset\"))))
handler
" version))

(define broken-app-text
  "(define (handler request body)\n  (values '() \"unbalanced\"\nhandler\n")

(define (body-of port path)
  (let ((response body (http-get port path)))
    (and response (= 200 (response-code response)) (utf8->string body))))

(define (receive sock timeout)
  ;; -> the next datagram on SOCK as an alist of its assignments
  ;; (("READY" . "1") …), or #f after TIMEOUT seconds
  (match (select (list sock) '() '() timeout 0)
    (((_) _ _)
     (let* ((buf (make-bytevector 4096))
            (n (recv! sock buf))
            (bv (make-bytevector n)))
       (bytevector-copy! buf 0 bv 0 n)
       (map (lambda (line)
              (let ((i (string-index line #\=)))
                (if i
                    (cons (substring line 0 i) (substring line (+ i 1)))
                    (cons line #f))))
            (string-split (utf8->string bv) #\newline))))
    (_ #f)))

(define (state-of message)
  ;; -> 'ready, 'reloading or 'stopping, or #f
  (and message
       (cond ((assoc "READY" message) 'ready)
             ((assoc "RELOADING" message) 'reloading)
             ((assoc "STOPPING" message) 'stopping)
             (else #f))))

(define (status-of message)
  (and message (assoc-ref message "STATUS")))

(define (bound-socket)
  ;; -> (values socket path): a datagram socket bound at a new file
  (let ((path (string-append dir "/notify-" (number->string (random 1000000000)))))
    (let ((sock (socket AF_UNIX SOCK_DGRAM 0)))
      (bind sock AF_UNIX path)
      (values sock path))))

(define (environment-with notify-socket)
  (cons (string-append "NOTIFY_SOCKET=" notify-socket)
        (remove (lambda (entry) (string-prefix? "NOTIFY_SOCKET=" entry)) (environ))))

(define (check-life-cycle workers)
  (write-file app (app-text "version 1"))
  (let ((sock path (bound-socket)))
    (call-with-plucky app (append (list "--port" "0" "--workers" workers) allow-root)
      (lambda (plucky)
        (let ((ready (receive sock 20)))
          (test-eq "READY=1 first" 'ready (state-of ready))
          (test-assert "with a status naming where it listens"
            (and (status-of ready)
                 (string-contains (status-of ready)
                                  (format #f "127.0.0.1:~a" (plucky-port plucky)))))
          (test-equal "and it serves; the app did not see NOTIFY_SOCKET as it loaded, nor now"
            "version 1 unset unset" (body-of (plucky-port plucky) "/")))
        ;; a reload
        (write-file app (app-text "version 2"))
        (signal-plucky plucky SIGHUP)
        (let ((reloading (receive sock 20)))
          (test-eq "SIGHUP: RELOADING=1" 'reloading (state-of reloading))
          (test-assert "with MONOTONIC_USEC, a count of microseconds near now"
            (let ((usec (and reloading
                             (assoc-ref reloading "MONOTONIC_USEC")
                             (string->number (assoc-ref reloading "MONOTONIC_USEC")))))
              (and usec (exact-integer? usec)
                   (< (abs (- (monotonic-microseconds) usec)) 20000000)))))
        (let ((ready (receive sock 20)))
          (test-eq "then READY=1" 'ready (state-of ready))
          ;; The old workers stop accepting once they have the master's
          ;; word (SIGUSR2), a moment after it has said READY=1.
          (test-assert "the new code answers"
            (wait-until (lambda () (equal? "version 2 unset unset" (body-of (plucky-port plucky) "/")))
                        #:timeout 5)))
        ;; a reload that fails
        (write-file app broken-app-text)
        (signal-plucky plucky SIGHUP)
        (test-eq "broken code: RELOADING=1" 'reloading (state-of (receive sock 20)))
        (let ((ready (receive sock 20)))
          (test-eq "then READY=1 all the same" 'ready (state-of ready))
          (test-assert "its status says the reload failed"
            (and (status-of ready) (string-contains (status-of ready) "reload failed")))
          (test-equal "and the old code serves" "version 2 unset unset"
            (body-of (plucky-port plucky) "/")))
        ;; stopping
        (let ((status killed? (stop-plucky plucky)))
          (test-eq "SIGTERM: STOPPING=1" 'stopping (state-of (receive sock 5)))
          (test-equal "and it exits, status 0" '(0 #f)
            (list (status:exit-val status) killed?)))
        (test-eq "nothing more" #f (receive sock 0)))
      #:environment (environment-with path))
    (close-port sock)
    (delete-file path)))

(test-group "two workers: READY, RELOADING, READY, STOPPING"
  (call-guarded (lambda () (check-life-cycle "2"))))

(test-group "one process: the same"
  (call-guarded (lambda () (check-life-cycle "1"))))

(define root? (zero? (geteuid)))

(unless root?
  (test-skip 1))
(test-group "SIGHUP before the first workers serve: READY=1 first"
  ;; As nobody, each worker loads the app itself, and this one takes a
  ;; second to load: the SIGHUP sent as soon as plucky listens comes
  ;; while they load.  The reload waits until they serve.
  (call-guarded
   (lambda ()
     (write-file app (string-append "(sleep 1)\n" (app-text "version 1")))
     (let ((sock path (bound-socket)))
       (call-with-plucky app '("--port" "0" "--workers" "2" "--user" "nobody")
         (lambda (plucky)
           (signal-plucky plucky SIGHUP)
           (let* ((first (receive sock 20))
                  (second (receive sock 20))
                  (third (receive sock 20)))
             (test-equal "READY=1, then RELOADING=1, then READY=1"
               '(ready reloading ready) (map state-of (list first second third))))
           (test-assert "the reload happened"
             (string-contains (plucky-log plucky) "reload: new workers")))
         #:environment (environment-with path))
       (close-port sock)
       (delete-file path)))))

(test-group "SIGTERM during a reload, a second SIGHUP pending: STOPPING=1 last"
  ;; The reload's workers take a second to load the app; a second SIGHUP
  ;; waits for that reload, and SIGTERM comes meanwhile: no reload may
  ;; start after it, no READY=1 follow STOPPING=1, and no worker be left
  ;; serving until the grace period kills it.
  (call-guarded
   (lambda ()
     (write-file app (app-text "version 1"))
     (let ((sock path (bound-socket)))
       (call-with-plucky app (append '("--port" "0" "--workers" "2" "--grace" "5") allow-root)
         (lambda (plucky)
           (test-eq "READY=1" 'ready (state-of (receive sock 20)))
           (write-file app (string-append "(sleep 1)\n" (app-text "version 2")))
           (signal-plucky plucky SIGHUP)
           (test-eq "RELOADING=1" 'reloading (state-of (receive sock 20)))
           (signal-plucky plucky SIGHUP)
           (signal-plucky plucky SIGTERM)
           (test-eq "STOPPING=1" 'stopping (state-of (receive sock 20)))
           (let ((status (wait-until (lambda () (plucky-exit-status plucky)) #:timeout 15)))
             (test-equal "it exits, status 0" 0 (and status (status:exit-val status))))
           (test-eq "nothing after STOPPING=1" #f (receive sock 0))
           (test-assert "no second reload started"
             (= 1 (length (list-matches "reload: starting" (plucky-log plucky)))))
           (test-assert "no worker had to be killed"
             (not (string-contains (plucky-log plucky) "outlived its grace period"))))
         #:environment (environment-with path))
       (close-port sock)
       (delete-file path)))))

(test-group "an abstract socket (@name)"
  (call-guarded
   (lambda ()
     (write-file app (app-text "version 1"))
     (let* ((name (string-append "@plucky-test-" (number->string (getpid))))
            (address (unix-datagram-address name))
            (sock (socket AF_UNIX SOCK_DGRAM 0))
            (%bind (pointer->procedure int (dynamic-func "bind" (dynamic-link))
                                       (list int '* unsigned-int))))
       (test-eqv "bound" 0 (%bind (port->fdes sock) (bytevector->pointer address)
                                  (bytevector-length address)))
       (call-with-plucky app (append '("--port" "0" "--workers" "2") allow-root)
         (lambda (plucky)
           (test-eq "READY=1 there" 'ready (state-of (receive sock 20))))
         #:environment (environment-with name))
       (test-eq "STOPPING=1 there" 'stopping (state-of (receive sock 5)))
       (close-port sock)))))

(test-group "a NOTIFY_SOCKET that names nothing"
  (call-guarded
   (lambda ()
     (write-file app (app-text "version 1"))
     (call-with-plucky app (append '("--port" "0" "--workers" "2") allow-root)
       (lambda (plucky)
         (test-equal "it serves all the same" "version 1 unset unset"
           (body-of (plucky-port plucky) "/"))
         (test-assert "saying once that it could not tell the service manager"
           (wait-until
            (lambda ()
              (= 1 (length (list-matches "could not tell the service manager"
                                         (plucky-log plucky)))))))
         (signal-plucky plucky SIGHUP)
         (test-equal "a reload too" "version 1 unset unset"
           (begin
             (wait-until (lambda () (string-contains (plucky-log plucky) "reload: new workers")))
             (body-of (plucky-port plucky) "/")))
         (test-equal "not saying it again" 1
           (length (list-matches "could not tell the service manager" (plucky-log plucky)))))
       #:environment (environment-with (string-append dir "/nobody-here"))))))

(test-group "open-service-notifier"
  (unsetenv "NOTIFY_SOCKET")
  (test-eq "no NOTIFY_SOCKET: no notifier" #f (open-service-notifier))
  (setenv "NOTIFY_SOCKET" "")
  (test-eq "an empty one: none either" #f (open-service-notifier))
  (test-eq "and it is gone from the environment" #f (getenv "NOTIFY_SOCKET"))
  (let ((sock path (bound-socket)))
    (setenv "NOTIFY_SOCKET" path)
    (let ((notify (open-service-notifier)))
      (test-assert "a notifier" (procedure? notify))
      (test-eq "NOTIFY_SOCKET is gone from the environment" #f (getenv "NOTIFY_SOCKET"))
      (notify 'status "warming up")
      (test-equal "STATUS= alone" '(("STATUS" . "warming up")) (receive sock 5))
      (notify 'ready "serving here")
      (test-equal "READY=1 with the status given"
        '(("READY" . "1") ("STATUS" . "serving here")) (receive sock 5))
      (notify 'stopping)
      (test-equal "STOPPING=1 with a status of its own"
        '(("STOPPING" . "1") ("STATUS" . "draining")) (receive sock 5))
      (test-assert "an unknown state is an error"
        (not (false-if-exception (begin (notify 'sleeping) #t))))
      (notify 'close)
      (notify 'ready "after close")
      (test-eq "once closed, it says nothing" #f (receive sock 0)))
    (close-port sock)
    (delete-file path)))

(remove-tree dir)

(test-end "server/notify")

;;; tests/server/notify.scm ends here
