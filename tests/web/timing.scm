;;; tests/web/timing.scm --- (plucky web timing)

(use-modules (srfi srfi-1)
             (srfi srfi-64)
             (srfi srfi-11)
             (ice-9 regex)
             (web request)
             (web uri)
             (tests lib harness)
             ((plucky server hooks) #:select (take-handler-phases! want-handler-phases!))
             (plucky web timing))

(define (request) (build-request (string->uri-reference "/") #:headers '((host . ("h" . #f)))))

;; busy for about SECONDS, without sleeping (the clock is what is tested)
(define (spin seconds)
  (let ((end (+ (get-internal-real-time) (* seconds internal-time-units-per-second))))
    (let lp () (when (< (get-internal-real-time) end) (lp)))))

(define (phased request body)
  (with-phase 'db (lambda () (spin 0.002)))
  (spin 0.001)
  (mark-phase! 'render)
  (with-phase 'db (lambda () (spin 0.002)))
  (values '((content-type . (text/plain))) (with-phase 'value (lambda () "ok"))))

(define header-rx
  (make-regexp "^db;dur=([0-9.]+), render;dur=([0-9.]+), value;dur=[0-9.]+, total;dur=([0-9.]+)$"))

(test-begin "web/timing")

(test-group "with-server-timing"
  (call-guarded
   (lambda ()
     (let*-values (((seen) #f)
                   ((response body)
                    (((with-server-timing #:on-timing (lambda (r t) (set! seen t))) phased)
                     (request) #f)))
       (let* ((header (assq-ref response 'server-timing))
              (m (and header (regexp-exec header-rx header))))
         (test-equal "the body" "ok" body)
         (test-assert (string-append "the header: " (or header "none")) m)
         (when m
           (let ((db (string->number (match:substring m 1)))
                 (render (string->number (match:substring m 2)))
                 (total (string->number (match:substring m 3))))
             (test-assert "db adds its two phases" (>= db 4.0))
             (test-assert "render: since the last mark" (>= render 1.0))
             (test-assert "the total holds them" (>= total (+ db render))))))
       (test-assert "on-timing is given the record" (timing? seen))
       (test-equal "phases in order" '(db render value) (map car (timing-phases seen))))
     (let-values (((response body) (((with-server-timing #:header? #f) phased) (request) #f)))
       (test-equal "no header when asked" #f (assq 'server-timing response))))))

(test-group "with-phase"
  (call-guarded
   (lambda ()
     (test-equal "without a timing: the thunk's values" '(1 2)
       (call-with-values (lambda () (with-phase 'x (lambda () (values 1 2)))) list))
     (test-equal "no current timing outside" #f (current-timing)))))

(test-group "with-phase inside with-phase"
  (call-guarded
   (lambda ()
     (let ((seen #f))
       (((with-server-timing #:header? #f #:on-timing (lambda (r t) (set! seen t)))
         (lambda (request body)
           (with-phase 'render
                       (lambda ()
                         (spin 0.001)
                         (with-phase 'db (lambda () (spin 0.004)))
                         (values '((content-type . (text/plain))) "ok")))))
        (request) #f)
       (let ((db (assq-ref (timing-phases seen) 'db))
             (render (assq-ref (timing-phases seen) 'render)))
         (test-assert "the inner phase counts for itself" (>= db 0.004))
         (test-assert "not for the outer one" (< render 0.004))
         (test-assert "together within the total"
           (<= (+ db render) (timing-total seen))))))))

(test-group "mark-phase!"
  (call-guarded
   (lambda ()
     (test-assert "without a timing: nothing" (begin (mark-phase! 'x) #t)))))

(test-group "with-server-timing tells the server's observer"
  (call-guarded
   (lambda ()
     (want-handler-phases! #t)            ; as an observer does
     (take-handler-phases!)
     (((with-server-timing #:header? #f) phased) (request) #f)
     (let ((phases (take-handler-phases!)))
       (test-equal "the phases, in order" '(db render value) (map car (or phases '())))
       (test-assert "in exact nanoseconds, db adds its two"
         (and phases (every exact-integer? (map cdr phases))
              (>= (assq-ref phases 'db) 4000000)))
       (test-equal "taken once" #f (take-handler-phases!)))
     (((with-server-timing #:header? #f)
       (lambda (request body) (values '((content-type . (text/plain))) "none")))
      (request) #f)
     (test-equal "a handler that timed nothing: no phases" #f (take-handler-phases!))
     (want-handler-phases! #f))))

(test-group "with-server-timing with nobody to read the phases"
  (call-guarded
   (lambda ()
     (want-handler-phases! #f)
     (take-handler-phases!)
     (let ((seen 'unset))
       (((with-server-timing #:header? #f)
         (lambda (request body)
           (set! seen (current-timing))
           (phased request body)))
        (request) #f)
       (test-equal "no timing started" #f seen)
       (test-equal "no phases noted" #f (take-handler-phases!)))
     (let ((seen #f))
       (((with-server-timing #:header? #f #:on-timing (lambda (request timing) #t))
         (lambda (request body)
           (set! seen (current-timing))
           (phased request body)))
        (request) #f)
       (test-assert "#:on-timing: timed all the same" (timing? seen))))))

(test-group "timing->header"
  (call-guarded
   (lambda ()
     (let ((timing (make-timing)))
       (test-assert "just a total" (string-prefix? "total;dur=" (timing->header timing)))))))

(test-end "web/timing")
