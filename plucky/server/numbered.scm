;;; (plucky server numbered) --- shared records, kept by number

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Every collection follows each pointer that lives, while the worker's
;;; HTTP clients wait.  Ten thousand idle WebSockets that each point to
;;; the record their route shares cost ten thousand pointers to follow;
;;; ten thousand numbers in a bytevector cost nothing, as the collector
;;; does not look into bytevectors (bench/websocket, idle).  So a table
;;; of rows by descriptor keeps the number of a shared record, and this
;;; table gives the record for the number.
;;;
;;; A number is counted once for each row that keeps it
;;; (`numbered-take!'), and freed, to be given again, when the last lets
;;; it go (`numbered-release!').  `numbered-take!' shares a record given
;;; lately if it is the same (a predicate says); the RECENT last ones are
;;; looked at, as records that are not the same (a closure each) would
;;; make a search of all of them long.  0 is never a number: a row can
;;; say "none" with it.
;;;
;;; Used on the loop's thread only: (plucky server watch) for the
;;; procedures of a watched descriptor, (plucky web websocket) for the
;;; settings of an upgrade.
;;;
;;; Code:

(define-module (plucky server numbered)
  #:use-module (srfi srfi-9)
  #:use-module ((srfi srfi-1) #:select (find filter-map))
  #:export (make-numbered
            numbered-ref
            numbered-take!
            numbered-release!
            numbered-in-use))

(define-record-type <numbered>
  (%make-numbered objects uses free recent recent-size)
  numbered?
  (objects numbered-objects set-numbered-objects!) ; by number; #f when free
  (uses numbered-uses set-numbered-uses!)          ; by number: rows keeping it
  (free numbered-free set-numbered-free!)          ; the free numbers
  (recent numbered-recent set-numbered-recent!)    ; numbers given last, newest first
  (recent-size numbered-recent-size))

(define* (make-numbered #:key (recent 8))
  "Return an empty table of records by number, sharing among the RECENT
records given last."
  (%make-numbered (make-vector 8 #f) (make-vector 8 0) (iota 7 1) '() recent))

(define-inlinable (numbered-ref table n)
  "Return the record of number N in TABLE, #f for 0."
  (vector-ref (numbered-objects table) n))

(define (new-number! table object)
  ;; -> a free number, now OBJECT's, the newest of the recent ones
  (when (null? (numbered-free table))
    (let* ((size (vector-length (numbered-objects table)))
           (grow (lambda (old fill)
                   (let ((new (make-vector (* 2 size) fill)))
                     (vector-move-left! old 0 size new 0)
                     new))))
      (set-numbered-objects! table (grow (numbered-objects table) #f))
      (set-numbered-uses! table (grow (numbered-uses table) 0))
      (set-numbered-free! table (iota size size))))
  (let ((n (car (numbered-free table)))
        (recent (numbered-recent table)))
    (set-numbered-free! table (cdr (numbered-free table)))
    (vector-set! (numbered-objects table) n object)
    (set-numbered-recent! table
                          (cons n (if (< (length recent) (numbered-recent-size table))
                                      recent
                                      (list-head recent (- (numbered-recent-size table) 1)))))
    n))

(define (numbered-take! table same? make)
  "Return the number of a record of TABLE given lately for which SAME?
is true, else a new number for the record (MAKE) returns; counted as
kept once more."
  (let ((n (or (find (lambda (n) (same? (numbered-ref table n)))
                     (numbered-recent table))
               (new-number! table (make)))))
    (vector-set! (numbered-uses table) n (+ 1 (vector-ref (numbered-uses table) n)))
    n))

(define (numbered-release! table n)
  "Count number N of TABLE as kept once fewer; free it when nobody keeps
it.  Return nothing."
  (let ((uses (- (vector-ref (numbered-uses table) n) 1)))
    (vector-set! (numbered-uses table) n uses)
    (when (zero? uses)
      (vector-set! (numbered-objects table) n #f)
      (set-numbered-free! table (cons n (numbered-free table)))
      (set-numbered-recent! table (delv n (numbered-recent table)))))
  (values))

(define (numbered-in-use table)
  "Return the records of TABLE that some row keeps (for tests)."
  (filter-map (lambda (object) object) (vector->list (numbered-objects table))))

;;; (plucky server numbered) ends here
