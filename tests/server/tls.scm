;;; tests/server/tls.scm --- HTTPS: plucky serve --tls-cert, real clients

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A test CA and certificates made with openssl in a temporary
;;; directory (ECDSA P-256 and RSA, an expired one); `plucky serve'
;;; started as a user would; curl --cacert, openssl s_client and
;;; Python's ssl module as the clients, and bad ones: plain HTTP on the
;;; TLS port, garbage, handshakes stalled halfway.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (tests lib harness)
             (tests lib server)
             (tests lib tls)
             (ice-9 regex)
             (plucky server tls))

(test-begin "server/tls")

;;;
;;; Helpers: (tests lib tls)
;;;

(define file tls-file)

(test-group "test certificates"
  (test-eqv "openssl made them" 0 (make-test-certificates!)))

;;;
;;; load-tls-credentials
;;;

(define (credentials-error pairs)
  ;; -> the message of the error loading PAIRS raises, or #f
  (catch #t
    (lambda () (load-tls-credentials pairs) #f)
    (lambda (key proc fmt args . rest) (apply format #f fmt args))))

(test-group "load-tls-credentials"
  (test-assert "an ECDSA pair and an RSA pair with its chain"
    (not (credentials-error `((,(file "ec.pem") . ,(file "ec.key"))
                              (,(file "rsa.pem") . ,(file "rsa.key"))))))
  (test-assert "a key that is not the certificate's: names the key"
    (string-prefix? (file "rsa.key")
                    (or (credentials-error `((,(file "ec.pem") . ,(file "rsa.key")))) "")))
  (test-assert "an expired certificate: names it"
    (string-contains (or (credentials-error `((,(file "expired.pem") . ,(file "ec.key")))) "")
                     "expired.pem: the certificate expired"))
  (test-assert "a missing file"
    (string-contains (or (credentials-error `((,(file "none.pem") . ,(file "ec.key")))) "")
                     "none.pem: No such file"))
  (test-assert "a key given as the certificate"
    (string-contains (or (credentials-error `((,(file "ec.key") . ,(file "ec.key")))) "")
                     "ec.key: not a PEM certificate")))

;;;
;;; plucky serve: refusals
;;;

(test-group "serve --tls-cert: refused at start-up"
  (for-each
   (lambda (args what)
     (let ((status out err (run plucky (append (list "serve" (file "app.scm") "--port" "0")
                                               allow-root args))))
       (test-equal (string-append what ": exit 2") 2 status)
       (test-assert (string-append what ": one line naming the file")
         (and (= 1 (length (string-split (string-trim-right err) #\newline)))
              (string-contains err ".pem")))))
   (list (list "--tls-cert" (file "expired.pem") "--tls-key" (file "ec.key"))
         (list "--tls-cert" (file "ec.pem") "--tls-key" (file "rsa.key"))
         (list "--tls-cert" (file "missing.pem") "--tls-key" (file "ec.key")))
   '("expired" "mismatched" "missing"))
  (let ((status out err (run plucky (append (list "serve" (file "app.scm") "--port" "0"
                                                  "--tls-cert" (file "ec.pem"))
                                            allow-root))))
    (test-equal "a certificate without its key: exit 2" 2 status)))

;;;
;;; plucky serve over TLS, with real clients
;;;

(define python-pipeline "
import ssl, socket, sys
c = ssl.create_default_context(cafile=sys.argv[2])
s = c.wrap_socket(socket.create_connection(('127.0.0.1', int(sys.argv[1]))), server_hostname='localhost')
v = s.version()
s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' * 800 + b'GET /file HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n')
d = b''
while True:
    b = s.recv(65536)
    if not b: break
    d += b
print(v, d.count(b'HTTP/1.1 200 OK'), len(d) > 300000)
")

(define python-bad-clients "
import resource, socket, ssl, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
port = int(sys.argv[1])
hello = bytes.fromhex('16030100c8010000c40303') + b'\\x00' * 20   # half a ClientHello
stalled = []
for i in range(int(sys.argv[3])):
    s = socket.create_connection(('127.0.0.1', port)); s.sendall(hello); stalled.append(s)
for data in [b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n', bytes(range(256)) * 4]:
    s = socket.create_connection(('127.0.0.1', port)); s.sendall(data)
    s.settimeout(10)
    try:
        while s.recv(4096): pass
    except OSError: pass
    s.close()
c = ssl.create_default_context(cafile=sys.argv[2])
t = time.time()
s = c.wrap_socket(socket.create_connection(('127.0.0.1', port)), server_hostname='localhost')
s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n')
print('ok' if b'Hello, World!' in s.recv(4096) else 'no answer', round(time.time() - t, 1) < 5)
")

(define python-silent "
import socket, sys, time
s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
s.sendall(bytes.fromhex('160301'))
s.settimeout(20)
t = time.time()
try:
    data = s.recv(4096)
except OSError:
    data = b''
print('closed' if data == b'' else 'answered', round(time.time() - t))
")

(test-group "serve --tls-cert: ECDSA P-256"
  (with-serve (process port "app.scm" "--tls-cert" (file "ec.pem") "--tls-key" (file "ec.key")
                       "--header-timeout" "2" "--status")
    (let ((status out (curl (https port "/") (https port "/")
                            "-w" " %{num_connects}" "--resolve" (resolve port))))
      (test-equal "curl --cacert: two answers on one connection"
        "Hello, World! 1Hello, World! 0" out))
    (let ((status out (curl (https port "/file") "-o" "/dev/null" "-w" "%{size_download}"
                            "--resolve" (resolve port))))
      (test-equal "a file body, read and encrypted" "300000" out))
    (let ((status out (curl (https port "/_plucky/status.json") "-o" "/dev/null"
                            "-w" "%{http_code}" "--resolve" (resolve port))))
      (test-equal "the status page" "200" out))
    (test-equal "Python's ssl: 800 pipelined requests (two records) and a file"
      "TLSv1.3 801 True" (python port python-pipeline (file "ca.pem")))
    (for-each
     (lambda (version expected)
       (test-equal (string-append "openssl s_client -" version)
         expected
         (shell (string-append "echo | timeout 10 openssl s_client -" version
                               " -connect 127.0.0.1:" (number->string port)
                               " -CAfile " (file "ca.pem")
                               " -verify_return_error 2>&1 | grep -q 'Cipher is [A-Z]'"))))
     '("tls1_3" "tls1_2" "tls1_1")
     '(0 0 1))
    (test-equal "plain HTTP, garbage, 1,000 stalled handshakes: others served"
      "ok True" (python port python-bad-clients (file "ca.pem") "1000"))
    (test-assert "a client that sends 3 bytes of a ClientHello: closed by the header time-out"
      (let ((out (python port python-silent)))
        (and (string-prefix? "closed" out)
             (<= (string->number (string-trim-right (substring out 7))) 5))))
    (let ((status out (curl (https port "/") "--resolve" (resolve port))))
      (test-equal "the worker still serves" "Hello, World!" out))))

(test-group "serve --tls-cert twice: SNI chooses, HSTS"
  (with-serve (process port "app.scm" "--tls-cert" (file "ec.pem") "--tls-key" (file "ec.key")
                       "--tls-cert" (file "rsa.pem") "--tls-key" (file "rsa.key")
                       "--hsts" "600")
    (let ((status out (curl (format #f "https://rsa.test:~a/" port)
                            "--resolve" (format #f "rsa.test:~a:127.0.0.1" port))))
      (test-equal "rsa.test: the RSA certificate verifies" "Hello, World!" out))
    (test-eqv "s_client -servername rsa.test: an RSA key"
      0 (shell (string-append "echo | timeout 10 openssl s_client -connect 127.0.0.1:"
                              (number->string port) " -servername rsa.test 2>&1"
                              " | grep -q 'Server public key is 2048 bit'")))
    (let ((status out (curl (https port "/") "-D" "-" "-o" "/dev/null"
                            "--resolve" (resolve port))))
      (test-assert "Strict-Transport-Security"
        (string-contains-ci out "strict-transport-security: max-age=600")))))

(test-group "serve --tls-cert: the worker's threads"
  (with-serve (process port "threads.scm" "--tls-cert" (file "ec.pem") "--tls-key" (file "ec.key"))
    (let ((status out (curl (https port "/") "--resolve" (resolve port))))
      (test-equal "a streamed response, chunked, encrypted"
        (string-join (make-list 1000 "streamed line") "\n") out))
    (let ((status out (curl (https port "/") "--resolve" (resolve port)
                            "--data-binary" (string-append "@" (file "big")))))
      (test-equal "a body read as a port" "300000 bytes" out))
    (let ((status out (curl (https port "/") "--resolve" (resolve port)
                            "-H" "Transfer-Encoding: chunked"
                            "--data-binary" (string-append "@" (file "big")))))
      (test-equal "a chunked body read as a port" "300000 bytes" out))))

(test-group "serve --redirect-https"
  (let ((process scheme port (serve '("--redirect-https" "8443"))))
    (test-equal "plain HTTP" "http" scheme)
    (when port
      (let ((status out (curl "-D" "-" "-o" "/dev/null"
                              (format #f "http://127.0.0.1:~a/a/b?c=d" port))))
        (test-assert "301 to the https URL"
          (and (string-contains out " 301")
               (string-contains-ci out "location: https://127.0.0.1:8443/a/b?c=d"))))
      (process-stop process))))

(test-group "serve --listen: refused at start-up"
  (for-each
   (lambda (args what)
     (let ((status out err (run plucky (append (list "serve" (file "app.scm"))
                                               allow-root args))))
       (test-equal (string-append what ": exit 2") 2 status)
       (test-assert (string-append what ": one line naming the option")
         (and (= 1 (length (string-split (string-trim-right err) #\newline)))
              (string-contains err "--")))))
   (list (list "--listen" "tls::0")
         (list "--listen" ":0" "--tls-cert" (file "ec.pem") "--tls-key" (file "ec.key"))
         (list "--listen" "::1:0")
         (list "--listen" "127.0.0.1")
         (list "--listen" ":70000")
         (list "--listen" ":0" "--port" "0")
         (list "--listen" "tls::0" "--tls-cert" (file "ec.pem") "--tls-key" (file "ec.key")
               "--redirect-https" "8443"))
   '("tls: without a certificate" "a certificate without a tls: address"
     "IPv6 without brackets" "no port" "a port past 65535" "with --port"
     "--redirect-https with no plain address")))

(define* (serve-listen args #:key (timeout 30) (app "app.scm"))
  ;; -> (values process http-port https-port) of `plucky serve APP
  ;; ARGS…', which gives its addresses with --listen
  (let* ((process (spawn plucky (append (list "serve" (file app)) allow-root args)))
         (deadline (+ (now-seconds) timeout)))
    (let lp ((ports '()))
      (if (and (assoc "http" ports) (assoc "https" ports))
          (values process (assoc-ref ports "http") (assoc-ref ports "https"))
          (let ((line (read-line-before (process-stderr process) deadline)))
            (cond
             ((not (string? line)) (process-stop process) (values process #f #f))
             ((regexp-exec listening-rx line)
              => (lambda (m) (lp (acons (match:substring m 1)
                                        (string->number (match:substring m 2))
                                        ports))))
             (else (lp ports))))))))

(define (head-of . args)
  ;; -> the response head curl got
  (let ((status out (apply curl "-D" "-" "-o" "/dev/null" args)))
    out))

(test-group "serve --listen: HTTP and HTTPS in one server"
  (let ((process plain secure (serve-listen (list "--listen" ":0" "--listen" "tls::0"
                                                "--tls-cert" (file "ec.pem")
                                                "--tls-key" (file "ec.key")
                                                "--hsts" "600" "--workers" "1"))))
    (test-assert "both listen" (and plain secure))
    (when (and plain secure)
      (let ((status out (curl (format #f "http://127.0.0.1:~a/" plain))))
        (test-equal "HTTP on one port" "Hello, World!" out))
      (let ((status out (curl (https secure "/") "--resolve" (resolve secure))))
        (test-equal "HTTPS on the other" "Hello, World!" out))
      (test-assert "HSTS over HTTPS"
        (string-contains-ci (head-of (https secure "/") "--resolve" (resolve secure))
                            "strict-transport-security: max-age=600"))
      (test-assert "not over plain HTTP (RFC 6797, 7.2)"
        (not (string-contains-ci (head-of (format #f "http://127.0.0.1:~a/" plain))
                                 "strict-transport-security")))
      (process-stop process))))

(test-group "serve --listen: a handler on the worker's threads"
  ;; The scheme of a request is known on a thread too (with-body-port).
  (let ((process plain secure (serve-listen (list "--listen" ":0" "--listen" "tls::0"
                                                  "--tls-cert" (file "ec.pem")
                                                  "--tls-key" (file "ec.key")
                                                  "--hsts" "600" "--workers" "1")
                                            #:app "threads.scm")))
    (test-assert "both listen" (and plain secure))
    (when (and plain secure)
      (let ((head (head-of (https secure "/") "--resolve" (resolve secure)
                           "--data-binary" (string-append "@" (file "big")))))
        (test-assert "a body read as a port, over HTTPS, with HSTS"
          (string-contains-ci head "strict-transport-security: max-age=600")))
      (let ((head (head-of (format #f "http://127.0.0.1:~a/" plain)
                           "--data-binary" (string-append "@" (file "big")))))
        (test-assert "over HTTP, without"
          (and (string-contains head " 200")
               (not (string-contains-ci head "strict-transport-security")))))
      (process-stop process))))

(test-group "serve --listen with --redirect-https, two workers"
  (let ((process plain secure (serve-listen (list "--listen" ":0" "--listen" "tls::0"
                                                "--tls-cert" (file "ec.pem")
                                                "--tls-key" (file "ec.key")
                                                "--redirect-https" "8443"
                                                "--workers" "2"))))
    (test-assert "both listen" (and plain secure))
    (when (and plain secure)
      (for-each
       (lambda (i)
         (let ((head (head-of (format #f "http://127.0.0.1:~a/a?b=~a" plain i))))
           (test-assert (format #f "plain HTTP: a 301 to https (~a)" i)
             (and (string-contains head " 301")
                  (string-contains-ci
                   head (format #f "location: https://127.0.0.1:8443/a?b=~a" i)))))
         (let ((status out (curl (https secure "/") "--resolve" (resolve secure))))
           (test-equal (format #f "HTTPS serves the app (~a)" i) "Hello, World!" out)))
       (iota 4))
      (let ((status killed? (process-stop process)))
        (test-equal "SIGTERM stops it, exit 0" '(0 #f)
          (list (status:exit-val status) killed?))))))

(test-group "serve --listen: cookies Secure over HTTPS only (issue 25d)"
  ;; Served with --tls-cert, session cookies came without Secure: an
  ;; app had to know to set (secure-cookies? #t).
  (call-with-output-file (file "cookies.scm")
    (lambda (port)
      (write '(use-modules (web request) (web uri) (sqlite3)
                           (plucky web cookies) (plucky web session))
             port)
      (write '(define sessions
                (with-sessions (lambda (request body)
                                 (session-set! "user" "ada")
                                 (values '((content-type . (text/plain))) "session"))
                               #:db (lambda () (sqlite-open ":memory:"))))
             port)
      (write '(lambda (request body)
                (if (string=? (uri-path (request-uri request)) "/session")
                    (sessions request body)
                    (values `(,(set-cookie "theme" "dark") (content-type . (text/plain)))
                            "cookie")))
             port)))
  (let ((process plain secure (serve-listen (list "--listen" ":0" "--listen" "tls::0"
                                                  "--tls-cert" (file "ec.pem")
                                                  "--tls-key" (file "ec.key")
                                                  "--workers" "1")
                                            #:app "cookies.scm")))
    (define (set-cookie-line head)
      ;; -> the Set-Cookie line of HEAD, or ""
      (let ((m (regexp-exec (make-regexp "set-cookie: ([^\r\n]*)" regexp/icase) head)))
        (if m (match:substring m 1) "")))
    (test-assert "both listen" (and plain secure))
    (when (and plain secure)
      (for-each
       (lambda (path)
         (let ((over-tls (set-cookie-line (head-of (https secure path) "--resolve" (resolve secure))))
               (over-http (set-cookie-line (head-of (format #f "http://127.0.0.1:~a~a" plain path)))))
           (test-assert (string-append path ": over HTTPS, Secure")
             (string-contains over-tls "; Secure"))
           (test-assert (string-append path ": over HTTP, a cookie without")
             (and (string-contains over-http "HttpOnly")
                  (not (string-contains over-http "Secure"))))))
       '("/cookie" "/session"))
      (process-stop process))))

(remove-tls-dir!)

(test-end "server/tls")
