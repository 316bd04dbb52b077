;;; tests/server/watch.scm --- a takeover's descriptor and timers on the loop

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A takeover that stays on the loop (plucky server watch): it echoes
;;; what it reads through `loop-watch!', says "tick" from a
;;; `loop-call-after!' timer, and is closed by ON-STOP.  A real server on
;;; an ephemeral port; the worker has no thread for it.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (rnrs bytevectors)
             ((rnrs io ports) #:select (get-bytevector-some))
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (tests lib server)
             (srfi srfi-1)
             (plucky sys epoll)
             (plucky server transport)
             (plucky server watch)
             (plucky server numbered)
             (plucky server loop))

(test-begin "server/watch")

(define (echo-on-loop! fd transport leftover)
  (let* ((buffer (make-bytevector 4096))
         (address ((@ (system foreign) pointer-address)
                   ((@ (system foreign) bytevector->pointer) buffer)))
         (write! (lambda (bv)
                   ((transport-write transport) fd
                    ((@ (system foreign) pointer-address)
                     ((@ (system foreign) bytevector->pointer) bv))
                    0 (bytevector-length bv))))
         (close! (lambda ()
                   (loop-unwatch! fd)
                   ((transport-close transport) fd))))
    (loop-watch! fd
                 #:on-read (lambda ()
                             (let ((n ((transport-read transport) fd address 0 4096)))
                               (cond
                                ((> n 0)
                                 (let ((got (make-bytevector n)))
                                   (bytevector-copy! buffer 0 got 0 n)
                                   (write! got)))
                                ((= n (- EAGAIN)) #f)
                                (else (close!)))))
                 #:on-stop close!)
    (loop-call-after! 50 (lambda () (write! (string->utf8 "tick"))))
    (write! leftover)))

(define (shout-on-loop! fd transport leftover)
  ;; the same with #:object: shared procedures, called with the descriptor
  (let ((buffer (make-bytevector 4096)))
    (define (write! fd bv)
      ((transport-write transport) fd
       ((@ (system foreign) pointer-address) ((@ (system foreign) bytevector->pointer) bv))
       0 (bytevector-length bv)))
    (loop-watch! fd
                 #:object fd
                 #:on-read (lambda (fd)
                             (let ((n ((transport-read transport) fd
                                       ((@ (system foreign) pointer-address)
                                        ((@ (system foreign) bytevector->pointer) buffer))
                                       0 4096)))
                               (cond
                                ((> n 0)
                                 (write! fd (string->utf8
                                             (string-upcase
                                              (utf8->string
                                               (let ((got (make-bytevector n)))
                                                 (bytevector-copy! buffer 0 got 0 n)
                                                 got))))))
                                ((= n (- EAGAIN)) #f)
                                (else (loop-unwatch! fd) ((transport-close transport) fd)))))
                 #:on-stop (lambda (fd) (loop-unwatch! fd) ((transport-close transport) fd)))
    (write! fd leftover)))

(define (site request body)
  (cond
   ((string=? (uri-path (request-uri request)) "/upgrade")
    (values (build-response #:code 101 #:headers '((connection . (upgrade))))
            (make-takeover echo-on-loop!)))
   ((string=? (uri-path (request-uri request)) "/fail")
    (values (build-response #:code 101 #:headers '((connection . (upgrade))))
            (make-takeover (lambda (fd transport leftover) (error "takeover bug")))))
   ((string=? (uri-path (request-uri request)) "/shout")
    (values (build-response #:code 101 #:headers '((connection . (upgrade))))
            (make-takeover shout-on-loop!)))
   (else
    (values '((content-type . (text/plain))) "Hello, World!"))))

(define (read-until-text port text deadline)
  ;; -> the text PORT gave until it contains TEXT, or #f at DEADLINE
  (let lp ((got ""))
    (cond
     ((string-contains got text) got)
     ((null? (car (select (list port) '() '()
                          (max 0 (inexact->exact (round (- deadline (now-seconds))))))))
      #f)
     (else
      (let ((more (get-bytevector-some port)))
        (and (not (eof-object? more))
             (lp (string-append got (utf8->string more)))))))))

(test-group "loop-watch!: a takeover served by the loop"
  (call-with-server
   site
   (lambda (server)
     (let ((client (connect-client (server-port server))))
       (client-send! client (string-append (request-text "/upgrade") "hello"))
       (test-assert "the leftover comes back after the 101"
         (read-until-text (client-socket client) "hello" (+ (now-seconds) 10)))
       (test-assert "loop-call-after!: the timer fired"
         (read-until-text (client-socket client) "tick" (+ (now-seconds) 10)))
       (client-send! client "more")
       (test-assert "what follows is echoed by on-read"
         (read-until-text (client-socket client) "more" (+ (now-seconds) 10)))
       (let ((response body (http-get (server-port server) "/")))
         (test-equal "HTTP is served beside it" 200 (response-code response)))
       ;; the loop's thread and the watchdog's (--handler-timeout), no
       ;; thread of the pool
       (test-equal "no thread for it" "2"
         (process-status-field (server-pid server) "Threads"))
       (client-close! client)))))

(test-group "loop-watch!: #:object"
  (call-with-server
   site
   (lambda (server)
     (let ((client (connect-client (server-port server))))
       (client-send! client (request-text "/shout"))
       (read-until-text (client-socket client) "\r\n\r\n" (+ (now-seconds) 10))
       (client-send! client "quiet words")
       (test-assert "on-read is called with the object"
         (read-until-text (client-socket client) "QUIET WORDS" (+ (now-seconds) 10)))
       (client-close! client)))))

(test-group "take-over!: a takeover that raises"
  (call-with-server
   site
   (lambda (server)
     (let ((client (connect-client (server-port server))))
       (client-send! client (request-text "/fail"))
       (test-assert "its socket is closed"
         (let lp ((got ""))
           (if (null? (car (select (list (client-socket client)) '() '() 10)))
               #f
               (let ((more (get-bytevector-some (client-socket client))))
                 (if (eof-object? more)
                     (string-prefix? "HTTP/1.1 101" got)
                     (lp (string-append got (utf8->string more))))))))
       (client-close! client))
     (let ((response body (http-get (server-port server) "/")))
       (test-equal "the worker serves on" 200 (response-code response)))
     (test-assert "and logged it"
       (string-contains (server-log server) "a takeover failed")))))

;;;
;;; The tables, without a loop: watchers of this process on pipes
;;;

(define (known-handlers w)
  ;; -> the <handlers> W has a number for
  (numbered-in-use ((@@ (plucky server watch) watchers-handlers) w)))

(test-group "loop-watch!: handlers kept by number"
  (let* ((epfd (epoll-create))
         (w (make-watchers epfd (lambda () 0)))
         (pipes (map (lambda (i) (pipe)) (iota 300)))
         (fds (map (lambda (p) (port->fdes (car p))) pipes))
         (seen '())
         (on-read (lambda (fd) (set! seen (cons fd seen))))
         (stopped '())
         (on-stop (lambda (fd) (set! stopped (cons fd stopped)))))
    (set-current-watchers! w)
    (for-each (lambda (fd) (loop-watch! fd #:object fd #:on-read on-read #:on-stop on-stop))
              fds)
    (test-equal "300 descriptors with the same procedures share one"
      1 (length (known-handlers w)))
    (watchers-ready! w (list-ref fds 299) EPOLLIN)
    (test-equal "the last is called with its object" (list (list-ref fds 299)) seen)
    ;; a closure each: numbers of their own, freed when unwatched
    (let ((a (car fds)) (b (cadr fds)) (said '()))
      (loop-watch! a #:on-read (lambda () (set! said (cons 'a said))))
      (loop-watch! b #:on-read (lambda () (set! said (cons 'b said))))
      (test-equal "two closures: two numbers more" 3 (length (known-handlers w)))
      (loop-unwatch! a)
      (test-equal "one freed once unwatched" 2 (length (known-handlers w)))
      (loop-watch! a #:on-read (lambda () (set! said (cons 'c said))))
      (watchers-ready! w a EPOLLIN)
      (watchers-ready! w b EPOLLIN)
      (test-equal "a number given again calls the new watcher's, not the old"
        '(b c) said)
      (loop-unwatch! a)
      (loop-unwatch! b)
      (test-assert "nobody watches an unwatched descriptor"
        (not (watchers-ready! w a EPOLLIN)))
      ;; the shared number outlives a and b, and their closures' numbers
      ;; are not it
      (set! seen '())
      (watchers-ready! w (list-ref fds 2) EPOLLIN)
      (test-equal "the others still share their number" (list (list-ref fds 2)) seen)
      (test-equal "and it alone is known" 1 (length (known-handlers w))))
    (let ((out (port->fdes (cdr (car pipes))))
          (events (make-epoll-events 4))
          (wrote 0))
      (loop-watch! out #:on-read (lambda () #f) #:on-write (lambda () (set! wrote (+ wrote 1))))
      (loop-want-write! out #t)
      (test-equal "a pipe's end asked for EPOLLOUT is ready" 1
        (epoll-wait epfd events ((@ (plucky sys libc) bytevector-address) events) 0))
      (loop-watch! out #:on-read (lambda () #f))
      (test-equal "watched again: epoll no longer asks for EPOLLOUT" 0
        (epoll-wait epfd events ((@ (plucky sys libc) bytevector-address) events) 0))
      (loop-unwatch! out))
    (let* ((file (open-input-file "tests/server/watch.scm"))
           (raised (catch #t
                     (lambda () (loop-watch! (port->fdes file) #:on-read (lambda () #f)) #f)
                     (lambda (key . args) key))))
      (test-equal "a regular file: epoll refuses it, and loop-watch! says so"
        'misc-error raised)
      (test-assert "and it is not watched"
        (not (watchers-ready! w (port->fdes file) EPOLLIN)))
      (test-equal "nor kept a number" 1 (length (known-handlers w)))
      (close-port file))
    (stop-watchers! w)
    (test-equal "stop-watchers!: each ON-STOP once, with its object"
      (sort (cddr fds) <) (sort stopped <))
    (test-equal "and every number is free" '() (known-handlers w))
    (set-current-watchers! #f)
    (for-each (lambda (p) (close-port (car p)) (close-port (cdr p))) pipes)
    (close-fdes epfd)))

(test-end "server/watch")
