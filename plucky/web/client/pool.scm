;;; (plucky web client pool) --- idle keep-alive connections, per origin

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; One pool per process: origin ("https://host:port") -> the idle
;;; connections to it, the most recently used first.  An exchange with
;;; #:keep-alive? takes one (`pool-take!') and gives it back once its
;;; response was read whole and its framing allows another
;;; (`pool-release!'); anything else closes it.  The pool is bounded per
;;; origin; a connection idle longer than the idle time-out is closed
;;; when the pool is next used (every origin's, at most once a second),
;;; as is one whose socket has become readable while idle: the server
;;; closed it, or sent what nobody asked for.
;;;
;;; A mutex guards the table: a server's pool threads may use the client
;;; too.  A forked child does not share its parent's connections: the
;;; first use in a new process closes its copies and starts afresh.
;;;
;;; Code:

(define-module (plucky web client pool)
  #:use-module (ice-9 threads)
  #:use-module (plucky web client connection)
  #:use-module ((plucky server) #:select (worker-pid))
  #:export (pool-take!
            pool-release!
            pool-idle-count
            close-idle-connections!
            set-pool-limits!))

;; Settings: idle connections kept per origin, and how long one may
;; stay idle.  Shorter than the keep-alive time-out of most servers
;; (nginx: 75 s; plucky: see --keep-alive-timeout), so that the pool
;; rarely hands out a connection the server is closing.
(define max-idle-per-origin 32)
(define idle-timeout-ms 15000)

(define mutex (make-mutex))
(define idle (make-hash-table))          ; origin -> list of <connection>
(define owner (getpid))                  ; the process IDLE belongs to
(define last-sweep 0)                    ; now-ms

(define* (set-pool-limits! #:key (max-idle max-idle-per-origin)
                           (idle-timeout idle-timeout-ms))
  "Keep at most MAX-IDLE idle connections per origin, each at most
IDLE-TIMEOUT milliseconds.  Return nothing."
  (with-mutex mutex
    (set! max-idle-per-origin max-idle)
    (set! idle-timeout-ms idle-timeout))
  (values))

(define (check-owner!)
  ;; In a forked child: the connections are the parent's.  Closing our
  ;; copies of the descriptors leaves the parent's open.
  ;; worker-pid: without a system call in a worker (getpid(2) is not
  ;; cached by the C library; twice an exchange, bench/instructions-proxy)
  (unless (= owner (worker-pid))
    (hash-for-each (lambda (origin conns) (for-each connection-close! conns)) idle)
    (hash-clear! idle)
    (set! owner (worker-pid))))

(define (usable? conn now)
  (and (< (- now (connection-idle-since conn)) idle-timeout-ms)
       (not (connection-readable-now? conn))))

;; How long a connection may have been idle and still be taken without
;; the look at its socket (a poll(2)) by a caller that retries on a new
;; connection should the server have closed it: a proxy's keep-alive
;; connections are reused within milliseconds (bench/instructions-proxy).
(define recent-ms 1000)

(define (usable-unchecked? conn now)
  (let ((idle (- now (connection-idle-since conn))))
    (and (< idle idle-timeout-ms)
         (or (< idle recent-ms)
             (not (connection-readable-now? conn))))))

(define (sweep! now)
  ;; Close what idled too long or went stale, in every origin.
  (when (>= (- now last-sweep) 1000)
    (set! last-sweep now)
    (let ((origins (hash-map->list (lambda (origin conns) origin) idle)))
      (for-each
       (lambda (origin)
         (let* ((conns (hash-ref idle origin '()))
                (keep (filter (lambda (c) (usable? c now)) conns)))
           (for-each (lambda (c) (unless (memq c keep) (connection-close! c))) conns)
           (if (null? keep)
               (hash-remove! idle origin)
               (hash-set! idle origin keep))))
       origins))))

(define* (pool-take! origin #:optional (retries? #f))
  "Return an idle connection to ORIGIN that still looks open, marked as
reused, or #f when there is none.  RETRIES? says that the caller sends
its request again on a new connection if the server closed this one:
one idle for less than a second is then taken without looking."
  (with-mutex mutex
    (check-owner!)
    (let ((now (now-ms)))
      (sweep! now)
      (let lp ((conns (hash-ref idle origin '())))
        (cond
         ((null? conns) (hash-remove! idle origin) #f)
         ((if retries? (usable-unchecked? (car conns) now) (usable? (car conns) now))
          (if (null? (cdr conns))
              (hash-remove! idle origin)
              (hash-set! idle origin (cdr conns)))
          (set-connection-reused! (car conns) #t)
          (car conns))
         (else
          (connection-close! (car conns))
          (lp (cdr conns))))))))

(define (pool-release! conn)
  "Keep CONN, whose last response was read whole, for the next exchange
with its origin; close it instead when that origin has enough idle ones.
Return nothing."
  (with-mutex mutex
    (check-owner!)
    (let ((now (now-ms))
          (origin (connection-origin conn)))
      (sweep! now)
      (if (>= (length (hash-ref idle origin '())) max-idle-per-origin)
          (connection-close! conn)
          (begin
            (set-connection-idle-since! conn now)
            (hash-set! idle origin (cons conn (hash-ref idle origin '())))))))
  (values))

(define* (pool-idle-count #:optional origin)
  "Return the number of idle connections the pool holds to ORIGIN (e.g.
\"http://127.0.0.1:8080\"), or to every origin."
  (with-mutex mutex
    (check-owner!)
    (sweep! (now-ms))
    (if origin
        (length (hash-ref idle origin '()))
        (hash-fold (lambda (origin conns n) (+ n (length conns))) 0 idle))))

(define (close-idle-connections!)
  "Close every idle connection of the pool.  Return nothing."
  (with-mutex mutex
    (check-owner!)
    (hash-for-each (lambda (origin conns) (for-each connection-close! conns)) idle)
    (hash-clear! idle))
  (values))

;;; (plucky web client pool) ends here
