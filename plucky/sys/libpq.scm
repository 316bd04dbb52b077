;;; (plucky sys libpq) --- libpq, PostgreSQL's C client library, through the FFI

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The libpq calls (plucky db postgresql) makes, one Scheme procedure
;;; each, named as in C.  Debian's libpq5 is opened the first time a
;;; procedure here is needed (`open-libpq!'), so a server whose app does
;;; not use PostgreSQL never loads it.
;;;
;;; Conventions:
;;;  - Pointers, both ways, are integer addresses (uintptr_t), not
;;;    pointer objects: a PGconn or a PGresult is an integer the caller
;;;    keeps, and a call allocates nothing for them.  Zero is NULL.
;;;  - Strings go to C as NUL-terminated UTF-8 bytevectors (`c-string'),
;;;    the address taken with `bytevector-address'; the caller keeps the
;;;    bytevector reachable across the call.
;;;  - Strings come back with `c-string->string'; a value of a result is
;;;    read in place through `memory' (below), valid until the result is
;;;    cleared.
;;;  - libpq makes its own system calls (send, recv, poll in the blocking
;;;    calls plucky does not use); it retries EINTR where it must and
;;;    reports EAGAIN as "nothing yet" (PQconsumeInput, PQflush), which
;;;    is what a non-blocking caller wants.
;;;
;;; Memory: every PGconn is freed with PQfinish and every PGresult with
;;; PQclear by the caller, deterministically; nothing here registers a
;;; finalizer.
;;;
;;; Code:

(define-module (plucky sys libpq)
  #:use-module (rnrs bytevectors)
  #:use-module ((system foreign)
                #:select (pointer->procedure make-pointer pointer->string
                          pointer->bytevector void int unsigned-int uintptr_t))
  #:use-module ((system foreign-library)
                #:select (load-foreign-library foreign-library-pointer))
  #:use-module ((plucky sys libc) #:select (bytevector-address))
  #:re-export (bytevector-address)
  #:export (open-libpq!
            c-string
            c-string->string
            c-bytes
            memory
            memory-base

            PQconnectStart PQconnectPoll PQstatus PQtransactionStatus
            PQsetnonblocking PQsocket PQbackendPID PQparameterStatus
            PQerrorMessage PQfinish
            PQsendQuery PQsendQueryParams PQsendPrepare PQsendQueryPrepared
            PQconsumeInput PQisBusy PQflush PQgetResult
            PQresultStatus PQntuples PQnfields PQftype PQgetvalue
            PQgetlength PQgetisnull PQcmdTuples PQresultErrorField
            PQresultErrorMessage PQclear
            PQenterPipelineMode PQexitPipelineMode PQpipelineSync
            PQsetSingleRowMode
            PQnotifies PQfreemem notify-channel notify-payload notify-pid
            PQputCopyData PQputCopyEnd
            PQconninfoParse PQconninfoFree

            CONNECTION_OK CONNECTION_BAD
            PGRES_POLLING_FAILED PGRES_POLLING_READING
            PGRES_POLLING_WRITING PGRES_POLLING_OK
            PGRES_EMPTY_QUERY PGRES_COMMAND_OK PGRES_TUPLES_OK
            PGRES_COPY_OUT PGRES_COPY_IN PGRES_BAD_RESPONSE
            PGRES_NONFATAL_ERROR PGRES_FATAL_ERROR PGRES_COPY_BOTH
            PGRES_SINGLE_TUPLE PGRES_PIPELINE_SYNC PGRES_PIPELINE_ABORTED
            PQTRANS_IDLE PQTRANS_ACTIVE PQTRANS_INTRANS PQTRANS_INERROR
            PQTRANS_UNKNOWN
            PG_DIAG_SQLSTATE PG_DIAG_MESSAGE_PRIMARY PG_DIAG_MESSAGE_DETAIL
            PG_DIAG_MESSAGE_HINT))

;; ConnStatusType (only the two a caller compares with)
(define CONNECTION_OK 0)
(define CONNECTION_BAD 1)
;; PostgresPollingStatusType
(define PGRES_POLLING_FAILED 0)
(define PGRES_POLLING_READING 1)
(define PGRES_POLLING_WRITING 2)
(define PGRES_POLLING_OK 3)
;; ExecStatusType
(define PGRES_EMPTY_QUERY 0)
(define PGRES_COMMAND_OK 1)
(define PGRES_TUPLES_OK 2)
(define PGRES_COPY_OUT 3)
(define PGRES_COPY_IN 4)
(define PGRES_BAD_RESPONSE 5)
(define PGRES_NONFATAL_ERROR 6)
(define PGRES_FATAL_ERROR 7)
(define PGRES_COPY_BOTH 8)
(define PGRES_SINGLE_TUPLE 9)
(define PGRES_PIPELINE_SYNC 10)
(define PGRES_PIPELINE_ABORTED 11)
;; PGTransactionStatusType
(define PQTRANS_IDLE 0)
(define PQTRANS_ACTIVE 1)
(define PQTRANS_INTRANS 2)
(define PQTRANS_INERROR 3)
(define PQTRANS_UNKNOWN 4)
;; PQresultErrorField's codes (postgres_ext.h)
(define PG_DIAG_SQLSTATE (char->integer #\C))
(define PG_DIAG_MESSAGE_PRIMARY (char->integer #\M))
(define PG_DIAG_MESSAGE_DETAIL (char->integer #\D))
(define PG_DIAG_MESSAGE_HINT (char->integer #\H))

;;;
;;; Strings
;;;

(define (c-string str)
  "Return STR as a bytevector of UTF-8 ending in a NUL byte."
  (let* ((utf8 (string->utf8 str))
         (n (bytevector-length utf8))
         (bv (make-bytevector (+ n 1) 0)))
    (bytevector-copy! utf8 0 bv 0 n)
    bv))

(define (c-string->string address)
  "Return the NUL-terminated UTF-8 string at ADDRESS, or #f if ADDRESS is
0 (NULL)."
  (and (not (zero? address))
       (pointer->string (make-pointer address) -1 "UTF-8")))

(define (c-bytes address length)
  "Return a bytevector of the LENGTH bytes at ADDRESS, sharing them (no
copy): valid only while the memory is, e.g. until its PGresult is cleared."
  (if (zero? length)
      #vu8()
      (pointer->bytevector (make-pointer address) length)))

;; The process's memory as one bytevector: the byte at ADDRESS is
;; (bytevector-u8-ref memory (- ADDRESS memory-base)).  The decoders of
;; (plucky db postgresql types) read a result's values where libpq keeps
;; them through it; a view per value (`c-bytes') would make two objects
;; per value and register a weak reference (bench/pg-roundtrip).  It
;; starts past the first page (always unmapped: a null pointer cannot
;; make a bytevector) and spans the 56-bit address space of x86-64 and
;; arm64 user space.  Reading through it is C's pointer arithmetic: only
;; ever at an address libpq gave, within the length it gave.
(define memory-base 4096)
(define memory (pointer->bytevector (make-pointer memory-base) (- (expt 2 56) memory-base)))

;;;
;;; The library
;;;

(define library #f)

(define-syntax-rule (define-libpq bind-all! (name return arg ...) ...)
  (begin
    (define name #f) ...
    (define (bind-all! lib)
      (set! name (pointer->procedure return (foreign-library-pointer lib (symbol->string 'name))
                                     (list arg ...)))
      ...)))

(define-libpq bind-all!
  ;; connections
  (PQconnectStart uintptr_t uintptr_t)               ; conninfo -> PGconn*
  (PQconnectPoll int uintptr_t)
  (PQstatus int uintptr_t)
  (PQtransactionStatus int uintptr_t)
  (PQsetnonblocking int uintptr_t int)
  (PQsocket int uintptr_t)
  (PQbackendPID int uintptr_t)
  (PQparameterStatus uintptr_t uintptr_t uintptr_t)  ; conn, name -> char*
  (PQerrorMessage uintptr_t uintptr_t)
  (PQfinish void uintptr_t)
  ;; sending
  (PQsendQuery int uintptr_t uintptr_t)
  ;; conn, command, nParams, paramTypes, paramValues, paramLengths,
  ;; paramFormats, resultFormat
  (PQsendQueryParams int uintptr_t uintptr_t int uintptr_t uintptr_t uintptr_t uintptr_t int)
  ;; conn, stmtName, query, nParams, paramTypes
  (PQsendPrepare int uintptr_t uintptr_t uintptr_t int uintptr_t)
  ;; conn, stmtName, nParams, paramValues, paramLengths, paramFormats, resultFormat
  (PQsendQueryPrepared int uintptr_t uintptr_t int uintptr_t uintptr_t uintptr_t int)
  (PQflush int uintptr_t)
  ;; receiving
  (PQconsumeInput int uintptr_t)
  (PQisBusy int uintptr_t)
  (PQgetResult uintptr_t uintptr_t)
  (PQresultStatus int uintptr_t)
  (PQntuples int uintptr_t)
  (PQnfields int uintptr_t)
  (PQftype unsigned-int uintptr_t int)
  (PQgetvalue uintptr_t uintptr_t int int)
  (PQgetlength int uintptr_t int int)
  (PQgetisnull int uintptr_t int int)
  (PQcmdTuples uintptr_t uintptr_t)
  (PQresultErrorField uintptr_t uintptr_t int)
  (PQresultErrorMessage uintptr_t uintptr_t)
  (PQclear void uintptr_t)
  ;; pipelines, single rows
  (PQenterPipelineMode int uintptr_t)
  (PQexitPipelineMode int uintptr_t)
  (PQpipelineSync int uintptr_t)
  (PQsetSingleRowMode int uintptr_t)
  ;; notifications
  (PQnotifies uintptr_t uintptr_t)
  (PQfreemem void uintptr_t)
  ;; COPY FROM STDIN
  (PQputCopyData int uintptr_t uintptr_t int)
  (PQputCopyEnd int uintptr_t uintptr_t)
  ;; conninfo
  (PQconninfoParse uintptr_t uintptr_t uintptr_t)    ; conninfo, char **errmsg
  (PQconninfoFree void uintptr_t))

(define (open-libpq!)
  "Open libpq (Debian's libpq5) and bind the procedures of this module,
once; return nothing.  Raises an error naming the library if it is
missing."
  (unless library
    (let ((lib (load-foreign-library "libpq" #:extensions '(".so.5" ".so"))))
      (bind-all! lib)
      (set! library lib)))
  (values))

;;;
;;; struct pgNotify { char *relname; int be_pid; char *extra; ... }
;;;

(define (notify-channel address)
  "Return the channel of the PGnotify at ADDRESS."
  (c-string->string (bytevector-u64-native-ref (c-bytes address 24) 0)))

(define (notify-pid address)
  "Return the PID of the server process that sent the PGnotify at ADDRESS."
  (bytevector-s32-native-ref (c-bytes address 24) 8))

(define (notify-payload address)
  "Return the payload string of the PGnotify at ADDRESS."
  (c-string->string (bytevector-u64-native-ref (c-bytes address 24) 16)))

;;; (plucky sys libpq) ends here
