;;; (plucky server notify) --- telling systemd the server's state (Type=notify)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Under systemd with Type=notify (or Type=notify-reload, systemd 253
;;; and later), the service manager counts a service as started when it
;;; says READY=1, not when its process has been forked: units ordered
;;; After= it, and `systemctl start', wait until it serves.  plucky says,
;;; as sd_notify(3) would, on the socket NOTIFY_SOCKET names:
;;;
;;;   READY=1      once it serves: the first workers have all loaded the
;;;                app (one process: its loop is about to run), and again
;;;                once a reload is over, whether or not it succeeded;
;;;   RELOADING=1  on SIGHUP, with MONOTONIC_USEC= as systemd requires;
;;;   STOPPING=1   on SIGTERM or SIGINT, as it starts to drain;
;;;   STATUS=      a line for `systemctl status' with each of them.
;;;
;;; Only the process systemd started speaks (NotifyAccess=main, the
;;; default): NOTIFY_SOCKET is taken out of the environment here, before
;;; the app loads (plucky command), so that neither the workers nor the
;;; app nor what it runs see it.  A message that cannot be sent (nobody
;;; listens; the queue stayed full for a second) is dropped and the first
;;; failure logged: serving never waits on the service manager for
;;; longer.  This module is loaded only when NOTIFY_SOCKET is set.
;;;
;;; Code:

(define-module (plucky server notify)
  #:use-module (rnrs bytevectors)
  #:use-module (plucky sys notify)
  #:use-module ((plucky server loop) #:select (log-line))
  #:export (open-service-notifier))

(define* (open-service-notifier #:optional (variable "NOTIFY_SOCKET"))
  "Return a procedure that tells the service manager named by the
environment VARIABLE (NOTIFY_SOCKET by default) what the server does, or
#f if the environment has no such variable or its value is no Unix socket
address (logged).  VARIABLE is removed from the environment either way.
The procedure takes a state and, for some, a status line:

  (notify 'ready STATUS)   READY=1 and STATUS=STATUS
  (notify 'reload-failed STATUS)
                           READY=1 and a STATUS= that says the last
                           reload failed and the old code serves
  (notify 'reloading)      RELOADING=1, MONOTONIC_USEC= and a STATUS=
  (notify 'stopping)       STOPPING=1 and a STATUS=
  (notify 'status STATUS)  STATUS=STATUS alone
  (notify 'close)          close its socket (a worker, which has no use
                           for the master's, or the server at exit)

Each is one datagram.  Should the service manager's queue be full, a
send waits for room up to a second; one that cannot be sent then is
dropped, and the first such failure logged."
  (let ((name (getenv variable)))
    (and name
         (begin
           (unsetenv variable)
           (let ((address (false-if-exception (unix-datagram-address name))))
             (if (not address)
                 (begin
                   (log-line "~a=~s is not a Unix socket address; not notifying" variable name)
                   #f)
                 (make-notifier name address)))))))

(define (make-notifier name address)
  (let ((sock (socket AF_UNIX (logior SOCK_DGRAM SOCK_CLOEXEC) 0))
        (failed? #f))
    (define (send! . assignments)
      (when sock
        (let ((sent (fd-send-datagram (port->fdes sock)
                                      (string->utf8 (string-join assignments "\n"))
                                      address)))
          (when (and (< sent 0) (not failed?))
            (set! failed? #t)
            (log-line "could not tell the service manager (~a): ~a; later failures \
are not logged" name (strerror (- sent)))))))
    ;; systemd reads its queue at once; should it be full (a boot where
    ;; every service speaks), wait a little rather than lose a READY=1
    ;; that systemd would time the start out for, but never long.
    (fd-set-send-timeout! (port->fdes sock) 1)
    (lambda (state . status)
      (define (status-line default)
        (string-append "STATUS=" (if (pair? status) (car status) default)))
      (case state
        ((ready) (send! "READY=1" (status-line "serving")))
        ((reload-failed)
         (send! "READY=1" (string-append (status-line "serving")
                                         "; the last reload failed, the old code serves")))
        ((reloading)
         (send! "RELOADING=1"
                (string-append "MONOTONIC_USEC="
                               (number->string (monotonic-microseconds)))
                (status-line "reloading")))
        ((stopping) (send! "STOPPING=1" (status-line "draining")))
        ((status) (send! (status-line "")))
        ((close)
         (when sock
           (close-port sock)
           (set! sock #f)))
        (else (error "unknown service state" state))))))

;;; (plucky server notify) ends here
