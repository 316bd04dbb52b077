;;; tests/web/docs.scm --- the examples of docs/toolkit.md, run

;; Each ```scheme block of docs/toolkit.md is cut at the lines
;; ";; ⇒ VALUE": the forms before such a line are evaluated, in one fresh
;; module for the whole file, and the value of the last is compared
;; (equal?) with VALUE, read as a datum.

(use-modules (srfi srfi-64)
             (ice-9 rdelim)
             (ice-9 textual-ports)
             (tests lib harness)
             (tests lib command))

(define doc (string-append source-root "/docs/toolkit.md"))

(define (scheme-blocks text)
  ;; -> the bodies of the ```scheme blocks of TEXT
  (let lp ((lines (string-split text #\newline)) (in? #f) (block '()) (blocks '()))
    (cond
     ((null? lines) (reverse blocks))
     ((and (not in?) (string=? (car lines) "```scheme")) (lp (cdr lines) #t '() blocks))
     ((and in? (string=? (car lines) "```"))
      (lp (cdr lines) #f '() (cons (reverse block) blocks)))
     (in? (lp (cdr lines) #t (cons (car lines) block) blocks))
     (else (lp (cdr lines) #f block blocks)))))

(define (read-all text)
  (call-with-input-string text
    (lambda (port)
      (let lp ((forms '()))
        (let ((form (read port)))
          (if (eof-object? form) (reverse forms) (lp (cons form forms))))))))

(define module (make-fresh-user-module))

(define (run! lines)
  ;; evaluate LINES, checking each ";; ⇒" on the way
  (let lp ((lines lines) (code '()))
    (define (evaluate)
      (let ((forms (read-all (string-join (reverse code) "\n"))))
        (let next ((forms forms) (value *unspecified*))
          (if (null? forms) value (next (cdr forms) (eval (car forms) module))))))
    (cond
     ((null? lines) (evaluate))
     ((string-prefix? ";; ⇒ " (car lines))
      (let ((source (string-trim-both (string-join (reverse code) " ")))
            (expected (with-input-from-string (substring (car lines) 5) read)))
        (test-equal source expected (evaluate))
        (lp (cdr lines) '())))
     (else (lp (cdr lines) (cons (car lines) code))))))

(test-begin "web/docs")

(test-group "docs/toolkit.md"
  (call-guarded
   (lambda ()
     (let ((blocks (scheme-blocks (call-with-input-file doc get-string-all))))
       (test-assert "there are examples" (> (length blocks) 5))
       (for-each run! blocks)))))

(test-end "web/docs")
