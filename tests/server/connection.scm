;;; tests/server/connection.scm --- bodies besides bytes: files and takeovers

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; (plucky server connection) sends a file body with sendfile(2) after
;;; the head, in the steps the socket takes, and hands a connection to a
;;; takeover once the head is out.  Each group starts a real server on an
;;; ephemeral port of 127.0.0.1 and talks to it with a raw socket.
;;;
;;; Code:

(use-modules ((srfi srfi-1) #:select (filter-map))
             (srfi srfi-64)
             (srfi srfi-71)
             (tests lib harness)
             (tests lib server)
             (rnrs bytevectors)
             ((rnrs io ports) #:select (put-bytevector get-bytevector-some))
             (ice-9 threads)
             (web request)
             (web response)
             (web uri)
             (plucky sys libc)
             (plucky server transport)
             (plucky server loop)
             (plucky server))

(test-begin "server/connection")

(define file-size (* 4 1024 1024))

(define file-data
  ;; A pattern, so that a misplaced or lost byte shows.
  (let ((bv (make-bytevector file-size)))
    (let lp ((i 0))
      (when (< i file-size)
        (bytevector-u8-set! bv i (modulo (* i 7) 251))
        (lp (+ i 1))))
    bv))

(define file-name
  (let* ((name (string-copy "/tmp/plucky-file-body-XXXXXX"))
         (out (mkstemp! name)))
    (put-bytevector out file-data)
    (close-port out)
    name))

(define (echo! fd transport leftover)
  ;; On a thread: send back what comes on FD, LEFTOVER first, until the
  ;; client closes.
  (let ((buffer (make-bytevector 4096))
        (read (transport-read transport))
        (write (transport-write transport)))
    (define (send! bv count)
      (let lp ((start 0))
        (when (< start count)
          (fd-wait fd 'write 5000)
          (let ((n (write fd (bytevector-address bv) start (- count start))))
            (lp (if (> n 0) (+ start n) start))))))
    (send! leftover (bytevector-length leftover))
    (let lp ()
      (fd-wait fd 'read 10000)
      (let ((n (read fd (bytevector-address buffer) 0 4096)))
        (cond
         ((> n 0) (send! buffer n) (lp))
         ((= n (- errno-EAGAIN)) (lp))
         (else ((transport-close transport) fd)))))))

(define (site request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path "/file")
      (values '((content-type . (application/octet-stream)))
              (make-file-body (open-input-file file-name #:binary #t))))
     ((string=? path "/file-part")
      (values '((content-type . (application/octet-stream)))
              (make-file-body (open-input-file file-name #:binary #t)
                              #:offset 1000 #:length 5000)))
     ((string=? path "/upgrade")
      (values (build-response #:code 101 #:headers '((connection . (upgrade))))
              (make-takeover
               (lambda (fd transport leftover)
                 (call-with-new-thread (lambda () (echo! fd transport leftover)))))))
     (else
      (values '((content-type . (text/plain))) "Hello, World!")))))

(define (readable-before? port deadline)
  (let ((left (max 0 (- deadline (now-seconds)))))
    (pair? (car (select (list port) '() '()
                        (inexact->exact (floor left))
                        (inexact->exact (floor (* 1e6 (- left (floor left))))))))))

(define (descriptors pid)
  ;; -> the names of the entries of /proc/PID/fd
  (let ((stream (opendir (format #f "/proc/~a/fd" pid))))
    (let lp ((names '()))
      (let ((name (readdir stream)))
        (if (eof-object? name)
            (begin (closedir stream) names)
            (lp (if (member name '("." "..")) names (cons name names))))))))

(define (sub bv start end)
  (let ((out (make-bytevector (- end start))))
    (bytevector-copy! bv start out 0 (- end start))
    out))

(define (files-open pid)
  ;; -> the names of the files PID has open
  (filter-map (lambda (n) (false-if-exception
                           (readlink (format #f "/proc/~a/fd/~a" pid n))))
              (descriptors pid)))

(test-group "make-file-body: a file of a few MB to a slow reader"
  (call-with-server
   site
   (lambda (server)
     ;; Two requests pipelined: the file, then a small answer that must
     ;; come after all of it.
     (with-client (server-port server)
       (lambda (client)
         (client-send! client (string-append (request-text "/file") (request-text "/")))
         ;; Read slowly, then go: the server meets a full socket many
         ;; times, then a closed one.
         (let lp ((i 0))
           (when (< i 20)
             (readable-before? (client-socket client) (+ (now-seconds) 5))
             (get-bytevector-some (client-socket client))
             (usleep 10000)
             (lp (+ i 1)))))
       #:receive-buffer 4096)
     ;; A client that reads it all, as it comes.
     (with-client (server-port server)
       (lambda (client)
         (client-send! client (string-append (request-text "/file") (request-text "/")))
         (let ((responses (client-read-responses client 2 #:timeout 30)))
           (test-equal "the file: 200" 200 (response-code (car (car responses))))
           (test-equal "its Content-Length" file-size
             (response-content-length (car (car responses))))
           (test-assert "its bytes" (equal? file-data (cdr (car responses))))
           (test-equal "then the next answer" "Hello, World!"
             (utf8->string (cdr (cadr responses))))))
       #:receive-buffer 4096)
     (with-client (server-port server)
       (lambda (client)
         (client-send! client (request-text "/file-part"))
         (let ((response body (client-read-response client)))
           (test-equal "a part of it: OFFSET and LENGTH" (sub file-data 1000 6000) body))))
     (with-client (server-port server)
       (lambda (client)
         (client-send! client (request-text "/file" #:method "HEAD"))
         (let ((response body (client-read-response client #:head? #t)))
           (test-equal "HEAD: the length" file-size (response-content-length response)))))
     (test-assert "the server has closed the file each time"
       (wait-until (lambda () (not (member file-name (files-open (server-pid server)))))
                   #:timeout 10)))))

(define (read-until port text deadline)
  ;; -> the bytes read from PORT until they end with TEXT, or #f at DEADLINE
  (let ((want (string->utf8 text)))
    (let lp ((got #vu8()))
      (define (ends-with? bv)
        (and (>= (bytevector-length bv) (bytevector-length want))
             (equal? (sub bv (- (bytevector-length bv) (bytevector-length want))
                          (bytevector-length bv))
                     want)))
      (cond
       ((ends-with? got) got)
       ((not (readable-before? port deadline)) #f)
       (else
        (let ((more (get-bytevector-some port)))
          (if (eof-object? more)
              #f
              (lp (let ((both (make-bytevector (+ (bytevector-length got)
                                                  (bytevector-length more)))))
                    (bytevector-copy! got 0 both 0 (bytevector-length got))
                    (bytevector-copy! more 0 both (bytevector-length got)
                                      (bytevector-length more))
                    both)))))))))

(test-group "make-takeover: 101, then the socket is the handler's"
  (call-with-server
   site
   (lambda (server)
     (let ((client (connect-client (server-port server))))
       ;; "hello" comes with the head: the loop has read it, and hands it
       ;; over as LEFTOVER.
       (client-send! client (string-append (request-text "/upgrade") "hello"))
       (let ((got (read-until (client-socket client) "hello" (+ (now-seconds) 10))))
         (test-assert "101 Switching Protocols, then the leftover echoed"
           (and got (string-prefix? "HTTP/1.1 101 Switching Protocols\r\n"
                                    (utf8->string got))))
         (test-assert "Connection: upgrade"
           (and got (string-contains-ci (utf8->string got) "\r\nConnection: upgrade\r\n"))))
       (client-send! client "GET / HTTP/1.1\r\n\r\n")
       (test-assert "what follows is echoed, not parsed as HTTP"
         (read-until (client-socket client) "GET / HTTP/1.1\r\n\r\n" (+ (now-seconds) 10)))
       (client-close! client))
     (let ((response body (http-get (server-port server) "/")))
       (test-equal "the server serves on" 200 (response-code response))))))

(delete-file file-name)

(test-end "server/connection")
