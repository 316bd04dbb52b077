;;; tests/apps/news-pg.scm --- the news site's tests (tests/apps/news.scm) on PostgreSQL

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; Every test of tests/apps/news.scm, with the site's data, sessions
;;; and rate limits in a PostgreSQL of the test's own (tests lib
;;; postgresql) instead of an SQLite file: both backends pass the same
;;; app tests.  Skipped without a PostgreSQL server, except under CI.
;;;
;;; Code:

(use-modules (srfi srfi-64)
             (tests lib harness)
             (tests lib postgresql)
             (plucky db postgresql))

(define pg-directory
  (mkdtemp (string-append (or (getenv "TMPDIR") "/tmp") "/plucky-news-pg-XXXXXX")))
(define news-test-database (start-postgresql pg-directory))

(test-begin "apps/news-pg")
(check-postgresql-or-skip news-test-database)
(when news-test-database
  (dynamic-wind
    (const #t)
    (lambda ()
      (load "news.scm")
      (test-group "what the tests stored is in PostgreSQL"
        (let ((db (pg-connect news-test-database)))
          (test-assert "alice's account"
            (pg-query-row db "SELECT 1 FROM users WHERE name = 'alice'"))
          (test-assert "her sessions"
            (pg-query-row db "SELECT 1 FROM plucky_sessions WHERE data LIKE '%alice%'"))
          (test-assert "the failed logins counted"
            (pg-query-row db "SELECT 1 FROM plucky_rate_events WHERE name = 'news-login'"))
          (test-equal "the migrations, each once" '(#(1) #(2) #(3))
            (pg-query db "SELECT version FROM schema_migrations ORDER BY version"))
          (pg-close db))))
    (lambda ()
      (stop-postgresql pg-directory))))
(test-end "apps/news-pg")
(system* "rm" "-rf" pg-directory)
