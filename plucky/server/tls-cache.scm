;;; (plucky server tls-cache) --- TLS 1.2 sessions, shared by the workers

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; A client that resumes a TLS 1.2 session by its ID (no ticket) comes
;;; back on a new connection, which SO_REUSEPORT may give to another
;;; worker: the sessions GnuTLS stores are kept in memory the workers
;;; share (plucky sys shared-memory), made by the master before it forks
;;; them, so that a reload's workers resume them too.
;;;
;;; The cache is a table of fixed slots, a session's slot chosen by its
;;; ID (random bytes the server made): a new session takes the slot
;;; from whatever was there.  Each slot:
;;;
;;;     0  expiry, seconds since the epoch (u64)
;;;     8  check: FNV-1a of the key's length, key and data (u32)
;;;    12  key length (u8)
;;;    14  data length (u16)
;;;    16  key (at most 32 bytes: a session ID)
;;;    48  data (GnuTLS's packed session)
;;;
;;; Workers write slots without a lock: two that write one slot at once,
;;; or a read during a write, leave bytes whose check does not match,
;;; and the lookup misses (a full handshake, nothing worse).
;;;
;;; Code:

(define-module (plucky server tls-cache)
  #:use-module (srfi srfi-9)
  #:use-module (rnrs bytevectors)
  #:use-module ((plucky sys shared-memory) #:select (make-shared-bytevector))
  #:export (make-tls-cache
            tls-cache?
            tls-cache-store!
            tls-cache-lookup
            tls-cache-remove!
            tls-cache-slot-data-size))

(define slot-size 1024)
(define key-offset 16)
(define key-room 32)
(define data-offset 48)
(define tls-cache-slot-data-size (- slot-size data-offset))

(define-record-type <tls-cache>
  (%make-tls-cache bytes slots lifetime)
  tls-cache?
  ;; shared bytevector of SLOTS slots
  (bytes cache-bytes)
  (slots cache-slots)
  ;; seconds a session stays
  (lifetime cache-lifetime))

(define* (make-tls-cache #:key (slots 4096) (lifetime 3600))
  "Return an empty session cache of SLOTS sessions, each kept LIFETIME
seconds, in memory shared with the processes forked from now on."
  (%make-tls-cache (make-shared-bytevector (* slots slot-size)) slots lifetime))

(define (slot-of cache key)
  ;; -> the byte offset of KEY's slot
  (let ((n (bytevector-length key)))
    (* slot-size
       (modulo (let lp ((i 0) (h 0))
                 (if (= i (min n 4)) h (lp (+ i 1) (+ (* h 256) (bytevector-u8-ref key i)))))
               (cache-slots cache)))))

(define (fnv-1a bv start count h)
  ;; H folded with COUNT bytes of BV from START, FNV-1a on 32 bits
  (let lp ((i start) (h h))
    (if (= i (+ start count))
        h
        (lp (+ i 1)
            (logand (* (logxor h (bytevector-u8-ref bv i)) 16777619) #xffffffff)))))

(define (check-of key data n)
  ;; FNV-1a of KEY's length, KEY and the first N bytes of DATA
  (fnv-1a data 0 n
          (fnv-1a key 0 (bytevector-length key)
                  (logand (* (logxor 2166136261 (bytevector-length key)) 16777619)
                          #xffffffff))))

(define (tls-cache-store! cache key data)
  "Keep DATA (a bytevector) under KEY (one of at most 32 bytes) in CACHE
for its lifetime.  Return #f, storing nothing, when either is too long."
  (let ((bytes (cache-bytes cache))
        (at (slot-of cache key))
        (n (bytevector-length data)))
    (and (<= (bytevector-length key) key-room)
         (<= n tls-cache-slot-data-size)
         (begin
           (bytevector-copy! key 0 bytes (+ at key-offset) (bytevector-length key))
           (bytevector-copy! data 0 bytes (+ at data-offset) n)
           (bytevector-u8-set! bytes (+ at 12) (bytevector-length key))
           (bytevector-u16-native-set! bytes (+ at 14) n)
           (bytevector-u32-native-set! bytes (+ at 8)
                                       (check-of key data n))
           (bytevector-u64-native-set! bytes at (+ (current-time) (cache-lifetime cache)))
           #t))))

(define (tls-cache-lookup cache key)
  "Return a copy of the data CACHE keeps under KEY, or #f when it keeps
none (never stored, replaced, expired, or caught in a write)."
  (let* ((bytes (cache-bytes cache))
         (at (slot-of cache key))
         (n (bytevector-u16-native-ref bytes (+ at 14)))
         (key-length (bytevector-u8-ref bytes (+ at 12))))
    (and (= key-length (bytevector-length key))
         (<= n tls-cache-slot-data-size)
         (> (bytevector-u64-native-ref bytes at) (current-time))
         (let ((data (make-bytevector n)))
           (bytevector-copy! bytes (+ at data-offset) data 0 n)
           (and (let lp ((i 0))
                  (or (= i key-length)
                      (and (= (bytevector-u8-ref key i)
                              (bytevector-u8-ref bytes (+ at key-offset i)))
                           (lp (+ i 1)))))
                (= (bytevector-u32-native-ref bytes (+ at 8))
                   (check-of key data n))
                data)))))

(define (tls-cache-remove! cache key)
  "Forget what CACHE keeps under KEY; return #t."
  (when (tls-cache-lookup cache key)
    (bytevector-u64-native-set! (cache-bytes cache) (slot-of cache key) 0))
  #t)

;;; (plucky server tls-cache) ends here
