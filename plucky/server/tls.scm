;;; (plucky server tls) --- HTTPS: a TLS transport over guile-gnutls

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A TLS connection is a plain socket whose bytes go through a GnuTLS
;;; session: `tls-transport-maker' returns the procedure `run-loop' calls
;;; on each accepted descriptor (its #:make-transport), and the transport
;;; it makes (plucky server transport) keeps the loop's conventions, a
;;; count of bytes or a negated errno, -EAGAIN where the socket is not
;;; ready.  The loop knows nothing of TLS:
;;;
;;;  - the handshake runs inside the first reads: each read goes on with
;;;    it until it is done, then reads records.  Its time counts against
;;;    the header time-out the loop sets at accept, so a client that
;;;    sends nothing or half a ClientHello is closed like a slowloris one.
;;;  - GnuTLS's calls raise error/again where the socket is not ready.  A
;;;    record it could not send is kept in the session and must be sent
;;;    by calling again; the loop, told -EAGAIN, calls again with the same
;;;    bytes, however it has cut them since.  So the transport counts the
;;;    bytes GnuTLS took but the loop has not been told of (CREDIT), and
;;;    answers the loop's next writes from that count once the record is
;;;    out.
;;;  - a record is decrypted whole: when the loop's buffer cannot hold
;;;    it, the rest stays in the session where epoll cannot see it, and
;;;    PENDING? tells the loop to read again at once.  GnuTLS reads the
;;;    socket one record at a time, so a record read whole leaves the
;;;    next one in the socket, where epoll sees it.
;;;  - files are not sent with sendfile(2) (the process encrypts them):
;;;    the transport has no SENDFILE and the loop reads and writes them.
;;;
;;; `load-tls-credentials' reads certificates and keys (PEM), several
;;; pairs for several names: GnuTLS chooses by the name the client asks
;;; for (SNI).  Its errors name the file.
;;;
;;; Code:

(define-module (plucky server tls)
  #:use-module ((srfi srfi-1) #:select (filter-map))
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-11)
  #:use-module (rnrs bytevectors)
  #:use-module (ice-9 binary-ports)
  #:use-module (gnutls)
  #:use-module ((plucky sys libc)
                #:select (fd-close fd-shutdown-write errno-EAGAIN errno-ECONNRESET
                          errno-EPIPE bytevector-address address->bytevector))
  #:use-module (plucky server transport)
  #:export (tls-priorities
            load-tls-credentials
            tls-transport-maker))

(define tls-priorities
  ;; TLS 1.3 and 1.2 only; forward-secret key exchange (no static RSA,
  ;; no finite-field DH) and AEAD ciphers only; the server's order.
  (string-append "SECURE128:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
                 ":-RSA:-DHE-RSA:-DHE-DSS:-CIPHER-ALL"
                 ":+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305"
                 ":-MAC-ALL:+AEAD:%SERVER_PRECEDENCE"))

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

(define (load-tls-credentials pairs)
  "Return GnuTLS certificate credentials holding PAIRS, a list of (CERT
. KEY) file names (PEM; CERT may hold a chain, the server's certificate
first).  Raise an exception whose message names the file when one cannot
be read, is not PEM, has expired, or a key does not match its
certificate."
  (let ((credentials (make-certificate-credentials)))
    (for-each (lambda (pair)
                (let ((cert (car pair)) (key (cdr pair)))
                  (check-pair! cert key)
                  (gnutls-message
                   (lambda ()
                     (set-certificate-credentials-x509-key-files!
                      credentials cert key x509-certificate-format/pem))
                   (lambda (why)
                     (file-error key "does not go with ~a (~a)" cert why)))))
              pairs)
    credentials))

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
;;; The transport
;;;

(define-record-type <tls-state>
  (make-tls-state session ready? credit flushing? pending?)
  tls-state?
  (session state-session)
  ;; #t once the handshake is done
  (ready? state-ready? set-state-ready!)
  ;; bytes GnuTLS took that the loop has not been told were written
  (credit state-credit set-state-credit!)
  ;; #t while a record GnuTLS took waits in the session to be sent
  (flushing? state-flushing? set-state-flushing!)
  ;; #t when the last read filled the loop's buffer: more may be waiting
  (pending? state-pending? set-state-pending!))

(define-syntax-rule (gnutls-call expression on-again on-error)
  ;; EXPRESSION's value, or ON-AGAIN when the socket is not ready, or
  ;; (ON-ERROR error) when the session failed.
  (catch 'gnutls-error
    (lambda () expression)
    (lambda (key err . rest)
      (if (or (eq? err error/again) (eq? err error/interrupted))
          on-again
          (on-error err)))))

(define (view address start count)
  (address->bytevector (+ address start) count))

(define (handshake! state)
  ;; -> #t once the handshake is done, -EAGAIN, or -ECONNRESET when the
  ;; client is not speaking TLS, or not a TLS we accept
  (gnutls-call (begin (handshake (state-session state))
                      (set-state-ready! state #t)
                      #t)
               (- errno-EAGAIN)
               (lambda (err) (- errno-ECONNRESET))))

(define (tls-read state fd address start count)
  (let ((ready (or (state-ready? state) (handshake! state))))
    (if (not (eq? ready #t))
        ready
        (let lp ((got 0))
          (if (= got count)
              (begin (set-state-pending! state #t) got)
              (let ((n (gnutls-call
                        (record-receive! (state-session state)
                                         (view address (+ start got) (- count got)))
                        (- errno-EAGAIN)
                        (lambda (err)
                          ;; A client that closes without close_notify
                          ;; ends its input like one that sends it.
                          (if (eq? err error/premature-termination)
                              0
                              (- errno-ECONNRESET))))))
                (set-state-pending! state #f)
                (cond
                 ;; A record that filled the room may have left some of
                 ;; itself in the session: read on.  One that did not
                 ;; was read whole, and GnuTLS reads no further than the
                 ;; record it decrypts: the next is in the socket, where
                 ;; epoll sees it.  (bench/tls: an extra read that ends
                 ;; in error/again costs keep-alive requests dearly.)
                 ((= n (- count got)) (lp (+ got n)))
                 ((> n 0) (+ got n))
                 ((> got 0) got)
                 (else n))))))))

(define (take-credit! state count)
  (let ((n (min count (state-credit state))))
    (set-state-credit! state (- (state-credit state) n))
    n))

(define empty (make-bytevector 0))

(define (tls-send state bv count)
  ;; Send COUNT bytes of BV (at most a record) unless an earlier record is
  ;; still owed: -> bytes written or -errno.
  (cond
   ((state-flushing? state)
    (let ((r (gnutls-call (begin (record-send (state-session state) empty) #t)
                          (- errno-EAGAIN)
                          (lambda (err) (- errno-EPIPE)))))
      (if (eq? r #t)
          (begin (set-state-flushing! state #f)
                 (take-credit! state count))
          r)))
   ((> (state-credit state) 0) (take-credit! state count))
   ((zero? count) 0)
   (else
    (gnutls-call (record-send (state-session state) bv)
                 (begin
                   ;; GnuTLS encrypted BV and keeps the record to send.
                   (set-state-credit! state (bytevector-length bv))
                   (set-state-flushing! state #t)
                   (- errno-EAGAIN))
                 (lambda (err) (- errno-EPIPE))))))

(define (tls-write state fd address start count)
  (if (or (state-flushing? state) (> (state-credit state) 0))
      (tls-send state #f count)
      (let ((m (min count record-size)))
        (tls-send state (view address start m) m))))

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

(define (tls-writev state scratch fd address count)
  ;; The pieces are gathered into one record: the head and a small body
  ;; go out as one, as writev(2) sends them in one segment.
  (let* ((iovecs (iovec-lengths address count))
         (total (apply + (map cdr iovecs))))
    (if (or (state-flushing? state) (> (state-credit state) 0))
        (tls-send state #f total)
        (let lp ((iovecs iovecs) (fill 0))
          (if (or (null? iovecs) (= fill record-size))
              (tls-send state (if (= fill record-size)
                                  scratch
                                  (view (bytevector-address scratch) 0 fill))
                        fill)
              (let ((n (min (cdar iovecs) (- record-size fill))))
                (bytevector-copy! (view (caar iovecs) 0 n) 0 scratch fill n)
                (lp (cdr iovecs) (+ fill n))))))))

(define (tls-shutdown state fd)
  (when (state-ready? state)
    (gnutls-call (bye (state-session state) close-request/wr) #f (lambda (err) #f)))
  (fd-shutdown-write fd))

(define (tls-close state fd)
  (fd-close fd))

(define* (tls-transport-maker credentials #:key (priorities tls-priorities))
  "Return a procedure of a connected socket's descriptor that returns a
TLS transport (plucky server transport) for it, a server session over
CREDENTIALS (from `load-tls-credentials') with PRIORITIES, for
`run-loop''s #:make-transport."
  ;; One scratch record for the loop's writev: it is used by one call at
  ;; a time, on the loop's thread.
  (let ((scratch (make-bytevector record-size)))
    (lambda (fd)
      (let ((session (make-session connection-end/server)))
        (set-session-priorities! session priorities)
        (set-session-credentials! session credentials)
        (set-session-transport-fd! session fd)
        (let ((state (make-tls-state session #f 0 #f #f)))
          (make-transport
           #:read (lambda (fd address start count)
                    (tls-read state fd address start count))
           #:write (lambda (fd address start count)
                     (tls-write state fd address start count))
           #:writev (lambda (fd address count)
                      (tls-writev state scratch fd address count))
           #:sendfile #f
           #:shutdown (lambda (fd) (tls-shutdown state fd))
           #:close (lambda (fd) (tls-close state fd))
           #:pending? (lambda (fd) (state-pending? state))))))))

;;; (plucky server tls) ends here
