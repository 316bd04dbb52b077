;;; apps/stream.scm --- request bodies read as a port, answers sent as written
;;;
;;; Serve it:  bin/plucky serve apps/stream.scm --max-body 10000000000
;;;
;;;   curl -T big.iso 127.0.0.1:8080/count     the body's size, counted as
;;;                                            it arrives (chunked: -T)
;;;   curl -F f=@big.iso 127.0.0.1:8080/form   a multipart form, files
;;;                                            spooled to disk as they come
;;;   curl -N 127.0.0.1:8080/clock             server-sent events, one a second
;;;   curl 127.0.0.1:8080/numbers?n=100000     a chunked answer, written as made
;;;
;;; `with-body-port' makes plucky give the handler each request body as an
;;; input port instead of a bytevector (read as it arrives: the request
;;; suspends while the client sends nothing, and the worker serves
;;; others); an answer whose body is a procedure and whose headers say
;;; Transfer-Encoding: chunked or Content-Type: text/event-stream is sent
;;; as the procedure writes it.  Both run on the worker's loop: they wait
;;; with `sleep-ms' (plucky server), never with Guile's `sleep'.

(use-modules (plucky server)
             (plucky web forms)
             (web request)
             (web uri)
             (rnrs bytevectors)
             (ice-9 binary-ports))

(define (text . strings)
  (values '((content-type . (text/plain))) (string-concatenate strings)))

(define (count-bytes port)
  (let ((buffer (make-bytevector 65536)))
    (let lp ((total 0))
      (let ((n (if port (get-bytevector-n! port buffer 0 65536) (eof-object))))
        (if (eof-object? n) total (lp (+ total n)))))))

(define (query-number request name default)
  (let* ((query (or (uri-query (request-uri request)) ""))
         (fields (urlencoded->alist query)))
    (or (and=> (assoc-ref fields name) string->number) default)))

(define (stream request body)
  (let ((path (uri-path (request-uri request))))
    (cond
     ((string=? path "/count")
      (text (number->string (count-bytes body)) " bytes\n"))
     ((string=? path "/form")
      (let ((form (read-multipart-form body (assq-ref (request-headers request)
                                                       'content-type))))
        (text (string-join
               (map (lambda (field)
                      (let ((value (cdr field)))
                        (if (form-file? value)
                            (let ((size (stat:size (stat (form-file-path value)))))
                              (delete-file (form-file-path value))
                              (format #f "~a: a file of ~a bytes" (car field) size))
                            (format #f "~a: ~s" (car field) value))))
                    form)
               "\n")
              "\n")))
     ((string=? path "/clock")
      (values '((content-type . (text/event-stream)))
              (lambda (port)
                (let lp ((i 0))
                  (when (< i 60)
                    (format port "data: ~a\n\n" (strftime "%T" (localtime (current-time))))
                    ;; Out now, not when the buffer fills.
                    (force-output port)
                    (sleep-ms 1000)
                    (lp (+ i 1)))))))
     ((string=? path "/numbers")
      (let ((n (query-number request "n" 1000)))
        (values '((content-type . (text/plain)) (transfer-encoding . ((chunked))))
                (lambda (port)
                  (let lp ((i 1))
                    (when (<= i n)
                      (display i port)
                      (newline port)
                      (lp (+ i 1))))))))
     (else
      (count-bytes body)                ; whatever was sent, read
      (text "Try /count, /form, /clock or /numbers?n=100 (see apps/stream.scm)\n")))))

(with-body-port stream)
