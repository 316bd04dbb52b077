;;; bench/pg-roundtrip/loop.scm --- N round trips from a script, for callgrind
;;;
;;; guile --auto-compile -L . -C build bench/pg-roundtrip/loop.scm URL N
;;; prepares and connects, then runs `SELECT $1::int' N times on one
;;; connection (the waits block in poll(2)); bench/pg-roundtrip/run counts
;;; its instructions for two N and divides the difference.

(use-modules (plucky db postgresql))

(define (main url n)
  (let ((db (pg-connect url)))
    (pg-query-row db "SELECT $1::int" 0)
    (let lp ((i 0))
      (when (< i n)
        (pg-query-row db "SELECT $1::int" (remainder i 10000))
        (lp (+ i 1))))
    (pg-close db)))

(main (cadr (command-line)) (string->number (caddr (command-line))))
