;;; tests/web/files.scm --- (plucky web files)

(use-modules (srfi srfi-64)
             (tests lib harness)
             (plucky web files))

(define dir (mkdtemp (string-copy "/tmp/plucky-files-XXXXXX")))
(define (mode file) (stat:perms (stat file)))

(test-begin "web/files")

(test-group "private-file!"
  (umask #o022)
  (let ((file (string-append dir "/new.db")))
    (test-equal "returns FILE" file (private-file! file))
    (test-equal "a missing file is made 0600 under umask 022" #o600 (mode file))
    (test-equal "and empty" 0 (stat:size (stat file))))
  (let ((file (string-append dir "/old.db")))
    (for-each (lambda (name)
                (call-with-output-file name (lambda (port) (display "data" port)))
                (chmod name #o664))
              (list file (string-append file "-wal") (string-append file "-shm")))
    (private-file! file)
    (test-equal "an existing file loses others' permissions" #o600 (mode file))
    (test-equal "and so does its -wal" #o600 (mode (string-append file "-wal")))
    (test-equal "and its -shm" #o600 (mode (string-append file "-shm")))
    (test-equal "its contents are kept" 4 (stat:size (stat file))))
  (let ((file (string-append dir "/missing-dir/x.db")))
    (test-error "a directory that does not exist: the system error" 'system-error
                (private-file! file))))

(for-each (lambda (name) (delete-file (string-append dir "/" name)))
          '("new.db" "old.db" "old.db-wal" "old.db-shm"))
(rmdir dir)

(test-end "web/files")
