;;; bench/json.scm --- one codec on one document, timed; run by bench/json

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; guile -L . -C build bench/json.scm DIR SECONDS
;;;
;;; For each of DIR/{twitter,citm_catalog,canada}.json, times plucky's
;;; generic decoder (decode-json), the schema-compiled decoder of
;;; bench/json-schemas.scm, plucky's generic and schema encoders, and
;;; guile-json's json-string->scm and scm->json-string (on the document
;;; as a string, as guile-json takes it), and prints one line per
;;; measure:
;;;
;;;   DOCUMENT CODEC MB/S [BYTES-ALLOCATED-PER-RUN]
;;;
;;; Each codec runs for SECONDS of wall time after a warm-up run, and the
;;; fastest run counts (the machine is shared: the fastest run is the one
;;; least disturbed).  MB/s is the document's size in bytes (the UTF-8
;;; input, for the encoders too) over that time.  Allocation is (gc-stats)
;;; heap-total-allocated around one run.
;;;
;;; Code:

(use-modules (plucky web json)
             (bench json-schemas)
             (json)
             (rnrs bytevectors)
             (ice-9 binary-ports)
             (ice-9 format))

(define (file-bytes path)
  (call-with-input-file path get-bytevector-all #:binary #t))

(define (allocated)
  (assq-ref (gc-stats) 'heap-total-allocated))

(define (best-time thunk seconds)
  ;; -> the fastest run of THUNK, in seconds, over SECONDS of runs
  (thunk)
  (let ((deadline (+ (get-internal-real-time) (* seconds internal-time-units-per-second))))
    (let lp ((best #f) (runs 0))
      (if (and best (>= runs 3) (> (get-internal-real-time) deadline))
          (/ best 1.0 internal-time-units-per-second)
          (let* ((start (get-internal-real-time))
                 (_ (thunk))
                 (t (- (get-internal-real-time) start)))
            (lp (if best (min best t) t) (+ runs 1)))))))

(define (bytes-allocated thunk)
  (gc)
  (let ((before (allocated)))
    (thunk)
    (- (allocated) before)))

(define (measure document codec size thunk seconds)
  (let* ((t (best-time thunk seconds))
         (bytes (bytes-allocated thunk)))
    (format #t "~a ~a ~,1f ~a~%" document codec (/ size t 1e6) bytes)
    (force-output)))

(define (main dir seconds)
  (for-each
   (lambda (document decode encode)
     (let* ((bv (file-bytes (string-append dir "/" document ".json")))
            (text (utf8->string bv))
            (size (bytevector-length bv))
            (value (decode-json bv))
            (record (decode bv))
            (guile-value (json-string->scm text)))
       (measure document "plucky-decode" size (lambda () (decode-json bv)) seconds)
       (measure document "plucky-schema-decode" size (lambda () (decode bv)) seconds)
       (measure document "plucky-encode" size (lambda () (encode-json value)) seconds)
       (measure document "plucky-schema-encode" size (lambda () (encode record)) seconds)
       (measure document "guile-json-decode" size (lambda () (json-string->scm text)) seconds)
       (measure document "guile-json-encode" size (lambda () (scm->json-string guile-value)) seconds)))
   '("twitter" "citm_catalog" "canada")
   (list json->twitter json->citm-catalog json->canada)
   (list twitter->json citm-catalog->json canada->json)))

(let ((args (cdr (command-line))))
  (main (car args) (string->number (cadr args))))
