;;; (tests lib server) --- start a real server, talk to it over raw sockets

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Server tests run the real thing: `start-server' forks a child that
;;; calls (plucky server)'s `run-server' on port 0 and tells the parent,
;;; through a pipe, which port the kernel picked.  The parent talks to it
;;; with raw sockets through a <client>, which keeps the bytes it has
;;; received but not yet consumed, so that one test can read a response,
;;; then another, then check that nothing else came and the peer closed.
;;;
;;; Every wait is bounded: reads go through `select' with a deadline, the
;;; port arrives within `start-timeout' seconds or the child is killed,
;;; and `stop-server' sends SIGTERM, then SIGKILL if the child has not
;;; exited within `stop-timeout' seconds.  Only processes started here
;;; are signalled, by PID.
;;;
;;; The child's standard error (the server's log: "listening on …",
;;; backtraces of failing handlers) goes to a temporary file that
;;; `server-log' reads and `stop-server' deletes.
;;;
;;; Code:

(define-module (tests lib server)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-11)
  #:use-module (rnrs bytevectors)
  #:use-module (ice-9 binary-ports)
  #:use-module (ice-9 exceptions)
  #:use-module (ice-9 iconv)
  #:use-module (ice-9 match)
  #:use-module (ice-9 rdelim)
  #:use-module (system foreign)
  #:use-module (web request)
  #:use-module (web response)
  #:use-module ((plucky http) #:select (bytevector-concatenate))
  #:export (start-child
            start-server
            stop-server
            server?
            server-pid
            server-port
            server-log
            server-alive?
            kill-survivors
            child-pids
            wait-for-child-pids
            wait-until
            call-with-server

            free-port
            wait-for-port

            connect-client
            client?
            client-socket
            client-send!
            client-read-response
            client-error
            client-read-responses
            client-read-until-close
            exchange-until-close
            client-eof?
            client-close!
            client-pending
            set-client-pending!
            receive-some!
            find-head-end
            sub-bytevector
            utf8->string*
            process-status-field
            process-peak-rss
            with-client

            http-get
            send-requests
            read-responses
            get-all
            request-text
            response-header-lines
            reply-body-string

            spawn
            nginx-program
            start-nginx
            process-pid
            process-stdout
            process-stderr
            process-wait
            process-stop
            read-line-before
            read-all-before

            now-seconds))

;; A peer that closes while we write must give EPIPE, not kill the tests:
;; sends pass MSG_NOSIGNAL rather than ignore SIGPIPE.  This process must
;; not call `sigaction' at all: that starts Guile's signal-delivery
;; thread, which a forked child does not inherit, while the child still
;; believes it runs, so the server's own SIGTERM handler would never be
;; called.  (At load time `sigaction' also deadlocks with the module
;; loader.)
(define MSG_NOSIGNAL #x4000)            ; Linux

(define (now-seconds)
  (/ (get-internal-real-time) internal-time-units-per-second))

;; Wait until PORT-OR-FD is readable or DEADLINE (now-seconds) passes.
;; -> #t when readable
(define (readable-before? port-or-fd deadline)
  (let lp ()
    (let* ((remaining (max 0 (- deadline (now-seconds))))
           (secs (inexact->exact (floor remaining)))
           (usecs (inexact->exact (floor (* 1000000 (- remaining secs))))))
      (match (catch 'system-error
               (lambda () (select (list port-or-fd) '() '() secs usecs))
               (lambda args
                 (if (= EINTR (system-error-errno args))
                     'again
                     (apply throw args))))
        ('again (lp))
        ((r _ _) (or (pair? r) (and (< (now-seconds) deadline) (lp))))))))

(define (writable-before? port deadline)
  (let lp ()
    (let* ((remaining (max 0 (- deadline (now-seconds))))
           (secs (inexact->exact (floor remaining)))
           (usecs (inexact->exact (floor (* 1000000 (- remaining secs))))))
      (match (catch 'system-error
               (lambda () (select '() (list port) '() secs usecs))
               (lambda args
                 (if (= EINTR (system-error-errno args))
                     'again
                     (apply throw args))))
        ('again (lp))
        ((_ w _) (or (pair? w) (and (< (now-seconds) deadline) (lp))))))))

;;;
;;; Child processes
;;;

(define-record-type <server>
  (%make-server pid port log-file status)
  server?
  (pid server-pid)
  (port server-port)
  (log-file server-log-file)
  ;; #f while running; the exit status once reaped
  (status server-status set-server-status!))

(define (make-server pid port log-file)
  (%make-server pid port log-file #f))

(define start-timeout 20)
(define stop-timeout 5)

;; Client sockets opened in this process; a forked child closes them so
;; that it does not hold other servers' connections open.
(define open-clients (make-weak-key-hash-table))

(define (temporary-log-file)
  (let ((port (mkstemp! (string-copy
                         (string-append (or (getenv "TMPDIR") "/tmp")
                                        "/plucky-test-server-XXXXXX")))))
    (let ((name (port-filename port)))
      (close-port port)
      name)))

(define prctl
  (pointer->procedure int (dynamic-func "prctl" (dynamic-link))
                      (list int unsigned-long unsigned-long unsigned-long unsigned-long)))
(define PR_SET_PDEATHSIG 1)

(define (exit-with-parent! parent)
  ;; Linux: have the kernel send SIGTERM to this child when the test
  ;; process dies, so that a test file that dies before `stop-server'
  ;; leaves no server behind.  PARENT is the test process's PID, checked
  ;; after the call in case it died before.
  (prctl PR_SET_PDEATHSIG SIGTERM 0 0 0)
  (unless (= (getppid) parent)
    (primitive-exit 1)))

(define (in-child log-file parent thunk)
  ;; Never returns: runs THUNK with stderr going to LOG-FILE, then exits.
  (catch #t
    (lambda ()
      (exit-with-parent! parent)
      (hash-for-each (lambda (port _) (unless (port-closed? port) (close-port port)))
                     open-clients)
      (let ((log (open-file log-file "a")))
        (setvbuf log 'line)
        ;; Standard output too: a child that outlives the tests must not
        ;; hold the pipe tests/run reads.
        (dup2 (port->fdes log) 1)
        (dup2 (port->fdes log) 2)
        (set-current-output-port log)
        (set-current-error-port log)
        ;; A safety net: a child the tests failed to stop dies anyway.
        (alarm 900)
        ;; As under a service manager: no terminal, so no COLUMNS (Guile's
        ;; backtrace printer reads it), whatever shell ran the tests.
        (unsetenv "COLUMNS")
        (unsetenv "LINES")
        (with-exception-handler
            (lambda (e)
              (format log "test child: uncaught exception: ~s~%" e)
              (display-backtrace (make-stack #t) log)
              (force-output log)
              (primitive-exit 70))
          thunk
          #:unwind? #f)
        (force-output log)))
    (lambda args #f))
  (primitive-exit 0))

(define* (start-child thunk #:key (timeout start-timeout))
  "Fork a child that calls (THUNK REPORT), where REPORT is a procedure
the child calls with the TCP port it listens on, and return a <server>
for it once REPORT has been called.  Raise an error, after killing the
child, if REPORT is not called within TIMEOUT seconds."
  (let* ((channel (pipe))
         (log-file (temporary-log-file))
         (parent (getpid)))
    (flush-all-ports)
    (let ((pid (primitive-fork)))
      (if (zero? pid)
          (begin
            (close-port (car channel))
            (in-child log-file parent
                      (lambda ()
                        (thunk (lambda (port)
                                 (write port (cdr channel))
                                 (newline (cdr channel))
                                 (close-port (cdr channel)))))))
          (begin
            (close-port (cdr channel))
            (let* ((line (and (readable-before? (car channel) (+ (now-seconds) timeout))
                              (read-line (car channel))))
                   (port (and (string? line) (string->number line))))
              (close-port (car channel))
              (unless port
                (false-if-exception (kill pid SIGKILL))
                (false-if-exception (waitpid pid))
                (let ((log (read-file log-file)))
                  (delete-file log-file)
                  (error "test server did not report its port" pid log)))
              (make-server pid port log-file)))))))

(define* (start-server handler #:key (host "127.0.0.1") (workers 1) (settings #f)
                       (state '()) (options '()))
  "Start (plucky server)'s `run-server' with HANDLER in a child process,
listening on HOST and a port the kernel picks; return a <server> whose
`server-port' is that port once the server listens.  OPTIONS are more
keyword arguments for `run-server' (#:handler-timeout 1)."
  (let ((run-server (module-ref (resolve-interface '(plucky server)) 'run-server))
        (listener-port (module-ref (resolve-interface '(plucky server)) 'listener-port)))
    (start-child
     (lambda (report)
       (apply run-server handler
              #:host host #:port 0 #:workers workers #:state state
              #:on-listen (lambda (sockets) (report (listener-port (car sockets))))
              (append options
                      (if settings (list #:settings settings) '())))))))

(define (read-file file)
  (if (file-exists? file)
      (call-with-input-file file (lambda (port) (read-delimited "" port)))
      ""))

(define (server-log server)
  "Return what SERVER's process has written to its standard error so far."
  (let ((text (read-file (server-log-file server))))
    (if (eof-object? text) "" text)))

(define (process-status-field pid name)
  "Return the value of field NAME (\"VmRSS\", \"SigIgn\"…) of
/proc/PID/status as a string, without the name and the blanks around it,
or #f if the process or the field is not there."
  (let ((file (string-append "/proc/" (number->string pid) "/status"))
        (prefix (string-append name ":")))
    (false-if-exception
     (call-with-input-file file
       (lambda (port)
         (let lp ()
           (let ((line (read-line port)))
             (cond
              ((eof-object? line) #f)
              ((string-prefix? prefix line)
               (string-trim-both (substring line (string-length prefix))))
              (else (lp))))))))))

(define (process-peak-rss pid)
  "Return the peak resident set size of process PID in KiB (VmHWM), or #f
if it cannot be read."
  (let ((value (process-status-field pid "VmHWM")))
    (and value (string->number (car (string-tokenize value))))))

(define (server-alive? server)
  "Return #t if SERVER's process has not exited."
  (and (not (server-status server))
       (match (waitpid (server-pid server) WNOHANG)
         ((0 . _) #t)
         ((_ . status) (set-server-status! server status) #f))))

(define (wait-for-exit pid timeout)
  ;; -> status, or #f if PID is still running after TIMEOUT seconds.
  ;; Polls: waitpid has no timeout of its own.
  (let ((deadline (+ (now-seconds) timeout)))
    (let lp ()
      (match (waitpid pid WNOHANG)
        ((0 . _)
         (and (< (now-seconds) deadline)
              (begin (usleep 10000) (lp))))
        ((_ . status) status)))))

(define (terminate pid)
  ;; SIGTERM, then SIGKILL when the process outlives stop-timeout.
  ;; -> (values status killed?)
  (false-if-exception (kill pid SIGTERM))
  (let ((status (wait-for-exit pid stop-timeout)))
    (if status
        (values status #f)
        (begin
          (false-if-exception (kill pid SIGKILL))
          (values (cdr (waitpid pid)) #t)))))

(define (stop-server server)
  "Stop SERVER with SIGTERM (SIGKILL if it has not exited within
`stop-timeout' seconds) and return two values: its exit status and
whether it had to be killed.  Deletes its log unless PLUCKY_TEST_KEEP_LOGS
is set."
  (let-values (((status killed?) (if (server-status server)
                                      (values (server-status server) #f)
                                      (terminate (server-pid server)))))
    (set-server-status! server status)
    (if (getenv "PLUCKY_TEST_KEEP_LOGS")
        (format (current-error-port) "server log: ~a~%" (server-log-file server))
        (false-if-exception (delete-file (server-log-file server))))
    (values status killed?)))

(define (child-pids pid)
  "Return the PIDs of the live children of process PID (from /proc)."
  (let ((dir (opendir "/proc")))
    (let lp ((found '()))
      (let ((entry (readdir dir)))
        (cond
         ((eof-object? entry) (closedir dir) found)
         ((and (string->number entry)
               (false-if-exception
                (call-with-input-file (string-append "/proc/" entry "/stat") read-line)))
          => (lambda (stat)
               ;; "PID (COMM) STATE PPID ...": COMM may hold spaces and parens
               (let* ((fields (string-tokenize
                               (substring stat (+ 1 (string-rindex stat #\))))))
                      (ppid (string->number (cadr fields))))
                 (lp (if (and (eqv? ppid pid) (not (string=? (car fields) "Z")))
                         (cons (string->number entry) found)
                         found)))))
         (else (lp found)))))))

(define* (wait-until thunk #:key (timeout 10) (interval 0.01))
  "Call THUNK until it returns true or TIMEOUT seconds pass; return its
last value."
  (let ((deadline (+ (now-seconds) timeout)))
    (let lp ()
      (or (thunk)
          (and (< (now-seconds) deadline)
               (begin (usleep (inexact->exact (round (* interval 1e6))))
                      (lp)))))))

(define* (wait-for-child-pids pid n #:key (timeout 10))
  "Return the PIDs of the live children of process PID (`child-pids') once
there are at least N, or after TIMEOUT seconds, whichever comes first.  A
master forks its workers one after the other, some once the first is
ready: a count taken at once may be short."
  (or (wait-until (lambda ()
                    (let ((pids (child-pids pid)))
                      (and (>= (length pids) n) pids)))
                  #:timeout timeout)
      (child-pids pid)))

(define (kill-survivors pids)
  "Kill with SIGKILL those of PIDS (processes the tests started, such as
a server's workers) that still exist; return the list of them."
  (filter (lambda (pid)
            (and (false-if-exception (kill pid 0))
                 (begin (false-if-exception (kill pid SIGKILL)) #t)))
          (delete-duplicates pids)))

(define (call-with-server handler proc . args)
  "Start a server for HANDLER (ARGS as for `start-server'), call PROC with
it, and stop it however PROC exits.  Return PROC's values."
  (let ((server (apply start-server handler args)))
    (dynamic-wind
      (lambda () #t)
      (lambda () (proc server))
      (lambda () (stop-server server)))))

;;;
;;; Ports
;;;

(define (free-port)
  "Return a TCP port on 127.0.0.1 that was free a moment ago."
  (let ((sock (socket AF_INET SOCK_STREAM 0)))
    (bind sock AF_INET INADDR_LOOPBACK 0)
    (let ((port (sockaddr:port (getsockname sock))))
      (close-port sock)
      port)))

(define* (wait-for-port port #:key (host "127.0.0.1") (timeout start-timeout))
  "Poll until a connection to HOST:PORT succeeds, for at most TIMEOUT
seconds.  Return #t, or #f when it never did."
  (let ((deadline (+ (now-seconds) timeout)))
    (let lp ()
      (let ((client (false-if-exception (connect-client port #:host host))))
        (cond
         (client (client-close! client) #t)
         ((> (now-seconds) deadline) #f)
         (else (usleep 20000) (lp)))))))

;;;
;;; Clients
;;;

(define-record-type <client>
  (%make-client socket pending eof? error)
  client?
  (socket client-socket)
  ;; bytes received and not yet consumed
  (pending client-pending set-client-pending!)
  ;; #f, #t once the peer closed, or 'reset
  (eof? client-eof-seen set-client-eof-seen!)
  ;; #f, or a message: what came was not a response
  (error client-error set-client-error!))

(define (make-client socket pending eof?)
  (%make-client socket pending eof? #f))

(define* (connect-client port #:key (host "127.0.0.1") (receive-buffer #f))
  "Return a <client> connected to HOST (an IPv4 or IPv6 address) and PORT.
RECEIVE-BUFFER, if given, is the SO_RCVBUF size to ask for, set before
connecting so that the TCP window is sized by it: a small one makes the
server's writes to this client partial."
  (let* ((family (if (string-index host #\:) AF_INET6 AF_INET))
         (sock (socket family SOCK_STREAM 0)))
    (when receive-buffer
      (setsockopt sock SOL_SOCKET SO_RCVBUF receive-buffer))
    ;; A refused connection closes its socket here, not in a finalizer
    ;; later: a test counting its sockets would see it go (the nginx
    ;; group of tests/web/client.scm, after wait-for-port's tries).
    (with-exception-handler
        (lambda (e) (close-port sock) (raise-exception e))
      (lambda () (connect sock family (inet-pton family host) port)))
    (hashq-set! open-clients sock #t)
    (make-client sock #vu8() #f)))

(define (client-close! client)
  "Close CLIENT's socket."
  (unless (port-closed? (client-socket client))
    (close-port (client-socket client))))

(define (with-client port proc . args)
  "Connect to PORT (ARGS as for `connect-client'), call PROC with the
client and close it afterwards.  Return PROC's values."
  (let ((client (apply connect-client port args)))
    (dynamic-wind
      (lambda () #t)
      (lambda () (proc client))
      (lambda () (client-close! client)))))

(define* (client-send! client data #:key (timeout 10))
  "Send DATA (a string, sent as UTF-8, or a bytevector) in full.  Return
the number of bytes sent, or #f if the peer stopped reading or closed
before all were sent within TIMEOUT seconds."
  (let* ((bv (if (string? data) (string->utf8 data) data))
         (sock (client-socket client))
         (deadline (+ (now-seconds) timeout)))
    (let lp ((start 0))
      (cond
       ((= start (bytevector-length bv)) start)
       ((not (writable-before? sock deadline)) #f)
       (else
        (let ((n (catch 'system-error
                   (lambda ()
                     (send sock
                           (if (zero? start)
                               bv
                               (let ((rest (make-bytevector (- (bytevector-length bv) start))))
                                 (bytevector-copy! bv start rest 0 (bytevector-length rest))
                                 rest))
                           MSG_NOSIGNAL))
                   (lambda args #f))))
          (and n (lp (+ start n)))))))))

(define (receive-some! client deadline)
  ;; Append what arrives before DEADLINE to the pending bytes.  -> #t if
  ;; anything came, 'eof when the peer closed, #f when time ran out.
  (let ((sock (client-socket client)))
    (cond
     ((client-eof-seen client) 'eof)
     ((not (readable-before? sock deadline)) #f)
     (else
      (let* ((buf (make-bytevector 65536))
             (n (catch 'system-error
                  (lambda () (recv! sock buf))
                  (lambda args
                    (if (= (system-error-errno args) ECONNRESET) 'reset (apply throw args))))))
        (cond
         ((eq? n 'reset) (set-client-eof-seen! client 'reset) 'eof)
         ((zero? n) (set-client-eof-seen! client #t) 'eof)
         (else
          (let ((got (make-bytevector n)))
            (bytevector-copy! buf 0 got 0 n)
            (set-client-pending! client (bytevector-concatenate (list (client-pending client) got)))
            #t))))))))

(define (find-head-end bv start)
  ;; -> index just past the first CRLF CRLF at or after START, or #f
  (let ((n (bytevector-length bv)))
    (let lp ((i start))
      (cond
       ((> (+ i 4) n) #f)
       ((and (= 13 (bytevector-u8-ref bv i)) (= 10 (bytevector-u8-ref bv (+ i 1)))
             (= 13 (bytevector-u8-ref bv (+ i 2))) (= 10 (bytevector-u8-ref bv (+ i 3))))
        (+ i 4))
       (else (lp (+ i 1)))))))

(define (sub-bytevector bv start end)
  (let ((out (make-bytevector (- end start))))
    (bytevector-copy! bv start out 0 (- end start))
    out))

(define (split-response bv head?)
  ;; -> (values response body rest) for a complete response at the start
  ;; of BV, or #f.  Its body is Content-Length bytes (none for HEAD or
  ;; when the code forbids one).
  (let ((head-end (find-head-end bv 0)))
    (and head-end
         (let* ((response (catch #t
                            (lambda ()
                              (read-response
                               (open-bytevector-input-port (sub-bytevector bv 0 head-end))))
                            (lambda args
                              (raise-exception
                               (make-exception
                                (make-unparsable-response-error)
                                (make-exception-with-message
                                 "test client: the bytes where a response head should start do not parse")
                                (make-exception-with-irritants
                                 (list (utf8->string* (sub-bytevector bv 0 (min 80 head-end))))))))))
                (code (response-code response))
                (length (if (or head? (<= 100 code 199) (= code 204) (= code 304))
                            0
                            (or (response-content-length response)
                                (error "test client: response without Content-Length"
                                       response)))))
           (and (<= (+ head-end length) (bytevector-length bv))
                (values response
                        (sub-bytevector bv head-end (+ head-end length))
                        (sub-bytevector bv (+ head-end length) (bytevector-length bv))))))))

(define-exception-type &unparsable-response &error
  make-unparsable-response-error
  unparsable-response-error?)

(define (utf8->string* bv)
  ;; for messages: bytes as text, whatever they are
  (bytevector->string bv "ISO-8859-1"))

(define* (client-read-response client #:key (head? #f) (timeout 10))
  "Read one response from CLIENT.  Return two values, the <response> and
its body as a bytevector, or #f and #f when no complete response arrived
within TIMEOUT seconds or before the peer closed, or when the bytes that
came are not a response head (then `client-error' says so)."
  (let ((deadline (+ (now-seconds) timeout)))
    (let lp ()
      (call-with-values
          (lambda ()
            (with-exception-handler
                (lambda (e)
                  (set-client-error! client
                                     (format #f "~a: ~s" (exception-message e)
                                             (exception-irritants e)))
                  #f)
              (lambda () (split-response (client-pending client) head?))
              #:unwind? #t
              #:unwind-for-type &unparsable-response))
        (case-lambda
          ((response body rest)
           (set-client-pending! client rest)
           (values response body))
          ((nothing)
           (if (and (not (client-error client))
                    (eq? #t (receive-some! client deadline)))
               (lp)
               (values #f #f))))))))

(define* (client-read-responses client n #:key (timeout 10))
  "Read N responses from CLIENT within TIMEOUT seconds in all.  Return a
list of (response . body) pairs, shorter than N if the time ran out or
the peer closed."
  (let ((deadline (+ (now-seconds) timeout)))
    (let lp ((i 0) (acc '()))
      (if (= i n)
          (reverse acc)
          (call-with-values
              (lambda ()
                (client-read-response client
                                      #:timeout (max 0 (- deadline (now-seconds)))))
            (lambda (response body)
              (if response
                  (lp (+ i 1) (cons (cons response body) acc))
                  (reverse acc))))))))

(define* (client-read-until-close client #:key (timeout 10))
  "Read from CLIENT until the peer closes or TIMEOUT seconds pass.
Return two values: every byte not yet consumed, and #t if the peer
closed (or 'reset if it reset the connection), #f if the time ran out."
  (let ((deadline (+ (now-seconds) timeout)))
    (let lp ()
      (case (receive-some! client deadline)
        ((#t) (lp))
        (else
         (let ((bytes (client-pending client)))
           (set-client-pending! client #vu8())
           (values bytes (client-eof-seen client))))))))

(define (exchange-until-close port text)
  "Send TEXT on a new connection to PORT and read until the server closes
it (10 seconds at most).  Return two values: what came back as a string
(\"\" if nothing), and what `client-read-until-close' says of the close."
  (with-client port
    (lambda (client)
      (client-send! client text)
      (let-values (((bytes closed?) (client-read-until-close client #:timeout 10)))
        (values (if (bytevector? bytes) (utf8->string bytes) "") closed?)))))

(define* (client-eof? client #:key (timeout 5))
  "Return #t if the peer closes (or resets) within TIMEOUT seconds
without sending anything more than what is already pending; #f if more
bytes come or the time runs out."
  (let ((before (bytevector-length (client-pending client))))
    (let-values (((bytes closed?) (client-read-until-close client #:timeout timeout)))
      (set-client-pending! client bytes)
      (and closed? (= before (bytevector-length bytes)) #t))))

;;;
;;; Requests and responses
;;;

(define* (request-text path #:key (method "GET") (version "1.1") (host "localhost")
                       (headers '()) (body #f))
  "Return the text of a request for PATH.  HEADERS is a list of header
lines without CRLF.  A Content-Length line is added when BODY is a
string."
  (string-append method " " path " HTTP/" version "\r\n"
                 (if host (string-append "Host: " host "\r\n") "")
                 (string-concatenate (map (lambda (h) (string-append h "\r\n")) headers))
                 (if body
                     (string-append "Content-Length: "
                                    (number->string (bytevector-length (string->utf8 body)))
                                    "\r\n")
                     "")
                 "\r\n"
                 (or body "")))

;; Concurrent requests: each GET on a connection of its own, all sent
;; before any is read, so that the server has them all at once.
(define (send-requests port paths)
  "Send a GET of each of PATHS to 127.0.0.1:PORT, each on a new
connection, and return the clients, in order, without reading."
  (map (lambda (path)
         (let ((client (connect-client port)))
           (client-send! client (request-text path))
           client))
       paths))

(define* (read-responses clients #:key (timeout 10))
  "Read a response from each of CLIENTS, in order, closing each; return
the (code . body-string) of each, or #f for a client answered nothing
within TIMEOUT seconds."
  (map (lambda (client)
         (call-with-values (lambda () (client-read-response client #:timeout timeout))
           (lambda (response body)
             (client-close! client)
             (and response (cons (response-code response) (utf8->string body))))))
       clients))

(define* (get-all port paths #:key (timeout 10))
  "GET each of PATHS concurrently (see `send-requests'); return the
(code . body-string) of each, in order, #f for one not answered."
  (read-responses (send-requests port paths) #:timeout timeout))

(define* (http-get port path #:key (host "127.0.0.1") (timeout 10))
  "GET PATH from 127.0.0.1:PORT (or HOST) on a new connection.  Return
(values response body-bytevector), or #f #f."
  (with-client port
    (lambda (client)
      (client-send! client (request-text path))
      (client-read-response client #:timeout timeout))
    #:host host))

(define (response-header-lines bv)
  "Return the header lines (without CRLF) of the response head at the
start of the bytevector BV, status line first."
  (let* ((end (or (find-head-end bv 0) (bytevector-length bv)))
         (text (utf8->string (sub-bytevector bv 0 end))))
    (filter (lambda (l) (not (string-null? l)))
            (map (lambda (l) (string-trim-right l #\return))
                 (string-split text #\newline)))))

(define (reply-body-string reply)
  "Return the body of REPLY, a (response . body) pair, as a UTF-8 string."
  (utf8->string (cdr reply)))

;;;
;;; Other processes (bin/plucky, curl, nginx)
;;;

(define-record-type <process>
  (make-process pid stdout stderr)
  process?
  (pid process-pid)
  (stdout process-stdout)                       ; input port on its stdout
  (stderr process-stderr))                      ; input port on its stderr

(define* (spawn program args #:key (environment #f))
  "Start PROGRAM with ARGS (a list of strings, without argv[0]), its
standard input from /dev/null; return a <process> with ports on its
standard output and standard error."
  (let ((out (pipe))
        (err (pipe))
        (parent (getpid)))
    (flush-all-ports)
    (let ((pid (primitive-fork)))
      (if (zero? pid)
          (catch #t
            (lambda ()
              ;; Survives exec: the command dies with the tests too.
              (exit-with-parent! parent)
              (let ((null (open-input-file "/dev/null")))
                (dup2 (port->fdes null) 0))
              (dup2 (port->fdes (cdr out)) 1)
              (dup2 (port->fdes (cdr err)) 2)
              (if environment
                  (apply execle program environment program args)
                  (apply execlp program program args)))
            (lambda args (primitive-exit 127)))
          (begin
            (close-port (cdr out))
            (close-port (cdr err))
            (make-process pid (car out) (car err)))))))

(define* (read-line-before port deadline)
  "Read one line from PORT, giving up at DEADLINE (`now-seconds').
Return the line without its newline, the end-of-file object, or #f when
the time ran out first."
  (let lp ((chars '()))
    (if (not (readable-before? port deadline))
        #f
        (let ((c (read-char port)))
          (cond
           ((eof-object? c) (if (null? chars) c (list->string (reverse chars))))
           ((char=? c #\newline) (list->string (reverse chars)))
           (else (lp (cons c chars))))))))

(define (read-all-before port deadline)
  "Read what PORT gives until its end or DEADLINE (`now-seconds'); return
it as a string, its lines joined by newlines."
  (let lp ((lines '()))
    (let ((line (read-line-before port deadline)))
      (if (string? line)
          (lp (cons line lines))
          (string-join (reverse lines) "\n")))))

(define* (process-wait process #:key (timeout 10))
  "Wait at most TIMEOUT seconds for PROCESS to exit; return its status,
or #f if it is still running (then it is left running)."
  (wait-for-exit (process-pid process) timeout))

(define (process-stop process)
  "Stop PROCESS with SIGTERM, then SIGKILL; close its ports.  Return two
values: its exit status and whether it had to be killed."
  (let-values (((status killed?) (terminate (process-pid process))))
    (close-port (process-stdout process))
    (close-port (process-stderr process))
    (values status killed?)))

(define (nginx-program)
  "Return the path of Debian's nginx, or #f when it is not installed."
  (or (search-path (parse-path (getenv "PATH")) "nginx")
      (and (file-exists? "/usr/sbin/nginx") "/usr/sbin/nginx")))

(define (start-nginx dir)
  "Start nginx (`nginx-program') on a free port of 127.0.0.1, serving
DIR/www (made here, with static.txt, 50,000 bytes), /hello (\"hello from
nginx\") and /moved (a 302 to /hello), its configuration and every file
it writes in DIR.  Return (values process port), PORT #f when it did not
listen within 20 seconds."
  (define (file name) (string-append dir "/" name))
  (let ((port (free-port)))
    (mkdir (file "www"))
    (call-with-output-file (file "www/static.txt")
      (lambda (out) (display (make-string 50000 #\n) out)))
    (call-with-output-file (file "nginx.conf")
      (lambda (out)
        (format out "daemon off;
master_process off;
worker_processes 1;
pid ~a/nginx.pid;
error_log ~a/error.log;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path ~a/body; proxy_temp_path ~a/proxy;
  fastcgi_temp_path ~a/fastcgi; uwsgi_temp_path ~a/uwsgi; scgi_temp_path ~a/scgi;
  types { text/plain txt; }
  server {
    listen 127.0.0.1:~a;
    root ~a/www;
    location = /hello { default_type text/plain; return 200 \"hello from nginx\"; }
    location = /moved { return 302 /hello; }
  }
}
" dir dir dir dir dir dir dir port dir)))
    (let ((process (spawn (nginx-program) (list "-p" dir "-c" (file "nginx.conf")))))
      (values process (and (wait-for-port port #:timeout 20) port)))))

;;; (tests lib server) ends here
