;;; (plucky server log) --- the access log and the error log

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The access log gets one line per answer, in one of three formats:
;;;
;;;   common    127.0.0.1 - - [21/Nov/2026:13:55:36 +0000] "GET / HTTP/1.1" 200 156
;;;   combined  the same, then "Referer" "User-Agent"
;;;   json      {"time":"2026-11-21T13:55:36+00:00","remote_addr":"127.0.0.1",…}
;;;
;;; The event loop calls `access-log-response!' after each answer (its
;;; #:on-response hook: peer, request, status, bytes).  The size logged
;;; is that of the whole answer, head and body, as the loop reports it
;;; (nginx's $bytes_sent rather than Apache's %b).  A request refused
;;; before it reached the handler has no request record: its request
;;; line is logged as "-".
;;;
;;; Lines go into a buffer of the worker's own, not straight to the file:
;;; a write(2) per request would cost more than the request.  The buffer
;;; is written out when it is full, when the worker's once-a-second timer
;;; fires (`access-log-flush!': plucky server arms a POSIX timer whose
;;; signal the loop reads with the others, since the loop has no timer
;;; hook of its own), when the log is reopened, and when the worker
;;; exits, drained or reloaded.  So a line reaches the file within about
;;; a second, and none is lost except by a worker killed with SIGKILL
;;; (at most its last second).
;;;
;;; The file is opened with O_APPEND: workers that share it each write
;;; whole lines, so lines never interleave.  `access-log-reopen!' opens
;;; the path anew, for logrotate: rename the file, send SIGUSR1, and
;;; new lines go to a new file at the old name.  A master that runs as
;;; root and workers that do not: the master creates the new file and
;;; gives it to the workers' user before the workers reopen it.
;;;
;;; Dates are in the Common Log Format, in local time with its offset;
;;; the string is made once a second.
;;;
;;; Code:

(define-module (plucky server log)
  #:use-module (rnrs bytevectors)
  #:use-module (srfi srfi-9)
  #:use-module (web request)
  #:use-module (web uri)
  #:use-module (plucky sys libc)
  #:export (log-formats
            open-access-log
            access-log?
            access-log-path
            access-log-response!
            access-log-flush!
            access-log-reopen!
            access-log-close!
            open-error-log!
            clf-date
            write-json-string))

(define log-formats '(common combined json))

;;;
;;; The log and its buffer
;;;

(define-record-type <access-log>
  (%make-access-log path fd format buffer address fill)
  access-log?
  (path access-log-path)                ; a file name, or #f for stdout
  (fd access-log-fd set-access-log-fd!)
  (format access-log-format)            ; common | combined | json
  (buffer access-log-buffer)            ; bytevector
  (address access-log-address)          ; its bytevector-address
  (fill access-log-fill set-access-log-fill!))

(define buffer-size 65536)

(define append-flags (logior O_WRONLY O_APPEND O_CREAT O_CLOEXEC))

(define* (open-access-log path format #:key (owner #f))
  "Return an access log writing lines in FORMAT (common, combined or
json) to the file PATH, created if need be and appended to, or to
standard output when PATH is \"-\".  OWNER, if given, is a pair (UID
. GID) to give a file this call creates to (the user workers run as)."
  (unless (memq format log-formats)
    (error "unknown access log format" format))
  (let ((buffer (make-bytevector buffer-size)))
    (if (equal? path "-")
        (%make-access-log #f 1 format buffer (bytevector-address buffer) 0)
        (%make-access-log path (open-log-file path owner) format buffer
                          (bytevector-address buffer) 0))))

(define (open-log-file path owner)
  ;; -> a descriptor open for appending to PATH
  (let ((fd (open-fdes path append-flags #o640)))
    (when owner
      (false-if-exception (chown fd (car owner) (cdr owner))))
    fd))

(define (write-all fd bv address start end)
  ;; Write BV [start, end) to FD.  A descriptor that would block (a full
  ;; pipe on standard output) gets a second to drain; what it still does
  ;; not take is dropped rather than stall the event loop.
  (let lp ((start start) (waited? #f))
    (when (< start end)
      (let ((n (fd-write fd address start (- end start))))
        (cond
         ((> n 0) (lp (+ start n) #f))
         ((and (= n (- errno-EAGAIN)) (not waited?))
          (false-if-exception (select '() (list fd) '() 1))
          (lp start #t))
         (else #f))))))

(define (access-log-flush! log)
  "Write out the lines LOG holds."
  (let ((fill (access-log-fill log)))
    (when (> fill 0)
      (set-access-log-fill! log 0)
      (write-all (access-log-fd log) (access-log-buffer log) (access-log-address log)
                 0 fill))))

(define (append-bytes! log bv)
  (let ((n (bytevector-length bv)))
    (when (> (+ (access-log-fill log) n) buffer-size)
      (access-log-flush! log))
    (if (> n buffer-size)
        (write-all (access-log-fd log) bv (bytevector-address bv) 0 n)
        (begin
          (bytevector-copy! bv 0 (access-log-buffer log) (access-log-fill log) n)
          (set-access-log-fill! log (+ (access-log-fill log) n))))))

(define* (access-log-reopen! log #:key (owner #f))
  "Write out what LOG holds, then open its path anew (a file renamed by
logrotate stays with the old name; new lines go to a new file).  OWNER
as for `open-access-log'.  Standard output is not reopened."
  (access-log-flush! log)
  (let ((path (access-log-path log)))
    (when path
      (let ((fd (open-log-file path owner)))
        ;; Onto the same descriptor number: processes forked from this
        ;; one later inherit the new file under the number they expect.
        (dup2 fd (access-log-fd log))
        (close-fdes fd)))))

(define (access-log-close! log)
  "Write out what LOG holds and close its file."
  (access-log-flush! log)
  (when (access-log-path log)
    (close-fdes (access-log-fd log))))

(define (access-log-response! log peer request code bytes)
  "Add a line to LOG for an answer with status CODE and BYTES bytes to
REQUEST (#f for a request refused before it reached the handler) from
the client PEER (an address string, or #f)."
  (append-bytes!
   log
   (string->utf8
    (case (access-log-format log)
      ((common) (common-line peer request code bytes #f))
      ((combined) (common-line peer request code bytes #t))
      (else (json-line peer request code bytes))))))

;;;
;;; Dates, made once a second
;;;

(define month-names
  #("Jan" "Feb" "Mar" "Apr" "May" "Jun" "Jul" "Aug" "Sep" "Oct" "Nov" "Dec"))

(define (two-digits n)
  (if (< n 10) (string-append "0" (number->string n)) (number->string n)))

(define (offset-string tm colon?)
  ;; Guile's tm:gmtoff counts seconds west of UTC.
  (let* ((east (- (tm:gmtoff tm)))
         (minutes (quotient (abs east) 60)))
    (string-append (if (< east 0) "-" "+")
                   (two-digits (quotient minutes 60))
                   (if colon? ":" "")
                   (two-digits (remainder minutes 60)))))

(define (clf-date seconds)
  "Return the time SECONDS (since the epoch) as the Common Log Format
writes it, in local time: \"21/Nov/2026:13:55:36 +0000\"."
  (let ((tm (localtime seconds)))
    (string-append (two-digits (tm:mday tm)) "/"
                   (vector-ref month-names (tm:mon tm)) "/"
                   (number->string (+ 1900 (tm:year tm))) ":"
                   (two-digits (tm:hour tm)) ":" (two-digits (tm:min tm)) ":"
                   (two-digits (tm:sec tm)) " " (offset-string tm #f))))

(define (iso-date seconds)
  (let ((tm (localtime seconds)))
    (string-append (number->string (+ 1900 (tm:year tm))) "-"
                   (two-digits (+ 1 (tm:mon tm))) "-" (two-digits (tm:mday tm)) "T"
                   (two-digits (tm:hour tm)) ":" (two-digits (tm:min tm)) ":"
                   (two-digits (tm:sec tm)) (offset-string tm #t))))

(define cached-second -1)
(define cached-clf "")
(define cached-iso "")

(define (refresh-dates!)
  (let ((now (current-time)))
    (unless (= now cached-second)
      (set! cached-second now)
      (set! cached-clf (clf-date now))
      (set! cached-iso (iso-date now)))))

;;;
;;; Formats
;;;

(define (request-target request)
  ;; The target as the client sent it, near enough: Guile keeps the path
  ;; and query of an origin-form target, and the whole URI otherwise.
  (let ((uri (request-uri request)))
    (if (uri-host uri)
        (uri->string uri)
        (let ((query (uri-query uri)))
          (if query
              (string-append (uri-path uri) "?" query)
              (uri-path uri))))))

(define (version-string request)
  ;; HTTP/2 has no minor version: "HTTP/2", as nginx logs it
  (let ((version (request-version request)))
    (if (= (car version) 2)
        "HTTP/2"
        (string-append "HTTP/" (number->string (car version)) "."
                       (number->string (cdr version))))))

(define (header-text request name)
  ;; -> the header's value as text, or #f.  Referer is parsed into a URI;
  ;; a value Guile's parser refused stays the raw string.
  (let ((value (assq-ref (request-headers request) name)))
    (cond
     ((not value) #f)
     ((string? value) value)
     ((uri? value) (uri->string value))
     (else (call-with-output-string (lambda (port) (display value port)))))))

(define (clf-escape text)
  ;; As nginx does: a double quote, a backslash and control or non-ASCII
  ;; bytes become \xHH, so a client cannot forge fields or lines.
  (if (string-every (lambda (c) (and (char<=? #\space c #\~)
                                     (not (char=? c #\"))
                                     (not (char=? c #\\))))
                    text)
      text
      (call-with-output-string
        (lambda (port)
          (string-for-each
           (lambda (c)
             (if (and (char<=? #\space c #\~) (not (char=? c #\")) (not (char=? c #\\)))
                 (write-char c port)
                 (let ((bytes (string->utf8 (string c))))
                   (let lp ((i 0))
                     (when (< i (bytevector-length bytes))
                       (let ((b (bytevector-u8-ref bytes i)))
                         (display (if (< b 16) "\\x0" "\\x") port)
                         (display (string-upcase (number->string b 16)) port))
                       (lp (+ i 1)))))))
           text)))))

(define (common-line peer request code bytes combined?)
  (refresh-dates!)
  (string-append
   (or peer "-") " - - [" cached-clf "] \""
   (if request
       (clf-escape (string-append (symbol->string (request-method request)) " "
                                  (request-target request) " "
                                  (version-string request)))
       "-")
   "\" " (number->string code) " " (number->string bytes)
   (if combined?
       (string-append " \"" (clf-escape (or (and request (header-text request 'referer)) "-"))
                      "\" \"" (clf-escape (or (and request (header-text request 'user-agent)) "-"))
                      "\"")
       "")
   "\n"))

(define (write-json-string text port)
  "Write the string TEXT to PORT as a JSON string literal: quotes,
backslashes and control characters escaped, everything else as it is."
  (write-char #\" port)
  (string-for-each
   (lambda (c)
     (case c
       ((#\") (display "\\\"" port))
       ((#\\) (display "\\\\" port))
       ((#\newline) (display "\\n" port))
       ((#\return) (display "\\r" port))
       ((#\tab) (display "\\t" port))
       (else
        (if (char<? c #\space)
            (let ((hex (number->string (char->integer c) 16)))
              (display "\\u" port)
              (display (string-pad hex 4 #\0) port))
            (write-char c port)))))
   text)
  (write-char #\" port))

(define (json-string text)
  ;; -> TEXT as a JSON string literal, or null
  (if (not text)
      "null"
      (call-with-output-string (lambda (port) (write-json-string text port)))))

(define (json-line peer request code bytes)
  (refresh-dates!)
  (string-append
   "{\"time\":\"" cached-iso "\""
   ",\"remote_addr\":" (json-string peer)
   ",\"method\":" (json-string (and request (symbol->string (request-method request))))
   ",\"target\":" (json-string (and request (request-target request)))
   ",\"protocol\":" (json-string (and request (version-string request)))
   ",\"status\":" (number->string code)
   ",\"bytes\":" (number->string bytes)
   ",\"referer\":" (json-string (and request (header-text request 'referer)))
   ",\"user_agent\":" (json-string (and request (header-text request 'user-agent)))
   "}\n"))

;;;
;;; The error log
;;;

(define* (open-error-log! path #:key (owner #f))
  "Make PATH, opened for appending (created if need be), this process's
standard error, where plucky writes its messages and backtraces.  Called
again, it reopens PATH (after logrotate renamed the file).  OWNER as for
`open-access-log'."
  (let ((fd (open-log-file path owner)))
    (force-output (current-error-port))
    (dup2 fd 2)
    (close-fdes fd)))

;;; (plucky server log) ends here
