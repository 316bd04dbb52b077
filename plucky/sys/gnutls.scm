;;; (plucky sys gnutls) --- GnuTLS server sessions through libgnutls

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Debian's guile-gnutls (3.7) binds sessions as objects whose
;;; gnutls_session_t it does not hand out, and lacks what a server needs
;;; beyond the handshake: session tickets, a session cache
;;; (gnutls_db_set_*), ALPN, OCSP stapling.  Its sessions and
;;; credentials cannot be mixed with calls made here, so plucky makes its
;;; server sessions and their credentials through libgnutls itself, as
;;; (plucky sys zlib) does with libz: the calls take and return the C
;;; values (addresses as integers, negative GnuTLS error codes), and
;;; nothing raises on the record path.
;;;
;;; What is made here is freed by its own call, once, never by a
;;; finalizer: `gnutls-session-free!' for a session.  Credentials and
;;; priorities live as long as the worker that made them
;;; (`gnutls-credentials-free!' for those made only to check files).
;;;
;;; The session cache is three Scheme procedures GnuTLS calls back
;;; (`gnutls-cache-callbacks'): they see keys and data as bytevectors,
;;; and the data a lookup returns is copied into memory from
;;; gnutls_malloc, which GnuTLS frees.
;;;
;;; libgnutls is opened the first time it is needed.
;;;
;;; Code:

(define-module (plucky sys gnutls)
  #:use-module (rnrs bytevectors)
  #:use-module ((system foreign)
                #:select (pointer->procedure procedure->pointer pointer-address
                          make-pointer pointer->bytevector bytevector->pointer
                          dereference-pointer pointer->string string->pointer
                          %null-pointer int unsigned-int size_t ssize_t uint64 void))
  #:use-module ((system foreign-library) #:select (load-foreign-library foreign-library-pointer))
  #:export (gnutls-again
            gnutls-interrupted
            gnutls-premature-termination
            gnutls-error-message
            gnutls-certificate-credentials
            gnutls-credentials-add-files!
            gnutls-credentials-add-ocsp-file!
            gnutls-credentials-free!
            gnutls-priorities
            gnutls-random-bytes
            make-gnutls-datums
            gnutls-server-session
            gnutls-session-enable-tickets!
            gnutls-session-set-lifetime!
            gnutls-session-set-cache!
            gnutls-session-set-alpn!
            gnutls-session-alpn
            gnutls-session-resumed?
            gnutls-session-protocol
            gnutls-handshake
            gnutls-record-recv
            gnutls-record-send
            gnutls-record-pending
            gnutls-bye
            gnutls-session-free!
            gnutls-cache-callbacks))

;; Error codes (gnutls/gnutls.h)
(define gnutls-again -28)
(define gnutls-interrupted -52)
(define gnutls-premature-termination -110)

;; Flags and enums
(define GNUTLS_SERVER 1)
(define GNUTLS_NONBLOCK (ash 1 3))
(define GNUTLS_NO_SIGNAL (ash 1 6))
(define GNUTLS_CRD_CERTIFICATE 1)
(define GNUTLS_X509_FMT_PEM 1)
(define GNUTLS_X509_FMT_DER 0)
(define GNUTLS_CERTIFICATE_API_V2 (ash 1 1))
(define GNUTLS_SHUT_WR 1)
(define GNUTLS_ALPN_SERVER_PRECEDENCE (ash 1 1))
(define GNUTLS_RND_KEY 2)

;; gnutls_datum_t { unsigned char *data; unsigned int size; } on LP64
(define datum-size 16)
(define datum (list uint64 unsigned-int))

(define library #f)
(define-syntax-rule (define-calls binder (name c-name return args) ...)
  ;; Each NAME, #f until (BINDER fn) sets it to (fn C-NAME RETURN ARGS).
  (begin (define name #f) ...
         (define (binder fn) (set! name (fn c-name return args)) ...)))

(define-calls bind-calls!
  (%strerror "gnutls_strerror" uint64 (list int))
  (%certificate-allocate "gnutls_certificate_allocate_credentials" int (list uint64))
  (%certificate-free "gnutls_certificate_free_credentials" void (list uint64))
  (%certificate-set-flags "gnutls_certificate_set_flags" void (list uint64 unsigned-int))
  (%key-file2 "gnutls_certificate_set_x509_key_file2" int
              (list uint64 uint64 uint64 int uint64 unsigned-int))
  (%ocsp-file2 "gnutls_certificate_set_ocsp_status_request_file2" int
               (list uint64 uint64 unsigned-int int))
  (%priority-init "gnutls_priority_init" int (list uint64 uint64 uint64))
  (%rnd "gnutls_rnd" int (list int uint64 size_t))
  (%init "gnutls_init" int (list uint64 unsigned-int))
  (%deinit "gnutls_deinit" void (list uint64))
  (%priority-set "gnutls_priority_set" int (list uint64 uint64))
  (%credentials-set "gnutls_credentials_set" int (list uint64 int uint64))
  (%transport-set-int2 "gnutls_transport_set_int2" void (list uint64 int int))
  (%ticket-enable-server "gnutls_session_ticket_enable_server" int (list uint64 uint64))
  (%cache-expiration "gnutls_db_set_cache_expiration" void (list uint64 int))
  (%db-store "gnutls_db_set_store_function" void (list uint64 uint64))
  (%db-retrieve "gnutls_db_set_retrieve_function" void (list uint64 uint64))
  (%db-remove "gnutls_db_set_remove_function" void (list uint64 uint64))
  (%alpn-set "gnutls_alpn_set_protocols" int (list uint64 uint64 unsigned-int unsigned-int))
  (%alpn-get "gnutls_alpn_get_selected_protocol" int (list uint64 uint64))
  (%resumed "gnutls_session_is_resumed" int (list uint64))
  (%protocol "gnutls_protocol_get_version" int (list uint64))
  (%protocol-name "gnutls_protocol_get_name" uint64 (list int))
  (%handshake "gnutls_handshake" int (list uint64))
  (%recv "gnutls_record_recv" ssize_t (list uint64 uint64 size_t))
  (%send "gnutls_record_send" ssize_t (list uint64 uint64 size_t))
  (%pending "gnutls_record_check_pending" size_t (list uint64))
  (%bye "gnutls_bye" int (list uint64 int)))

(define %malloc #f)                     ; GnuTLS's allocator, which it frees with

(define (open-libgnutls!)
  (unless library
    (let ((lib (load-foreign-library "libgnutls" #:extensions '(".so.30" ".so"))))
      (bind-calls! (lambda (name return args)
                     (pointer->procedure return (foreign-library-pointer lib name) args)))
      ;; gnutls_malloc is a variable holding the allocator's address.
      (set! %malloc (pointer->procedure
                     uint64 (dereference-pointer (foreign-library-pointer lib "gnutls_malloc"))
                     (list size_t)))
      (set! library lib))))

(define (address-of bv)
  (pointer-address (bytevector->pointer bv)))

(define (c-string text)
  ;; -> a bytevector holding TEXT in UTF-8 and a NUL
  (let* ((utf8 (string->utf8 text))
         (bv (make-bytevector (+ 1 (bytevector-length utf8)) 0)))
    (bytevector-copy! utf8 0 bv 0 (bytevector-length utf8))
    bv))

(define (gnutls-error-message code)
  "Return GnuTLS's message for the negative error CODE."
  (open-libgnutls!)
  (pointer->string (make-pointer (%strerror code))))

(define (check code what)
  ;; CODE when it is not an error; else raise one naming WHAT
  (if (< code 0)
      (scm-error 'misc-error #f "~a: ~a" (list what (gnutls-error-message code)) #f)
      code))

;;;
;;; Credentials and priorities
;;;

(define (gnutls-certificate-credentials)
  "Return the address of new, empty certificate credentials whose
`gnutls-credentials-add-files!' returns the index of the pair it adds."
  (open-libgnutls!)
  (let ((out (make-bytevector 8 0)))
    (check (%certificate-allocate (address-of out)) "gnutls_certificate_allocate_credentials")
    (let ((credentials (bytevector-u64-native-ref out 0)))
      (%certificate-set-flags credentials GNUTLS_CERTIFICATE_API_V2)
      credentials)))

(define (gnutls-credentials-add-files! credentials cert key)
  "Add the PEM certificate (and chain) in the file CERT and its key in
the file KEY to CREDENTIALS.  Return the pair's index (from 0), or a
negative GnuTLS error code."
  (let ((cert (c-string cert)) (key (c-string key)))
    (%key-file2 credentials (address-of cert) (address-of key) GNUTLS_X509_FMT_PEM 0 0)))

(define (gnutls-credentials-add-ocsp-file! credentials file index)
  "Staple the DER OCSP response in FILE for the certificate pair INDEX
of CREDENTIALS.  Return 0, or a negative GnuTLS error code (one when the
response is not for that certificate)."
  (let ((file (c-string file)))
    (%ocsp-file2 credentials (address-of file) index GNUTLS_X509_FMT_DER)))

(define (gnutls-credentials-free! credentials)
  "Free CREDENTIALS, which no session may use any longer; return nothing."
  (%certificate-free credentials))

(define (gnutls-priorities text)
  "Return the address of GnuTLS priorities made from the priority string
TEXT; raise an error naming the part of TEXT it does not take."
  (open-libgnutls!)
  (let ((out (make-bytevector 8 0))
        (err (make-bytevector 8 0))
        (bv (c-string text)))
    (let ((code (%priority-init (address-of out) (address-of bv) (address-of err))))
      (when (< code 0)
        (let ((at (- (bytevector-u64-native-ref err 0) (address-of bv))))
          (scm-error 'misc-error #f "priority string ~s, at ~s: ~a"
                     (list text (if (< -1 at (string-length text)) (substring text at) "")
                           (gnutls-error-message code))
                     #f)))
      (bytevector-u64-native-ref out 0))))

(define (gnutls-random-bytes n)
  "Return a bytevector of N random bytes fit for a key."
  (open-libgnutls!)
  (let ((bv (make-bytevector n 0)))
    (check (%rnd GNUTLS_RND_KEY (address-of bv) n) "gnutls_rnd")
    bv))

(define (make-gnutls-datums bytevectors)
  "Return a bytevector holding a gnutls_datum_t for each of BYTEVECTORS,
in order; the caller keeps BYTEVECTORS reachable while it is used."
  (let ((out (make-bytevector (* datum-size (length bytevectors)) 0)))
    (let lp ((bvs bytevectors) (i 0))
      (unless (null? bvs)
        (bytevector-u64-native-set! out (* i datum-size) (address-of (car bvs)))
        (bytevector-u32-native-set! out (+ 8 (* i datum-size)) (bytevector-length (car bvs)))
        (lp (cdr bvs) (+ i 1))))
    out))

;;;
;;; Sessions
;;;

(define (gnutls-server-session fd credentials priorities)
  "Return the address of a new non-blocking server session on the socket
FD with CREDENTIALS and PRIORITIES, or a negative GnuTLS error code."
  (let ((out (make-bytevector 8 0)))
    (let ((code (%init (address-of out) (logior GNUTLS_SERVER GNUTLS_NONBLOCK GNUTLS_NO_SIGNAL))))
      (if (< code 0)
          code
          (let* ((session (bytevector-u64-native-ref out 0))
                 (code (min (%priority-set session priorities)
                            (%credentials-set session GNUTLS_CRD_CERTIFICATE credentials))))
            (if (< code 0)
                (begin (%deinit session) code)
                (begin (%transport-set-int2 session fd fd) session)))))))

(define (gnutls-session-enable-tickets! session key-datum)
  "Have SESSION issue and accept session tickets under the master key
KEY-DATUM (a datum from `make-gnutls-datums' of 64 random bytes), which
GnuTLS copies.  Return 0 or a negative GnuTLS error code."
  (%ticket-enable-server session (address-of key-datum)))

(define (gnutls-session-set-lifetime! session seconds)
  "Make SESSION's tickets and cached sessions expire after SECONDS; return
nothing."
  (%cache-expiration session seconds))

(define (gnutls-session-set-cache! session callbacks)
  "Have SESSION store and look up sessions (TLS 1.2 session IDs) through
CALLBACKS, from `gnutls-cache-callbacks'; return nothing."
  (%db-store session (pointer-address (vector-ref callbacks 0)))
  (%db-retrieve session (pointer-address (vector-ref callbacks 1)))
  (%db-remove session (pointer-address (vector-ref callbacks 2))))

(define (gnutls-session-set-alpn! session datums count)
  "Offer the COUNT ALPN protocols of DATUMS (from `make-gnutls-datums'),
the server's order first.  Return 0 or a negative GnuTLS error code."
  (%alpn-set session (address-of datums) count GNUTLS_ALPN_SERVER_PRECEDENCE))

(define (gnutls-session-alpn session)
  "Return the ALPN protocol SESSION agreed on, a string, or #f."
  (let ((out (make-bytevector datum-size 0)))
    (and (zero? (%alpn-get session (address-of out)))
         (utf8->string
          (bytevector-copy*
           (pointer->bytevector (make-pointer (bytevector-u64-native-ref out 0))
                                (bytevector-u32-native-ref out 8)))))))

(define (bytevector-copy* bv)
  (let ((out (make-bytevector (bytevector-length bv))))
    (bytevector-copy! bv 0 out 0 (bytevector-length bv))
    out))

(define (gnutls-session-resumed? session)
  "Return #t when SESSION's handshake resumed an earlier session."
  (not (zero? (%resumed session))))

(define (gnutls-session-protocol session)
  "Return the name of SESSION's TLS version, e.g. \"TLS1.3\"."
  (pointer->string (make-pointer (%protocol-name (%protocol session)))))

(define (gnutls-handshake session)
  "Go on with SESSION's handshake: return 0 once it is done, or a negative
GnuTLS error code (`gnutls-again' when the socket is not ready)."
  (%handshake session))

(define (gnutls-record-recv session address count)
  "Decrypt at most COUNT bytes into the memory at ADDRESS.  Return their
number, 0 at the peer's close_notify, or a negative GnuTLS error code."
  (%recv session address count))

(define (gnutls-record-send session address count)
  "Encrypt and send COUNT bytes at ADDRESS (at most a record's).  Return
the number taken, or a negative GnuTLS error code; after `gnutls-again'
call again with ADDRESS 0 and COUNT 0 to send the record kept."
  (%send session address count))

(define (gnutls-record-pending session)
  "Return the number of decrypted bytes SESSION holds unread."
  (%pending session))

(define (gnutls-bye session)
  "Send SESSION's close_notify (no more output).  Return 0 or a negative
GnuTLS error code."
  (%bye session GNUTLS_SHUT_WR))

(define (gnutls-session-free! session)
  "Free SESSION; return nothing.  Call it once, after its last use."
  (%deinit session))

;;;
;;; The session cache's callbacks
;;;

(define (datum->bytevector datum-pointer)
  ;; the bytes of the gnutls_datum_t at DATUM-POINTER, copied
  (let* ((d (pointer->bytevector datum-pointer datum-size))
         (size (bytevector-u32-native-ref d 8)))
    (if (zero? size)
        (make-bytevector 0)
        (bytevector-copy*
         (pointer->bytevector (make-pointer (bytevector-u64-native-ref d 0)) size)))))

(define-syntax-rule (false-if-raised expression)
  ;; EXPRESSION's value, or #f if it raised: an exception must not
  ;; unwind through GnuTLS's C frames, which would leave the session
  ;; half-way through its handshake.
  (catch #t (lambda () expression) (lambda _ #f)))

(define (gnutls-cache-callbacks store retrieve remove)
  "Return the callbacks `gnutls-session-set-cache!' takes, made of three
procedures: (STORE key data) and (REMOVE key), of bytevectors, return
true on success; (RETRIEVE key) returns the data stored under key, a
bytevector, or #f.  One that raises counts as a failure.  The caller
keeps the result reachable while sessions use it."
  (open-libgnutls!)
  (let ((empty (make-bytevector datum-size 0)))
    (vector
     (procedure->pointer
      int (lambda (ptr key data)
            (if (false-if-raised (store (datum->bytevector key) (datum->bytevector data)))
                0
                -30))
      (list uint64 datum datum))
     (procedure->pointer
      datum (lambda (ptr key)
              (let ((data (false-if-raised (retrieve (datum->bytevector key)))))
                (if (not data)
                    (bytevector->pointer empty)
                    (let* ((n (bytevector-length data))
                           (copy (%malloc n))
                           (out (make-bytevector datum-size 0)))
                      (unless (zero? copy)
                        (bytevector-copy! data 0 (pointer->bytevector (make-pointer copy) n) 0 n)
                        (bytevector-u64-native-set! out 0 copy)
                        (bytevector-u32-native-set! out 8 n))
                      (bytevector->pointer out)))))
      (list uint64 datum))
     (procedure->pointer
      int (lambda (ptr key) (if (false-if-raised (remove (datum->bytevector key))) 0 -30))
      (list uint64 datum)))))

;;; (plucky sys gnutls) ends here
