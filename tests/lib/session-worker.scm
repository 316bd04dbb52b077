;;; tests/lib/session-worker.scm --- a process of its own using (plucky web session)
;;;
;;; tests/web/session.scm runs this as separate Guile processes on one
;;; SQLite file, as plucky's workers would use it:
;;;
;;;   guile tests/lib/session-worker.scm DB create KEY VALUE  -> prints the cookie's id
;;;   guile tests/lib/session-worker.scm DB read ID KEY       -> prints the value, written
;;;   guile tests/lib/session-worker.scm DB hammer N TAG      -> N sessions made, read back
;;;                                                              and changed; prints "ok N"

(use-modules (srfi srfi-11)
             (sqlite3)
             (web request)
             (web response)
             (web uri)
             (plucky web cookies)
             (plucky web session))

(define (request-with-cookie id)
  (build-request (string->uri "http://localhost/")
                 #:headers (if id `((cookie . ,(string-append "session=" id))) '())))

(define (cookie-id response)
  ;; -> the id in RESPONSE's Set-Cookie, or #f
  (let ((header (assq-ref (response-headers response) 'set-cookie)))
    (and header
         (let ((pair (car (string-split header #\;))))
           (substring pair (+ 1 (string-index pair #\=)))))))

(define (call app id)
  (call-with-values (lambda () (app (request-with-cookie id) #f))
    (lambda (response body) (values response body))))

(define (handler-of proc)
  (lambda (request body)
    (values (build-response #:headers '((content-type text/plain))) (proc))))

(define-values (db-path mode args)
  (let ((argv (cdr (command-line))))
    (values (car argv) (cadr argv) (cddr argv))))

(define db (sqlite-open db-path))

(define (app-of proc) (with-sessions (handler-of proc) #:db db))

(cond
 ((string=? mode "create")
  (let-values (((response body)
                (call (app-of (lambda () (session-set! (car args) (cadr args)) "")) #f)))
    (display (cookie-id response))))
 ((string=? mode "read")
  (let-values (((response body)
                (call (app-of (lambda () (object->string (session-ref (cadr args))))) (car args))))
    (display body)))
 ((string=? mode "hammer")
  (let* ((n (string->number (car args)))
         (tag (cadr args))
         (create (app-of (lambda () (session-set! "tag" tag) (session-set! "n" 0) "")))
         (bump (app-of (lambda ()
                         (let ((seen (session-ref "n")))
                           (session-set! "n" (+ 1 seen))
                           (string-append (session-ref "tag") ":" (number->string seen)))))))
    (let loop ((i 0) (ok 0))
      (if (= i n)
          (format #t "ok ~a" ok)
          (let-values (((response body) (call create #f)))
            (let*-values (((id) (cookie-id response))
                          ((r1 b1) (call bump id))
                          ((r2 b2) (call bump id)))
              (loop (+ i 1)
                    (if (and (equal? b1 (string-append tag ":0"))
                             (equal? b2 (string-append tag ":1")))
                        (+ ok 1)
                        ok)))))))))

(sqlite-close db)
