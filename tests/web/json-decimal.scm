;;; tests/web/json-decimal.scm --- (plucky web json decimal), decimals to doubles

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (rnrs bytevectors)
             (tests lib harness)
             (plucky web json)
             (plucky web json decimal))

;;;
;;; Helpers
;;;

(define scratch (make-bytevector 16))

(define (list-head* l n)
  (if (> (length l) n) (list-head l n) l))

(define (error-offset thunk)
  ;; -> the offset of the &json-error THUNK raises, or its value
  (with-exception-handler
      (lambda (e) (json-error-offset e))
    thunk
    #:unwind? #t
    #:unwind-for-type &json-error))

(define (fast w q)
  ;; -> decimal->flonum's double for W 10^Q, or #f
  (bytevector-u64-native-set! scratch 0 w)
  (bytevector-s32-native-set! scratch 8 q)
  (bytevector-u8-set! scratch 12 0)
  (decimal->flonum scratch))

(define (fast-negative w q)
  ;; -> decimal->flonum's double for -W 10^Q (the sign byte set), or #f
  (bytevector-u64-native-set! scratch 0 w)
  (bytevector-s32-native-set! scratch 8 q)
  (bytevector-u8-set! scratch 12 1)
  (decimal->flonum scratch))

(define (exact w q)
  ;; -> W 10^Q correctly rounded, by exact arithmetic
  (exact->inexact (* w (expt 10 q))))

(define (wrong cases)
  ;; -> the (W Q) of CASES that decimal->flonum answers, and wrongly
  (filter (lambda (c)
            (let ((x (fast (car c) (cadr c))))
              (and x (not (eqv? x (exact (car c) (cadr c)))))))
          cases))

(define (random-cases n state)
  ;; N random (W Q): W of 1 to 19 digits (below 2^64), Q in [-350, 350)
  (let lp ((k 0) (acc '()))
    (if (= k n)
        acc
        (let* ((digits (+ 1 (random 19 state)))
               (w (+ 1 (random (- (expt 10 digits) 1) state)))
               (q (- (random 700 state) 350)))
          (lp (+ k 1) (if (< w (expt 2 64)) (cons (list w q) acc) acc))))))

(define (neighbour-cases n state)
  ;; for N random doubles: their 19 digits, and the decimals just
  ;; above, below and exactly halfway to the next double, where rounding
  ;; is hardest
  (append-map
   (lambda (k)
     (let* ((x (* (+ 1.0 (random 1.0 state)) (expt 2.0 (- (random 2000 state) 1000))))
            (r (inexact->exact x))
            (next (inexact->exact (+ x (* x 1e-16))))   ; within a few ulps
            (half (/ (+ r next) 2))
            (e (- 18 (inexact->exact (floor (/ (log x) (log 10)))))))
       (filter-map (lambda (v)
                     (let ((w (round (* v (expt 10 e)))))
                       (and (< 0 w (expt 2 64)) (list w (- e)))))
                   (list r half (+ half (/ 1 (expt 10 (+ e 1)))) next))))
   (iota n)))

(test-runner-current (plucky-test-runner))
(test-begin "web/json-decimal")

(test-group "decimal->flonum: Clinger's and Eisel-Lemire's cases"
  (test-eqv "one" 1.0 (fast 1 0))
  (test-eqv "2^53 + 1 rounds to even" 9007199254740992.0 (fast 9007199254740993 0))
  (test-eqv "2^53 + 3 rounds to even, up" 9007199254740996.0 (fast 9007199254740995 0))
  (test-eqv "the largest word" (exact 18446744073709551615 0) (fast 18446744073709551615 0))
  (test-eqv "canada.json's kind" -65.613616999999977 (- (fast 65613616999999977 -15)))
  (test-eqv "the largest double" 1.7976931348623157e308 (fast 17976931348623157 292))
  (test-eqv "past the largest double: #f" #f (fast 17976931348623159 292))
  (test-eqv "far past it: #f" #f (fast 1 400))
  (test-eqv "the smallest normal" 2.2250738585072014e-308 (fast 22250738585072014 -324))
  (test-eqv "a subnormal" (exact 13553254 -327) (fast 13553254 -327))
  (test-eqv "the smallest subnormal" 5e-324 (fast 5 -324))
  (test-eqv "below half the smallest subnormal: zero" 0.0 (fast 24703282292062327 -340))
  (test-eqv "far below it: zero" 0.0 (fast 1 -400)))

(test-group "decimal->flonum: the sign byte"
  (test-eqv "canada.json's kind, negative" -65.613616999999977 (fast-negative 65613616999999977 -15))
  (test-eqv "a negative subnormal" (- (exact 13553254 -327)) (fast-negative 13553254 -327))
  (test-eqv "a negative zero below the smallest subnormal" -0.0 (fast-negative 1 -400))
  (test-eqv "a negative zero, the other way down" -0.0 (fast-negative 24703282292062327 -340))
  (test-equal "random W 10^Q, negated, are the positive ones' opposites" '()
    (let ((state (seed->random-state 29)))
      (list-head* (filter (lambda (c)
                            (let ((p (fast (car c) (cadr c))) (n (fast-negative (car c) (cadr c))))
                              (not (if p (eqv? n (- p)) (not n)))))
                          (random-cases 2000 state))
                  5))))

(test-group "decimal->flonum: random decimals, against exact arithmetic"
  (let ((state (seed->random-state 2026)))
    (test-equal "random W 10^Q" '() (list-head* (wrong (random-cases 20000 state)) 5))
    (test-equal "near and halfway between doubles" '()
      (list-head* (wrong (neighbour-cases 5000 state)) 5))
    (let ((cases (neighbour-cases 1000 state)))
      (test-assert "some thousands of them" (> (length cases) 2000))
      (test-assert "it answers for nearly all of them"
        (> (count (lambda (c) (fast (car c) (cadr c))) cases) (* 9/10 (length cases)))))))

(test-group "decode-json: reals read through decimal->flonum"
  (test-equal "canada.json's coordinates" #(-65.613616999999977 43.420273000000009)
    (decode-json (string->utf8 "[-65.613616999999977,43.420273000000009]")))
  (test-equal "Clinger's and the exact path" #(0.1 1e23 1.7976931348623157e308 5e-324 -0.0)
    (decode-json (string->utf8 "[0.1,1E23,1.7976931348623157e308,4.9406564584124654e-324,-0.0]")))
  (test-equal "a long fraction of zeros" 1e-300
    (decode-json (string->utf8 (string-append "0." (make-string 299 #\0) "1"))))
  (test-eqv "past the largest double: an error at its offset" 1
    (error-offset (lambda () (decode-json (string->utf8 "[1.8e308]"))))))

(test-group "decode-json: UTF-8 checked by utf8->string, errors with their offset"
  (define (offset bytes)
    (error-offset (lambda () (decode-json (u8-list->bytevector bytes)))))
  (test-eqv "a bad byte after UTF-8" 6 (offset '(91 34 #xc3 #xa9 97 98 #xff 34 93)))
  (test-eqv "a surrogate encoded" 2 (offset '(91 34 #xed #xa0 #x80 34 93)))
  (test-eqv "an overlong form" 3 (offset '(91 34 97 #xc0 #x80 34 93)))
  (test-eqv "a truncated sequence before an escape" 3 (offset '(91 34 97 #xe6 #x97 92 110 34 93)))
  (test-eqv "a bad byte after an escape" 5 (offset '(91 34 92 110 97 #xff 34 93)))
  (test-eqv "a truncated sequence after an escape, before another" 5
    (offset '(91 34 92 110 97 #xe6 #x97 92 110 34 93)))
  (test-eqv "a surrogate encoded after an escape" 4 (offset '(91 34 92 116 #xed #xa0 #x80 34 93)))
  (test-equal "UTF-8 between escapes decodes" #("\n日本\té\U01f60a\"x")
    (decode-json (string->utf8 "[\"\\n日本\\té\U01f60a\\\"x\"]")))
  (test-equal "valid UTF-8 decodes" #("é日\U01f60a")
    (decode-json (string->utf8 "[\"é日\U01f60a\"]"))))

(test-end "web/json-decimal")
