;;; tests/sys/gc.scm --- (plucky sys gc)

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; bin/plucky loads its modules inside `call-without-collections'.  What
;;; must hold: no collection happens inside, not even an explicit (gc);
;;; collections are back on afterwards however THUNK ends, and after the
;;; outermost of nested calls only; and the app a server loads, and the
;;; server itself, run with collections on.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (web client)
             (web response)
             (tests lib harness)
             (tests lib command)
             (plucky sys gc))

(test-begin "sys/gc")

(define (collections)
  (assq-ref (gc-stats) 'gc-times))

(define (collects?)
  ;; -> #t if an explicit (gc) runs a collection now
  (let ((before (collections)))
    (gc)
    (> (collections) before)))

(test-group "call-without-collections"
  (test-assert "collections on to begin with" (collects?))
  (test-equal "none inside, not even an explicit one" #f
    (call-without-collections collects?))
  (test-equal "THUNK's values" '(1 2)
    (call-with-values (lambda () (call-without-collections (lambda () (values 1 2))))
      list))
  (test-assert "on again after it returns" (collects?))
  (test-equal "on again after THUNK raises" 'raised
    (catch 'oops
      (lambda () (call-without-collections (lambda () (throw 'oops))))
      (lambda _ 'raised)))
  (test-assert "… and collections are on" (collects?))
  (test-equal "nested: still off after the inner call returns" '(#f #f)
    (call-without-collections
     (lambda ()
       (list (call-without-collections collects?) (collects?)))))
  (test-assert "on after the outer one" (collects?)))

(test-group "bin/plucky serve"
  ;; The app records, when it is loaded and when it answers, whether an
  ;; explicit (gc) collects.
  (let* ((dir (temporary-directory))
         (app (string-append dir "/app.scm")))
    (write-file app "
(define (collects?)
  (let ((before (assq-ref (gc-stats) 'gc-times)))
    (gc)
    (> (assq-ref (gc-stats) 'gc-times) before)))
(define at-load (collects?))
(lambda (request body)
  (values '((content-type . (text/plain)))
          (format #f \"~a ~a\" at-load (collects?))))
")
    (for-each
     (lambda (workers)
       (call-with-plucky
        app (append (list "--port" "0" "--workers" workers)
                    (if (zero? (geteuid)) '("--allow-root") '()))
        (lambda (plucky)
          (test-equal (string-append "the app, loaded and answering, --workers " workers)
            "#t #t"
            (call-with-values
                (lambda ()
                  (http-get (string-append "http://127.0.0.1:"
                                           (number->string (plucky-port plucky)) "/")))
              (lambda (response body) body))))))
     '("1" "2"))
    (remove-tree dir)))

(test-end "sys/gc")

;;; tests/sys/gc.scm ends here
