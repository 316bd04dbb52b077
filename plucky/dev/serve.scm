;;; (plucky dev serve) --- run an app in this process, accounted or not

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; What bench/overhead, bench/instructions and `plucky profile' run: one
;;; event loop (plucky server loop) in this process, serving an app file,
;;; in one of four modes, so that the cost of accounting can be measured
;;; by difference:
;;;
;;;   off      the handler alone, no observer: what `plucky serve' does
;;;   loop     an observer that does nothing: the loop's own timers only
;;;   account  the accounting, and the handler alone (`plucky profile')
;;;   nocatch  the accounting and the /_plucky/ wrapper: what --status
;;;            turns on (the loop reports handlers' exceptions itself)
;;;   full     the same, the wrapper also catching the handler's
;;;            exceptions itself (#:catch-errors?), for servers that do
;;;            not report them: an exception handler per request
;;;
;;; It can stop by itself after N requests (bench/instructions: a run of
;;; exactly N requests under callgrind; 0 serves none and returns after
;;; one turn of the loop, the baseline to subtract), and write the port
;;; it listens on to a file once it listens, so that a script waits for
;;; that file rather than sleeping.
;;;
;;;   guile -L . -C build -e '(plucky dev serve)' -- \
;;;         APP.scm [--port P] [--mode full] [--requests N] [--port-file F]
;;;         [--samples-per-second N] [--sample-every N]
;;;
;;; Code:

(define-module (plucky dev serve)
  #:use-module (plucky server)
  #:use-module (plucky server loop)
  #:use-module ((plucky server hooks) #:select (make-observer-hooks))
  #:use-module ((plucky sys gc) #:select (reserve-heap! collect-less-often!))
  ;; Loaded by the modes that account, not by mode off: `plucky serve'
  ;; without --status does not load them, and every module in the heap
  ;; is marked at each collection (bench/instructions, mode off).
  #:autoload (plucky observe accounting) (make-observer observer->hooks)
  #:autoload (plucky observe status) (observed-handler)
  ;; `load' of an app file needs a module that is not declarative.
  #:declarative? #f
  #:export (load-app
            serve-app
            main))

(define (load-app file)
  "Load the app FILE and return the handler its last expression
evaluates to, as `plucky serve' does; raise an error otherwise."
  (unless (file-exists? file)
    (error "no such app file" file))
  (let ((handler (save-module-excursion
                  (lambda ()
                    (let ((module (make-fresh-user-module)))
                      (set-module-declarative?! module #f)
                      (set-current-module module))
                    (load (canonicalize-path file))))))
    (unless (procedure? handler)
      (error "the app file must end with its handler procedure" file handler))
    handler))

(define (stop-after limit handler)
  ;; HANDLER, stopping the loop once it has answered LIMIT requests.
  (let ((count 0))
    (lambda (request body . state)
      (set! count (+ count 1))
      (when (= count limit)
        (stop-loop!))
      (apply handler request body state))))

(define* (serve-app handler #:key (host "127.0.0.1") (port 0) (mode 'full)
                    (requests #f) (on-listen #f) (observer #f)
                    (settings (make-loop-settings)) (socket #f)
                    (samples-per-second 500) (sample-every #f))
  "Serve HANDLER on HOST:PORT in this process until the process is
killed or, when REQUESTS is a number, until that many requests are
answered (0: return after one turn of the loop).  MODE is 'off, 'loop,
'account, 'nocatch or 'full (see the commentary).  ON-LISTEN, if given,
is called with the TCP port once the socket listens.  SOCKET, if given,
is a listening socket to serve instead of opening one (it is left open).
OBSERVER is the observer to fill in modes account, nocatch and full
(default: a new one, with SAMPLES-PER-SECOND or SAMPLE-EVERY, see
`make-observer').
Return the observer, or #f in modes off and loop."
  (let* ((observer (and (memq mode '(full nocatch account))
                        (or observer (make-observer #:samples-per-second samples-per-second
                                                 #:sample-every sample-every))))
         (app (if (and requests (> requests 0)) (stop-after requests handler) handler))
         (handler (if (memq mode '(full nocatch))
                      (observed-handler app observer #:catch-errors? (eq? mode 'full))
                      app))
         (procedure (case mode
                      ((off) #f)
                      ((loop)
                      ;; times every request (a countdown nobody resets
                      ;; stays below 1), tells nothing to anyone
                      (make-observer-hooks))
                      ((full nocatch account) (observer->hooks observer))
                      (else (error "unknown mode" mode))))
         (listener (or socket (open-listener host port))))
    (when on-listen (on-listen (listener-port listener)))
    (run-loop (list (port->fdes listener)) handler
              #:settings settings
              #:observer procedure
              #:exit-when-idle? (eqv? requests 0))
    (unless socket (close-port listener))
    observer))

(define (main args)
  "Command line: APP.scm [--host H] [--port P] [--mode M] [--requests N]
[--port-file FILE]."
  (let lp ((args (cdr args)) (options '()) (files '()))
    (cond
     ((and (pair? args) (pair? (cdr args))
           (member (car args) '("--host" "--port" "--mode" "--requests" "--port-file"
                                "--samples-per-second" "--sample-every")))
      (lp (cddr args) (acons (car args) (cadr args) options) files))
     ((and (pair? args) (not (string-prefix? "-" (car args))))
      (lp (cdr args) options (cons (car args) files)))
     ((and (null? args) (= 1 (length files)))
      ;; The heap room bin/plucky gives a server (plucky/launch.scm): it
      ;; sets how often a busy server collects (bench/instructions).
      (reserve-heap! (* 8 1024 1024))
      (collect-less-often!)
      (let ((option (lambda (name) (assoc-ref options name))))
        (serve-app (load-app (car files))
                   #:host (or (option "--host") "127.0.0.1")
                   #:port (string->number (or (option "--port") "0"))
                   #:mode (string->symbol (or (option "--mode") "full"))
                   #:requests (and (option "--requests") (string->number (option "--requests")))
                   #:samples-per-second (let ((n (option "--samples-per-second")))
                                          (if n (string->number n) 2000))
                   #:sample-every (let ((n (option "--sample-every")))
                                    (and n (string->number n)))
                   #:on-listen
                   (lambda (port)
                     (format (current-error-port) "serve: listening on http://~a:~a/ (mode ~a)~%"
                             (or (option "--host") "127.0.0.1") port
                             (or (option "--mode") "full"))
                     (let ((file (option "--port-file")))
                       (when file
                         ;; Written whole, then renamed: a reader never
                         ;; sees half a number.
                         (call-with-output-file (string-append file ".tmp")
                           (lambda (out) (write port out) (newline out)))
                         (rename-file (string-append file ".tmp") file)))))))
     (else
      (format (current-error-port)
              "usage: guile -e '(plucky dev serve)' -- APP.scm [--host H] [--port P] [--mode off|loop|account|nocatch|full] [--requests N] [--port-file FILE] [--samples-per-second N] [--sample-every N]~%")
      (exit 2)))))

;;; (plucky dev serve) ends here
