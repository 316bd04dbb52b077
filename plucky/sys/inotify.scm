;;; (plucky sys inotify) --- file change notification, as Guile lacks it

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; inotify(7) through the FFI, for `plucky serve --reload' (plucky server
;;; reload): `inotify-open' gives a non-blocking, close-on-exec
;;; descriptor for an epoll set; `inotify-add-watch!' watches a file or a
;;; directory; `inotify-read' drains what is pending into a list of
;;; events.  The conventions of (plucky sys libc) hold (its
;;; `call-retrying-eintr'): EINTR retried,
;;; failures as a negated errno (-EAGAIN: nothing pending), and the
;;; descriptor is the caller's to close (`fd-close').
;;;
;;; Loaded only with --reload: nothing here is on the start-up path.
;;;
;;; Code:

(define-module (plucky sys inotify)
  #:use-module (srfi srfi-9)
  #:use-module (rnrs bytevectors)
  #:use-module (plucky sys foreign)
  #:use-module ((plucky sys libc) #:select (bytevector-address fd-read
                                          call-retrying-eintr))
  #:export (inotify-open
            inotify-add-watch!
            inotify-remove-watch!
            inotify-read
            inotify-event?
            inotify-event-wd
            inotify-event-mask
            inotify-event-name
            IN_MODIFY IN_ATTRIB IN_CLOSE_WRITE IN_MOVED_FROM IN_MOVED_TO
            IN_CREATE IN_DELETE IN_DELETE_SELF IN_MOVE_SELF
            IN_Q_OVERFLOW IN_IGNORED IN_ONLYDIR IN_ISDIR))

;; Linux's values (<sys/inotify.h>)
(define IN_MODIFY #x2)
(define IN_ATTRIB #x4)
(define IN_CLOSE_WRITE #x8)
(define IN_MOVED_FROM #x40)
(define IN_MOVED_TO #x80)
(define IN_CREATE #x100)
(define IN_DELETE #x200)
(define IN_DELETE_SELF #x400)
(define IN_MOVE_SELF #x800)
(define IN_Q_OVERFLOW #x4000)
(define IN_IGNORED #x8000)
(define IN_ONLYDIR #x1000000)
(define IN_ISDIR #x40000000)
(define IN_NONBLOCK #o4000)
(define IN_CLOEXEC #o2000000)

(define %init1 (libc-procedure int "inotify_init1" (list int)))
(define %add-watch (libc-procedure int "inotify_add_watch" (list int uintptr_t unsigned-int)))
(define %rm-watch (libc-procedure int "inotify_rm_watch" (list int int)))

(define-record-type <inotify-event>
  (make-inotify-event wd mask name)
  inotify-event?
  (wd inotify-event-wd)                 ; the watch it concerns
  (mask inotify-event-mask)             ; IN_… bits
  (name inotify-event-name))            ; a name in the watched directory, or #f

(define (inotify-open)
  "Return a new inotify descriptor, non-blocking and close-on-exec, or a
negated errno."
  (call-retrying-eintr %init1 (logior IN_NONBLOCK IN_CLOEXEC)))

(define (inotify-add-watch! fd file mask)
  "Watch FILE (a file or directory name) on the inotify descriptor FD for
the events of MASK; return the watch descriptor (the same one again for
a file already watched) or a negated errno."
  (let ((path (string->utf8 (string-append file "\0"))))
    (call-retrying-eintr %add-watch fd (bytevector-address path) mask)))

(define (inotify-remove-watch! fd wd)
  "Stop the watch WD of the inotify descriptor FD; return 0 or a negated
errno."
  (call-retrying-eintr %rm-watch fd wd))

;; struct inotify_event { int wd; uint32_t mask, cookie, len; char name[len]; }
(define header-size 16)
;; Room for many events: a burst of saves is read in one call or a few.
(define buffer-size 65536)

(define (parse-events buffer count)
  ;; -> the events in the COUNT bytes of BUFFER, in order
  (let lp ((at 0) (events '()))
    (if (> (+ at header-size) count)
        (reverse events)
        (let* ((wd (bytevector-s32-native-ref buffer at))
               (mask (bytevector-u32-native-ref buffer (+ at 4)))
               (len (bytevector-u32-native-ref buffer (+ at 12)))
               (name (and (> len 0)
                          (let* ((start (+ at header-size))
                                 (end (let find ((i start))
                                        (if (or (= i (+ start len))
                                                (zero? (bytevector-u8-ref buffer i)))
                                            i
                                            (find (+ i 1))))))
                            (utf8->string
                             (let ((bv (make-bytevector (- end start))))
                               (bytevector-copy! buffer start bv 0 (- end start))
                               bv))))))
          (lp (+ at header-size len) (cons (make-inotify-event wd mask name) events))))))

(define (inotify-read fd)
  "Read every event pending on the non-blocking inotify descriptor FD;
return them as a list of <inotify-event>, oldest first (the empty list
when none is pending), or a negated errno other than EAGAIN."
  (let ((buffer (make-bytevector buffer-size)))
    (let lp ((events '()))
      (let ((n (fd-read fd (bytevector-address buffer) 0 buffer-size)))
        (cond
         ((> n 0) (lp (append events (parse-events buffer n))))
         ((or (zero? n) (= n (- EAGAIN))) events)
         ((null? events) n)
         (else events))))))

;;; (plucky sys inotify) ends here
