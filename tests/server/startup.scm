;;; tests/server/startup.scm --- what bin/plucky's start-up tricks must keep

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; bin/plucky grows the heap and loads plucky's modules with libgc's
;;; collections off (see there).  What a served app must see all the
;;; same: collections on, when it is loaded and when it answers, with
;;; one worker and with a master and two; SRFI-19 there to import as
;;; usual; and not loaded before it asks for them: (web response), which
;;; (plucky http response) loads only when a response record has to be
;;; made or read; nor (system foreign) and
;;; (system foreign-library), which (plucky sys foreign) does without;
;;; nor, once it has answered, the modules in `unneeded' below, which
;;; only some servers or requests need.  The app reports what it saw in
;;; its answer.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (ice-9 match)
             (web client)
             (tests lib harness)
             (tests lib command))

(test-begin "server/startup")

;; Modules a server answering a hello app does without, each for a
;; reason of its own, none of them loaded when it has answered.
(define unneeded
  '(;; (plucky server watchdog) uses a mutex: (ice-9 atomic) loads
    ;; Guile's compiler's tree-il modules
    (ice-9 atomic)
    (language tree-il)))

(define app-text "
(define (collects?)
  ;; -> #t if an explicit (gc) runs a collection now
  (let ((before (assq-ref (gc-stats) 'gc-times)))
    (gc)
    (> (assq-ref (gc-stats) 'gc-times) before)))
(define heap-room-at-load?
  ;; (plucky sys gc) reserve-heap! gave the heap 8 MB more than Guile's 2
  (>= (assq-ref (gc-stats) 'heap-size) (* 8 1024 1024)))
(define collects-at-load? (collects?))
(define web-response-before?
  (let ((module (resolve-module '(web response) #f #:ensure #f)))
    (and module (module-public-interface module) #t)))
(define (loaded? name)
  (let ((module (resolve-module name #f #:ensure #f)))
    (and module (module-public-interface module) #t)))
(define ffi-modules-before?
  ;; (plucky sys foreign) does without them
  (or (loaded? '(system foreign)) (loaded? '(system foreign-library))))
(use-modules (srfi srfi-19))
(define unneeded '~s)
(lambda (request body)
  (values '((content-type . (text/plain)))
          (format #f \"~~s\"
                  (list (map (lambda (name) (cons name (loaded? name))) unneeded)
                        heap-room-at-load? collects-at-load? (collects?)
                        (date? (current-date))
                        web-response-before? ffi-modules-before?
                        ;; nothing asked a procedure for its properties,
                        ;; which loads the debug-info readers
                        (loaded? '(system vm debug))
                        ;; nor did answering load Guile's FFI modules
                        (or (loaded? '(system foreign))
                            (loaded? '(system foreign-library)))))))
")

(let* ((dir (temporary-directory))
       (app (string-append dir "/app.scm")))
  (write-file app (format #f app-text unneeded))
  (for-each
   (lambda (workers)
     (call-with-plucky
      app (append (list "--port" "0" "--workers" workers)
                  allow-root)
      (lambda (plucky)
        (let ((seen (call-with-values
                        (lambda ()
                          (http-get (string-append "http://127.0.0.1:"
                                                   (number->string (plucky-port plucky)) "/")))
                      (lambda (response body)
                        (call-with-input-string body read)))))
          (test-equal (string-append "the heap grown before the app, collections on at load and when answering, SRFI-19 "
                                     "there, (web response) unloaded until the app imports "
                                     "it, nor Guile's FFI modules, no debug-info readers loaded, --workers " workers)
            '(#t #t #t #t #f #f #f #f)
            (cdr seen))
          (for-each (lambda (name)
                      (test-equal (format #f "~s unloaded when a server has answered, --workers ~a"
                                          name workers)
                        #f
                        (assoc-ref (car seen) name)))
                    unneeded)))))
   '("1" "2"))
  (remove-tree dir))

;; --gc-free-space-divisor: libgc's setting in the process that answers,
;; a worker forked by the master with --workers 2.
(let* ((dir (temporary-directory))
       (app (string-append dir "/divisor.scm")))
  (write-file app "
(use-modules ((plucky sys gc) #:select (free-space-divisor)))
(lambda (request body)
  (values '((content-type . (text/plain))) (number->string (free-space-divisor))))
")
  (for-each
   (lambda (flags expected)
     (call-with-plucky
      app (append (list "--port" "0" "--workers" "2") flags allow-root)
      (lambda (plucky)
        (test-equal (format #f "free-space divisor with ~s" flags) expected
          (call-with-values
              (lambda ()
                (http-get (string-append "http://127.0.0.1:"
                                         (number->string (plucky-port plucky)) "/")))
            (lambda (response body) body))))))
   '(() ("--gc-free-space-divisor" "3"))
   '("1" "3"))
  (remove-tree dir))

;; No collection between the app's load and its first answer: the heap
;; has room (reserve-heap!), and starting the watchdog's thread must not
;; set one off (plucky server watchdog).
(let* ((dir (temporary-directory))
       (app (string-append dir "/app.scm")))
  (write-file app "
(define collections-at-load (assq-ref (gc-stats) 'gc-times))
(lambda (request body)
  (values '((content-type . (text/plain)))
          (number->string (- (assq-ref (gc-stats) 'gc-times) collections-at-load))))
")
  (for-each
   (lambda (workers)
     (call-with-plucky
      app (append (list "--port" "0" "--workers" workers) allow-root)
      (lambda (plucky)
        (test-equal (string-append "no collection from the app's load to its first answer, --workers "
                                   workers)
          "0"
          (call-with-values
              (lambda ()
                (http-get (string-append "http://127.0.0.1:"
                                         (number->string (plucky-port plucky)) "/")))
            (lambda (response body) body))))))
   '("1" "2"))
  (remove-tree dir))

;; PLUCKY_TRACE_STARTUP: the steps of start-up, each once per process
;; that reaches it, in order of time (bench/startup's breakdown); nothing
;; without it.
(define (traced-steps log)
  ;; -> ((STEP PID MS) …) from the "plucky-startup: …" lines of LOG
  (filter-map (lambda (line)
                (match (string-split line #\space)
                  (("plucky-startup:" step pid ms)
                   (list step (string->number pid) (string->number ms)))
                  (_ #f)))
              (string-split log #\newline)))

(let* ((dir (temporary-directory))
       (app (write-text-app dir "traced")))
  (define (served-steps workers environment)
    ;; -> the traced steps of a plucky that answered a GET, after it
    ;; stopped; when traced, once each of its processes said it serves.
    ;; The first worker can answer before the master has read its
    ;; "ready": a SIGTERM then rightly starts no second worker.
    (call-with-plucky
     app (append (list "--port" "0" "--workers" workers) allow-root)
     (lambda (plucky)
       (http-get (string-append "http://127.0.0.1:"
                                (number->string (plucky-port plucky)) "/"))
       (wait-until (lambda ()
                     (or (not (member "PLUCKY_TRACE_STARTUP=1" environment))
                         (= (string->number workers)
                            (count (lambda (step) (equal? "serving" (car step)))
                                   (traced-steps (plucky-log plucky)))))))
       (stop-plucky plucky)
       (traced-steps (plucky-log plucky)))
     #:environment environment))
  (let* ((environment (cons "PLUCKY_TRACE_STARTUP=1" (environ)))
         (steps (served-steps "2" environment))
         (master (cadr (car steps))))
    (test-equal "traced start-up, --workers 2: the master's steps, then each worker's"
      '(("launch" "modules" "app" "listening" "fork" "ready" "fork")
        ("worker" "serving") ("worker" "serving"))
      (cons (map car (filter (lambda (s) (= (cadr s) master)) steps))
            (map (lambda (pid) (map car (filter (lambda (s) (= (cadr s) pid)) steps)))
                 (delete-duplicates
                  (filter-map (lambda (s) (and (not (= (cadr s) master)) (cadr s)))
                              steps)))))
    (test-assert "traced start-up: in each process, each step no earlier than the one before; a worker after its fork"
      (let* ((pids (delete-duplicates (map cadr steps)))
             (times (lambda (pid) (map caddr (filter (lambda (s) (= (cadr s) pid)) steps))))
             (first-fork (caddr (assoc "fork" steps))))
        (and (every (lambda (pid)
                      (let ((ts (times pid)))
                        (every <= (drop-right ts 1) (cdr ts))))
                    pids)
             (every (lambda (pid) (<= first-fork (car (times pid))))
                    (delete master pids)))))
    (test-assert "traced start-up, --workers 2: the second worker forked once the master heard the first was ready"
      (let ((master-steps (filter (lambda (s) (= (cadr s) master)) steps)))
        (equal? '("fork" "ready" "fork") (take-right (map car master-steps) 3))))
    (test-equal "traced start-up, --workers 1: one process's steps"
      '("launch" "modules" "app" "listening" "serving")
      (map car (served-steps "1" environment))))
  (test-equal "no trace without PLUCKY_TRACE_STARTUP"
    '()
    (served-steps "1" (filter (lambda (v) (not (string-prefix? "PLUCKY_TRACE_STARTUP=" v)))
                              (environ))))
  (remove-tree dir))

(test-end "server/startup")

;;; tests/server/startup.scm ends here
