;;; (plucky server output) --- sending a connection's answers

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The last step of a request (see (plucky server loop) for the whole
;;; flow): `write-output!' sends what the requests of one read produced,
;;; the loop's shared output buffer, with one write(2); a large body
;;; leaves with the head in one writev(2) (`flush-with-body!'), a file
;;; body after it with sendfile(2) (`flush-with-file!').  What the
;;; socket does not take is copied into the connection's pending list
;;; (the shared buffer is overwritten by the next answer), and
;;; `send-pending!' sends the rest, in order, as the socket takes it.
;;; What the connection does meanwhile and then (state writing, close,
;;; linger, takeover, next request) is (plucky server http1)'s.  Bytes
;;; go through the connection's transport (plucky server transport),
;;; never straight to libc.
;;;
;;; Code:

(define-module (plucky server output)
  #:use-module (rnrs bytevectors)
  #:use-module (ice-9 match)
  #:use-module ((plucky sys libc)
                #:select (bytevector-address fd-read make-iovecs iovec-set! errno-EAGAIN))
  #:use-module ((plucky sys epoll) #:select (EPOLLIN EPOLLOUT))
  #:use-module ((plucky http response)
                #:select (output-bytes output-address output-fill output-reset!
                          set-output-address-procedure!))
  #:use-module ((plucky server probe) #:select (timed-write))
  #:use-module (plucky server transport)
  #:use-module (plucky server connection)
  #:export (queue-output!
            write-output!
            flush-with-body!
            flush-with-file!
            send-pending!))

;; Outputs record their bytes' address for the writes below: the http
;; layer has no FFI to find it (see `make-output').
(set-output-address-procedure! bytevector-address)

(define (queue-output! loop conn bv start end)
  "Keep BV [START, END) to send on CONN after what is queued already.
The loop's shared output buffer is copied: the next response will
overwrite it."
  (let ((entry (if (eq? bv (output-bytes (loop-output loop)))
                   (cons* (bytevector-copy-range bv start end) 0 (- end start))
                   (cons* bv start end))))
    (set-connection-pending!
     conn (append (connection-pending conn) (list entry)))))

(define (queue-file! conn body)
  (set-connection-pending! conn (append (connection-pending conn) (list body))))

(define iovecs
  ;; Two struct iovec, for a head and a large body (`flush-with-body!'):
  ;; only the loop's thread sends (a pool thread writes through (plucky
  ;; server stream)), and one loop runs per process.
  (make-iovecs 2))
(define iovecs-address (bytevector-address iovecs))

(define (write-output! loop conn)
  ;; Send the shared output buffer, unless output is queued already (then
  ;; queue it behind).  -> #f when the client is gone, else #t; what the
  ;; socket did not take is queued.
  (send-output! loop conn (transport-write (connection-transport conn))))

(define (send-output! loop conn write)
  ;; `write-output!' through WRITE, the transport's write or write-more.
  (let* ((out (loop-output loop))
         (fill (output-fill out)))
    (cond
     ((zero? fill) #t)
     ((pair? (connection-pending conn))
      (queue-output! loop conn (output-bytes out) 0 fill)
      (output-reset! out)
      #t)
     (else
      (let ((n (timed-write (loop-probe loop)
                            (write (connection-out-fd conn) (output-address out) 0 fill))))
        (cond
         ((= n fill) (output-reset! out) #t)
         ((or (>= n 0) (= n (- errno-EAGAIN)))
          (queue-output! loop conn (output-bytes out) (max n 0) fill)
          (output-reset! out)
          #t)
         (else
          ;; The client is gone (EPIPE, ECONNRESET): nothing to send to.
          (output-reset! out)
          (set-connection-pending! conn '())
          #f)))))))

(define (flush-with-body! loop conn body)
  "Send the output buffer and BODY, a bytevector, on CONN with one
writev(2); queue whatever the socket does not take.  Return nothing."
  (let* ((out (loop-output loop))
         (fill (output-fill out)))
    (if (pair? (connection-pending conn))
        (begin
          (queue-output! loop conn (output-bytes out) 0 fill)
          (queue-output! loop conn body 0 (bytevector-length body))
          (output-reset! out))
        (begin
          (iovec-set! iovecs 0 (output-address out) fill)
          (iovec-set! iovecs 1 (bytevector-address body) (bytevector-length body))
          (let* ((n (timed-write (loop-probe loop)
                                 ((transport-writev (connection-transport conn))
                                  (connection-out-fd conn) iovecs-address 2)))
                 (n (if (< n 0) (if (= n (- errno-EAGAIN)) 0 #f) n)))
            (cond
             ((not n)
              (output-reset! out)
              (set-connection-close-after! conn #t)
              (set-connection-pending! conn '()))
             (else
              (when (< n fill)
                (queue-output! loop conn (output-bytes out) n fill))
              (let ((sent (max 0 (- n fill))))
                (when (< sent (bytevector-length body))
                  (queue-output! loop conn body sent (bytevector-length body))))
              (output-reset! out))))))))

(define (write-head-more! loop conn)
  ;; `write-output!' for the head of a file body that is sent next:
  ;; through the transport's write-more (MSG_MORE on a plain socket), so
  ;; that the head does not leave alone in a segment of its own (with
  ;; TCP_NODELAY it would) but with the file's first bytes, as nginx's
  ;; TCP_CORK around writev and sendfile does with two syscalls more
  ;; (bench/static's 50k).  -> #f when the client is gone, else #t
  (send-output! loop conn (transport-write-more (connection-transport conn))))

(define (flush-with-file! loop conn body)
  "Send the output buffer on CONN, then as much of BODY, a <file-body>,
as the socket takes now; queue the rest.  Return nothing."
  (cond
   ((not (if (> (file-body-length body) 0)
             (write-head-more! loop conn)
             (write-output! loop conn)))
    (close-file-body! body)
    (set-connection-close-after! conn #t))
   ((pair? (connection-pending conn))
    (queue-file! conn body))
   (else
    (case (send-file! conn body)
      ((done) (close-file-body! body))
      ((again) (queue-file! conn body))
      (else
       (close-file-body! body)
       (set-connection-close-after! conn #t))))))

(define file-step
  ;; Bytes per sendfile(2): a socket takes less than this at a time, and
  ;; a larger count only makes the kernel look further into the file.
  (* 1024 1024))

(define copy-buffer
  ;; For a transport without sendfile: the file's bytes pass through here
  ;; on their way to the transport's write.  Only the loop's thread sends
  ;; files.
  (make-bytevector 65536))
(define copy-buffer-address (bytevector-address copy-buffer))

(define (copy-file! conn body)
  ;; `send-file!' for a transport that cannot sendfile(2) (TLS): read
  ;; from the file at the body's offset and write what was read; a short
  ;; write re-reads the rest next time.  -> done | again | error
  (let ((write (transport-write (connection-transport conn)))
        (out-fd (connection-out-fd conn))
        (fd (file-body-fd body)))
    (let lp ()
      (let* ((offset (file-body-offset body))
             (left (- (file-body-end body) offset)))
        (if (<= left 0)
            'done
            (let ((got (begin
                         ;; The descriptor may be shared (an open-file
                         ;; cache): position it each time.
                         (seek fd offset SEEK_SET)
                         (fd-read fd copy-buffer-address 0
                                  (min left (bytevector-length copy-buffer))))))
              (if (<= got 0)
                  'error                ; the file is shorter than it was said to be
                  (let ((n (write out-fd copy-buffer-address 0 got)))
                    (cond
                     ((> n 0)
                      (set-file-body-offset! body (+ offset n))
                      (lp))
                     ((= n (- errno-EAGAIN)) 'again)
                     (else 'error))))))))))

(define (send-file! conn body)
  ;; Send BODY with sendfile(2) until it is out or the socket is full;
  ;; through `copy-file!' when the transport cannot sendfile (TLS).
  ;; -> done | again | error
  (let ((sendfile (transport-sendfile (connection-transport conn)))
        (out-fd (connection-out-fd conn)))
    (if (not sendfile)
        (copy-file! conn body)
        (let lp ()
          (let* ((offset (file-body-offset body))
                 (left (- (file-body-end body) offset)))
            (if (<= left 0)
                'done
                (let ((n (sendfile out-fd (file-body-fd body) offset
                                   (min left file-step))))
                  (cond
                   ((> n 0)
                    (set-file-body-offset! body (+ offset n))
                    (lp))
                   ((= n (- errno-EAGAIN)) 'again)
                   ;; 0: the file is shorter than it was said to be
                   (else 'error)))))))))

(define (send-pending! loop conn)
  "Send CONN's queued output in order, as much as the socket takes now.
Return done (all sent), again (the socket is full; the deadline is
pushed back when some was sent) or error (the client is gone)."
  (let lp ((pending (connection-pending conn)))
    (match pending
      (()
       (set-connection-pending! conn '())
       'done)
      (((bv start . end) . rest)
       (let ((n ((transport-write (connection-transport conn))
                 (connection-out-fd conn) (bytevector-address bv) start
                 (- end start))))
         (cond
          ((= n (- end start)) (lp rest))
          ((or (>= n 0) (= n (- errno-EAGAIN)))
           (set-connection-pending! conn (cons (cons* bv (+ start (max n 0)) end) rest))
           (when (> n 0)
             (set-deadline! loop conn (settings-write-ms (loop-settings loop))))
           'again)
          (else 'error))))
      ((body . rest)
       (let ((before (file-body-offset body)))
         (case (send-file! conn body)
           ((done)
            (close-file-body! body)
            ;; Out of the pending list at once: if a later entry fails,
            ;; `close-connection!' must not close this body again.
            (set-connection-pending! conn rest)
            (lp rest))
           ((again)
            (set-connection-pending! conn pending)
            (when (> (file-body-offset body) before)
              (set-deadline! loop conn (settings-write-ms (loop-settings loop))))
            'again)
           (else 'error)))))))

;;; (plucky server output) ends here
