;;; tests/sys/record.scm --- (plucky sys record)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; define-record-type/lean must make what SRFI-9's define-record-type
;;; makes: constructor, predicate, accessors, modifiers, the same errors
;;; on a value of another type, Guile records that print and take a
;;; printer, and the functional setters of (srfi srfi-9 gnu).
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (srfi srfi-9)
             (srfi srfi-9 gnu)
             (tests lib harness)
             (tests lib command)
             (plucky sys record))

(test-begin "sys/record")

(define-record-type/lean <point>
  (make-point x y)
  point?
  (x point-x set-point-x!)
  (y point-y)
  (label point-label set-point-label!))   ; not in the constructor: #f

(define-record-type <srfi-point>
  (make-srfi-point x y)
  srfi-point?
  (x srfi-point-x)
  (y srfi-point-y))

(define p (make-point 1 2))

(test-equal "constructor and accessors" '(1 2 #f)
  (list (point-x p) (point-y p) (point-label p)))

(test-equal "modifiers" '(10 "here")
  (begin
    (set-point-x! p 10)
    (set-point-label! p "here")
    (list (point-x p) (point-label p))))

(test-equal "predicate" '(#t #f #f #f)
  (list (point? p) (point? (make-srfi-point 1 2)) (point? 1) (point? #(1 2))))

(test-assert "a Guile record of type <point>, named as SRFI-9 names it"
  (and (record? p)
       (eq? (record-type-descriptor p) <point>)
       (eq? (record-type-name <point>) '<point>)
       (equal? (record-type-fields <point>) '(x y label))))

(define (error-key thunk)
  (catch #t thunk (lambda (key . args) key)))

(test-equal "an accessor given another record raises wrong-type-arg, as SRFI-9's"
  (list (error-key (lambda () (srfi-point-x p)))
        (error-key (lambda () (srfi-point-x p))))
  (list (error-key (lambda () (point-x (make-srfi-point 1 2))))
        (error-key (lambda () (set-point-x! (make-srfi-point 1 2) 0)))))

(test-equal "... and names the accessor" '(point-x set-point-x!)
  (map (lambda (thunk) (catch 'wrong-type-arg thunk (lambda (key who . _) who)))
       (list (lambda () (point-x (make-srfi-point 1 2)))
             (lambda () (set-point-x! (make-srfi-point 1 2) 0)))))

(test-equal "an accessor given a non-record raises wrong-type-arg" 'wrong-type-arg
  (error-key (lambda () (point-y 'not-a-record))))

(test-assert "prints as a record"
  (string-prefix? "#<<point> " (with-output-to-string (lambda () (write p)))))

(test-equal "takes a printer" "#<point 10>"
  (begin
    (set-record-type-printer! <point>
                              (lambda (point port)
                                (format port "#<point ~a>" (point-x point))))
    (with-output-to-string (lambda () (write p)))))

(test-equal "an accessor used as a value is a procedure" '(10 2)
  (map point-x (list p (make-point 2 3))))

(test-equal "a modifier used as a value is a procedure" 5
  (begin (for-each set-point-x! (list p) (list 5)) (point-x p)))

(test-equal "set-fields of (srfi srfi-9 gnu) copies it" '(7 3 #f 5)
  (let ((q (set-fields (make-point 1 3) ((point-x) 7))))
    (list (point-x q) (point-y q) (point-label q) (point-x p))))

(test-equal "a constructor field that is not a field is refused" 'syntax-error
  (catch #t
    (lambda ()
      (eval '(define-record-type/lean <bad> (make-bad nope) bad? (x bad-x))
            (current-module))
      'accepted)
    (lambda (key . args) key)))

(test-end "sys/record")

;;; tests/sys/record.scm ends here
