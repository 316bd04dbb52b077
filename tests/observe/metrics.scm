;;; tests/observe/metrics.scm --- (plucky observe metrics): status.json's writer

(use-modules (srfi srfi-64)
             (tests lib harness)
             (plucky observe metrics))

(test-runner-current (plucky-test-runner))
(test-begin "observe/metrics")

(define-syntax-rule (test-json name value text)
  (test-equal name text (json->string value)))

(test-group "json->string"
  ;; status->json-value's mapping, written by (plucky web json write)
  (test-json "an object of symbols" '((pid . 12) (note . "a \"b\"")) "{\"pid\":12,\"note\":\"a \\\"b\\\"\"}")
  (test-json "an empty alist is {}" '() "{}")
  (test-json "#f and #nil are null" '((a . #f) (b . #nil)) "{\"a\":null,\"b\":null}")
  (test-json "#t is true" '((ok . #t)) "{\"ok\":true}")
  (test-json "reals, shortest; not finite as null" (vector 0.5 1e23 (/ 1.0 0.0) (/ 0.0 0.0) 1/4)
             "[0.5,1.0e23,null,null,0.25]")
  (test-json "symbols as strings" #(running 4xx) "[\"running\",\"4xx\"]")
  (test-json "nested" '((series . ((requests . #(1 2)) (p50_ns . #(#f 3)))))
             "{\"series\":{\"requests\":[1,2],\"p50_ns\":[null,3]}}")
  (test-json "non-ASCII as UTF-8, controls escaped" "é\n\x01" "\"é\\n\\u0001\"")
  (test-assert "anything else as its written form"
    (string-prefix? "[\"#<procedure" (json->string (vector car))))
  (test-equal "write-json writes the same to a port" "{\"a\":[1,null]}"
    (call-with-output-string (lambda (port) (write-json '((a . #(1 #f))) port)))))

(test-end "observe/metrics")
