;;; (plucky dev bench) --- `plucky bench': load with wrk, an ab-style report

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `plucky bench URL' drives load at URL with wrk (Debian's) and prints
;;; what ApacheBench prints, in its layout: requests per second, transfer
;;; rate, connection times, the percentile table; and writes an SVG chart
;;; of the latency percentiles and of throughput over time.  Given an app
;;; file instead of a URL it starts `bin/plucky serve' on a free port of
;;; 127.0.0.1 first, and stops it (by its PID) afterwards.  How a run
;;; goes:
;;;
;;;   probe      one GET for the Server header and the document length,
;;;              then 20 timed connects (wrk does not time connects: the
;;;              "Connect" row comes from these, and says so)
;;;   warm-up    one slice per target, not counted (Guile's JIT, caches)
;;;   slices     wrk -d SLICE, again and again until DURATION is spent:
;;;              each slice's requests, bytes and errors, and its whole
;;;              latency distribution, which a Lua `done' hook prints
;;;              (bench-report.lua, written to a temporary file); with
;;;              --compare the slices of the two targets alternate, so
;;;              that a change in the machine's load falls on both
;;;   report     the slices merged: rates over wrk's own durations,
;;;              percentiles over the merged distribution (exact to the
;;;              microsecond, as wrk records them), throughput per slice
;;;
;;; Every wrk runs with -d and under a deadline of its own: a wrk that
;;; outlives it is killed, by PID.
;;;
;;; Code:

(define-module (plucky dev bench)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (srfi srfi-11)
  #:use-module (rnrs bytevectors)
  #:use-module (ice-9 format)
  #:use-module (ice-9 rdelim)
  #:use-module (web client)
  #:use-module (web response)
  #:use-module (web uri)
  #:use-module (plucky observe chart)
  #:export (run-bench
            start-app-server
            stop-app-server
            wrk-version
            bench-result?
            bench-result-url
            bench-result-rps
            bench-result-percentile
            bench-result-requests
            bench-result-errors
            print-bench-report
            print-comparison
            bench-svg
            spawn-process
            wait-process
            source-root))

;;;
;;; Processes
;;;

(define (source-root)
  "Return the directory of the plucky source tree this module was loaded
from (where bin/plucky is)."
  (dirname (dirname (dirname (search-path %load-path "plucky/dev/bench.scm")))))

(define* (spawn-process program args #:key (output #f))
  "Start PROGRAM (found in PATH) with ARGS, standard input from
/dev/null and standard output and error to OUTPUT (a file name), or to a
pipe when OUTPUT is #f.  Return (pid . port-on-the-pipe-or-#f)."
  (let ((pipe-ports (and (not output) (pipe))))
    (flush-all-ports)
    (let ((pid (primitive-fork)))
      (if (zero? pid)
          (catch #t
            (lambda ()
              (let ((null (open-input-file "/dev/null"))
                    (out (if output
                             (open-file output "w")
                             (cdr pipe-ports))))
                (dup2 (port->fdes null) 0)
                (dup2 (port->fdes out) 1)
                (dup2 (port->fdes out) 2)
                (apply execlp program program args)))
            (lambda args (primitive-exit 127)))
          (begin
            (when pipe-ports (close-port (cdr pipe-ports)))
            (cons pid (and pipe-ports (car pipe-ports))))))))

(define (now) (/ (get-internal-real-time) 1e9))

(define (wait-process pid timeout)
  "Wait at most TIMEOUT seconds for process PID to exit; if it has not,
send it SIGTERM, then SIGKILL after 5 more seconds.  Return its status."
  (let ((deadline (+ (now) timeout)))
    (let lp ()
      (let ((result (waitpid pid WNOHANG)))
        (cond
         ((not (zero? (car result))) (cdr result))
         ((< (now) deadline) (usleep 20000) (lp))
         (else
          (false-if-exception (kill pid SIGTERM))
          (let ((deadline (+ (now) 5)))
            (let lp ()
              (let ((result (waitpid pid WNOHANG)))
                (cond
                 ((not (zero? (car result))) (cdr result))
                 ((< (now) deadline) (usleep 20000) (lp))
                 (else
                  (false-if-exception (kill pid SIGKILL))
                  (cdr (waitpid pid)))))))))))))

(define (read-all port deadline)
  ;; Everything PORT gives until end of file or DEADLINE (`now').
  (let ((out (open-output-string)))
    (let lp ()
      (let ((ready (select (list port) '() '() 0 200000)))
        (cond
         ((pair? (car ready))
          (let ((line (read-line port 'concat)))
            (unless (eof-object? line)
              (display line out)
              (lp))))
         ((< (now) deadline) (lp)))))
    (get-output-string out)))

(define (free-port)
  (let ((sock (socket AF_INET SOCK_STREAM 0)))
    (bind sock AF_INET INADDR_LOOPBACK 0)
    (let ((port (sockaddr:port (getsockname sock))))
      (close-port sock)
      port)))

(define* (start-app-server app #:key (log (tmpnam*)) (timeout 20))
  "Start `bin/plucky serve APP' on a free port of 127.0.0.1, wait until it
answers (at most TIMEOUT seconds), and return (pid . url).  Its output
goes to the file LOG."
  (let* ((port (free-port))
         (plucky (string-append (source-root) "/bin/plucky"))
         (process (spawn-process plucky (append
                                         (list "serve" app "--host" "127.0.0.1"
                                               "--port" (number->string port))
                                         ;; plucky serve refuses root otherwise
                                         (if (zero? (geteuid)) '("--allow-root") '()))
                                 #:output log))
         (pid (car process))
         (url (format #f "http://127.0.0.1:~a/" port))
         (deadline (+ (now) timeout)))
    (let lp ()
      (cond
       ((not (zero? (car (waitpid pid WNOHANG))))
        (error "the app server exited before answering; its log:" log))
       ((false-if-exception (probe-get url)) (cons pid url))
       ((> (now) deadline)
        (stop-app-server pid)
        (error "the app server did not answer in time; its log:" log))
       (else (usleep 50000) (lp))))))

(define (stop-app-server pid)
  "Stop the server started by `start-app-server' (SIGTERM, then SIGKILL)."
  (false-if-exception (kill pid SIGTERM))
  (wait-process pid 10))

(define (tmpnam*)
  (let ((port (mkstemp! (string-copy "/tmp/plucky-bench-XXXXXX"))))
    (let ((name (port-filename port)))
      (close-port port)
      name)))

;;;
;;; Probing the target
;;;

(define (probe-get url)
  ;; -> (values response body) of one GET
  (http-get url #:decode-body? #f #:headers '((connection . (close)))))

(define (connect-times url count)
  ;; -> list of seconds each of COUNT connects took
  (let* ((uri (string->uri url))
         (host (uri-host uri))
         (port (or (uri-port uri) 80))
         (info (car (getaddrinfo host (number->string port) AI_NUMERICSERV 0 SOCK_STREAM))))
    (filter-map
     (lambda (i)
       (let ((sock (socket (addrinfo:fam info) SOCK_STREAM 0)))
         (fcntl sock F_SETFL (logior O_NONBLOCK (fcntl sock F_GETFL)))
         (let* ((start (now))
                (done? (catch 'system-error
                         (lambda () (connect sock (addrinfo:addr info)) #t)
                         (lambda args
                           (and (= (system-error-errno args) EINPROGRESS)
                                (pair? (cadr (select '() (list sock) '() 2 0)))
                                (zero? (getsockopt sock SOL_SOCKET SO_ERROR))))))
                (elapsed (- (now) start)))
           (close-port sock)
           (and done? elapsed))))
     (iota count))))

;;;
;;; wrk
;;;

(define lua-report "\
-- Written by (plucky dev bench): print a slice's figures and its
-- whole latency distribution (value in us, count) when wrk is done.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(\"plucky-bench summary %d %d %d %d %d %d %d %d\\n\",
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout))
  local line = {}
  for i = 1, #latency do
    local v, c = latency(i)
    line[#line + 1] = string.format(\"%d %d\", v, c)
    if #line == 64 then
      io.write(\"plucky-bench latency \", table.concat(line, \" \"), \"\\n\")
      line = {}
    end
  end
  if #line > 0 then
    io.write(\"plucky-bench latency \", table.concat(line, \" \"), \"\\n\")
  end
end
")

(define (wrk-version)
  "Return the first line wrk prints about its version, or #f when there
is no wrk."
  (false-if-exception
   (let* ((process (spawn-process "wrk" '("-v")))
          (text (read-all (cdr process) (+ (now) 5))))
     (close-port (cdr process))
     (let ((status (wait-process (car process) 5)))
       (and (not (eqv? (status:exit-val status) 127))
            ;; "wrk debian/4.1.0-3+b2 [epoll] Copyright …" -> "wrk debian/4.1.0-3+b2"
            (let ((words (string-tokenize (car (string-split text #\newline)))))
              (and (pair? words)
                   (string-join (take words (min 2 (length words))) " "))))))))

(define-record-type <slice>
  (make-slice target seconds requests bytes errors latency started)
  slice?
  (target slice-target)
  (seconds slice-seconds)            ; wrk's own measure of the slice
  (requests slice-requests)
  (bytes slice-bytes)
  (errors slice-errors)              ; (connect read write status timeout)
  (latency slice-latency)            ; ((us . count) …)
  (started slice-started))           ; `now' when it started

(define (parse-wrk-output text target started)
  ;; -> a <slice>, or #f when the output holds no report
  (let lp ((lines (string-split text #\newline)) (summary #f) (latency '()))
    (cond
     ((null? lines)
      (and summary
           (make-slice target (/ (list-ref summary 0) 1e6) (list-ref summary 1)
                       (list-ref summary 2) (drop summary 3) latency started)))
     ((string-prefix? "plucky-bench summary " (car lines))
      (lp (cdr lines)
          (map string->number (string-tokenize (substring (car lines) 21)))
          latency))
     ((string-prefix? "plucky-bench latency " (car lines))
      (let pairs ((numbers (map string->number (string-tokenize (substring (car lines) 21))))
                  (latency latency))
        (if (or (null? numbers) (null? (cdr numbers)))
            (lp (cdr lines) summary latency)
            (pairs (cddr numbers) (cons (cons (car numbers) (cadr numbers)) latency)))))
     (else (lp (cdr lines) summary latency)))))

(define (run-slice url seconds connections threads headers script)
  ;; Run wrk once; -> (values slice output)
  (let* ((started (now))
         (args (append (list "-t" (number->string threads)
                             "-c" (number->string connections)
                             "-d" (format #f "~as" seconds)
                             "-s" script)
                       (append-map (lambda (h) (list "-H" h)) headers)
                       (list url)))
         (process (spawn-process "wrk" args))
         ;; wrk ends at -d; the deadline is for a wrk that does not
         (output (read-all (cdr process) (+ started seconds 15))))
    (close-port (cdr process))
    (wait-process (car process) 5)
    (values (parse-wrk-output output url started) output)))

;;;
;;; Results
;;;

(define-record-type <bench-result>
  (make-bench-result url server document-path document-length connections threads
                     slices latency connects)
  bench-result?
  (url bench-result-url)
  (server bench-result-server)                   ; Server header, or #f
  (document-path bench-result-document-path)
  (document-length bench-result-document-length) ; bytes, or #f
  (connections bench-result-connections)
  (threads bench-result-threads)
  (slices bench-result-slices)                   ; <slice>s, in order
  (latency bench-result-latency)                 ; vector of (us . count), sorted
  (connects bench-result-connects))              ; seconds per probe connect

(define (merge-latency slices)
  (let ((table (make-hash-table)))
    (for-each (lambda (slice)
                (for-each (lambda (p) (hashv-set! table (car p) (+ (cdr p) (hashv-ref table (car p) 0))))
                          (slice-latency slice)))
              slices)
    (list->vector (sort (hash-map->list cons table) (lambda (a b) (< (car a) (car b)))))))

(define (bench-result-requests result)
  "Return the requests completed over all slices of RESULT."
  (fold + 0 (map slice-requests (bench-result-slices result))))

(define (bench-result-seconds result)
  (fold + 0 (map slice-seconds (bench-result-slices result))))

(define (bench-result-bytes result)
  (fold + 0 (map slice-bytes (bench-result-slices result))))

(define (bench-result-errors result)
  "Return RESULT's errors summed over its slices as an alist: connect,
read, write, status (answers other than 2xx and 3xx), timeout."
  (map (lambda (name i)
         (cons name (fold + 0 (map (lambda (s) (list-ref (slice-errors s) i))
                                   (bench-result-slices result)))))
       '(connect read write status timeout) (iota 5)))

(define (bench-result-rps result)
  "Return RESULT's requests per second: requests over wrk's durations."
  (let ((seconds (bench-result-seconds result)))
    (if (> seconds 0) (/ (bench-result-requests result) seconds) 0)))

(define (bench-result-percentile result p)
  "Return the latency (µs) below which a fraction P of RESULT's requests
were answered: wrk's microsecond values, merged over the slices."
  (let* ((latency (bench-result-latency result))
         (total (fold + 0 (map cdr (vector->list latency))))
         (rank (max 1 (inexact->exact (ceiling (* p total))))))
    (let lp ((i 0) (seen 0))
      (cond
       ((= i (vector-length latency)) (if (zero? i) 0 (car (vector-ref latency (- i 1)))))
       ((>= (+ seen (cdr (vector-ref latency i))) rank) (car (vector-ref latency i)))
       (else (lp (+ i 1) (+ seen (cdr (vector-ref latency i)))))))))

(define (latency-moments result)
  ;; -> (values min mean sd max) in µs
  (let* ((latency (vector->list (bench-result-latency result)))
         (n (fold + 0 (map cdr latency))))
    (if (zero? n)
        (values 0 0 0 0)
        (let* ((mean (/ (fold + 0 (map (lambda (p) (* (car p) (cdr p))) latency)) n))
               (var (/ (fold + 0 (map (lambda (p) (* (cdr p) (expt (- (car p) mean) 2))) latency)) n)))
          (values (car (first latency)) mean (sqrt var) (car (last latency)))))))

(define* (run-bench urls #:key (duration 10) (connections 100) (threads 1) (slice 1)
                    (warmup 1) (headers '()) (progress #f))
  "Drive load at each of URLS (one or two) with wrk for DURATION seconds
each, in slices of SLICE seconds that alternate between the URLs, after
WARMUP seconds of each that do not count; return a list of
<bench-result>, one per URL.  PROGRESS, if given, is called with a line
of text after each slice."
  (let* ((script (let ((file (tmpnam*)))
                   (call-with-output-file file (lambda (port) (display lua-report port)))
                   file))
         (probes (map (lambda (url)
                        (let-values (((response body) (probe-get url)))
                          (list (let ((server (assq-ref (response-headers response) 'server)))
                                  (and server (if (string? server) server (object->string server))))
                                (or (response-content-length response)
                                    (and (bytevector? body) (bytevector-length body))))))
                      urls))
         (connects (map (lambda (url) (connect-times url 20)) urls))
         (rounds (max 1 (inexact->exact (ceiling (/ duration slice))))))
    (dynamic-wind
      (lambda () #t)
      (lambda ()
        (when (> warmup 0)
          (for-each (lambda (url)
                      (run-slice url warmup connections threads headers script)
                      (when progress (progress (format #f "warm-up ~a s of ~a" warmup url))))
                    urls))
        (let ((slices
               (append-map
                (lambda (index)
                  (map (lambda (url)
                         (let-values (((slice output)
                                       (run-slice url slice connections threads headers script)))
                           (unless slice
                             (error "wrk gave no report; it said:" output))
                           (when progress
                             (progress (format #f "slice ~a/~a ~a: ~a req/s" (+ index 1) rounds url
                                               (inexact->exact
                                                (round (/ (slice-requests slice)
                                                          (max 1e-9 (slice-seconds slice))))))))
                           slice))
                       ;; alternate which target goes first
                       (if (even? index) urls (reverse urls))))
                (iota rounds))))
          (map (lambda (url probe connects)
                 (let ((mine (filter (lambda (s) (equal? (slice-target s) url)) slices))
                       (uri (string->uri url)))
                   (make-bench-result url (first probe)
                                      (string-append (or (uri-path uri) "/")
                                                     (if (uri-query uri) (string-append "?" (uri-query uri)) ""))
                                      (second probe) connections threads
                                      mine (merge-latency mine) connects)))
               urls probes connects)))
      (lambda () (false-if-exception (delete-file script))))))

;;;
;;; Reports
;;;

(define (ms us) (/ us 1000.))

(define* (print-bench-report result #:optional (port (current-output-port)))
  "Print RESULT in ApacheBench's layout to PORT."
  (let* ((uri (string->uri (bench-result-url result)))
         (requests (bench-result-requests result))
         (seconds (bench-result-seconds result))
         (bytes (bench-result-bytes result))
         (errors (bench-result-errors result))
         (failed (fold + 0 (map cdr errors)))
         (connections (bench-result-connections result))
         (connects (map (lambda (s) (* 1e6 s)) (bench-result-connects result))))
    (define (row label values)
      (apply format port "~14a~6,3f ~6,3f ~6,3f ~8,3f ~8,3f~a~%" label values))
    (format port "Server Software:        ~a~%" (or (bench-result-server result) ""))
    (format port "Server Hostname:        ~a~%" (uri-host uri))
    (format port "Server Port:            ~a~%" (or (uri-port uri) 80))
    (newline port)
    (format port "Document Path:          ~a~%" (bench-result-document-path result))
    (format port "Document Length:        ~a~%"
            (let ((n (bench-result-document-length result))) (if n (format #f "~a bytes" n) "unknown")))
    (newline port)
    (format port "Concurrency Level:      ~a~%" connections)
    (format port "Time taken for tests:   ~,3f seconds (wrk's measure, ~a slices)~%"
            seconds (length (bench-result-slices result)))
    (format port "Complete requests:      ~a~%" requests)
    (format port "Failed requests:        ~a~a~%" failed
            (if (zero? failed) ""
                (string-append
                 "\n   ("
                 (string-join (filter-map (lambda (e) (and (> (cdr e) 0)
                                                           (format #f "~a: ~a"
                                                                   (if (eq? (car e) 'status) "non-2xx/3xx"
                                                                       (symbol->string (car e)))
                                                                   (cdr e))))
                                          errors)
                              ", ")
                 ")")))
    (format port "Total transferred:      ~a bytes~%" bytes)
    (format port "Requests per second:    ~,2f [#/sec] (mean)~%" (bench-result-rps result))
    (format port "Time per request:       ~,3f [ms] (mean)~%"
            (if (> requests 0) (/ (* 1000. seconds connections) requests) 0))
    (format port "Time per request:       ~,3f [ms] (mean, across all concurrent requests)~%"
            (if (> requests 0) (/ (* 1000. seconds) requests) 0))
    (format port "Transfer rate:          ~,2f [Kbytes/sec] received~%"
            (if (> seconds 0) (/ bytes 1024. seconds) 0))
    (newline port)
    (format port "Connection Times (ms)~%")
    (format port "              min   mean[+/-sd]  median      max~%")
    (if (null? connects)
        (format port "Connect:      (no probe connection succeeded)~%")
        (let* ((sorted (sort connects <))
               (n (length sorted))
               (mean (/ (apply + sorted) n))
               (sd (sqrt (/ (apply + (map (lambda (x) (expt (- x mean) 2)) sorted)) n))))
          (row "Connect:" (list (ms (first sorted)) (ms mean) (ms sd)
                                (ms (list-ref sorted (quotient n 2))) (ms (last sorted))
                                (format #f "   (~a probe connections before the load)" n)))))
    (let-values (((min mean sd max) (latency-moments result)))
      (row "Request:" (list (ms min) (ms mean) (ms sd) (ms (bench-result-percentile result 0.5)) (ms max)
                            "   (wrk: request sent to response read)")))
    (newline port)
    (format port "Percentage of the requests served within a certain time (ms)~%")
    (for-each (lambda (p)
                (format port " ~6a ~8,3f~a~%"
                        (string-append (format-number (* 100 p)) "%")
                        (ms (bench-result-percentile result p))
                        (if (= p 1) " (longest request)" "")))
              '(0.5 0.66 0.75 0.8 0.9 0.95 0.98 0.99 0.999 1))))

(define* (print-comparison a b #:key (port (current-output-port))
                           (labels (list (bench-result-url a) (bench-result-url b))))
  "Print the ratios of B's figures to A's (two <bench-result>s measured
in the same run, alternately).  LABELS name A and B."
  (define (line label x y better)
    (format port "  ~22a ~12,2f ~12,2f   ~a~a~%" label x y
            (if (and (> x 0) (> y 0)) (format #f "~6,3f" (/ y x)) "     -")
            (if better (format #f "  (~a)" better) "")))
  (format port "Comparison, B / A, slices alternated:~%  A = ~a~%  B = ~a~%~%"
          (first labels) (second labels))
  (format port "  ~22a ~12@a ~12@a   ~6@a~%" "" "A" "B" "B / A")
  (line "requests/s" (bench-result-rps a) (bench-result-rps b) "higher is better")
  (for-each (lambda (p)
              (line (format #f "~a latency (ms)" (format-percentile p))
                    (ms (bench-result-percentile a p)) (ms (bench-result-percentile b p))
                    "lower is better"))
            '(0.5 0.9 0.99 0.999))
  (line "transfer (KB/s)"
        (/ (bench-result-bytes a) 1024. (max 1e-9 (bench-result-seconds a)))
        (/ (bench-result-bytes b) 1024. (max 1e-9 (bench-result-seconds b)))
        #f)
  (line "failed requests" (fold + 0 (map cdr (bench-result-errors a)))
        (fold + 0 (map cdr (bench-result-errors b))) #f))

;;;
;;; The chart
;;;

(define* (bench-svg results #:key (labels (map bench-result-url results)))
  "Return the text of an SVG file charting RESULTS (one or two
<bench-result>s, named by LABELS): latency by percentile, and requests
per second of each slice over time."
  (let* ((colours '("#0072B2" "#D55E00"))
         (names (if (= 1 (length results))
                    labels
                    (map (lambda (name letter) (string-append letter " " name))
                         labels '("A" "B"))))
         (t0 (apply min (map (lambda (r) (slice-started (car (bench-result-slices r)))) results)))
         (percentiles (line-chart
                       (map (lambda (r name colour)
                              (list name colour
                                    (map (lambda (p) (cons p (ms (bench-result-percentile r p))))
                                         '(0 0.25 0.5 0.75 0.9 0.95 0.99 0.995 0.999 0.9995 0.9999))))
                            results names colours)
                       #:width 760 #:height 300 #:title "Latency by percentile (wrk)"
                       #:x-scale 'percentile #:y-log? #t #:x-min 0 #:x-max 0.9999
                       #:x-ticks '(0 0.5 0.9 0.99 0.999 0.9999)
                       #:x-tick-label format-percentile
                       #:x-label "percentile" #:y-label "ms"))
         (throughput (line-chart
                      (map (lambda (r name colour)
                             (list name colour
                                   (map (lambda (s)
                                          (cons (- (+ (slice-started s) (/ (slice-seconds s) 2)) t0)
                                                (/ (slice-requests s) (max 1e-9 (slice-seconds s)))))
                                        (bench-result-slices r))))
                           results names colours)
                      #:width 760 #:height 260 #:title "Requests per second, per slice"
                      #:x-label "seconds since the start" #:y-label "req/s" #:y-min 0)))
    (sxml->svg-string
     `(svg (@ (xmlns "http://www.w3.org/2000/svg") (width 760) (height 570)
              (viewBox "0 0 760 570"))
           (g ,percentiles)
           (g (@ (transform "translate(0,305)")) ,throughput)))))

;;; (plucky dev bench) ends here
