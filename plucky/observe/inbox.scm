;;; (plucky observe inbox) --- the last failed requests, kept for replay

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; When a handler fails, the loop answers 500 and logs a backtrace to
;;; standard error, where it scrolls away among the others.  The inbox
;;; keeps the last few failures whole: the request head, its body, the
;;; backtrace, the time.  How a failure gets in:
;;;
;;;   the handler raises -> (plucky observe status)'s wrapper catches it
;;;     without unwinding: `inbox-note-exception!' takes the backtrace
;;;     text there, where the stack still shows the cause, and re-raises,
;;;     so that the loop answers 500 and logs as usual
;;;   the loop answers 500 (or the handler itself answered 5xx) -> the
;;;     observer (plucky observe accounting) calls `inbox-add-failure!',
;;;     which files a <failure> with the noted backtrace, if any
;;;
;;; and how a developer gets it out, at a REPL:
;;;
;;;   in the server's process (say through `guile --listen' or
;;;   (system repl server)):
;;;     (use-modules (plucky observe inbox))
;;;     (inbox-failures)              ; newest first
;;;     (replay (failure-ref 3) my-handler)   ; -> response, body
;;;   from another process, over HTTP (with several workers, an id
;;;   "PID.N" as the status page gives it reaches any worker's):
;;;     (define f (fetch-failure "http://127.0.0.1:8080" 3))
;;;     (replay f my-handler)
;;;
;;; `replay' calls the handler it is given, so a handler redefined at the
;;; REPL since the failure is the one that runs; exceptions are not
;;; caught, so the REPL's debugger opens where it fails.
;;;
;;; Code:

(define-module (plucky observe inbox)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (rnrs bytevectors)
  #:use-module ((ice-9 binary-ports) #:select (open-bytevector-input-port))
  #:use-module (ice-9 exceptions)
  #:use-module (ice-9 iconv)
  #:use-module (ice-9 match)
  #:use-module (web http)
  #:use-module ((web response) #:select (response-code))
  #:use-module (web request)
  #:use-module (web uri)
  ;; Loaded when first used, by a failure or a replay, not by every
  ;; server with a status page: each collection marks what modules
  ;; hold (bench/hello's pauses; the live heap libgc logs).
  #:autoload (web client) (http-get)
  #:autoload (web server) (sanitize-response)
  #:autoload (system repl debug) (print-frames)
  #:export (make-inbox
            inbox-of
            inbox?
            inbox-size
            inbox-add-failure!
            inbox-note-exception!
            inbox-entries
            current-inbox

            failure?
            failure-id
            failure-time
            failure-code
            failure-route
            failure-method
            failure-target
            failure-head
            failure-body
            failure-backtrace
            failure-message
            failure-request

            inbox-failures
            failure-ref
            failure->request
            replay
            failure->sexp
            sexp->failure
            fetch-failure))

;;;
;;; Failures
;;;

(define-record-type <failure>
  (%make-failure id time code route method target head body backtrace message
                 request)
  failure?
  ;; 1, 2, … per process; "PID.N" for failure N of worker PID in the
  ;; inbox of the whole server (plucky observe accounting)
  (id failure-id)
  (time failure-time)                 ; seconds since the epoch (a real)
  (code failure-code)                 ; the status answered, 500 usually
  (route failure-route)               ; the route it was accounted under
  (method failure-method)             ; symbol
  (target failure-target)             ; string, as in the request line
  (head failure-head)                 ; the request head as text, CRLFs and all
  (body failure-body)                 ; bytevector, #f when none or not kept
  (backtrace failure-backtrace)       ; text, or #f when no exception was seen
  (message failure-message)           ; the exception printed, or an explanation
  ;; the <request> itself; #f for a failure read back with `sexp->failure'
  (request failure-request))

;;;
;;; The inbox
;;;

(define-record-type <inbox>
  (%make-inbox size entries next-id pending)
  inbox?
  (size inbox-size)
  (entries inbox-entries set-inbox-entries!)     ; newest first, at most SIZE
  (next-id inbox-next-id set-inbox-next-id!)
  ;; #f, or (request backtrace . message) noted by the wrapper for the
  ;; request that is failing
  (pending inbox-pending set-inbox-pending!))

(define the-inbox #f)

(define (make-inbox size)
  "Return an empty inbox that keeps the last SIZE failures.  It becomes
`current-inbox'."
  (let ((inbox (%make-inbox size '() 1 #f)))
    (set! the-inbox inbox)
    inbox))

(define (inbox-of size failures)
  "Return an inbox holding FAILURES (newest first; at most SIZE are
kept), to read: unlike `make-inbox', it does not become `current-inbox'."
  (%make-inbox size (if (> (length failures) size) (take failures size) failures)
               1 #f))

(define (current-inbox)
  "Return the inbox made last in this process (by `make-observer'), or #f."
  the-inbox)

;; Bodies are kept up to this size; a larger one is cut (and says so).
(define max-body 65536)

(define* (inbox-note-exception! inbox request exception #:optional (stack 'caller))
  "Note that REQUEST is failing with EXCEPTION, for the failure
`inbox-add-failure!' will file: its message, and its backtrace from
STACK: a stack, #f for none, or 'caller (the default) to take it from
the caller, which must then be an exception handler that does not
unwind."
  (let ((backtrace
         ;; From the frame that raised outwards: the frames of this
         ;; procedure and of the exception machinery are cut off.
         (let ((stack (if (eq? stack 'caller)
                          (false-if-exception (make-stack #t raise-exception))
                          stack)))
           (and stack
                (false-if-exception
                 (call-with-output-string
                   (lambda (port)
                     ;; A fixed width, as in a log, whatever the terminal.
                     (print-frames (stack->frames stack) port #:width 160)))))))
        (message
         (or (false-if-exception
              (call-with-output-string
                (lambda (port)
                  (print-exception port #f (exception-kind exception)
                                   (exception-args exception)))))
             "(the exception could not be printed)")))
    (set-inbox-pending! inbox (cons* request backtrace message))))

(define (stack->frames stack)
  (let* ((n (stack-length stack))
         (frames (make-vector n)))
    (let lp ((i 0))
      (when (< i n)
        (vector-set! frames i (stack-ref stack i))
        (lp (+ i 1))))
    frames))

(define (request-head-text request)
  ;; The request as it would be sent: what `read-request' can read back.
  ;; A header value the writer refuses (one kept raw because Guile could
  ;; not parse it) is written as it came.
  (call-with-output-string
    (lambda (port)
      ;; HTTP/2 has no minor version (and its requests were fields, not
      ;; this text: the head shows what they were parsed as)
      (format port "~a ~a HTTP/~a\r\n"
              (request-method request)
              (request-target request)
              (if (= 2 (car (request-version request)))
                  "2"
                  (format #f "~a.~a" (car (request-version request))
                          (cdr (request-version request)))))
      (for-each
       (match-lambda
         ((name . value)
          (let ((line (or (false-if-exception
                           (call-with-output-string
                             (lambda (line) (write-header name value line))))
                          (format #f "~a: ~a\r\n" (header->string name)
                                  (if (string? value) value (object->string value))))))
            (display line port))))
       (request-headers request))
      (display "\r\n" port))))

(define (header->string name)
  (let ((s (symbol->string name)))
    (string-join (map string-titlecase (string-split s #\-)) "-")))

(define (request-target request)
  (let ((uri (request-uri request)))
    (string-append (or (uri-path uri) "/")
                   (let ((q (uri-query uri))) (if q (string-append "?" q) "")))))

(define (inbox-add-failure! inbox request body code time route)
  "File a failure in INBOX: REQUEST (#f for one refused before the
handler), its BODY (a bytevector or #f), the CODE answered, the TIME
(seconds since the epoch) and the ROUTE name.  The backtrace noted by
`inbox-note-exception!' for REQUEST goes with it.  Return the <failure>."
  (let* ((pending (inbox-pending inbox))
         (noted (and pending (eq? (car pending) request) (cdr pending)))
         (id (inbox-next-id inbox))
         (failure
          (%make-failure
           id time code route
           (and request (request-method request))
           (if request (request-target request) "")
           (if request (request-head-text request) "")
           (and body (if (> (bytevector-length body) max-body)
                         (let ((cut (make-bytevector max-body)))
                           (bytevector-copy! body 0 cut 0 max-body)
                           cut)
                         body))
           (and noted (car noted))
           (cond
            (noted (cdr noted))
            ((not request) "refused before reaching the handler")
            ((= code 500)
             "no exception reached the handler wrapper: the response failed to serialise (see the server's log), or the handler answered 500 itself")
            (else (format #f "the handler answered ~a" code)))
           request)))
    (set-inbox-pending! inbox #f)
    (set-inbox-next-id! inbox (+ id 1))
    (set-inbox-entries! inbox (cons failure
                                    (let ((old (inbox-entries inbox)))
                                      (if (>= (length old) (inbox-size inbox))
                                          (take old (- (inbox-size inbox) 1))
                                          old))))
    failure))

;;;
;;; At the REPL
;;;

(define* (inbox-failures #:optional (inbox (current-inbox)))
  "Return the failures kept in INBOX (default: this process's), newest
first."
  (if inbox (inbox-entries inbox) '()))

(define* (failure-ref id #:optional (inbox (current-inbox)))
  "Return the failure numbered ID in INBOX (default: this process's), or
#f when it is not (or no longer) kept."
  (find (lambda (f) (equal? (failure-id f) id)) (inbox-failures inbox)))

(define (failure->request failure)
  "Return a <request> for FAILURE: the very record the handler saw when
the failure was filed in this process, else one read back from its head."
  (or (failure-request failure)
      (read-request (open-bytevector-input-port
                     (string->bytevector (failure-head failure) "ISO-8859-1")))))

(define (replay failure handler . state)
  "Call HANDLER, as the server would, with the request of FAILURE (a
<failure>, or the id of one in this process's inbox) and its body, and
return the response as a server would send it: (values response body
. STATE), RESPONSE a response record and BODY a bytevector (#f for
HEAD), as Guile's `sanitize-response' makes them of what HANDLER
returned (a header list, a string or a procedure body).  Nothing is
caught: a handler that still fails raises its exception here."
  (let* ((failure (if (integer? failure)
                      (or (failure-ref failure)
                          (error "no failure with this id in the inbox" failure))
                      failure))
         (request (failure->request failure)))
    (call-with-values
        (lambda () (apply handler request (failure-body failure) state))
      (lambda (response body . state)
        (call-with-values (lambda () (sanitize-response request response body))
          (lambda (response body)
            (apply values response body state)))))))

;;;
;;; As data, for the status endpoint and `fetch-failure'
;;;

(define (failure->sexp failure)
  "Return FAILURE as an s-expression `write' can print and `read' read."
  `(failure (id . ,(failure-id failure))
            (time . ,(failure-time failure))
            (code . ,(failure-code failure))
            (route . ,(failure-route failure))
            (method . ,(failure-method failure))
            (target . ,(failure-target failure))
            (head . ,(failure-head failure))
            (body . ,(failure-body failure))
            (backtrace . ,(failure-backtrace failure))
            (message . ,(failure-message failure))))

(define (sexp->failure sexp)
  "Return the <failure> that `failure->sexp' made SEXP of."
  (unless (and (pair? sexp) (eq? (car sexp) 'failure))
    (error "not a failure" sexp))
  (let ((field (lambda (name) (assq-ref (cdr sexp) name))))
    (%make-failure (field 'id) (field 'time) (field 'code) (field 'route)
                   (field 'method) (field 'target) (field 'head)
                   (field 'body) (field 'backtrace) (field 'message) #f)))

(define* (fetch-failure base id #:key (token #f))
  "Fetch failure ID from the inbox of the server at BASE (an URL such as
\"http://127.0.0.1:8080\") through /_plucky/inbox/ID.scm, and return it
as a <failure> to `replay'.  TOKEN is the server's --status-token, if it
has one.  ID is a number of the answering worker's inbox, or, with
several workers, \"PID.N\" as the status page names failure N of worker
PID."
  (call-with-values
      (lambda ()
        (http-get (string-append (string-trim-right base #\/) "/_plucky/inbox/"
                                 (if (number? id) (number->string id) id) ".scm"
                                 (if token (string-append "?token=" (uri-encode token)) ""))
                  #:decode-body? #f))
    (lambda (response body)
      (unless (= 200 (response-code response))
        (error "the server did not give the failure" (response-code response)
               (and body (utf8->string body))))
      (sexp->failure (read (open-input-string (utf8->string body)))))))

;;; (plucky observe inbox) ends here
