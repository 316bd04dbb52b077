;;; tests/server/stream.scm --- request bodies as ports, answers as streams
;;;
;;; Over real sockets: a `with-body-port' handler reads its body from a
;;; port (Content-Length and chunked, split at every byte, pipelined
;;; requests behind it, 100-continue both ways, bodies it does not read,
;;; limits and time-outs, a 1 GB upload counted without buffering, a
;;; 200 MB multipart form spooled to disk), and streamed answers (chunked
;;; with the right terminator, close-delimited for HTTP/1.0, a declared
;;; Content-Length, HEAD, server-sent events that arrive before the
;;; answer ends, a body procedure that fails half-way).

(use-modules ((plucky http) #:select (bytevector-concatenate))
             (srfi srfi-64)
             (ice-9 ftw)
             (srfi srfi-1)
             (srfi srfi-71)
             (rnrs bytevectors)
             (ice-9 binary-ports)
             (ice-9 textual-ports)
             (ice-9 rdelim)
             (ice-9 format)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (tests lib server)
             (plucky server)
             (plucky web forms))

(define (path-of request) (uri-path (request-uri request)))

(define (count-port port)
  ;; -> (values bytes checksum): the sum of the bytes, mod 2^32
  (let ((buf (make-bytevector 65536)))
    (let lp ((total 0) (sum 0))
      (let ((n (get-bytevector-n! port buf 0 65536)))
        (if (eof-object? n)
            (values total sum)
            (lp (+ total n)
                (let add ((i 0) (sum sum))
                  (if (= i n) (logand sum #xffffffff)
                      (add (+ i 1) (+ sum (bytevector-u8-ref buf i)))))))))))

(define (text . parts)
  (values '((content-type . (text/plain))) (string-concatenate parts)))

;; The SSE test's handler waits for the test to say "go on" on this pipe
;; (made before the server forks, so both ends are in both processes).
(define go-on (pipe))

(define body-handler
  (with-body-port
   (lambda (request body)
     (let ((path (path-of request)))
       (cond
        ((string=? path "/is-port")
         (text (if (port? body) "port" "not a port")))
        ((string=? path "/echo")
         ;; `get-bytevector-all' is written in C and cannot suspend: it
         ;; finds the whole of a small body sent without Expect in the
         ;; pipe, read before the handler runs.
         (text (path-of request) " " (utf8->string (get-bytevector-all* body))))
        ((string=? path "/pid")
         (get-bytevector-n body 3)
         (text (number->string (getpid))))
        ((string=? path "/all")
         ;; `get-bytevector-all' on a body that has not arrived: the
         ;; guard hands the pipe to a thread that fills it.
         (text (number->string (bytevector-length (get-bytevector-all* body)))))
        ((string=? path "/echo-some")
         ;; As the docs say to read a body that may not have arrived.
         (text "/echo " (utf8->string (read-all-some body))))
        ((string=? path "/count")
         (let ((n sum (count-port body)))
           (text (number->string n) " " (number->string sum))))
        ((string=? path "/count-huge")
         ;; Counting only: the checksum would take longer than the test.
         (let ((buf (make-bytevector 65536)))
           (let lp ((total 0))
             (let ((n (get-bytevector-n! body buf 0 65536)))
               (if (eof-object? n)
                   (text (number->string total))
                   (lp (+ total n)))))))
        ((string=? path "/refuse")
         (values (build-response #:code 401 #:headers '((content-type . (text/plain))))
                 "who are you?"))
        ((string=? path "/read-some")
         (text (utf8->string (get-bytevector-n body 3))))
        ((string=? path "/fail")
         (get-bytevector-n body 1)
         (error "handler failed on purpose"))
        ((string=? path "/read-then-wait")
         ;; Waits with its body half read, until given up.
         (get-bytevector-n body 1)
         (sleep-ms 60000)
         (text "not given up"))
        ((string=? path "/form")
         (let ((form (read-multipart-form body (assq-ref (request-headers request)
                                                          'content-type))))
           (text (string-join
                  (map (lambda (field)
                         (let ((value (cdr field)))
                           (if (string? value)
                               (string-append (car field) "=" value)
                               (let ((size (stat:size (stat (form-file-path value)))))
                                 (delete-file (form-file-path value))
                                 (string-append (car field) ":" (number->string size))))))
                       form)
                  " "))))
        (else (text "plain " path)))))))

(define (read-all-some port)
  ;; -> the bytes of PORT up to its end, read with `get-bytevector-some'
  (call-with-values open-bytevector-output-port
    (lambda (out get)
      (let lp ()
        (let ((bv (get-bytevector-some port)))
          (if (eof-object? bv)
              (get)
              (begin (put-bytevector out bv) (lp))))))))

(define (get-bytevector-all* port)
  (let ((bv (get-bytevector-all port)))
    (if (eof-object? bv) #vu8() bv)))

(define (stream-handler request body)
  (let ((path (path-of request)))
    (cond
     ((string=? path "/chunked")
      (values '((content-type . (text/plain)) (transfer-encoding . ((chunked))))
              (lambda (port)
                (display "hello, " port)
                (force-output port)
                (display "streamed " port)
                (force-output port)
                (display "world" port))))
     ((string=? path "/big")
      ;; 1 MiB in writes the port buffers and sends as chunks.
      (values '((content-type . (application/octet-stream))
                (transfer-encoding . ((chunked))))
              (lambda (port)
                (let ((block (make-bytevector 1000 65)))
                  (do ((i 0 (+ i 1))) ((= i 1048) #t)
                    (put-bytevector port block))
                  (put-bytevector port (make-bytevector 576 66))))))
     ((string=? path "/length")
      (values '((content-type . (text/plain)) (content-length . 11)
                (transfer-encoding . ((chunked))))
              (lambda (port) (display "eleven byte" port))))
     ((string=? path "/events")
      (values '((content-type . (text/event-stream)))
              (lambda (port)
                (display "data: one\n\n" port)
                (force-output port)
                ;; The rest only once the test has seen the first event.
                (read-char (car go-on))
                (display "data: two\n\n" port))))
     ((string=? path "/broken")
      (values '((content-type . (text/plain)) (transfer-encoding . ((chunked))))
              (lambda (port)
                (display "a start" port)
                (force-output port)
                (error "the body fails half-way"))))
     ((string=? path "/head-never")
      (values '((content-type . (text/event-stream)))
              (lambda (port) (error "a HEAD answer's body must not be produced"))))
     (else
      (values '((content-type . (text/plain))) (string-append "plain " path))))))

(define (request-bytes path . options)
  (string->utf8 (apply request-text path options)))

(define (post path headers body)
  ;; A request with BODY (a string) and HEADERS, Content-Length added
  ;; unless the headers frame it.
  (string-append "POST " path " HTTP/1.1\r\nHost: x\r\n"
                 (string-concatenate (map (lambda (h) (string-append h "\r\n")) headers))
                 (if (any (lambda (h) (string-prefix-ci? "transfer-encoding" h)) headers)
                     ""
                     (string-append "Content-Length: "
                                    (number->string (bytevector-length (string->utf8 body)))
                                    "\r\n"))
                 "\r\n" body))

(define (chunk . strings)
  (string-concatenate
   (map (lambda (s)
          (string-append (number->string (bytevector-length (string->utf8 s)) 16)
                         "\r\n" s "\r\n"))
        strings)))

(define (body-text body) (and body (utf8->string body)))

(define (get-body port path)
  (let ((response body (http-get port path)))
    (body-text body)))

;;;
;;; Bodies as ports
;;;

(test-begin "server/stream")

(call-with-server body-handler
  (lambda (server)
    (define port (server-port server))

    (test-group "a with-body-port handler gets a port"
      (with-client port
        (lambda (client)
          (client-send! client (post "/is-port" '() "some body"))
          (let ((response body (client-read-response client)))
            (test-equal "port" (body-text body))))))

    (test-group "a request without a body is served on the loop as usual"
      (test-equal "plain /nobody" (get-body port "/nobody")))

    (test-group "Content-Length body, then a pipelined request, in one write"
      (with-client port
        (lambda (client)
          (client-send! client (string-append (post "/echo" '() "hello there")
                                              (request-text "/after")))
          (let ((replies (client-read-responses client 2)))
            (test-equal "two answers" 2 (length replies))
            (test-equal "the body" "/echo hello there"
              (and (pair? replies) (body-text (cdar replies))))
            (test-equal "the request behind it" "plain /after"
              (and (= 2 (length replies)) (body-text (cdadr replies))))))))

    (test-group "chunked body with a trailer, split at every byte"
      (let* ((message (string-append (post "/echo" '("Transfer-Encoding: chunked") "")
                                     (chunk "Wiki" "pedia " "in chunks.")
                                     "0\r\nX-Trailer: yes\r\n\r\n"
                                     (request-text "/next")))
             (bytes (string->utf8 message))
             (n (bytevector-length bytes))
             (failures
              (filter-map
               (lambda (split)
                 (with-client port
                   (lambda (client)
                     (client-send! client (sub-bytevector bytes 0 split))
                     ;; The second part once the first has surely been
                     ;; read on its own (the loop, or the thread, waits).
                     (usleep 2000)
                     (client-send! client (sub-bytevector bytes split n))
                     (let ((replies (client-read-responses client 2 #:timeout 5)))
                       (and (not (and (= 2 (length replies))
                                      (equal? "/echo Wikipedia in chunks."
                                              (body-text (cdar replies)))
                                      (equal? "plain /next" (body-text (cdadr replies)))))
                            split)))))
               (iota (- n 1) 1))))
        (test-equal "every split gives both answers" '() failures)))

    (test-group "a body far larger than the read buffer"
      (let* ((size (+ (* 3 1024 1024) 17))
             (body (make-bytevector size 7)))
        (with-client port
          (lambda (client)
            (client-send! client (string->utf8
                                  (string-append "POST /count HTTP/1.1\r\nHost: x\r\n"
                                                 "Content-Length: " (number->string size)
                                                 "\r\n\r\n")))
            (client-send! client body #:timeout 30)
            (let ((response reply (client-read-response client #:timeout 30)))
              (test-equal "counted"
                (string-append (number->string size) " " (number->string (* 7 size)))
                (body-text reply)))))))

    (test-group "Expect: 100-continue, the handler reads"
      (with-client port
        (lambda (client)
          (client-send! client (string-append "POST /echo-some HTTP/1.1\r\nHost: x\r\n"
                                              "Content-Length: 5\r\n"
                                              "Expect: 100-continue\r\n\r\n"))
          (let ((interim _ (client-read-response client #:timeout 5)))
            (test-equal "100 first" 100 (and interim (response-code interim)))
            (client-send! client "abcde")
            (let ((response body (client-read-response client #:timeout 5)))
              (test-equal "then the answer" 200 (and response (response-code response)))
              (test-equal "with the body" "/echo abcde" (body-text body)))))))

    (test-group "Expect: 100-continue, the handler answers without reading"
      (with-client port
        (lambda (client)
          (client-send! client (string-append "POST /refuse HTTP/1.1\r\nHost: x\r\n"
                                              "Content-Length: 100000\r\n"
                                              "Expect: 100-continue\r\n\r\n"))
          (let ((response body (client-read-response client #:timeout 5)))
            (test-equal "401 straight away, no 100" 401
              (and response (response-code response)))
            (test-equal "says it closes" '(close)
              (and response (response-connection response)))
            (test-assert "and closes" (client-eof? client))))))

    (test-group "a small body the handler reads in part: the port took it all"
      ;; The port reads ahead what the socket has, up to the body's end:
      ;; the body is off the connection, which goes on.
      (with-client port
        (lambda (client)
          (client-send! client (string-append (post "/read-some" '() "abcdefgh")
                                              (request-text "/next")))
          (let ((replies (client-read-responses client 2 #:timeout 5)))
            (test-equal "answered" "abc" (and (pair? replies) (body-text (cdar replies))))
            (test-equal "the next request too" "plain /next"
              (and (= 2 (length replies)) (body-text (cdadr replies))))))))

    (test-group "a large body the handler reads in part: answer, then close"
      ;; Larger than a pipe holds whole (1 MiB): the handler runs once the
      ;; pipe is full, not once the body is all there.
      (with-client port
        (lambda (client)
          (client-send! client (string-append "POST /read-some HTTP/1.1\r\nHost: x\r\n"
                                              "Content-Length: 2000000\r\n\r\n"
                                              (make-string 200000 #\a)))
          (let ((response body (client-read-response client #:timeout 5)))
            (test-equal "answered" "aaa" (body-text body))
            (test-equal "says it closes" '(close)
              (and response (response-connection response)))
            (test-assert "closes: the rest is never read as a request"
              (client-eof? client))))))

    (test-group "a body up to 1 MiB, sent in two parts: read whole before the handler"
      ;; `/echo' reads with `get-bytevector-all', written in C: it cannot
      ;; suspend, and finds the whole body in the pipe.
      (with-client port
        (lambda (client)
          (client-send! client (string-append "POST /echo HTTP/1.1\r\nHost: x\r\n"
                                              "Content-Length: 600000\r\n\r\n"
                                              (make-string 300000 #\a)))
          (client-send! client (make-string 300000 #\b))
          (let ((response body (client-read-response client #:timeout 10)))
            (test-equal "all of it" (+ 6 600000) (and body (bytevector-length body)))
            (test-equal "in order" (char->integer #\b)
              (and body (bytevector-u8-ref body (+ 6 599999))))))))

    (test-group "a handler that fails while reading: 500, the server goes on"
      (with-client port
        (lambda (client)
          (client-send! client (post "/fail" '() "xyz"))
          (let ((response body (client-read-response client #:timeout 5)))
            (test-equal "500" 500 (and response (response-code response))))))
      (test-equal "next request" "plain /ok" (get-body port "/ok"))
      (test-assert "logged" (string-contains (server-log server) "handler failed on purpose")))

    (test-group "a 1 GB chunked upload, counted by the handler"
      ;; 64 KiB chunks of zeros, written as fast as the server reads.
      (let* ((size (* 1024 1024 1024))
             (piece 65536)
             (data (make-bytevector piece 0))
             (frame (string->utf8 (string-append (number->string piece 16) "\r\n")))
             (crlf (string->utf8 "\r\n"))
             (chunk (let ((bv (make-bytevector (+ (bytevector-length frame) piece 2))))
                      (bytevector-copy! frame 0 bv 0 (bytevector-length frame))
                      (bytevector-copy! data 0 bv (bytevector-length frame) piece)
                      (bytevector-copy! crlf 0 bv (+ (bytevector-length frame) piece) 2)
                      bv)))
        (with-client port
          (lambda (client)
            (client-send! client (post "/count-huge" '("Transfer-Encoding: chunked") ""))
            (let ((sent (let lp ((i 0))
                          (if (= i (quotient size piece))
                              i
                              (and (client-send! client chunk #:timeout 30)
                                   (lp (+ i 1)))))))
              (client-send! client "0\r\n\r\n")
              (test-equal "every chunk sent" (quotient size piece) sent)
              (let ((response body (client-read-response client #:timeout 60)))
                (test-equal "the handler counted 1 GB" (number->string size)
                  (body-text body))))))
        (let ((peak (process-peak-rss (server-pid server))))
          (test-assert (format #f "server's peak RSS ~a KiB < 64 MiB" peak)
            (and peak (< peak (* 64 1024)))))))

    (test-group "a 200 MB file in a multipart form, through the server"
      (let* ((boundary "----plucky-test-boundary")
             (size (* 200 1024 1024))
             (head (string->utf8
                    (string-append
                     "--" boundary "\r\n"
                     "Content-Disposition: form-data; name=\"title\"\r\n\r\n"
                     "holiday\r\n"
                     "--" boundary "\r\n"
                     "Content-Disposition: form-data; name=\"upload\"; filename=\"big.bin\"\r\n"
                     "Content-Type: application/octet-stream\r\n\r\n")))
             (tail (string->utf8 (string-append "\r\n--" boundary "--\r\n")))
             (length (+ (bytevector-length head) size (bytevector-length tail)))
             (block (make-bytevector (* 1024 1024) 45)))
        (with-client port
          (lambda (client)
            (client-send! client
                          (string-append "POST /form HTTP/1.1\r\nHost: x\r\n"
                                         "Content-Type: multipart/form-data; boundary="
                                         boundary "\r\n"
                                         "Content-Length: " (number->string length)
                                         "\r\n\r\n"))
            (client-send! client head)
            (let lp ((i 0))
              (when (and (< i 200) (client-send! client block #:timeout 30))
                (lp (+ i 1))))
            (client-send! client tail)
            (let ((response body (client-read-response client #:timeout 120)))
              (test-equal "the form: the field and the file's size"
                (string-append "title=holiday upload:" (number->string size))
                (body-text body)))))
        (let ((peak (process-peak-rss (server-pid server))))
          (test-assert (format #f "server's peak RSS ~a KiB < 64 MiB" peak)
            (and peak (< peak (* 64 1024)))))))

    (test-assert "the server is still up" (server-alive? server)))
  #:settings (make-loop-settings #:max-body (* 2 1024 1024 1024)))

(call-with-server body-handler
  (lambda (server)
    (test-group "a body that stops arriving: 408"
      (with-client (server-port server)
        (lambda (client)
          (client-send! client (string-append "POST /count HTTP/1.1\r\nHost: x\r\n"
                                              "Content-Length: 10\r\n\r\nabc"))
          (let ((response body (client-read-response client #:timeout 10)))
            (test-equal "408" 408 (and response (response-code response)))))))
    (test-group "a chunked body past the limit: 413"
      (with-client (server-port server)
        (lambda (client)
          (client-send! client (string-append (post "/count" '("Transfer-Encoding: chunked") "")
                                              (chunk (make-string 600 #\a))
                                              (chunk (make-string 600 #\a))))
          (let ((response body (client-read-response client #:timeout 5)))
            (test-equal "413" 413 (and response (response-code response)))))))
    (test-group "a Content-Length past the limit: 413 before the handler"
      (with-client (server-port server)
        (lambda (client)
          (client-send! client (string-append "POST /count HTTP/1.1\r\nHost: x\r\n"
                                              "Content-Length: 1025\r\n\r\n"))
          (let ((response body (client-read-response client #:timeout 5)))
            (test-equal "413" 413 (and response (response-code response)))))))
    (test-group "a stalled body times out while the server is busy"
      ;; Regression (tests/fuzz with port-app.scm): the thread's poll(2)
      ;; was restarted with the whole time-out after every EINTR, and the
      ;; collector's stop-the-world signals interrupt it more often than a
      ;; second under load: the 408 came only once the load stopped.
      (let ((stalled (connect-client (server-port server)))
            (load (connect-client (server-port server)))
            (start (now-seconds))
            (batch (string-concatenate (map (lambda (i) (request-text "/load")) (iota 50)))))
        (client-send! stalled (string-append "POST /count HTTP/1.1\r\nHost: x\r\n"
                                             "Content-Length: 10\r\n\r\nabc"))
        (let lp ()
          (client-send! load batch)
          (let ((answers (client-read-responses load 50 #:timeout 5))
                (response body (client-read-response stalled #:timeout 0)))
            (cond
             (response
              (test-equal "408" 408 (response-code response))
              (test-assert (format #f "after ~,1f s of load (time-out 1 s)"
                                   (- (now-seconds) start))
                (< (- (now-seconds) start) 3)))
             ((< (- (now-seconds) start) 6) (lp))
             (else (test-assert "a 408 within 6 s of load" #f)))))
        (client-close! stalled)
        (client-close! load)))
    (test-group "100 slow uploads at once, one thread: all answered"
      ;; Each client sends its body a byte at a time, every 200 ms, all at
      ;; once, to a worker with one thread (--max-threads 1): a body read
      ;; as a port suspends on its socket and takes no thread, so none
      ;; waits for another (on a thread each, the second waited, and got
      ;; a 503 past the body time-out).
      (let ((clients (map (lambda (i) (connect-client (server-port server))) (iota 100))))
        (for-each (lambda (client)
                    (client-send! client (string-append "POST /count HTTP/1.1\r\nHost: x\r\n"
                                                        "Content-Length: 5\r\n\r\na")))
                  clients)
        (for-each (lambda (round)
                    (usleep 200000)
                    (for-each (lambda (client) (client-send! client "b")) clients))
                  (iota 4))
        (let ((answers (map (lambda (client)
                              (let ((response body (client-read-response client #:timeout 10)))
                                (and response (body-text body))))
                            clients)))
          (test-equal "every upload counted"
            (make-list 100 (string-append "5 " (number->string (+ 97 (* 4 98)))))
            answers))
        (for-each client-close! clients)))
    (test-group "the whole body with the head and Expect: no 100 Continue"
      (with-client (server-port server)
        (lambda (client)
          (client-send! client (string-append "POST /echo HTTP/1.1\r\nHost: x\r\n"
                                              "Content-Length: 5\r\n"
                                              "Expect: 100-continue\r\n\r\nabcde"))
          (let ((response body (client-read-response client #:timeout 5)))
            (test-equal "straight to the answer" 200 (and response (response-code response)))
            (test-equal "with the body" "/echo abcde" (body-text body)))))))
  #:settings (make-loop-settings #:body-timeout 1 #:max-body 1024 #:max-threads 1))

(define (descriptors pid)
  (length (or (scandir (format #f "/proc/~a/fd" pid) string->number) '())))

(define (slow-upload port path)
  ;; -> a client whose request to PATH has sent 3 bytes of its body of 100
  (let ((client (connect-client port)))
    (client-send! client (string-append "POST " path " HTTP/1.1\r\nHost: x\r\n"
                                        "Content-Length: 100\r\n\r\nabc"))
    client))

(define (call-with-upload-server proc . options)
  ;; Call (PROC server level) with a server of `body-handler' (OPTIONS
  ;; for `run-server') that has read a first body as a port (which loads
  ;; what it needs); LEVEL is a thunk: its descriptors now.
  (apply call-with-server body-handler
         (lambda (server)
           (test-equal "a first upload" "/echo abc"
             (with-client (server-port server)
               (lambda (client)
                 (client-send! client (post "/echo" '() "abc"))
                 (let ((response body (client-read-response client #:timeout 5)))
                   (body-text body)))))
           (proc server (lambda () (descriptors (server-pid server)))))
         #:settings (make-loop-settings #:body-timeout 30)
         options))

(call-with-upload-server
  (lambda (server level)
    (test-group "clients that leave while their bodies are read: descriptors closed"
      (let* ((before (level))
             (clients (map (lambda (i) (slow-upload (server-port server) "/count"))
                           (iota 20))))
        ;; Each: its socket, the pipe's two ends, the socket's dup (the
        ;; first upload's socket may still be open in BEFORE).
        (test-assert "the requests wait, with their pipes"
          (wait-until (lambda () (>= (level) (+ before (* 4 20) -1))) #:timeout 5))
        (for-each client-close! clients)
        (test-assert "descriptors back to their level"
          (wait-until (lambda () (<= (level) before)) #:timeout 5))))))

(call-with-upload-server
  (lambda (server level)
    (test-group "--handler-timeout, the body half read: 503, descriptors closed"
      ;; With Expect, the handler runs before its body arrives; it then
      ;; waits on a timer, not for its body (whose waits are the
      ;; client's time: tests/server/body-faults.scm).
      (let* ((before (level))
             (client (connect-client (server-port server))))
        (client-send! client (string-append "POST /read-then-wait HTTP/1.1\r\nHost: x\r\n"
                                            "Content-Length: 100\r\n"
                                            "Expect: 100-continue\r\n\r\nabc"))
        (let ((response body (client-read-response client #:timeout 5)))
          (test-equal "503" 503 (and response (response-code response))))
        (client-close! client)
        (test-assert "descriptors back to their level"
          (wait-until (lambda () (<= (level) before)) #:timeout 5)))))
  #:options '(#:handler-timeout 1))

;;;
;;; A handler blocked in C on its body: the guard takes the pipe over
;;;

(define (send-slowly! client bytes piece pause-us)
  ;; -> #t once BYTES went in pieces of PIECE bytes, PAUSE-US apart
  (let ((n (bytevector-length bytes)))
    (let lp ((start 0))
      (or (>= start n)
          (let ((end (min n (+ start piece))))
            (and (client-send! client (sub-bytevector bytes start end) #:timeout 30)
                 (begin (usleep pause-us) (lp end))))))))

(define (chunked-bytes size piece)
  ;; -> SIZE bytes of 1s as chunks of PIECE bytes, with the last chunk
  (let* ((data (make-bytevector piece 1))
         (frame (lambda (n)
                  (string->utf8 (string-append (number->string n 16) "\r\n")))))
    (call-with-values open-bytevector-output-port
      (lambda (out get)
        (let lp ((left size))
          (if (zero? left)
              (put-bytevector out (string->utf8 "0\r\n\r\n"))
              (let ((n (min piece left)))
                (put-bytevector out (frame n))
                (put-bytevector out data 0 n)
                (put-bytevector out (string->utf8 "\r\n"))
                (lp (- left n)))))
        (get)))))

(define (test-blocked-in-c server level)
  (define port (server-port server))
  (define (answer client)
    (let ((response body (client-read-response client #:timeout 60)))
      (and response (list (response-code response) (body-text body)))))
  (test-group "get-bytevector-all, a 5 MB Content-Length body sent slowly"
    (let ((before (level))
          (size (* 5 1000 1000)))
      (with-client port
        (lambda (client)
          (client-send! client (string-append "POST /all HTTP/1.1\r\nHost: x\r\n"
                                              "Content-Length: " (number->string size)
                                              "\r\n\r\n"))
          ;; Past the pipe's 64 KiB, then nothing for long enough that
          ;; the handler is surely blocked in C and taken over.
          (test-assert "sent"
            (send-slowly! client (make-bytevector size 3) (* 1024 1024) 200000))
          (test-equal "the whole body, counted" (list 200 (number->string size))
            (answer client))))
      (test-equal "the worker serves the next request" "plain /ok" (get-body port "/ok"))
      (test-assert "descriptors back to their level"
        (wait-until (lambda () (<= (level) before)) #:timeout 5))))
  (test-group "get-bytevector-all, a 2 MB chunked body"
    (let ((size (* 2 1024 1024)))
      (with-client port
        (lambda (client)
          (client-send! client (post "/all" '("Transfer-Encoding: chunked") ""))
          (test-assert "sent"
            (send-slowly! client (chunked-bytes size 65536) (* 256 1024) 100000))
          (test-equal "the whole body, counted" (list 200 (number->string size))
            (answer client))))))
  (test-group "get-bytevector-all, Expect: 100-continue"
    (let ((size 300000))
      (with-client port
        (lambda (client)
          (client-send! client (string-append "POST /all HTTP/1.1\r\nHost: x\r\n"
                                              "Content-Length: " (number->string size)
                                              "\r\nExpect: 100-continue\r\n\r\n"))
          (let ((interim _ (client-read-response client #:timeout 10)))
            (test-equal "100, sent by the thread" 100 (and interim (response-code interim))))
          (test-assert "sent"
            (send-slowly! client (make-bytevector size 5) 100000 100000))
          (test-equal "the whole body, counted" (list 200 (number->string size))
            (answer client))))))
  (test-group "get-bytevector-all, the client stops mid-body: 408"
    (let ((before (level)))
      (with-client port
        (lambda (client)
          (client-send! client (string-append "POST /all HTTP/1.1\r\nHost: x\r\n"
                                              "Content-Length: 5000000\r\n\r\n"))
          (client-send! client (make-bytevector 200000 3))
          (let ((answer (answer client)))
            (test-equal "408" 408 (and answer (car answer))))))
      (test-equal "the worker serves the next request" "plain /ok" (get-body port "/ok"))
      (test-assert "descriptors back to their level"
        (wait-until (lambda () (<= (level) before)) #:timeout 5))))
  (test-assert "the server is still up" (server-alive? server)))

(for-each
 (lambda (workers)
   (test-group (format #f "guard, --workers ~a" workers)
     (call-with-server body-handler
       (lambda (server)
         ;; First uploads load what body pipes need, and start each
         ;; worker's guard thread (which holds Guile's wake-up pipe of
         ;; a thread: two descriptors for good): until each worker has
         ;; answered one.
         (let ((pids (if (= workers 1)
                         (list (server-pid server))
                         (child-pids (server-pid server)))))
           (test-assert "first uploads, one to each worker"
             (let lp ((tries 0) (seen '()))
               (let ((pid (with-client (server-port server)
                            (lambda (client)
                              (client-send! client (post "/pid" '() "abc"))
                              (let ((response body (client-read-response client #:timeout 5)))
                                (and body (string->number (body-text body))))))))
                 (cond
                  ((not pid) #f)
                  ((lset<= = pids (cons pid seen)) #t)
                  ((< tries 60) (lp (+ tries 1) (cons pid seen)))
                  (else #f))))))
         (let ((workers-before (sort (child-pids (server-pid server)) <)))
           (test-blocked-in-c
            server
            (lambda ()
              ;; The workers' descriptors but the wake-up pipe Guile
              ;; gives each thread: its finalizer thread starts at a
              ;; worker's first collection, whenever that comes.  A
              ;; filler thread that stayed would still show, with the
              ;; pipe's write end and the socket's dup it holds.
              (apply + (map (lambda (pid)
                              (- (descriptors pid)
                                 (* 2 (string->number
                                       (process-status-field pid "Threads")))))
                            (if (= workers 1)
                                (list (server-pid server))
                                (child-pids (server-pid server)))))))
           (test-equal "no worker replaced" workers-before
             (sort (child-pids (server-pid server)) <))))
       #:workers workers
       #:settings (make-loop-settings #:body-timeout 2 #:max-body (* 64 1024 1024)))))
 '(1 2))

;;;
;;; Streamed answers
;;;

(define (parse-head bytes)
  ;; -> (values response index-after-head), or #f
  (let ((end (find-head-end bytes 0)))
    (if end
        (values (read-response (open-bytevector-input-port (sub-bytevector bytes 0 end)))
                end)
        (values #f #f))))

(define (decode-chunks bytes start)
  ;; Strictly decode a chunked body at START: -> (values data index-after
  ;; chunk-count), or #f when the bytes are not a complete chunked body
  ;; (the last chunk and the empty line included).
  (let lp ((i start) (parts '()) (count 0))
    (let ((line-end (let find ((j i))
                      (cond ((>= (+ j 1) (bytevector-length bytes)) #f)
                            ((and (= 13 (bytevector-u8-ref bytes j))
                                  (= 10 (bytevector-u8-ref bytes (+ j 1))))
                             j)
                            (else (find (+ j 1)))))))
      (if (not line-end)
          (values #f #f #f)
          (let ((size (string->number (utf8->string (sub-bytevector bytes i line-end)) 16)))
            (cond
             ((not size) (values #f #f #f))
             ((zero? size)
              (if (and (<= (+ line-end 4) (bytevector-length bytes))
                       (equal? #vu8(13 10 13 10) (sub-bytevector bytes line-end (+ line-end 4))))
                  (values (bytevector-concatenate (reverse parts)) (+ line-end 4) count)
                  (values #f #f #f)))
             ((> (+ line-end 2 size 2) (bytevector-length bytes)) (values #f #f #f))
             ((not (equal? #vu8(13 10) (sub-bytevector bytes (+ line-end 2 size)
                                                        (+ line-end 4 size))))
              (values #f #f #f))
             (else
              (lp (+ line-end 4 size)
                  (cons (sub-bytevector bytes (+ line-end 2) (+ line-end 2 size)) parts)
                  (+ count 1)))))))))

(define (read-until client done? timeout)
  ;; Read from CLIENT until (DONE? pending-bytes) or TIMEOUT seconds; ->
  ;; the pending bytes, left pending.
  (let ((deadline (+ (now-seconds) timeout)))
    (let lp ()
      (let ((bytes (client-pending client)))
        (if (or (done? bytes) (not (eq? #t (receive-some! client deadline))))
            (client-pending client)
            (lp))))))

(define (complete-chunked? bytes)
  (let ((response end (parse-head bytes)))
    (and response
         (let ((data next count (decode-chunks bytes end)))
           data))))

(call-with-server stream-handler
  (lambda (server)
    (define port (server-port server))

    (test-group "HTTP/1.1: chunked, the last chunk and its CRLF, keep-alive"
      (with-client port
        (lambda (client)
          (client-send! client (request-text "/chunked"))
          (let* ((bytes (read-until client complete-chunked? 5))
                 (response end (parse-head bytes)))
            (test-equal "200" 200 (and response (response-code response)))
            (test-equal "Transfer-Encoding: chunked" '((chunked))
              (and response (assq-ref (response-headers response) 'transfer-encoding)))
            (test-assert "no Content-Length"
              (and response (not (response-content-length response))))
            (let ((data next count (if end (decode-chunks bytes end) (values #f #f #f))))
              (test-equal "the body" "hello, streamed world" (and data (utf8->string data)))
              (test-equal "one chunk per flush, and the rest" 3 count)
              (test-equal "nothing after the terminator" (bytevector-length bytes) next)
              (set-client-pending! client #vu8())
              (client-send! client (request-text "/then"))
              (let ((response body (client-read-response client #:timeout 5)))
                (test-equal "the connection serves the next request" "plain /then"
                  (body-text body))))))))

    (test-group "a 1 MiB streamed body"
      (with-client port
        (lambda (client)
          (client-send! client (request-text "/big"))
          (let* ((bytes (read-until client complete-chunked? 10))
                 (response end (parse-head bytes))
                 (data next count (if end (decode-chunks bytes end) (values #f #f #f))))
            (test-equal "all of it" (* 1024 1024) (and data (bytevector-length data)))
            (test-equal "in order" 66 (and data (bytevector-u8-ref data (- (* 1024 1024) 1))))))))

    (test-group "HTTP/1.0: close-delimited"
      (with-client port
        (lambda (client)
          (client-send! client (request-text "/chunked" #:version "1.0"))
          (let* ((bytes closed? (client-read-until-close client #:timeout 5))
                 (response end (parse-head bytes)))
            (test-assert "closed" closed?)
            (test-assert "no Transfer-Encoding"
              (and response (not (assq 'transfer-encoding (response-headers response)))))
            (test-equal "Connection: close" '(close)
              (and response (response-connection response)))
            (test-equal "the body, as it is" "hello, streamed world"
              (and end (utf8->string (sub-bytevector bytes end (bytevector-length bytes)))))))))

    (test-group "a declared Content-Length: the bytes as they are"
      (with-client port
        (lambda (client)
          (client-send! client (request-text "/length"))
          (let ((response body (client-read-response client #:timeout 5)))
            (test-equal "body" "eleven byte" (body-text body))
            (test-assert "no Transfer-Encoding"
              (and response (not (assq 'transfer-encoding (response-headers response)))))))))

    (test-group "HEAD: the head, and the body procedure is not called"
      (with-client port
        (lambda (client)
          (client-send! client (string-append (request-text "/head-never" #:method "HEAD")
                                              (request-text "/after-head")))
          (let ((response body (client-read-response client #:head? #t #:timeout 5)))
            (test-equal "200" 200 (and response (response-code response)))
            (let ((response body (client-read-response client #:timeout 5)))
              (test-equal "the next request" "plain /after-head" (body-text body))))))
      (test-assert "nothing failed" (not (string-contains (server-log server) "must not be produced"))))

    (test-group "server-sent events arrive before the answer ends"
      (with-client port
        (lambda (client)
          (client-send! client (request-text "/events"))
          (let* ((bytes (read-until client
                                    (lambda (bytes)
                                      (string-contains (utf8->string* bytes) "data: one"))
                                    5))
                 (text (utf8->string* bytes)))
            (test-assert "the first event came" (string-contains text "data: one"))
            (test-assert "while the answer is still open (no last chunk yet)"
              (not (complete-chunked? bytes)))
            (test-equal "Content-Type: text/event-stream" 'text/event-stream
              (let ((response end (parse-head bytes)))
                (and response (car (response-content-type response)))))
            ;; Now let the handler finish.
            (write-char #\g (cdr go-on))
            (force-output (cdr go-on))
            (let* ((bytes (read-until client complete-chunked? 5))
                   (response end (parse-head bytes))
                   (data next count (if end (decode-chunks bytes end) (values #f #f #f))))
              (test-equal "then the second, and the end"
                "data: one\n\ndata: two\n\n" (and data (utf8->string data))))))))

    (test-group "a body procedure that fails after the head: the connection closes"
      (with-client port
        (lambda (client)
          (client-send! client (request-text "/broken"))
          (let ((bytes closed? (client-read-until-close client #:timeout 5)))
            (test-assert "closed" closed?)
            (test-assert "without a last chunk"
              (not (complete-chunked? bytes)))
            (test-assert "the start was sent" (string-contains (utf8->string* bytes) "a start")))))
      (test-assert "logged" (string-contains (server-log server) "the body fails half-way"))
      (test-equal "the server goes on" "plain /ok" (get-body port "/ok")))

    (test-group "a streamed answer between pipelined requests"
      (with-client port
        (lambda (client)
          (client-send! client (string-append (request-text "/first")
                                              (request-text "/chunked")
                                              (request-text "/last")))
          (let ((response body (client-read-response client #:timeout 5)))
            (test-equal "first" "plain /first" (body-text body)))
          (let* ((bytes (read-until client complete-chunked? 5))
                 (response end (parse-head bytes))
                 (data next count (if end (decode-chunks bytes end) (values #f #f #f))))
            (test-equal "then the stream" "hello, streamed world" (and data (utf8->string data)))
            (when next
              (set-client-pending! client (sub-bytevector bytes next (bytevector-length bytes)))))
          (let ((response body (client-read-response client #:timeout 5)))
            (test-equal "then the last" "plain /last" (body-text body))))))))

(test-end "server/stream")
