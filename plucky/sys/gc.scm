;;; (plucky sys gc) --- room in the heap for start-up

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; bin/plucky starts with `(gc-disable)', loads this module and calls
;;; `reserve-heap!', loads (plucky command) and every module a server
;;; needs, then `(gc-enable)'s before the app file is loaded.  Both
;;; steps keep libgc's full collections (a large share of plucky's
;;; start-up beyond Guile's own: callgrind, bench/startup-instructions)
;;; off the path from exec to the first
;;; response, where there is nothing to collect yet:
;;;
;;;   - Every symbol Guile interns is an entry of a weak table, and
;;;     libgc collects each time its table of weak references grows past
;;;     4,096 entries (`GC_grow_table' in libgc's finalize.c).  `guile -c
;;;     1' ends just short of that; plucky's modules add about 2,800.
;;;     With collections off, the table grows all the same.
;;;   - Guile's heap starts at 2 MB, and after Guile's own start and
;;;     plucky's modules it is all but full: the app's load or the
;;;     first request would then collect.  `reserve-heap!' adds 8 MB
;;;     to it first, address space that is only backed by memory as
;;;     objects are put there; the first collection then comes when the
;;;     server has allocated that much, as any program's would.
;;;
;;; A server allocates for every request and keeps little of it, and
;;; each of libgc's collections marks the whole heap with Guile's roots,
;;; about as long whatever the server allocated since the last.  libgc
;;; collects once what it must scan, divided by its free-space divisor
;;; (3), has been allocated anew; `collect-less-often!' sets the divisor
;;; to 1, as Go's GOGC=100 lets the heap grow to twice the live data:
;;; fewer collections for a heap bigger, at its fullest, by the live
;;; data (bench/blog's index: its throughput, p99 and the worker's RSS,
;;; in bench/RESULTS.md).  A GC_FREE_SPACE_DIVISOR in the environment,
;;; read by libgc as it starts, is left as it says; `plucky serve
;;; --gc-free-space-divisor N' (`run-server''s keyword) sets it anew.
;;; The divisor does not shorten a collection, which marks the live data
;;; whatever: it trades resident memory for how often they come
;;; (bench/rss).
;;;
;;; What a collection marks, beside the live heap: the data of every
;;; compiled module loaded, which Guile's loader registers whole with
;;; libgc as a root (a .go file's DT_GUILE_GC_ROOT), to be scanned word
;;; by word at each collection.  In a server that data is as large as
;;; its live heap, and most of it is the syntax objects of SRFI-9's
;;; accessor macros (docs/guile-upstream.md, 5 and 9; bench/demo-gc
;;; prints both sizes).  libgc's other levers were measured on the demo
;;; (bench/RESULTS.md, "collector levers") and none is used:
;;;
;;;   - Incremental, generational marking (GC_ENABLE_INCREMENTAL, dirty
;;;     pages found by mprotect: this kernel has no soft-dirty bits)
;;;     still ends each cycle with the world stopped to scan the roots
;;;     again and the pages written meanwhile: that stop was as long as
;;;     a whole collection, the heap held more, and every first write
;;;     to a page since the last cycle is a SIGSEGV.
;;;   - Parallel marking: libgc starts its marker threads in the process
;;;     that starts it, and after a fork marks on one thread until told
;;;     otherwise (GC_start_mark_threads); a worker's collection then
;;;     costs the same CPU time on one CPU.  More markers shorten the
;;;     stop only where a CPU is idle, which on a machine whose workers
;;;     fill its CPUs it is not.
;;;
;;; Code:

(define-module (plucky sys gc)
  #:use-module (plucky sys foreign)
  #:export (reserve-heap!
            collect-less-often!
            set-free-space-divisor!
            free-space-divisor
            gc-total-bytes))

(define gc-total-bytes
  ;; In the program's namespace, not opened as "libgc": libguile's libgc
  ;; is already in the process, and looking up libgc.so searched the
  ;; library path at every start (bench/startup) and needed libgc-dev's
  ;; unversioned libgc.so.
  (pointer->procedure size_t (symbol-address "GC_get_total_bytes") '()))

(define (reserve-heap! bytes)
  "Grow the garbage-collected heap by BYTES now, rather than collect when
it is full; return #t on success."
  ;; libguile is linked with libgc: its symbols are in the process.
  ;;
  ;; The result is bound before it is tested: Guile 3.0.8 inlines this
  ;; procedure into callers in other modules, and with the body
  ;; `(not (zero? (call ...)))' a caller that discards the value (as
  ;; plucky/launch.scm does) drops the call along with the test: the
  ;; heap would stay at 2 MB and start-up collect once more
  ;; (tests/server/startup.scm checks the heap the app sees).
  (let ((expanded ((pointer->procedure int (symbol-address "GC_expand_hp")
                                       (list size_t))
                   bytes)))
    (not (zero? expanded))))

(set-procedure-property! gc-total-bytes 'documentation
  "Return the bytes libgc has allocated since the process started.")

(define %set-free-space-divisor
  (pointer->procedure void (symbol-address "GC_set_free_space_divisor")
                      (list unsigned-long)))

(define (set-free-space-divisor! n)
  "Have libgc collect once it has allocated, since the last collection,
the heap it scans divided by N (a positive integer; see the commentary).
Return nothing useful."
  (%set-free-space-divisor n))

(define free-space-divisor
  (pointer->procedure unsigned-long (symbol-address "GC_get_free_space_divisor") '()))

(set-procedure-property! free-space-divisor 'documentation
  "Return libgc's free-space divisor (see `set-free-space-divisor!').")

(define (collect-less-often!)
  "Have libgc collect after allocating as much as the heap it scans (a
free-space divisor of 1, see the commentary) unless GC_FREE_SPACE_DIVISOR
is set in the environment.  Return nothing useful."
  (unless (getenv "GC_FREE_SPACE_DIVISOR")
    (set-free-space-divisor! 1)))

;;; (plucky sys gc) ends here
