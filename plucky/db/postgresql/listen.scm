;;; (plucky db postgresql listen) --- LISTEN/NOTIFY as events of the worker's loop

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A listener is a connection of its own that ran LISTEN, its socket
;;; watched by the worker's loop: when PostgreSQL delivers a
;;; notification, the loop hands it to the listener's procedure, or puts
;;; it into its channel (`make-channel' of (plucky server)), where a
;;; request waiting in `channel-get' takes it.  No request waits on the
;;; connection itself, and none is held while nothing is said.
;;;
;;;   pg-listen     connect (a handler suspends meanwhile), LISTEN each
;;;                 channel, `loop-watch!' the socket
;;;   readable      PQconsumeInput, then every notification libpq holds,
;;;                 oldest first, to the procedure or channel
;;;   lost          unwatch, close, and connect again after 100 ms,
;;;                 doubling up to 5 s; ON-CONNECT is called after each
;;;                 connect, so that an app can read again what it may
;;;                 have missed (PostgreSQL keeps no notification for a
;;;                 session that was not there)
;;;   pg-unlisten   unwatch and close; the timer of a pending reconnect
;;;                 is cancelled
;;;
;;; The loop's callbacks cannot suspend, so a reconnect made from one
;;; blocks the worker for at most CONNECT-TIMEOUT-MS: keep it short, and
;;; the database near (a Unix socket, 127.0.0.1).
;;;
;;; Code:

(define-module (plucky db postgresql listen)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 exceptions)
  #:use-module (plucky db postgresql connection)
  #:use-module ((plucky server) #:select (loop-watch! loop-unwatch! loop-call-after!
                                          loop-cancel-timer! channel? channel-put!
                                          log-line))
  #:export (pg-listen
            pg-unlisten
            pg-listener?
            pg-listener-connected?))

(define-record-type <pg-listener>
  (make-listener url channels target on-connect connect-timeout-ms)
  pg-listener?
  (url listener-url)
  (channels listener-channels)                  ; strings, LISTENed on each connect
  (target listener-target)                      ; a procedure or a channel
  (on-connect listener-on-connect)              ; thunk, or #f
  (connect-timeout-ms listener-connect-timeout-ms)
  (conn listener-conn set-listener-conn!)       ; <pg-conn>, or #f between connections
  (retry-ms listener-retry-ms set-listener-retry-ms!)
  (timer listener-timer set-listener-timer!)    ; a pending reconnect, or #f
  (stopped? listener-stopped? set-listener-stopped!))

(define first-retry-ms 100)
(define last-retry-ms 5000)

(define (quote-identifier name)
  ;; NAME as a quoted SQL identifier: LISTEN takes no parameter, so the
  ;; channel's name is written into the statement, its quotes doubled
  (unless (and (string? name) (not (string-null? name))
               (not (string-index name #\nul))
               (< (string-length name) 64))
    (raise-exception
     (make-exception (make-error) (make-exception-with-origin 'pg-listen)
                     (make-exception-with-message
                      (format #f "a channel is a name of 1 to 63 characters, not ~s" name)))))
  (string-append "\"" (string-join (string-split name #\") "\"\"") "\""))

(define (connect! listener)
  ;; open a connection, LISTEN, watch it; raises a &pg-error if any fails
  (let ((conn (conn-open (listener-url listener)
                         #:connect-timeout-ms (listener-connect-timeout-ms listener))))
    (with-exception-handler
        (lambda (e) (conn-close! conn) (raise-exception e))
      (lambda ()
        (for-each (lambda (channel)
                    (conn-command conn (string-append "LISTEN " (quote-identifier channel))))
                  (listener-channels listener)))
      #:unwind? #t)
    (set-listener-conn! listener conn)
    (set-listener-retry-ms! listener first-retry-ms)
    (loop-watch! (pg-conn-fd conn) #:on-read deliver! #:object listener)
    (let ((on-connect (listener-on-connect listener)))
      (when on-connect (on-connect)))))

(define (deliver! listener)
  ;; the socket is readable: hand every notification over, or, the
  ;; connection lost, connect again later
  (let ((conn (listener-conn listener)))
    (when conn
      (let lp ()
        (let ((notification
               (with-exception-handler
                   (lambda (e)
                     (if (pg-error? e)
                         (begin (lost! listener (pg-error-message e)) #f)
                         (raise-exception e)))
                 (lambda () (conn-wait-notification conn #:timeout-ms 0))
                 #:unwind? #t)))
          (when notification
            (hand! listener notification)
            (lp)))))))

(define (hand! listener notification)
  (let ((target (listener-target listener)))
    (with-exception-handler
        (lambda (e)
          (log-line "pg-listen: the procedure given ~s raised ~s"
                    (listener-channels listener) e))
      (lambda ()
        (if (channel? target)
            (channel-put! target notification)
            (target notification)))
      #:unwind? #t)))

(define (lost! listener message)
  ;; the connection is gone (libpq closed it): stop watching it, try again
  (let ((conn (listener-conn listener)))
    (set-listener-conn! listener #f)
    (when conn
      (loop-unwatch! (pg-conn-fd conn))
      (conn-close! conn)))
  (unless (listener-stopped? listener)
    (log-line "pg-listen ~s: connection lost (~a); again in ~a ms"
              (listener-channels listener) message (listener-retry-ms listener))
    (retry-later! listener)))

(define (retry-later! listener)
  (let ((ms (listener-retry-ms listener)))
    (set-listener-retry-ms! listener (min last-retry-ms (* 2 ms)))
    (set-listener-timer!
     listener
     (loop-call-after! ms
                       (lambda ()
                         (set-listener-timer! listener #f)
                         (unless (listener-stopped? listener)
                           (with-exception-handler
                               (lambda (e)
                                 (if (pg-error? e)
                                     (retry-later! listener)
                                     (raise-exception e)))
                             (lambda () (connect! listener))
                             #:unwind? #t)))))))

(define* (pg-listen url channels target #:key (on-connect #f) (connect-timeout-ms 2000))
  "Listen on CHANNELS (a channel name, or a list of them) of the
database at URL, on a connection of its own; return a listener.  Each
notification (a record with `pg-notification-channel', `-payload' and
`-pid') goes to TARGET: a procedure, called on the worker's loop (it
must not wait: signal an event, put it into a channel), or a channel of
`make-channel', for requests waiting in `channel-get'.  A lost connection
is made again, after 100 ms doubling up to 5 s; ON-CONNECT, a thunk, is
called after each connect (notifications sent meanwhile are lost).
Call it on a worker's loop: from a handler (which suspends while it
connects), or from a loop callback.  Raises a &pg-error when the first
connect or LISTEN fails."
  (let ((listener (make-listener url (if (list? channels) channels (list channels))
                                 target on-connect connect-timeout-ms)))
    (for-each quote-identifier (listener-channels listener))
    (set-listener-timer! listener #f)
    (set-listener-stopped! listener #f)
    (set-listener-conn! listener #f)
    (set-listener-retry-ms! listener first-retry-ms)
    (connect! listener)
    listener))

(define (pg-unlisten listener)
  "Stop LISTENER: its connection closed, no reconnect pending.  Return
nothing."
  (set-listener-stopped! listener #t)
  (let ((timer (listener-timer listener)))
    (when timer
      (loop-cancel-timer! timer)
      (set-listener-timer! listener #f)))
  (let ((conn (listener-conn listener)))
    (set-listener-conn! listener #f)
    (when conn
      (loop-unwatch! (pg-conn-fd conn))
      (conn-close! conn)))
  (values))

(define (pg-listener-connected? listener)
  "Return true while LISTENER has its connection."
  (and (listener-conn listener) #t))

;;; (plucky db postgresql listen) ends here
