;;; tests/server/suspend.scm --- handlers that wait without holding their worker
;;;
;;; Over real sockets, one worker: handlers that sleep, wait for a
;;; descriptor, an event, a channel or a compute thread suspend, and the
;;; worker serves others meanwhile; dynamic state survives; a handler
;;; that raises after resuming is a 500; pipelined requests behind a
;;; suspended one are answered in order; a client that leaves, and the
;;; handler timeout, give the request up and unwind it; a drain waits for
;;; suspended requests; descriptors come back to their level after.

(use-modules (srfi srfi-64)
             (srfi srfi-1)
             (srfi srfi-71)
             (rnrs bytevectors)
             (ice-9 binary-ports)
             (ice-9 textual-ports)
             (ice-9 exceptions)
             (srfi srfi-11)
             (ice-9 format)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (tests lib server)
             (ice-9 regex)
             (plucky server)
             ((plucky server watch) #:select (loop-registered-count))
             (plucky web password))

(define (path-of request) (uri-path (request-uri request)))
(define (query-of request) (or (uri-query (request-uri request)) ""))

(define (text . parts)
  (values '((content-type . (text/plain))) (string-concatenate parts)))

;; A pipe made before the server forks: /wait-fd waits on its read end,
;; /poke writes to its write end.
(define poke-pipe (pipe))

;; Where the handler says it was given up (the child's only way to tell
;; the test): a file named by the query.
(define cancel-dir (mkdtemp (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-suspend-XXXXXX")))

(define a-parameter (make-parameter 'outside))
(define a-fluid (make-fluid 'outside))
(define the-event (make-event))
(define the-channel (make-channel))

;; Requests waiting on the event or the channel, for the test to know
;; they are in before it signals.
(define waiting 0)
(define-syntax-rule (counted-wait expression)
  (begin
    (set! waiting (+ waiting 1))
    (let ((value expression))
      (set! waiting (- waiting 1))
      value)))

(define (nonblocking! fd)
  (fcntl fd F_SETFL (logior O_NONBLOCK (fcntl fd F_GETFL))))

(define (epoll-has? fd)
  ;; True when an epoll set of this process (the worker's loop) has FD:
  ;; the kernel's own list, /proc/self/fdinfo of each eventpoll.
  (let ((line (make-regexp (format #f "^tfd: +~a " fd) regexp/newline)))
    (any (lambda (entry)
           (let ((link (false-if-exception (readlink (string-append "/proc/self/fd/" entry)))))
             (and link (string-contains link "eventpoll")
                  (regexp-exec line (call-with-input-file
                                        (string-append "/proc/self/fdinfo/" entry)
                                      get-string-all)))))
         (scandir* "/proc/self/fd"))))

;; The read end of a pipe whose wait /hold gave up, left open by its
;; owner: its descriptor and port.
(define held #f)

(define (handler request body)
  (let ((path (path-of request)))
    (cond
     ((string=? path "/owner-closes")
      ;; A socket waited on, then given up by its owner.
      (let* ((pair (socketpair AF_UNIX SOCK_STREAM 0))
             (fd (port->fdes (car pair))))
        (nonblocking! fd)
        (put-u8 (cdr pair) 1)
        (force-output (cdr pair))
        (let* ((ready? (wait-readable fd #:timeout-ms 2000))
               (kept? (epoll-has? fd)))
          (get-u8 (car pair))
          (release-descriptor! fd)
          (let ((after? (epoll-has? fd)))
            (close-port (car pair))
            (close-port (cdr pair))
            (text (format #f "~a ~a ~a" ready? (and kept? #t) (and after? #t)))))))
     ((string=? path "/reused")
      ;; A socket waited on and closed by an owner that did not say so,
      ;; its file kept open by a dup; its number then names another
      ;; socket.  Only the new socket may wake a wait on that number.
      (let* ((a (socketpair AF_UNIX SOCK_STREAM 0))
             (fd (port->fdes (car a)))
             (dup (dup->fdes (car a))))
        (nonblocking! fd)
        (put-u8 (cdr a) 1)
        (force-output (cdr a))
        (let ((first? (wait-readable fd #:timeout-ms 2000)))
          (get-u8 (car a))
          (close-port (car a))
          (let* ((b (socketpair AF_UNIX SOCK_STREAM 0))
                 ;; the lowest number free is FD's: dup2 when not
                 (own? (= fd (port->fdes (car b)))))
            (unless own? (dup2 (port->fdes (car b)) fd))
            (nonblocking! fd)
            ;; the old socket readable again: its number is not its own
            (put-u8 (cdr a) 2)
            (force-output (cdr a))
            (let ((stale? (wait-readable fd #:timeout-ms 300)))
              (put-u8 (cdr b) 3)
              (force-output (cdr b))
              (let ((fresh? (wait-readable fd #:timeout-ms 2000)))
                (release-descriptor! fd)
                (unless own? (close-fdes fd))
                (close-fdes dup)
                (for-each close-port (list (cdr a) (car b) (cdr b)))
                (text (format #f "~a ~a ~a" first? stale? fresh?))))))))
     ((string=? path "/timed-waits")
      ;; A wait with a long time-out answered at once, then short ones
      ;; that time out: each in its own time, not the first one's.
      (let* ((p (pipe))
             (fd (port->fdes (car p))))
        (nonblocking! fd)
        (put-u8 (cdr p) 1)
        (force-output (cdr p))
        (let* ((long? (wait-readable fd #:timeout-ms 60000))
               (_ (get-u8 (car p)))
               (start (get-internal-real-time))
               (short? (wait-readable fd #:timeout-ms 100))
               (again? (wait-readable fd #:timeout-ms 100))
               (ms (quotient (- (get-internal-real-time) start) 1000000)))
          (release-descriptor! fd)
          (close-port (car p))
          (close-port (cdr p))
          (text (format #f "~a ~a ~a ~a" long? short? again?
                        (if (< 190 ms 700) "in time" ms))))))
     ((string=? path "/hold")
      ;; Waits on a pipe nobody writes to, until the handler timeout
      ;; gives it up; the pipe stays open, as a pool's socket would.
      (let ((p (pipe)))
        (nonblocking! (car p))
        (set! held p)
        (wait-readable (port->fdes (car p)))
        (text "not given up")))
     ((string=? path "/held")
      (let ((registered? (epoll-has? (port->fdes (car held)))))
        (close-port (car held))
        (close-port (cdr held))
        (text (format #f "~a" (and registered? #t)))))
     ((string=? path "/registered")
      (text (number->string (loop-registered-count))))
     ((string=? path "/sleep")
      (sleep-ms (string->number (query-of request)))
      (text "slept " (query-of request)))
     ((string=? path "/hello")
      (text "hello"))
     ((string=? path "/dynamic")
      (let ((entered 0))
        (parameterize ((a-parameter 'inside))
          (with-fluids ((a-fluid "inside too"))
            (dynamic-wind
              (lambda () (set! entered (+ entered 1)))
              (lambda ()
                (sleep-ms 20)
                (sleep-ms 20)
                (text (format #f "~a ~a ~a" (a-parameter) (fluid-ref a-fluid) entered)))
              (lambda () #f))))))
     ((string=? path "/caught")
      (with-exception-handler
          (lambda (e) (text "caught: " (exception-message e)))
        (lambda ()
          (sleep-ms 10)
          (raise-exception (make-exception-with-message "after the wait")))
        #:unwind? #t))
     ((string=? path "/raise")
      (sleep-ms 10)
      (error "raised after resuming"))
     ((string=? path "/wait-fd")
      (let* ((fd (port->fdes (car poke-pipe)))
             (ready? (wait-readable fd #:timeout-ms (string->number (query-of request)))))
        (if ready?
            (text "ready " (string (integer->char (get-u8 (car poke-pipe)))))
            (text "timed out"))))
     ((string=? path "/poke")
      (put-u8 (cdr poke-pipe) (char->integer #\x))
      (force-output (cdr poke-pipe))
      (text "poked"))
     ((string=? path "/event-wait")
      (text (format #f "~a" (counted-wait
                             (event-wait the-event
                                         #:timeout-ms (string->number (query-of request))
                                         #:default 'none)))))
     ((string=? path "/waiting")
      (text (number->string waiting)))
     ((string=? path "/event-signal")
      (text (number->string (event-signal! the-event (query-of request)))))
     ((string=? path "/channel-get")
      (text (format #f "~a" (counted-wait
                             (channel-get the-channel
                                          #:timeout-ms (string->number (query-of request))
                                          #:default 'none)))))
     ((string=? path "/channel-put")
      (channel-put! the-channel (query-of request))
      (text "put"))
     ((string=? path "/blocking")
      (let ((a b (blocking (lambda () (usleep 200000) (values 1 2)))))
        (text (format #f "~a ~a" a b))))
     ((string=? path "/blocking-raise")
      (guard (e ((exception-with-message? e) (text "thread raised: " (exception-message e))))
        (blocking (lambda ()
                    (raise-exception (make-exception-with-message "in the thread"))))))
     ((string=? path "/events")
      ;; N events, 20 ms apart, each flushed: an event stream on the loop.
      (let ((n (string->number (query-of request))))
        (values '((content-type . (text/event-stream)))
                (lambda (port)
                  (let lp ((i 1))
                    (when (<= i n)
                      (format port "data: ~a\n\n" i)
                      (force-output port)
                      (sleep-ms 20)
                      (lp (+ i 1))))))))
     ((string=? path "/endless")
      ;; An event a 10 ms until the client leaves; says how it ended.
      (values '((content-type . (text/event-stream)))
              (lambda (port)
                (guard (e ((request-cancelled? e)
                           (call-with-output-file (string-append cancel-dir "/endless")
                             (lambda (out) (display (request-cancelled-reason e) out)))
                           (raise-exception e)))
                  (let lp ()
                    (display "data: tick\n\n" port)
                    (force-output port)
                    (sleep-ms 10)
                    (lp))))))
     ((string=? path "/big-stream")
      ;; 4 MB in 64 KB writes, faster than a slow client reads.
      (values '((content-type . (text/plain)) (transfer-encoding . ((chunked))))
              (lambda (port)
                (let ((piece (make-bytevector 65536 (char->integer #\a))))
                  (let lp ((i 0))
                    (when (< i 64)
                      (put-bytevector port piece)
                      (lp (+ i 1))))))))
     ((string=? path "/flood")
      ;; N MB in 64 KB writes, waiting for the client when DRAIN? says.
      (let* ((query (query-of request))
             (drain? (string-prefix? "drain" query))
             (mb (string->number (substring query (if drain? 5 0)))))
        (values '((content-type . (text/plain)) (transfer-encoding . ((chunked))))
                (lambda (port)
                  (let ((piece (make-bytevector 65536 (char->integer #\a))))
                    (let lp ((i 0))
                      (when (< i (* 16 mb))
                        (put-bytevector port piece)
                        (when drain? (wait-stream-drained port))
                        (lp (+ i 1)))))))))
     ((string=? path "/thread-stream")
      ;; A body that blocks (Guile's own sleep) runs on a thread.
      (values '((content-type . (text/event-stream)))
              (stream-on-thread
               (lambda (port)
                 (usleep 50000)
                 (display "data: from a thread\n\n" port)))))
     ((string=? path "/hash")
      ;; Argon2id on a compute thread (plucky web password).
      (text (if (verify-password (hash-password "pw") "pw") "verified" "no")))
     ((string=? path "/suspendable")
      (text (if (suspendable?) "yes" "no")))
     ((string=? path "/resumed-then-gone")
      ;; Waits on the FIFO cancel-dir/fifo, then sleeps: records its
      ;; cancellation's reason in cancel-dir/resumed-gone.
      (let ((fifo (open (string-append cancel-dir "/fifo") (logior O_RDONLY O_NONBLOCK))))
        (call-with-output-file (string-append cancel-dir "/a-waiting")
          (lambda (port) (display "yes" port)))
        (guard (e ((request-cancelled? e)
                   (close-port fifo)
                   (call-with-output-file (string-append cancel-dir "/resumed-gone")
                     (lambda (port) (display (request-cancelled-reason e) port)))
                   (raise-exception e)))
          (wait-readable (port->fdes fifo))
          (sleep-ms 2000)
          (close-port fifo)
          (text "not given up"))))
     ((string=? path "/hold-the-loop")
      ;; Holds the worker's loop for 300 ms, not suspending.
      (call-with-output-file (string-append cancel-dir "/holding")
        (lambda (port) (display "yes" port)))
      (usleep 300000)
      (text "held"))
     ((string=? path "/given-up")
      ;; Records its cancellation's reason in the file named by the query.
      (guard (e ((request-cancelled? e)
                 (call-with-output-file (string-append cancel-dir "/" (query-of request))
                   (lambda (port) (display (request-cancelled-reason e) port)))
                 (raise-exception e)))
        (sleep-ms 5000)
        (text "not given up")))
     (else
      (values (build-response #:code 404) "")))))

(define (descriptors pid)
  (length (scandir* (format #f "/proc/~a/fd" pid))))

(define (scandir* dir)
  (let ((stream (opendir dir)))
    (let lp ((acc '()))
      (let ((entry (readdir stream)))
        (if (eof-object? entry)
            (begin (closedir stream) acc)
            (lp (if (member entry '("." "..")) acc (cons entry acc))))))))

(define (get port path)
  (let ((response body (http-get port path)))
    (and response (cons (response-code response) (utf8->string body)))))

(define (file-text file)
  ;; -> FILE's text, or #f while it is missing or empty: the server
  ;; creates it, then writes it
  (and (file-exists? file)
       (let ((text (call-with-input-file file (lambda (port) (get-string-all port)))))
         (and (not (string-null? text)) text))))

(test-runner-current (plucky-test-runner))
(test-begin "server/suspend")

(define server (start-server handler #:options '(#:handler-timeout 1)))
(define port (server-port server))

(test-group "sleeping handlers do not hold the worker"
  (let* ((start (now-seconds))
         (replies (get-all port (make-list 10 "/sleep?100")))
         (took (- (now-seconds) start)))
    (test-equal "ten answered" (make-list 10 '(200 . "slept 100")) replies)
    ;; One after another they would take a second.
    (test-assert (format #f "ten 100 ms sleeps on one worker in ~,3f s < 0.5 s" took)
      (< took 0.5)))
  (let* ((start (now-seconds))
         (sleeper (connect-client port)))
    (client-send! sleeper (request-text "/sleep?300"))
    (test-equal "hello answered while another request sleeps"
      '(200 . "hello") (get port "/hello"))
    (test-assert "before the sleeper" (< (- (now-seconds) start) 0.25))
    (let ((response body (client-read-response sleeper)))
      (test-equal "the sleeper answers after" "slept 300" (utf8->string body)))
    (client-close! sleeper)))

(test-group "dynamic state survives"
  (test-equal "parameterize, fluids, dynamic-wind re-entered"
    '(200 . "inside inside too 3") (get port "/dynamic"))
  (test-equal "the handler's exception handler catches after resuming"
    '(200 . "caught: after the wait") (get port "/caught"))
  (test-equal "a handler that raises after resuming: 500"
    500 (car (get port "/raise")))
  (test-equal "and the worker serves on" '(200 . "hello") (get port "/hello"))
  (test-assert "the backtrace is logged"
    (wait-until (lambda () (string-contains (server-log server) "raised after resuming"))
                #:timeout 5))
  (test-equal "suspendable? in a handler" '(200 . "yes") (get port "/suspendable")))

(test-group "pipelined requests behind a suspended one"
  (with-client port
    (lambda (client)
      (client-send! client (string-append (request-text "/sleep?50")
                                          (request-text "/hello")
                                          (request-text "/sleep?10")))
      (let ((replies (client-read-responses client 3)))
        (test-equal "in order" '("slept 50" "hello" "slept 10")
                    (map reply-body-string replies))))))

(test-group "waiting for a descriptor"
  (let ((waiter (connect-client port)))
    (client-send! waiter (request-text "/wait-fd?3000"))
    (test-equal "another request pokes" '(200 . "poked") (get port "/poke"))
    (let ((response body (client-read-response waiter)))
      (test-equal "the waiter wakes" "ready x" (and body (utf8->string body))))
    (client-close! waiter))
  (let ((start (now-seconds)))
    (test-equal "its time-out" '(200 . "timed out") (get port "/wait-fd?100"))
    (test-assert "after about 100 ms" (< 0.09 (- (now-seconds) start) 0.6))))

(test-group "events and channels"
  (let ((waiters (map (lambda (i)
                        (let ((client (connect-client port)))
                          (client-send! client (request-text "/event-wait?3000"))
                          client))
                      (iota 3))))
    (test-assert "three wait"
      (wait-until (lambda () (equal? (get port "/waiting") '(200 . "3"))) #:timeout 5))
    (test-equal "the signal wakes the three" '(200 . "3") (get port "/event-signal?news"))
    (for-each (lambda (client)
                (let ((response body (client-read-response client)))
                  (test-equal "each gets the value" "news" (and body (utf8->string body))))
                (client-close! client))
              waiters))
  (test-equal "an event's time-out" '(200 . "none") (get port "/event-wait?50"))
  (test-equal "a value put first" '(200 . "put") (get port "/channel-put?one"))
  (test-equal "is taken at once" '(200 . "one") (get port "/channel-get?1000"))
  (let ((getter (connect-client port)))
    (client-send! getter (request-text "/channel-get?3000"))
    (test-assert "one waits"
      (wait-until (lambda () (equal? (get port "/waiting") '(200 . "1"))) #:timeout 5))
    (test-equal "a put" '(200 . "put") (get port "/channel-put?two"))
    (let ((response body (client-read-response getter)))
      (test-equal "with its value" "two" (and body (utf8->string body))))
    (client-close! getter))
  (test-equal "a channel's time-out" '(200 . "none") (get port "/channel-get?50")))

(test-group "compute threads"
  (let* ((start (now-seconds))
         (replies (get-all port (make-list 5 "/blocking")))
         (took (- (now-seconds) start)))
    (test-equal "five answered" (make-list 5 '(200 . "1 2")) replies)
    (test-assert (format #f "five 200 ms thread calls in ~,3f s < 0.6 s" took)
      (< took 0.6)))
  (let ((hasher (connect-client port)))
    (client-send! hasher (request-text "/hash"))
    (test-equal "hello answers while a password is hashed"
      '(200 . "hello") (get port "/hello"))
    (test-assert "before the hash" (null? (car (select (list (client-socket hasher)) (list) (list) 0))))
    (let ((response body (client-read-response hasher)))
      (test-equal "the hash is verified" "verified" (and body (utf8->string body))))
    (client-close! hasher))
  (test-equal "what the thread raised is raised in the handler"
    '(200 . "thread raised: in the thread") (get port "/blocking-raise")))

(test-group "streamed answers on the loop"
  (with-client port
    (lambda (client)
      (client-send! client (request-text "/events?5"))
      (let ((response body (client-read-response client #:head? #t)))
        (test-equal "an event stream's head" 200 (and response (response-code response))))
      (let ((text bytes (let-values (((bytes closed?)
                                      (client-read-until-close client #:timeout 1)))
                          (values (utf8->string* bytes) bytes))))
        (test-assert "its five events, chunked" 
          (every (lambda (i) (string-contains text (format #f "data: ~a" i))) (iota 5 1))))))
  (let* ((start (now-seconds))
         (streams (map (lambda (i)
                         (let ((client (connect-client port)))
                           (client-send! client (request-text "/events?10"))
                           client))
                       (iota 20))))
    (test-equal "hello answered while 20 streams run" '(200 . "hello") (get port "/hello"))
    (for-each client-close! streams))
  (let ((client (connect-client port)))
    (client-send! client (request-text "/endless"))
    (let ((response body (client-read-response client #:head? #t)))
      (test-equal "an endless stream starts" 200 (and response (response-code response))))
    (client-close! client)
    (test-assert "the client leaves: the stream is unwound"
      (wait-until (lambda () (file-text (string-append cancel-dir "/endless"))) #:timeout 5))
    (test-equal "as client-gone" "client-gone" (file-text (string-append cancel-dir "/endless"))))
  (with-client port
    (lambda (client)
      (client-send! client (request-text "/big-stream" #:version "1.0"))
      (let-values (((bytes closed?) (client-read-until-close client #:timeout 10)))
        (test-assert "4 MB through a close-delimited stream, whole"
          (and (eq? closed? #t)
               (let ((end (find-head-end bytes 0)))
                 (and end (= (- (bytevector-length bytes) end) (* 4 1024 1024)))))))))
  (with-client port
    (lambda (client)
      (client-send! client (request-text "/thread-stream"))
      (let-values (((bytes closed?) (client-read-until-close client #:timeout 1)))
        (test-assert "stream-on-thread: a blocking body on a thread"
          (string-contains (utf8->string* bytes) "data: from a thread"))))))

(define (count-until-close port text)
  ;; Send TEXT on a new connection to PORT; -> the bytes that came back
  ;; before the server closed (HTTP/1.0: it closes after the body), or
  ;; #f after 20 s.  A slow client: a small receive buffer, and nothing
  ;; read for the first half second (the server's writes pile up); then
  ;; 64 KB at a time, counting only.
  (let ((s (socket PF_INET SOCK_STREAM 0))
        (buf (make-bytevector 65536))
        (deadline (+ (now-seconds) 20)))
    (setsockopt s SOL_SOCKET SO_RCVBUF 4096)
    (connect s AF_INET (inet-pton AF_INET "127.0.0.1") port)
    (put-bytevector s (string->utf8 text))
    (force-output s)
    (usleep 500000)
    (let lp ((total 0))
      (let ((left (- deadline (now-seconds))))
        (if (<= left 0)
            (begin (close-port s) #f)
            (let ((ready (select (list s) '() '() (inexact->exact (floor left))
                                 (inexact->exact (floor (* 1e6 (- left (floor left))))))))
              (if (null? (car ready))
                  (lp total)
                  (let ((n (catch 'system-error
                             (lambda () (recv! s buf))
                             (lambda _ 0))))
                    (if (<= n 0)
                        (begin (close-port s) total)
                        (lp (+ total n)))))))))))

(test-group "a stream waits for its client"
  (let ((whole (count-until-close port (request-text "/flood?drain32" #:version "1.0")))
        (cut (count-until-close port (request-text "/flood?32" #:version "1.0"))))
    (test-assert (format #f "32 MB, waiting when 256 KB are queued: ~a bytes" whole)
      (and whole (> whole (* 32 1024 1024))))
    (test-assert (format #f "32 MB written without waiting: given up at ~a bytes" cut)
      (and cut (< cut (* 32 1024 1024))))))

(test-group "a request given up after its wait ended, before it ran"
  ;; The loop, held by another request, then sees in one round A's FIFO
  ;; readable (A made ready to run) and A's client gone: A must still
  ;; unwind at its next wait, its handlers run, not be dropped there.
  (mknod (string-append cancel-dir "/fifo") 'fifo #o600 0)
  (let ((before (descriptors (server-pid server)))
        (a (connect-client port)))
    (client-send! a (request-text "/resumed-then-gone"))
    (test-assert "A waits on the FIFO"
      (wait-until (lambda () (file-text (string-append cancel-dir "/a-waiting"))) #:timeout 5))
    (let ((writer (open (string-append cancel-dir "/fifo") (logior O_WRONLY O_NONBLOCK)))
          (b (connect-client port)))
      (client-send! b (request-text "/hold-the-loop"))
      (test-assert "B holds the loop"
        (wait-until (lambda () (file-text (string-append cancel-dir "/holding"))) #:timeout 5))
      ;; in this order, while the loop is held: the FIFO, then the hang-up
      (put-u8 writer 1)
      (force-output writer)
      (client-close! a)
      (let ((response body (client-read-response b)))
        (test-equal "B answered" 200 (and response (response-code response))))
      (client-close! b)
      (close-port writer)
      (test-assert "A unwinds at its next wait: its handler sees the cancellation"
        (wait-until (lambda () (file-text (string-append cancel-dir "/resumed-gone")))
                    #:timeout 5))
      (test-equal "as client-gone" "client-gone"
        (file-text (string-append cancel-dir "/resumed-gone")))
      ;; A's connection closes once its handler has unwound, B's once the
      ;; server reads its end: both after the file above is written
      (test-assert "A's and B's descriptors closed"
        (wait-until (lambda () (= (descriptors (server-pid server)) before)) #:timeout 5)))))

(test-group "a request given up"
  (let ((before (descriptors (server-pid server)))
        (client (connect-client port)))
    (client-send! client (request-text "/given-up?client-gone"))
    (test-assert "the handler waits" (wait-until (lambda () (> (descriptors (server-pid server)) before))
                                                 #:timeout 5))
    (client-close! client)
    (test-assert "the client leaves: the handler is unwound"
      (wait-until (lambda () (file-text (string-append cancel-dir "/client-gone")))
                  #:timeout 5))
    (test-equal "as client-gone" "client-gone" (file-text (string-append cancel-dir "/client-gone")))
    (test-assert "its descriptor is closed"
      (wait-until (lambda () (= (descriptors (server-pid server)) before)) #:timeout 5)))
  (let* ((start (now-seconds))
         (reply (get port "/given-up?timeout"))
         (took (- (now-seconds) start)))
    (test-equal "past the handler timeout: 503" 503 (and reply (car reply)))
    (test-assert (format #f "after ~,2f s, the timeout being 1 s" took) (< 0.95 took 2.5))
    (test-equal "the handler was unwound as timeout" "timeout"
                (file-text (string-append cancel-dir "/timeout")))))

(test-group "many suspended at once leave nothing behind"
  (let ((before (descriptors (server-pid server)))
        (clients (map (lambda (i)
                        (let ((client (connect-client port)))
                          (client-send! client (request-text "/sleep?200"))
                          client))
                      (iota 200))))
    (let ((replies (map (lambda (client)
                          (let ((response body (client-read-response client)))
                            (client-close! client)
                            (and response (utf8->string body))))
                        clients)))
      (test-equal "200 answered" (make-list 200 "slept 200") replies))
    (test-assert "descriptors back to their level"
      (wait-until (lambda () (= (descriptors (server-pid server)) before)) #:timeout 5))))

(test-group "a descriptor stays registered between waits"
  (test-equal "until its owner releases it"
    '(200 . "#t #t #f") (get port "/owner-closes"))
  (test-equal "a number reused for another socket is woken by it alone"
    '(200 . "#t #f #t") (get port "/reused"))
  (test-equal "a time-out shorter than the last wait's comes in its own time"
    '(200 . "#t #f #f in time") (get port "/timed-waits"))
  (let ((before (get port "/registered")))
    (test-equal "a wait given up while armed" 503 (car (get port "/hold")))
    (test-equal "leaves no registration in epoll" '(200 . "#f") (get port "/held"))
    (test-equal "nor in the loop's count" before (get port "/registered"))))

(test-group "a drain waits for suspended requests"
  (let ((client (connect-client port)))
    (client-send! client (request-text "/sleep?300"))
    (test-assert "it is in" (wait-until (lambda () (> (descriptors (server-pid server)) 0))))
    (kill (server-pid server) SIGTERM)
    (let ((response body (client-read-response client)))
      (test-equal "answered during the drain" "slept 300" (and body (utf8->string body))))
    (test-assert "then closed: the drain is over" (client-eof? client #:timeout 5))
    (client-close! client)
    (test-assert "the server exits" (wait-until (lambda () (not (server-alive? server)))
                                                #:timeout 5))))

(stop-server server)

(test-group "a worker that stops gives its waiting requests up"
  (let* ((server (start-server handler))
         (port (server-port server))
         (client (connect-client port)))
    (client-send! client (request-text "/given-up?stopping"))
    ;; SIGINT twice: drain, then stop at once.  The drain closes idle
    ;; connections: this one says when the first SIGINT was read.
    (with-client port
      (lambda (idle)
        (client-send! idle (request-text "/hello"))
        (client-read-response idle)
        (kill (server-pid server) SIGINT)
        (test-assert "the drain begins" (client-eof? idle #:timeout 5))))
    (kill (server-pid server) SIGINT)
    (test-assert "the handler is unwound as stopping"
      (wait-until (lambda () (equal? (file-text (string-append cancel-dir "/stopping"))
                                     "stopping"))
                  #:timeout 5))
    (test-assert "the worker ends as a worker does, though the handler re-raised"
      (wait-until (lambda () (string-contains (server-log server) "served")) #:timeout 5))
    (client-close! client)
    (stop-server server)))

(test-end "server/suspend")
