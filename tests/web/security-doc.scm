;;; tests/web/security-doc.scm --- the examples of docs/security.md, run
;;;
;;; Every ```scheme block of the document is evaluated, in order, in one
;;; fresh module.  A line ";; => VALUE" checks that the last expression
;;; before it (since the previous check) returned VALUE (compared with
;;; `equal?' to VALUE as `read' reads it).

(use-modules (srfi srfi-64)
             (srfi srfi-1)
             (ice-9 rdelim)
             (ice-9 regex)
             (tests lib harness))

(define document
  (string-append (dirname (dirname (dirname (test-data-file "x")))) "/docs/security.md"))

;; -> the blocks of DOCUMENT's ```scheme fences, each a list of lines
(define (scheme-blocks path)
  (call-with-input-file path
    (lambda (port)
      (let loop ((blocks '()) (current #f))
        (let ((line (read-line port)))
          (cond ((eof-object? line) (reverse blocks))
                ((and (not current) (string=? line "```scheme")) (loop blocks '()))
                ((and current (string=? line "```")) (loop (cons (reverse current) blocks) #f))
                (current (loop blocks (cons line current)))
                (else (loop blocks #f))))))))

(define expectation (make-regexp "^ *;; => (.*)$"))

(define module (make-fresh-user-module))

;; -> the value of the last form of TEXT, evaluated in MODULE
(define (evaluate text)
  (call-with-input-string text
    (lambda (port)
      (let loop ((value *unspecified*))
        (let ((form (read port)))
          (if (eof-object? form)
              value
              (loop (eval form module))))))))

(define (last-line text)
  (let ((lines (filter (lambda (line) (not (string-null? (string-trim-both line))))
                       (string-split text #\newline))))
    (if (null? lines) "" (car (last-pair lines)))))

(test-begin "web/security-doc")

(let ((blocks (scheme-blocks document)))
  (test-assert "the document has examples" (> (length blocks) 8))
  (for-each
   (lambda (block number)
     (test-group (string-append "block " (number->string number))
       (call-guarded
        (lambda ()
          (let loop ((lines block) (code '()))
            (cond
             ((null? lines) (evaluate (string-join (reverse code) "\n")))
             ((regexp-exec expectation (car lines))
              => (lambda (match)
                   (let ((expected (call-with-input-string (match:substring match 1) read))
                         (source (string-join (reverse code) "\n")))
                     (test-equal (string-trim-both (last-line source)) expected (evaluate source))
                     (loop (cdr lines) '()))))
             (else (loop (cdr lines) (cons (car lines) code)))))))))
   blocks (iota (length blocks) 1)))

(test-end "web/security-doc")
