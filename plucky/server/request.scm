;;; (plucky server request) --- reading a connection's requests and their bodies

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The loop (plucky server loop) calls `read-ready!' when a connection
;;; has bytes.  They are read into the loop's shared input buffer, and
;;; `serve-input!' parses every complete request in them with (plucky
;;; http parse), in order (pipelining), and answers each through
;;; (plucky server respond); whatever is left (the start of the next
;;; head) is kept in the connection (plucky server connection).  A body
;;; that has not all arrived gets storage of its own and is read straight
;;; into it (state body), or decoded as it comes (state chunked); the
;;; request is answered once it is whole.  A handler that reads bodies
;;; from ports (`with-body-port') gets the connection on a thread instead
;;; (`hand-off-call!').  Then `finish!' (plucky server output) sends the
;;; answers one read produced with one write(2).
;;;
;;; Code:

(define-module (plucky server request)
  #:use-module (rnrs bytevectors)
  #:use-module ((srfi srfi-1) #:select (every))
  #:use-module (web request)
  #:use-module (plucky sys libc)
  #:use-module ((plucky sys epoll) #:select (EPOLLIN))
  #:use-module (plucky http error)
  #:use-module (plucky http parse)
  #:use-module ((plucky http response) #:select (make-output output-put-bytes!
                                                 output-put-slice! output-fill
                                                 output-bytes))
  ;; Loaded by the first chunked request body, not at start-up (bench/startup).
  #:autoload (plucky http chunked) (make-chunked-decoder decode-chunked!)
  ;; Loaded by the first connection handed to a thread (bench/startup).
  #:autoload (plucky server stream) (make-body-reader write-all!)
  #:use-module (plucky server transport)
  #:use-module (plucky server connection)
  #:use-module (plucky server output)
  #:use-module (plucky server pool)
  #:use-module (plucky server respond)
  #:use-module ((plucky server hooks) #:select (observer-hooks-on-wait))
  ;; Loaded by the first HTTP/2 connection, not at start-up (bench/startup).
  #:autoload (plucky server http2) (http2-preface? start-http2! http2-ready!)
  #:export (read-ready!
            serve-input!
            after-respond!
            run-ready-tasks!))

;; `parse-head' runs once per request, inlined where it is called
;; (plucky sys inline): bench/instructions.
(eval-when (expand)
  (use-modules (plucky sys inline)))

;;;
;;; Reading
;;;

(define-syntax-rule (read-into! loop conn address start count)
  ;; -> bytes read through CONN's transport, timed for the observer
  (timed (sampling? loop)
         ((transport-read (connection-transport conn))
          (connection-fd conn) address start count)
         (lambda (ns) (set-loop-read-ns! loop (+ (loop-read-ns loop) ns)))))

(define (read-ready! loop conn)
  "Read what CONN has for LOOP and serve the requests it completes;
return nothing."
  (case (connection-state conn)
    ((lingering)
     (let ((n ((transport-read (connection-transport conn))
               (connection-fd conn) (loop-input-address loop) 0 input-size)))
       (unless (or (> n 0) (= n (- errno-EAGAIN)))
         (close-connection! loop conn))))
    ((body) (read-body! loop conn))
    ((chunked) (read-chunked! loop conn))
    ((writing handed-off suspended streaming) #t) ; not watched for input
    ((h2) (http2-ready! loop conn))
    (else (read-head! loop conn))))

(define (read-head! loop conn)
  (let ((own (connection-input conn)))
    (if own
        ;; Bytes of an unfinished head are waiting: read after them.
        (let* ((own (if (< (connection-end conn) (bytevector-length own))
                        own
                        (grow-input! conn)))
               (start (connection-start conn))
               (end (connection-end conn))
               (n (read-into! loop conn (connection-input-address conn)
                              end (- (bytevector-length own) end))))
          (cond
           ((> n 0)
            (set-connection-end! conn (+ end n))
            (serve-input! loop conn own start (+ end n)))
           ((= n (- errno-EAGAIN)) #t)
           (else (close-connection! loop conn))))
        (let ((n (read-into! loop conn (loop-input-address loop) 0 input-size)))
          (cond
           ((> n 0) (serve-input! loop conn (loop-input loop) 0 n))
           ((= n (- errno-EAGAIN)) #t)
           (else (close-connection! loop conn)))))))

(define body-chunk
  ;; A body that has not arrived gets storage as it arrives, this much at
  ;; first and twice as much each time it fills, never more than its
  ;; declared length: a head that declares 64 MiB and sends nothing costs
  ;; 64 KiB, not 64 MiB (tests/regress/body-allocated-before-it-arrives).
  65536)

(define (read-body! loop conn)
  (let* ((length (connection-body-length conn))
         (body (let ((body (connection-body conn))
                     (fill (connection-body-fill conn)))
                 (if (< fill (bytevector-length body))
                     body
                     (let ((bigger (make-bytevector
                                    (min length (* 2 (bytevector-length body))))))
                       (bytevector-copy! body 0 bigger 0 fill)
                       (set-connection-body! conn bigger)
                       bigger))))
         (fill (connection-body-fill conn))
         (n (read-into! loop conn (bytevector-address body) fill
                        (- (bytevector-length body) fill))))
    (cond
     ((> n 0)
      (let ((fill (+ fill n)))
        (set-connection-body-fill! conn fill)
        (set-deadline! loop conn (settings-body-ms (loop-settings loop)))
        (when (= fill length)
          (let ((request (connection-request conn)))
            (set-connection-request! conn #f)
            (set-connection-body! conn #f)
            (set-connection-state! conn 'idle)
            (when (after-respond! loop conn (respond! loop conn request body)
                                  (loop-input loop) 0 0)
              (serve-input! loop conn (loop-input loop) 0 0))))))
     ((= n (- errno-EAGAIN)) #t)
     (else (close-connection! loop conn)))))

;;;
;;; Serving the requests in a run of bytes
;;;

(define (request-body-length request)
  ;; -> integer, or 'chunked
  (let ((headers (request-headers request)))
    (cond
     ((assq 'transfer-encoding headers) 'chunked)
     ((assq-ref headers 'content-length))
     (else 0))))

(define-inline (parse-head loop bv start end)
  ;; -> (values request index), as `parse-request-head'; timed when the
  ;; observer asks for this request (see take-sample!)
  (let ((limits (settings-parse-limits (loop-settings loop))))
    (if (and (loop-observer loop) (take-sample! loop))
        (let ((start-ns (clock)))
          (call-with-values
              (lambda () (parse-request-head bv start end limits))
            (lambda (request index)
              (set-loop-parse-ns! loop (- (clock) start-ns))
              (values request index))))
        ;; not timed: PARSE-NS is #f since the last timed answer was
        ;; reported (observe-answer!)
        (parse-request-head bv start end limits))))

(define (serve-input! loop conn bv start end)
  "Parse and answer every complete request in BV [START, END) that came
on CONN, then send the answers.  Whatever is left over waits in the
connection.  Return nothing."
  (let ((settings (loop-settings loop)))
    (let lp ((start start))
      (call-with-values
          (lambda ()
            (if (= start end)
                (values 'incomplete #f)
                (parse-head loop bv start end)))
        (lambda (request index)
          (cond
           ((eq? request 'incomplete)
            (keep-input! conn bv start end)
            (cond
             ((= start end)
              (set-connection-state! conn 'idle)
              (set-deadline! loop conn (settings-keep-alive-ms settings)))
             ((not (eq? (connection-state conn) 'head))
              (set-connection-state! conn 'head)
              (set-deadline! loop conn (settings-header-ms settings))))
            (finish! loop conn #f #f))
           ;; `request?' first: `http-error?' is the predicate of an
           ;; exception type, which Guile makes extensible, so on anything
           ;; else it looks up the record type's parents, every request
           ;; (statprof: record-type-parents, 1% of a keep-alive hello).
           ((and (not (request? request)) (http-error? request))
            ;; The one place a connection becomes HTTP/2: its preface
            ;; is a head of version 2.0 to the HTTP/1 parser.
            (if (and (= (http-error-status request) 505)
                     (http2-preface? bv start end))
                (start-http2! loop conn bv start end)
                (refuse! loop conn #f (http-error-status request)
                         (http-error-reason request))))
           (else
            (let ((length (request-body-length request)))
              (cond
               ((unmet-expectation? request)
                (refuse! loop conn request 417 #f))
               ((and (eq? (request-method request) 'CONNECT)
                     (not (connect-handler? (loop-handler loop))))
                (refuse! loop conn request 501 #f))
               ((and (loop-body-port? loop)
                     (or (eq? length 'chunked)
                         (< 0 length (+ 1 (settings-max-body settings)))))
                ;; The handler reads the body itself, on a thread.
                (hand-off-call! loop conn request length bv index end))
               ((eq? length 'chunked)
                (let ((decoder (make-chunked-decoder
                                #:max-total (settings-max-body settings)))
                      (collected (make-output 4096)))
                  (set-connection-input! conn #f)
                  (set-connection-request! conn request)
                  (set-connection-body! conn (cons decoder collected))
                  (feed-chunked! loop conn bv index end)))
               ((> length (settings-max-body settings))
                (refuse! loop conn request 413 #f))
               ((<= (+ index length) end)
                (let ((body (and (> length 0)
                                 (let ((body (make-bytevector length)))
                                   (bytevector-copy! bv index body 0 length)
                                   body))))
                  (when (after-respond! loop conn (respond! loop conn request body)
                                        bv (+ index length) end)
                    (lp (+ index length)))))
               (else
                ;; The body has not all arrived: give it storage of its
                ;; own and read the rest straight into it.
                (let* ((have (- end index))
                       (body (make-bytevector (min length (max have body-chunk)))))
                  (continue-if-expected! loop conn request)
                  (bytevector-copy! bv index body 0 have)
                  (set-connection-body-length! conn length)
                  (set-connection-input! conn #f)
                  (set-connection-request! conn request)
                  (set-connection-body! conn body)
                  (set-connection-body-fill! conn have)
                  (set-connection-state! conn 'body)
                  (set-deadline! loop conn (settings-body-ms settings))
                  (finish! loop conn #f #f))))))))))))

;;;
;;; After an answer
;;;

(define (after-respond! loop conn outcome bv index end)
  "Do what OUTCOME, the result of `respond!' for a request on CONN,
calls for; BV [INDEX, END) are the bytes that came after that request.
Return #t when the caller is to serve those bytes now (the connection
stays open and is free), else #f."
  (case outcome
    ((#f) #t)
    ((handed-off suspended writing)
     ;; Requests behind it wait for the thread, the wait or the socket;
     ;; the answers before a wait leave now, or queue (see
     ;; `finish-task!').
     (keep-input! conn bv index end)
     (when (eq? outcome 'suspended)
       (write-output! loop conn))
     #f)
    ((takeover)
     ;; What follows is the new protocol's: the takeover gets it.
     (keep-input! conn bv index end)
     (finish! loop conn #f #f)
     #f)
    (else
     (set-connection-input! conn #f)
     (finish! loop conn #t #f)
     #f)))

(define (run-ready-tasks! loop)
  "Resume every suspended handler of LOOP whose wait has ended, and those
their resumption made ready in turn; return nothing."
  (let lp ()
    (let ((ready (take-ready-tasks! loop)))
      (unless (null? ready)
        (for-each (lambda (entry) (finish-task! loop (car entry) (cdr entry)))
                  ready)
        (lp)))))

(define (after-task! loop conn outcome)
  ;; The request of CONN that waited came to OUTCOME (as `respond!''s):
  ;; serve the requests that came behind it, if the connection is free.
  (let ((own (connection-input conn)))
    (if own
        (when (after-respond! loop conn outcome own
                              (connection-start conn) (connection-end conn))
          (serve-input! loop conn own (connection-start conn) (connection-end conn)))
        (when (after-respond! loop conn outcome (loop-input loop) 0 0)
          (serve-input! loop conn (loop-input loop) 0 0)))))

(define (finish-task! loop task thunk)
  ;; Resume TASK with THUNK; once its handler returns, answer as after
  ;; any request, then serve the requests that came behind it.
  (let ((conn (task-conn task)))
    (cond
     ((not (eq? (connection-task conn) task)) #f)
     ((task-stream task)
      (let ((outcome (resume-stream! loop task thunk)))
        (unless (eq? outcome 'suspended)
          (after-task! loop conn outcome))))
     (else
      (call-with-values (lambda () (resume-task! loop task thunk))
        (lambda (response body)
          (unless (eq? response suspended)
            (case (task-cancelled task)
              ((client-gone stopping)
               (close-connection! loop conn))
              (else
               (let ((timeout? (eq? (task-cancelled task) 'timeout))
                     (observer (loop-observer loop))
                     (request (task-request task)))
                 (set-connection-state! conn 'idle)
                 (watch! loop conn EPOLLIN)
                 (let ((outcome
                        (answer! loop conn request
                                 (and (not timeout?) response)
                                 (if timeout? 503 body)
                                 ;; a drain began while it waited
                                 (or (task-close? task)
                                     (and (loop-drain-deadline loop) #t))
                                 (output-fill (loop-output loop))
                                 (lambda (code bytes)
                                   (when observer
                                     (observe-answer! loop request code bytes
                                                      #f #f #f)
                                     ((observer-hooks-on-wait observer)
                                      request code (task-waited task)
                                      (task-computing task))))
                                 #t)))
                   (after-task! loop conn outcome))))))))))))

;;;
;;; Bodies
;;;

(define (continue-expectation? item)
  ;; Guile parses "Expect: 100-Continue" to the symbol 100-Continue; the
  ;; expectation is case-insensitive (RFC 9110 §10.1.1).
  (and (pair? item)
       (symbol? (car item))
       (string-ci=? (symbol->string (car item)) "100-continue")))

(define (unmet-expectation? request)
  ;; An Expect header asking for anything but 100-continue: 417.
  (let ((expect (assq-ref (request-headers request) 'expect)))
    (and expect
         (not (and (pair? expect) (every continue-expectation? expect))))))

(define continue-line (string->utf8 "HTTP/1.1 100 Continue\r\n\r\n"))

(define (continue-if-expected! loop conn request)
  ;; The client waits for "100 Continue" before it sends the body (RFC
  ;; 9110 §10.1.1): say it now that we are about to wait for that body.
  ;; A request refused before this point (413, 417, a bad head) never
  ;; gets it, so its body is never sent.
  (when (and (assq 'expect (request-headers request))
             (equal? (request-version request) '(1 . 1)))
    (let ((out (loop-output loop)))
      (output-put-bytes! out continue-line)
      (finish! loop conn #f #f))))

(define (feed-chunked! loop conn bv start end)
  ;; Decode BV [start, end) of the connection's chunked body; answer the
  ;; request once the body is complete and serve what follows it.
  (let* ((decoder+collected (connection-body conn))
         (collected (cdr decoder+collected)))
    (call-with-values
        (lambda ()
          (decode-chunked! (car decoder+collected) bv start end
                           (lambda (bv start count)
                             (output-put-slice! collected bv start count))))
      (lambda (status index)
        (cond
         ((eq? status 'done)
          (let ((request (connection-request conn))
                (body (bytevector-copy-range (output-bytes collected) 0
                                             (output-fill collected))))
            (set-connection-request! conn #f)
            (set-connection-body! conn #f)
            (set-connection-state! conn 'idle)
            (when (after-respond! loop conn
                                  (respond! loop conn request
                                            (and (> (bytevector-length body) 0) body))
                                  bv index end)
              (serve-input! loop conn bv index end))))
         ((eq? status 'more)
          (unless (eq? (connection-state conn) 'chunked)
            (continue-if-expected! loop conn (connection-request conn))
            (set-connection-state! conn 'chunked))
          (set-deadline! loop conn (settings-body-ms (loop-settings loop)))
          (finish! loop conn #f #f))
         (else
          (refuse! loop conn (connection-request conn)
                   (http-error-status status) (http-error-reason status))))))))

(define (read-chunked! loop conn)
  (let ((n (read-into! loop conn (loop-input-address loop) 0 input-size)))
    (cond
     ((> n 0) (feed-chunked! loop conn (loop-input loop) 0 n))
     ((= n (- errno-EAGAIN)) #t)
     (else (close-connection! loop conn)))))

(define (hand-off-call! loop conn request framing bv start end)
  ;; Hand CONN to a thread that calls the handler with the body of
  ;; REQUEST as a port; BV [START, END) are the bytes after its head.
  (let* ((settings (loop-settings loop))
         (out-fd (connection-out-fd conn))
         (continue? (and (assq 'expect (request-headers request))
                         (equal? (request-version request) '(1 . 1))
                         ;; The whole body came with the head: the client
                         ;; did not wait, nothing to say.
                         (not (and (integer? framing) (>= (- end start) framing)))))
         (reader (make-body-reader
                  (connection-fd conn) framing bv start end
                  #:timeout (/ (settings-body-ms settings) 1000)
                  #:max-body (settings-max-body settings)
                  #:transport (connection-transport conn)
                  #:continue (and continue?
                                  (lambda ()
                                    (write-all! out-fd continue-line 0
                                                (bytevector-length continue-line)
                                                (/ (settings-write-ms settings) 1000)
                                                (connection-transport conn)))))))
    (set-connection-input! conn #f)
    (hand-off! loop conn
               (make-job #:conn conn #:kind 'call #:request request #:reader reader
                         #:close? (or (not (request-keep-alive? request))
                                      (and (loop-drain-deadline loop) #t))
                         #:state (loop-state loop)))))

;;; (plucky server request) ends here
