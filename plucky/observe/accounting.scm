;;; (plucky observe accounting) --- where each request's time and memory go

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The event loop (plucky server loop) times each request's phases when
;;; it is given an observer; this module is that observer.  How a
;;; request's figures flow:
;;;
;;;   run-loop #:observer (observer->hooks obs)
;;;     #:on-request request code read parse handler serialise allocated
;;;        -> the request's route (its path; or a name the handler gave
;;;           with `declare-route!'; "(not found)" for 404s, "(refused)"
;;;           for requests refused before a handler saw them)
;;;        -> the route's histograms: read, parse, handler, serialise,
;;;           service (their sum) and, one request in 16, bytes allocated
;;;        -> the phases the handler timed itself, which it told the
;;;           server (`take-handler-phases!' of (plucky server hooks);
;;;           (plucky web timing) tells them): a histogram per phase of
;;;           the route, and one of the handler's time they left unmarked
;;;        -> this second's slot of the time series (plucky observe
;;;           series): requests, 5xx, and a coarse latency histogram
;;;        -> a 5xx goes to the error inbox (plucky observe inbox)
;;;     #:on-failure request exception stack -> the error inbox
;;;     #:on-write answers ns  -> the write histogram, per answer, of
;;;                               the worker and of the last route answered
;;;     #:on-accept ns, #:on-close ns -> the worker's histograms
;;;     #:on-wait request code waited computing (every request whose
;;;        handler suspended, once answered; see `observe-wait!')
;;;        -> its route: the total waited, a histogram per (kind . label)
;;;           it waited on (timer, socket "upstream …", thread, event),
;;;           and the time its handler computed after its first wait
;;;   after-gc-hook -> GC count and CPU time per collection: in all, per
;;;        second (the time series) and per minute (`observer-gc-minutes')
;;;
;;; Each worker process has its own observer state: `make-observer' runs
;;; before the workers fork, and each worker then fills its own copy.
;;; With several workers, each writes its figures to a file once a
;;; second (plucky observe share) and the one answering a status page
;;; adds them all up (`observer-whole-server', at the end of this file).
;;;
;;; Memory is bounded: at most MAX-ROUTES routes (others are counted
;;; under "(other)"), histograms of fixed size (plucky observe
;;; histogram), a time series of SERIES-SECONDS seconds.  Recording a
;;; request allocates nothing except the first time a route is seen;
;;; bench/overhead measures what it costs.
;;;
;;; Code:

(define-module (plucky observe accounting)
  #:use-module (srfi srfi-1)
  #:use-module (srfi srfi-9)
  #:use-module (ice-9 match)
  #:use-module (web request)
  #:use-module (web uri)
  #:use-module ((plucky server)
                #:select (make-tally tally-bytes tally-countdown tally-accepted
                          tally-closed tally-http2 tally-size status-class
                          make-observer-hooks take-handler-phases! want-handler-phases!
                          note-request-route! take-request-route!))
  #:use-module (plucky observe histogram)
  #:use-module (plucky observe series)
  #:use-module (plucky observe share)
  #:use-module (plucky observe inbox)
  #:export (make-observer
            observer?
            observer->hooks
            observer-detach!
            observer-sampling
            declare-route!
            note-request-body!
            noted-request
            noted-body

            observer-routes
            observer-route
            observer-all-routes
            observer-accept
            observer-close
            observer-write
            observer-gc-pause
            observer-gc-count
            observer-gc-minutes
            gc-recent-summary
            observer-accepted
            observer-closed
            observer-http2-answers
            observer-requests
            observer-answered
            observer-answered-by-class
            observer-bytes
            observer-tally
            observer-started
            observer-workers
            observer-inbox
            observer-max-routes

            route-stats?
            route-stats-name
            route-stats-requests
            route-stats-codes
            route-stats-read
            route-stats-parse
            route-stats-handler
            route-stats-serialise
            route-stats-write
            route-stats-service
            route-stats-allocated
            route-stats-allocated-per-request
            route-stats-app-phases
            route-stats-unmarked
            max-app-phases
            route-stats-suspended
            route-stats-waited
            route-stats-waits
            route-stats-computing
            max-waits
            max-wait-label-length

            observer-series

            observer-memory
            observer-members
            observer-whole-server
            observer-share
            share-figures!
            observe-gc!
            observer-advance!)
  ;; the time series is read through the observer
  #:re-export (series-seconds
               series-now
               series-requests
               series-errors
               series-gc-ns
               series-gc-count
               series-heap
               series-heap-free
               series-rss
               series-allocated
               series-latency-quantile
               process-memory))

;;;
;;; Per-route figures
;;;

(define-record-type <route-stats>
  (%make-route-stats name codes read parse handler serialise write service
                     allocated app-phases unmarked waited waits computing)
  route-stats?
  (name route-stats-name)                  ; string
  (codes route-stats-codes)                ; vector: 0 other, 1..5 1xx..5xx
  (read route-stats-read)                  ; histograms, ns
  (parse route-stats-parse)
  (handler route-stats-handler)
  (serialise route-stats-serialise)
  ;; ns of write(2) per answer; a write of several pipelined answers is
  ;; shared evenly among them and counted under the route of the last
  (write route-stats-write)
  (service route-stats-service)            ; read + parse + handler + serialise
  (allocated route-stats-allocated)        ; bytes, one request in 16
  ;; The phases the handler timed itself (see `account-app-phases!'):
  ;; ((name . histogram) …) in the order first seen, ns per request
  ;; that had the phase; and, over the requests that had any, the
  ;; handler's time they left unmarked.
  (app-phases route-stats-app-phases* set-route-stats-app-phases!)
  (unmarked route-stats-unmarked)
  ;; The requests whose handler suspended (see `observe-wait!'), ns per
  ;; request: all they waited; where, ((kind . label) . histogram) in the
  ;; order first seen, LABEL #f or a string of at most
  ;; max-wait-label-length; and what their handler computed after its
  ;; first wait.
  (waited route-stats-waited)
  (waits route-stats-waits* set-route-stats-waits!)
  (computing route-stats-computing))

(define (make-route-stats name)
  (%make-route-stats name (make-vector 6 0)
                     (make-histogram) (make-histogram) (make-histogram)
                     (make-histogram) (make-histogram) (make-histogram)
                     (make-histogram) '() (make-histogram)
                     (make-histogram) '() (make-histogram)))

(define max-app-phases
  ;; app phases kept apart per route; the others are counted as 'other
  8)

(define (route-stats-app-phases route)
  "Return the phases ROUTE's handler timed itself (with (plucky web
timing)) as an alist ((NAME . HISTOGRAM) …) in the order first seen,
NAME a symbol, HISTOGRAM the nanoseconds of each request that had the
phase; '() when it timed none."
  (route-stats-app-phases* route))

(define (route-app-phase route name)
  ;; -> the histogram of the app phase NAME of ROUTE, made if new
  (let ((phases (route-stats-app-phases* route)))
    (cond
     ((assq name phases) => cdr)
     ((and (>= (length phases) max-app-phases) (not (eq? name 'other)))
      (route-app-phase route 'other))
     (else
      (let ((h (make-histogram)))
        (set-route-stats-app-phases! route (append phases (list (cons name h))))
        h)))))

;; What requests wait on, per route: at most MAX-WAITS (kind . label)
;; apart, the rest under (other . #f); a label is cut to
;; MAX-WAIT-LABEL-LENGTH characters.  An app that puts an id in its
;; labels ("user 17") still keeps a route's figures bounded.
(define max-waits 8)
(define max-wait-label-length 64)

(define (route-stats-waits route)
  "Return where the suspended requests of ROUTE waited: an alist (((KIND
. LABEL) . HISTOGRAM) …) in the order first seen, KIND a symbol (timer,
socket, thread, event, or other for those past `max-waits'), LABEL #f
or the string the handler named the wait with (cut to
`max-wait-label-length'), HISTOGRAM the nanoseconds each request that
had such waits spent in them; '() when none waited."
  (route-stats-waits* route))

(define (route-stats-suspended route)
  "Return the number of requests of ROUTE whose handler suspended: each
one is accounted for, never sampled."
  (histogram-count (route-stats-waited route)))

(define (wait-label label)
  ;; -> LABEL as kept: a string or #f
  (cond ((string? label) label)
        ((symbol? label) (symbol->string label))
        (else #f)))

(define (kept-label label)
  ;; -> LABEL cut to max-wait-label-length characters, "…" last
  (if (and label (> (string-length label) max-wait-label-length))
      (string-append (substring label 0 (- max-wait-label-length 1)) "…")
      label))

(define (wait-key? key kind label)
  ;; Whether KEY, a (kind . kept-label), is that of KIND and LABEL,
  ;; without cutting LABEL: nothing allocated per request.
  (and (eq? (car key) kind)
       (let ((kept (cdr key)))
         (cond
          ((not label) (not kept))
          ((not kept) #f)
          ((<= (string-length label) max-wait-label-length) (string=? kept label))
          (else (and (= (string-length kept) max-wait-label-length)
                     (string-prefix? kept label 0 (- max-wait-label-length 1))))))))

(define (route-wait route kind label)
  ;; -> the histogram of ROUTE's waits on KIND and LABEL, made if new
  (let lp ((waits (route-stats-waits* route)) (n 0))
    (cond
     ((null? waits)
      (if (and (>= n max-waits) (not (eq? kind 'other)))
          (route-wait route 'other #f)
          (let ((h (make-histogram)))
            (set-route-stats-waits! route
                                    (append (route-stats-waits* route)
                                            (list (cons (cons kind (kept-label label)) h))))
            h)))
     ((wait-key? (caar waits) kind label) (cdar waits))
     (else (lp (cdr waits) (+ n 1))))))

(define (route-stats-requests route)
  "Return the number of requests answered under ROUTE: the timed ones
with their weights, and the 5xx.  An estimate when the observer samples."
  (let ((codes (route-stats-codes route)))
    (+ (vector-ref codes 0) (vector-ref codes 1) (vector-ref codes 2)
       (vector-ref codes 3) (vector-ref codes 4) (vector-ref codes 5))))

(define (route-stats-allocated-per-request route)
  "Return the mean bytes allocated per request of ROUTE, from the
sampled requests, or #f when none was sampled."
  (let ((h (route-stats-allocated route)))
    (and (> (histogram-count h) 0) (histogram-mean h))))

;;;
;;; The observer
;;;

(define-record-type <observer>
  (%make-observer routes route-count max-routes route-of last-key last-route
                  write-route accept close write gc-pause gc-count gc-last-times
                  gc-last-time gc-minute-histograms gc-minute-keys tally series inbox started workers gc-hook
                  samples-per-second every last-answered apart weight
                  share memory members)
  observer?
  (routes observer-routes)                 ; hash table: name -> <route-stats>
  (route-count observer-route-count set-observer-route-count!)
  (max-routes observer-max-routes)
  (route-of observer-route-of)             ; #f or (request -> name or #f)
  ;; the last route looked up, to skip the hash table for a run of
  ;; requests to the same path (a benchmark; a busy page)
  (last-key observer-last-key set-observer-last-key!)
  (last-route observer-last-route set-observer-last-route!)
  (write-route observer-write-route set-observer-write-route!) ; route of the last answer
  (accept observer-accept)                 ; histograms, ns
  (close observer-close)
  (write observer-write)                   ; per answer
  (gc-pause observer-gc-pause)             ; CPU ns per collection
  (gc-count observer-gc-count set-observer-gc-count!)
  (gc-last-times observer-gc-last-times set-observer-gc-last-times!)
  (gc-last-time observer-gc-last-time set-observer-gc-last-time!)
  ;; The last minutes' collections, a ring indexed by the minute (seconds
  ;; since the epoch over 60) modulo its length: a histogram of CPU ns
  ;; per collection each, and the minute each holds (#f: none yet).
  (gc-minute-histograms observer-gc-minute-histograms) ; vector of histograms
  (gc-minute-keys observer-gc-minute-keys)             ; vector of minutes or #f
  ;; exact counts, kept by the loop: (plucky server tally)
  (tally observer-tally)
  (series observer-series)
  (inbox observer-inbox)                   ; <inbox>
  (started observer-started)               ; seconds since the epoch
  (workers observer-workers)               ; how many processes serve
  ;; the thunk on after-gc-hook, or #f once detached
  (gc-hook observer-gc-hook set-observer-gc-hook!)
  ;; Sampling (see `observe-request!'): the loop times one request in
  ;; EVERY, which weighs for itself and the requests answered since the
  ;; last one timed; EVERY is set each second so that about
  ;; SAMPLES-PER-SECOND requests a second are timed (#f: all), or fixed
  ;; (a number in SAMPLES-PER-SECOND's place: (fixed . N)).
  (samples-per-second observer-samples-per-second)
  (every observer-every set-observer-every!)
  ;; answers in the tally when the last timed one was accounted for
  (last-answered observer-last-answered set-observer-last-answered!)
  ;; answers since then accounted for apart, each with weight 1: the
  ;; 5xx, and the answers of requests that waited (`observe-wait!')
  (apart observer-apart set-observer-apart!)
  ;; the weight of the last request sampled, 0 when the last request
  ;; answered was not: its write is then not sampled either
  (weight observer-weight set-observer-weight!)
  ;; With several workers, a directory where each writes its figures
  ;; (see `observer-whole-server'), or #f
  (share observer-share)
  ;; #f for a worker's own observer (its memory is read when asked);
  ;; for the sum of several, their memory alist and, per worker, an
  ;; alist: pid, requests, memory, exited?
  (memory observer-memory-sum)
  (members observer-members))

(define* (make-observer #:key (max-routes 64) (route #f) (series-seconds 300)
                        (inbox-size 20) (workers 1) (samples-per-second 500)
                        (sample-every #f))
  "Return a new observer: the state behind `observer->hooks', the
status pages and the error inbox.  MAX-ROUTES bounds the routes kept
apart (the others are counted as \"(other)\"); ROUTE, if given, is a
procedure (ROUTE request) returning the route name of a request, or #f
to use its path.  SERIES-SECONDS is how many seconds of history the
time series keeps; INBOX-SIZE how many failed requests the inbox keeps.
WORKERS is the number of worker processes serving, shown on the status
page.  SAMPLES-PER-SECOND bounds the cost on a busy server: past that
many requests a second, one request in N is accounted for in full and
stands for the N (see `observe-request!'); #f accounts for every request.
SAMPLE-EVERY, if a number N, fixes the sampling at one request in N
whatever the rate (for benchmarks).  Installs a procedure on `after-gc-hook' that counts collections (see
`observer-detach!')."
  (let* ((stats (gc-stats))
         (observer (%make-observer (make-hash-table) 0 max-routes route #f #f #f
                                   (make-histogram) (make-histogram)
                                   (make-histogram) (make-histogram)
                                   0 (assq-ref stats 'gc-times)
                                   (assq-ref stats 'gc-time-taken)
                                   (make-gc-minute-histograms series-seconds)
                                   (make-vector (gc-minute-count series-seconds) #f)
                                   (make-tally) (make-series series-seconds)
                                   (make-inbox inbox-size) (current-time) workers #f
                                   (if sample-every (cons 'fixed sample-every) samples-per-second)
                                   (or sample-every 1) 0 0 0
                                   (and (> workers 1) (make-share-directory))
                                   #f #f))
         (hook (lambda () (observe-gc! observer))))
    (set-observer-gc-hook! observer hook)
    (add-hook! after-gc-hook hook)
    observer))

(define (observer-detach! observer)
  "Stop counting collections for OBSERVER: take its procedure off
`after-gc-hook', and tell handlers their phases are no longer taken,
so that an observer no longer used costs nothing."
  (want-handler-phases! #f)
  (let ((hook (observer-gc-hook observer)))
    (when hook
      (remove-hook! after-gc-hook hook)
      (set-observer-gc-hook! observer #f))))

;;; Collections per minute.  The time series holds the GC time of each
;;; second; the pauses' distribution needs a histogram, 2.5 KB: one a
;;; minute, for as many minutes as the series holds seconds.

(define (gc-minute-count series-seconds)
  (max 2 (quotient series-seconds 60)))

(define (make-gc-minute-histograms series-seconds)
  (let ((ring (make-vector (gc-minute-count series-seconds))))
    (do ((i 0 (+ i 1))) ((= i (vector-length ring)) ring)
      (vector-set! ring i (make-histogram)))))

(define (gc-minute-histogram! observer minute)
  ;; -> the histogram of MINUTE in OBSERVER's ring, emptied first if it
  ;; held an older minute
  (let* ((keys (observer-gc-minute-keys observer))
         (slot (modulo minute (vector-length keys)))
         (histogram (vector-ref (observer-gc-minute-histograms observer) slot)))
    (unless (eqv? (vector-ref keys slot) minute)
      (histogram-reset! histogram)
      (vector-set! keys slot minute))
    histogram))

(define* (observer-gc-minutes observer #:optional (now (current-time)))
  "Return OBSERVER's collections of the last minutes, newest first: a list
of (START . HISTOGRAM), START the minute's first second since the epoch,
HISTOGRAM the CPU ns of each collection in that minute (empty for a
minute without any), one entry for each minute the ring holds, the
current one (as of NOW, seconds) first."
  (let* ((keys (observer-gc-minute-keys observer))
         (length (vector-length keys))
         (minute (quotient now 60)))
    (map (lambda (age)
           (let* ((m (- minute age))
                  (slot (modulo m length)))
             (cons (* 60 m)
                   (if (eqv? (vector-ref keys slot) m)
                       (vector-ref (observer-gc-minute-histograms observer) slot)
                       (make-histogram)))))
         (iota length))))

(define (gc-recent-summary minutes)
  "Return an alist of the collections in the first two of MINUTES (as
`observer-gc-minutes' returns them: this minute and the one before):
count, and p50, p99 and max CPU ns per collection (#f when none)."
  (let ((h (fold (lambda (minute into) (histogram-merge! into (cdr minute)))
                 (make-histogram) (list-head minutes (min 2 (length minutes))))))
    (let ((n (histogram-count h)))
      `((count . ,n)
        (p50 . ,(and (> n 0) (histogram-quantile h 0.5)))
        (p99 . ,(and (> n 0) (histogram-quantile h 0.99)))
        (max . ,(and (> n 0) (histogram-max h)))))))

(define (observe-gc! observer)
  "Account for the collections since the last call: their number and GC
CPU time (`gc-stats' gc-time-taken).  Called from `after-gc-hook'."
  (let* ((stats (gc-stats))
         (times (assq-ref stats 'gc-times))
         (taken (assq-ref stats 'gc-time-taken))
         (n (- times (observer-gc-last-times observer)))
         (ns (- taken (observer-gc-last-time observer))))
    (when (> n 0)
      ;; Collections the hook did not run between are shared evenly.
      (histogram-add-n! (observer-gc-pause observer) (quotient ns n) n)
      (histogram-add-n! (gc-minute-histogram! observer (quotient (now-second) 60))
                        (quotient ns n) n)
      (set-observer-gc-count! observer (+ n (observer-gc-count observer)))
      (set-observer-gc-last-times! observer times)
      (set-observer-gc-last-time! observer taken)
      (let* ((series (observer-series observer))
             (second (now-second)))
        (advance-series! series second)
        (let ((slot (modulo second (series-seconds series))))
          (vector-set! (series-gc-ns series) slot
                       (+ ns (vector-ref (series-gc-ns series) slot)))
          (vector-set! (series-gc-count series) slot
                       (+ n (vector-ref (series-gc-count series) slot))))))))

(define (observer-advance! observer)
  "Bring OBSERVER's time series up to the current second (a page shows
seconds without requests as such)."
  (advance-series! (observer-series observer) (now-second)))

(define (declare-route! name)
  "Account the request being handled under the route NAME (a string)
rather than its path: call it from a handler, for example with the name
of the pattern that matched (\"/post/:id\"), so that paths with ids in
them do not each make a route.  The same as `note-request-route!' of
(plucky server), which (plucky web router) calls."
  (note-request-route! name))

;; The body of the request being handled, for the inbox (see
;; `note-request-body!'), and the request it belongs to.
(define current-request #f)
(define current-body #f)

(define (note-request-body! request body)
  "Remember BODY as the body of REQUEST, for the error inbox to keep
should REQUEST fail.  (plucky observe status)'s wrapper calls it."
  (set! current-request request)
  (set! current-body body)
  ;; phases a handler timed for a request that was not accounted for
  ;; must not count under this one
  (take-handler-phases!)
  ;; a name declared by the last handler, whose request was not timed,
  ;; must not name this one
  (take-request-route!))

(define (noted-request)
  "Return the request last given to `note-request-body!', or #f once it
has been accounted for."
  current-request)

(define (noted-body)
  "Return the body last given to `note-request-body!'."
  current-body)

(define (observer-route observer name)
  "Return the <route-stats> of route NAME, or #f."
  (hash-ref (observer-routes observer) name))

(define (observer-all-routes observer)
  "Return the routes of OBSERVER as a list of <route-stats>, busiest
first."
  (sort (hash-map->list (lambda (k v) v) (observer-routes observer))
        (lambda (a b) (> (route-stats-requests a) (route-stats-requests b)))))

(define (observer-requests observer)
  "Return the number of requests OBSERVER's routes account for: an
estimate when it samples, and short of the requests answered since the
last one timed (see `observer-answered' for the exact count)."
  (hash-fold (lambda (k v sum) (+ sum (route-stats-requests v)))
             0 (observer-routes observer)))

(define (observer-answered observer)
  "Return the exact number of answers the loop gave, of any status, as
counted in OBSERVER's tally."
  (let ((tally (observer-tally observer)))
    (let lp ((class 0) (sum 0))
      (if (= class 6) sum (lp (+ class 1) (+ sum (vector-ref tally class)))))))

(define (observer-answered-by-class observer class)
  "Return the exact number of answers of status CLASS (1 for 1xx … 5
for 5xx, 0 for other codes) the loop gave."
  (vector-ref (observer-tally observer) class))

(define (observer-bytes observer)
  "Return the exact bytes of all the answers the loop gave, heads and
bodies."
  (vector-ref (observer-tally observer) tally-bytes))

(define (observer-accepted observer)
  "Return the number of connections accepted (exact)."
  (vector-ref (observer-tally observer) tally-accepted))

(define (observer-closed observer)
  "Return the number of connections closed (exact)."
  (vector-ref (observer-tally observer) tally-closed))

(define (observer-http2-answers observer)
  "Return the number of answers given over HTTP/2 (exact)."
  (vector-ref (observer-tally observer) tally-http2))

(define (observer-memory observer)
  "Return the memory alist of OBSERVER's process (see `process-memory'),
or, for the figures of several workers (`observer-whole-server'), the
sums of theirs."
  (or (observer-memory-sum observer) (process-memory)))

(define (route-for observer key)
  ;; -> the <route-stats> for KEY, made if there is room
  (if (and (observer-last-key observer) (string=? key (observer-last-key observer)))
      (observer-last-route observer)
      (let* ((routes (observer-routes observer))
             (route (or (hash-ref routes key)
                        (if (< (observer-route-count observer) (observer-max-routes observer))
                            (let ((route (make-route-stats key)))
                              (hash-set! routes key route)
                              (set-observer-route-count! observer
                                                         (+ 1 (observer-route-count observer)))
                              route)
                            (or (hash-ref routes "(other)")
                                (let ((route (make-route-stats "(other)")))
                                  ;; "(other)" is allowed beyond the bound.
                                  (hash-set! routes "(other)" route)
                                  route))))))
        (set-observer-last-key! observer key)
        (set-observer-last-route! observer route)
        route)))

(define (route-key observer request code)
  (cond
   ((take-request-route!) => identity)
   ((not request) "(refused)")
   ((eqv? code 404) "(not found)")
   ((and (observer-route-of observer) ((observer-route-of observer) request)))
   (else (uri-path (request-uri request)))))

;; Sampling.  Full accounting (route lookup, five histograms, the time
;; series: Guile's JIT makes several machine instructions of each Scheme
;; operation) and the loop's timing are together a large share of a hello
;; world's request (bench/instructions, INSTRUCTIONS_MODES).  So on a busy server the loop
;; times one request in EVERY (its tally's countdown, which this observer
;; resets) and only counts the others, exactly, in the tally.  A timed
;; request is accounted for in full with a weight: the answers since the
;; last timed one.  Totals are the tally's, exact; per-route splits,
;; percentiles and means are estimates from about SAMPLES-PER-SECOND
;; samples a second, plenty for p99.9 over a minute.  An answer of 5xx is
;; always accounted for, with weight 1, timed or not, and goes to the
;; inbox; so is every request while the server is not busy (EVERY is 1),
;; and every request whose handler suspended (`observe-wait!').

(define (observe-request! observer request code read parse handler serialise allocated)
  (cond
   ((>= code 500)
    ;; a failure: for itself only.  Timed (PARSE a number), it took the
    ;; place of the request the countdown picked, and the next is timed
    ;; instead (the countdown stays at or below 0).
    (set-observer-weight! observer (if parse 1 0))
    (set-observer-apart! observer (+ 1 (observer-apart observer)))
    (account! observer request code read parse handler serialise allocated 1))
   (else
    (let* ((answered (observer-answered observer))
           (weight (- answered (observer-last-answered observer)
                      (observer-apart observer))))
      (vector-set! (observer-tally observer) tally-countdown (observer-every observer))
      (set-observer-last-answered! observer answered)
      (set-observer-apart! observer 0)
      ;; at least 1: called by hand, without a loop filling the tally
      (let ((weight (max 1 weight)))
        (set-observer-weight! observer weight)
        (account! observer request code read parse handler serialise allocated
                  weight))))))

(define-syntax-rule (add-weighted! histogram value weight)
  (if (eqv? weight 1)
      (histogram-add! histogram value)
      (histogram-add-n! histogram value weight)))

(define (account-app-phases! route phases handler weight)
  ;; PHASES, ((name . ns) …), those the handler timed; what of HANDLER
  ;; they leave unmarked is the app's own too (its routing, middleware,
  ;; code not marked)
  (let lp ((phases phases) (marked 0))
    (if (null? phases)
        (add-weighted! (route-stats-unmarked route) (max 0 (- handler marked)) weight)
        (let ((ns (max 0 (cdar phases))))
          (add-weighted! (route-app-phase route (caar phases)) ns weight)
          (lp (cdr phases) (+ marked ns))))))

(define (add-latency! series service weight)
  ;; Count WEIGHT requests of SERVICE ns in this second's latency buckets.
  (let ((i (+ (coarse-base (series-slot series)) (ash (value->bucket service) -2)))
        (latency (series-latency series)))
    (vector-set! latency i (+ weight (vector-ref latency i)))))

(define (account! observer request code read parse handler serialise allocated weight)
  (let* ((route (route-for observer (route-key observer request code)))
         (app-phases (take-handler-phases!))
         (service (and parse (+ read parse handler serialise)))
         (codes (route-stats-codes route))
         (class (status-class code))
         (series (observer-series observer))
         (second (now-second)))
    (vector-set! codes class (+ weight (vector-ref codes class)))
    (when parse
      ;; timed (an untimed 5xx has no times)
      (add-weighted! (route-stats-read route) read weight)
      (add-weighted! (route-stats-parse route) parse weight)
      (add-weighted! (route-stats-handler route) handler weight)
      (add-weighted! (route-stats-serialise route) serialise weight)
      (add-weighted! (route-stats-service route) service weight)
      (when allocated
        ;; the loop measures one timed request in 16: weighed as sampled here
        (add-weighted! (route-stats-allocated route) allocated weight))
      (when app-phases
        (account-app-phases! route app-phases handler weight))
      (set-observer-write-route! observer route))
    (unless (eqv? second (series-now series))
      (advance-series! series second)
      (adjust-sampling! observer))
    (let ((slot (series-slot series)))
      (vector-set! (series-requests series) slot
                   (+ weight (vector-ref (series-requests series) slot)))
      (when service
        (add-latency! series service weight))
      (when (>= code 500)
        (vector-set! (series-errors series) slot
                     (+ 1 (vector-ref (series-errors series) slot)))
        (inbox-add-failure! (observer-inbox observer) request
                            (and (eq? request current-request) current-body)
                            code (let ((now (gettimeofday)))
                                   (+ (car now) (/ (cdr now) 1e6)))
                            (route-stats-name route))))
    (set! current-request #f)
    (set! current-body #f)))

;; Requests that wait.  The loop times none of these (their handler runs
;; in pieces, over several turns of the loop), and tells #:on-wait of
;; each once it is answered: each is accounted for here, with weight 1,
;; so that a route that waits has exact figures of its waits whatever
;; the sampling.  After a route's first sight of a (kind . label),
;; accounting for a request allocates nothing: the histograms are
;; found by walking the route's short list, the label compared in place.

(define (observe-wait! observer request code waited computing service)
  ;; WAITED: (((kind . label) . ns) …), COMPUTING and SERVICE: ns (see
  ;; `ignore-wait' of (plucky server hooks)).  A 5xx was told to
  ;; #:on-request just before, which counted it under the route it found
  ;; then; any other code is counted here.  Its service time, weight 1,
  ;; goes with the timed requests' (the loop times none of these).
  (let ((route (if (and (>= code 500) (observer-last-route observer))
                   (observer-last-route observer)
                   (route-for observer (route-key observer request code)))))
    (unless (>= code 500)
      (count-apart! observer route code))
    (account-waits! route waited computing)
    (histogram-add! (route-stats-service route) service)
    (add-latency! (observer-series observer) service 1)))

(define (count-apart! observer route code)
  ;; An answer accounted for apart from the sampling, weight 1: in
  ;; ROUTE's codes and this second's requests; the next timed request
  ;; does not weigh for it.
  (let ((codes (route-stats-codes route))
        (class (status-class code))
        (series (observer-series observer))
        (second (now-second)))
    (vector-set! codes class (+ 1 (vector-ref codes class)))
    (set-observer-apart! observer (+ 1 (observer-apart observer)))
    (unless (eqv? second (series-now series))
      (advance-series! series second)
      (adjust-sampling! observer))
    (let ((slot (series-slot series)))
      (vector-set! (series-requests series) slot
                   (+ 1 (vector-ref (series-requests series) slot))))))

(define (account-waits! route waited computing)
  (let lp ((waited waited) (total 0))
    (if (null? waited)
        (begin
          (histogram-add! (route-stats-waited route) total)
          (histogram-add! (route-stats-computing route) (or computing 0)))
        (let* ((key (caar waited))
               (ns (max 0 (cdar waited)))
               (kind (if (symbol? (car key)) (car key) 'other)))
          (histogram-add! (route-wait route kind (wait-label (cdr key))) ns)
          (lp (cdr waited) (+ total ns))))))

(define (adjust-sampling! observer)
  ;; At a new second: sample one request in (requests of the last second
  ;; / samples wanted a second), at least one in one.
  (let ((wanted (observer-samples-per-second observer)))
    (when (number? wanted)
      (let* ((series (observer-series observer))
             (last (vector-ref (series-requests series)
                               (modulo (- (series-now series) 1) (series-seconds series))))
             (every (max 1 (quotient last wanted)))
             (tally (observer-tally observer)))
        (set-observer-every! observer every)
        (when (> (vector-ref tally tally-countdown) every)
          (vector-set! tally tally-countdown every))))))

(define (observer-sampling observer)
  "Return one in how many requests OBSERVER accounts for in full now."
  (observer-every observer))

(define (observe-write! observer answers ns)
  ;; A write is sampled with the last answer it carries: with its weight.
  (let ((route (observer-write-route observer))
        (weight (observer-weight observer)))
    (cond
     ((eqv? weight 0) #t)
     ((and (eqv? answers 1) (eqv? weight 1))
      ;; the usual case when not busy: no division, no multiplication
      (histogram-add! (observer-write observer) ns)
      (when route (histogram-add! (route-stats-write route) ns)))
     ((> answers 0)
      (let ((each (quotient ns answers))
            (n (* answers weight)))
        (histogram-add-n! (observer-write observer) each n)
        (when route (histogram-add-n! (route-stats-write route) each n)))))))

(define shared-answers
  ;; answers counted when this process last shared its figures
  -1)

(define (observer-tick! observer)
  ;; About once a second: share this worker's figures with the others,
  ;; if it answered since it last did (or never did).
  (when (observer-share observer)
    (let ((answers (observer-answered observer)))
      (unless (= answers shared-answers)
        (observer-advance! observer)
        (share-figures! observer)
        (set! shared-answers answers)))))

(define (observer->hooks observer)
  "Return the hooks (plucky server hooks) to pass as `run-loop''s
#:observer so that it accounts for every request in OBSERVER: timed
answers and 5xx go to their routes' histograms, a handler's exception
and the stack where it was raised to the error inbox, timed writes,
accepts and closes to the worker's histograms, the waits of every
request whose handler suspended to its route; once a second the figures
are shared with the other workers."
  (want-handler-phases! #t)
  (make-observer-hooks
   ;; the vector the loop counts in and reads its countdown from
   #:tally (observer-tally observer)
   #:on-request (lambda (request code read parse handler serialise allocated)
                  (observe-request! observer request code read parse handler
                                    serialise allocated))
   #:on-failure (lambda (request exception stack)
                  (inbox-note-exception! (observer-inbox observer) request
                                         exception stack))
   #:on-write (lambda (answers ns) (observe-write! observer answers ns))
   ;; timed ones only; the loop counts them all in the tally
   #:on-accept (lambda (ns) (histogram-add! (observer-accept observer) ns))
   #:on-close (lambda (ns) (histogram-add! (observer-close observer) ns))
   #:on-tick (lambda () (observer-tick! observer))
   #:on-wait (lambda (request code waited computing service)
               (observe-wait! observer request code waited computing service))))

;;;
;;; Several workers: one server's figures (see (plucky observe share))
;;;


(define (observer->snapshot observer)
  ;; This worker's figures as data that `write' prints and `read' reads.
  (let ((series (observer-series observer))
        (h (lambda (histogram) (sparse histogram 0))))
    `((pid . ,(getpid))
      (time . ,(current-time))
      (started . ,(observer-started observer))
      (every . ,(observer-every observer))
      (tally . ,(vector->list (observer-tally observer)))
      (routes . ,(hash-map->list
                  (lambda (name route)
                    (list name (vector->list (route-stats-codes route))
                          (map h (list (route-stats-read route) (route-stats-parse route)
                                       (route-stats-handler route)
                                       (route-stats-serialise route)
                                       (route-stats-write route)
                                       (route-stats-service route)
                                       (route-stats-allocated route)))
                          ;; the app's phases: unmarked first
                          (cons (h (route-stats-unmarked route))
                                (map (lambda (phase) (cons (car phase) (h (cdr phase))))
                                     (route-stats-app-phases route)))
                          ;; the waits: all, computing, then each kind/label
                          (cons* (h (route-stats-waited route))
                                 (h (route-stats-computing route))
                                 (map (lambda (wait) (cons (car wait) (h (cdr wait))))
                                      (route-stats-waits route)))))
                  (observer-routes observer)))
      (accept . ,(h (observer-accept observer)))
      (close . ,(h (observer-close observer)))
      (write . ,(h (observer-write observer)))
      (gc-pause . ,(h (observer-gc-pause observer)))
      (gc-count . ,(observer-gc-count observer))
      (gc-minutes . ,(map (lambda (minute) (cons (car minute) (h (cdr minute))))
                          (observer-gc-minutes observer)))
      (series-now . ,(series-now series))
      (series . ,(series->data series sparse))
      (memory . ,(process-memory))
      ;; for the whole server's inbox: bodies left out, the size of the
      ;; file written each second bounded
      (failures . ,(map (lambda (failure)
                          (let ((sexp (failure->sexp failure)))
                            (cons 'failure (acons 'body #f (cdr sexp)))))
                        (inbox-failures (observer-inbox observer)))))))

(define (merge-failures observer snapshots)
  ;; -> an inbox of the failures of all SNAPSHOTS, newest first, each
  ;; named "PID.N"; this worker's are its own records, with their bodies
  (let ((pid (getpid)))
    (inbox-of
     (inbox-size (observer-inbox observer))
     (sort
      (append-map
       (lambda (snapshot)
         (let ((them (assq-ref snapshot 'pid)))
           (map (lambda (sexp)
                  (let* ((id (assq-ref (cdr sexp) 'id))
                         (own (and (eqv? them pid)
                                   (failure-ref id (observer-inbox observer))))
                         (sexp (if own (failure->sexp own) sexp)))
                    (sexp->failure
                     (cons 'failure
                           (acons 'id (format #f "~a.~a" them id) (cdr sexp))))))
                (or (assq-ref snapshot 'failures) '()))))
       snapshots)
      (lambda (a b) (> (failure-time a) (failure-time b)))))))

(define (share-figures! observer)
  "Write OBSERVER's figures to its share directory, for the worker that
answers a status page to add up; a file per worker, replaced whole."
  (write-share! (observer-share observer) (observer->snapshot observer)))

(define (observer-whole-server observer)
  "Return an observer holding the figures of all the workers that share
with OBSERVER (see `make-observer''s WORKERS), this one's as of now and
the others' as of their last tick, about a second ago at most, added
up, and their error inboxes in one (failure N of worker PID named
\"PID.N\"); or OBSERVER itself when it shares with none.  Exited workers'
figures stay in.  The result is for reading (status pages, metrics), not for a
loop."
  (if (not (observer-share observer))
      observer
      (begin
        (observer-advance! observer)
        (share-figures! observer)
        (merge-snapshots observer (read-shares (observer-share observer))))))

(define (snapshot-gc-minutes snapshot histogram)
  ;; -> the snapshot's (start . histogram) per minute, newest first ('()
  ;; from a worker older than them); HISTOGRAM makes one of its data
  (map (match-lambda ((start . data) (cons start (histogram data))))
       (or (assq-ref snapshot 'gc-minutes) '())))

;; A ring of minutes as `merge-gc-minutes' makes it: histograms and keys.
(define gc-minutes-histograms car)
(define gc-minutes-keys cdr)

(define (merge-gc-minutes length workers-minutes)
  ;; -> (histograms . keys), a ring of LENGTH minutes ending at the
  ;; newest minute of WORKERS-MINUTES (a list, per worker, of what
  ;; `snapshot-gc-minutes' returns), each the sum of the workers'
  (let* ((histograms (make-vector length #f))
         (keys (make-vector length #f))
         (newest (fold (lambda (minutes newest)
                         (if (null? minutes) newest (max newest (quotient (caar minutes) 60))))
                       (quotient (current-time) 60) workers-minutes)))
    (do ((i 0 (+ i 1))) ((= i length))
      (vector-set! histograms i (make-histogram)))
    (for-each
     (lambda (minutes)
       (for-each
        (match-lambda
          ((start . h)
           (let ((minute (quotient start 60)))
             (when (> minute (- newest length))
               (let ((slot (modulo minute length)))
                 (vector-set! keys slot minute)
                 (histogram-merge! (vector-ref histograms slot) h))))))
        minutes))
     workers-minutes)
    ;; minutes no worker had stay empty, but are this window's
    (do ((m (- newest length -1) (+ m 1))) ((> m newest))
      (vector-set! keys (modulo m length) m))
    (cons histograms keys)))

(define (merge-snapshots observer snapshots)
  ;; -> a new observer, the sum of SNAPSHOTS
  (let* ((get (lambda (snapshot key) (assq-ref snapshot key)))
         (own-series (observer-series observer))
         (seconds (series-seconds own-series))
         (now (apply max (current-time)
                     (filter-map (lambda (s) (get s 'series-now)) snapshots)))
         (series (let ((series (make-series seconds)))
                   ;; set first: series-merge! places slots by it
                   (set-series-now! series now)
                   (set-series-slot! series (modulo now seconds))
                   series))
         (routes (make-hash-table))
         (tally (make-vector tally-size 0))
         (histogram (lambda (data) (unsparse data)))
         (sum-histograms (lambda (key)
                           (fold (lambda (s into) (histogram-merge! into (histogram (get s key))))
                                 (make-histogram) snapshots)))
         (live (filter (lambda (s) (process-alive? (get s 'pid))) snapshots))
         ;; the per-minute histograms of all the workers, added up minute
         ;; by minute, in a ring as long as this worker's
         (gc-minutes (merge-gc-minutes
                      (vector-length (observer-gc-minute-keys observer))
                      (map (lambda (s) (snapshot-gc-minutes s histogram)) snapshots)))
         (memory-sum
          (map (lambda (key)
                 (cons key (fold (lambda (s sum) (+ sum (or (assq-ref (get s 'memory) key) 0)))
                                 0 live)))
               '(heap-size heap-free-size heap-total-allocated rss))))
    (for-each
     (lambda (snapshot)
       (for-each (lambda (i n) (vector-set! tally i (+ n (vector-ref tally i))))
                 (iota tally-size) (get snapshot 'tally))
       (vector-set! tally tally-countdown 0)
       (for-each
        (match-lambda
          ;; WAITS: ((waited computing . by-what)), or '() in the
          ;; snapshot of a worker older than them
          ((name codes histograms (unmarked . app-phases) . waits)
           (let ((route (or (hash-ref routes name)
                            (let ((route (make-route-stats name)))
                              (hash-set! routes name route)
                              route))))
             (for-each (lambda (i n)
                         (vector-set! (route-stats-codes route) i
                                      (+ n (vector-ref (route-stats-codes route) i))))
                       (iota 6) codes)
             (for-each (lambda (into data) (histogram-merge! into (histogram data)))
                       (list (route-stats-read route) (route-stats-parse route)
                             (route-stats-handler route) (route-stats-serialise route)
                             (route-stats-write route) (route-stats-service route)
                             (route-stats-allocated route))
                       histograms)
             (histogram-merge! (route-stats-unmarked route) (histogram unmarked))
             (for-each (match-lambda
                         ((phase . data)
                          (histogram-merge! (route-app-phase route phase) (histogram data))))
                       app-phases)
             (for-each (match-lambda
                         ((waited computing . by-what)
                          (histogram-merge! (route-stats-waited route) (histogram waited))
                          (histogram-merge! (route-stats-computing route) (histogram computing))
                          (for-each (match-lambda
                                      (((kind . label) . data)
                                       (histogram-merge! (route-wait route kind label)
                                                         (histogram data))))
                                    by-what)))
                       waits))))
        (get snapshot 'routes))
       ;; the series: a slot holds the second of the merged window it
       ;; stands for only if the worker had reached that second
       (let ((their-now (get snapshot 'series-now)))
         (when their-now
           (series-merge! series (get snapshot 'series) their-now unsparse))))
     snapshots)
    (%make-observer routes (hash-count (const #t) routes) (observer-max-routes observer)
                    #f #f #f #f
                    (sum-histograms 'accept) (sum-histograms 'close)
                    (sum-histograms 'write) (sum-histograms 'gc-pause)
                    (fold (lambda (s sum) (+ sum (get s 'gc-count))) 0 snapshots)
                    0 0 (gc-minutes-histograms gc-minutes) (gc-minutes-keys gc-minutes)
                    tally series (merge-failures observer snapshots)
                    (apply min (observer-started observer)
                           (map (lambda (s) (get s 'started)) snapshots))
                    (length live) #f
                    #f (apply max 1 (map (lambda (s) (or (get s 'every) 1)) snapshots)) 0 0 0
                    #f memory-sum
                    (map (lambda (s)
                           `((pid . ,(get s 'pid))
                             (requests . ,(fold + 0 (list-head (get s 'tally) 6)))
                             (time . ,(get s 'time))
                             (memory . ,(get s 'memory))
                             (gc-recent . ,(gc-recent-summary
                                            (snapshot-gc-minutes s histogram)))
                             (exited? . ,(not (memq s live)))))
                         (sort snapshots (lambda (a b) (< (get a 'pid) (get b 'pid))))))))

;;; (plucky observe accounting) ends here
