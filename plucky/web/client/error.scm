;;; (plucky web client error) --- the condition a failed exchange raises

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Every way an exchange of (plucky web client) fails is one condition
;;; type, &http-client-error, whose REASON (a symbol) says which:
;;;
;;;   resolve-failed      the host name has no address
;;;   connect-refused     nobody listens there (ECONNREFUSED)
;;;   connect-timeout     the connection was not made within the time
;;;   connect-failed      any other failure to connect (unreachable…)
;;;   tls-failed          the TLS handshake failed
;;;   certificate         the server's certificate did not verify
;;;   write-failed        the request could not be sent (reset, closed)
;;;   write-timeout       the server took none of the request within
;;;                       #:read-timeout-ms
;;;   read-timeout        nothing came within #:read-timeout-ms
;;;   timeout             the whole exchange passed #:timeout-ms
;;;   closed              the server closed before the response ended
;;;   malformed-response  the bytes are not an HTTP/1 response
;;;   head-too-large      the head passed its size or field-count limit
;;;   body-too-large      the body passed #:max-body
;;;   too-many-redirects  more redirects than #:follow-redirects
;;;
;;; It carries OFFSET too: for malformed-response, the byte offset from
;;; the start of the response where the fault was seen (or #f), and the
;;; URI asked for.  A message and irritants come with it, for the log.
;;;
;;; Code:

(define-module (plucky web client error)
  #:use-module (ice-9 exceptions)
  #:export (&http-client-error
            http-client-error?
            http-client-error-reason
            http-client-error-offset
            http-client-error-uri
            raise-client-error))

(define-exception-type &http-client-error &error
  make-http-client-error
  http-client-error?
  (reason http-client-error-reason)     ; a symbol, listed above
  (offset http-client-error-offset)     ; byte offset into the response, or #f
  (uri http-client-error-uri))          ; the URI as a string, or #f

(define* (raise-client-error reason message #:key (offset #f) (uri #f)
                             (irritants '()))
  "Raise an &http-client-error of REASON (a symbol) with MESSAGE, OFFSET
and URI (a string), and IRRITANTS for the message.  Does not return."
  (raise-exception
   (make-exception (make-http-client-error reason offset uri)
                   (make-exception-with-message message)
                   (make-exception-with-irritants irritants))))

;;; (plucky web client error) ends here
