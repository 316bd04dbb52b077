;;; (plucky web csrf) --- a per-session token that state-changing requests must carry

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Cross-site request forgery: a page on another site makes the
;;; visitor's browser POST to this one, and the browser sends this
;;; site's cookies with it.  SameSite=Lax cookies (the default of
;;; (plucky web cookies)) stop most of it in current browsers; the
;;; synchronizer token here stops the rest: every form this site renders
;;; carries a secret the other site cannot read, and a POST, PUT, PATCH
;;; or DELETE without it is refused with 403.
;;;
;;;   (define app (with-sessions (with-csrf handler) #:db db))
;;;   ;; or, the same as middlewares (plucky web middleware):
;;;   (define app (wrap handler (session-middleware #:db db) (csrf-middleware)))
;;;
;;;   ;; in a page: SXML for the HTML writer
;;;   `(form (@ (method "post") (action "/vote"))
;;;      ,(csrf-field)
;;;      (button "Vote"))
;;;
;;;   ;; from script: send it in a header
;;;   fetch("/vote", {method: "POST", headers: {"X-CSRF-Token": token}})
;;;
;;; The secret is 32 random bytes kept in the session under "csrf",
;;; made the first time a page asks for it (so a visitor who sees a form
;;; gets a session).  What goes into a page is masked afresh each time:
;;; a random pad, then the secret xor the pad, in base64url.  A page
;;; compressed with attacker-chosen text beside the token (BREACH) then
;;; never shows the same token bytes twice.  `with-csrf' unmasks what a
;;; request carries, in the field "csrf" of a urlencoded or multipart
;;; body or in the header X-CSRF-Token, and compares it with the
;;; session's secret in constant time.  It must run inside
;;; `with-sessions': a request with no session has no secret, and its
;;; POST is refused.
;;;
;;; A multipart body is read once here to find the field (its files
;;; spooled and deleted) and again by the handler; a script that uploads
;;; large files saves that by sending the header.  A body a handler
;;; reads as a port (`with-body-port') is not touched: such requests must
;;; send the header.
;;;
;;; Code:

(define-module (plucky web csrf)
  #:use-module (rnrs bytevectors)
  #:use-module (web request)
  #:use-module (web response)
  #:use-module (plucky web crypto)
  #:use-module (plucky web forms)
  #:use-module (plucky web session)
  #:export (csrf-token
            csrf-field
            csrf-token-valid?
            with-csrf
            csrf-middleware))

(define session-key "csrf")
(define secret-bytes 32)

(define (session-secret)
  ;; -> the session's secret, or #f if it has none
  (let* ((stored (session-ref session-key))
         (bytes (and (string? stored) (base64url->bytes stored))))
    (and bytes (= secret-bytes (bytevector-length bytes)) bytes)))

(define (xor-bytes a b)
  (let ((out (make-bytevector (bytevector-length a))))
    (do ((i 0 (+ i 1)))
        ((= i (bytevector-length a)) out)
      (bytevector-u8-set! out i (logxor (bytevector-u8-ref a i) (bytevector-u8-ref b i))))))

(define (csrf-token)
  "Return the current session's CSRF token, masked afresh (a different
string each call, each valid), to put in a form or give to a script.
Makes the secret, and the session, if there is none yet.  Must be
called inside `with-sessions'."
  (let ((secret (or (session-secret)
                    (let ((fresh (random-bytes secret-bytes)))
                      (session-set! session-key (bytes->base64url fresh))
                      fresh)))
        (pad (random-bytes secret-bytes)))
    (let ((token (make-bytevector (* 2 secret-bytes))))
      (bytevector-copy! pad 0 token 0 secret-bytes)
      (bytevector-copy! (xor-bytes pad secret) 0 token secret-bytes secret-bytes)
      (bytes->base64url token))))

(define* (csrf-field #:key (name "csrf"))
  "Return the SXML of a hidden input named NAME holding `csrf-token',
for a form that POSTs: (input (@ (type \"hidden\") (name NAME) (value TOKEN)))."
  `(input (@ (type "hidden") (name ,name) (value ,(csrf-token)))))

(define (csrf-token-valid? token)
  "Return #t if TOKEN, a string a request carried, is a masked form of
the current session's CSRF secret; #f otherwise, and always when the
session has no secret.  Compared in constant time."
  (let ((secret (session-secret))
        (bytes (and (string? token) (base64url->bytes token))))
    (and secret bytes
         (= (bytevector-length bytes) (* 2 secret-bytes))
         (let ((pad (make-bytevector secret-bytes))
               (masked (make-bytevector secret-bytes)))
           (bytevector-copy! bytes 0 pad 0 secret-bytes)
           (bytevector-copy! bytes secret-bytes masked 0 secret-bytes)
           (bytevector=?/constant-time (xor-bytes pad masked) secret)))))

(define (media-type request)
  (let ((type (request-content-type request)))
    (and (pair? type) (car type))))

(define (submitted-token request body field header)
  ;; -> the token REQUEST carries in HEADER or the body's FIELD, or #f
  (or (let ((value (assq-ref (request-headers request) header)))
        (and (string? value) value))
      (and (bytevector? body)
           (false-if-exception
            (case (media-type request)
              ((application/x-www-form-urlencoded)
               (let ((value (form-ref (urlencoded->alist body) field)))
                 (and (string? value) value)))
              ((multipart/form-data)
               (let* ((form (read-multipart-form body (request-content-type request)))
                      (value (form-ref form field)))
                 (delete-form-files! form)
                 (and (string? value) value)))
              (else #f))))))

(define (refuse-request request body)
  (values (build-response #:code 403 #:headers '((content-type text/plain (charset . "utf-8"))))
          "Forbidden: this form's security token is missing or out of date. Go back, reload the page and send it again.\n"))

(define* (with-csrf handler #:key (field "csrf") (header 'x-csrf-token)
                    (methods '(POST PUT PATCH DELETE)) (exempt? (lambda (request) #f))
                    (refuse refuse-request))
  "Return a handler that calls HANDLER for a request whose method is not
in METHODS, or that carries a valid CSRF token (see `csrf-token-valid?')
in the form field FIELD of its body (urlencoded or multipart) or in the
header HEADER (a symbol, default x-csrf-token), or for which (EXEMPT?
request) is true; for any other it returns (REFUSE request body), by
default a 403 with a short plain-text message.  Put it inside
`with-sessions'."
  (lambda (request body . state)
    (if (or (not (memq (request-method request) methods))
            (exempt? request)
            (csrf-token-valid? (submitted-token request body field header)))
        (apply handler request body state)
        (call-with-values (lambda () (refuse request body))
          (lambda (response body) (apply values response body state))))))

(define (csrf-middleware . options)
  "Return a middleware (see (plucky web middleware)) that puts a handler
inside `with-csrf' with OPTIONS, its keywords: (wrap handler
(session-middleware #:db db) (csrf-middleware)) checks each POST's token
inside the sessions."
  (lambda (handler)
    (apply with-csrf handler options)))

;;; (plucky web csrf) ends here
