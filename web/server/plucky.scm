;;; (web server plucky) --- plucky as a server implementation for (web server)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Any app written for Guile's (web server) switches to plucky with one
;;; word:
;;;
;;;   (run-server handler 'plucky '(#:port 8080))
;;;   (run-server handler 'plucky '(#:port 8080) state ...)  ; tekuti-style
;;;
;;; Guile's `run-server' looks up the `plucky' binding of this module and
;;; drives it through the server-impl protocol: open once, then
;;; read-client -> the handler -> write-client, one request at a time.
;;; plucky's loop works the other way round (it calls a handler when a
;;; request is ready), so the two are joined with a delimited
;;; continuation: `read' runs the loop until it has a request, at which
;;; point the loop's handler aborts to `read''s prompt, which returns the
;;; request to Guile with the continuation as the "client"; `write'
;;; resumes that continuation with Guile's response, and the loop carries
;;; on — writing, reading, parsing — until it holds the next request.
;;; Keep-alive, pipelining, limits and timeouts are thus the same as
;;; under `plucky serve'.
;;;
;;; Guile's `run-server' still calls its own `sanitize-response' and
;;; error handling on each request; apps that want all of plucky's speed
;;; use `run-server' from (plucky server) or `plucky serve' instead.
;;;
;;; Open parameters (a keyword list, as for Guile's 'http server):
;;;   #:host "127.0.0.1"  #:port 8080  #:family AF_INET  #:addr INADDR_LOOPBACK
;;;   #:socket SOCK  #:workers 1
;;; and the limits and timeouts of `plucky serve', by their keywords
;;; (#:max-body-bytes, #:keep-alive-timeout-s …: `make-server-settings').
;;;
;;; Code:

(define-module (web server plucky)
  #:use-module (srfi srfi-9)
  #:use-module ((ice-9 control) #:select (call/ec))
  #:use-module (web server)
  #:use-module (web response)
  #:use-module (plucky server)
  #:export (plucky))

(define-record-type <plucky-server>
  (make-plucky-server sockets settings running? pending)
  plucky-server?
  (sockets plucky-server-sockets)
  (settings plucky-server-settings)     ; the loop's, `make-server-settings'
  (running? plucky-server-running? set-plucky-server-running!)
  ;; #f, or (continuation request . body): the next request, caught
  ;; while `write' resumed the loop
  (pending plucky-server-pending set-plucky-server-pending!))

(define request-ready (make-prompt-tag "plucky-request"))

(define (bridge request body)
  ;; The handler plucky's loop sees: suspend the loop, give the request
  ;; to Guile's run-server, and return what `write' resumes us with.
  (abort-to-prompt request-ready request body))

(define* (plucky-open #:key
                      (host #f)
                      (family AF_INET)
                      (addr (if host #f INADDR_LOOPBACK))
                      (port 8080)
                      (socket #f)
                      (workers 1)
                      #:allow-other-keys
                      #:rest arguments)
  (let* ((settings (apply make-server-settings
                          (drop-keywords arguments '(#:host #:family #:addr #:port
                                                     #:socket #:workers))))
         (sock (cond
               (socket
                (listen socket 1024)
                (fcntl socket F_SETFL (logior O_NONBLOCK (fcntl socket F_GETFL)))
                socket)
               (host (open-listener host port))
               (else (open-listener (inet-ntop family addr) port)))))
    ;; Not Guile's sigaction: see (plucky sys signal) on Guile's signal
    ;; thread and fork.
    (ignore-signal! SIGPIPE)
    ;; Guile's run-server enters the debugger on an error unless in batch
    ;; mode; a server must log and carry on instead.
    (ensure-batch-mode!)
    (when (> workers 1)
      (fork-workers! workers))
    (make-plucky-server (list sock) settings #f #f)))

(define (drop-keywords arguments keywords)
  ;; -> the keyword arguments ARGUMENTS without those of KEYWORDS
  (let lp ((rest arguments) (kept '()))
    (cond
     ((or (null? rest) (null? (cdr rest))) (reverse kept))
     ((memq (car rest) keywords) (lp (cddr rest) kept))
     (else (lp (cddr rest) (cons* (cadr rest) (car rest) kept))))))

(define (fork-workers! workers)
  ;; This process stays here as the supervisor (see `supervise-workers'):
  ;; it never returns to Guile's run-server, and exits when its workers
  ;; have.  Each worker escapes back out of `open' and serves.
  (call/ec
   (lambda (serve-in-worker)
     (supervise-workers workers (lambda () (serve-in-worker #t)))
     (primitive-exit 0))))

(define (caught k request body)
  (values k request body))

(define (plucky-read server)
  (let ((pending (plucky-server-pending server)))
    (cond
     (pending
      (set-plucky-server-pending! server #f)
      (values (car pending) (cadr pending) (cddr pending)))
     ((not (plucky-server-running? server))
      (set-plucky-server-running! server #t)
      (call-with-prompt request-ready
        (lambda ()
          (run-loop (map port->fdes (plucky-server-sockets server)) bridge
                    #:settings (plucky-server-settings server))
          ;; The loop only returns when stopped.
          (throw 'interrupt))
        caught))
     (else
      (error "plucky: read-client called twice without write-client")))))

(define internal-error-headers '((content-type . (text/plain))))

(define (plucky-write server k response body)
  ;; Guile's handle-request answers a failed handler with a bare 500 and
  ;; no body; give the client a body that says what happened.
  (let ((body (if (and (not body)
                       (= (response-code response) 500)
                       (null? (response-headers response)))
                  "Internal Server Error\n"
                  body))
        (response (if (and (not body)
                           (= (response-code response) 500)
                           (null? (response-headers response)))
                      (build-response #:code 500 #:headers internal-error-headers)
                      response)))
    (call-with-prompt request-ready
      (lambda () (k response body))
      (lambda (k request body)
        (set-plucky-server-pending! server (cons* k request body)))))
  (values))

(define (plucky-close server)
  (close-loop-connections!)
  (for-each close-port (plucky-server-sockets server)))

(define-server-impl plucky
  plucky-open
  plucky-read
  plucky-write
  plucky-close)

;;; (web server plucky) ends here
