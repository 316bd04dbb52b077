;;; bench/multipart.scm --- how fast (plucky http multipart) parses a body

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Builds a 50 MB multipart/form-data body in memory with a few parts
;;; and feeds it to `feed-multipart!' in 64 KiB slices, as the server
;;; would from its read buffer, with callbacks that only count the
;;; bytes.  Prints MB/s (10^6 bytes a second), the fastest of ROUNDS
;;; runs (the machine is shared), for the whole body and for each kind
;;; of data alone, since the delimiter search costs more the more CRs
;;; the data holds:
;;;
;;;   random    uniformly random bytes (a CR every 256 bytes: a zip, a JPEG)
;;;   text      ASCII text with LF line ends (no CR at all)
;;;   crlf      a CSV with CRLF line ends (a CR every 40 bytes)
;;;   mixed     the 50 MB body: 3 small fields, 30 MB random, 15 MB text, 5 MB crlf
;;;
;;; Measure compiled code: `make', then
;;;
;;;   guile -L . -C build bench/multipart.scm [ROUNDS]
;;;
;;; Code:

(use-modules (plucky http multipart)
             (plucky http error)
             (rnrs bytevectors)
             (ice-9 format))

(define boundary "----WebKitFormBoundary7MA4YWxkTrZu0gW")
(define slice-size (* 64 1024))
(define mb 1000000)

(define (tile pattern size)
  ;; -> a bytevector of SIZE bytes, PATTERN repeated
  (let ((out (make-bytevector size)))
    (let lp ((i 0))
      (when (< i size)
        (let ((n (min (bytevector-length pattern) (- size i))))
          (bytevector-copy! pattern 0 out i n)
          (lp (+ i n)))))
    out))

(define random-block
  (let ((bv (make-bytevector (* 1024 1024)))
        (state (seed->random-state 42)))
    (let lp ((i 0))
      (when (< i (bytevector-length bv))
        (bytevector-u8-set! bv i (random 256 state))
        (lp (+ i 1))))
    bv))

(define text-block
  (string->utf8
   (string-append
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor\n"
    "incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis\n"
    "nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat --\n")))

(define crlf-block
  (string->utf8 "2026-11-21,42,plucky,\"a, b\",3.14159\r\n"))

(define (part-head name filename)
  (string->utf8
   (string-append "--" boundary "\r\nContent-Disposition: form-data; name=\"" name "\""
                  (if filename (string-append "; filename=\"" filename "\"") "")
                  (if filename "\r\nContent-Type: application/octet-stream" "")
                  "\r\n\r\n")))

(define (body . parts)
  ;; PARTS: (name filename data-bytevector) ... -> the whole body
  (let* ((crlf (string->utf8 "\r\n"))
         (close (string->utf8 (string-append "--" boundary "--\r\n")))
         (pieces (append (append-map (lambda (part)
                                       (list (part-head (car part) (cadr part)) (caddr part) crlf))
                                     parts)
                         (list close)))
         (out (make-bytevector (apply + (map bytevector-length pieces)))))
    (let lp ((pieces pieces) (i 0))
      (unless (null? pieces)
        (bytevector-copy! (car pieces) 0 out i (bytevector-length (car pieces)))
        (lp (cdr pieces) (+ i (bytevector-length (car pieces))))))
    out))

(define (append-map f list) (apply append (map f list)))

(define (parse-once bv)
  ;; -> bytes of part data seen; the body must parse to the end
  (let* ((seen 0)
         (parser (make-multipart-parser
                  boundary
                  #:on-part-data (lambda (bv start count) (set! seen (+ seen count)))))
         (end (bytevector-length bv)))
    (let lp ((start 0))
      (call-with-values
          (lambda () (feed-multipart! parser bv start (min end (+ start slice-size))))
        (lambda (status index)
          (cond
           ((eq? status 'done) seen)
           ((http-error? status) (error "parse failed" (http-error-reason status) index))
           ((< index end) (lp index))
           (else (error "body ended early"))))))))

(define (best-seconds rounds thunk)
  (let lp ((round 0) (best #f))
    (if (= round rounds)
        best
        (let ((t0 (get-internal-real-time)))
          (thunk)
          (let ((seconds (/ (- (get-internal-real-time) t0) 1.0 internal-time-units-per-second)))
            (lp (+ round 1) (if best (min best seconds) seconds)))))))

(define (main args)
  (let* ((rounds (if (> (length args) 1) (string->number (cadr args)) 5))
         (cases
          `(("random" ,(body (list "file" "r.bin" (tile random-block (* 50 mb)))))
            ("text" ,(body (list "file" "t.txt" (tile text-block (* 50 mb)))))
            ("crlf" ,(body (list "file" "c.csv" (tile crlf-block (* 50 mb)))))
            ("mixed" ,(body (list "title" #f (string->utf8 "Holiday photos"))
                            (list "tags" #f (string->utf8 "sea, sun"))
                            (list "photos" "photos.zip" (tile random-block (* 30 mb)))
                            (list "notes" "notes.txt" (tile text-block (* 15 mb)))
                            (list "agree" #f (string->utf8 "on"))
                            (list "table" "table.csv" (tile crlf-block (* 5 mb))))))))
    (format #t "~a rounds, 64 KiB slices, boundary of ~a bytes; MB = 10^6 bytes~%"
            rounds (string-length boundary))
    (format #t "~8a ~10@a ~10@a ~10@a~%" "data" "body MB" "best s" "MB/s")
    (for-each
     (lambda (case)
       (let* ((bv (cadr case))
              (seen (parse-once bv))
              (seconds (best-seconds rounds (lambda () (parse-once bv)))))
         (when (< seen (* 45 mb)) (error "part data lost" seen))
         (format #t "~8a ~10,1f ~10,4f ~10,0f~%" (car case) (/ (bytevector-length bv) 1.0 mb)
                 seconds (/ (bytevector-length bv) 1.0 mb seconds))))
     cases)))

(main (command-line))

;;; bench/multipart.scm ends here
