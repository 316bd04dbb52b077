;;; tests/regress/bench-results-appended.scm --- bench/RESULTS.md grew with every run
;;;
;;; Issue 25 (o).  Each bench script appended its run to bench/RESULTS.md
;;; (`cat "$REPORT" >>"$RESULTS"'), which reached 428 KB of runs, most of
;;; them stale.  The scripts now call bench/lib.sh's `record_results',
;;; which puts the run in place of that benchmark's earlier sections:
;;; the file keeps the introduction and the latest table of each
;;; benchmark, with its date and commands; older runs are in git.

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (ice-9 popen)
             (ice-9 textual-ports)
             (tests lib harness))

(define dir (mkdtemp (string-copy "/tmp/plucky-bench-results-XXXXXX")))
(define results (string-append dir "/RESULTS.md"))

(define (write-text! file text)
  (call-with-output-file file (lambda (port) (display text port))))
(define (read-text file)
  (call-with-input-file file get-string-all))

(define (record! report-text)
  ;; -> the exit status of record_results on a report of REPORT-TEXT
  (let ((report (string-append dir "/report.md")))
    (write-text! report report-text)
    (let ((status (system* "bash" "-c" ". bench/lib.sh && BENCH_RESULTS=\"$1\" record_results \"$2\""
                           "record" results report)))
      (delete-file report)
      (status:exit-val status))))

(define (count-of text part)
  (let lp ((start 0) (n 0))
    (let ((at (string-contains text part start)))
      (if at (lp (+ at 1) (+ n 1)) n))))

(define intro "# plucky benchmark results\n\nThe introduction.\n\n")
(define (section name date body)
  (string-append "## " name ", " date "\n\n" body "\n\n"))

(test-begin "regress/bench-results-appended")

(write-text! results
             (string-append intro
                            (section "bench/hello" "2026-11-21 12:00 UTC" "| old hello 1 |")
                            (section "bench/rss" "2026-11-21 12:05 UTC" "| rss |")
                            (section "bench/hello" "2026-11-21 13:00 UTC"
                                     "```\n## bench/rss, a heading in a block of commands\n```\n| old hello 2 |")
                            "## bench/news — 2026-11-26 04:17 UTC\n\n| old news |\n\n"
                            (section "Start-up analysis" "2026-11-21 (by hand)" "notes")))

(test-equal "a run of bench/hello: recorded" 0
  (record! (string-append "\n" (section "bench/hello" "2026-11-29 08:00 UTC" "| new hello |"))))
(let ((text (read-text results)))
  (test-assert "the introduction kept" (string-prefix? intro text))
  (test-equal "one section of bench/hello" 1 (count-of text "## bench/hello,"))
  (test-assert "the new one" (string-contains text "| new hello |"))
  (test-assert "no old run of it" (not (string-contains text "old hello")))
  (test-assert "a heading in a block of the old run went with it"
    (not (string-contains text "a heading in a block")))
  (test-assert "in the place of the first"
    (< (string-contains text "| new hello |") (string-contains text "| rss |")))
  (test-assert "the other benchmarks kept"
    (every (lambda (part) (string-contains text part))
           '("| rss |" "| old news |" "## Start-up analysis"))))

(test-equal "a heading with a dash: recorded" 0
  (record! "## bench/news — 2026-11-29 08:10 UTC\n\n| new news |\n"))
(let ((text (read-text results)))
  (test-equal "bench/news replaced" '(#f #t)
    (list (and (string-contains text "| old news |") #t)
          (and (string-contains text "| new news |") #t)))
  (test-assert "a blank line before the next section"
    (string-contains text "| new news |\n\n## Start-up analysis")))

(test-equal "a benchmark not there yet: recorded" 0
  (record! (section "bench/sse" "2026-11-29 08:20 UTC" "| sse |")))
(let ((text (read-text results)))
  (test-assert "at the end" (string-suffix? "| sse |\n\n" text))
  (test-equal "no two blank lines in a row" 0 (count-of text "\n\n\n")))

(let ((before (read-text results)))
  (test-assert "a report without a heading: refused"
    (not (zero? (record! "no heading\n"))))
  (test-equal "and the file left as it was" before (read-text results)))

(test-equal "BENCH_RESULTS=/dev/null: nothing recorded" 0
  (let ((report (string-append dir "/report.md")))
    (write-text! report (section "bench/hello" "now" "x"))
    (status:exit-val
     (system* "bash" "-c" ". bench/lib.sh && BENCH_RESULTS=/dev/null record_results \"$1\""
              "record" report))))

(system* "rm" "-rf" dir)

(test-end "regress/bench-results-appended")
