;;; (plucky server respond) --- calling the handler and making its answer bytes

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; (plucky server http1) has parsed a request and has its body; here
;;; `respond!' calls the handler (`call-handler') and appends its answer
;;; to the loop's output buffer with (plucky http response), and says
;;; what is to become of the connection, which http1 then does (its
;;; `after-respond!'; this module changes no connection's state).
;;; Bodies the buffer does not hold: a large bytevector leaves with the
;;; head in one writev(2); a file body with sendfile(2) after the head; a
;;; takeover gets the connection once the head is out; a streamed answer
;;; runs on the loop (`run-stream!'), or on a thread of the pool when it
;;; blocks (`hand-off!', plucky server pool).
;;;
;;; A handler that waits suspends (plucky server suspend): its <task>
;;; is kept here until its wait ends, then resumed.
;;;
;;; A handler's exception is a 500 and a logged backtrace, never a dead
;;; worker.  Answers tell the access log (ON-RESPONSE) and the
;;; observer's hooks through the loop's probe (plucky server probe): the
;;; handler is timed around its call, when the observer's countdown
;;; picked the request, and nothing else is on the path.
;;;
;;; Code:

(define-module (plucky server respond)
  #:use-module (rnrs bytevectors)
  #:use-module (web request)
  #:use-module (plucky sys epoll)
  #:use-module (plucky sys libc)
  #:use-module ((plucky http parse) #:select (request-keep-alive?))
  #:use-module (plucky http response)
  #:use-module ((plucky http chunked) #:select (encode-chunk!))
  #:use-module ((ice-9 binary-ports) #:select (make-custom-binary-output-port))
  #:use-module (srfi srfi-9)
  #:use-module ((ice-9 exceptions) #:select (make-exception
                                             make-exception-with-message))
  #:use-module (plucky server hooks)
  #:use-module (plucky server connection)
  #:use-module (plucky server probe)
  #:use-module (plucky server output)
  #:use-module (plucky server pool)
  #:use-module ((plucky server watchdog) #:select (handler-call handler-timeout?
                                                   watchdog-log!))
  #:use-module (plucky server suspend)
  #:autoload (plucky server stream) (close-request-bodies!)
  #:export (with-handler-errors-caught
            call-handler
            respond!
            report-response!
            observe-answer!
            hand-off!
            answer!
            make-tasks
            tasks-count
            tasks-handler-ms
            tasks-compute
            set-tasks-compute!
            task-conn
            task-request
            task-close?
            task-cancelled
            task-waited
            task-computing
            task-started
            suspend-request!
            cancel-task!
            take-ready-tasks!
            tasks-waiting?
            resume-task!
            suspended
            task-stream
            resume-stream!
            run-stream!
            stream-writable!
            stream-on-thread
            wait-stream-drained
            ;; for (plucky server http2), whose streams suspend too
            resume-serving
            suspension-k
            suspension-register))

;; Procedures called once per request, inlined where they are called
;; (plucky sys inline): a call each is measurable in bench/instructions.
(eval-when (expand)
  (use-modules (plucky sys inline)))

;;;
;;; Calling the handler
;;;


;; What the watchdog reads (plucky server watchdog): the request whose
;; handler call runs on this thread, or #f.  A store each, inlined: a
;; procedure call into the watchdog's module each would show in
;; bench/instructions.
(define-inline (watchdog-enter! request)
  (vector-set! handler-call 0 request))

(define-inline (watchdog-leave!)
  (vector-set! handler-call 0 #f))

;; Exceptions are caught by one handler installed around the whole loop
;; (`with-handler-errors-caught') rather than one per request: installing
;; a handler per request costs time and allocation on every request (a
;; micro-benchmark of call-handler shows it).  The loop's `guarded' field
;; says which request, if any, is in the hands of application code; the
;; handler logs a backtrace taken where the exception was raised and
;; escapes to the per-request prompt, which Guile compiles inline.
(define (with-handler-errors-caught loop thunk)
  "Return what THUNK returns, calling it so that an exception raised by
a handler LOOP calls escapes to that call's prompt (see `call-handler')."
  (with-exception-handler
      (lambda (exception)
        (let ((request (loop-guarded loop)))
          (if request
              (begin
                (set-loop-guarded! loop #f)
                ;; Take the stack here, where the exception was raised;
                ;; print it after the escape, outside any handler.  Not
                ;; for a request given up: nothing is printed, and ten
                ;; thousand given up at once would be ten thousand
                ;; stacks (bench/upstream's held connections).
                (abort-to-prompt suspend-tag 'failed request exception
                                 (and (not (request-cancelled? exception))
                                      (make-stack #t 3))))
              ;; Not the application's: a bug of the loop itself.
              (raise-exception exception))))
    thunk))

;; A handler that suspended: what `suspend' aborted with.
(define-record-type <suspension>
  (make-suspension k kind label register)
  suspension?
  (k suspension-k)                      ; the handler's continuation
  (kind suspension-kind)                ; timer | socket | thread | event
  (label suspension-label)              ; #f, or what it waits for
  (register suspension-register))       ; resume -> undo thunk

;; The value `call-handler' returns as its response for a suspension.
(define suspended (list 'suspended))

;; The handler call in progress: its loop, request and body, for
;; `call-in-slot' (slots 0 to 2); then the second value of the call's
;; outcome (slot 2).
(define call-slot (vector #f #f #f))

;; Why one prompt, so laid out.  A handler runs under one prompt
;; (suspend-tag, of (plucky server suspend)) to which it suspends, and
;; to which an exception escapes (`with-handler-errors-caught').  Guile
;; 3.0.8 compiles a prompt whose handler takes the continuation with its
;; body as a closure and the values it returns as a list: so the body
;; is a procedure of no free variable (`call-in-slot' reads `call-slot')
;; that returns one value, the response, and leaves the body in the
;; slot; 16 bytes a request where two prompts and two values took 80
;; (bench/instructions-real).

(define (on-abort k what a b c)
  ;; The prompt's handler.  -> the response, or `suspended' or #f, the
  ;; second value in `call-slot'
  (let ((loop (vector-ref call-slot 0)))
    (leave-suspendable!)
    (watchdog-leave!)
    (set-loop-guarded! loop #f)
    (case what
      ((suspend)
       ;; A B C: the wait's kind, label and register
       (vector-set! call-slot 2 (make-suspension k a b c))
       suspended)
      (else
       ;; failed: A the request, B the exception, C the stack or #f
       (cond
        ((request-cancelled? b)
         ;; Raised where it waited, to unwind the handler: not a bug.
         (vector-set! call-slot 2 'cancelled))
        (else
         (if (handler-timeout? b)
             (watchdog-log! (lambda () (report-handler-error a b c)))
             (report-handler-error a b c))
         (let ((observer (loop-observer loop)))
           (when observer
             ((observer-hooks-on-failure observer) a b c)))
         (vector-set! call-slot 2 (if (handler-timeout? b) 503 #f))))
       #f))))

(define-syntax-rule (run-guarded loop request body)
  ;; -> (values response body) from BODY, a thunk (a handler call or
  ;; the resumption of one) that returns the response and leaves the
  ;; body in `call-slot' (see `handler-returned'); (values #f #f) on an
  ;; exception once it is logged, (values #f 503) when the watchdog
  ;; ended the call, (values #f 'cancelled) when the request was given
  ;; up while it waited, and (values suspended <suspension>) when the
  ;; handler waits.
  (begin
    (set-loop-guarded! loop request)
    (watchdog-enter! request)
    (vector-set! call-slot 0 loop)
    (let ((response (call-with-prompt suspend-tag body on-abort)))
      (values response (vector-ref call-slot 2)))))

(define (handler-returned loop response body)
  ;; The handler (or a stream's body) returned RESPONSE and BODY.  In
  ;; the continuation a suspension takes, so it runs when the handler
  ;; returns, however often it waited.  -> RESPONSE, BODY in the slot
  (leave-suspendable!)
  (watchdog-leave!)                     ; before unguarding
  (set-loop-guarded! loop #f)
  (vector-set! call-slot 2 body)
  response)

(define (call-in-slot)
  ;; The handler call `call-handler' put in `call-slot'.
  (let ((loop (vector-ref call-slot 0))
        (request (vector-ref call-slot 1))
        (body (vector-ref call-slot 2)))
    (vector-set! call-slot 1 #f)
    (vector-set! call-slot 2 #f)
    (enter-suspendable!)
    (let ((state (loop-state loop)))
      (call-with-values
          (lambda ()
            (if (null? state)
                ((loop-handler loop) request body)
                (apply (loop-handler loop) request body state)))
        (lambda (response body . state)
          (unless (null? state)
            (set-loop-state! loop state))
          (handler-returned loop response body))))))

(define (call-handler loop request body)
  "Return (values response body) from LOOP's handler called with REQUEST
and BODY, with the loop's state updated; on an exception, (values #f #f)
after the backtrace is logged, or (values #f 503) when the watchdog ended
the call (it logs the backtrace after the 503 is sent).  A handler that
waits returns (values suspended SUSPENSION): see `resume-handler'."
  (vector-set! call-slot 1 request)
  (vector-set! call-slot 2 body)
  (run-guarded loop request call-in-slot))

(define (resume-handler loop request k thunk)
  "Resume the handler call of REQUEST that suspended with continuation
K, THUNK giving the values its wait returns (or raising there); return
as `call-handler' does."
  (run-guarded loop request (lambda () (enter-suspendable!) (k thunk))))

(define-inline (serialise! out request response body close?)
  ;; -> (values close? rest): append the answer to OUT; REST is #f, or
  ;; what leaves after OUT's bytes: a bytevector too large to copy, a
  ;; <file-body> or a <takeover>.
  (cond
   ((not (struct? body))
    (write-response! out request response body close?))
   ((file-body? body)
    (values (write-response-head! out request response
                                  (file-body-length body)
                                  close?)
            body))
   ((takeover? body)
    (values (write-response-head! out request response 0 close?) body))
   (else
    (write-response! out request response body close?))))

(define-inline (rest-size rest)
  (cond ((not rest) 0)
        ((bytevector? rest) (bytevector-length rest))
        ((file-body? rest) (file-body-length rest))
        (else 0)))

(define-inline (send-rest! loop conn request rest close?)
  ;; -> close?, or 'takeover
  (cond
   ((not rest) close?)
   ((bytevector? rest) (flush-with-body! loop conn rest) close?)
   ((file-body? rest)
    (if (eq? (request-method request) 'HEAD)
        (close-file-body! rest)
        (flush-with-file! loop conn rest))
    close?)
   (close? close?)
   (else
    (set-connection-takeover! conn rest)
    'takeover)))

(define (respond! loop conn request body)
  "Call LOOP's handler for REQUEST and BODY on CONN and append its answer
to the output buffer.  Return what is to become of CONN, for
`after-respond!' (plucky server http1) to do: #f when it stays open for
the next request, #t when it must close after the answer, 'takeover
when it is to be handed over once the head is sent, 'suspended when the
handler waits (see `suspend-request!'), a <job> to give a thread of the
pool (a stream that blocks: see `hand-off!'), or a <task> whose stream
is to run on the loop (see `run-stream!')."
  (let* ((out (loop-output loop))
         (mark (output-fill out))
         (probe (loop-probe loop))
         ;; Around the handler: the observer's countdown picked this
         ;; request, or START is #f (see `handler-start').
         (start (handler-start probe))
         (allocated (and start (allocation-start probe)))
         (close? (or (not (request-keep-alive? request))
                     (and (loop-drain-deadline loop) #t))))
    (set-loop-serving! loop conn)
    (call-with-values (lambda () (call-handler loop request body))
      (lambda (response response-body)
        (set-loop-serving! loop #f)
        (if (eq? response suspended)
            (begin
              ;; Counted, not timed, when it answers: its read and parse
              ;; times must not be reported as the next request's.
              (when start (forget-timed-request! probe))
              (suspend-request! loop conn request response-body close? start)
              'suspended)
            (let ((handled (and start (clock))))
              (answer! loop conn request response response-body close? mark
                       ;; No closure made without an observer: a hello's
                       ;; allocation (bench/instructions-real).
                       (if (loop-observer loop)
                           (lambda (code bytes)
                             (observe-answer! loop request code bytes
                                              (and handled (- handled start))
                                              (and handled (- (clock) handled))
                                              (and allocated
                                                   (- (gc-total-bytes) allocated))))
                           ignore-answer)
                       (and start #t))))))))

(define (ignore-answer code bytes) #f)

(define (answer! loop conn request response response-body close? mark observe!
                 timed?)
  "Append to LOOP's output buffer (filled up to MARK before it) the answer
of the handler of REQUEST on CONN, RESPONSE and RESPONSE-BODY as
`call-handler' returned them; return as `respond!'.  OBSERVE! is called
as (OBSERVE! code bytes) for a timed answer (TIMED?) or a 5xx."
  (let ((out (loop-output loop))
        (observer (loop-observer loop)))
    (define (fail code)
      ;; CODE: 500, or 503 from the watchdog; HEAD's has no body
      (when (file-body? response-body)
        (close-file-body! response-body))
      (set-output-fill! out mark)
      (write-error-response! out (request-version request) code #f
                             (request-method request))
      (report-response! loop conn request code (- (output-fill out) mark))
      (observe! code (- (output-fill out) mark))
      #t)
    (cond
     ((not response)
      (fail (if (eqv? response-body 503) 503 500)))
     ((streamed-response? response response-body)
      (if (hashq-ref thread-streams response-body #f)
          ;; Sent as it is written, by a thread: see `hand-off!'.
          (make-job #:conn conn #:kind 'stream #:request request #:response response
                    #:body response-body #:close? close?)
          (start-stream! loop conn request response response-body close? mark
                         observe!)))
     (else
      ;; Serialising can fail too (a bad header value, a Content-Length
      ;; that does not match): that is the application's error as well,
      ;; and becomes a 500.
      (call-with-prompt suspend-tag
        (lambda ()
          (set-loop-guarded! loop request)
          (call-with-values
              (lambda ()
                (serialise! out request response response-body close?))
            (lambda (close? rest)
              (set-loop-guarded! loop #f)
              (let ((code (answer-code response)))
                (when (loop-probe loop)
                  (let ((bytes (+ (- (output-fill out) mark) (rest-size rest))))
                    (report-response! loop conn request code bytes)
                    (if (or timed? (>= code 500))
                        (observe! code bytes)
                        (when observer
                          ;; the usual case on a busy server: a count
                          (count-answer! (loop-probe loop) code bytes))))))
              (send-rest! loop conn request rest close?))))
        (lambda (k what request exception stack)
          (report-handler-error request exception #f)
          (fail 500)))))))

;;;
;;; Handlers that wait
;;;

;; A request whose handler suspended: the connection holds it (state
;; suspended) until the wait ends, and the loop's <tasks> holds the
;; tasks whose wait ended, to be resumed at the end of the round.

(define-record-type <task>
  (%make-task conn request close? k token undo started waited wait-kind
              wait-label wait-start cancelled computing stream)
  task?
  (conn task-conn)
  (request task-request)
  (close? task-close?)                   ; close after the answer
  (k task-k set-task-k!)                 ; the continuation, at its last wait
  ;; the current wait's mark: a resume whose mark is not this one is late
  (token task-token set-task-token!)
  ;; thunk: forget the current wait; 'raised once told it is given up
  (undo task-undo set-task-undo!)
  ;; with an observer, clock ns when the handler began (a timed
  ;; request) or first waited (one not timed); else #f
  (started task-started)
  ;; (((kind . label) . ns) …): nanoseconds waited, by what, counted
  ;; when the loop has an observer
  (waited task-waited set-task-waited!)
  (wait-kind task-wait-kind set-task-wait-kind!)
  (wait-label task-wait-label set-task-wait-label!)
  (wait-start task-wait-start set-task-wait-start!) ; clock ns
  ;; #f, or why the request is given up: client-gone | timeout | stopping
  (cancelled task-cancelled set-task-cancelled!)
  ;; ns the handler ran after its first wait
  (computing task-computing set-task-computing!)
  ;; #f, or the <stream> whose body procedure this task runs
  (stream task-stream))

(define-record-type <tasks>
  (%make-tasks ready handler-ms count compute)
  tasks?
  ;; ((task . thunk) …), newest first: waits that ended this round
  (ready tasks-ready set-tasks-ready!)
  (handler-ms tasks-handler-ms)         ; #f, or a request's time limit
  (count tasks-count set-tasks-count!)  ; suspended requests
  ;; #f, or the (plucky server compute) threads of `blocking'
  (compute tasks-compute set-tasks-compute!))

(define* (make-tasks #:key (handler-timeout #f))
  "Return the empty <tasks> of a loop whose requests are given up
HANDLER-TIMEOUT seconds after they first wait (#f: never)."
  (%make-tasks '() (and handler-timeout (> handler-timeout 0)
                        (inexact->exact (round (* 1000 handler-timeout))))
               0 #f))

(define (suspend-request! loop conn request suspension close? started)
  "Keep the handler of REQUEST on CONN, which suspended with SUSPENSION,
until its wait ends; return nothing.  STARTED is the clock ns its handler
began at, when it was timed, else #f.  The connection's state is its
caller's (`after-respond!', plucky server http1)."
  (let* ((tasks (loop-tasks loop))
         (task (or (connection-task conn)
                   (%make-task conn request close? #f #f #f
                               (or started (and (loop-observer loop) (clock)))
                               '() #f #f 0 #f 0 #f))))
    (unless (connection-task conn)
      (set-connection-task! conn task)
      (set-tasks-count! tasks (+ 1 (tasks-count tasks))))
    (await! loop task suspension)))

(define (suspend-stream! loop conn task suspension)
  ;; The body procedure of TASK's stream waits: as `suspend-request!',
  ;; but the connection streams (its output goes on) and no handler
  ;; timeout applies (an event stream may last for hours).
  (unless (connection-task conn)
    (set-connection-task! conn task)
    (let ((tasks (loop-tasks loop)))
      (set-tasks-count! tasks (+ 1 (tasks-count tasks)))))
  (await! loop task suspension))

(define (await! loop task suspension)
  ;; TASK's handler waits as SUSPENSION says: arrange its resumption.
  ;; SUSPENSION, new each wait, is the wait's mark (see `task-token').
  (let ((tasks (loop-tasks loop)))
    (set-task-k! task (suspension-k suspension))
    (set-task-token! task suspension)
    (when (loop-observer loop)
      ;; What the wait is, for the status page: only when it is shown.
      (set-task-wait-kind! task (suspension-kind suspension))
      (set-task-wait-label! task (suspension-label suspension))
      (set-task-wait-start! task (clock)))
    (cond
     ((not (task-cancelled task))
      (set-task-undo!
       task ((suspension-register suspension)
             (lambda (thunk)
               (when (eq? (task-token task) suspension)
                 (set-task-token! task #f)
                 (set-tasks-ready! tasks (cons (cons task thunk)
                                               (tasks-ready tasks))))))))
     ((eq? (task-undo task) 'raised)
      ;; Given up, told so, and waiting again: drop it.
      (set-task-token! task #f)
      (set-tasks-ready! tasks (cons (cons task #f) (tasks-ready tasks))))
     (else
      ;; Given up between the end of its last wait and its running on
      ;; (its client left in the round that resumed it): tell it here,
      ;; so that its handlers release what it holds.
      (set-task-token! task #f)
      (raise-cancelled! tasks task)))))

(define (raise-cancelled! tasks task)
  ;; Resume TASK raising &request-cancelled where it waits, once.
  (let ((reason (task-cancelled task)))
    (set-task-undo! task 'raised)
    (set-tasks-ready!
     tasks
     (cons (cons task
                 (lambda ()
                   (raise-exception
                    (make-exception
                     (make-request-cancelled reason)
                     (make-exception-with-message
                      (format #f "request given up: ~a" reason))))))
           (tasks-ready tasks)))))

(define (note-waited! task now)
  ;; Add the wait that ended at NOW (clock ns) to TASK's account, an
  ;; entry ((kind . label) . ns) per kind and label.
  (let ((kind (task-wait-kind task))
        (label (task-wait-label task))
        (ns (- now (task-wait-start task))))
    (let lp ((entries (task-waited task)))
      (cond
       ((null? entries)
        (set-task-waited! task (acons (cons kind label) ns (task-waited task))))
       ((and (eq? kind (caaar entries)) (equal? label (cdaar entries)))
        (set-cdr! (car entries) (+ ns (cdar entries))))
       (else (lp (cdr entries)))))))

(define (cancel-task! loop task reason)
  "Give up TASK for REASON (client-gone, timeout, stopping): forget its
wait and resume it raising &request-cancelled where it waits, so that
its handler unwinds.  Return nothing."
  (unless (task-cancelled task)
    (set-task-cancelled! task reason)
    ;; Not waiting now (resumed, not yet run): told at its next wait.
    (when (task-token task)
      (set-task-token! task #f)
      (let ((undo (task-undo task)))
        (when (procedure? undo) (undo)))
      (raise-cancelled! (loop-tasks loop) task))))

(define (take-ready-tasks! loop)
  "Return the ((task . thunk) …) whose waits ended, in the order they
ended, and forget them."
  (let* ((tasks (loop-tasks loop))
         (ready (tasks-ready tasks)))
    (set-tasks-ready! tasks '())
    (reverse ready)))

(define (tasks-waiting? loop)
  "Return true when a suspended request of LOOP is ready to resume."
  (pair? (tasks-ready (loop-tasks loop))))

(define (resume-slice loop task thunk)
  ;; Resume TASK's handler or stream body with THUNK (#f: it is dropped),
  ;; counting, when an observer shows it, the wait that ended and the
  ;; time it then runs.  -> as `run-guarded'
  (let ((start (and (loop-observer loop) (clock))))
    (when start (note-waited! task start))
    (call-with-values
        (lambda ()
          (resume-serving loop (task-conn task) (task-request task) (task-k task)
                          thunk))
      (lambda (a b)
        (when start
          (set-task-computing! task (+ (task-computing task) (- (clock) start))))
        (values a b)))))

(define (resume-serving loop conn request k thunk)
  "Resume the handler of REQUEST, on CONN, at its continuation K with
THUNK, LOOP serving CONN meanwhile; THUNK #f drops it: (values #f
cancelled).  -> as `resume-handler'.  HTTP/1's tasks and HTTP/2's
streams (plucky server http2) both resume through here."
  (set-loop-serving! loop conn)
  (call-with-values
      (lambda ()
        (cond
         (thunk (resume-handler loop request k thunk))
         (else
          ;; Dropped where it waits: its body port's descriptors go now,
          ;; whatever its handler did with the errors it was given.
          (when (loop-body-port? loop) (close-request-bodies! request))
          (values #f 'cancelled))))
    (lambda (a b)
      (set-loop-serving! loop #f)
      (values a b))))

(define (resume-task! loop task thunk)
  "Resume TASK's handler with THUNK (see `suspend').  Return (values
suspended #f) when it waits again; else (values response body) as
`call-handler' returns them, the task no longer the connection's."
  (let ((conn (task-conn task)))
    (call-with-values (lambda () (resume-slice loop task thunk))
      (lambda (response body)
        (cond
         ((eq? response suspended)
          (await! loop task body)
          (values suspended #f))
         (else
          (set-connection-task! conn #f)
          (set-task-k! task #f)
          (let ((tasks (loop-tasks loop)))
            (set-tasks-count! tasks (- (tasks-count tasks) 1)))
          (values response body)))))))

;;;
;;; Streamed answers on the loop
;;;

;; A streamed answer (see `streamed-response?'): its body procedure runs
;; on the loop, under the same prompts as a handler, so it may wait
;; (`sleep-ms', `event-wait', …) and suspend; the port it writes to
;; never blocks: each write is framed and queued on the connection,
;; which sends what the socket takes (state streaming: watched for
;; EPOLLOUT while output is queued, for EPOLLRDHUP always).  A client
;; that does not read for the write timeout, or leaves, gives the
;; answer up: the body procedure is resumed raising &request-cancelled
;; where it waits, or raises it from its next write.

(define-record-type <stream>
  (make-stream port framing code close? head sent abandoned? drained body)
  stream?
  (port stream-port set-stream-port!)
  (framing stream-framing)              ; chunked | length | close
  (code stream-code)
  (close? stream-close?)                ; close after the answer
  (head stream-head)                    ; bytes of the head
  (sent stream-sent set-stream-sent!)   ; bytes of the body written
  (abandoned? stream-abandoned? set-stream-abandoned!)
  ;; #f, or a thunk to call once the queued bytes are below the mark
  ;; (`wait-stream-drained')
  (drained stream-drained set-stream-drained!)
  (body stream-body))                   ; the body procedure: port -> _

(define stream-backlog-limit
  ;; bytes: a body procedure that writes faster than its client reads,
  ;; and never waits, is given up past this much queued
  (* 16 1024 1024))

;; The value a stream's task returns when its body procedure is done.
(define stream-done (list 'stream-done))

;; Body procedures to be run on a thread, as before streams suspended
;; (`stream-on-thread'); weak, as `with-body-port''s marks.
(define thread-streams (make-weak-key-hash-table))

(define (stream-on-thread body)
  "Return BODY, a body procedure of a streamed answer, marked to run on a
thread of the worker rather than on its loop: for a body that blocks
(Guile's `sleep', a condition variable, a C call) rather than waiting
with (plucky server suspend)."
  (hashq-set! thread-streams body #t)
  body)

(define (cancelled! reason)
  (raise-exception
   (make-exception (make-request-cancelled reason)
                   (make-exception-with-message
                    (format #f "request given up: ~a" reason)))))

(define (stream-send! loop conn stream)
  ;; Send what CONN has queued, as the socket takes it.  -> #f when the
  ;; client is gone (STREAM is then abandoned), else #t
  (or (not (eq? (connection-state conn) 'streaming))
      (case (send-pending! loop conn)
        ((done)
         (set-connection-deadline! conn never)
         (watch! loop conn EPOLLRDHUP)
         #t)
        ((again)
         (when (= (connection-deadline conn) never)
           (set-deadline! loop conn (settings-write-ms (loop-settings loop))))
         (watch! loop conn (logior EPOLLOUT EPOLLRDHUP))
         #t)
        (else
         (set-stream-abandoned! stream #t)
         (set-connection-pending! conn '())
         #f))))

(define (stream-writable! loop conn)
  "Send the queued output of CONN, which streams, now that its socket
takes more, or give its answer up when the client is gone; return
nothing."
  (let ((task (connection-task conn)))
    (case (send-pending! loop conn)
      ((done)
       (set-connection-deadline! conn never)
       (watch! loop conn EPOLLRDHUP))
      ((again) #t)
      (else
       (when task (cancel-task! loop task 'client-gone))))
    (when task
      (let ((stream (task-stream task)))
        (when (and stream (stream-drained stream)
                   (< (pending-bytes conn) drained-mark))
          (let ((drained (stream-drained stream)))
            (set-stream-drained! stream #f)
            (drained)))))))

(define drained-mark
  ;; bytes: `wait-stream-drained' returns once fewer are queued
  (* 256 1024))

;; The loop's streams by their port, for `wait-stream-drained': port ->
;; (connection . stream).  Each entry is removed when its stream ends
;; (`forget-stream!'): the value holds the stream and the stream its
;; port, and Guile's weak tables are not ephemeron tables, so the weak
;; key alone would never let it go (tests/regress/closed-streams-kept.scm).
;; Weak all the same for the table's lock: a stream on a thread looks
;; its port up too.
(define stream-ports (make-weak-key-hash-table))

(define (forget-stream! stream)
  (hashq-remove! stream-ports (stream-port stream)))

(define (wait-stream-drained port)
  "Wait until fewer than 256 KiB of what was written to PORT, the port of
a streamed answer's body, wait for its client; return nothing.  A body
procedure that copies a large body (a proxy) calls it between writes,
so that it never runs further ahead of its client than that; it
suspends meanwhile.  Elsewhere (a stream on a thread, whose writes wait
for the client themselves) it only flushes PORT."
  (force-output port)
  (let ((entry (hashq-ref stream-ports port)))
    (when (and entry (suspendable?)
               (>= (pending-bytes (car entry)) drained-mark))
      (let ((stream (cdr entry)))
        (suspend 'socket "client"
                 (lambda (resume)
                   (set-stream-drained! stream (lambda () (resume values)))
                   (lambda () (set-stream-drained! stream #f)))))))
  (values))

(define (pending-bytes conn)
  (let lp ((pending (connection-pending conn)) (n 0))
    (if (pair? pending)
        (lp (cdr pending)
            (if (pair? (car pending))
                (+ n (- (cddr (car pending)) (cadr (car pending))))
                n))
        n)))

(define (open-loop-stream loop conn stream encoding length)
  ;; -> the port a body procedure writes STREAM's body to
  (let ((port
         (make-custom-binary-output-port
          "streamed answer"
          (lambda (bv start count)
            (when (and (> count 0) (not (stream-abandoned? stream)))
              (let ((framed
                     (case (stream-framing stream)
                       ((chunked)
                        ;; size line, data and CRLF in one piece: one
                        ;; segment on the wire
                        (let ((chunk (make-bytevector (+ count 24)))
                              (fill 0))
                          (encode-chunk! bv start count
                                         (lambda (piece from n)
                                           (bytevector-copy! piece from chunk fill n)
                                           (set! fill (+ fill n))))
                          (cons* chunk 0 fill)))
                       ((length)
                        (when (> (+ (stream-sent stream) count) length)
                          (error "streamed body longer than its Content-Length" length))
                        (cons* (bytevector-copy-range bv start (+ start count)) 0 count))
                       (else
                        (cons* (bytevector-copy-range bv start (+ start count)) 0 count)))))
                (set-stream-sent! stream (+ (stream-sent stream) count))
                (set-connection-pending! conn (append (connection-pending conn)
                                                      (list framed)))
                (when (> (pending-bytes conn) stream-backlog-limit)
                  (set-stream-abandoned! stream #t)
                  (set-connection-pending! conn '())
                  (cancelled! 'client-gone))
                (unless (stream-send! loop conn stream)
                  (cancelled! 'client-gone))))
            count)
          #f #f
          (lambda ()
            (unless (stream-abandoned? stream)
              (case (stream-framing stream)
                ((chunked)
                 (set-connection-pending! conn (append (connection-pending conn)
                                                       (list (cons* last-chunk 0 5))))
                 (unless (stream-send! loop conn stream)
                   (cancelled! 'client-gone)))
                ((length)
                 (unless (= (stream-sent stream) length)
                   (error "streamed body shorter than its Content-Length"
                          (stream-sent stream) length)))))))))
    (set-port-encoding! port encoding)
    (setvbuf port 'block 16384)
    port))

(define last-chunk (string->utf8 "0\r\n\r\n"))

(define (start-stream! loop conn request response body close? mark observe!)
  ;; Queue the head of a streamed answer.  -> the <task> whose stream
  ;; runs BODY on the loop (see `run-stream!'), or close? when the
  ;; answer has no body
  (let ((out (loop-output loop)))
    (call-with-values (lambda () (write-streamed-head! out request response))
      (lambda (framing head-close?)
        (let ((close? (or close? head-close?))
              (code (answer-code response)))
          (if (eq? framing 'none)
              (begin
                (report-response! loop conn request code (- (output-fill out) mark))
                (observe! code (- (output-fill out) mark))
                close?)
              (let* ((headers (answer-headers response))
                     (type (assq-ref headers 'content-type))
                     (charset (and type (pair? type) (assq-ref (cdr type) 'charset)))
                     (stream (make-stream #f framing code close?
                                          (- (output-fill out) mark) 0 #f #f body))
                     (task (%make-task conn request close? #f #f #f #f
                                       '() #f #f 0 #f 0 stream)))
                (set-stream-port! stream
                                  (open-loop-stream
                                   loop conn stream
                                   (cond ((not charset) "UTF-8")
                                         ((symbol? charset) (symbol->string charset))
                                         (else charset))
                                   (assq-ref headers 'content-length)))
                (hashq-set! stream-ports (stream-port stream) (cons conn stream))
                ;; The head leaves now: an event stream's client waits
                ;; for it before the first event.
                (when (> (output-fill out) 0)
                  (queue-output! loop conn (output-bytes out) 0 (output-fill out))
                  (output-reset! out))
                (observe! code 0)
                task)))))))

(define (run-stream! loop task)
  "Run the body procedure of TASK's stream, whose head is queued on its
connection, which now streams; return as `respond!' what became of the
connection: 'streaming while the body procedure waits."
  (let ((conn (task-conn task))
        (stream (task-stream task)))
    (if (not (stream-send! loop conn stream))
        (begin
          (forget-stream! stream)
          (report-response! loop conn (task-request task) (stream-code stream)
                            (stream-head stream))
          #t)
        (run-stream-body! loop conn (task-request task) task (stream-body stream)))))

(define (run-stream-body! loop conn request task body)
  ;; Call BODY, a streamed answer's procedure, with its port, under the
  ;; handler's prompts.  -> as `respond!'
  (let ((stream (task-stream task)))
    (set-loop-serving! loop conn)
    (call-with-values
        (lambda ()
          (run-guarded loop request
            (lambda ()
              (enter-suspendable!)
              (body (stream-port stream))
              (close-port (stream-port stream))
              (handler-returned loop stream-done #f))))
      (lambda (result suspension)
        (set-loop-serving! loop #f)
        (stream-step! loop conn task result suspension)))))

(define (stream-step! loop conn task result suspension)
  ;; What a stream's body procedure came to: it waits (RESULT is
  ;; `suspended'), it is done, or it failed (#f).  -> as `respond!':
  ;; 'streaming (it waits), 'writing (done, its last bytes queued),
  ;; 'stream-done (done, all sent) or #t (close)
  (let ((stream (task-stream task)))
    (cond
     ((eq? result suspended)
      (suspend-stream! loop conn task suspension)
      'streaming)
     (else
      (forget-stream! stream)
      (when (connection-task conn)
        (set-connection-task! conn #f)
        (let ((tasks (loop-tasks loop)))
          (set-tasks-count! tasks (- (tasks-count tasks) 1))))
      (report-response! loop conn (task-request task) (stream-code stream)
                        (+ (stream-head stream) (stream-sent stream)))
      (cond
       ((or (not (eq? result stream-done)) (task-cancelled task))
        ;; Failed half-way, or given up: the head is out, so all that can
        ;; be said is to stop.  Nothing more may reach the socket.
        (set-stream-abandoned! stream #t)
        (set-connection-pending! conn '())
        #t)
       ((pair? (connection-pending conn))
        ;; The last bytes wait for the socket: as any answer that does.
        (set-connection-close-after! conn (or (stream-close? stream)
                                              (and (loop-drain-deadline loop) #t)))
        'writing)
       ((or (stream-close? stream) (loop-drain-deadline loop)) #t)
       (else 'stream-done))))))

(define (resume-stream! loop task thunk)
  "Resume the body procedure of TASK's stream with THUNK; return as
`respond!' what became of its connection."
  (call-with-values (lambda () (resume-slice loop task thunk))
    (lambda (result suspension)
      (stream-step! loop (task-conn task) task result suspension))))

;;;
;;; Handing a connection to a thread
;;;

(define (hand-off! loop conn job)
  "Give CONN, out of the loop's epoll set, to a thread of LOOP's pool for
JOB, with the answers to requests that came before (pipelined) and are
not sent yet, to be sent first.  Return nothing."
  (let ((out (loop-output loop)))
    (when (> (output-fill out) 0)
      (queue-output! loop conn (output-bytes out) 0 (output-fill out))
      (output-reset! out))
    (set-job-pending! job (connection-pending conn))
    (set-connection-pending! conn '())
    (pool-submit! (or (loop-pool loop)
                      (let* ((settings (loop-settings loop))
                             (pool (make-pool
                                    #:handler (loop-handler loop)
                                    #:write-timeout (/ (settings-write-ms settings) 1000)
                                    #:max-threads (settings-max-threads settings)
                                    #:wake (lambda () (wake! loop)))))
                        (set-loop-pool! loop pool)
                        pool))
                  job (loop-now loop))))

;;;
;;; Telling whoever listens (the access log, the observer)
;;;

(define (report-response! loop conn request code bytes)
  "Tell LOOP's ON-RESPONSE, if any, of an answer of CODE and BYTES to
REQUEST (#f for one that never reached a handler) on CONN; return
nothing."
  (let ((probe (loop-probe loop)))
    (when probe
      (probe-response! probe (connection-peer conn) request code bytes))))

(define (observe-answer! loop request code bytes handler serialise allocated)
  "Count an answer in the tally of LOOP's observer; tell the observer of
it if it was timed (HANDLER and SERIALISE are numbers, not #f), or if it
is a 5xx (see `probe-answer!').  LOOP has an observer.  Return nothing."
  (probe-answer! (loop-probe loop) request code bytes handler serialise allocated))

;;; (plucky server respond) ends here
