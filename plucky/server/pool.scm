;;; (plucky server pool) --- threads for streamed answers that block

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A streamed answer (see `streamed-response?' in (plucky http
;;; response)) whose body procedure blocks (`stream-on-thread') cannot be
;;; sent from the loop.  The loop hands such a connection to a thread of
;;; its pool, as a job: out of the epoll set, state
;;; 'handed-off, no deadline (the thread has its own time-outs).  The
;;; thread (`run-job!') reads and writes the socket with (plucky server
;;; stream), then gives the connection back through the pool's done list
;;; and wakes the loop, which reports the answer and serves, closes or
;;; lingers as the job's outcome says ((plucky server loop)'s
;;; `job-done!').  A thread never closes a descriptor.  The common case
;;; never gets here: bench/hello is what it was.  (Request bodies read as
;;; ports do not either: `with-body-port' is here, but its handler runs
;;; on the loop, with (plucky server stream)'s body pipe.)
;;;
;;; Threads start as jobs wait and none is idle, up to the settings'
;;; max-threads; past that, jobs queue, and the loop answers 503 to one
;;; that waited longer than the body time-out.  A thread idle for a
;;; minute ends.
;;;
;;; Code:

(define-module (plucky server pool)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module ((srfi srfi-9 gnu) #:select (set-record-type-printer!))
  #:use-module ((srfi srfi-1) #:select (partition))
  #:use-module (ice-9 match)
  #:use-module ((ice-9 exceptions) #:select (exception-kind exception-args))
  #:use-module (web request)
  ;; Threads serve only handed-off connections: loaded when one is.
  #:autoload (ice-9 threads) (make-mutex make-condition-variable lock-mutex
                              unlock-mutex call-with-new-thread
                              signal-condition-variable wait-condition-variable
                              broadcast-condition-variable)
  #:use-module (plucky http response)
  ;; Loaded by the first connection handed to a thread (bench/startup).
  #:autoload (plucky server stream) (body-pipe? call-with-body-pipe
                                     write-all! open-stream-writer
                                     connection-lost?)
  #:use-module (plucky server connection)
  #:export (with-body-port
            body-port-handler?
            with-connect
            connect-handler?
            thread-connection
            report-handler-error
            make-job
            ;; Procedures, not the record's macros: see <job>.
            (%job? . job?) (%job-conn . job-conn) (%job-kind . job-kind)
            (%job-request . job-request) (%job-pending . job-pending)
            (%set-job-pending! . set-job-pending!)
            (%job-outcome . job-outcome) (%job-code . job-code)
            (%job-bytes . job-bytes) (%job-failure . job-failure)
            make-pool
            pool-submit!
            take-done-jobs!
            take-expired-jobs!
            stop-pool!))


;;;
;;; Handlers that read bodies from ports
;;;

(define (with-body-port handler)
  "Return a handler that is HANDLER but receives each request body that
is not empty as an input port rather than a bytevector: it reads what it
wants (Content-Length and chunked framing decoded, \"100 Continue\" sent
when it first reads), and the body's unread bytes are never buffered.
The handler runs on the worker's loop as any other; while it reads a
body that has not arrived it suspends, and the worker serves other
requests (plucky server stream, docs/waiting.md)."
  (let ((wrapped (case-lambda
                   ((request body)
                    (if (body-pipe? body)
                        (call-with-body-pipe handler request body '())
                        (handler request body)))
                   ((request body . state)
                    (if (body-pipe? body)
                        (call-with-body-pipe handler request body state)
                        (apply handler request body state))))))
    (hashq-set! body-port-handlers wrapped #t)
    (when (connect-handler? handler)    ; keeps with-connect's mark
      (hashq-set! connect-handlers wrapped #t))
    wrapped))

;; The handlers `with-body-port' made.  Not a procedure property: asking
;; a compiled procedure for its properties parses its debugging
;; information and loads (system vm debug) and the ELF and DWARF readers,
;; which put a collection back into plucky's start-up
;; (bench/startup-instructions).
(define body-port-handlers (make-weak-key-hash-table))

(define (body-port-handler? handler)
  "Return true when HANDLER was made by `with-body-port'."
  (hashq-ref body-port-handlers handler #f))

;; CONNECT.  A 2xx to CONNECT tells the client its tunnel is open
;; (RFC 9110 §9.3.6), and what it sends next is the tunnel's, not HTTP:
;; an app that never meant to tunnel must not answer it.  So CONNECT is
;; refused (501, close) before any handler sees it, unless the app says
;; it handles it.  Either way the connection closes after the answer
;; (`request-keep-alive?').

(define (with-connect handler)
  "Return HANDLER, marked as one that answers CONNECT requests itself;
plucky refuses CONNECT (501) for any other handler."
  (hashq-set! connect-handlers handler #t)
  handler)

;; The handlers `with-connect' marked (weak: see `body-port-handlers').
(define connect-handlers (make-weak-key-hash-table))

(define (connect-handler? handler)
  "Return true when HANDLER was marked by `with-connect'."
  (hashq-ref connect-handlers handler #f))

;; The connection a thread serves, for `current-request-peer' and
;; `current-request-scheme'.
(define thread-connection (make-thread-local-fluid #f))

;;;
;;; Reporting a handler's failure (from the loop's thread or a pool's)
;;;

(define backtrace-budget
  ;; Full backtraces per second; past that, one line each.  A client that
  ;; can make a handler fail must not make the worker spend its time
  ;; printing stacks.
  10)
(define backtrace-second 0)
(define backtraces-this-second 0)

(define (backtrace-allowed?)
  (let ((now (current-time)))
    (unless (= now backtrace-second)
      (set! backtrace-second now)
      (set! backtraces-this-second 0))
    (set! backtraces-this-second (+ 1 backtraces-this-second))
    (<= backtraces-this-second backtrace-budget)))

(define (report-handler-error request exception stack)
  "Log to the current error port that the handler of REQUEST raised
EXCEPTION, with the backtrace of STACK (if not #f, and at most ten a
second); return nothing."
  ;; Printing must not fail in turn: a broken printer would otherwise
  ;; take the worker down.
  (let ((port (current-error-port))
        (stack (and stack (backtrace-allowed?) stack)))
    (false-if-exception
     (format port "plucky: handler failed on ~a ~a~%"
             (request-method request)
             (let ((uri (request-uri request)))
               (if uri ((@ (web uri) uri->string) uri) ""))))
    (when stack
      ;; The 30 innermost frames: the handler's, not the loop's.
      (false-if-exception (display-backtrace stack port 0 30)))
    ;; The message can hold any value the application handed over, a
    ;; request body for one: a client must not be able to fill the log.
    (false-if-exception
     (let ((text (call-with-output-string
                   (lambda (out)
                     (print-exception out #f (exception-kind exception)
                                      (exception-args exception))))))
       (if (> (string-length text) 2000)
           (begin
             (display (substring text 0 2000) port)
             (format port "... (~a more characters)~%" (- (string-length text) 2000)))
           (display text port))))
    (force-output port)))

;;;
;;; Jobs
;;;

;; Private to this module, as <pool> is; the loop reads a job once, when
;; the thread is done with it, through the procedures below.
(define-record-type <job>
  (%make-job conn kind request response body close? pending
             outcome code bytes queued failure)
  job?
  (conn job-conn)
  (kind job-kind)                 ; stream: send BODY
  (request job-request)
  (response job-response)         ; the handler's answer
  (body job-body)                 ; the body procedure
  (close? job-close?)             ; close after the answer, whatever it says
  (pending job-pending set-job-pending!) ; earlier answers to send first
  ;; Set by the thread: keep | close | linger; the status sent (#f if
  ;; none); bytes sent.
  (outcome job-outcome set-job-outcome!)
  (code job-code set-job-code!)
  (bytes job-bytes set-job-bytes!)
  (queued job-queued set-job-queued!)   ; the loop's ms it was queued
  ;; #f, or (exception . stack) when the application failed
  (failure job-failure set-job-failure!))

(define (%job? object) "Return true when OBJECT is a job." (job? object))
(define (%job-conn job) "Return the connection of JOB." (job-conn job))
(define (%job-kind job) "Return the kind of JOB: stream." (job-kind job))
(define (%job-request job) "Return the request JOB answers." (job-request job))
(define (%job-pending job)
  "Return the answers to earlier requests JOB sends first."
  (job-pending job))
(define (%set-job-pending! job pending)
  "Make PENDING the answers JOB sends first."
  (set-job-pending! job pending))
(define (%job-outcome job)
  "Return what becomes of JOB's connection: keep, close or linger."
  (job-outcome job))
(define (%job-code job) "Return the status JOB sent, or #f." (job-code job))
(define (%job-bytes job) "Return the bytes JOB sent." (job-bytes job))
(define (%job-failure job)
  "Return #f, or (exception . stack) when JOB's handler failed."
  (job-failure job))

(set-record-type-printer! <job>
  (lambda (job port)
    (format port "#<job ~a ~a>" (job-kind job) (job-conn job))))

(define* (make-job #:key conn (kind 'stream) request response body close?)
  "Return a job for a pool thread: answer REQUEST on CONN, sending
RESPONSE and BODY, a body procedure (KIND 'stream, the only kind).
CLOSE? closes the connection after the answer whatever it says."
  (%make-job conn kind request response body close? '() 'close #f 0 0 #f))

;;;
;;; The pool
;;;

;; Private to this module, read through the procedures below.
(define-record-type <pool>
  (%make-pool mutex condition jobs done threads idle stopping? handler
              write-timeout max-threads wake)
  pool?
  (mutex pool-mutex)
  (condition pool-condition)             ; signalled when a job is queued
  (jobs pool-jobs set-pool-jobs!)        ; waiting for a thread, oldest first
  (done pool-done set-pool-done!)        ; finished, for the loop
  (threads pool-threads set-pool-threads!) ; started
  (idle pool-idle set-pool-idle!)        ; waiting for a job
  (stopping? pool-stopping? set-pool-stopping!)
  (handler pool-handler)                 ; the loop's handler
  (write-timeout pool-write-timeout)     ; seconds
  (max-threads pool-max-threads)
  (wake pool-wake))                      ; thunk: make the loop look at done

(define* (make-pool #:key handler write-timeout max-threads wake)
  "Return an empty pool of threads that answer jobs with HANDLER, at most
MAX-THREADS at once, giving up a write after WRITE-TIMEOUT seconds
without progress; each finished job is put on the done list and WAKE,
a thunk, called."
  (%make-pool (make-mutex) (make-condition-variable) '() '() 0 0 #f handler
              write-timeout max-threads wake))

(define (pool-submit! pool job now)
  "Queue JOB, at NOW (ms, the loop's clock), for a thread of POOL,
starting one if every thread is busy; return nothing."
  (set-job-queued! job now)
  (lock-mutex (pool-mutex pool))
  (set-pool-jobs! pool (append (pool-jobs pool) (list job)))
  ;; A thread signalled for an earlier job counts as idle until it
  ;; wakes: compare the jobs waiting with the threads idle, not the idle
  ;; with 0, or a second job can wait behind a stalled first one
  ;; (found by tests/fuzz with port-app.scm).
  (when (and (> (length (pool-jobs pool)) (pool-idle pool))
             (< (pool-threads pool) (pool-max-threads pool)))
    (set-pool-threads! pool (+ 1 (pool-threads pool)))
    (call-with-new-thread (lambda () (pool-thread pool))))
  (signal-condition-variable (pool-condition pool))
  (unlock-mutex (pool-mutex pool)))

(define thread-idle-seconds
  ;; A thread with nothing to do for this long ends: each holds a stack
  ;; and two descriptors (Guile's per-thread wake-up pipe).
  60)

(define (pool-thread pool)
  (let next ()
    (lock-mutex (pool-mutex pool))
    (let wait ((deadline (+ (current-time) thread-idle-seconds)))
      (when (and (null? (pool-jobs pool)) (not (pool-stopping? pool))
                 (< (current-time) deadline))
        (set-pool-idle! pool (+ 1 (pool-idle pool)))
        (wait-condition-variable (pool-condition pool) (pool-mutex pool) deadline)
        (set-pool-idle! pool (- (pool-idle pool) 1))
        (wait deadline)))
    (if (or (pool-stopping? pool) (null? (pool-jobs pool)))
        (begin
          (set-pool-threads! pool (- (pool-threads pool) 1))
          ;; `stop-pool!' waits for the count to reach 0.
          (broadcast-condition-variable (pool-condition pool))
          (unlock-mutex (pool-mutex pool)))
        (let ((job (car (pool-jobs pool))))
          (set-pool-jobs! pool (cdr (pool-jobs pool)))
          (unlock-mutex (pool-mutex pool))
          (run-job! pool job)
          (lock-mutex (pool-mutex pool))
          (set-pool-done! pool (cons job (pool-done pool)))
          (unlock-mutex (pool-mutex pool))
          ((pool-wake pool))
          (next)))))

(define (take-done-jobs! pool)
  "Return the jobs of POOL that threads finished since the last call,
oldest first."
  (lock-mutex (pool-mutex pool))
  (let ((done (reverse (pool-done pool))))
    (set-pool-done! pool '())
    (unlock-mutex (pool-mutex pool))
    done))

(define (take-expired-jobs! pool oldest)
  "Remove from POOL's queue the jobs queued before OLDEST (ms, the loop's
clock) and return them, oldest first."
  (if (null? (pool-jobs pool))
      '()
      (begin
        (lock-mutex (pool-mutex pool))
        (call-with-values
            (lambda () (partition (lambda (job) (> (job-queued job) oldest))
                                  (pool-jobs pool)))
          (lambda (waiting expired)
            (set-pool-jobs! pool waiting)
            (unlock-mutex (pool-mutex pool))
            expired)))))

(define (stop-pool! pool)
  "Make POOL's threads end once their jobs do, and wait up to two seconds
for them; return nothing."
  ;; The caller has shut down the sockets under them: their reads and
  ;; writes fail at once.  A handler still computing after that finds
  ;; its descriptor closed.
  (lock-mutex (pool-mutex pool))
  (set-pool-stopping! pool #t)
  (broadcast-condition-variable (pool-condition pool))
  (let ((deadline (+ (current-time) 2)))
    (let wait ()
      (when (and (> (pool-threads pool) 0) (< (current-time) deadline))
        (wait-condition-variable (pool-condition pool) (pool-mutex pool) deadline)
        (wait))))
  (unlock-mutex (pool-mutex pool)))

;;;
;;; On a thread: answering a job
;;;

(define (call-caught thunk)
  ;; -> (#t value ...) or (#f exception stack): THUNK's values, or what
  ;; it raised and where.
  (let ((tag (make-prompt-tag "job")))
    (call-with-prompt tag
      (lambda ()
        (with-exception-handler
            (lambda (exception)
              (abort-to-prompt tag exception (make-stack #t 3)))
          (lambda ()
            (call-with-values thunk (lambda values (cons #t values))))))
      (lambda (k exception stack)
        (list #f exception stack)))))

(define (run-job! pool job)
  ;; On a pool thread: send JOB's streamed answer on its connection.
  ;; Sets the job's outcome; never closes the descriptor, never raises.
  (let* ((conn (job-conn job))
         (out-fd (connection-out-fd conn))
         (timeout (pool-write-timeout pool))
         (request (job-request job)))
    (define (send! bv start count)
      (write-all! out-fd bv start count timeout (connection-transport conn))
      (set-job-bytes! job (+ (job-bytes job) count)))
    (define (send-output! out)
      (send! (output-bytes out) 0 (output-fill out)))
    (define (answer! response body)
      ;; -> outcome; raises on the application's errors
      (let ((out (make-output 1024)))
        (call-with-values (lambda () (write-streamed-head! out request response))
          (lambda (framing head-close?)
            (set-job-code! job (answer-code response))
            (send-output! out)
            (unless (eq? framing 'none)
              (stream-body! job send! out-fd timeout response body framing))
            (if (or (job-close? job) head-close?) 'close 'keep)))))
    (define (failed exception stack)
      (unless (connection-lost? exception)
        (report-handler-error request exception stack)
        (set-job-failure! job (cons exception stack))
        (unless (job-code job)
          ;; The head could not be made: a 500, if the client still reads.
          (let ((out (make-output 512)))
            (write-error-response! out (request-version request) 500 #f
                                   (request-method request) #f)
            (set-job-code! job 500)
            (call-caught (lambda () (send-output! out))))))
      ;; Once the head is out, all that can be said is to stop.
      (set-job-outcome! job 'close))
    (fluid-set! thread-connection conn)
    (match (call-caught
            (lambda ()
              (for-each (match-lambda ((bv start . end) (send! bv start (- end start))))
                        (job-pending job))
              (set-job-pending! job '())
              (answer! (job-response job) (job-body job))))
      ((#t outcome)
       (set-job-outcome! job outcome))
      ((#f exception stack)
       (failed exception stack)))
    (fluid-set! thread-connection #f)))

(define (stream-body! job send! out-fd timeout response body framing)
  ;; Call the body procedure with a port that sends as it is written.
  (let* ((headers (answer-headers response))
         (type (assq-ref headers 'content-type))
         (charset (and type (assq-ref (cdr type) 'charset))))
    (call-with-values
        (lambda ()
          (open-stream-writer out-fd framing #:timeout timeout
                              #:transport (connection-transport (job-conn job))
                              #:length (assq-ref headers 'content-length)
                              #:encoding (cond ((not charset) "UTF-8")
                                               ((symbol? charset) (symbol->string charset))
                                               (else charset))))
      (lambda (port abandon!)
        (with-exception-handler
            (lambda (exception)
              ;; Nothing more may reach the socket, from the port's buffer
              ;; or its close (the last chunk would say the answer is
              ;; whole).
              (abandon!)
              (raise-exception exception))
          (lambda () (body port)))
        (close-port port)))))

;;; (plucky server pool) ends here
