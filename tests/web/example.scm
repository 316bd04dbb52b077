;;; tests/web/example.scm --- apps/toolkit-example.scm, in-process and served

(use-modules (srfi srfi-64)
             (srfi srfi-11)
             (ice-9 popen)
             (ice-9 rdelim)
             (ice-9 textual-ports)
             (web response)
             (tests lib harness)
             (tests lib command)
             (plucky web test))

(define app-file (canonicalize-path (string-append source-root "/apps/toolkit-example.scm")))

(define app
  (save-module-excursion
   (lambda ()
     (set-current-module (make-fresh-user-module))
     (load app-file))))

(define client (make-test-client app))

;; -> (code body) of GET TARGET through the test client
(define (get target)
  (let-values (((response body) (test-request client 'GET target)))
    (list (response-code response) body)))

(define-syntax-rule (test-page target code text)
  (let ((got (get target)))
    (test-equal (string-append target ": status") code (car got))
    (test-assert (string-append target ": holds " text) (string-contains (cadr got) text))))

;; -> the output of PROGRAM ARGS… and its exit status
(define (command-output program . args)
  (let* ((port (apply open-pipe* OPEN_READ program args))
         (text (get-string-all port))
         (status (close-pipe port)))
    (values text (status:exit-val status))))

(test-begin "web/example")

(test-group "the example through the test client"
  (call-guarded
   (lambda ()
     (test-page "/" 200 "<a href=\"/user/Ann%20%3CO%27Hara%3E\">")
     (test-page "/item/42?page=3" 200 "<p>Page 3</p>")
     (test-page "/item/x" 404 "<h1>Error 404</h1>")
     (test-page "/user/%3Cscript%3E" 200 "<h1>User &lt;script&gt;</h1>")
     (test-page "/files/a/b%20c" 200 "file: a/b c")
     (test-page "/api/items/7" 200 "{\"id\": 7}")
     (let-values (((response body) (test-request client 'GET "/item/1")))
       (test-assert "Server-Timing with the app's phases"
         (string-prefix? "db;dur=" (assq-ref (response-headers response) 'server-timing)))
       (test-equal "the default header" "nosniff"
         (assq-ref (response-headers response) 'x-content-type-options)))
     (let-values (((response body) (test-request client 'POST "/echo"
                                                 #:form '(("q" . "<b>\"x\"</b>")))))
       (test-assert "a form, escaped" (string-contains body "<dd>&lt;b&gt;&quot;x&quot;&lt;/b&gt;</dd>")))
     (let-values (((response body) (test-request client 'DELETE "/echo")))
       (test-equal "405" 405 (response-code response))
       (test-equal "Allow" '(POST) (response-allow response))))))

(test-group "bin/plucky routes"
  (call-guarded
   (lambda ()
     (let-values (((text status) (command-output plucky-program "routes" app-file)))
       (test-equal "exit status" 0 status)
       (test-equal "the routes"
         '("GET   /                   front"
           "GET   /item/:id:int       item"
           "GET   /user/:name         user"
           "GET   /files/*path        file"
           "POST  /echo               echo"
           "GET   /api/items/:id:int  api-item")
         (string-split (string-trim-right text) #\newline)))
     (let-values (((text status) (command-output plucky-program "routes"
                                                 (string-append source-root "/apps/hello.scm"))))
       (test-equal "an app without a router: exit 2" 2 status)))))

(test-group "the example under plucky serve, with curl"
  (call-guarded
   (lambda ()
     (call-with-plucky
      app-file (append '("--port" "0" "--workers" "1") allow-root)
      (lambda (plucky)
        (define (curl path . args)
          (let-values (((text status)
                        (apply command-output "curl" "-s" "-S" "-i" "--max-time" "10"
                               (append args
                                       (list (format #f "http://127.0.0.1:~a~a"
                                                     (plucky-port plucky) path))))))
            text))
        (let ((item (curl "/item/42")))
          (test-assert "200" (string-prefix? "HTTP/1.1 200" item))
          (test-assert "Server-Timing" (string-contains item "Server-Timing: db;dur="))
          (test-assert "the page" (string-contains item "<h1>Item number 42</h1>")))
        (test-assert "405 with Allow"
          (string-contains (curl "/item/42" "-X" "DELETE") "Allow: GET, HEAD"))
        (test-assert "HEAD: no body"
          (string-suffix? "\r\n\r\n" (curl "/item/42" "-I")))
        (test-assert "a POSTed form"
          (string-contains (curl "/echo" "--data" "a=%3Cx%3E") "<dd>&lt;x&gt;</dd>"))
        (test-assert "the mounted API"
          (string-contains (curl "/api/items/9") "{\"id\": 9}")))))))

(test-end "web/example")
