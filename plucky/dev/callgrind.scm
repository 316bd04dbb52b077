;;; (plucky dev callgrind) --- instructions per request from callgrind files

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; bench/instructions runs the server under `valgrind --tool=callgrind'
;;; twice, serving N requests and serving none, and asks this module for
;;; the difference divided by N: the 2012 profile's "instructions per
;;; request" table.  How a table is made:
;;;
;;;   read-callgrind    the file callgrind writes (format version 1, with
;;;                     name compression): self instructions (Ir) per
;;;                     function, and the number of calls to each, from
;;;                     its calls= lines; a function is its name and the
;;;                     object (library) it lives in
;;;   group             functions without a symbol are grouped by library
;;;                     (Debian's libraries are stripped: libguile's VM,
;;;                     libgc's marker show as addresses), code outside any
;;;                     object (what Guile's JIT compiled) as one group;
;;;                     functions with a name keep it
;;;   instruction-rows  (N run - zero run) / N per group, largest first
;;;
;;; Code:

(define-module (plucky dev callgrind)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 format)
  #:use-module (ice-9 rdelim)
  #:export (read-callgrind
            profile-total
            profile-functions
            function-group
            instruction-rows
            print-instruction-table))

(define-record-type <profile>
  (make-profile total functions)
  profile?
  (total profile-total)               ; Ir of the whole run
  ;; hash table: (object . name) -> (self-instructions . calls)
  (functions profile-functions))

(define (read-callgrind file)
  "Read the callgrind output FILE; return a <profile>."
  (let ((functions (make-hash-table))
        ;; name compression: "(id) name" defines, "(id)" refers
        (names (make-hash-table))
        (total 0))
    (define (name-of kind text)
      ;; TEXT after "fn=" etc.: "(12) name", "(12)" or "name"
      (if (string-prefix? "(" text)
          (let* ((close (string-index text #\)))
                 (id (string-append kind (substring text 0 (+ close 1))))
                 (rest (string-trim (substring text (+ close 1)))))
            (if (string-null? rest)
                (hash-ref names id "?")
                (begin (hash-set! names id rest) rest)))
          text))
    (define (entry! key)
      (or (hash-ref functions key)
          (let ((e (cons 0 0)))
            (hash-set! functions key e)
            e)))
    (call-with-input-file file
      (lambda (port)
        (let lp ((object "???") (function #f)
                 (call-object #f) (call-function #f)
                 (after-calls? #f))
          (let ((line (read-line port)))
            (cond
             ((eof-object? line) #t)
             ((string-null? line) (lp object function call-object call-function after-calls?))
             ((string-prefix? "ob=" line)
              (lp (name-of "ob" (substring line 3)) function call-object call-function #f))
             ((string-prefix? "fn=" line)
              (lp object (cons object (name-of "fn" (substring line 3))) #f #f #f))
             ((string-prefix? "cob=" line)
              (lp object function (name-of "ob" (substring line 4)) call-function #f))
             ((string-prefix? "cfn=" line)
              (lp object function call-object (name-of "fn" (substring line 4)) #f))
             ((or (string-prefix? "cfi=" line) (string-prefix? "cfl=" line))
              (name-of "fl" (substring line 4))
              (lp object function call-object call-function #f))
             ((or (string-prefix? "fl=" line) (string-prefix? "fi=" line) (string-prefix? "fe=" line))
              (name-of "fl" (substring line 3))
              (lp object function call-object call-function #f))
             ((string-prefix? "calls=" line)
              (let ((count (string->number (car (string-tokenize (substring line 6)))))
                    (callee (cons (or call-object object) (or call-function "?"))))
                (let ((e (entry! callee)))
                  (set-cdr! e (+ (cdr e) count)))
                ;; the next cost line is the call's inclusive cost
                (lp object function call-object call-function #t)))
             ((string-prefix? "totals:" line)
              (set! total (string->number (car (string-tokenize (substring line 7)))))
              (lp object function call-object call-function #f))
             ((or (char-numeric? (string-ref line 0))
                  (memv (string-ref line 0) '(#\+ #\- #\*)))
              (unless after-calls?
                (let ((fields (string-tokenize line)))
                  (when (and function (pair? (cdr fields)))
                    (let ((e (entry! function)))
                      (set-car! e (+ (car e) (string->number (cadr fields))))))))
              (lp object function call-object call-function #f))
             (else (lp object function call-object call-function #f)))))))
    (make-profile total functions)))

(define (unnamed? name)
  (or (string-prefix? "0x" name) (string=? name "?")))

(define (base-name object)
  (let ((slash (string-rindex object #\/)))
    (if slash (substring object (+ slash 1)) object)))

(define (function-group key)
  "Return the label under which the function KEY, an (object . name)
pair, is counted: its name, or for a function without a symbol, its
library's group."
  (let ((object (car key)) (name (cdr key)))
    (cond
     ((not (unnamed? name))
      (let ((quote (string-index name #\')))
        ;; "name'2" is callgrind's second context of a recursive function
        (if quote (substring name 0 quote) name)))
     ((string=? object "???") "JIT-compiled Scheme code")
     ((string-contains object "libguile")
      "libguile without symbols (the VM, static C)")
     ((string-contains object "libgc") "libgc without symbols (the collector)")
     (else (string-append (base-name object) " without symbols")))))

(define (grouped profile)
  ;; -> hash table: group -> (instructions . calls)
  (let ((groups (make-hash-table)))
    (hash-for-each
     (lambda (key e)
       (let* ((group (function-group key))
              (g (or (hash-ref groups group)
                     (let ((g (cons 0 0))) (hash-set! groups group g) g))))
         (set-car! g (+ (car g) (car e)))
         ;; calls of unnamed functions mean little once grouped
         (unless (unnamed? (cdr key))
           (set-cdr! g (+ (cdr g) (cdr e))))))
     (profile-functions profile))
    groups))

(define (instruction-rows run zero requests)
  "Return the per-request difference of the <profile>s RUN (REQUESTS
requests) and ZERO (none): a list of (group instructions calls) per
request, largest first, after a first row (\"(total)\" instructions #f)."
  (let ((a (grouped run))
        (b (grouped zero))
        (n (exact->inexact requests)))
    (cons (list "(total)" (/ (- (profile-total run) (profile-total zero)) n) #f)
          (sort (hash-map->list
                 (lambda (group e)
                   (let ((z (hash-ref b group '(0 . 0))))
                     (list group (/ (- (car e) (car z)) n) (/ (- (cdr e) (cdr z)) n))))
                 a)
                (lambda (x y) (> (second x) (second y)))))))

(define* (print-instruction-table rows #:key (port (current-output-port)) (threshold 0.01))
  "Print ROWS (from `instruction-rows') like the 2012 table:
instructions per request, share of the total, group, calls per request.
Groups under THRESHOLD of the total are summed on one line."
  (let* ((total (second (car rows)))
         (shown (filter (lambda (r) (>= (second r) (* threshold total))) (cdr rows)))
         (rest (fold + 0 (map second (filter (lambda (r) (< (second r) (* threshold total)))
                                             (cdr rows)))))
         (k (lambda (x) (if (>= (abs x) 1000)
                            (format #f "~,1fK" (/ x 1000.))
                            (number->string (inexact->exact (round x)))))))
    (format port "~12@a  ~10@a  ~48a ~a~%" "instr./req." "% of total" "procedure" "calls/req.")
    (format port "~12@a  ~10,1f  ~48a ~a~%" (k total) 100. "(total)" "-")
    (for-each (lambda (r)
                (format port "~12@a  ~10,1f  ~48a ~a~%" (k (second r))
                        (* 100 (/ (second r) total)) (first r)
                        (if (and (third r) (> (third r) 0)) (format #f "~,1f" (third r)) "-")))
              shown)
    (format port "~12@a  ~10,1f  ~48a ~a~%" (k rest) (* 100 (/ rest total))
            (format #f "other functions, < ~a% each" (* 100 threshold)) "-")))

;;; (plucky dev callgrind) ends here
