;;; plucky/launch.scm --- what bin/plucky runs, compiled

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Not a module: bin/plucky loads build/plucky/launch.go, the compiled
;;; form of this file, with `load-compiled', and its top level runs in
;;; the script's module.  Guile evaluates a script's own forms with its
;;; interpreter, expanding each with psyntax first; the work below, done
;;; that way, cost 2.4M instructions more than compiled (bench/startup-
;;; instructions), so bin/plucky has two forms and the rest is here.
;;;
;;; bin/plucky turned collections off; this file:
;;;   - turns auto-compilation back on (bin/plucky's --no-auto-compile is
;;;     for the script) for the app, as Guile has it unless the
;;;     environment says GUILE_AUTO_COMPILE=0;
;;;   - puts the source tree bin/plucky lives in first on the load paths
;;;     (build/ for compiled code), in this process and, through the
;;;     environment, in the processes it starts;
;;;   - gives the heap room, loads (plucky command) and what it needs
;;;     with collections still off (see (plucky sys gc) for why), turns
;;;     them back on, and runs the command.
;;;
;;; Code:

(define launch-time (gettimeofday))       ; for trace-start-up, below

(unless (equal? (getenv "GUILE_AUTO_COMPILE") "0")
  (set! %load-should-auto-compile #t))

(let* ((script (car (command-line)))
       (bin (if (string-index script #\/) (dirname script) "."))
       (bin (if (absolute-file-name? bin) bin (string-append (getcwd) "/" bin)))
       (root (if (string-suffix? "/bin" bin)
                 (substring bin 0 (- (string-length bin) 4))
                 (string-append bin "/..")))
       (build (string-append root "/build")))
  (define (prepend! name directory)
    (let ((old (getenv name)))
      (setenv name (if (and old (not (string-null? old)))
                       (string-append directory ":" old)
                       directory))))
  (set! %load-path (cons root %load-path))
  (set! %load-compiled-path (cons build %load-compiled-path))
  (prepend! "GUILE_LOAD_PATH" root)
  (prepend! "GUILE_LOAD_COMPILED_PATH" build))

((@ (plucky sys gc) reserve-heap!) (* 8 1024 1024))
(resolve-interface '(plucky command))
(gc-enable)
(let ((trace-start-up (@ (plucky server) trace-start-up)))
  (trace-start-up "launch" launch-time)   ; Guile has started, this runs
  (trace-start-up "modules"))             ; plucky's modules are loaded
((@ (plucky command) main) (command-line))

;;; plucky/launch.scm ends here
