;;; bench/parse.scm --- plucky's request-head parser against Guile's read-request

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Parses three request heads N times each (default 200000) with
;;; `parse-request-head' and with Guile's `read-request' on a bytevector
;;; input port, and prints the time (ns) and the bytes allocated (from
;;; the delta of (gc-stats)'s heap-total-allocated) per parse, and the
;;; ratio Guile / plucky.  Time is the fastest of 5 rounds of N/5 (the
;;; machine is shared); bytes are averaged over all rounds.  Guile's
;;; read-request runs N/4 times (it is slower), and its column includes
;;; opening the port; the last line gives that cost alone.
;;;
;;;   wrk       GET / with Host only, what `wrk' sends
;;;   ab        Host, User-Agent and Accept, what `ab' sends
;;;   chromium  a browser navigation: 14 header fields
;;;
;;; Measure compiled code: `make' (or `guild compile -L . -o
;;; build/plucky/http/parse.go plucky/http/parse.scm') and run
;;;
;;;   guile -L . -C build bench/parse.scm [N]
;;;
;;; or let Guile auto-compile: `guile -L . bench/parse.scm [N]'.  With
;;; GUILE_AUTO_COMPILE=0 and no build/ the parser would be interpreted.
;;;
;;; `bench/parse.scm --markers N' times nothing: it parses each request
;;; N times with plucky's parser between two calls of getpgrp(2), for
;;; bench/parse-instructions, which counts instructions there with
;;; callgrind (times on a shared machine move; those counts do not).
;;;
;;; Code:

(use-modules (plucky http parse)
             (plucky http error)
             (rnrs bytevectors)
             (ice-9 binary-ports)
             (ice-9 format)
             (web request))

(define requests
  `(("wrk" . "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
    ("ab" . ,(string-append
              "GET / HTTP/1.0\r\n"
              "Host: 127.0.0.1:8080\r\n"
              "User-Agent: ApacheBench/2.3\r\n"
              "Accept: */*\r\n\r\n"))
    ("chromium" . ,(string-append
                    "GET /articles/42?page=2 HTTP/1.1\r\n"
                    "Host: localhost:8080\r\n"
                    "Connection: keep-alive\r\n"
                    "sec-ch-ua: \"Chromium\";v=\"124\", \"Google Chrome\";v=\"124\", \"Not-A.Brand\";v=\"99\"\r\n"
                    "sec-ch-ua-mobile: ?0\r\n"
                    "sec-ch-ua-platform: \"Linux\"\r\n"
                    "Upgrade-Insecure-Requests: 1\r\n"
                    "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36\r\n"
                    "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7\r\n"
                    "Sec-Fetch-Site: none\r\n"
                    "Sec-Fetch-Mode: navigate\r\n"
                    "Sec-Fetch-User: ?1\r\n"
                    "Sec-Fetch-Dest: document\r\n"
                    "Accept-Encoding: gzip, deflate, br, zstd\r\n"
                    "Accept-Language: en-US,en;q=0.9\r\n\r\n"))))

(define rounds 5)

(define (measure n thunk)
  "Run THUNK N times, in ROUNDS rounds; return the ns per run of the
fastest round (the machine is shared: the others were interrupted) and
the bytes allocated per run over all rounds."
  (thunk)                               ; warm up, let the JIT see it
  (gc)
  (let ((per-round (max 1 (quotient n rounds)))
        (bytes0 (assq-ref (gc-stats) 'heap-total-allocated)))
    (let loop ((round 0) (best #f))
      (if (= round rounds)
          (values best
                  (/ (- (assq-ref (gc-stats) 'heap-total-allocated) bytes0)
                     1.0 (* rounds per-round)))
          (let ((time0 (get-internal-real-time)))
            (let run ((i 0))
              (when (< i per-round)
                (thunk)
                (run (+ i 1))))
            (let ((ns (/ (* (- (get-internal-real-time) time0) 1e9)
                         internal-time-units-per-second per-round)))
              (loop (+ round 1) (if best (min best ns) ns))))))))

(define (check-same bv)
  ;; Both parsers must agree before their speed means anything.
  (call-with-values (lambda () (parse-request-head bv 0 (bytevector-length bv)))
    (lambda (mine index)
      (let ((guile (read-request (open-bytevector-input-port bv))))
        (unless (and (request? mine)
                     (= index (bytevector-length bv))
                     (equal? (request-method mine) (request-method guile))
                     (equal? (request-uri mine) (request-uri guile))
                     (equal? (request-version mine) (request-version guile))
                     (equal? (request-headers mine) (request-headers guile)))
          (error "parsers disagree" mine guile))))))

(define (markers n)
  ;; Parse each request N times between two getpgrp(2) calls, where
  ;; callgrind --dump-before=getpgrp cuts its profile, after 5,000
  ;; parses not counted (Guile's JIT compiles the parser meanwhile).
  (for-each
   (lambda (entry)
     (let* ((bv (string->utf8 (cdr entry)))
            (end (bytevector-length bv)))
       (define (parse-times k)
         (let loop ((i 0))
           (when (< i k)
             (parse-request-head bv 0 end)
             (loop (+ i 1)))))
       (check-same bv)
       (parse-times 5000)
       (gc)
       (getpgrp)
       (parse-times n)
       (getpgrp)))
   requests))

(define (main args)
  (let ((n (if (> (length args) 1) (string->number (cadr args)) 200000)))
    (format #t "~a parses per request; ns and bytes allocated per parse~%" n)
    (format #t "~10a ~6a ~12@a ~12@a ~12@a ~12@a ~8@a ~8@a~%"
            "request" "bytes" "plucky ns" "plucky B" "guile ns" "guile B"
            "ns x" "B x")
    (for-each
     (lambda (entry)
       (let* ((bv (string->utf8 (cdr entry)))
              (end (bytevector-length bv)))
         (check-same bv)
         (call-with-values
             (lambda () (measure n (lambda () (parse-request-head bv 0 end))))
           (lambda (ns bytes)
             (call-with-values
                 (lambda ()
                   (measure (max 1 (quotient n 4))
                            (lambda () (read-request (open-bytevector-input-port bv)))))
               (lambda (guile-ns guile-bytes)
                 (format #t "~10a ~6d ~12,1f ~12,1f ~12,1f ~12,1f ~8,1f ~8,1f~%"
                         (car entry) end ns bytes guile-ns guile-bytes
                         (/ guile-ns ns) (/ guile-bytes (max bytes 1)))))))))
     requests)
    (call-with-values
        (lambda ()
          (let ((bv (string->utf8 (cdar requests))))
            (measure (max 1 (quotient n 4))
                     (lambda () (open-bytevector-input-port bv)))))
      (lambda (ns bytes)
        (format #t "(open-bytevector-input-port alone: ~,1f ns, ~,1f B)~%"
                ns bytes)))))

(let ((args (command-line)))
  (if (and (= (length args) 3) (string=? (cadr args) "--markers"))
      (markers (string->number (caddr args)))
      (main args)))

;;; bench/parse.scm ends here
