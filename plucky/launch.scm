;;; plucky/launch.scm --- what bin/plucky runs, compiled

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; bin/plucky, the command (see (plucky command) for what it does), is a
;;; Guile script that the kernel starts through env(1): no shell in
;;; between (a shell would add its own start to each: bench/startup).  It
;;; needs `make' to have compiled plucky (build/).
;;;
;;; Guile reads a script with its reader, written in Scheme, which skips
;;; a comment character by character, so commentary in bin/plucky costs
;;; every start (bench/startup-instructions): it lives here, in compiled
;;; code, and one line is left there.  Guile's
;;; interpreter then runs the script's forms, expanding each first, so
;;; there are two: collections off, first and alone (reading a form makes
;;; weak entries, its source properties, which can be enough to set off
;;; the collection this avoids), then this file, compiled.
;;; --no-auto-compile keeps Guile from compiling the script into its
;;; cache; below, auto-compilation is turned back on.
;;;
;;; GUILE_JIT_THRESHOLD, which bin/plucky's #! line sets: Guile compiles
;;; a procedure to machine code once it has been called that many times,
;;; 1,000 by default.  Start-up calls the module system's procedures just
;;; over that many times, and compiling them costs more than it saves
;;; before the first response; 3,000 keeps start-up in the VM (bench/
;;; startup-instructions, exec to the first 200).  Procedures on the
;;; request path pass 3,000 calls within the first few thousand requests.
;;; Processes the app starts inherit it.
;;;
;;; Not a module: bin/plucky loads build/plucky/launch.go, the compiled
;;; form of this file, with `load-compiled', and its top level runs in
;;; the script's module.  Guile evaluates a script's own forms with its
;;; interpreter, expanding each with psyntax first; the work below, done
;;; that way, costs more than compiled (bench/startup-instructions), so
;;; bin/plucky has two forms and the rest is here.
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
((@ (plucky sys gc) collect-less-often!))
(resolve-interface '(plucky command))
(gc-enable)
(let ((trace-start-up (@ (plucky server) trace-start-up)))
  (trace-start-up "launch" launch-time)   ; Guile has started, this runs
  (trace-start-up "modules"))             ; plucky's modules are loaded
((@ (plucky command) main) (command-line))

;;; plucky/launch.scm ends here
