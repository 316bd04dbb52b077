;;; tests/web/json-float.scm --- (plucky web json float), the double printer

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (rnrs bytevectors)
             (ice-9 rdelim)
             (ice-9 regex)
             (tests lib harness)
             (plucky web json)
             (plucky web json float))

;;;
;;; Helpers
;;;

(define (flonum->text x)
  ;; -> the text put-flonum! writes for X
  (let* ((bytes (make-bytevector 40 0))
         (end (put-flonum! bytes 0 x)))
    (utf8->string (bytevector-slice bytes end))))

(define (bytevector-slice bv end)
  (let ((out (make-bytevector end)))
    (bytevector-copy! bv 0 out 0 end)
    out))

(define (bits->flonum bits)
  (let ((bv (make-bytevector 8)))
    (bytevector-u64-set! bv 0 bits (endianness big))
    (bytevector-ieee-double-ref bv 0 (endianness big))))

(define (digits+exponent text)
  ;; -> (DIGITS . E), TEXT's significant digits without leading or
  ;; trailing zeros and the power of ten of the last one, so that texts
  ;; in any layout compare
  (let* ((m (string-match "^-?([0-9]+)(\\.([0-9]*))?([eE]([-+]?[0-9]+))?$" text))
         (whole (match:substring m 1))
         (fraction (or (match:substring m 3) ""))
         (e (- (if (match:substring m 5) (string->number (match:substring m 5)) 0)
               (string-length fraction)))
         (digits (string-trim (string-append whole fraction) #\0)))
    (if (string-null? digits)
        (cons "0" 0)
        (cons (string-trim-right digits #\0)
              (+ e (- (string-length (string-trim (string-append whole fraction) #\0 0))
                      (string-length (string-trim-right digits #\0))))))))

(define-syntax-rule (test-text x text)
  (test-equal (object->string x) text (flonum->text x)))

(define (shortest-mismatches xs)
  ;; -> the doubles of XS whose text does not read back to them, or
  ;; whose digits are not those of Guile's number->string (also the
  ;; shortest that read back, and the closest of those)
  (filter (lambda (x)
            (let ((text (flonum->text x)))
              (not (and (eqv? x (string->number text))
                        (equal? (digits+exponent text)
                                (digits+exponent (number->string x)))))))
          xs))

(test-runner-current (plucky-test-runner))
(test-begin "web/json-float")

;;;
;;; Layout
;;;

(test-group "put-flonum!"
  (test-text 0.0 "0.0")
  (test-text -0.0 "-0.0")
  (test-text 1.0 "1.0")
  (test-text -1.0 "-1.0")
  (test-text 100.0 "100.0")
  (test-text 123.456 "123.456")
  (test-text -65.613616999999977 "-65.61361699999998")
  (test-text 0.1 "0.1")
  (test-text 0.3 "0.3")
  (test-text (/ 1.0 3) "0.3333333333333333")
  (test-text 0.0001 "0.0001")
  (test-text 0.00012345 "0.00012345")
  (test-text 1e-5 "1.0e-5")
  (test-text 1.5e-7 "1.5e-7")
  (test-text 9007199254740992.0 "9007199254740992.0")
  (test-text 1234567890123456.0 "1234567890123456.0")
  (test-text 1e15 "1000000000000000.0")
  (test-text 1e16 "1.0e16")
  (test-text 1.5e16 "1.5e16")
  (test-text 1e23 "1.0e23")
  (test-text 1.2345678901234568e20 "1.2345678901234568e20")
  (test-text 5e-324 "5.0e-324")
  (test-text -5e-324 "-5.0e-324")
  (test-text 2.2250738585072014e-308 "2.2250738585072014e-308")
  (test-text 2.225073858507201e-308 "2.225073858507201e-308")
  (test-text 1.7976931348623157e308 "1.7976931348623157e308")
  (test-text -1e300 "-1.0e300")
  (test-text (expt 2.0 60) "1.152921504606847e18")
  (test-text (expt 2.0 -1022) "2.2250738585072014e-308")
  (test-equal "the longest text, within the 32 bytes of room it asks"
    24 (apply max (map (lambda (x) (string-length (flonum->text x)))
                       (list -2.2250738585072014e-308 -1.2345678901234567e-300
                             -0.00012345678901234567 -1234567890123456.7))))
  (test-error "infinity" #t (flonum->text (/ 1.0 0)))
  (test-error "minus infinity" #t (flonum->text (/ -1.0 0)))
  (test-error "NaN" #t (flonum->text (- (/ 1.0 0) (/ 1.0 0)))))

;;;
;;; Digits
;;;

(test-group "shortest digits: CPython's repr"
  ;; tests/data/json/floats-cpython.txt: bits and repr from CPython,
  ;; whose shortest, closest digits are also Ryu's and JavaScript's
  (test-equal "every double of the corpus" '()
    (call-with-input-file (test-data-file "json/floats-cpython.txt")
      (lambda (port)
        (let lp ((bad '()))
          (let ((line (read-line port)))
            (cond
             ((eof-object? line) (reverse bad))
             ((string-prefix? "#" line) (lp bad))
             (else
              (let* ((space (string-index line #\space))
                     (x (bits->flonum (string->number (substring line 0 space) 16)))
                     (repr (substring line (+ space 1)))
                     (text (flonum->text x)))
                (lp (if (and (eqv? x (string->number text))
                             (equal? (digits+exponent text) (digits+exponent repr))
                             (eq? (string-prefix? "-" text) (string-prefix? "-" repr)))
                        bad
                        (cons (list line text) bad))))))))))))

(test-group "shortest digits: random doubles"
  (let ((state (seed->random-state 17)))
    (test-equal "30,000 bit patterns" '()
      (shortest-mismatches
       (filter-map (lambda (_)
                     (let ((x (bits->flonum (random (expt 2 64) state))))
                       (and (not (nan? x)) (not (inf? x)) x)))
                   (iota 30000))))
    (test-equal "10,000 subnormals" '()
      (shortest-mismatches
       (map (lambda (_) (bits->flonum (random (expt 2 52) state))) (iota 10000))))
    (test-equal "10,000 doubles near a short decimal" '()
      (shortest-mismatches
       (map (lambda (_)
              (exact->inexact (* (+ 1 (random 9999 state)) (expt 10 (- (random 600 state) 300)))))
            (iota 10000))))
    (test-equal "10,000 integers below 2^60" '()
      (shortest-mismatches
       (map (lambda (_) (exact->inexact (random (expt 2 60) state))) (iota 10000))))))

(test-group "shortest digits: powers of two and their neighbours"
  ;; 2^e has the asymmetric interval: its lower neighbour is closer
  (test-equal "2^-1074 to 2^1023, and one ulp either side" '()
    (shortest-mismatches
     (append-map (lambda (e)
                   (let ((bv (make-bytevector 8)))
                     (bytevector-ieee-double-set! bv 0 (expt 2.0 e) (endianness big))
                     (let ((bits (bytevector-u64-ref bv 0 (endianness big))))
                       (filter-map (lambda (d)
                                     (let ((b (+ bits d)))
                                       (and (> b 0) (< b #x7ff0000000000000) (bits->flonum b))))
                                   '(-1 0 1)))))
                 (iota 2098 -1074)))))

(test-group "flonum-digits"
  (define (digits x)
    (let ((bv (make-bytevector 8)))
      (bytevector-ieee-double-native-set! bv 0 x)
      (call-with-values (lambda () (flonum-digits bv 0)) cons)))
  (test-equal "a coordinate" '(6561361699999998 . -14) (digits 65.613616999999977))
  (test-equal "one digit fewer, a multiple of ten" '(10000000000000000 . -17) (digits 0.1))
  (test-equal "the smallest subnormal" '(5 . -324) (digits 5e-324))
  (test-equal "the largest double" '(17976931348623157 . 292) (digits 1.7976931348623157e308)))

(test-group "exponent logarithms"
  ;; the fixnum formulas for floor(e log10 2), floor(log10 (3/4 2^e))
  ;; and floor(e log2 10) against exact integer logarithms
  (define module (resolve-module '(plucky web json float)))
  (define (floor-log base n)
    ;; floor(log_base n) for an exact positive rational N, from an
    ;; estimate in floating point
    (let lp ((k (inexact->exact
                 (floor (/ (* (- (integer-length (numerator n)) (integer-length (denominator n)))
                              (log 2))
                           (log base))))))
      (cond ((< n (expt base k)) (lp (- k 1)))
            ((>= n (expt base (+ k 1))) (lp (+ k 1)))
            (else k))))
  (test-equal "flog10-pow2, -1100 to 1100" '()
    (filter (lambda (e) (not (= ((module-ref module 'flog10-pow2) e) (floor-log 10 (expt 2 e)))))
            (iota 2201 -1100)))
  (test-equal "flog10-three-quarters-pow2, -1100 to 1100" '()
    (filter (lambda (e) (not (= ((module-ref module 'flog10-three-quarters-pow2) e)
                                (floor-log 10 (* 3/4 (expt 2 e))))))
            (iota 2201 -1100)))
  (test-equal "flog2-pow10, -400 to 400" '()
    (filter (lambda (e) (not (= ((module-ref module 'flog2-pow10) e) (floor-log 2 (expt 10 e)))))
            (iota 801 -400))))

(test-group "encode-json: reals"
  (test-equal "through the codec" "[1.0,-0.0,0.1,1.0e23,5.0e-324,1.0e-5,0.0001]"
    (utf8->string (encode-json (vector 1.0 -0.0 0.1 1e23 5e-324 1e-5 0.0001))))
  (let ((state (seed->random-state 18)))
    (test-equal "decode (encode x) = x for 20,000 bit patterns" '()
      (filter-map (lambda (_)
                    (let ((x (bits->flonum (random (expt 2 64) state))))
                      (and (not (nan? x)) (not (inf? x))
                           (not (eqv? x (decode-json (encode-json x))))
                           x)))
                  (iota 20000))))
  (test-error "NaN is refused" #t (encode-json (vector (- (/ 1.0 0) (/ 1.0 0))))))

(test-end "web/json-float")
