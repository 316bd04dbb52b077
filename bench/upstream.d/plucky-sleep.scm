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

(use-modules (web request) (web uri))

;; `sleep-ms' is meant to be exported by (plucky server); until it is,
;; take it from the module that defines it, and say so.
(define sleep-ms
  (let ((public (resolve-interface '(plucky server))))
    (if (module-variable public 'sleep-ms)
        (module-ref public 'sleep-ms)
        (begin
          (format (current-error-port)
                  "plucky-sleep.scm: (plucky server) exports no sleep-ms; using (plucky server suspend)'s~%")
          (module-ref (resolve-interface '(plucky server suspend)) 'sleep-ms)))))

(define holding 0)                      ; requests waiting in /hold now

(define (text string)
  (values '((content-type . (text/plain))) string))

(lambda (request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path "/ok") (text "ok"))
     ((string=? path "/hold")
      (set! holding (+ holding 1))
      (dynamic-wind
        (lambda () #t)
        (lambda () (sleep-ms 30000))
        (lambda () (set! holding (- holding 1))))
      (text "ok"))
     ((string=? path "/count") (text (number->string holding)))
     ((string=? path "/pid") (text (number->string (getpid))))
     (else (sleep-ms 50) (text "ok")))))
