;;; bench/upstream.d/plucky-sleep.scm --- bench/upstream's sleep row on plucky
;;;
;;; Copyright (C) 2026 the plucky authors
;;; SPDX-License-Identifier: LGPL-3.0-or-later
;;;
;;; Serve it:  bin/plucky serve bench/upstream.d/plucky-sleep.scm --workers 1
;;;
;;;   /        waits 50 ms (sleep-ms: the worker serves others meanwhile),
;;;            then "ok": the sleep row
;;;   /ok      "ok" at once: the idle connections of the memory test
;;;   /hold    waits 30 s: the suspended requests of the memory test
;;;   /count   how many requests wait in /hold now
;;;   /pid     the worker's PID, whose /proc the memory test reads

(use-modules ((plucky server) #:select (sleep-ms))
             (srfi srfi-34)
             (web request)
             (web uri))

(define holding 0)                      ; requests waiting in /hold now

(define (text string)
  (values '((content-type . (text/plain))) string))

(lambda (request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path "/ok") (text "ok"))
     ((string=? path "/hold")
      ;; Not dynamic-wind: suspending leaves its extent, which would
      ;; count the request out while it waits.
      (set! holding (+ holding 1))
      (guard (e (#t (set! holding (- holding 1)) (raise-exception e)))
        (sleep-ms 30000))
      (set! holding (- holding 1))
      (text "ok"))
     ((string=? path "/count") (text (number->string holding)))
     ((string=? path "/pid") (text (number->string (getpid))))
     (else (sleep-ms 50) (text "ok")))))
