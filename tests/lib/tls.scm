;;; (tests lib tls) --- a test CA, `plucky serve' over TLS, real clients

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; What the TLS tests share: a temporary directory holding a test CA and
;;; the certificates it signs, made with openssl (ECDSA P-256 for
;;; localhost, RSA for rsa.test, an expired one, an OCSP response for
;;; the ECDSA one); small apps; `serve', which starts `plucky serve' as a
;;; user would and reads the port it listens on; and the clients (curl,
;;; openssl, Python) run to completion with a time limit.
;;;
;;; Code:

(define-module (tests lib tls)
  #:use-module (srfi srfi-64)
  #:use-module (srfi srfi-71)
  #:use-module (ice-9 regex)
  #:use-module (tests lib server)
  #:export (plucky
            allow-root
            run
            shell
            tls-dir
            tls-file
            make-test-certificates!
            listening-rx
            serve
            with-serve
            curl
            https
            resolve
            python
            remove-tls-dir!))

(define root
  (dirname (dirname (dirname (search-path %load-path "tests/lib/harness.scm")))))
(define plucky (string-append root "/bin/plucky"))
(define allow-root (if (zero? (geteuid)) '("--allow-root") '()))

(define* (run program args #:key (timeout 60))
  "Run PROGRAM with ARGS to completion, for at most TIMEOUT seconds;
return (values exit-status stdout stderr)."
  (let* ((process (spawn program args))
         (deadline (+ (now-seconds) timeout))
         (out (read-all-before (process-stdout process) deadline))
         (err (read-all-before (process-stderr process) deadline))
         (status (process-wait process #:timeout (max 0.1 (- deadline (now-seconds))))))
    (close-port (process-stdout process))
    (close-port (process-stderr process))
    (values (and status (status:exit-val status)) out err)))

(define (shell command)
  "Return the exit status of COMMAND run by sh, its output discarded."
  (let ((status out err (run "sh" (list "-c" command))))
    status))

(define tls-dir
  (let ((name (string-copy "/tmp/plucky-tls-XXXXXX")))
    (close-port (mkstemp! name))
    (delete-file name)
    (mkdir name)
    name))

(define (tls-file name)
  "Return the path of NAME in the tests' temporary directory."
  (string-append tls-dir "/" name))

(define (remove-tls-dir!)
  "Delete the tests' temporary directory."
  (shell (string-append "rm -rf " tls-dir)))

(define (make-test-certificates!)
  "Make, in `tls-dir': a CA (ca.pem); leaf certificates it signs for
localhost and 127.0.0.1 (ec.pem, ECDSA P-256) and rsa.test (rsa.pem, RSA
2048, its CA as a chain in the file); an expired one (expired.pem); an
OCSP response saying ec.pem is good (ec.ocsp, DER); app.scm (\"Hello,
World!\", /file a 300,000-byte file, /pid the worker's PID); and
threads.scm (a body port and a streamed answer).  Return openssl's exit
status."
  (shell
   (string-append
    "set -e; cd " tls-dir "; exec 2>/dev/null >/dev/null;"
    "openssl ecparam -name prime256v1 -genkey -noout -out ca.key;"
    "openssl req -x509 -new -key ca.key -subj /CN=plucky-test-ca -days 2 -out ca.pem;"
    "openssl ecparam -name prime256v1 -genkey -noout -out ec.key;"
    "openssl req -new -key ec.key -subj /CN=localhost -out ec.csr;"
    "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ec.ext;"
    "openssl x509 -req -in ec.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile ec.ext -out ec.pem;"
    "openssl x509 -req -in ec.csr -CA ca.pem -CAkey ca.key -days -1 -out expired.pem;"
    "openssl genrsa -out rsa.key 2048;"
    "openssl req -new -key rsa.key -subj /CN=rsa.test -out rsa.csr;"
    "printf 'subjectAltName=DNS:rsa.test\\n' > rsa.ext;"
    "openssl x509 -req -in rsa.csr -CA ca.pem -CAkey ca.key -days 2 -extfile rsa.ext -out rsa-leaf.pem;"
    "cat rsa-leaf.pem ca.pem > rsa.pem;"
    ;; An OCSP responder's database saying ec.pem is valid, and its answer.
    "printf 'V\\t%s\\t\\t%s\\tunknown\\t/CN=localhost\\n' $(date -u -d '+2 days' +%y%m%d%H%M%SZ)"
    " $(openssl x509 -in ec.pem -serial -noout | cut -d= -f2) > index.txt;"
    "openssl ocsp -issuer ca.pem -cert ec.pem -no_nonce -reqout ocsp-request.der;"
    "openssl ocsp -index index.txt -rsigner ca.pem -rkey ca.key -CA ca.pem"
    " -reqin ocsp-request.der -respout ec.ocsp -ndays 2;"
    "printf '%s\\n' '(use-modules (plucky server loop) (web request) (web uri))'"
    " '(lambda (request body)'"
    " '  (let ((path (uri-path (request-uri request))))'"
    " '    (cond'"
    " '     ((string=? path \"/file\")'"
    " '      (values (quote ((content-type . (application/octet-stream))))'"
    " '              (make-file-body (open-input-file (string-append app-directory \"/big\") #:binary #t))))'"
    " '     ((string=? path \"/pid\")'"
    " '      (values (quote ((content-type . (text/plain)))) (format #f \"pid=~a\\n\" (getpid))))'"
    " '     (else (values (quote ((content-type . (text/plain)))) \"Hello, World!\")))))' > app.scm;"
    "head -c 300000 /dev/urandom > big;"
    "printf '%s\\n' '(use-modules (plucky server) (ice-9 binary-ports) (rnrs bytevectors))'"
    " '(with-body-port (lambda (request body)'"
    " '  (if body'"
    " '      (values (quote ((content-type . (text/plain))))'"
    " '              (format #f \"~a bytes\" (bytevector-length (get-bytevector-all body))))'"
    " '      (values (quote ((content-type . (text/plain)) (transfer-encoding . ((chunked)))))'"
    " '              (lambda (port) (do ((i 0 (+ i 1))) ((= i 1000)) (display \"streamed line\n\" port)))))))'"
    " > threads.scm")))

(define listening-rx (make-regexp "listening on (https?)://127\\.0\\.0\\.1:([0-9]+)/"))

(define* (serve args #:key (timeout 30) (app "app.scm"))
  "Start `plucky serve APP --port 0 ARGS…' (one worker unless ARGS give
--workers); return (values process scheme port) once it listens, SCHEME
and PORT #f when it did not within TIMEOUT seconds."
  (let* ((process (spawn plucky (append (list "serve" (tls-file app) "--port" "0")
                                        (if (member "--workers" args) '() '("--workers" "1"))
                                        allow-root args)))
         (deadline (+ (now-seconds) timeout)))
    (let lp ()
      (let ((line (read-line-before (process-stderr process) deadline)))
        (cond
         ((not (string? line)) (process-stop process) (values process #f #f))
         ((regexp-exec listening-rx line)
          => (lambda (m) (values process (match:substring m 1)
                                 (string->number (match:substring m 2)))))
         (else (lp)))))))

(define-syntax-rule (with-serve (process port app args ...) body ...)
  ;; BODY with PORT that of `plucky serve APP ARGS…', stopped after it
  (let ((process scheme port (serve (list args ...) #:app app)))
    (test-equal "serve: listening on https" "https" scheme)
    (when port
      (dynamic-wind
        (lambda () #t)
        (lambda () body ...)
        (lambda ()
          (let ((status killed? (process-stop process)))
            (test-equal "serve: SIGTERM stops it, exit 0" '(0 #f)
                        (list (status:exit-val status) killed?))))))))

(define (curl . args)
  "Run curl with the test CA and ARGS; return (values status output)."
  (let ((status out err (run "curl" (append (list "-s" "-S" "--max-time" "10"
                                                  "--cacert" (tls-file "ca.pem"))
                                            args))))
    (values status out)))

(define (https port path)
  "Return the URL of PATH on localhost:PORT over https."
  (format #f "https://localhost:~a~a" port path))

(define (resolve port)
  "Return curl's --resolve argument that takes localhost:PORT to 127.0.0.1."
  (format #f "localhost:~a:127.0.0.1" port))

(define (python port script . args)
  "Return the output of the Python SCRIPT, given PORT as sys.argv[1] and
ARGS after it, or \"failed: \" and its standard error."
  (let ((status out err (run "python3" (append (list "-c" script (number->string port))
                                               args))))
    (if (zero? (or status 1)) out (string-append "failed: " err))))

;;; (tests lib tls) ends here
