;;; (plucky web security) --- the headers that tell browsers to be careful

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; `with-security-headers' is a middleware that adds to each response
;;; the headers a browser reads to protect the app's users:
;;;
;;;   X-Content-Type-Options: nosniff    the Content-Type is believed:
;;;       a text file an attacker uploaded is not run as a script, nor
;;;       an image as HTML
;;;   X-Frame-Options: DENY and the policy's frame-ancestors 'none'
;;;       no other site shows the pages in a frame (clickjacking: a
;;;       button of the app under a decoy); frame-ancestors for browsers
;;;       that read CSP, X-Frame-Options for older ones
;;;   Content-Security-Policy             where scripts, styles, images,
;;;       connections and form submissions may come from and go to; the
;;;       default allows the app's own origin only, no inline script,
;;;       inline styles (style attributes are common in server-made
;;;       HTML, and a style cannot run code), images also as data: URIs
;;;   Referrer-Policy: strict-origin-when-cross-origin
;;;       other sites learn the origin a link was followed from, never
;;;       the path and query (a thread's id, a reset token)
;;;
;;;   (define app (wrap (router-handler routes) (with-security-headers)))
;;;
;;; Each header is a keyword of `with-security-headers': a string
;;; replaces the default, #f drops the header.  A header the handler set
;;; itself is kept as it is: a page with its own policy (one that allows
;;; a script by its hash, say) keeps it.  Informational responses (101,
;;; a WebSocket's switch) go out untouched.
;;;
;;; Code:

(define-module (plucky web security)
  #:use-module (plucky web middleware)
  #:export (with-security-headers
            default-content-security-policy))

(define default-content-security-policy
  ;; default-src covers scripts, fonts, connect (fetch, EventSource,
  ;; WebSocket to the same host: CSP level 3's 'self' matches ws: and
  ;; wss:), media and frames; base-uri and form-action are not covered
  ;; by default-src and must be said
  (string-join '("default-src 'self'"
                 "style-src 'self' 'unsafe-inline'"
                 "img-src 'self' data:"
                 "object-src 'none'"
                 "base-uri 'self'"
                 "form-action 'self'"
                 "frame-ancestors 'none'")
               "; "))

(define* (with-security-headers
          #:key
          (content-type-options "nosniff")
          (frame-options "DENY")
          (content-security-policy default-content-security-policy)
          (referrer-policy "strict-origin-when-cross-origin"))
  "Return a middleware that adds to each response of status 200 or more
the headers X-Content-Type-Options (CONTENT-TYPE-OPTIONS), X-Frame-Options
(FRAME-OPTIONS), Content-Security-Policy (CONTENT-SECURITY-POLICY,
`default-content-security-policy' unless given) and Referrer-Policy
(REFERRER-POLICY), each a string, or #f for none, and each only when the
response does not have it already."
  (let ((defaults (filter cdr `((x-content-type-options . ,content-type-options)
                                (x-frame-options . ,frame-options)
                                (content-security-policy . ,content-security-policy)
                                (referrer-policy . ,referrer-policy)))))
    (if (null? defaults)
        identity
        (with-headers defaults))))

;;; (plucky web security) ends here
