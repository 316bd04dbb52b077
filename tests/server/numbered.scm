;;; tests/server/numbered.scm --- shared records, kept by number

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; (plucky server numbered) alone: sharing among the recent records,
;;; counting, freeing and giving a number again, growing past the first
;;; eight.
;;;
;;; Code:

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (tests lib harness)
             (plucky server numbered))

(test-begin "server/numbered")

(define (same-as x) (lambda (known) (equal? known x)))

(test-group "numbered-take!, numbered-release!"
  (let* ((table (make-numbered #:recent 2))
         (a (numbered-take! table (same-as "a") (lambda () "a")))
         (a2 (numbered-take! table (same-as "a") (lambda () "a"))))
    (test-assert "0 is never a number" (> a 0))
    (test-equal "the same record shares its number" a a2)
    (test-equal "numbered-ref gives it" "a" (numbered-ref table a))
    (let* ((b (numbered-take! table (same-as "b") (lambda () "b")))
           (c (numbered-take! table (same-as "c") (lambda () "c")))
           (a3 (numbered-take! table (same-as "a") (lambda () "a"))))
      (test-assert "past the RECENT last ones, a new number" (not (= a a3)))
      (numbered-release! table a3)
      (test-equal "freed once nobody keeps it" #f (numbered-ref table a3))
      (numbered-release! table a)
      (test-equal "kept twice: still there after one release" "a" (numbered-ref table a))
      (numbered-release! table a)
      (test-equal "in use: the others" '("b" "c")
        (sort (numbered-in-use table) string<?))
      (let ((d (numbered-take! table (same-as "d") (lambda () "d"))))
        (test-assert "a freed number is given again" (memv d (list a a3)))
        (numbered-release! table b)
        (numbered-release! table c)
        (numbered-release! table d)
        (test-equal "all freed" '() (numbered-in-use table))))))

(test-group "growing"
  (let* ((table (make-numbered))
         (numbers (map (lambda (i) (numbered-take! table (lambda (known) #f) (lambda () i)))
                       (iota 100))))
    (test-equal "a hundred records, a hundred numbers" 100
      (length (delete-duplicates numbers)))
    (test-equal "each gives its record" (iota 100)
      (map (lambda (n) (numbered-ref table n)) numbers))
    (for-each (lambda (n) (numbered-release! table n)) numbers)
    (test-equal "all freed" '() (numbered-in-use table))))

(test-end "server/numbered")
