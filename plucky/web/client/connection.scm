;;; (plucky web client connection) --- a connection to a server that waits by suspending

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A <connection> is a bare non-blocking socket descriptor (no Guile
;;; port: no port buffers, no finalizer that closes it behind our back),
;;; an optional GnuTLS session over it, and the buffer the response is
;;; read into.  Every operation that would block waits instead with
;;; (plucky server suspend)'s `wait-readable'/`wait-writable': a handler
;;; the loop runs suspends there, its worker serving other requests;
;;; anything else blocks in poll(2).
;;;
;;;   open-connection: resolve -> socket -> connect: -EINPROGRESS
;;;                    -> wait-writable -> SO_ERROR -> (TLS handshake)
;;;   connection-write!  send what fits, wait-writable, send the rest
;;;   connection-fill!   read what has come into the buffer, or wait
;;;
;;; Time: each exchange carries a <timeouts>: a limit per wait
;;; (connect, read) and an optional deadline for the whole exchange.
;;; Each wait is given the smaller of the two that are left; when it
;;; times out, the condition says which ran out (read-timeout or
;;; timeout).
;;;
;;; Closing is the caller's business and deterministic: the exchange
;;; closes its connection in an exception handler, not a `dynamic-wind'
;;; (a handler that suspends leaves its dynamic extent through the
;;; loop's prompt, which would run the after thunk at every wait).
;;;
;;; TLS: GnuTLS drives the descriptor itself and raises error/again
;;; where it would block.  A record read or sent says its direction;
;;; the handshake does not (guile-gnutls lacks record-get-direction),
;;; so there it waits for writing when the socket cannot take bytes and
;;; for reading otherwise: the handshake's flights are a few kilobytes,
;;; far under a new socket's send buffer, so a send that found it full
;;; is not a case that arises.  A record is decrypted whole into a
;;; scratch buffer of the largest record's size, so no plaintext stays
;;; in the session where poll(2) cannot see it (GnuTLS reads the socket
;;; one record at a time: see plucky/server/tls.scm).
;;;
;;; Code:

(define-module (plucky web client connection)
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-11)
  #:use-module (rnrs bytevectors)
  #:use-module (ice-9 match)
  #:use-module ((ice-9 binary-ports) #:select (get-bytevector-all))
  #:use-module ((ice-9 ftw) #:select (scandir))
  #:use-module (ice-9 threads)
  #:use-module (gnutls)
  #:use-module ((web client) #:select (x509-certificate-directory))
  #:use-module ((plucky sys libc)
                #:select (bytevector-address fd-read fd-send fd-close fd-wait
                          fd-socket fd-connect fd-socket-error
                          sockaddr->bytevector fd-set-tcp-nodelay!
                          errno-EAGAIN))
  #:use-module ((plucky server)
                #:select (wait-readable wait-writable blocking release-descriptor!))
  #:use-module (plucky web client error)
  #:export (make-timeouts
            timeouts?
            now-ms

            open-connection
            fd->connection
            connection?
            connection-fd
            connection-origin
            connection-buffer
            connection-start
            set-connection-start!
            connection-end
            connection-reused?
            set-connection-reused!
            connection-idle-since
            set-connection-idle-since!
            connection-closed?
            connection-fill!
            connection-read-into!
            connection-write!
            connection-close!
            connection-readable-now?))

;;;
;;; Time
;;;

(define ticks-per-ms (quotient internal-time-units-per-second 1000))

(define (now-ms)
  "Return a monotonic clock's milliseconds."
  ;; A division of the ticks (nanoseconds), where the ticks times 1000
  ;; were a bignum: two allocations a call, several calls an exchange
  ;; (bench/instructions-proxy).
  (quotient (get-internal-real-time) ticks-per-ms))

(define-record-type <timeouts>
  (%make-timeouts connect-ms read-ms deadline)
  timeouts?
  (connect-ms timeouts-connect-ms)      ; per connection attempt, or #f
  (read-ms timeouts-read-ms)            ; per wait for bytes to come or leave, or #f
  (deadline timeouts-deadline))         ; `now-ms' when the exchange must end, or #f

(define* (make-timeouts #:key (connect-ms #f) (read-ms #f) (total-ms #f))
  "Return the time limits of one exchange, starting now: CONNECT-MS for
making a connection, READ-MS for each wait for bytes to come or leave,
TOTAL-MS for the whole exchange; #f for no limit."
  (%make-timeouts connect-ms read-ms (and total-ms (+ (now-ms) total-ms))))

(define-record-type <connection>
  (%make-connection fd session origin label uri buffer address start end scratch
                    reused? idle-since closed?)
  connection?
  (fd connection-fd)
  (session connection-session set-connection-session!) ; GnuTLS session, or #f
  (origin connection-origin)            ; "https://host:port", the pool's key
  (label connection-label)              ; what the status page calls the waits
  (uri connection-uri)                  ; for the conditions: the first URI asked
  ;; Received bytes not yet consumed are BUFFER [START, END).
  (buffer connection-buffer set-connection-buffer!)
  (address connection-address set-connection-address!) ; of BUFFER
  (start connection-start set-connection-start!)
  (end connection-end set-connection-end!)
  (scratch connection-scratch)          ; a record's worth, for TLS; or #f
  (reused? connection-reused? set-connection-reused!) ; taken from the pool
  (idle-since connection-idle-since set-connection-idle-since!) ; now-ms, in the pool
  (closed? connection-closed? set-connection-closed!))

(define (wait-limit per-wait deadline)
  ;; -> (values ms total?): the time a wait may take, and whether it is
  ;; the whole exchange's deadline that bounds it
  (let ((left (and deadline (max 0 (- deadline (now-ms))))))
    (cond
     ((not left) (values per-wait #f))
     ((or (not per-wait) (<= left per-wait)) (values left #t))
     (else (values per-wait #f)))))

(define (wait-for conn write? per-wait timeouts on-timeout uri)
  ;; Wait until CONN's socket is ready; raise ON-TIMEOUT (a reason), or
  ;; `timeout' when the exchange's deadline ran out first.
  (let-values (((ms total?) (wait-limit per-wait (timeouts-deadline timeouts))))
    (unless ((if write? wait-writable wait-readable)
             (connection-fd conn) #:timeout-ms ms #:label (connection-label conn))
      (if total?
          (raise-client-error 'timeout "the exchange took longer than its #:timeout-ms"
                              #:uri uri)
          (raise-client-error on-timeout
                              (case on-timeout
                                ((connect-timeout) "no connection within #:connect-timeout-ms")
                                ((write-timeout) "the server took nothing within #:read-timeout-ms")
                                (else "the server sent nothing within #:read-timeout-ms"))
                              #:uri uri)))))

;;;
;;; The connection
;;;

(define initial-buffer-size 16384)

;; The most plaintext a TLS record carries.
(define record-size 16384)

(define (connection-close! conn)
  "Close CONN's descriptor, once, without waiting: a TLS session is
dropped without close_notify, which a server's reading of a completed
response does not need.  Return nothing."
  (unless (connection-closed? conn)
    (set-connection-closed! conn #t)
    ;; out of the loop's epoll set first, where its waits left it
    (release-descriptor! (connection-fd conn))
    (fd-close (connection-fd conn)))
  (values))

(define (connection-readable-now? conn)
  "True when CONN's socket has bytes or an end of file waiting: for an
idle connection, the sign that the server closed it (or sent what it
should not have)."
  (fd-wait (connection-fd conn) 'read 0))

;;;
;;; Connecting
;;;

(define (numeric-host? host)
  (or (false-if-exception (inet-pton AF_INET host))
      (false-if-exception (inet-pton AF_INET6 host))))

(define (resolve host port uri)
  ;; -> list of socket addresses.  A name is resolved on a compute
  ;; thread (getaddrinfo blocks); a numeric address needs no look-up.
  (define (lookup flags)
    (catch 'getaddrinfo-error
      (lambda ()
        (map addrinfo:addr
             (getaddrinfo host (number->string port) flags 0 SOCK_STREAM)))
      (lambda (key code)
        (raise-client-error 'resolve-failed
                            (string-append "cannot resolve " host ": "
                                           (gai-strerror code))
                            #:uri uri))))
  (if (numeric-host? host)
      (lookup (logior AI_NUMERICHOST AI_NUMERICSERV))
      (blocking (lambda () (lookup AI_NUMERICSERV)))))

(define (connect-one address deadline label uri)
  ;; -> descriptor connected to ADDRESS, or (values #f reason message)
  (let ((fd (fd-socket (sockaddr:fam address))))
    (if (< fd 0)
        (values #f 'connect-failed (strerror (- fd)))
        (let ((r (fd-connect fd (sockaddr->bytevector address))))
          (define (fail reason message)
            (release-descriptor! fd)
            (fd-close fd)
            (values #f reason message))
          (define (result errno)
            (cond
             ((zero? errno) (fd-set-tcp-nodelay! fd) fd)
             ((= errno (- ECONNREFUSED)) (fail 'connect-refused "connection refused"))
             (else (fail 'connect-failed (strerror (- errno))))))
          (cond
           ((not (= r (- EINPROGRESS))) (result r))
           ((with-exception-handler
                (lambda (e) (release-descriptor! fd) (fd-close fd) (raise-exception e))
              (lambda ()
                (wait-writable fd #:timeout-ms (and deadline (max 0 (- deadline (now-ms))))
                               #:label label))
              #:unwind? #t)
            (result (fd-socket-error fd)))
           (else (fail 'connect-timeout "no connection within #:connect-timeout-ms")))))))

(define (connect-any addresses timeouts label uri)
  ;; Try ADDRESSES in turn: -> descriptor; raise the last one's failure.
  (let* ((total (timeouts-deadline timeouts))
         (connect (and (timeouts-connect-ms timeouts)
                       (+ (now-ms) (timeouts-connect-ms timeouts))))
         (deadline (if (and total connect) (min total connect) (or total connect))))
    (let lp ((addresses addresses) (reason 'resolve-failed) (message "no address"))
      (match addresses
        (()
         (raise-client-error (if (and (eq? reason 'connect-timeout) total
                                      (or (not connect) (< total connect)))
                                 'timeout       ; the exchange's limit ran out first
                                 reason)
                             (string-append "cannot connect to " label ": " message)
                             #:uri uri))
        ((address . rest)
         (call-with-values (lambda () (connect-one address deadline label uri))
           (case-lambda
             ((fd) fd)
             ((fd reason message)
              (if (eq? reason 'connect-timeout)
                  (lp '() reason message)       ; no time left for the others
                  (lp rest reason message))))))))))

(define* (fd->connection fd #:key (origin "socket") (label #f) (uri #f))
  "Return a plain <connection> over FD, a connected non-blocking stream
socket opened elsewhere (a socketpair in the tests), pooled under
ORIGIN.  Closing the connection closes FD."
  (let ((buffer (make-bytevector initial-buffer-size)))
    (%make-connection fd #f origin label uri buffer (bytevector-address buffer)
                      0 0 #f #f #f #f)))

(define* (open-connection host port tls? #:key timeouts (verify-certificate? #t)
                          (uri #f) (label #f))
  "Return a new <connection> to HOST (a name or an address) on PORT,
over TLS when TLS? (verifying the server's certificate against
`x509-certificate-directory' when VERIFY-CERTIFICATE?), its waits named
LABEL on the status page.  Raise an
&http-client-error when it cannot be made within TIMEOUTS."
  (let* ((origin (string-append (if tls? "https://" "http://") host ":"
                                (number->string port)))
         (label (or label (string-append "upstream " host ":" (number->string port))))
         (fd (connect-any (resolve host port uri) timeouts label uri))
         (buffer (make-bytevector initial-buffer-size))
         (conn (%make-connection fd #f origin label uri buffer (bytevector-address buffer)
                                 0 0 (and tls? (make-bytevector record-size))
                                 #f #f #f)))
    (when tls?
      (with-exception-handler
          (lambda (e) (connection-close! conn) (raise-exception e))
        (lambda () (start-tls! conn host timeouts verify-certificate?))
        #:unwind? #t))
    conn))

;;;
;;; TLS
;;;

;; Credentials per certificate directory, read once: loading a system's
;; few hundred authorities takes longer than most exchanges.
(define credentials-cache (make-hash-table))
(define credentials-mutex (make-mutex))

(define (trust-credentials directory)
  (with-mutex credentials-mutex
    (or (hash-ref credentials-cache directory)
        (let ((credentials (make-certificate-credentials)))
          (when (file-is-directory? directory)
            (for-each (lambda (file)
                        (let ((path (string-append directory "/" file)))
                          (when (and (or (string-suffix? ".pem" file)
                                         (string-suffix? ".crt" file))
                                     (file-exists? path)) ; not a dangling link
                            (false-if-exception
                             (set-certificate-credentials-x509-trust-data!
                              credentials
                              (call-with-input-file path
                                get-bytevector-all
                                #:binary #t)
                              x509-certificate-format/pem)))))
                      (or (scandir directory) '())))
          (hash-set! credentials-cache directory credentials)
          credentials))))

(define-syntax-rule (with-tls-again conn timeouts direction expression)
  ;; EXPRESSION's value, waiting and calling again while GnuTLS says
  ;; error/again; DIRECTION is 'read, 'write or 'handshake.
  (let retry ()
    (catch 'gnutls-error
      (lambda () expression)
      (lambda (key err . rest)
        (cond
         ((or (eq? err error/again) (eq? err error/interrupted))
          (let ((write? (case direction
                          ((read) #f)
                          ((write) #t)
                          (else (not (fd-wait (connection-fd conn) 'write 0))))))
            (wait-for conn write?
                      (if (eq? direction 'handshake)
                          (timeouts-connect-ms timeouts)
                          (timeouts-read-ms timeouts))
                      timeouts
                      (if write? 'write-timeout 'read-timeout)
                      (connection-uri conn))
            (retry)))
         (else (apply throw key err rest)))))))

(define (start-tls! conn host timeouts verify?)
  (let ((session (make-session connection-end/client))
        (uri (connection-uri conn)))
    (unless (numeric-host? host)
      (set-session-server-name! session server-name-type/dns host))
    (set-session-priorities! session "NORMAL:-VERS-SSL3.0:-VERS-TLS1.0:-VERS-TLS1.1")
    (set-session-credentials! session
                              (if verify?
                                  (trust-credentials (x509-certificate-directory))
                                  (make-certificate-credentials)))
    (set-session-transport-fd! session (connection-fd conn))
    (set-connection-session! conn session)
    (catch 'gnutls-error
      (lambda ()
        (let handshake! ()
          (catch 'gnutls-error
            (lambda () (with-tls-again conn timeouts 'handshake (handshake session)))
            (lambda (key err . rest)
              ;; As Guile's client: a warning alert (unrecognized_name)
              ;; does not end the handshake.
              (if (eq? err error/warning-alert-received)
                  (handshake!)
                  (apply throw key err rest))))))
      (lambda (key err . rest)
        (raise-client-error 'tls-failed
                            (string-append "TLS handshake with " host " failed: "
                                           (error->string err))
                            #:uri uri)))
    (when verify?
      (verify-certificate session host uri))))

(define (verify-certificate session host uri)
  (let ((chain (session-peer-certificate-chain session)))
    (when (null? chain)
      (raise-client-error 'certificate (string-append host " sent no certificate")
                          #:uri uri))
    (let ((cert (import-x509-certificate (car chain) x509-certificate-format/der)))
      (unless (x509-certificate-matches-hostname? cert host)
        (raise-client-error 'certificate
                            (string-append "the certificate is not for " host)
                            #:uri uri #:irritants (list (x509-certificate-dn cert))))
      (let ((statuses (peer-certificate-status session)))
        (unless (null? statuses)
          (raise-client-error 'certificate
                              (string-append "the certificate of " host
                                             " does not verify")
                              #:uri uri
                              #:irritants (map certificate-status->string statuses)))))))

;;;
;;; Reading and writing
;;;

(define (reserve! conn room)
  ;; Make room for ROOM more bytes after END: move the pending bytes to
  ;; the front, or grow the buffer.
  (let* ((buffer (connection-buffer conn))
         (start (connection-start conn))
         (end (connection-end conn))
         (pending (- end start)))
    (when (< (- (bytevector-length buffer) end) room)
      (let ((target (if (<= (+ pending room) (bytevector-length buffer))
                        buffer
                        (make-bytevector (max (* 2 (bytevector-length buffer))
                                              (+ pending room))))))
        (bytevector-copy! buffer start target 0 pending)
        (unless (eq? target buffer)
          (set-connection-buffer! conn target)
          (set-connection-address! conn (bytevector-address target)))
        (set-connection-start! conn 0)
        (set-connection-end! conn pending)))))

(define (connection-fill! conn timeouts)
  "Read what the server has sent into CONN's buffer, waiting for it
within TIMEOUTS.  Return the number of bytes added, 0 at end of file.
Raise an &http-client-error on a time-out; a reset connection is an end
of file."
  (when (= (connection-start conn) (connection-end conn))
    (set-connection-start! conn 0)
    (set-connection-end! conn 0))
  (if (connection-session conn)
      (tls-fill! conn timeouts)
      (begin
        (reserve! conn 4096)
        (let* ((end (connection-end conn))
               (n (read-waiting conn (connection-address conn) end
                                (- (bytevector-length (connection-buffer conn)) end)
                                timeouts)))
          (set-connection-end! conn (+ end n))
          n))))

(define (read-waiting conn address start count timeouts)
  ;; -> bytes read from CONN's socket to ADDRESS + START, at most COUNT,
  ;; waiting for them within TIMEOUTS; 0 at end of file
  (let lp ()
    (let ((n (fd-read (connection-fd conn) address start count)))
      (cond
       ((> n 0) n)
       ((zero? n) 0)
       ((= n (- errno-EAGAIN))
        (wait-for conn #f (timeouts-read-ms timeouts) timeouts 'read-timeout
                  (connection-uri conn))
        (lp))
       ((= n (- ECONNRESET)) 0)
       (else
        (raise-client-error 'closed (string-append "reading: " (strerror (- n)))
                            #:uri (connection-uri conn)))))))

(define (connection-read-into! conn bv start count timeouts)
  "Read what the server sends next, at most COUNT bytes, into BV at
START, waiting within TIMEOUTS; CONN's buffer must be empty.  Return the
number of bytes read, 0 at end of file.  A plain connection reads
straight into BV, without the buffer's copy (a body read whole)."
  (if (connection-session conn)
      (let ((n (min count (connection-fill! conn timeouts)))
            (from (connection-start conn)))
        (bytevector-copy! (connection-buffer conn) from bv start n)
        (set-connection-start! conn (+ from n))
        n)
      (let ((n (read-waiting conn (bytevector-address bv) start count timeouts)))
        ;; BV must live until the read has filled it.
        (bytevector-length bv)
        n)))

(define (tls-fill! conn timeouts)
  (let* ((scratch (connection-scratch conn))
         (n (catch 'gnutls-error
              (lambda ()
                (with-tls-again conn timeouts 'read
                                (record-receive! (connection-session conn) scratch)))
              (lambda (key err . rest)
                ;; A server that closes without close_notify after a
                ;; response ends its bytes as one that sends it.
                (if (eq? err error/premature-termination)
                    0
                    (raise-client-error 'closed
                                        (string-append "reading: " (error->string err))
                                        #:uri (connection-uri conn)))))))
    (when (> n 0)
      (reserve! conn n)
      (bytevector-copy! scratch 0 (connection-buffer conn) (connection-end conn) n)
      (set-connection-end! conn (+ (connection-end conn) n)))
    n))

(define (connection-write! conn bv timeouts)
  "Send all of BV on CONN, waiting within TIMEOUTS while the socket
cannot take more.  Return nothing; raise an &http-client-error
(write-failed, write-timeout, timeout) when it cannot."
  (define (failed message)
    (raise-client-error 'write-failed (string-append "sending the request: " message)
                        #:uri (connection-uri conn)))
  (let ((total (bytevector-length bv)))
    (if (connection-session conn)
        (let lp ((start 0))
          (when (< start total)
            (let* ((count (min record-size (- total start)))
                   (piece (if (and (zero? start) (= count total))
                              bv
                              (let ((p (make-bytevector count)))
                                (bytevector-copy! bv start p 0 count)
                                p)))
                   (n (catch 'gnutls-error
                        (lambda ()
                          (with-tls-again conn timeouts 'write
                                          (record-send (connection-session conn) piece)))
                        (lambda (key err . rest) (failed (error->string err))))))
              (lp (+ start n)))))
        (let ((address (bytevector-address bv)))
          (let lp ((start 0))
            (when (< start total)
              (let ((n (fd-send (connection-fd conn) address start (- total start))))
                (cond
                 ((>= n 0) (lp (+ start n)))
                 ((= n (- errno-EAGAIN))
                  (wait-for conn #t (timeouts-read-ms timeouts) timeouts 'write-timeout
                            (connection-uri conn))
                  (lp start))
                 (else (failed (strerror (- n))))))))
          ;; BV must live until the last send has read it.
          (bytevector-length bv))))
  (values))

;;; (plucky web client connection) ends here
