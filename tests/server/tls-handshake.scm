;;; tests/server/tls-handshake.scm --- resumption, ALPN, groups, OCSP, plain HTTP

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The TLS handshake as browsers and command-line clients meet it, with
;;; `plucky serve' started as a user would and openssl s_client,
;;; gnutls-cli, curl and Python's ssl as the clients: sessions resumed by
;;; ticket (TLS 1.3 and 1.2) and by session ID (TLS 1.2) on the other
;;; worker and after a reload, the ticket key rotating, ALPN, the key
;;; exchange groups, OCSP stapling, plain HTTP on the TLS port, and the
;;; first response to a client that leaves Nagle's algorithm on.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 regex)
             (tests lib harness)
             (tests lib server)
             (tests lib tls))

(test-begin "server/tls-handshake")

(test-group "test certificates"
  (test-eqv "openssl made them" 0 (make-test-certificates!)))

(define ec-pair (list "--tls-cert" (tls-file "ec.pem") "--tls-key" (tls-file "ec.key")))

;;;
;;; openssl s_client, one request per connection
;;;

(define* (s-client port options #:key (path "/pid"))
  ;; -> the output of openssl s_client OPTIONS… sending one GET of PATH
  (let ((status out err
                (run "sh" (list "-c"
                                (string-append
                                 "printf 'GET " path " HTTP/1.1\\r\\nHost: localhost\\r\\n"
                                 "Connection: close\\r\\n\\r\\n' | timeout 10 openssl s_client"
                                 " -connect 127.0.0.1:" (number->string port)
                                 " -servername localhost -CAfile " (tls-file "ca.pem")
                                 " -verify_return_error -ign_eof " options " 2>&1")))))
    out))

(define (session-of out)
  ;; -> (reused? . worker-pid) of an s_client OUT, pid #f without an answer
  (let ((pid (string-match "pid=([0-9]+)" out)))
    (cons (and (string-match "\nReused, TLSv1\\.[23]" out) #t)
          (and pid (string->number (match:substring pid 1))))))

(define* (resumptions port options file #:key (tries 20))
  ;; -> list of (reused? . pid) of connections resuming the session in
  ;; FILE, until two have reached a worker other than the first one's
  ;; (SO_REUSEPORT spreads connections at random) or TRIES were made
  (let lp ((i 0) (acc '()))
    (if (or (= i tries)
            (>= (length (delete-duplicates (filter-map cdr acc))) 2))
        (reverse acc)
        (lp (+ i 1)
            (cons (session-of (s-client port (string-append options " -sess_in " file)))
                  acc)))))

(define (test-resumption port what options)
  ;; A session from one connection resumed by others, on both workers
  (let* ((file (tls-file (string-append "session-" (number->string (random 1000000)))))
         (first (session-of (s-client port (string-append options " -sess_out " file))))
         (again (resumptions port options file)))
    (test-equal (string-append what ": the first connection is a full handshake")
      #f (car first))
    (test-assert (string-append what ": every later one resumes it")
      (and (pair? again) (every car again)))
    (test-assert (string-append what ": on the other worker too")
      (and (cdr first)
           (any (lambda (r) (and (cdr r) (not (= (cdr r) (cdr first))))) again)))))

(test-group "resumption, two workers"
  (let ((process scheme port (serve (append ec-pair '("--workers" "2")))))
    (test-equal "listening" "https" scheme)
    (when port
      (test-resumption port "TLS 1.3, ticket" "-tls1_3")
      (test-resumption port "TLS 1.2, ticket" "-tls1_2")
      (test-resumption port "TLS 1.2, session ID (no ticket)" "-tls1_2 -no_ticket")
      (let ((status out err (run "sh" (list "-c"
                                            (string-append
                                             "timeout 10 gnutls-cli --x509cafile "
                                             (tls-file "ca.pem") " --resume -p "
                                             (number->string port)
                                             " localhost < /dev/null 2>&1")))))
        (test-assert "gnutls-cli --resume: This is a resumed session"
          (string-contains out "*** This is a resumed session")))
      (let ((status killed? (process-stop process)))
        (test-equal "SIGTERM stops it" '(0 #f) (list (status:exit-val status) killed?))))))

;;;
;;; The ticket key
;;;

(define (ticket-key-name file)
  ;; -> the first 16 bytes of the session ticket in FILE (GnuTLS's key
  ;; name: which key encrypted it), as openssl sess_id prints them, or #f
  (let* ((status out err (run "openssl" (list "sess_id" "-in" file "-noout" "-text")))
         (m (string-match "TLS session ticket:\n *0000 - ([0-9a-f -]+)" out)))
    (and m (string-trim-both (match:substring m 1)))))

(define (key-period seconds)
  ;; -> the number of the current key period of SECONDS (GnuTLS's key
  ;; periods start at multiples of SECONDS since the epoch)
  (let ((now (gettimeofday)))            ; the clock GnuTLS reads, not a monotonic one
    (inexact->exact (floor (/ (+ (car now) (/ (cdr now) 1e6)) seconds)))))

(define (wait-for-period-start seconds)
  ;; Wait until the current period of SECONDS is at most a tenth old.
  (let ((start (key-period seconds)))
    (let lp ()
      (unless (> (key-period seconds) start)
        (usleep 50000)
        (lp)))))

(define (tickets port n)
  ;; -> list of (key-name . pid) of N TLS 1.3 tickets from new connections
  (map (lambda (i)
         (let* ((file (tls-file (format #f "ticket-~a" i)))
                (out (s-client port (string-append "-tls1_3 -sess_out " file))))
           (cons (ticket-key-name file) (cdr (session-of out)))))
       (iota n)))

(test-group "the ticket key rotates, the same in every worker"
  ;; --tls-session-lifetime 2: a key period of 6 seconds.
  (let ((process scheme port (serve (append ec-pair '("--workers" "2"
                                                      "--tls-session-lifetime" "2")))))
    (test-equal "listening" "https" scheme)
    (when port
      (wait-for-period-start 6)
      (let* ((period (key-period 6))
             (early (tickets port 8)))
        (test-equal "eight tickets within a key period" period (key-period 6))
        (test-equal "from both workers"
          2 (length (delete-duplicates (filter-map cdr early))))
        (test-assert "under one key"
          (and (car (car early))
               (= 1 (length (delete-duplicates (map car early))))))
        (wait-for-period-start 6)
        (let ((later (tickets port 1)))
          (test-assert "the next period, another key"
            (and (car (car later))
                 (not (equal? (car (car later)) (car (car early)))))))))
    (process-stop process)))

;;;
;;; Across a reload
;;;

(define (worker-pid port)
  ;; -> the PID of the worker that answers /pid, or #f
  (let* ((status out (curl (https port "/pid") "--resolve" (resolve port)))
         (m (string-match "pid=([0-9]+)" out)))
    (and m (string->number (match:substring m 1)))))

(test-group "resumption across a reload (SIGHUP)"
  (let ((process scheme port (serve (append ec-pair '("--workers" "2")))))
    (test-equal "listening" "https" scheme)
    (when port
      (let* ((ticket (tls-file "reload-ticket"))
             (id (tls-file "reload-id"))
             (old (list (cdr (session-of (s-client port (string-append "-tls1_3 -sess_out "
                                                                       ticket))))
                        (cdr (session-of (s-client port (string-append
                                                         "-tls1_2 -no_ticket -sess_out "
                                                         id)))))))
        (kill (process-pid process) SIGHUP)
        ;; The new workers answer once the old ones have closed their
        ;; sockets: wait for three answers in a row from new PIDs.
        (test-assert "new workers answer"
          (wait-until (lambda ()
                        (every (lambda (i)
                                 (let ((pid (worker-pid port)))
                                   (and pid (not (memv pid old)))))
                               (iota 3)))
                      #:timeout 30 #:interval 0.2))
        (let ((by-ticket (session-of (s-client port (string-append "-tls1_3 -sess_in " ticket))))
              (by-id (session-of (s-client port (string-append "-tls1_2 -no_ticket -sess_in "
                                                               id)))))
          (test-assert "a ticket from before the reload resumes"
            (and (car by-ticket) (cdr by-ticket) (not (memv (cdr by-ticket) old))))
          (test-assert "a session ID from before the reload resumes"
            (and (car by-id) (cdr by-id) (not (memv (cdr by-id) old)))))))
    (process-stop process)))

;;;
;;; ALPN, groups, plain HTTP, Nagle, OCSP: one worker
;;;

(define python-plain-http "
import socket, sys
s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')
s.settimeout(10)
d = b''
try:
    while True:
        b = s.recv(4096)
        if not b: break
        d += b
    end = 'closed'
except ConnectionResetError:
    end = 'reset'
except OSError:
    end = 'timeout'
print(d.split(b'\\r\\n')[0].decode(), b'HTTPS' in d, end)
")

(define python-plain-flood "
import socket, ssl, sys, threading, time
port = int(sys.argv[1])
flood = socket.create_connection(('127.0.0.1', port))
flood.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')
stop = time.time() + 3
def send():
    chunk = b'x' * 65536
    try:
        while time.time() < stop: flood.sendall(chunk)
    except OSError: pass
threading.Thread(target=send, daemon=True).start()
time.sleep(0.5)
c = ssl.create_default_context(cafile=sys.argv[2])
t = time.time()
s = c.wrap_socket(socket.create_connection(('127.0.0.1', port)), server_hostname='localhost')
s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n')
d = s.recv(4096)
print('served' if b'Hello, World!' in d else 'not served', time.time() - t < 2)
")

(define python-nagle "
import ssl, socket, sys, time, statistics
port = int(sys.argv[1])
c = ssl.create_default_context(cafile=sys.argv[2])
version = ssl.TLSVersion.TLSv1_3 if sys.argv[3] == '1.3' else ssl.TLSVersion.TLSv1_2
c.minimum_version = c.maximum_version = version
times, session, resumed = [], None, 0
for i in range(9):
    raw = socket.create_connection(('127.0.0.1', port))   # Nagle's algorithm on
    s = c.wrap_socket(raw, server_hostname='localhost', session=session)
    resumed += s.session_reused
    t = time.monotonic()
    s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n')
    d = b''
    while b'Hello' not in d:
        b = s.recv(4096)
        if not b: break
        d += b
    times.append((time.monotonic() - t) * 1000)
    if sys.argv[4] == 'resume': session = s.session
    s.close()
print('%.1f' % statistics.median(times), resumed)
")

(define (nagle-median port version resume?)
  ;; -> (values median-ms resumed-count) of 9 first answers
  (let ((out (python port python-nagle (tls-file "ca.pem") version
                     (if resume? "resume" "new"))))
    (let ((fields (string-split (string-trim-right out) #\space)))
      (values (string->number (car fields))
              (and (pair? (cdr fields)) (string->number (cadr fields)))))))

(define (client-hellos port groups)
  ;; -> (values ClientHellos-sent handshake-ok? server-temp-key) of
  ;; openssl s_client -groups GROUPS
  (let ((out (s-client port (string-append "-groups " groups " -msg") #:path "/")))
    (values (length (filter (lambda (line) (string-contains line "ClientHello"))
                            (string-split out #\newline)))
            (and (string-match "\nNew, TLSv1\\.3, Cipher is [A-Z]" out) #t)
            (let ((m (string-match "Server Temp Key: ([^\n]*)" out)))
              (and m (match:substring m 1))))))

(test-group "ALPN, groups, plain HTTP, Nagle"
  (with-serve (process port "app.scm" "--tls-cert" (tls-file "ec.pem")
                       "--tls-key" (tls-file "ec.key"))
    (let ((status out err (run "curl" (list "-s" "-v" "--http1.1" "--max-time" "10" "-o" "/dev/null"
                                            "--cacert" (tls-file "ca.pem")
                                            "--resolve" (resolve port) (https port "/")))))
      (test-assert "curl -v: ALPN: server accepted http/1.1"
        (string-contains err "ALPN: server accepted http/1.1")))
    (test-assert "Connection: close: the session ends with close_notify, no unexpected EOF"
      (let ((out (s-client port "" #:path "/")))
        (and (string-contains out "Hello, World!")
             (not (string-contains out "unexpected eof")))))
    (test-assert "openssl s_time -reuse: every connection after the first resumes"
      (let ((status out err (run "openssl" (list "s_time" "-connect"
                                                 (format #f "127.0.0.1:~a" port)
                                                 "-reuse" "-time" "1" "-www" "/")
                                 #:timeout 20)))
        ;; one mark a connection between "starting" and the totals:
        ;; r resumed, * a full handshake
        (let* ((from (string-contains out "starting\n"))
               (to (and from (string-contains out "connections in" from)))
               (marks (if to
                          (string-filter (lambda (c) (memv c '(#\r #\*)))
                                         (substring out (+ from 9) to))
                          "")))
          (and (> (string-length marks) 1)
               (string-every #\r marks)))))
    (test-assert "s_client -alpn h2,http/1.1: h2, the server's preference"
      (string-contains (s-client port "-alpn h2,http/1.1" #:path "/")
                       "ALPN protocol: h2"))
    (test-assert "s_client -alpn http/1.1 only: http/1.1"
      (string-contains (s-client port "-alpn http/1.1" #:path "/")
                       "ALPN protocol: http/1.1"))
    (let ((status out err (run "curl" (list "-s" "-v" "--http2" "--max-time" "10"
                                            "-w" "%{http_version}"
                                            "--cacert" (tls-file "ca.pem")
                                            "--resolve" (resolve port) (https port "/")))))
      (test-assert "curl --http2: ALPN: server accepted h2"
        (string-contains err "ALPN: server accepted h2"))
      (test-equal "and the answer comes over HTTP/2" "Hello, World!2" out))
    (let ((status out err (run "curl" (list "-s" "--http2" "--max-time" "10"
                                            "-o" "/dev/null" "-w" "%{size_download} %{http_version}"
                                            "--cacert" (tls-file "ca.pem")
                                            "--resolve" (resolve port) (https port "/file")))))
      (test-equal "a file body over HTTP/2 and TLS, past the first windows"
        "300000 2" out))
    (let ((hellos ok? key (client-hellos port "X25519")))
      (test-equal "an X25519-only client: one ClientHello, no HelloRetryRequest" 1 hellos)
      (test-assert "and the handshake is done" ok?)
      (test-equal "over X25519" "X25519, 253 bits" key))
    (let ((hellos ok? key (client-hellos port "X25519:P-256")))
      (test-equal "X25519 and P-256, the share X25519's: no HelloRetryRequest" 1 hellos))
    (let ((hellos ok? key (client-hellos port "P-256")))
      (test-assert "a P-256-only client: served" ok?)
      (test-equal "over P-256" "ECDH, prime256v1, 256 bits" key))
    (let ((hellos ok? key (client-hellos port "ffdhe2048")))
      (test-assert "a finite-field group in TLS 1.3: refused" (not ok?)))
    (test-equal "plain HTTP on the TLS port: a 400 saying why, then a close (not a reset)"
      "HTTP/1.1 400 Bad Request True closed" (python port python-plain-http))
    (test-equal "a client that keeps sending plain HTTP: others served meanwhile"
      "served True" (python port python-plain-flood (tls-file "ca.pem")))
    (let ((status out (curl "-s" "-o" "/dev/null" "-w" "%{http_code}"
                            (format #f "http://127.0.0.1:~a/" port))))
      (test-equal "curl http:// to it: 400" "400" out))
    ;; The client's Finished, which the server answers with nothing, was
    ;; acknowledged by the delayed-ACK timer only, and a Nagle-on client
    ;; held its request back until then (~40 ms).
    (let ((median resumed (nagle-median port "1.3" #f)))
      (test-assert (format #f "Nagle on, TLS 1.3: first answers in a median of ~a ms (< 20)"
                           median)
        (and median (< median 20))))
    (let ((median resumed (nagle-median port "1.2" #t)))
      (test-assert (format #f "Nagle on, TLS 1.2 resumed: median ~a ms (< 20)" median)
        (and median (< median 20)))
      (test-equal "those TLS 1.2 sessions resumed (8 of 9)" 8 resumed))
    (let ((status out (curl (https port "/") "--resolve" (resolve port))))
      (test-equal "the worker still serves" "Hello, World!" out))))

;;;
;;; OCSP stapling
;;;

(test-group "--tls-ocsp"
  (with-serve (process port "app.scm" "--tls-cert" (tls-file "ec.pem")
                       "--tls-key" (tls-file "ec.key") "--tls-ocsp" (tls-file "ec.ocsp"))
    (let ((out (s-client port "-status" #:path "/")))
      (test-assert "s_client -status: OCSP Response Status: successful"
        (string-contains out "OCSP Response Status: successful"))
      (test-assert "Cert Status: good" (string-contains out "Cert Status: good"))))
  (with-serve (process port "app.scm" "--tls-cert" (tls-file "ec.pem")
                       "--tls-key" (tls-file "ec.key"))
    (test-assert "without it: no response sent"
      (string-contains (s-client port "-status" #:path "/") "OCSP response: no response sent")))
  (for-each
   (lambda (args what needle)
     (let ((status out err (run plucky (append (list "serve" (tls-file "app.scm") "--port" "0")
                                               allow-root args))))
       (test-equal (string-append what ": exit 2") 2 status)
       (test-assert (string-append what ": one line naming it")
         (and (= 1 (length (string-split (string-trim-right err) #\newline)))
              (string-contains err needle)))))
   (list (list "--tls-cert" (tls-file "rsa.pem") "--tls-key" (tls-file "rsa.key")
               "--tls-ocsp" (tls-file "ec.ocsp"))
         (list "--tls-ocsp" (tls-file "ec.ocsp") "--tls-cert" (tls-file "ec.pem")
               "--tls-key" (tls-file "ec.key"))
         (list "--tls-cert" (tls-file "ec.pem") "--tls-key" (tls-file "ec.key")
               "--tls-ocsp" (tls-file "none.ocsp"))
         (list "--tls-cert" (tls-file "ec.pem") "--tls-key" (tls-file "ec.key")
               "--tls-session-lifetime" "0"))
   '("another certificate's response" "before its --tls-cert" "a missing file"
     "a lifetime of 0")
   (list "ec.ocsp: not an OCSP response for" "--tls-ocsp" "none.ocsp"
         "--tls-session-lifetime")))

(remove-tls-dir!)

(test-end "server/tls-handshake")
