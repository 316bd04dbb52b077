;;; (plucky server tls) --- HTTPS: a TLS transport over GnuTLS

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A TLS connection is a plain socket whose bytes go through a GnuTLS
;;; session: `tls-transport-maker' returns the procedure `run-loop' calls
;;; on each accepted descriptor (its #:make-transport), and the transport
;;; it makes (plucky server transport) keeps the loop's conventions, a
;;; count of bytes or a negated errno, -EAGAIN where the socket is not
;;; ready.  The session is made and driven through (plucky sys gnutls):
;;; guile-gnutls gives no way to its gnutls_session_t, and lacks tickets,
;;; the session cache, ALPN and OCSP stapling.  The loop knows nothing of
;;; TLS:
;;;
;;;  - the first read looks at the first byte: a TLS connection starts
;;;    with a handshake record, plain HTTP with a method in capitals,
;;;    answered 400 (as nginx does) rather than with a reset.
;;;  - the handshake runs inside the first reads: each read goes on with
;;;    it until it is done, then reads records.  Its time counts against
;;;    the header time-out the loop sets at accept, so a client that
;;;    sends nothing or half a ClientHello is closed like a slowloris one.
;;;  - GnuTLS's calls return GNUTLS_E_AGAIN where the socket is not
;;;    ready.  A record it could not send is kept in the session and must
;;;    be sent by calling again; the loop, told -EAGAIN, calls again with
;;;    the same bytes, however it has cut them since.  So the transport
;;;    counts the bytes GnuTLS took but the loop has not been told of
;;;    (CREDIT), and answers the loop's next writes from that count once
;;;    the record is out.
;;;  - a record is decrypted whole: when the loop's buffer cannot hold
;;;    it, the rest stays in the session where epoll cannot see it, and
;;;    PENDING? tells the loop to read again at once.  GnuTLS reads the
;;;    socket one record at a time, so a read that leaves nothing in the
;;;    session leaves the next record in the socket, where epoll sees it.
;;;  - files are not sent with sendfile(2) (the process encrypts them):
;;;    the transport has no SENDFILE and the loop reads and writes them.
;;;  - PROTOCOL is what ALPN agreed (`alpn-protocols' is what is offered).
;;;
;;; Resumption (`make-tls-resumption', made by the master before it
;;; forks): a ticket master key, from which GnuTLS derives the key of
;;; each period, the same in every worker and after a reload; and a
;;; cache of TLS 1.2 sessions by ID in memory the workers share
;;; (plucky server tls-cache).
;;;
;;; `load-tls-credentials' reads certificates and keys (PEM), several
;;; pairs for several names: GnuTLS chooses by the name the client asks
;;; for (SNI), and an OCSP response to staple for each.  Its errors name
;;; the file.
;;;
;;; Code:

(define-module (plucky server tls)
  #:use-module ((srfi srfi-1) #:select (filter-map))
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-11)
  #:use-module (rnrs bytevectors)
  #:use-module (ice-9 binary-ports)
  ;; guile-gnutls reads the files alone, for messages naming the one
  ;; that is wrong; sessions are made through (plucky sys gnutls).
  #:use-module ((gnutls) #:select (import-x509-certificate import-x509-private-key
                                   pkcs8-import-x509-private-key
                                   x509-certificate-format/pem error->string))
  #:use-module (plucky sys gnutls)
  #:use-module ((plucky sys libc)
                #:select (bytevector-address address->bytevector fd-read fd-peek fd-send fd-close fd-ack-now!
                          fd-shutdown-write errno-EAGAIN errno-ECONNRESET errno-EPIPE))
  #:use-module (plucky server tls-cache)
  #:use-module (plucky server transport)
  #:export (tls-priorities
            load-tls-credentials
            free-tls-credentials!
            tls-credentials?
            make-tls-resumption
            tls-resumption?
            alpn-protocols
            tls-transport-maker))

(define tls-priorities
  ;; TLS 1.3 and 1.2 only; forward-secret key exchange on elliptic
  ;; curves, X25519 first (no static RSA, no finite-field DH: no FFDHE
  ;; group in 1.3 either) and AEAD ciphers only; the server's order.
  ;; X25519 first: the one key share curl, Python and browsers' first
  ;; ClientHello send, which a server preferring another group answers
  ;; with a HelloRetryRequest, a round trip more.
  (string-append "SECURE128:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
                 ":-RSA:-DHE-RSA:-DHE-DSS:-CIPHER-ALL"
                 ":+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305"
                 ":-MAC-ALL:+AEAD"
                 ":-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1"
                 ":%SERVER_PRECEDENCE"))

(define record-size
  ;; The most plaintext one TLS record carries: what one send encrypts.
  16384)

;;;
;;; Credentials
;;;

(define (file-error file fmt . args)
  ;; Raise an error whose message, on one line, names FILE.
  (scm-error 'misc-error #f "~a: ~a" (list file (apply format #f fmt args)) #f))

(define (read-file file)
  (catch 'system-error
    (lambda () (call-with-input-file file get-bytevector-all #:binary #t))
    (lambda (key proc fmt args . rest)
      (file-error file "~a" (strerror (system-error-errno (cons key (cons proc (cons fmt (cons args rest))))))))))

(define (gnutls-message thunk on-error)
  (catch 'gnutls-error thunk
    (lambda (key err . rest) (on-error (error->string err)))))

(define (check-pair! cert key)
  ;; Each file alone first, for a message naming the one that is wrong.
  (let ((cert-bytes (read-file cert))
        (key-bytes (read-file key)))
    (when (eof-object? cert-bytes) (file-error cert "empty"))
    (when (eof-object? key-bytes) (file-error key "empty"))
    (gnutls-message
     (lambda () (import-x509-certificate cert-bytes x509-certificate-format/pem))
     (lambda (why) (file-error cert "not a PEM certificate (~a)" why)))
    (gnutls-message
     (lambda () (import-x509-private-key key-bytes x509-certificate-format/pem))
     (lambda (why)
       (gnutls-message
        (lambda () (pkcs8-import-x509-private-key key-bytes x509-certificate-format/pem))
        (lambda (why) (file-error key "not a PEM private key (~a)" why)))))
    (let ((expiry (certificate-not-after cert-bytes)))
      (when (and expiry (< expiry (current-time)))
        (file-error cert "the certificate expired on ~a"
                    (strftime "%Y-%m-%d %H:%M:%S UTC" (gmtime expiry)))))))

(define-record-type <tls-credentials>
  (make-tls-credentials address)
  tls-credentials?
  ;; the gnutls_certificate_credentials_t's address
  (address credentials-address))

(define* (load-tls-credentials pairs #:key (ocsp '()))
  "Return GnuTLS certificate credentials holding PAIRS, a list of (CERT
. KEY) file names (PEM; CERT may hold a chain, the server's certificate
first), and for each pair the OCSP response OCSP lists at its place, a
DER file to staple, or #f.  Raise an exception whose message names the
file when one cannot be read, is not PEM, has expired, a key does not
match its certificate, or an OCSP response is not for its certificate."
  (let ((credentials (gnutls-certificate-credentials)))
    (catch #t
      (lambda ()
        (for-each (lambda (pair ocsp)
                    (let ((cert (car pair)) (key (cdr pair)))
                      (check-pair! cert key)
                      (let ((index (gnutls-credentials-add-files! credentials cert key)))
                        (when (< index 0)
                          (file-error key "does not go with ~a (~a)" cert
                                      (gnutls-error-message index)))
                        (when ocsp
                          (read-file ocsp)    ; a missing file, named
                          (let ((code (gnutls-credentials-add-ocsp-file!
                                       credentials ocsp index)))
                            (when (< code 0)
                              (file-error ocsp "not an OCSP response for ~a (~a)" cert
                                          (gnutls-error-message code))))))))
                  pairs
                  (append ocsp (make-list (max 0 (- (length pairs) (length ocsp))) #f))))
      (lambda args
        (gnutls-credentials-free! credentials)
        (apply throw args)))
    (make-tls-credentials credentials)))

(define (free-tls-credentials! credentials)
  "Free CREDENTIALS, which no transport may use any longer; return
nothing."
  (gnutls-credentials-free! (credentials-address credentials)))

;;;
;;; The expiry date of a PEM certificate (guile-gnutls has no accessor)
;;;

(define (base64->bytevector text)
  (let* ((alphabet "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
         (digits (filter-map (lambda (c) (string-index alphabet c))
                             (string->list text)))
         (out (make-bytevector (quotient (* 3 (length digits)) 4))))
    (let lp ((digits digits) (bits 0) (nbits 0) (i 0))
      (cond
       ((null? digits) out)
       (else
        (let ((bits (logior (ash bits 6) (car digits)))
              (nbits (+ nbits 6)))
          (if (>= nbits 8)
              (begin
                (bytevector-u8-set! out i (logand (ash bits (- 8 nbits)) 255))
                (lp (cdr digits) (logand bits (- (ash 1 (- nbits 8)) 1))
                    (- nbits 8) (+ i 1)))
              (lp (cdr digits) bits nbits i))))))))

(define (der-item der at)
  ;; -> (values tag content-start content-end) of the DER item at AT
  (let* ((tag (bytevector-u8-ref der at))
         (first (bytevector-u8-ref der (+ at 1))))
    (if (< first 128)
        (values tag (+ at 2) (+ at 2 first))
        (let lp ((i 0) (length 0))
          (if (= i (- first 128))
              (values tag (+ at 2 i) (+ at 2 i length))
              (lp (+ i 1) (+ (* 256 length) (bytevector-u8-ref der (+ at 2 i)))))))))

(define (certificate-not-after pem)
  ;; -> seconds since the epoch of the first certificate's notAfter, or
  ;; #f when it cannot be found: Certificate { TBSCertificate { [0]
  ;; version, serial, signature, issuer, Validity { notBefore, notAfter
  ;; } … } … }.
  (false-if-exception
   (let* ((text (utf8->string pem))
          (begin-mark "-----BEGIN CERTIFICATE-----")
          (start (+ (string-contains text begin-mark) (string-length begin-mark)))
          (der (base64->bytevector
                (substring text start (string-contains text "-----END" start)))))
     (let*-values (((tag0 cert-start cert-end) (der-item der 0))
                   ((tag1 tbs-start tbs-end) (der-item der cert-start)))
       (let lp ((at tbs-start) (index 0))
         (let-values (((tag start end) (der-item der at)))
           (cond
            ((= tag #xa0) (lp end index))          ; [0] version: not counted
            ((= index 3)                           ; Validity
             (let*-values (((tag1 s1 e1) (der-item der start))
                           ((tag2 s2 e2) (der-item der e1)))
               (der-time (utf8->string (bytevector-slice der s2 e2))
                         (= tag2 #x17))))
            (else (lp end (+ index 1))))))))))

(define (bytevector-slice bv start end)
  (let ((out (make-bytevector (- end start))))
    (bytevector-copy! bv start out 0 (- end start))
    out))

(define (der-time text utc?)
  ;; UTCTime YYMMDDHHMMSSZ or GeneralizedTime YYYYMMDDHHMMSSZ -> seconds
  (let* ((text (if utc?
                   (string-append (if (< (string->number (substring text 0 2)) 50)
                                      "20" "19")
                                  text)
                   text))
         (tm (car (strptime "%Y%m%d%H%M%S" (substring text 0 14)))))
    (car (mktime tm "UTC"))))

;;;
;;; Resumption: the ticket key and the session cache, made once
;;;

(define-record-type <tls-resumption>
  (%make-tls-resumption key key-datum cache lifetime callbacks)
  tls-resumption?
  ;; 64 random bytes: GnuTLS derives the key of each period from it
  (key resumption-key)
  ;; a gnutls_datum_t of KEY
  (key-datum resumption-key-datum)
  ;; <tls-cache> of TLS 1.2 sessions, in shared memory
  (cache resumption-cache)
  ;; seconds a session can be resumed
  (lifetime resumption-lifetime)
  ;; GnuTLS's callbacks into CACHE, made in each worker
  (callbacks resumption-callbacks set-resumption-callbacks!))

(define* (make-tls-resumption #:key (lifetime 3600))
  "Return what the workers resume TLS sessions with: a session-ticket
master key and a cache of TLS 1.2 sessions in shared memory, each valid
LIFETIME seconds.  Make it in the process that forks the workers, before
it does: every worker, and those a reload starts, then accept the
tickets and session IDs any of them issued.  The key that encrypts
tickets changes every three LIFETIMEs (GnuTLS derives it from the master
key and the time), the one before it is still accepted."
  (let ((key (gnutls-random-bytes 64)))
    (%make-tls-resumption key (make-gnutls-datums (list key))
                          (make-tls-cache #:lifetime lifetime)
                          lifetime #f)))

(define (resumption-cache-callbacks resumption)
  ;; GnuTLS's callbacks into RESUMPTION's cache, made on first use in
  ;; this process
  (or (resumption-callbacks resumption)
      (let* ((cache (resumption-cache resumption))
             (callbacks (gnutls-cache-callbacks
                         (lambda (key data) (tls-cache-store! cache key data))
                         (lambda (key) (tls-cache-lookup cache key))
                         (lambda (key) (tls-cache-remove! cache key)))))
        (set-resumption-callbacks! resumption callbacks)
        callbacks)))

;;;
;;; ALPN
;;;

(define alpn-protocols
  ;; What the server offers, in its order of preference.  A client that
  ;; agreed on "h2" begins with HTTP/2's connection preface, which is
  ;; where the connection becomes HTTP/2 (plucky server http2).
  '("h2" "http/1.1"))

;;;
;;; Plain HTTP on the TLS port
;;;

(define plain-http-response
  ;; As nginx answers it, rather than a reset the client cannot explain.
  (let ((body "This port speaks HTTPS: the plain HTTP request was sent to a TLS port.\n"))
    (string->utf8
     (string-append "HTTP/1.1 400 Bad Request\r\n"
                    "Content-Type: text/plain; charset=utf-8\r\n"
                    "Content-Length: " (number->string (string-length body)) "\r\n"
                    "Connection: close\r\n\r\n" body))))

(define (plain-http? byte)
  ;; A TLS connection starts with a handshake record (22); an HTTP
  ;; request with its method, in capitals.
  (<= 65 byte 90))

(define (discard-input fd address start count)
  ;; Read and drop what FD holds, a few buffers at most (a client that
  ;; keeps sending waits for the next turn of the loop, and the header
  ;; time-out): -> 0 at end of file, -EAGAIN, else -errno
  (let lp ((reads 0))
    (let ((n (fd-read fd address start count)))
      (cond
       ((<= n 0) n)
       ((= reads 3) (- errno-EAGAIN))
       (else (lp (+ reads 1)))))))

(define (answer-plain-http! fd address start count)
  ;; The request is read and dropped first: a socket closed with unread
  ;; input resets the connection, and the client may lose the answer.
  (let ((n (discard-input fd address start count)))
    (fd-send fd (bytevector-address plain-http-response) 0
             (bytevector-length plain-http-response))
    (fd-shutdown-write fd)
    n))

;;;
;;; The transport
;;;

(define-record-type <tls-state>
  (make-tls-state session stage credit flushing? pending?)
  tls-state?
  ;; the gnutls_session_t's address, 0 once freed
  (session state-session set-state-session!)
  ;; start: nothing read yet; handshake; ready; closing: close_notify
  ;; sent; plain-http: answered 400
  (stage state-stage set-state-stage!)
  ;; bytes GnuTLS took that the loop has not been told were written
  (credit state-credit set-state-credit!)
  ;; #t while a record GnuTLS took waits in the session to be sent
  (flushing? state-flushing? set-state-flushing!)
  ;; #t when decrypted bytes wait in the session after the last read
  (pending? state-pending? set-state-pending!))

(define-inlinable (again? code)
  (or (= code gnutls-again) (= code gnutls-interrupted)))

(define (handshake! state fd)
  ;; -> #t once the handshake is done, -EAGAIN, or -ECONNRESET when the
  ;; client is not speaking TLS, or not a TLS we accept
  (let ((code (gnutls-handshake (state-session state))))
    (cond
     ((zero? code)
      ;; The client's Finished ends the handshake, and the server sends
      ;; nothing after it (GnuTLS sends its TLS 1.3 tickets with its own
      ;; Finished; a resumed TLS 1.2 handshake ends with the client's):
      ;; the kernel would acknowledge it only when its delayed-ACK timer
      ;; fires, ~40 ms later, and a client that leaves Nagle's algorithm
      ;; on holds its request back until then (tests/server/tls-handshake).
      (fd-ack-now! fd)
      (set-state-stage! state 'ready)
      #t)
     ((again? code) (- errno-EAGAIN))
     (else (- errno-ECONNRESET)))))

(define (first-read! state fd address start count)
  ;; -> as `tls-read', for the connection's first bytes: a ClientHello
  ;; goes to the handshake, plain HTTP is answered 400
  (let ((n (fd-peek fd address start 1)))
    (cond
     ((<= n 0) n)
     ((plain-http? (bytevector-u8-ref (address->bytevector (+ address start) 1) 0))
      (set-state-stage! state 'plain-http)
      (answer-plain-http! fd address start count))
     (else (set-state-stage! state 'handshake)
           (tls-read state fd address start count)))))

(define (tls-read state fd address start count)
  (case (state-stage state)
    ((ready closing) (read-records state address start count))
    ((handshake)
     (let ((done (handshake! state fd)))
       (if (eq? done #t)
           (read-records state address start count)
           done)))
    ((start) (first-read! state fd address start count))
    ;; plain-http: until the client closes (or the header time-out)
    (else (discard-input fd address start count))))

(define (read-records state address start count)
  ;; Decrypt into [START, START+COUNT) at ADDRESS as long as the session
  ;; holds decrypted bytes; GnuTLS reads the socket one record at a time,
  ;; so a read that empties the session leaves the next record in the
  ;; socket, where epoll sees it.  (bench/tls: an extra read that ends
  ;; in GNUTLS_E_AGAIN costs keep-alive requests dearly.)
  (let ((session (state-session state)))
    (let lp ((got 0))
      (let ((n (gnutls-record-recv session (+ address start got) (- count got))))
        (cond
         ((> n 0)
          (let ((got (+ got n))
                (more? (> (gnutls-record-pending session) 0)))
            (if (and more? (< got count))
                (lp got)
                (begin (set-state-pending! state more?) got))))
         ((> got 0) (set-state-pending! state #f) got)
         ((again? n) (- errno-EAGAIN))
         ;; A client that closes without close_notify ends its input
         ;; like one that sends it.
         ((or (zero? n) (= n gnutls-premature-termination)) 0)
         (else (- errno-ECONNRESET)))))))

(define (take-credit! state count)
  (let ((n (min count (state-credit state))))
    (set-state-credit! state (- (state-credit state) n))
    n))

(define (tls-send state address count)
  ;; Send COUNT bytes at ADDRESS (at most a record) unless an earlier
  ;; record is still owed: -> bytes written or -errno.
  (cond
   ((state-flushing? state)
    (let ((n (gnutls-record-send (state-session state) 0 0)))
      (cond
       ((>= n 0) (set-state-flushing! state #f) (take-credit! state count))
       ((again? n) (- errno-EAGAIN))
       (else (- errno-EPIPE)))))
   ((> (state-credit state) 0) (take-credit! state count))
   ((zero? count) 0)
   (else
    (let ((n (gnutls-record-send (state-session state) address count)))
      (cond
       ((>= n 0) n)
       ((again? n)
        ;; GnuTLS encrypted the bytes and keeps the record to send.
        (set-state-credit! state count)
        (set-state-flushing! state #t)
        (- errno-EAGAIN))
       (else (- errno-EPIPE)))))))

(define (tls-write state fd address start count)
  (if (or (state-flushing? state) (> (state-credit state) 0))
      (tls-send state 0 count)
      (tls-send state (+ address start) (min count record-size))))

(define (iovec-lengths address count)
  ;; -> list of (base . length) of COUNT struct iovec at ADDRESS
  (let ((bv (address->bytevector address (* 16 count))))
    (let lp ((i 0) (acc '()))
      (if (= i count)
          (reverse acc)
          (lp (+ i 1)
              (cons (cons (bytevector-u64-native-ref bv (* 16 i))
                          (bytevector-u64-native-ref bv (+ 8 (* 16 i))))
                    acc))))))

(define (tls-writev state scratch scratch-address fd address count)
  ;; The pieces are gathered into one record: the head and a small body
  ;; go out as one, as writev(2) sends them in one segment.
  (let* ((iovecs (iovec-lengths address count))
         (total (apply + (map cdr iovecs))))
    (if (or (state-flushing? state) (> (state-credit state) 0))
        (tls-send state 0 total)
        (let lp ((iovecs iovecs) (fill 0))
          (if (or (null? iovecs) (= fill record-size))
              (tls-send state scratch-address fill)
              (let ((n (min (cdar iovecs) (- record-size fill))))
                (bytevector-copy! (address->bytevector (caar iovecs) n) 0
                                  scratch fill n)
                (lp (cdr iovecs) (+ fill n))))))))

(define (send-close-notify! state)
  ;; The alert that ends the session cleanly: a client that sees the
  ;; connection end without it counts the session broken and does not
  ;; resume it (openssl s_time -reuse).
  (when (eq? (state-stage state) 'ready)
    (set-state-stage! state 'closing)
    (gnutls-bye (state-session state))))

(define (tls-shutdown state fd)
  (send-close-notify! state)
  (fd-shutdown-write fd))

(define (tls-close state fd)
  (send-close-notify! state)
  (let ((session (state-session state)))
    (unless (zero? session)
      (set-state-session! state 0)
      (gnutls-session-free! session)))
  (fd-close fd))

(define (tls-protocol state fd)
  (and (eq? (state-stage state) 'ready)
       (gnutls-session-alpn (state-session state))))

(define* (tls-transport-maker credentials #:key (priorities tls-priorities)
                              resumption)
  "Return a procedure of a connected socket's descriptor that returns a
TLS transport (plucky server transport) for it, a server session over
CREDENTIALS (from `load-tls-credentials') with PRIORITIES (a GnuTLS
priority string), offering ALPN's http/1.1, for `run-loop''s
#:make-transport.  With RESUMPTION (from `make-tls-resumption'), its
sessions issue and accept tickets and TLS 1.2 session IDs; without,
every handshake is a full one."
  ;; Made once per worker: the priorities parsed, the ALPN list, one
  ;; scratch record for the loop's writev (used by one call at a time,
  ;; on the loop's thread).
  (let* ((priorities (gnutls-priorities priorities))
         (alpn-names (map string->utf8 alpn-protocols))
         (alpn (make-gnutls-datums alpn-names))
         (callbacks (and resumption (resumption-cache-callbacks resumption)))
         (scratch (make-bytevector record-size))
         (scratch-address (bytevector-address scratch)))
    (lambda (fd)
      (let ((session (gnutls-server-session fd (credentials-address credentials)
                                            priorities)))
        (when (< session 0)             ; out of memory: as for any allocation
          (scm-error 'misc-error "tls-transport-maker" "gnutls_init: ~a"
                     (list (gnutls-error-message session)) #f))
        (begin
               (when resumption
                 (gnutls-session-set-lifetime! session (resumption-lifetime resumption))
                 (gnutls-session-enable-tickets! session (resumption-key-datum resumption))
                 (gnutls-session-set-cache! session callbacks))
               (gnutls-session-set-alpn! session alpn (length alpn-names))
               (let ((state (make-tls-state session 'start 0 #f #f)))
                 (make-transport
                  #:read (lambda (fd address start count)
                           (tls-read state fd address start count))
                  #:write (lambda (fd address start count)
                            (tls-write state fd address start count))
                  #:writev (lambda (fd address count)
                             (tls-writev state scratch scratch-address fd address count))
                  #:sendfile #f
                  #:shutdown (lambda (fd) (tls-shutdown state fd))
                  #:close (lambda (fd) (tls-close state fd))
                  #:pending? (lambda (fd) (state-pending? state))
                  #:protocol (lambda (fd) (tls-protocol state fd)))))))))

;;; (plucky server tls) ends here
