;;; tests/web/security.scm --- (plucky web security)

;;; The apps are called through (plucky web test)'s client, which reads
;;; the response back from the bytes the server would send: the headers
;;; are checked as a browser gets them.

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-11)
             (web request)
             (web response)
             (web uri)
             (tests lib harness)
             (plucky web middleware)
             (plucky web test)
             (plucky web security))

(define (page request body) (values '((content-type . (text/html))) "<p>hi</p>"))
(define (missing request body)
  (values (build-response #:code 404 #:headers '((content-type . (text/plain)))) "nope"))
(define own-policy "default-src 'self'; script-src 'sha256-abc'")
(define (own request body)
  (values `((content-type . (text/html))
            (content-security-policy . ,own-policy)
            (x-frame-options . "SAMEORIGIN"))
          "<p>mine</p>"))
(define (switching request body)
  (values (build-response #:code 101 #:headers '((upgrade . ("websocket")))) 'takeover))

;; -> (code headers body), as sent
(define (call handler)
  (let-values (((response body) (test-request (make-test-client handler) 'GET "/")))
    (list (response-code response)
          (remove (lambda (header) (memq (car header) '(content-length date)))
                  (response-headers response))
          body)))

(define names '(x-content-type-options x-frame-options content-security-policy referrer-policy))

(test-begin "web/security")

(test-group "with-security-headers"
  (let ((result (call (wrap page (with-security-headers)))))
    (test-equal "a page: still 200" 200 (car result))
    (test-equal "nosniff" "nosniff" (assq-ref (cadr result) 'x-content-type-options))
    (test-equal "no frames" "DENY" (assq-ref (cadr result) 'x-frame-options))
    (test-equal "the default policy" default-content-security-policy
      (assq-ref (cadr result) 'content-security-policy))
    (test-assert "the policy forbids frames"
      (string-contains default-content-security-policy "frame-ancestors 'none'"))
    (test-assert "and inline scripts (no 'unsafe-inline' for scripts)"
      (not (string-contains default-content-security-policy "script-src")))
    (test-equal "a referrer policy" "strict-origin-when-cross-origin"
      (assq-ref (cadr result) 'referrer-policy))
    (test-equal "the body as it was" "<p>hi</p>" (caddr result))
    (test-equal "the handler's own header first"
      'content-type (car (car (cadr result)))))
  (let ((result (call (wrap missing (with-security-headers)))))
    (test-equal "a response record: its code" 404 (car result))
    (test-assert "and the headers"
      (every (lambda (name) (assq name (cadr result))) names)))
  (let ((result (call (wrap own (with-security-headers)))))
    (test-equal "a handler's own policy is kept" own-policy
      (assq-ref (cadr result) 'content-security-policy))
    (test-equal "and its own X-Frame-Options" "SAMEORIGIN"
      (assq-ref (cadr result) 'x-frame-options))
    (test-equal "each once" 1
      (length (filter (lambda (h) (eq? (car h) 'content-security-policy)) (cadr result))))
    (test-equal "the others added" "nosniff" (assq-ref (cadr result) 'x-content-type-options)))
  (let ((result (call (wrap page (with-security-headers
                                  #:frame-options #f
                                  #:content-security-policy "default-src 'none'")))))
    (test-assert "#f drops a header" (not (assq 'x-frame-options (cadr result))))
    (test-equal "a string replaces the default" "default-src 'none'"
      (assq-ref (cadr result) 'content-security-policy))
    (test-equal "the rest as by default" "nosniff"
      (assq-ref (cadr result) 'x-content-type-options)))
  (let ((result (call (wrap page (with-security-headers #:content-type-options #f
                                                         #:frame-options #f
                                                         #:content-security-policy #f
                                                         #:referrer-policy #f)))))
    (test-equal "all dropped: none of them sent" '()
      (filter (lambda (header) (memq (car header) names)) (cadr result))))
  (let-values (((response body)
                ((wrap switching (with-security-headers))
                 (build-request (string->uri "http://localhost/")) #f)))
    (test-equal "a 101: untouched" '((upgrade . ("websocket"))) (response-headers response))
    (test-equal "its takeover kept" 'takeover body)))

(test-end "web/security")
