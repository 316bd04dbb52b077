;;; tests/server/tls-cache.scm --- the TLS 1.2 session cache in shared memory

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

(use-modules (srfi srfi-64)
             (rnrs bytevectors)
             (tests lib harness)
             (plucky server tls-cache))

(test-begin "server/tls-cache")

(define (bytes . octets) (u8-list->bytevector octets))
(define (id n) (make-bytevector 32 n))

(test-group "tls-cache-store! and tls-cache-lookup"
  (let ((cache (make-tls-cache #:slots 8 #:lifetime 60)))
    (test-eq "nothing stored: a miss" #f (tls-cache-lookup cache (id 1)))
    (test-assert "stored" (tls-cache-store! cache (id 1) (bytes 1 2 3)))
    (test-equal "found" (bytes 1 2 3) (tls-cache-lookup cache (id 1)))
    (test-eq "another key: a miss" #f (tls-cache-lookup cache (id 2)))
    (test-eq "a shorter key with the same start: a miss"
      #f (tls-cache-lookup cache (make-bytevector 31 1)))
    ;; id 9 falls in id 1's slot (9 = 1 modulo 8 slots): it replaces it.
    (test-assert "a key of the same slot" (tls-cache-store! cache (id 9) (bytes 9)))
    (test-eq "replaces the first" #f (tls-cache-lookup cache (id 1)))
    (test-equal "and is found" (bytes 9) (tls-cache-lookup cache (id 9)))
    (test-assert "removed" (tls-cache-remove! cache (id 9)))
    (test-eq "then a miss" #f (tls-cache-lookup cache (id 9)))))

(test-group "limits"
  (let ((cache (make-tls-cache #:slots 4 #:lifetime 60)))
    (test-assert "data of the slot's size: kept"
      (tls-cache-store! cache (id 1) (make-bytevector tls-cache-slot-data-size 7)))
    (test-equal "and found whole" (make-bytevector tls-cache-slot-data-size 7)
      (tls-cache-lookup cache (id 1)))
    (test-eq "one byte more: refused" #f
      (tls-cache-store! cache (id 2) (make-bytevector (+ 1 tls-cache-slot-data-size) 7)))
    (test-eq "a key of 33 bytes: refused" #f
      (tls-cache-store! cache (make-bytevector 33 3) (bytes 1)))))

(test-group "expiry"
  (let ((cache (make-tls-cache #:slots 4 #:lifetime 0)))
    (tls-cache-store! cache (id 1) (bytes 1))
    (test-eq "a session of lifetime 0 is never found" #f (tls-cache-lookup cache (id 1)))))

(test-group "shared with a child process"
  (let ((cache (make-tls-cache #:slots 16 #:lifetime 60)))
    (let ((pid (primitive-fork)))
      (when (zero? pid)
        (tls-cache-store! cache (id 5) (bytes 5 5 5))
        (primitive-exit 0))
      (waitpid pid)
      (test-equal "what the child stored, the parent finds"
        (bytes 5 5 5) (tls-cache-lookup cache (id 5))))))

(test-end "server/tls-cache")
