;;; tests/web/json.scm --- (plucky web json) and its codec modules

(use-modules (srfi srfi-1)
             (srfi srfi-9)
             (srfi srfi-64)
             (rnrs bytevectors)
             (ice-9 binary-ports)
             (ice-9 exceptions)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (plucky http error)
             (plucky web json)
             (plucky web json read)
             (plucky web json write)
             (bench json-schemas))

;;;
;;; Helpers
;;;

(define (->bytes input)
  (if (bytevector? input) input (string->utf8 input)))

(define (bytes . parts)
  ;; a bytevector of PARTS: strings as UTF-8, integers as bytes
  (u8-list->bytevector
   (append-map (lambda (p) (if (string? p) (bytevector->u8-list (string->utf8 p)) (list p)))
               parts)))

;; -> (ok VALUE), (json-error OFFSET), or (other CONDITION) for THUNK
(define (outcome thunk)
  (with-exception-handler
      (lambda (e)
        (if (json-error? e) (list 'json-error (json-error-offset e)) (list 'other e)))
    (lambda () (list 'ok (thunk)))
    #:unwind? #t))

(define (decode input . options)
  (outcome (lambda () (apply decode-json (->bytes input) options))))

(define (rejected? result) (eq? (car result) 'json-error))

(define-syntax-rule (test-decode name input expected)
  (test-equal name (list 'ok expected) (decode input)))
(define-syntax-rule (test-accept name input)
  (test-eq name 'ok (car (decode input))))
(define-syntax-rule (test-reject name input)
  (test-eq name 'json-error (car (decode input))))
(define-syntax-rule (test-offset name input offset)
  (test-equal name (list 'json-error offset) (decode input)))
(define-syntax-rule (test-encode name value text)
  (test-equal name text (utf8->string (encode-json value))))

;; Objects as sets of members: a record has no member order, and the
;; benchmark documents do not always keep one (twitter's media sizes).
(define (normalize x)
  (cond ((vector? x) (vector-map normalize x))
        ((and (pair? x) (pair? (car x)))
         (sort (map (lambda (m) (cons (car m) (normalize (cdr m)))) x)
               (lambda (a b) (string<? (car a) (car b)))))
        (else x)))

(define (vector-map f v) (list->vector (map f (vector->list v))))

;; -> #f if A and B are equal, else the path to their first difference
;; and the two values there, cut short (a failure shows where, not two
;; megabytes)
(define (difference a b)
  (define (cut x) (let ((s (object->string x))) (if (> (string-length s) 200) (substring s 0 200) s)))
  (let walk ((a a) (b b) (path '()))
    (cond ((equal? a b) #f)
          ((and (vector? a) (vector? b) (= (vector-length a) (vector-length b)))
           (let lp ((k 0))
             (and (< k (vector-length a))
                  (or (walk (vector-ref a k) (vector-ref b k) (cons k path)) (lp (+ k 1))))))
          ((and (pair? a) (pair? b) (pair? (car a)) (pair? (car b))
                (= (length a) (length b)) (equal? (map car a) (map car b)))
           (let lp ((a a) (b b))
             (and (pair? a)
                  (or (walk (cdar a) (cdar b) (cons (caar a) path)) (lp (cdr a) (cdr b))))))
          (else (list (reverse path) (cut a) (cut b))))))

;; A binary input port that hands out BV in the pieces CUTS marks (a
;; list of increasing indices), one piece per read, as a socket would.
(define (split-port bv cuts)
  (let ((pieces (let lp ((from 0) (cuts cuts))
                  (if (null? cuts)
                      (list (cons from (bytevector-length bv)))
                      (cons (cons from (car cuts)) (lp (car cuts) (cdr cuts))))))
        (pos #f))
    (make-custom-binary-input-port
     "split"
     (lambda (dest start count)
       (let lp ()
         (cond ((null? pieces) 0)
               (else
                (let* ((piece (car pieces))
                       (from (or pos (car piece)))
                       (n (min count (- (cdr piece) from))))
                  (if (<= n 0)
                      (begin (set! pieces (cdr pieces)) (set! pos #f) (lp))
                      (begin
                        (bytevector-copy! bv from dest start n)
                        (set! pos (+ from n))
                        n)))))))
     #f #f #f)))

(define source-root
  (dirname (dirname (dirname (search-path %load-path "tests/lib/harness.scm")))))

(define (read-line* port)
  (let lp ((chars '()))
    (let ((c (read-char port)))
      (if (or (eof-object? c) (eqv? c #\newline))
          (list->string (reverse chars))
          (lp (cons c chars))))))

;; The directory of the three benchmark documents: ../shared/data/json
;; beside the repository, or beside the main worktree when this is a
;; git worktree (.git is then a file "gitdir: MAIN/.git/worktrees/NAME").
(define json-data
  (let* ((beside (string-append source-root "/../shared/data/json"))
         (git (string-append source-root "/.git"))
         (main (and (file-exists? git) (not (file-is-directory? git))
                    (let ((line (call-with-input-file git (lambda (p) (read-line* p)))))
                      (and (string-prefix? "gitdir: " line)
                           (let ((dir (substring line 8)))
                             (dirname (dirname (dirname dir)))))))))
    (find (lambda (dir) (and dir (file-exists? (string-append dir "/twitter.json"))))
          (list (getenv "JSON_DATA") beside
                (and main (string-append main "/../shared/data/json"))))))

(define (document name)
  (and json-data
       (call-with-input-file (string-append json-data "/" name ".json")
         get-bytevector-all #:binary #t)))

(define documents
  ;; (name decoder encoder)
  (list (list "twitter" json->twitter twitter->json)
        (list "citm_catalog" json->citm-catalog citm-catalog->json)
        (list "canada" json->canada canada->json)))

(unless json-data
  (format #t "tests/web/json.scm: no ../shared/data/json beside the repository (set JSON_DATA): \
the tests on the benchmark documents are skipped~%"))

(test-runner-current (plucky-test-runner))
(test-begin "web/json")

;;;
;;; The conformance corpus: JSONTestSuite's cases (y_ accepted, n_
;;; rejected, i_ implementation-defined), rebuilt from RFC 8259's grammar
;;;

(test-group "decode-json: must accept (y_)"
  (test-decode "y_array_arraysWithSpaces" "[[]   ]" #(#()))
  (test-decode "y_array_empty-string" "[\"\"]" #(""))
  (test-decode "y_array_empty" "[]" #())
  (test-decode "y_array_ending_with_newline" "[\"a\"]\n" #("a"))
  (test-decode "y_array_false" "[false]" #(#f))
  (test-decode "y_array_heterogeneous" "[null, 1, \"1\", {}]" #(null 1 "1" ()))
  (test-decode "y_array_null" "[null]" #(null))
  (test-decode "y_array_with_1_and_newline" "[1\n]" #(1))
  (test-decode "y_array_with_leading_space" " [1]" #(1))
  (test-decode "y_array_with_several_null" "[1,null,null,null,2]" #(1 null null null 2))
  (test-decode "y_array_with_trailing_space" "[2] " #(2))
  (test-decode "y_number" "[123e65]" #(123e65))
  (test-decode "y_number_0e+1" "[0e+1]" #(0.0))
  (test-decode "y_number_0e1" "[0e1]" #(0.0))
  (test-decode "y_number_after_space" "[ 4]" #(4))
  (test-decode "y_number_double_close_to_zero"
               "[-0.000000000000000000000000000000000000000000000000000000000000000000000000000001]"
               #(-1e-78))
  (test-decode "y_number_int_with_exp" "[20e1]" #(200.0))
  (test-decode "y_number_minus_zero" "[-0]" #(0))
  (test-decode "y_number_negative_int" "[-123]" #(-123))
  (test-decode "y_number_negative_one" "[-1]" #(-1))
  (test-decode "y_number_negative_zero_real" "[-0.0]" #(-0.0))
  (test-decode "y_number_real_capital_e" "[1E22]" #(1e22))
  (test-decode "y_number_real_capital_e_neg_exp" "[1E-2]" #(0.01))
  (test-decode "y_number_real_capital_e_pos_exp" "[1E+2]" #(100.0))
  (test-decode "y_number_real_exponent" "[123e45]" #(123e45))
  (test-decode "y_number_real_fraction_exponent" "[123.456e78]" #(123.456e78))
  (test-decode "y_number_real_neg_exp" "[1e-2]" #(0.01))
  (test-decode "y_number_real_pos_exponent" "[1e+2]" #(100.0))
  (test-decode "y_number_simple_int" "[123]" #(123))
  (test-decode "y_number_simple_real" "[123.456789]" #(123.456789))
  (test-decode "y_object" "{\"asd\":\"sdf\", \"dfg\":\"fgh\"}" '(("asd" . "sdf") ("dfg" . "fgh")))
  (test-decode "y_object_basic" "{\"asd\":\"sdf\"}" '(("asd" . "sdf")))
  (test-decode "y_object_duplicated_key" "{\"a\":\"b\",\"a\":\"c\"}" '(("a" . "b") ("a" . "c")))
  (test-decode "y_object_duplicated_key_and_value" "{\"a\":\"b\",\"a\":\"b\"}" '(("a" . "b") ("a" . "b")))
  (test-decode "y_object_empty" "{}" '())
  (test-decode "y_object_empty_key" "{\"\":0}" '(("" . 0)))
  (test-decode "y_object_escaped_null_in_key" "{\"foo\\u0000bar\": 42}" '(("foo\x00bar" . 42)))
  (test-decode "y_object_extreme_numbers" "{ \"min\": -1.0e+28, \"max\": 1.0e+28 }"
               '(("min" . -1e28) ("max" . 1e28)))
  (test-decode "y_object_long_strings"
               "{\"x\":[{\"id\": \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}], \"id\": \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"
               `(("x" . #((("id" . ,(make-string 40 #\x)))))
                 ("id" . ,(make-string 40 #\x))))
  (test-decode "y_object_simple" "{\"a\":[]}" '(("a" . #())))
  (test-decode "y_object_string_unicode"
               "{\"title\":\"\\u041f\\u043e\\u043b\\u0442\\u043e\\u0440\\u0430 \\u0417\\u0435\\u043c\\u043b\\u0435\\u043a\\u043e\\u043f\\u0430\" }"
               '(("title" . "Полтора Землекопа")))
  (test-decode "y_object_with_newlines" "{\n\"a\": \"b\"\n}" '(("a" . "b")))
  (test-decode "y_string_1_2_3_bytes_UTF-8_sequences" "[\"\\u0060\\u012a\\u12AB\"]" #("`\u012a\u12ab"))
  (test-decode "y_string_accepted_surrogate_pair" "[\"\\uD801\\udc37\"]" #("\U010437"))
  (test-decode "y_string_accepted_surrogate_pairs" "[\"\\ud83d\\ude39\\ud83d\\udc8d\"]"
               #("\U01f639\U01f48d"))
  (test-decode "y_string_allowed_escapes" "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]" #("\"\\/\b\f\n\r\t"))
  (test-decode "y_string_backslash_and_u_escaped_zero" "[\"\\\\u0000\"]" #("\\u0000"))
  (test-decode "y_string_backslash_doublequotes" "[\"\\\"\"]" #("\""))
  (test-decode "y_string_comments" "[\"a/*b*/c/*d//e\"]" #("a/*b*/c/*d//e"))
  (test-decode "y_string_double_escape_a" "[\"\\\\a\"]" #("\\a"))
  (test-decode "y_string_double_escape_n" "[\"\\\\n\"]" #("\\n"))
  (test-decode "y_string_escaped_control_character" "[\"\\u0012\"]" #("\x12"))
  (test-decode "y_string_escaped_noncharacter" "[\"\\uFFFF\"]" #("\uffff"))
  (test-decode "y_string_in_array" "[\"asd\"]" #("asd"))
  (test-decode "y_string_in_array_with_leading_space" "[ \"asd\"]" #("asd"))
  (test-decode "y_string_last_surrogates_1_and_2" "[\"\\uDBFF\\uDFFF\"]" #("\U10ffff"))
  (test-decode "y_string_nbsp_uescaped" "[\"new\\u00A0line\"]" #("new\u00a0line"))
  (test-decode "y_string_nonCharacterInUTF-8_U+10FFFF" (bytes "[\"" #xf4 #x8f #xbf #xbf "\"]")
               #("\U10ffff"))
  (test-decode "y_string_nonCharacterInUTF-8_U+FFFF" (bytes "[\"" #xef #xbf #xbf "\"]") #("\uffff"))
  (test-decode "y_string_null_escape" "[\"\\u0000\"]" #("\x00"))
  (test-decode "y_string_one-byte-utf-8" "[\"\\u002c\"]" #(","))
  (test-decode "y_string_pi" "[\"π\"]" #("π"))
  (test-decode "y_string_reservedCharacterInUTF-8_U+1BFFF" (bytes "[\"" #xf0 #x9b #xbf #xbf "\"]")
               #("\U01bfff"))
  (test-decode "y_string_simple_ascii" "[\"asd \"]" #("asd "))
  (test-decode "y_string_space" "\" \"" " ")
  (test-decode "y_string_surrogates_U+1D11E_MUSICAL_SYMBOL_G_CLEF" "[\"\\uD834\\uDd1e\"]" #("\U01d11e"))
  (test-decode "y_string_three-byte-utf-8" "[\"\\u0821\"]" #("\u0821"))
  (test-decode "y_string_two-byte-utf-8" "[\"\\u0123\"]" #("\u0123"))
  (test-decode "y_string_u+2028_line_sep" (bytes "[\"" #xe2 #x80 #xa8 "\"]") #("\u2028"))
  (test-decode "y_string_u+2029_par_sep" (bytes "[\"" #xe2 #x80 #xa9 "\"]") #("\u2029"))
  (test-decode "y_string_uEscape" "[\"\\u0061\\u30af\\u30EA\\u30b9\"]" #("aクリス"))
  (test-decode "y_string_uescaped_newline" "[\"new\\u000Aline\"]" #("new\nline"))
  (test-decode "y_string_unescaped_char_delete" (bytes "[\"" #x7f "\"]") #("\x7f"))
  (test-decode "y_string_unicode" "[\"\\uA66D\"]" #("\ua66d"))
  (test-decode "y_string_unicodeEscapedBackslash" "[\"\\u005C\"]" #("\\"))
  (test-decode "y_string_unicode_2" "[\"⍂㈴⍂\"]" #("⍂㈴⍂"))
  (test-decode "y_string_unicode_U+10FFFE_nonchar" "[\"\\uDBFF\\uDFFE\"]" #("\U10fffe"))
  (test-decode "y_string_unicode_U+1FFFE_nonchar" "[\"\\uD83F\\uDFFE\"]" #("\U01fffe"))
  (test-decode "y_string_unicode_U+200B_ZERO_WIDTH_SPACE" "[\"\\u200B\"]" #("\u200b"))
  (test-decode "y_string_unicode_U+2064_invisible_plus" "[\"\\u2064\"]" #("\u2064"))
  (test-decode "y_string_unicode_U+FDD0_nonchar" "[\"\\uFDD0\"]" #("\ufdd0"))
  (test-decode "y_string_unicode_U+FFFE_nonchar" "[\"\\uFFFE\"]" #("\ufffe"))
  (test-decode "y_string_unicode_escaped_double_quote" "[\"\\u0022\"]" #("\""))
  (test-decode "y_string_utf8" "[\"€𝄞\"]" #("€𝄞"))
  (test-decode "y_string_with_del_character" (bytes "[\"a" #x7f "a\"]") #("a\x7fa"))
  (test-decode "y_string_escape_then_utf8" "[\"\\né€𝄞\"]" #("\né€𝄞"))
  (test-decode "y_string_long_escaped" (string-append "\"" (string-join (make-list 200 "ab\\n") "") "\"")
               (string-join (make-list 200 "ab\n") ""))
  (test-decode "y_structure_lonely_false" "false" #f)
  (test-decode "y_structure_lonely_int" "42" 42)
  (test-decode "y_structure_lonely_negative_real" "-0.1" -0.1)
  (test-decode "y_structure_lonely_null" "null" 'null)
  (test-decode "y_structure_lonely_string" "\"asd\"" "asd")
  (test-decode "y_structure_lonely_true" "true" #t)
  (test-decode "y_structure_string_empty" "\"\"" "")
  (test-decode "y_structure_trailing_newline" "[\"a\"]\n" #("a"))
  (test-decode "y_structure_true_in_array" "[true]" #(#t))
  (test-decode "y_structure_whitespace_array" " [] " #())
  (test-decode "y_structure_all_whitespace" " \t\r\n[\t\r\n 1 \t\r\n]\t\r\n " #(1)))

(define n-cases
  ;; (name input): JSONTestSuite's must-reject cases
  `(("n_array_1_true_without_comma" "[1 true]")
    ("n_array_a_invalid_utf8" ,(bytes "[a" #xe5 "]"))
    ("n_array_colon_instead_of_comma" "[\"\": 1]")
    ("n_array_comma_after_close" "[\"\"],")
    ("n_array_comma_and_number" "[,1]")
    ("n_array_double_comma" "[1,,2]")
    ("n_array_double_extra_comma" "[\"x\",,]")
    ("n_array_extra_close" "[\"x\"]]")
    ("n_array_extra_comma" "[\"\",]")
    ("n_array_incomplete" "[\"x\"")
    ("n_array_incomplete_invalid_value" "[x")
    ("n_array_inner_array_no_comma" "[3[4]]")
    ("n_array_invalid_utf8" ,(bytes "[" #xff "]"))
    ("n_array_items_separated_by_semicolon" "[1:2]")
    ("n_array_just_comma" "[,]")
    ("n_array_just_minus" "[-]")
    ("n_array_missing_value" "[   , \"\"]")
    ("n_array_newlines_unclosed" "[\"a\",\n4\n,1,")
    ("n_array_number_and_comma" "[1,]")
    ("n_array_number_and_several_commas" "[1,,]")
    ("n_array_spaces_vertical_tab_formfeed" "[\"\va\"\\f]")
    ("n_array_star_inside" "[*]")
    ("n_array_unclosed" "[\"\"")
    ("n_array_unclosed_trailing_comma" "[1,")
    ("n_array_unclosed_with_new_lines" "[1,\n1\n,1")
    ("n_array_unclosed_with_object_inside" "[{}")
    ("n_incomplete_false" "[fals]")
    ("n_incomplete_null" "[nul]")
    ("n_incomplete_true" "[tru]")
    ("n_literal_with_trailing_letter" "[truex]")
    ("n_multidigit_number_then_00" ,(bytes "123" 0))
    ("n_number_++" "[++1234]")
    ("n_number_+1" "[+1]")
    ("n_number_+Inf" "[+Inf]")
    ("n_number_-01" "[-01]")
    ("n_number_-1.0." "[-1.0.]")
    ("n_number_-2." "[-2.]")
    ("n_number_-NaN" "[-NaN]")
    ("n_number_.-1" "[.-1]")
    ("n_number_.2e-3" "[.2e-3]")
    ("n_number_0.1.2" "[0.1.2]")
    ("n_number_0.3e+" "[0.3e+]")
    ("n_number_0.3e" "[0.3e]")
    ("n_number_0.e1" "[0.e1]")
    ("n_number_0_capital_E+" "[0E+]")
    ("n_number_0_capital_E" "[0E]")
    ("n_number_0e+" "[0e+]")
    ("n_number_0e" "[0e]")
    ("n_number_1.0e+" "[1.0e+]")
    ("n_number_1.0e-" "[1.0e-]")
    ("n_number_1.0e" "[1.0e]")
    ("n_number_1_000" "[1 000.0]")
    ("n_number_1eE2" "[1eE2]")
    ("n_number_2.e+3" "[2.e+3]")
    ("n_number_2.e-3" "[2.e-3]")
    ("n_number_2.e3" "[2.e3]")
    ("n_number_9.e+" "[9.e+]")
    ("n_number_Inf" "[Inf]")
    ("n_number_NaN" "[NaN]")
    ("n_number_U+FF11_fullwidth_digit_one" "[１]")
    ("n_number_expression" "[1+2]")
    ("n_number_hex_1_digit" "[0x1]")
    ("n_number_hex_2_digits" "[0x42]")
    ("n_number_infinity" "[Infinity]")
    ("n_number_invalid+-" "[0e+-1]")
    ("n_number_invalid-negative-real" "[-123.123foo]")
    ("n_number_invalid-utf-8-in-bigger-int" ,(bytes "[123" #xe5 "]"))
    ("n_number_invalid-utf-8-in-exponent" ,(bytes "[1e1" #xe5 "]"))
    ("n_number_invalid-utf-8-in-int" ,(bytes "[0" #xe5 "]"))
    ("n_number_minus_infinity" "[-Infinity]")
    ("n_number_minus_sign_with_trailing_garbage" "[-foo]")
    ("n_number_minus_space_1" "[- 1]")
    ("n_number_neg_int_starting_with_zero" "[-012]")
    ("n_number_neg_real_without_int_part" "[-.123]")
    ("n_number_neg_with_garbage_at_end" "[-1x]")
    ("n_number_real_garbage_after_e" "[1ea]")
    ("n_number_real_with_invalid_utf8_after_e" ,(bytes "[1e" #xe5 "]"))
    ("n_number_real_without_fractional_part" "[1.]")
    ("n_number_starting_with_dot" "[.123]")
    ("n_number_with_alpha" "[1.2a-3]")
    ("n_number_with_alpha_char" "[1.8011670033376514H-308]")
    ("n_number_with_leading_zero" "[012]")
    ("n_number_big_with_leading_zero" "[0123456789012345678901234567890]")
    ("n_object_bad_value" "[\"x\", truth]")
    ("n_object_bracket_key" "{[: \"x\"}")
    ("n_object_comma_instead_of_colon" "{\"x\", null}")
    ("n_object_double_colon" "{\"x\"::\"b\"}")
    ("n_object_emoji" "{🇨🇭}")
    ("n_object_garbage_at_end" "{\"a\":\"a\" 123}")
    ("n_object_key_with_single_quotes" "{key: 'value'}")
    ("n_object_lone_continuation_byte_in_key_and_trailing_comma" ,(bytes "{\"" #xb9 "\":\"0\",}"))
    ("n_object_missing_colon" "{\"a\" b}")
    ("n_object_missing_key" "{:\"b\"}")
    ("n_object_missing_semicolon" "{\"a\" \"b\"}")
    ("n_object_missing_value" "{\"a\":")
    ("n_object_no-colon" "{\"a\"")
    ("n_object_non_string_key" "{1:1}")
    ("n_object_non_string_key_but_huge_number_instead" "{9999E9999:1}")
    ("n_object_repeated_null_null" "{null:null,null:null}")
    ("n_object_several_trailing_commas" "{\"id\":0,,,,,}")
    ("n_object_single_quote" "{'a':0}")
    ("n_object_trailing_comma" "{\"id\":0,}")
    ("n_object_trailing_comment" "{\"a\":\"b\"}/**/")
    ("n_object_trailing_comment_open" "{\"a\":\"b\"}/**//")
    ("n_object_trailing_comment_slash_open" "{\"a\":\"b\"}//")
    ("n_object_trailing_comment_slash_open_incomplete" "{\"a\":\"b\"}/")
    ("n_object_two_commas_in_a_row" "{\"a\":\"b\",,\"c\":\"d\"}")
    ("n_object_unquoted_key" "{a: \"b\"}")
    ("n_object_unterminated-value" "{\"a\":\"a")
    ("n_object_with_single_string" "{ \"foo\" : \"bar\", \"a\" }")
    ("n_object_with_trailing_garbage" "{\"a\":\"b\"}#")
    ("n_single_space" " ")
    ("n_string_1_surrogate_then_escape" "[\"\\uD800\\\"]")
    ("n_string_1_surrogate_then_escape_u" "[\"\\uD800\\u\"]")
    ("n_string_1_surrogate_then_escape_u1" "[\"\\uD800\\u1\"]")
    ("n_string_1_surrogate_then_escape_u1x" "[\"\\uD800\\u1x\"]")
    ("n_string_accentuated_char_no_quotes" "[é]")
    ("n_string_backslash_00" ,(bytes "[\"\\" 0 "\"]"))
    ("n_string_escape_x" "[\"\\x00\"]")
    ("n_string_escaped_backslash_bad" "[\"\\\\\\\"]")
    ("n_string_escaped_ctrl_char_tab" "[\"\\\t\"]")
    ("n_string_escaped_emoji" "[\"\\🌀\"]")
    ("n_string_incomplete_escape" "[\"\\\"]")
    ("n_string_incomplete_escaped_character" "[\"\\u00A\"]")
    ("n_string_incomplete_surrogate" "[\"\\uD834\\uDd\"]")
    ("n_string_incomplete_surrogate_escape_invalid" "[\"\\uD800\\uD800\\x\"]")
    ("n_string_invalid-utf-8-in-escape" ,(bytes "[\"\\u" #xe5 "\"]"))
    ("n_string_invalid_backslash_esc" "[\"\\a\"]")
    ("n_string_invalid_unicode_escape" "[\"\\uqqqq\"]")
    ("n_string_invalid_utf8_after_escape" ,(bytes "[\"\\" #xe5 "\"]"))
    ("n_string_leading_uescaped_thinspace" "[\\u0020\"asd\"]")
    ("n_string_no_quotes_with_bad_escape" "[\\n]")
    ("n_string_single_doublequote" "\"")
    ("n_string_single_quote" "['single quote']")
    ("n_string_single_string_no_double_quotes" "abc")
    ("n_string_start_escape_unclosed" "[\"\\")
    ("n_string_unescaped_ctrl_char" ,(bytes "[\"a" 0 "a\"]"))
    ("n_string_unescaped_newline" "[\"new\nline\"]")
    ("n_string_unescaped_tab" "[\"\t\"]")
    ("n_string_unescaped_ctrl_after_utf8" "[\"é\x01\"]")
    ("n_string_unescaped_ctrl_after_escape" "[\"\\n\x1f\"]")
    ("n_string_unicode_CapitalU" "\"\\UA66D\"")
    ("n_string_with_trailing_garbage" "\"\"x")
    ("n_structure_100000_opening_arrays" ,(make-string 100000 #\[))
    ("n_structure_angle_bracket_." "<.>")
    ("n_structure_angle_bracket_null" "[<null>]")
    ("n_structure_array_trailing_garbage" "[1]x")
    ("n_structure_array_with_extra_array_close" "[1]]")
    ("n_structure_array_with_unclosed_string" "[\"asd]")
    ("n_structure_ascii-unicode-identifier" "aå")
    ("n_structure_capitalized_True" "[True]")
    ("n_structure_close_unopened_array" "1]")
    ("n_structure_comma_instead_of_closing_brace" "{\"x\": true,")
    ("n_structure_double_array" "[][]")
    ("n_structure_end_array" "]")
    ("n_structure_incomplete_UTF8_BOM" ,(bytes #xef #xbb "{}"))
    ("n_structure_lone-invalid-utf-8" ,(bytes #xe5))
    ("n_structure_lone-open-bracket" "[")
    ("n_structure_no_data" "")
    ("n_structure_null-byte-outside-string" ,(bytes "[" 0 "]"))
    ("n_structure_number_with_trailing_garbage" "2@")
    ("n_structure_object_followed_by_closing_object" "{}}")
    ("n_structure_object_unclosed_no_value" "{\"\":")
    ("n_structure_object_with_comment" "{\"a\":/*comment*/\"b\"}")
    ("n_structure_object_with_trailing_garbage" "{\"a\": true} \"x\"")
    ("n_structure_open_array_apostrophe" "['")
    ("n_structure_open_array_comma" "[,")
    ("n_structure_open_array_object" ,(string-concatenate (make-list 50000 "[{\"\":")))
    ("n_structure_open_array_open_object" "[{")
    ("n_structure_open_array_open_string" "[\"a")
    ("n_structure_open_array_string" "[\"a\"")
    ("n_structure_open_object" "{")
    ("n_structure_open_object_close_array" "{]")
    ("n_structure_open_object_comma" "{,")
    ("n_structure_open_object_open_array" "{[")
    ("n_structure_open_object_open_string" "{\"a")
    ("n_structure_open_object_string_with_apostrophes" "{'a'")
    ("n_structure_open_open" "[\"\\{[\"\\{[\"\\{[\"\\{")
    ("n_structure_single_eacute" ,(bytes #xe9))
    ("n_structure_single_star" "*")
    ("n_structure_trailing_#" "{\"a\":\"b\"}#{}")
    ("n_structure_U+2060_word_joined" "[\u2060]")
    ("n_structure_uescaped_LF_before_string" "[\\u000A\"\"]")
    ("n_structure_unclosed_array" "[1")
    ("n_structure_unclosed_array_partial_null" "[ false, nul")
    ("n_structure_unclosed_array_unfinished_false" "[ true, fals")
    ("n_structure_unclosed_array_unfinished_true" "[ false, tru")
    ("n_structure_unclosed_object" "{\"asd\":\"asd\"")
    ("n_structure_unicode-identifier" "å")
    ("n_structure_UTF8_BOM_no_data" ,(bytes #xef #xbb #xbf))
    ("n_structure_whitespace_formfeed" "[\f]")
    ("n_structure_whitespace_nbsp" "[\u00a01]")))

(test-group "decode-json: must reject (n_)"
  (for-each (lambda (case) (test-reject (car case) (cadr case))) n-cases))

(test-group "decode-json: implementation-defined (i_), as docs/json.md states"
  ;; numbers: integers of any size exact; reals out of a double's range
  ;; refused; reals below its smallest subnormal are 0.0
  (test-decode "i_number_double_huge_neg_exp" "[123.456e-789]" #(0.0))
  (test-reject "i_number_huge_exp" (string-append "[0.4e" (make-string 300 #\6) "]"))
  (test-reject "i_number_neg_int_huge_exp" "[-1e+9999]")
  (test-reject "i_number_pos_double_huge_exp" "[1.5e+9999]")
  (test-reject "i_number_real_neg_overflow" "[-123123e100000]")
  (test-reject "i_number_real_pos_overflow" "[123123e100000]")
  (test-decode "i_number_real_underflow" "[123e-10000000]" #(0.0))
  (test-decode "i_number_too_big_neg_int" "[-123123123123123123123123123123]"
               #(-123123123123123123123123123123))
  (test-decode "i_number_too_big_pos_int" "[100000000000000000000]" #(100000000000000000000))
  (test-decode "i_number_very_big_negative_int" "[-237462374673276894279832749832423479823246327846]"
               #(-237462374673276894279832749832423479823246327846))
  (test-reject "i_number_1e309 (past the largest double)" "[1e309]")
  (test-decode "i_number_largest_double" "[1.7976931348623157e308]" #(1.7976931348623157e308))
  (test-decode "i_number_smallest_subnormal" "[5e-324]" #(5e-324))
  ;; lone surrogates: refused (U+FFFD with #:lone-surrogates 'replace)
  (test-reject "i_object_key_lone_2nd_surrogate" "{\"\\uDFAA\":0}")
  (test-reject "i_string_1st_surrogate_but_2nd_missing" "[\"\\uDADA\"]")
  (test-reject "i_string_1st_valid_surrogate_2nd_invalid" "[\"\\uD888\\u1234\"]")
  (test-reject "i_string_incomplete_surrogate_and_escape_valid" "[\"\\uD800\\n\"]")
  (test-reject "i_string_incomplete_surrogate_pair" "[\"\\uDd1ea\"]")
  (test-reject "i_string_incomplete_surrogates_escape_valid" "[\"\\uD800\\uD800\\n\"]")
  (test-reject "i_string_invalid_lonely_surrogate" "[\"\\ud800\"]")
  (test-reject "i_string_invalid_surrogate" "[\"\\ud800abc\"]")
  (test-reject "i_string_inverted_surrogates_U+1D11E" "[\"\\uDd1e\\uD834\"]")
  (test-reject "i_string_lone_second_surrogate" "[\"\\uDFAA\"]")
  ;; bytes that are not UTF-8: refused, whatever the encoding they are in
  (test-reject "i_string_UTF-16LE_with_BOM" (bytes #xff #xfe "[" 0 "\"" 0 #xe9 0 "\"" 0 "]" 0))
  (test-reject "i_string_UTF-8_invalid_sequence" (bytes "[\"日ш" #xfa "\"]"))
  (test-reject "i_string_UTF8_surrogate_U+D800" (bytes "[\"" #xed #xa0 #x80 "\"]"))
  (test-reject "i_string_invalid_utf-8" (bytes "[\"" #xff "\"]"))
  (test-reject "i_string_iso_latin_1" (bytes "[\"" #xe9 "\"]"))
  (test-reject "i_string_lone_utf8_continuation_byte" (bytes "[\"" #x81 "\"]"))
  (test-reject "i_string_not_in_unicode_range" (bytes "[\"" #xf4 #xbf #xbf #xbf "\"]"))
  (test-reject "i_string_overlong_sequence_2_bytes" (bytes "[\"" #xc0 #xaf "\"]"))
  (test-reject "i_string_overlong_sequence_3_bytes" (bytes "[\"" #xe0 #x80 #xaf "\"]"))
  (test-reject "i_string_overlong_sequence_4_bytes" (bytes "[\"" #xf0 #x80 #x80 #xaf "\"]"))
  (test-reject "i_string_overlong_sequence_6_bytes" (bytes "[\"" #xfc #x83 #xbf #xbf #xbf #xbf "\"]"))
  (test-reject "i_string_overlong_sequence_6_bytes_null" (bytes "[\"" #xfc #x80 #x80 #x80 #x80 #x80 "\"]"))
  (test-reject "i_string_truncated-utf-8" (bytes "[\"" #xe0 #xff "\"]"))
  (test-reject "i_string_truncated-utf-8_at_the_end" (bytes "[\"" #xe2 #x82))
  (test-reject "i_string_utf16BE_no_BOM" (bytes 0 "[" 0 "\"" 0 #xe9 0 "\"" 0 "]"))
  (test-reject "i_string_utf16LE_no_BOM" (bytes "[" 0 "\"" 0 #xe9 0 "\"" 0 "]" 0))
  (test-reject "i_string_invalid_utf8_after_escape_in_escaped_string"
               (bytes "[\"\\n" #xc0 #xaf "\"]"))
  ;; nesting: 512 arrays and objects deep by default
  (test-accept "i_structure_500_nested_arrays"
               (string-append (make-string 500 #\[) (make-string 500 #\])))
  (test-reject "i_structure_UTF-8_BOM_empty_object" (bytes #xef #xbb #xbf "{}")))

(test-group "decode-json: errors name the byte offset"
  (test-offset "no data" "" 0)
  (test-offset "trailing comma in an array" "[1,]" 3)
  (test-offset "trailing comma in an object" "{\"a\":1,}" 7)
  (test-offset "missing colon" "{\"a\" 1}" 5)
  (test-offset "leading zero" "[01]" 2)
  (test-offset "unfinished literal" "[tru]" 1)
  (test-offset "garbage after the text" "[1] x" 4)
  (test-offset "unescaped control character" "\"a\x01\"" 2)
  (test-offset "bad UTF-8" (bytes "[\"ab" #xff "\"]") 4)
  (test-offset "bad UTF-8 after an escape" (bytes "[\"\\n" #xff "\"]") 4)
  (test-offset "bad escape" "[\"ab\\x\"]" 5)
  (test-offset "bad hex digit" "[\"\\u12x4\"]" 6)
  (test-offset "lone surrogate" "[\"ab\\ud800\"]" 4)
  (test-offset "unclosed string" "[\"abc" 5)
  (test-offset "digit expected after the point" "[1.x]" 3)
  (test-offset "exponent digit expected" "[1e+]" 4)
  (test-offset "number too large" "[1,1e400]" 3)
  (test-offset "unclosed array" "[1, 2" 5)
  (test-offset "key expected" "{\"a\":1, 2}" 8)
  (test-equal "the condition says what was expected"
    "a value, not \"]\""
    (with-exception-handler json-error-expected
      (lambda () (decode-json (string->utf8 "[1,]")))
      #:unwind? #t))
  (test-equal "a leading zero is named as such"
    "\".\", an exponent or the end of the number (no leading zeros)"
    (with-exception-handler json-error-expected
      (lambda () (decode-json (string->utf8 "[01]")))
      #:unwind? #t))
  (test-equal "the message names the offset"
    "JSON: expected a value, not \"]\" at byte 3"
    (with-exception-handler exception-message
      (lambda () (decode-json (string->utf8 "[1,]")))
      #:unwind? #t))
  (test-equal "offsets count from the start of the bytevector, not START" '(json-error 5)
    (outcome (lambda () (decode-json (string->utf8 "xx[1,]") #:start 2)))))

(test-group "decode-json: START and END"
  (test-equal "a slice of a bytevector" #(1 2)
    (decode-json (string->utf8 "xx[1,2]yy") #:start 2 #:end 7))
  (test-eq "END cuts the text" 'json-error
    (car (outcome (lambda () (decode-json (string->utf8 "[1,2]") #:end 4))))))

(test-group "decode-json: depth and size limits"
  (define (nested n) (string-append (make-string n #\[) (make-string n #\])))
  (define (nested-objects n)
    (string-append (string-concatenate (make-list n "{\"a\":")) "1" (make-string n #\})))
  (test-accept "512 arrays deep" (nested 512))
  (test-offset "513 arrays deep: refused at the 513th" (nested 513) 512)
  (test-accept "512 objects deep" (nested-objects 512))
  (test-offset "513 objects deep" (nested-objects 513) (* 512 5))
  (test-equal "#:max-depth 2" '(json-error 2) (decode "[[[]]]" #:max-depth 2))
  (test-equal "#:max-depth 3" '(ok #(#(#()))) (decode "[[[]]]" #:max-depth 3))
  (test-equal "#:max-depth 0 refuses any array" '(json-error 0) (decode "[]" #:max-depth 0))
  (test-equal "#:max-depth 0 takes a scalar" '(ok 1) (decode "1" #:max-depth 0))
  (test-equal "a deep #:max-depth: 100000 arrays" '(ok 100000)
    (let lp ((v (decode-json (string->utf8 (nested 100000)) #:max-depth 200000)) (n 0))
      (if (and (vector? v) (= 1 (vector-length v))) (lp (vector-ref v 0) (+ n 1))
          (list 'ok (+ n 1)))))
  (test-equal "#:max-size: within" '(ok #(1 2)) (decode "[1,2]" #:max-size 5))
  (test-equal "#:max-size: past it, the offset of the first byte too many" '(json-error 4)
    (decode "[1,2]" #:max-size 4))
  (test-equal "read-json: #:max-size" '(json-error 10)
    (outcome (lambda () (read-json (open-bytevector-input-port (make-bytevector 20 32))
                                   #:max-size 10)))))

(test-group "decode-json: lone surrogates"
  (test-offset "a lone high surrogate" "\"\\ud800\"" 1)
  (test-offset "a lone low surrogate" "\"x\\udc00\"" 2)
  (test-offset "a high surrogate before a non-surrogate" "\"\\ud800\\u0041\"" 1)
  (test-offset "two high surrogates" "\"\\ud800\\ud800\"" 1)
  (test-offset "a surrogate in UTF-8 (ED A0 80)" (bytes "\"" #xed #xa0 #x80 "\"") 1)
  (test-decode "a pair" "\"\\ud83d\\ude00\"" "\U01f600")
  (test-equal "'replace: a lone high surrogate is U+FFFD" '(ok "a\ufffdb")
    (decode "\"a\\ud800b\"" #:lone-surrogates 'replace))
  (test-equal "'replace: a lone low surrogate is U+FFFD" '(ok "\ufffd")
    (decode "\"\\udfaa\"" #:lone-surrogates 'replace))
  (test-equal "'replace: a high surrogate then a letter escape" '(ok "\ufffdA")
    (decode "\"\\ud800\\u0041\"" #:lone-surrogates 'replace))
  (test-equal "'replace: a pair is still a pair" '(ok "\U01f600")
    (decode "\"\\ud83d\\ude00\"" #:lone-surrogates 'replace))
  (test-equal "'replace does not admit surrogates in UTF-8" '(json-error 1)
    (decode (bytes "\"" #xed #xa0 #x80 "\"") #:lone-surrogates 'replace)))

(test-group "decode-json: the guile-json mapping"
  (test-equal "object members in reverse order" '(ok (("b" . 2) ("a" . 1)))
    (decode "{\"a\":1,\"b\":2}" #:mapping 'guile-json))
  (test-equal "1.0 and 2E3 exact" '(ok #(1 2000 1.5 0.25))
    (decode "[1.0,2E3,1.5,25e-2]" #:mapping 'guile-json))
  (test-equal "-0.0 exact 0" '(ok #(0)) (decode "[-0.0]" #:mapping 'guile-json))
  (test-equal "the plucky mapping: 1.0 inexact" '(ok #(1.0 2000.0)) (decode "[1.0,2E3]")))

;;;
;;; Numbers
;;;

(define (reference-real text)
  ;; TEXT's value correctly rounded: exact, then to the nearest double
  ;; (a negative zero is -0.0, which no exact number says)
  (let ((x (exact->inexact (string->number (string-append "#e" text)))))
    (if (and (zero? x) (string-prefix? "-" text)) -0.0 x)))

(define (random-number-text state)
  ;; a JSON number with 1 to 25 significant digits, a fraction or not,
  ;; and an exponent from -40 to 40 or none
  (define (digits n)
    (list->string (map (lambda (_) (integer->char (+ 48 (random 10 state)))) (iota n))))
  (let* ((int (let ((d (digits (+ 1 (random 19 state)))))
                (if (and (> (string-length d) 1) (char=? (string-ref d 0) #\0))
                    (string-append "1" (substring d 1)) d)))
         (frac (if (zero? (random 3 state)) "" (string-append "." (digits (+ 1 (random 20 state))))))
         (exp (case (random 4 state)
                ((0) (string-append "e" (number->string (- (random 81 state) 40))))
                ((1) (string-append "E+" (number->string (random 40 state))))
                (else ""))))
    (string-append (if (zero? (random 2 state)) "-" "") int frac exp)))

(test-group "json-read-number: exact integers, correctly rounded reals"
  (test-decode "a fixnum" "4611686018427387903" 4611686018427387903)
  (test-decode "a bignum" "4611686018427387904" 4611686018427387904)
  (test-decode "a negative bignum" "-98765432109876543210" -98765432109876543210)
  (test-decode "2^53 + 1 stays exact" "9007199254740993" 9007199254740993)
  (test-decode "2^53 + 1 as a real rounds to even" "9007199254740993.0" 9007199254740992.0)
  (test-decode "1e23 (not exactly 10^23)" "1e23" 1e23)
  (test-decode "the smallest normal" "2.2250738585072014e-308" 2.2250738585072014e-308)
  (test-decode "a subnormal" "4.9406564584124654e-324" 5e-324)
  (test-decode "halfway, rounded down" "9007199254740993e0" 9007199254740992.0)
  (test-decode "halfway, rounded up" "9007199254740995e0" 9007199254740996.0)
  (test-decode "17 digits, as canada.json's" "-65.61361699999999" -65.61361699999999)
  (test-decode "just above halfway (long)"
               "9007199254740993.00000000000000000000000000000001" 9007199254740994.0)
  (test-decode "zero with an exponent" "0e-999999999999" 0.0)
  (test-decode "negative zero" "-0e5" -0.0)
  (let ((state (seed->random-state 17))
        (mismatches '()))
    (do ((k 0 (+ k 1))) ((= k 20000))
      (let* ((text (random-number-text state))
             (got (decode-json (string->utf8 text)))
             (want (if (string-every (lambda (c) (or (char-numeric? c) (char=? c #\-))) text)
                       (string->number text)
                       (reference-real text))))
        (unless (and (eqv? got want)
                     (or (not (exact? want)) (exact? got)))
          (set! mismatches (cons (list text got want) mismatches)))))
    (test-equal "20,000 random numbers: each as string->number reads it exactly, then rounded"
      '() (list-head mismatches (min 5 (length mismatches)))))
  (let ((state (seed->random-state 42))
        (mismatches 0))
    ;; 17 digits and a negative power of ten: the long-division path
    (do ((k 0 (+ k 1))) ((= k 20000))
      (let* ((m (+ 10000000000000000 (random 90000000000000000 state)))
             (e (+ 1 (random 22 state)))
             (text (string-append (number->string m) "e-" (number->string e))))
        (unless (eqv? (decode-json (string->utf8 text)) (reference-real text))
          (set! mismatches (+ mismatches 1)))))
    (test-equal "20,000 17-digit mantissas over 10^1..10^22: correctly rounded" 0 mismatches))
  (test-equal "json-read-integer refuses a fraction" '(json-error 0)
    (outcome (lambda () (json-read-integer (string->utf8 "1.5") 0 3 (make-json-context)))))
  (test-equal "json-read-real reads an integer as a real" 3.0
    (json-read-real (string->utf8 "3") 0 1 (make-json-context))))

;;;
;;; Encoding
;;;

(test-group "encode-json"
  (test-encode "an object" '(("a" . 1) (b . #t)) "{\"a\":1,\"b\":true}")
  (test-encode "an empty object" '() "{}")
  (test-encode "an array" #(1 "x" null #f) "[1,\"x\",null,false]")
  (test-encode "an empty array" #() "[]")
  (test-encode "escapes: quote, backslash, controls" "\"\\\n\r\t\x01\x1f\x7f"
               "\"\\\"\\\\\\n\\r\\t\\u0001\\u001f\x7f\"")
  (test-encode "backspace and form feed as \\u" "\b\f" "\"\\u0008\\u000c\"")
  (test-encode "non-ASCII as UTF-8" "é€𝄞\u2028" "\"é€𝄞\u2028\"")
  (test-encode "a slash is not escaped" "a/b" "\"a/b\"")
  (test-encode "integers" #(0 -1 123456789012345678 -999999999999999999 1000000000000000000 -12345678901234567890123)
               "[0,-1,123456789012345678,-999999999999999999,1000000000000000000,-12345678901234567890123]")
  (test-encode "reals, shortest" #(0.1 -2.5 1e23 5e-324 -0.0) "[0.1,-2.5,1.0e23,5.0e-324,-0.0]")
  (test-encode "an exact fraction as its double" 1/4 "0.25")
  (test-equal "every real reads back to itself" '()
    (let ((state (seed->random-state 5)))
      (filter-map (lambda (_)
                    (let ((x (* (- (random 2.0 state) 1.0) (expt 10.0 (- (random 600 state) 300)))))
                      (and (not (eqv? x (decode-json (encode-json x)))) x)))
                  (iota 5000))))
  (test-assert "an infinity is refused"
    (not (eq? 'ok (car (outcome (lambda () (encode-json +inf.0)))))))
  (test-assert "NaN is refused"
    (not (eq? 'ok (car (outcome (lambda () (encode-json +nan.0)))))))
  (test-assert "a procedure is refused"
    (not (eq? 'ok (car (outcome (lambda () (encode-json (list (cons "f" car)))))))))
  (test-assert "a number key is refused"
    (not (eq? 'ok (car (outcome (lambda () (encode-json '((1 . 2)))))))))
  (test-assert "an improper alist is refused"
    (not (eq? 'ok (car (outcome (lambda () (encode-json '(("a" . 1) . 5))))))))
  (test-equal "a string grows the sink past its first size"
    (+ 2 100000) (bytevector-length (encode-json (make-string 100000 #\a)))))

(test-group "write-json"
  (test-equal "to a binary port" "[1,{\"a\":\"b\"}]"
    (utf8->string (call-with-values open-bytevector-output-port
                    (lambda (port get) (write-json #(1 (("a" . "b"))) port) (get))))))

(test-group "decode-json and encode-json: round trips of the corpus"
  (define (round-trips? input)
    (let ((v (decode-json (->bytes input))))
      (equal? v (decode-json (encode-json v)))))
  (test-equal "every y_ case and the string cases decode, encode and decode equal" '()
    (remove round-trips?
            '("[\"\\u0000\\u001f\\\"\\\\ é€𝄞\"]" "{\"a\":{\"b\":[1,2.5,-0.0,1e300,null,true,false]}}"
              "[-123123123123123123123123123123, 5e-324, 1.7976931348623157e308]"
              "{\"\":{},\"x\":[[],[[]]]}"))))

;;;
;;; The three benchmark documents
;;;

(define-syntax-rule (with-documents name body ...)
  (if json-data
      (begin body ...)
      (begin (test-skip 1) (test-assert name #t))))

(test-group "decode-json: the benchmark documents round trip"
  (with-documents "documents absent"
    (for-each
     (lambda (entry)
       (let* ((bv (document (car entry)))
              (v (decode-json bv)))
         (test-equal (string-append (car entry) ": decode, encode, decode equal") #f
           (difference v (decode-json (encode-json v))))
         (let ((g (decode-json bv #:mapping 'guile-json)))
           (test-equal (string-append (car entry) ": the guile-json mapping: the same members") #f
             (difference (normalize v) (normalize g)))
           (test-equal (string-append (car entry) ": the guile-json mapping round-trips (members reversed twice)") #f
             (difference (normalize g) (normalize (decode-json (encode-json g) #:mapping 'guile-json)))))))
     documents)))

(test-group "define-json-type: the benchmark schemas agree with the generic codec"
  (with-documents "documents absent"
    (for-each
     (lambda (entry)
       (let* ((name (car entry)) (decoder (cadr entry)) (encoder (caddr entry))
              (bv (document name))
              (generic (decode-json bv))
              (record (decoder bv)))
         (test-equal (string-append name ": schema encode of schema decode = generic decode") #f
           (difference (normalize generic) (normalize (decode-json (encoder record)))))
         (test-assert (string-append name ": schema decode of the generic encoding, re-encoded")
           (equal? (encoder record) (encoder (decoder (encode-json generic)))))
         (test-assert (string-append name ": schema decode of a port")
           (equal? (encoder record) (encoder (decoder (open-bytevector-input-port bv)))))))
     documents)
    (let ((twitter (json->twitter (document "twitter")))
          (generic (decode-json (document "twitter"))))
      (test-equal "twitter: a field read through the record"
        (assoc-ref (assoc-ref (vector-ref (assoc-ref generic "statuses") 3) "user") "screen_name")
        (user-screen-name (status-user (vector-ref (twitter-statuses twitter) 3)))))))

;;;
;;; Ports, split at every byte
;;;

;; A document of a few kilobytes with every kind of value: the first
;; status of twitter.json when it is there, else a made-up one.
(define small-document
  (if json-data
      (let* ((twitter (decode-json (document "twitter"))))
        (encode-json `(("statuses" . ,(vector (vector-ref (assoc-ref twitter "statuses") 0)))
                       ("search_metadata" . ,(assoc-ref twitter "search_metadata")))))
      (string->utf8 "{\"a\":[1,-2.5e-3,\"x\\u00e9\\n\\ud83d\\ude00y\",true,false,null,{\"b\":{}}],\"c\":\"日本\"}")))

(test-group "read-json: input split at every byte"
  (define (split-everywhere bv read)
    ;; -> the splits at which READ of the split port differs from
    ;; `decode-json' of the whole
    (let ((whole (outcome (lambda () (decode-json bv)))))
      (filter (lambda (k)
                (not (equal? whole (outcome (lambda () (read (split-port bv (list k))))))))
              (iota (+ 1 (bytevector-length bv))))))
  (test-equal "a document of every kind of value, in two pieces" '()
    (split-everywhere small-document read-json))
  (test-equal "in one-byte pieces" (decode-json small-document)
    (read-json (split-port small-document (iota (- (bytevector-length small-document) 1) 1))))
  (test-equal "the corpus's rejected cases are rejected at the same offset in two pieces" '()
    (filter-map (lambda (case)
                  (let ((bv (->bytes (cadr case))))
                    (and (< (bytevector-length bv) 100)
                         (pair? (split-everywhere bv read-json))
                         (car case))))
                n-cases))
  (test-equal "define-json-type's decoder on a port split at every byte" '()
    (if json-data
        (let ((whole (twitter->json (json->twitter small-document))))
          (filter (lambda (k)
                    (not (equal? whole (twitter->json (json->twitter (split-port small-document (list k)))))))
                  (iota (+ 1 (bytevector-length small-document)))))
        '())))

;;;
;;; Fuzz
;;;

(define (mutate bv state)
  ;; BV with one to four random edits: a byte replaced, removed,
  ;; duplicated, or one of JSON's structural bytes inserted
  (let lp ((bytes (bytevector->u8-list bv)) (edits (+ 1 (random 4 state))))
    (if (or (zero? edits) (null? bytes))
        (u8-list->bytevector bytes)
        (let* ((n (length bytes))
               (k (random n state))
               (special #(34 92 123 125 91 93 44 58 48 45 46 101 117 0 #xff #xc3 #xed)))
          (lp (case (random 4 state)
                ((0) (append (list-head bytes k) (list (random 256 state)) (list-tail bytes (+ k 1))))
                ((1) (append (list-head bytes k) (list-tail bytes (+ k 1))))
                ((2) (append (list-head bytes (+ k 1)) (list-tail bytes k)))
                (else (append (list-head bytes k)
                              (list (vector-ref special (random (vector-length special) state)))
                              (list-tail bytes k))))
              (- edits 1))))))

(test-group "decode-json and define-json-type: a fuzz pass"
  ;; Each mutated input decodes (and then round-trips) or raises a
  ;; &json-error: never another exception, never a hang.  A fixed seed,
  ;; and a bound on time as well as on the count.
  (let* ((state (seed->random-state 2026))
         (seeds (cons small-document
                      (map (lambda (c) (->bytes (cadr c)))
                           (filter (lambda (c) (< (string-length (car c)) 200)) n-cases))))
         (seeds (list->vector (append seeds (map string->utf8
                                                 '("[\"a\\u00e9\\ud83d\\ude00\",1.5e-3,-0,{\"k\":[]}]"
                                                   "{\"a\":{\"b\":{\"c\":[1,2,3]}}}")))))
         (deadline (+ (get-internal-real-time) (* 8 internal-time-units-per-second)))
         (slowest 0) (runs 0) (other '()) (not-round-trip '()))
    (let lp ()
      (when (and (< runs 20000) (< (get-internal-real-time) deadline))
        (let* ((input (mutate (vector-ref seeds (random (vector-length seeds) state)) state))
               (start (get-internal-real-time))
               (result (outcome (lambda () (decode-json input))))
               (schema (outcome (lambda () (json->twitter input)))))
          (set! slowest (max slowest (- (get-internal-real-time) start)))
          (set! runs (+ runs 1))
          (when (eq? (car result) 'other) (set! other (cons (list input (cadr result)) other)))
          (when (eq? (car schema) 'other) (set! other (cons (list input (cadr schema)) other)))
          (when (and (eq? (car result) 'ok)
                     (not (equal? (cadr result) (decode-json (encode-json (cadr result))))))
            (set! not-round-trip (cons input not-round-trip)))
          (lp))))
    (test-assert "some thousands of inputs ran" (> runs 1000))
    (test-equal "only &json-error, never another exception" '()
      (map (lambda (x) (list (bytevector->u8-list (car x)) (cadr x)))
           (list-head other (min 3 (length other)))))
    (test-equal "whatever decodes round-trips" '() (list-head not-round-trip (min 3 (length not-round-trip))))
    (test-assert "no input took more than a second" (< slowest internal-time-units-per-second))))

;;;
;;; define-json-type
;;;

;; The example of docs/json.md.
(define-json-type user (<user> make-user user?)
  #:decoder json->user #:encoder user->json #:unknown skip
  (id    user-id    "id"          integer)
  (name  user-name  "screen_name" string)
  (url   user-url   "url"         (nullable string) 'null)
  (tags  user-tags  "tags"        (vector-of string) json-absent))

(define-json-type point (<point> make-point point?)
  #:decoder json->point #:encoder point->json #:unknown reject
  (x point-x "x" real)
  (y point-y "y" real)
  (label point-label "label" string "")
  (next point-next "next" (nullable point) 'null)
  (path point-path "path" (list-of point) '())
  (extra point-extra "extra" (alist-of any) '()))

(define (user-fields u) (list (user-id u) (user-name u) (user-url u) (user-tags u)))

(define-syntax-rule (test-user name input fields)
  (test-equal name (list 'ok fields)
    (outcome (lambda () (user-fields (json->user (->bytes input)))))))
(define-syntax-rule (test-user-reject name input offset)
  (test-equal name (list 'json-error offset) (outcome (lambda () (json->user (->bytes input))))))

(test-group "define-json-type: the decoder"
  (test-user "in declared order"
             "{\"id\":7,\"screen_name\":\"ann\",\"url\":\"http://a\",\"tags\":[\"x\",\"y\"]}"
             '(7 "ann" "http://a" #("x" "y")))
  (test-user "in another order"
             "{\"tags\":[],\"url\":null,\"screen_name\":\"ann\",\"id\":7}"
             '(7 "ann" null #()))
  (test-user "optional fields absent take their default" "{\"id\":7,\"screen_name\":\"ann\"}"
             (list 7 "ann" 'null json-absent))
  (test-user "an optional field skipped in declared order" "{\"id\":7,\"screen_name\":\"ann\",\"tags\":[]}"
             '(7 "ann" null #()))
  (test-user "whitespace everywhere" " { \"id\" : 7 , \"screen_name\" : \"ann\" } "
             (list 7 "ann" 'null json-absent))
  (test-user "unknown fields skipped (#:unknown skip)"
             "{\"id\":7,\"x\":{\"deep\":[1,{\"y\":null}]},\"screen_name\":\"ann\",\"z\":1}"
             (list 7 "ann" 'null json-absent))
  (test-user "a key with an escape" "{\"id\":7,\"screen\\u005fname\":\"ann\"}"
             (list 7 "ann" 'null json-absent))
  (test-user "a repeated field keeps its last value" "{\"id\":7,\"screen_name\":\"a\",\"id\":8}"
             (list 8 "a" 'null json-absent))
  (test-user-reject "a missing field, at the \"}\"" "{\"id\":7}" 7)
  (test-equal "a missing field names itself" "the field \"screen_name\" before \"}\""
    (with-exception-handler json-error-expected
      (lambda () (json->user (string->utf8 "{\"id\":7}"))) #:unwind? #t))
  (test-user-reject "a field of the wrong type" "{\"id\":\"7\",\"screen_name\":\"a\"}" 6)
  (test-user-reject "an integer field given a real" "{\"id\":7.5,\"screen_name\":\"a\"}" 6)
  (test-user-reject "a trailing comma" "{\"id\":7,\"screen_name\":\"a\",}" 26)
  (test-user-reject "garbage after the object" "{\"id\":7,\"screen_name\":\"a\"} x" 27)
  (test-user-reject "not an object" "[1]" 0)
  (test-user-reject "a skipped value is checked" "{\"id\":7,\"x\":[1,],\"screen_name\":\"a\"}" 15)
  (test-equal "#:unknown reject" '(json-error 7)
    (outcome (lambda () (json->point (string->utf8 "{\"x\":1,\"z\":2,\"y\":2}")))))
  (test-equal "a nested type, list-of, alist-of, defaults"
    '(1.0 2.0 "" (3.0 4.0 "n") ((5.0 6.0)) (("k" . #(1 "v"))))
    (let ((p (json->point (string->utf8 "{\"x\":1,\"y\":2,\"next\":{\"x\":3,\"y\":4,\"label\":\"n\"},\"path\":[{\"y\":6,\"x\":5}],\"extra\":{\"k\":[1,\"v\"]}}"))))
      (list (point-x p) (point-y p) (point-label p)
            (let ((n (point-next p))) (list (point-x n) (point-y n) (point-label n)))
            (map (lambda (q) (list (point-x q) (point-y q))) (point-path p))
            (point-extra p))))
  (test-equal "the depth limit" '(json-error 8)
    (outcome (lambda () (json->point (string->utf8 "{\"next\":{\"next\":{\"x\":1,\"y\":1},\"x\":1,\"y\":1},\"x\":1,\"y\":1}")
                                     #:max-depth 1))))
  (test-equal "lone surrogates: an error, or U+FFFD as asked"
    '((json-error 23) (ok "\ufffd"))
    (map (lambda (how)
           (outcome (lambda () (user-name (json->user (string->utf8 "{\"id\":1,\"screen_name\":\"\\ud800\"}")
                                                    #:lone-surrogates how)))))
         '(error replace))))

;; The scans that read eight bytes at a time (whitespace, strings, a
;; type's keys) and the one-pass integers: the odd byte at each place.
(test-group "decode-json and define-json-type: word-wise scans, each position"
  (define (a-string k special) (string-append (make-string k #\a) special (make-string (- 19 k) #\a)))
  (test-equal "a quote, a backslash, a non-ASCII character at each place of a string" '()
    (filter-map
     (lambda (k)
       (let* ((cases `(("\\\"" . ,(a-string k "\"")) ("\\\\" . ,(a-string k "\\")) ("é" . ,(a-string k "é"))))
              (bad (filter (lambda (c) (not (equal? (decode (string-append "\"" (a-string k (car c)) "\""))
                                                    (list 'ok (cdr c)))))
                           cases)))
         (and (pair? bad) (list k (map car bad)))))
     (iota 20)))
  (test-equal "a control character at each place of a string: an error there"
    (map (lambda (k) (list 'json-error (+ k 1))) (iota 20))
    (map (lambda (k) (decode (string-append "\"" (a-string k "\x01") "\""))) (iota 20)))
  (test-equal "runs of 0 to 20 spaces, and a tab at each place of one" '()
    (filter-map
     (lambda (n)
       (let ((spaces (make-string n #\space)))
         (and (not (and (equal? (decode (string-append "[" spaces "1" spaces "," spaces "2]")) '(ok #(1 2)))
                        (or (= n 0)
                            (every (lambda (k) (equal? (decode (string-append "[" (string-replace spaces "\t" k (+ k 1)) "1]"))
                                                       '(ok #(1))))
                                   (iota n)))))
              n)))
     (iota 21)))
  (test-equal "a key unlike the declared one in one byte is another field" '()
    (filter-map
     (lambda (k)
       (let ((other (string-replace "screen_name" "X" k (+ k 1))))
         (and (not (equal? (outcome (lambda () (user-fields (json->user (string->utf8 (string-append "{\"id\":7,\"" other "\":\"a\",\"screen_name\":\"b\"}"))))))
                           (list 'ok (list 7 "b" 'null json-absent))))
              k)))
     (iota 11)))
  (test-equal "integers about the one-pass limit (17 to 20 digits), either sign" '()
    (filter-map
     (lambda (text)
       (and (not (equal? (decode text) (list 'ok (string->number text)))) text))
     (append-map (lambda (n)
                   (let ((digits (string-append "9" (list->string (map (lambda (i) (integer->char (+ 48 (modulo (* i 7) 10)))) (iota (- n 1)))))))
                     (list digits (string-append "-" digits))))
                 '(17 18 19 20)))))

(test-group "decode-json and define-json-type: strings of each length share no bytes"
  ;; Short strings' bytes pass through one bytevector per length in the
  ;; context: two strings of one length in one document, plain, with an
  ;; escape, and in UTF-8, must each keep their own characters.
  (define (texts n)
    (list (make-string n #\a) (make-string n #\b)
          (if (> n 0) (string-append (make-string (- n 1) #\c) "\n") "")
          (if (> n 1) (string-append (make-string (- n 2) #\d) "é") "")))
  (test-equal "lengths 0 to 70, each four ways, in one array" '()
    (filter-map
     (lambda (n)
       (let ((v (texts n)))
         (and (not (equal? (decode (encode-json (list->vector v))) (list 'ok (list->vector v))))
              n)))
     (iota 71)))
  (test-equal "through a define-json-type decoder"
    '(ok ("xyz" "abc" #("abc" "d\"f" "xyz")))
    (outcome (lambda ()
               (let ((u (json->user (string->utf8 "{\"id\":1,\"screen_name\":\"xyz\",\"url\":\"abc\",\"tags\":[\"abc\",\"d\\\"f\",\"xyz\"]}"))))
                 (list (user-name u) (user-url u) (user-tags u)))))))

(test-group "define-json-type: the encoder"
  (test-equal "fields in declared order; json-absent left out"
    "{\"id\":7,\"screen_name\":\"ann\",\"url\":null}"
    (utf8->string (user->json (make-user 7 "ann" 'null json-absent))))
  (test-equal "every field" "{\"id\":7,\"screen_name\":\"a\\\"\",\"url\":\"u\",\"tags\":[\"t\"]}"
    (utf8->string (user->json (make-user 7 "a\"" "u" #("t")))))
  (test-equal "only an absent field: {}" "{\"x\":1,\"y\":2.5,\"label\":\"\",\"next\":null,\"path\":[],\"extra\":{}}"
    (utf8->string (point->json (make-point 1 2.5 "" 'null '() '()))))
  (test-equal "to a port" "{\"id\":1,\"screen_name\":\"b\",\"url\":null}"
    (utf8->string (call-with-values open-bytevector-output-port
                    (lambda (port get) (user->json (make-user 1 "b" 'null json-absent) port) (get)))))
  (test-assert "a field of the wrong type is refused"
    (not (eq? 'ok (car (outcome (lambda () (user->json (make-user "7" "a" 'null json-absent))))))))
  (test-assert "a record of another type is refused"
    (not (eq? 'ok (car (outcome (lambda () (user->json (make-point 1 2 "" 'null '() '())))))))))

;;;
;;; For handlers
;;;

(define (json-request type)
  (build-request (string->uri "http://127.0.0.1/api")
                 #:method 'PUT #:port (open-bytevector-input-port #vu8())
                 #:headers (if type `((content-type . ,type)) '())))

(define (http-outcome thunk)
  (with-exception-handler
      (lambda (e)
        (if (http-error? e)
            (list (http-error-status e) (http-error-offset e))
            (list 'other e)))
    (lambda () (list 'ok (thunk)))
    #:unwind? #t))

(define-syntax-rule (test-body name type body expected)
  (test-equal name expected (http-outcome (lambda () (read-json-body (json-request type) body)))))

(test-group "read-json-body"
  (test-body "a bytevector" '(application/json) (string->utf8 "{\"a\":1}") '(ok (("a" . 1))))
  (test-body "a port" '(application/json) (open-bytevector-input-port (string->utf8 "[1]")) '(ok #(1)))
  (test-body "charset utf-8" '(application/json (charset . "UTF-8")) (string->utf8 "1") '(ok 1))
  (test-body "a +json type" '(application/problem+json) (string->utf8 "1") '(ok 1))
  (test-body "415: text/plain" '(text/plain) (string->utf8 "1") '(415 #f))
  (test-body "415: no Content-Type" #f (string->utf8 "1") '(415 #f))
  (test-body "415: another charset" '(application/json (charset . "latin1")) (string->utf8 "1") '(415 #f))
  (test-body "400: empty" '(application/json) #f '(400 0))
  (test-body "400: malformed, with the offset" '(application/json) (string->utf8 "{\"a\":}") '(400 5))
  (test-equal "413: past #:max-size, from a port" '(413 #f)
    (http-outcome (lambda () (read-json-body (json-request '(application/json))
                                             (open-bytevector-input-port (make-bytevector 100 32))
                                             #:max-size 50))))
  (test-equal "a define-json-type decoder" '(ok (7 "ann" null #()))
    (http-outcome (lambda () (user-fields (read-json-body (json-request '(application/json))
                                                          (string->utf8 "{\"id\":7,\"screen_name\":\"ann\",\"tags\":[]}")
                                                          #:decoder json->user))))))

(test-group "json-response"
  (call-with-values (lambda () (json-response '(("ok" . #t))))
    (lambda (response body)
      (test-equal "the body" "{\"ok\":true}" (utf8->string body))
      (test-equal "the headers" '((content-type . (application/json))) response)))
  (call-with-values (lambda () (json-response #(1) #:status 201 #:headers '((x-a . "b"))))
    (lambda (response body)
      (test-equal "a status" 201 (response-code response))
      (test-equal "its Content-Type" '(application/json) (response-content-type response))
      (test-equal "extra headers" "b" (assq-ref (response-headers response) 'x-a))))
  (call-with-values (lambda () (json-response (make-user 1 "b" 'null json-absent) #:encoder user->json))
    (lambda (response body)
      (test-equal "a record's encoder" "{\"id\":1,\"screen_name\":\"b\",\"url\":null}" (utf8->string body)))))

(test-group "json-handler"
  (define handler
    (json-handler (lambda (request body)
                    (json-response (read-json-body request body)))))
  (call-with-values (lambda () (handler (json-request '(application/json)) (string->utf8 "[1,]")))
    (lambda (response body)
      (test-equal "a 400" 400 (response-code response))
      (test-equal "the error as JSON, with the offset"
        '(("error" . "malformed JSON: expected a value, not \"]\" at byte 3") ("offset" . 3))
        (decode-json body))))
  (call-with-values (lambda () (handler (json-request '(text/plain)) (string->utf8 "1")))
    (lambda (response body)
      (test-equal "a 415" 415 (response-code response))
      (test-equal "no offset" '("error") (map car (decode-json body)))))
  (call-with-values (lambda () (handler (json-request '(application/json)) (string->utf8 "[2]")))
    (lambda (response body)
      (test-equal "a good request passes" "[2]" (utf8->string body))))
  (test-assert "other exceptions go on to the server"
    (eq? 'other (car (http-outcome (lambda () ((json-handler (lambda (r b) (car '()))) #f #f)))))))

(test-group "encode-json's buffer, kept between calls"
  (test-assert "a call that raised midway" (not (false-if-exception (encode-json (vector 1 2 (current-output-port))))))
  (test-equal "leaves nothing behind for the next" "[1,2]" (utf8->string (encode-json #(1 2))))
  (test-equal "a value past 1 MiB" (+ 2 (* 2 1024 1024))
    (bytevector-length (encode-json (make-string (* 2 1024 1024) #\a))))
  (test-equal "then a small one" "{\"a\":1}" (utf8->string (encode-json '(("a" . 1)))))
  (let* ((value (lambda (k) (list->vector (map (lambda (i) `(("k" . ,k) ("i" . ,i))) (iota 50)))))
         (threads (map (lambda (k)
                         ((@ (ice-9 threads) call-with-new-thread)
                          (lambda ()
                            (let lp ((n 0))
                              (cond ((= n 2000) #t)
                                    ((equal? (utf8->string (encode-json (value k)))
                                             (utf8->string (encode-json (value k))))
                                     (if (string=? (utf8->string (encode-json (value k)))
                                                   (string-append "[" (string-join (map (lambda (i) (format #f "{\"k\":~a,\"i\":~a}" k i)) (iota 50)) ",") "]"))
                                         (lp (+ n 1))
                                         #f))
                                    (else #f))))))
                       '(1 2 3))))
    (test-assert "three threads at once, each its own text"
      (every (lambda (t) ((@ (ice-9 threads) join-thread) t)) threads))))

(test-end "web/json")
