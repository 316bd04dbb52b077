;;; (plucky http) --- the HTTP codecs, for the layers above

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The public face of plucky/http/: what the web toolkit, the observer
;;; and apps may use of the codecs, re-exported from the modules that
;;; implement them.  The server, the layer just above, uses those modules
;;; themselves; nothing else does (tests/dev/layers.scm).
;;;
;;;   errors      &http-error: a status, a reason and a byte offset
;;;   dates       IMF-fixdate, as Date and Last-Modified say it
;;;   status      status lines and reason phrases
;;;   parse       the limits on a request head; response heads as positions
;;;   response    response records and heads written into output buffers
;;;   chunked     the chunked transfer coding, both ways
;;;   multipart   multipart/form-data, incrementally
;;;   websocket   RFC 6455 frames and permessage-deflate's parameters
;;;   bytes       `put-utf8!', a string's UTF-8 into a bytevector;
;;;               `bytevector-concatenate'
;;;
;;; Code:

(define-module (plucky http)
  #:use-module (plucky http error)
  #:use-module (plucky http date)
  #:use-module (plucky http status)
  #:use-module (plucky http parse)
  #:use-module (plucky http response)
  #:use-module (plucky http chunked)
  #:use-module (plucky http multipart)
  #:use-module (plucky http websocket)
  #:use-module ((plucky http bytes) #:select (put-utf8! bytevector-concatenate))
  #:re-export (;; errors
               &http-error make-http-error http-error? http-error-status
               http-error-reason http-error-offset
               ;; dates
               seconds->imf-fixdate date-line refresh-date-line!
               ;; status
               status-line status-reason
               ;; parse
               make-parse-limits parse-limits? %default-parse-limits
               parse-limits-max-request-line parse-limits-max-header-bytes
               parse-limits-max-header-count
               parse-response-head response-head? response-head-version
               response-head-code response-head-reason-start response-head-reason-end
               response-head-fields response-head-content-length
               response-head-transfer-coding response-head-connection
               field-symbol field-name field-name-start field-name-end
               field-value-start field-value-end field-line-end
               ;; response
               response-record? response-record-code response-record-headers
               answer-code answer-headers streamed-response? copy-limit
               make-output output? output-bytes output-fill set-output-fill!
               output-reset! output-put-bytes! output-put-slice!
               write-response! write-response-head! write-streamed-head!
               write-error-response!
               make-raw-response raw-response? raw-response-code raw-response-fields
               raw-response-closing raw-response->response answer-body
               raw-response-with-headers
               ;; chunked
               make-chunked-decoder chunked-decoder? decode-chunked!
               chunked-decoder-done? chunked-decoder-total encode-chunk!
               ;; multipart
               content-type-boundary make-multipart-parser multipart-parser?
               feed-multipart! finish-multipart! multipart-parser-parts
               multipart-part? multipart-part-index multipart-part-name
               multipart-part-filename multipart-part-content-type
               multipart-part-disposition multipart-part-headers
               ;; websocket
               websocket-key-valid? websocket-accept websocket-frame
               websocket-close-frame websocket-close-code-valid? utf8-valid?
               opcode-continuation opcode-text opcode-binary opcode-close
               opcode-ping opcode-pong
               make-websocket-reader websocket-reader? websocket-reader-feed!
               websocket-reader-next! websocket-reader-buffered websocket-reader-idle?
               websocket-deflate-offer deflate-params? deflate-params-response
               deflate-params-server-bits deflate-params-client-bits
               deflate-params-server-reset? deflate-params-client-reset?
               ;; bytes
               put-utf8! bytevector-concatenate))

;;; (plucky http) ends here
