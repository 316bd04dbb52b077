;;; tests/server/body-tls.scm --- large bodies read as ports over TLS, at once

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `plucky serve --tls-cert' and several curl clients uploading 5 MB
;;; each at the same time, slowly, to a `with-body-port' handler: one
;;; that reads its body through Guile's suspendable ports (the request
;;; suspends, the TLS transport's reads on the loop), one blocked in C
;;; on it (`get-bytevector-all': the guard hands the pipe to a filler
;;; thread, which reads the TLS connection beside the loop's other
;;; connections).  Each handler writes what it read to a file, compared
;;; with what was sent.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (srfi srfi-71)
             (ice-9 binary-ports)
             (tests lib harness)
             (tests lib server)
             (tests lib tls))

(test-begin "server/body-tls")

(define file tls-file)

(test-group "test certificates"
  (test-eqv "openssl made them" 0 (make-test-certificates!)))

(define size (* 5 1000 1000))

(define (write-files!)
  ;; The upload, random bytes, and the app: /all reads in C, /count
  ;; through suspendable ports; both write what they read to the file
  ;; the X-Name header names, in the test's directory.
  (call-with-output-file (file "upload")
    (lambda (out)
      (call-with-input-file "/dev/urandom"
        (lambda (in)
          (put-bytevector out (get-bytevector-n in size)))
        #:binary #t))
    #:binary #t)
  (call-with-output-file (file "uploads.scm")
    (lambda (port)
      (write
       `(begin
          (use-modules (plucky server) (ice-9 binary-ports) (rnrs bytevectors)
                       (web request) (web uri))
          (with-body-port
           (lambda (request body)
             (let* ((path (uri-path (request-uri request)))
                    (name (assq-ref (request-headers request) 'x-name))
                    (out (open-file (string-append ,tls-dir "/" name) "wb"))
                    (n (if (string=? path "/all")
                           (let ((bv (get-bytevector-all body)))
                             (put-bytevector out bv)
                             (bytevector-length bv))
                           (let ((buf (make-bytevector 65536)))
                             (let lp ((n 0))
                               (let ((got (get-bytevector-n! body buf 0 65536)))
                                 (if (eof-object? got)
                                     n
                                     (begin (put-bytevector out buf 0 got)
                                            (lp (+ n got))))))))))
               (close-port out)
               (values '((content-type . (text/plain)))
                       (string-append (number->string n) " bytes"))))))
       port))))

(test-assert "the upload and the app written" (begin (write-files!) #t))

(define (upload port path name)
  ;; -> a curl process uploading the file to PATH, slowly, as NAME
  (spawn "curl" (list "-s" "-S" "--max-time" "60" "--cacert" (file "ca.pem")
                      "--resolve" (resolve port) "--limit-rate" "2M"
                      "-H" (string-append "X-Name: " name)
                      "--data-binary" (string-append "@" (file "upload"))
                      (https port path))))

(define (same-file? a b)
  (zero? (status:exit-val (system* "cmp" "-s" a b))))

(test-group "5 MB uploads over TLS, eight at once, to body ports"
  (with-serve (process port "uploads.scm"
                       "--tls-cert" (file "ec.pem") "--tls-key" (file "ec.key"))
    (let* ((names (map (lambda (i) (format #f "got-~a" i)) (iota 8)))
           ;; Half read in C, half through suspendable ports, interleaved.
           (paths (map (lambda (i) (if (even? i) "/all" "/count")) (iota 8)))
           (clients (map (lambda (path name) (upload port path name)) paths names))
           (deadline (+ (now-seconds) 90))
           (outputs (map (lambda (client)
                           (read-all-before (process-stdout client) deadline))
                         clients)))
      (for-each (lambda (client)
                  (if (process-wait client #:timeout 30)
                      (begin (close-port (process-stdout client))
                             (close-port (process-stderr client)))
                      (process-stop client)))
                clients)
      (test-equal "each answered with its length"
        (make-list 8 (string-append (number->string size) " bytes"))
        outputs)
      (test-equal "each handler read the bytes sent" (make-list 8 #t)
        (map (lambda (name) (same-file? (file "upload") (file name))) names)))))

(remove-tls-dir!)

(test-end "server/body-tls")
