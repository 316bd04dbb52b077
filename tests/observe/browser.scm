;;; tests/observe/browser.scm --- the status page in a real browser, under load

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `make check-browser' runs this file with PLUCKY_BROWSER_TEST=1 (plain
;;; `make check' counts it as skipped: Debian's Chromium is large and slow
;;; to install, so it is not a dependency of the other tests).
;;;
;;; A child serves an app with the accounting on (plucky dev serve);
;;; wrk loads it for a bounded time while headless Chromium loads
;;; /_plucky/status.  The DOM Chromium built (--dump-dom) must hold every
;;; chart as SVG, each with data: a path of the series with points in it,
;;; the bars of the phases, /slow's cut into the phases its handler
;;; times itself (db, render) with the table of them.  A screenshot of the page goes to
;;; tests/out/status-page.png, to look at (the test checks it is a PNG of
;;; the size asked for).  Every process is bounded in time and stopped by
;;; its PID.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-71)
             (tests lib harness)
             (tests lib server)
             (rnrs bytevectors)
             (ice-9 binary-ports)
             (ice-9 regex)
             (ice-9 rdelim)
             (web request)
             (web response)
             (web uri)
             (plucky observe accounting)
             (plucky web timing)
             ((plucky server) #:select (sleep-ms))
             (plucky dev serve))

(test-begin "observe/browser")

(define root
  (dirname (dirname (dirname (search-path %load-path "tests/lib/harness.scm")))))

(define out-dir (string-append root "/tests/out"))
(define screenshot (string-append out-dir "/status-page.png"))

(define (find-program name)
  (search-path (string-split (or (getenv "PATH") "") #\:) name))

(define chromium (or (find-program "chromium") (find-program "chromium-browser")))

(define slow
  ;; a handler that times its own phases, as apps/news does
  ((with-server-timing #:header? #f)
   (lambda (request body)
     (with-phase 'db (lambda () (usleep 600)))
     (with-phase 'render (lambda () (usleep 300) (values '((content-type . (text/plain))) "slow"))))))

(define (app request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path "/fail") (error "failing on purpose for the inbox"))
     ((string=? path "/slow") (slow request body))
     ((string=? path "/sleepy")
      ;; suspends: the card of waits
      (sleep-ms 2)
      (values '((content-type . (text/plain))) "slept"))
     (else (values '((content-type . (text/plain))) "Hello, World!")))))

(define (run-chromium args timeout)
  ;; -> (values status stdout)
  (let* ((profile (mkdtemp (string-copy "/tmp/plucky-chromium-XXXXXX")))
         (process (spawn chromium
                         (append '("--headless" "--no-sandbox" "--disable-gpu"
                                   "--disable-background-networking" "--disable-component-update"
                                   "--disable-sync" "--no-first-run")
                                 (list (string-append "--user-data-dir=" profile))
                                 args)))
         (deadline (+ (now-seconds) timeout))
         (out (read-all-before (process-stdout process) deadline))
         (status (or (process-wait process #:timeout (max 1 (- deadline (now-seconds))))
                     (process-stop process))))
    (system* "rm" "-rf" profile)
    (values status out)))

(define (status-json-requests port)
  ;; requests the server has answered, from /_plucky/status.json
  (let ((response body (http-get port "/_plucky/status.json")))
    (and response
         (let ((m (string-match "\"requests\":([0-9]+)" (utf8->string body))))
           (and m (string->number (match:substring m 1)))))))

(define (chart-has-data? dom id)
  ;; The SVG element with ID holds a series path with two points or more,
  ;; or, for the phase chart, bars.
  (let ((start (string-contains dom (format #f "id=\"~a\"" id))))
    (and start
         (let* ((end (or (string-contains dom "</svg>" start) (string-length dom)))
                (svg (substring dom start end)))
           (or (string-match "<path class=\"series\"[^>]* d=\"M[0-9.]+,[0-9.]+L[0-9.]+,[0-9.]+" svg)
               (string-match "<path class=\"bar\"[^>]* d=\"M[0-9.]+,[0-9.]+h[0-9.]+" svg))))))

(define (png-size file)
  ;; -> (width . height) from the IHDR of a PNG file, or #f
  (let ((bytes (call-with-input-file file get-bytevector-all #:binary #t)))
    (and (bytevector? bytes)
         (> (bytevector-length bytes) 24)
         (equal? (bytevector->u8-list (let ((h (make-bytevector 8)))
                                        (bytevector-copy! bytes 0 h 0 8) h))
                 '(137 80 78 71 13 10 26 10))
         (cons (bytevector-u32-ref bytes 16 (endianness big))
               (bytevector-u32-ref bytes 20 (endianness big))))))

(cond
 ((not (getenv "PLUCKY_BROWSER_TEST"))
  (test-skip 1)
  (test-assert "headless Chromium loads the status page (make check-browser)" #f))
 (else
  (test-group "the status page in headless Chromium, under load"
    (call-guarded
     (lambda ()
       (test-assert "chromium is installed (apt-get install chromium)" chromium)
       (when chromium
         (let* ((server (start-child (lambda (report)
                                       (serve-app app #:mode 'full #:on-listen report))))
                (port (server-port server))
                (url (format #f "http://127.0.0.1:~a/_plucky/status?refresh=0" port))
                ;; load for at most 30 s; we stop it sooner
                (wrk (spawn "wrk" (list "-t1" "-c20" "-d30s" (format #f "http://127.0.0.1:~a/" port))))
                (wrk-slow (spawn "wrk" (list "-t1" "-c2" "-d30s" (format #f "http://127.0.0.1:~a/slow" port))))
                (wrk-sleepy (spawn "wrk" (list "-t1" "-c2" "-d30s" (format #f "http://127.0.0.1:~a/sleepy" port)))))
           (dynamic-wind
             (lambda () #t)
             (lambda ()
               (http-get port "/fail")
               ;; Wait (bounded) until the load shows in the figures, over
               ;; two seconds at least, so that the charts have lines.
               (let ((deadline (+ (now-seconds) 20))
                     (start (now-seconds)))
                 (let lp ()
                   (let ((n (or (status-json-requests port) 0)))
                     (unless (or (and (> n 2000) (> (- (now-seconds) start) 2.5))
                                 (> (now-seconds) deadline))
                       (usleep 200000)
                       (lp)))))
               (test-assert "the load is running" (> (or (status-json-requests port) 0) 2000))
               (let ((status dom (run-chromium (list "--dump-dom" url) 60)))
                 (test-equal "chromium --dump-dom exits 0" 0 (status:exit-val status))
                 (test-assert "the page's title" (string-contains dom "how this server spends its time"))
                 (test-assert "six charts or more, as SVG"
                   (>= (length (list-matches "<svg[^>]* class=\"chart\"" dom)) 6))
                 (for-each (lambda (id)
                             (test-assert (string-append "chart with data: " id)
                               (chart-has-data? dom id)))
                           '("chart-throughput" "chart-latency-time" "chart-phases"
                             "chart-percentiles" "chart-memory" "chart-waits"))
                 (test-assert "the table of waits lists /sleepy's timer"
                   (string-match "<td class=\"l\">/sleepy</td><td class=\"l\">timer</td>" dom))
                 (test-assert "the phase bars name the handler's own phases"
                   (let* ((start (string-contains dom "id=\"chart-phases\""))
                          (svg (and start (substring dom start (string-contains dom "</svg>" start)))))
                     (and svg
                          (string-contains svg ">db</text>")
                          (string-contains svg ">render</text>")
                          (string-contains svg ">handler, unmarked</text>"))))
                 (test-assert "the table of the handlers' own phases lists /slow's db"
                   (string-match "<td class=\"l\">/slow</td><td class=\"l\">db</td>" dom))
                 (test-assert "the inbox lists the failure" (string-contains dom "/_plucky/inbox/1")))
               (unless (file-exists? out-dir) (mkdir out-dir))
               (false-if-exception (delete-file screenshot))
               (let ((status output (run-chromium (list "--window-size=1400,2600"
                                                        (string-append "--screenshot=" screenshot)
                                                        url)
                                                  60)))
                 (test-equal "chromium --screenshot exits 0" 0 (status:exit-val status))
                 (test-equal "a PNG of 1400 x 2600" '(1400 . 2600)
                   (and (file-exists? screenshot) (png-size screenshot)))
                 (test-assert "the PNG is not blank (over 50 KB)"
                   (and (file-exists? screenshot) (> (stat:size (stat screenshot)) 50000)))
                 (format #t "screenshot: ~a~%" screenshot)))
             (lambda ()
               (process-stop wrk)
               (process-stop wrk-slow)
               (process-stop wrk-sleepy)
               (stop-server server))))))))))

(test-end "observe/browser")

;;; tests/observe/browser.scm ends here
