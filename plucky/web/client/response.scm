;;; (plucky web client response) --- a response's head and body, read from a connection

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The head is read into the connection's buffer until its blank line
;;; (bounded by `max-head-bytes' and `max-header-fields'), checked for
;;; the shape of a status line and of field lines so that a fault is
;;; reported with its byte offset, then made into Guile's own <response>
;;; with Guile's own header parsers (`head->response').  Informational responses
;;; (100 Continue, 103 Early Hints) are read past.
;;;
;;; The body's framing follows RFC 9112 §6.3: none after HEAD and for
;;; 1xx, 204 and 304; chunked when the last transfer coding says so
;;; (decoded by (plucky http chunked)); until the connection closes for
;;; any other transfer coding or when no Content-Length is given;
;;; otherwise Content-Length bytes.  A <body> hands out what has come,
;;; piece by piece (`read-body-piece'), so that a proxy can pass a body
;;; on without holding all of it, and says when it is over
;;; (`body-done?') and whether the connection may carry another
;;; exchange (`body-reusable?').
;;;
;;; Offsets in conditions count bytes from the start of the response
;;; (the final one, after any 1xx).
;;;
;;; Code:

(define-module (plucky web client response)
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-11)
  #:use-module (rnrs bytevectors)
  #:use-module (ice-9 exceptions)
  #:use-module ((ice-9 binary-ports) #:select (eof-object))
  #:use-module (ice-9 threads)
  #:use-module ((web http) #:select (known-header? parse-header))
  #:use-module (web response)
  #:use-module (plucky http)
  #:use-module (plucky web client connection)
  #:use-module (plucky web client error)
  #:export (max-head-bytes
            max-header-fields
            read-response-head
            read-raw-response-head
            make-body
            make-raw-body
            body?
            body-done?
            body-reusable?
            body-total
            body-left
            body-kind
            read-body-piece
            read-body-rest
            body-buffered?))

;; Limits on a response head: its bytes, status line included, and its
;; field lines.  Larger than any server's defaults for its own limits
;; (nginx: 4 x 8 KiB), so that they only stop what is not HTTP.
(define max-head-bytes (* 64 1024))
(define max-header-fields 256)

;;;
;;; The head
;;;

(define (find-blank-line bv start end)
  ;; -> index just past the first empty line (LF LF or LF CR LF) in BV
  ;; [START, END), or #f
  (let lp ((i start))
    (cond
     ((>= (+ i 1) end) #f)
     ((not (= 10 (bytevector-u8-ref bv i))) (lp (+ i 1)))
     ((= 10 (bytevector-u8-ref bv (+ i 1))) (+ i 2))
     ((and (< (+ i 2) end)
           (= 13 (bytevector-u8-ref bv (+ i 1)))
           (= 10 (bytevector-u8-ref bv (+ i 2))))
      (+ i 3))
     (else (lp (+ i 1))))))

(define (status-line-fault bv start end complete?)
  ;; -> offset (from START) of the first byte of BV [START, END) that
  ;; cannot begin a status line "HTTP/d.d ddd", or #f.  Bytes missing
  ;; at END are a fault only when the head is COMPLETE?.
  (let ((shape "HTTP/0.0 000"))           ; 0: any digit
    (let lp ((i 0))
      (cond
       ((= i (string-length shape)) #f)
       ((>= (+ start i) end) (and complete? i))
       (else
        (let ((byte (bytevector-u8-ref bv (+ start i)))
              (want (char->integer (string-ref shape i))))
          (if (if (= want 48) (<= 48 byte 57) (= byte want))
              (lp (+ i 1))
              i)))))))

(define (line-end bv i end)
  ;; -> index of the LF at or after I, or END
  (let lp ((i i))
    (cond ((>= i end) end)
          ((= 10 (bytevector-u8-ref bv i)) i)
          (else (lp (+ i 1))))))

(define (field-line-fault bv start end)
  ;; -> (values offset fields) for the head BV [START, END), which ends
  ;; in its blank line: the offset (from START) of a field line without
  ;; a colon or of a control byte, or #f; and the number of field lines
  (let line ((i (+ 1 (line-end bv start end))) (fields 0))
    (let* ((lf (line-end bv i end))
           (stop (if (and (> lf i) (= 13 (bytevector-u8-ref bv (- lf 1)))) (- lf 1) lf)))
      (if (<= stop i)
          (values #f fields)                    ; the blank line
          (let scan ((k i) (colon? #f))
            (cond
             ((= k stop)
              (if colon? (line (+ lf 1) (+ fields 1)) (values (- i start) fields)))
             ((let ((byte (bytevector-u8-ref bv k)))
                (or (= byte 127) (and (< byte 32) (not (= byte 9)))))
              (values (- k start) fields))
             (else (scan (+ k 1) (or colon? (= 58 (bytevector-u8-ref bv k)))))))))))

(define (parse-head bv start end uri)
  ;; -> <response> of the head BV [START, END), or raise
  (define (malformed message offset)
    (raise-client-error 'malformed-response message #:offset offset #:uri uri))
  (let ((fault (status-line-fault bv start end #t)))
    (when fault
      (malformed "the server's bytes do not start with an HTTP/1 status line" fault)))
  (let-values (((fault fields) (field-line-fault bv start end)))
    (when fault
      (malformed "a malformed header field line" fault))
    (when (> fields max-header-fields)
      (raise-client-error 'head-too-large "the response has too many header fields"
                          #:uri uri #:irritants (list fields))))
  (with-exception-handler
      (lambda (e)
        (malformed (string-append "Guile's header parser refuses the head: "
                                  (if (exception-with-message? e)
                                      (exception-message e)
                                      "bad response"))
                   #f))
    (lambda () (head->response bv start end))
    #:unwind? #t))

;;; The head is made into Guile's <response> here rather than by Guile's
;;; `read-response' on a port over its bytes: that reads a character at
;;; a time through a port and parses every value afresh, and it was the
;;; largest cost of a proxied request (bench/proxy).  The result is the
;;; same record, with the same values: each field's name as Guile's
;;; `string->header' makes it, its value trimmed and given to Guile's
;;; `parse-header', a folded line (obs-fold) appended as Guile appends it.
;;; Values of the headers Guile knows are kept by name and text, so that
;;; the Date, Server or Content-Type an upstream repeats on every answer
;;; is parsed once and is the same object each time, which (plucky http
;;; response) then renders once too (bench/proxy).  Like Guile's
;;; literals, such a value is not to be mutated.

(define (latin-1 bv start end)
  ;; BV [START, END) as a string of one character per byte.  ASCII, the
  ;; usual case, is decoded by utf8->string (C): string-set! per
  ;; character takes a lock each call.
  (let ((n (- end start)))
    (if (let ascii? ((i start))
          (or (= i end) (and (< (bytevector-u8-ref bv i) 128) (ascii? (+ i 1)))))
        (let ((slice (make-bytevector n)))
          (bytevector-copy! bv start slice 0 n)
          (utf8->string slice))
        (let ((s (make-string n)))
          (let lp ((i start))
            (when (< i end)
              (string-set! s (- i start) (integer->char (bytevector-u8-ref bv i)))
              (lp (+ i 1))))
          s))))

(define (blank? byte) (or (= byte 32) (= byte 9)))

(define (trimmed-end bv start end)
  ;; -> END less the CR and blanks before it
  (let lp ((end end))
    (if (and (> end start)
             (let ((byte (bytevector-u8-ref bv (- end 1))))
               (or (blank? byte) (= byte 13))))
        (lp (- end 1))
        end)))

(define (skip-blanks bv i end)
  (if (and (< i end) (blank? (bytevector-u8-ref bv i))) (skip-blanks bv (+ i 1) end) i))

(define value-cache-limit 256)
(define value-cache (make-hash-table))  ; value text -> (name . parsed value)
(define value-cache-count 0)
(define value-cache-mutex (make-mutex)) ; the client may run on pool threads too

(define (header-value name text)
  ;; NAME's value TEXT, parsed as Guile's `read-header' parses it
  (if (not (known-header? name))
      text
      (let ((hit (with-mutex value-cache-mutex (hash-ref value-cache text))))
        (if (and hit (eq? (car hit) name))
            (cdr hit)
            (let ((value (parse-header name text)))
              (with-mutex value-cache-mutex
                (when (>= value-cache-count value-cache-limit)
                  (hash-clear! value-cache)
                  (set! value-cache-count 0))
                (hash-set! value-cache text (cons name value))
                (set! value-cache-count (+ value-cache-count 1)))
              value)))))

(define (head->response bv start end)
  ;; -> Guile's <response> of the checked head BV [START, END), which
  ;; starts "HTTP/d.d ddd" and ends in its blank line
  (let* ((lf (line-end bv start end))
         (version (cons (- (bytevector-u8-ref bv (+ start 5)) 48)
                        (- (bytevector-u8-ref bv (+ start 7)) 48)))
         (code (+ (* 100 (- (bytevector-u8-ref bv (+ start 9)) 48))
                  (* 10 (- (bytevector-u8-ref bv (+ start 10)) 48))
                  (- (bytevector-u8-ref bv (+ start 11)) 48)))
         (phrase-start (if (or (= (+ start 12) lf)
                               (memv (bytevector-u8-ref bv (+ start 12)) '(9 13 32)))
                           (skip-blanks bv (+ start 12) lf)
                           (error "the status code has more than three digits")))
         (phrase (latin-1 bv phrase-start (trimmed-end bv phrase-start lf))))
    (let lp ((i (+ lf 1)) (fields '()))
      (let* ((lf (line-end bv i end))
             (stop (trimmed-end bv i lf)))
        (if (or (= lf i) (and (= lf (+ i 1)) (= 13 (bytevector-u8-ref bv i))))
            (build-response #:version version #:code code #:reason-phrase phrase
                            #:headers (reverse! fields) #:validate-headers? #f)
            (let* ((colon (let find ((k i))
                            (if (= 58 (bytevector-u8-ref bv k)) k (find (+ k 1)))))
                   (name (string->symbol (string-downcase (latin-1 bv i colon))))
                   (value-start (skip-blanks bv (+ colon 1) stop)))
              ;; obs-fold: the next lines that start with a blank
              (let fold ((lf lf) (text (latin-1 bv value-start stop)))
                (let ((next (+ lf 1)))
                  (if (and (< next end) (blank? (bytevector-u8-ref bv next))
                           (> (trimmed-end bv next (line-end bv next end)) next))
                      (let* ((lf2 (line-end bv next end))
                             (cr? (= 13 (bytevector-u8-ref bv (- lf2 1)))))
                        ;; as Guile: the line as it is, less its CR
                        (fold lf2 (string-append
                                   text (latin-1 bv next (if cr? (- lf2 1) lf2)))))
                      (lp next (acons name (header-value name text) fields)))))))))))

(define (read-response-head conn timeouts uri)
  "Read the head of the next final response from CONN (skipping 1xx ones
but 101) and return two values: Guile's <response> and the head's size
in bytes.  Raise an &http-client-error: closed when the server closes
before a byte of it (a stale pooled connection, or a server that hung
up), malformed-response, head-too-large, or a time-out."
  (let lp ((scanned (connection-start conn)))
    (let* ((bv (connection-buffer conn))
           (start (connection-start conn))
           (end (connection-end conn))
           (found (find-blank-line bv (max start (- scanned 2)) end)))
      (cond
       (found
        (let ((response (parse-head bv start found uri)))
          (set-connection-start! conn found)
          (if (and (<= 100 (response-code response) 199)
                   (not (= 101 (response-code response))))
              (lp found)
              (values response (- found start)))))
       ((> (- end start) max-head-bytes)
        (raise-client-error 'head-too-large "the response head passed its size limit"
                            #:uri uri #:irritants (list max-head-bytes)))
       (else
        (let ((fault (status-line-fault bv start end #f)))
          ;; Garbage is reported as soon as it shows, not after 64 KiB.
          (when fault
            (raise-client-error 'malformed-response
                                "the server's bytes do not start with an HTTP/1 status line"
                                #:offset fault #:uri uri)))
        (fill-head! conn timeouts start end uri)
        ;; The buffer may have moved: scan from the same byte anew.
        (lp (+ (connection-start conn) (- end start))))))))

(define (fill-head! conn timeouts start end uri)
  ;; Read more of a head, [START, END) so far; raise at an end of file.
  (when (zero? (connection-fill! conn timeouts))
    (if (= start end)
        (raise-client-error 'closed "the server closed the connection without a response"
                            #:uri uri)
        (raise-client-error 'malformed-response
                            "the server closed the connection within the response head"
                            #:offset (- end start) #:uri uri))))

;;;
;;; The body
;;;

(define raw-head-limits
  ;; what `read-raw-response-head' allows: as `read-response-head'
  (make-parse-limits #:max-request-line 8192 #:max-header-bytes max-head-bytes
                     #:max-header-count max-header-fields))

(define (read-raw-response-head conn timeouts uri)
  "Read the head of the next final response from CONN (skipping 1xx ones
but 101) with (plucky http)'s `parse-response-head' and return three
values: its <response-head>, a fresh bytevector of the head's bytes (its
size the head's), and BASE: the head's positions count in BYTES from
-BASE (a field's name starts at (- (field-name-start field) BASE)).  Raise an
&http-client-error as `read-response-head' does."
  (let lp ()
    (let* ((bv (connection-buffer conn))
           (start (connection-start conn))
           (end (connection-end conn)))
      (call-with-values (lambda () (parse-response-head bv start end raw-head-limits))
        (lambda (head index)
          (cond
           ((response-head? head)
            (let* ((size (- index start))
                   (bytes (make-bytevector size)))
              (bytevector-copy! bv start bytes 0 size)
              (set-connection-start! conn index)
              (let ((code (response-head-code head)))
                (if (and (<= 100 code 199) (not (= code 101)))
                    (lp)
                    (values head bytes start)))))
           ((http-error? head)
            (if (= 431 (http-error-status head))
                (raise-client-error 'head-too-large
                                    (string-append "the response head passed a limit: "
                                                   (http-error-reason head))
                                    #:uri uri)
                (raise-client-error 'malformed-response
                                    (string-append "a malformed response head: "
                                                   (http-error-reason head))
                                    #:offset (- (http-error-offset head) start) #:uri uri)))
           (else
            (fill-head! conn timeouts start end uri)
            (lp))))))))

(define-record-type <body>
  (%make-body conn kind left decoder max-body total offset done? keep? uri)
  body?
  (conn body-conn)
  (kind body-kind)                      ; none | length | chunked | close
  (left body-left set-body-left!)       ; length: bytes still to come
  (decoder body-decoder)                ; chunked: its <chunked-decoder>
  (max-body body-max-body)              ; bytes, or #f
  (total body-total set-body-total!)    ; body bytes handed out so far
  ;; bytes of the response consumed from the connection, head included
  (offset body-offset set-body-offset!)
  (done? body-done? set-body-done!)
  (keep? body-keep?)                    ; the framing lets the connection go on
  (uri body-uri))

(define (chunked? response)
  (let ((codings (response-transfer-encoding response)))
    (and (pair? codings)
         (equal? (car (list-ref codings (- (length codings) 1))) 'chunked))))

(define* (make-body conn response head-size method #:key max-body uri)
  "Return a <body> reading RESPONSE's body from CONN, its framing chosen
by METHOD (a symbol) and RESPONSE.  Raise body-too-large at once when
its Content-Length passes MAX-BODY."
  (framed-body conn (response-code response) (response-version response)
               (let ((codings (response-transfer-encoding response)))
                 (cond ((chunked? response) 'chunked)
                       ((pair? codings) 'other)
                       (else #f)))
               (response-content-length response) (response-connection response)
               head-size method max-body uri))

(define* (make-raw-body conn head head-size method #:key max-body uri)
  "Return a <body> reading the body of the response whose
<response-head> is HEAD from CONN, as `make-body' does."
  (framed-body conn (response-head-code head) (response-head-version head)
               (response-head-transfer-coding head) (response-head-content-length head)
               (response-head-connection head) head-size method max-body uri))

(define (framed-body conn code version coding length connection head-size method
                     max-body uri)
  ;; CODING: #f, chunked (the last coding) or other; CONNECTION: the
  ;; Connection options, symbols
  (let* ((no-body? (or (eq? method 'HEAD) (<= 100 code 199) (= code 204) (= code 304)))
         (kind (cond (no-body? 'none)
                     ((eq? coding 'chunked) 'chunked)
                     (coding 'close)
                     (length 'length)
                     (else 'close)))
         (close? (memq 'close connection))
         (keep? (and (not (eq? kind 'close))
                     (not (= code 101))
                     (not close?)
                     (or (equal? version '(1 . 1))
                         (memq 'keep-alive connection))
                     #t)))
    (when (and (eq? kind 'length) max-body (> length max-body))
      (raise-client-error 'body-too-large "the response's Content-Length passes #:max-body"
                          #:uri uri #:irritants (list length max-body)))
    (%make-body conn kind (if (eq? kind 'length) length 0)
                (and (eq? kind 'chunked)
                     (make-chunked-decoder #:max-total (or max-body (expt 2 62))))
                max-body 0 head-size
                (or (eq? kind 'none) (and (eq? kind 'length) (zero? length)))
                keep? uri)))

(define (body-reusable? body)
  "True when BODY is over and its connection may carry another exchange:
the framing allowed it, and the server sent nothing past the response."
  (let ((conn (body-conn body)))
    (and (body-done? body)
         (body-keep? body)
         (= (connection-start conn) (connection-end conn)))))

(define (take! body count)
  ;; -> a fresh bytevector of the next COUNT buffered bytes
  (let* ((conn (body-conn body))
         (start (connection-start conn))
         (out (make-bytevector count)))
    (bytevector-copy! (connection-buffer conn) start out 0 count)
    (set-connection-start! conn (+ start count))
    (set-body-offset! body (+ (body-offset body) count))
    out))

(define (count! body piece)
  (let ((total (+ (body-total body) (bytevector-length piece)))
        (max-body (body-max-body body)))
    (when (and max-body (> total max-body))
      (raise-client-error 'body-too-large "the response's body passes #:max-body"
                          #:uri (body-uri body) #:irritants (list max-body)))
    (set-body-total! body total)
    piece))

(define (fill! body timeouts)
  ;; Read more; an end of file in a framed body is an error.
  (let ((conn (body-conn body)))
    (when (zero? (connection-fill! conn timeouts))
      (if (eq? (body-kind body) 'close)
          (set-body-done! body #t)
          (raise-client-error 'closed "the server closed the connection within the body"
                              #:offset (body-offset body) #:uri (body-uri body))))))

(define (buffered body)
  (let ((conn (body-conn body)))
    (- (connection-end conn) (connection-start conn))))

(define (body-buffered? body)
  "True when the rest of BODY, of known length, has all come: reading it
waits for nothing and cannot fail."
  (and (eq? (body-kind body) 'length)
       (<= (body-left body) (buffered body))))

(define (read-body-piece body timeouts)
  "Return the next piece of BODY as a fresh bytevector, waiting within
TIMEOUTS for it to come, or the end-of-file object once BODY is over.
Raise an &http-client-error when the server closes too soon, the body
is malformed or passes its #:max-body."
  (let lp ()
    (cond
     ((body-done? body) (eof-object))
     ((zero? (buffered body))
      (fill! body timeouts)
      (lp))
     (else
      (case (body-kind body)
        ((length)
         (let ((piece (take! body (min (buffered body) (body-left body)))))
           (set-body-left! body (- (body-left body) (bytevector-length piece)))
           (when (zero? (body-left body)) (set-body-done! body #t))
           piece))
        ((close)
         (count! body (take! body (buffered body))))
        ((chunked) (read-chunked-piece body timeouts lp)))))))

(define* (read-body-rest body timeouts #:optional (into #f))
  "Return the rest of BODY as one fresh bytevector, waiting within
TIMEOUTS for it to come; BODY is then over.  A body of known length is
read straight into a bytevector of its size, without the pieces and
their concatenation (a proxy's buffered body, `http-request'), or into
INTO, a bytevector at least that large, when given: INTO is then
returned, its first (`body-left' before the call) bytes the rest."
  (if (and (eq? (body-kind body) 'length) (not (body-done? body)))
      (let* ((conn (body-conn body))
             (left (body-left body))
             (out (or into (make-bytevector left))))
        (let lp ((at 0))
          (if (= at left)
              (begin
                (set-body-left! body 0)
                (set-body-done! body #t)
                out)
              (let ((n (if (zero? (buffered body))
                           (connection-read-into! conn out at (- left at) timeouts)
                           (let ((n (min (buffered body) (- left at)))
                                 (from (connection-start conn)))
                             (bytevector-copy! (connection-buffer conn) from out at n)
                             (set-connection-start! conn (+ from n))
                             n))))
                (when (zero? n)
                  (raise-client-error 'closed "the server closed the connection within the body"
                                      #:offset (body-offset body) #:uri (body-uri body)))
                (set-body-offset! body (+ (body-offset body) n))
                (lp (+ at n))))))
      (let lp ((pieces '()))
        (let ((piece (read-body-piece body timeouts)))
          (cond
           ((not (eof-object? piece)) (lp (cons piece pieces)))
           ((null? pieces) #vu8())
           ((null? (cdr pieces)) (car pieces))
           (else (bytevector-concatenate (reverse pieces))))))))

(define (read-chunked-piece body timeouts again)
  (let* ((conn (body-conn body))
         (start (connection-start conn))
         (pieces '()))
    (call-with-values
        (lambda ()
          (decode-chunked! (body-decoder body) (connection-buffer conn) start
                           (connection-end conn)
                           (lambda (bv from count)
                             (let ((piece (make-bytevector count)))
                               (bytevector-copy! bv from piece 0 count)
                               (set! pieces (cons piece pieces))))))
      (lambda (result index)
        (set-connection-start! conn index)
        (set-body-offset! body (+ (body-offset body) (- index start)))
        (cond
         ((http-error? result)
          (if (= 413 (http-error-status result))
              (raise-client-error 'body-too-large "the response's body passes #:max-body"
                                  #:uri (body-uri body)
                                  #:irritants (list (body-max-body body)))
              (raise-client-error 'malformed-response
                                  (string-append "bad chunked body: "
                                                 (http-error-reason result))
                                  #:offset (body-offset body) #:uri (body-uri body))))
         (else
          (when (eq? result 'done) (set-body-done! body #t))
          (if (null? pieces)
              (again)
              (let ((piece (if (null? (cdr pieces))
                               (car pieces)
                               (bytevector-concatenate (reverse pieces)))))
                (set-body-total! body (+ (body-total body) (bytevector-length piece)))
                piece))))))))


;;; (plucky web client response) ends here
