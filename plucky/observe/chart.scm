;;; (plucky observe chart) --- server-side SVG charts, as SXML

;; Copyright (C) 2026 the plucky authors
;; SPDX-License-Identifier: LGPL-3.0-or-later

;;; Commentary:
;;;
;;; The status page (plucky observe status) and `plucky bench' (plucky
;;; dev bench) draw their charts here, on the server, as SVG: no
;;; JavaScript, no stylesheet or font to fetch, so the page renders
;;; wherever it is opened and a chart saved from it stands alone.  Each
;;; procedure returns an SXML `svg' element; `sxml->svg-string' makes a
;;; standalone SVG file of one.
;;;
;;;   line-chart          series of (x . y) points on linear or log axes:
;;;                       throughput and latency over time, percentiles
;;;   stacked-bar-chart   one horizontal bar per row, cut into segments:
;;;                       microseconds per phase, per route
;;;
;;; Every data line is a <path class="series"> whose d attribute holds
;;; its points; the browser test (tests/observe/browser.scm) checks that
;;; they are there and not empty.
;;;
;;; Code:

(define-module (plucky observe chart)
  #:use-module (srfi srfi-1)
  #:use-module (ice-9 format)
  #:use-module (ice-9 match)
  #:use-module (sxml simple)
  #:export (line-chart
            stacked-bar-chart
            sxml->svg-string
            nice-ticks
            format-number
            number->fixed
            format-percentile
            format-ns
            format-bytes
            palette))

(define palette
  ;; Colour-blind-safe (Okabe and Ito), in the order series use them.
  '("#0072B2" "#E69F00" "#009E73" "#D55E00" "#CC79A7" "#56B4E9" "#F0E442" "#000000"))

;;;
;;; Numbers as people read them
;;;

;; The page is made of thousands of numbers: `format' would make a string
;; port, with its buffers, for each, megabytes a page; these build
;; strings directly.

(define (number->fixed x digits)
  "Return the real X written with DIGITS decimals (0: none, no point)."
  (let* ((scale (expt 10 digits))
         (n (inexact->exact (round (* (abs x) scale))))
         (sign (if (and (< x 0) (> n 0)) "-" "")))
    (if (zero? digits)
        (string-append sign (number->string n))
        (let* ((whole (quotient n scale))
               (fraction (number->string (remainder n scale))))
          (string-append sign (number->string whole) "."
                         (make-string (- digits (string-length fraction)) #\0)
                         fraction)))))


(define (format-number x)
  "Return X as a short string: at most 3 significant digits past the
units, thousands with k, millions with M."
  (define (fixed x digits)
    ;; X with at most DIGITS decimals, no trailing zero or point
    (if (zero? digits)
        (number->fixed x 0)
        (string-trim-right (string-trim-right (number->fixed x digits) #\0) #\.)))
  (let ((x (exact->inexact x)))
    (cond
     ((not (finite? x)) "-")
     ((>= (abs x) 1e9) (string-append (fixed (/ x 1e9) 1) "G"))
     ((>= (abs x) 1e6) (string-append (fixed (/ x 1e6) 1) "M"))
     ((>= (abs x) 1e4) (string-append (fixed (/ x 1e3) 0) "k"))
     ((>= (abs x) 1e3) (string-append (fixed (/ x 1e3) 1) "k"))
     ((= x (round x)) (fixed x 0))
     ((>= (abs x) 10) (fixed x 1))
     ((>= (abs x) 1) (fixed x 2))
     (else (fixed x 3)))))

(define (format-percentile q)
  "Return the fraction Q as a percentile label: 0.5 -> \"p50\", 0.999 ->
\"p99.9\", 0.9999 -> \"p99.99\"."
  (let ((text (number->fixed (* 100 q) 2)))
    (string-append "p" (string-trim-right (string-trim-right text #\0) #\.))))

(define (format-ns ns)
  "Return NS nanoseconds as a short duration: \"850 ns\", \"12.3 µs\",
\"4.56 ms\", \"1.20 s\"."
  (let ((ns (exact->inexact ns)))
    (cond
     ((< ns 1e3) (string-append (number->fixed ns 0) " ns"))
     ((< ns 1e4) (string-append (number->fixed (/ ns 1e3) 2) " µs"))
     ((< ns 1e6) (string-append (number->fixed (/ ns 1e3) 1) " µs"))
     ((< ns 1e7) (string-append (number->fixed (/ ns 1e6) 2) " ms"))
     ((< ns 1e9) (string-append (number->fixed (/ ns 1e6) 1) " ms"))
     (else (string-append (number->fixed (/ ns 1e9) 2) " s")))))

(define (format-bytes n)
  "Return N bytes as \"512 B\", \"13.5 KiB\", \"3.6 MiB\"."
  (let ((n (exact->inexact n)))
    (cond
     ((< n 1024) (string-append (number->fixed n 0) " B"))
     ((< n (* 1024 1024)) (string-append (number->fixed (/ n 1024) 1) " KiB"))
     ((< n (* 1024 1024 1024)) (string-append (number->fixed (/ n 1024 1024) 1) " MiB"))
     (else (string-append (number->fixed (/ n 1024 1024 1024) 2) " GiB")))))

;;;
;;; Axes
;;;

(define (nice-step span count)
  ;; A step of 1, 2 or 5 times a power of ten giving about COUNT ticks.
  (let* ((raw (/ span (max 1 count)))
         (magnitude (expt 10 (floor (/ (log raw) (log 10)))))
         (fraction (/ raw magnitude)))
    (* magnitude (cond ((<= fraction 1) 1) ((<= fraction 2) 2) ((<= fraction 5) 5) (else 10)))))

(define* (nice-ticks low high #:optional (count 5))
  "Return a list of round tick values covering LOW to HIGH, about COUNT
of them: multiples of 1, 2 or 5 times a power of ten."
  (let* ((low (exact->inexact low))
         (high (exact->inexact (if (<= high low) (+ low 1) high)))
         (step (nice-step (- high low) count))
         (first (* step (floor (/ low step))))
         (last (* step (ceiling (/ high step)))))
    (let lp ((t first) (acc '()))
      (if (> t (+ last (/ step 2)))
          (reverse acc)
          (lp (+ t step) (cons (if (< (abs t) (* step 1e-9)) 0. t) acc))))))

(define (log-ticks low high)
  ;; Powers of ten from below LOW to above HIGH (both > 0).
  (let* ((first (floor (/ (log low) (log 10))))
         (last (ceiling (/ (log high) (log 10)))))
    (let lp ((e first) (acc '()))
      (if (> e last)
          (reverse acc)
          (lp (+ e 1) (cons (expt 10. e) acc))))))

(define (fmt x)
  ;; A coordinate with at most one decimal: exact enough for a screen.
  (let ((text (number->fixed x 1)))
    (if (string-suffix? ".0" text)
        (substring text 0 (- (string-length text) 2))
        text)))

;;;
;;; Legends: rows of coloured squares and names, wrapped to a width
;;;

(define (legend-rows items x0 y0 max-width)
  ;; ITEMS: ((name colour) …) -> ((x y name colour) …)
  (let lp ((items items) (x x0) (row 0) (acc '()))
    (if (null? items)
        (reverse acc)
        (let* ((name (first (car items)))
               (w (+ 22 (* 6.2 (string-length name))))
               (wrap? (and (> (+ x w) (+ x0 max-width)) (> x x0)))
               (x (if wrap? x0 x))
               (row (if wrap? (+ row 1) row)))
          (lp (cdr items) (+ x w) row
              (cons (list x (+ y0 (* 16 row)) name (second (car items))) acc))))))

(define (legend-height legend)
  ;; -> rows
  (if (null? legend)
      0
      (+ 1 (quotient (- (apply max (map second legend)) (apply min (map second legend))) 16))))

(define (legend-sxml legend)
  (map (lambda (item)
         (let ((x (first item)) (y (second item)))
           `(g (@ (class "legend"))
               (rect (@ (x ,(fmt x)) (y ,y) (width 10) (height 10) (fill ,(fourth item))))
               (text (@ (x ,(fmt (+ x 13))) (y ,(+ y 9)) (fill "#333")) ,(third item)))))
       legend))

;;;
;;; Line charts
;;;

(define* (line-chart series #:key (width 640) (height 240) (title #f)
                     (x-label #f) (y-label #f) (y-log? #f) (x-scale 'linear)
                     (x-min #f) (x-max #f) (y-min #f) (y-max #f)
                     (x-tick-label format-number) (y-tick-label format-number)
                     (x-ticks #f) (area? #f) (id #f))
  "Return an SVG line chart as SXML.  SERIES is a list of (NAME COLOUR
POINTS), POINTS a list of (x . y) in increasing x, where a y of #f
breaks the line.  Y-LOG? draws y on a log scale (values <= 0 are left
out).  X-SCALE is 'linear or 'percentile, which spreads x in [0, 1) as
-log10(1 - x) so that 0.9, 0.99 and 0.999 are evenly apart.  X-MIN,
X-MAX, Y-MIN, Y-MAX fix the ranges, else they fit the data; X-TICKS
gives the x ticks as a list of values.  AREA? fills under the first
series.  X-TICK-LABEL and Y-TICK-LABEL turn a tick value into its text."
  (let* ((margin-left 58) (margin-right 12)
         (legend-top (if title 24 6))
         (legend (if (> (length series) 1)
                     (legend-rows (map (lambda (s) (list (first s) (second s))) series)
                                  margin-left legend-top (- width margin-left margin-right))
                     '()))
         (margin-top (+ legend-top (* 16 (legend-height legend)) 6))
         (margin-bottom (if x-label 40 24))
         (plot-w (- width margin-left margin-right))
         (plot-h (- height margin-top margin-bottom))
         (tx (case x-scale
               ((percentile) (lambda (x) (- (log10* (- 1 (min x 0.99999))))))
               (else (lambda (x) x))))
         (points (append-map (lambda (s) (filter (lambda (p) (and (cdr p) (or (not y-log?) (> (cdr p) 0))))
                                                 (third s)))
                             series))
         (xs (map car points))
         (ys (map cdr points))
         (x0 (or x-min (if (null? xs) 0 (apply min xs))))
         (x1 (or x-max (if (null? xs) 1 (apply max xs))))
         (x1 (if (<= x1 x0) (+ x0 1) x1))
         (y-data-min (if (null? ys) (if y-log? 1 0) (apply min ys)))
         (y-data-max (if (null? ys) 1 (apply max ys)))
         (y-ticks (if y-log?
                      (log-ticks (or y-min (max y-data-min 1e-9))
                                 (or y-max (max y-data-max (* 10 (max y-data-min 1e-9)))))
                      (nice-ticks (or y-min (min 0 y-data-min)) (or y-max y-data-max) 4)))
         (y0 (or y-min (first y-ticks)))
         (y1 (or y-max (last y-ticks)))
         (y1 (if (<= y1 y0) (+ y0 1) y1))
         (ty (if y-log? log10* identity))
         (sx (lambda (x) (+ margin-left (* plot-w (/ (- (tx x) (tx x0)) (- (tx x1) (tx x0)))))))
         (sy (lambda (y) (+ margin-top (* plot-h (- 1 (/ (- (ty y) (ty y0)) (- (ty y1) (ty y0))))))))
         (x-ticks (or x-ticks (nice-ticks x0 x1 6))))
    `(svg (@ (xmlns "http://www.w3.org/2000/svg")
             (class "chart") ,@(if id `((id ,id)) '())
             (viewBox ,(format #f "0 0 ~a ~a" width height))
             (width ,width) (height ,height)
             (font-family "system-ui, sans-serif") (font-size "11"))
          ,@(if title `((title ,title)) '())
          (rect (@ (x 0) (y 0) (width ,width) (height ,height) (fill "#ffffff")))
          ,@(if title
                `((text (@ (x ,margin-left) (y 16) (font-size "13") (font-weight "bold")
                           (fill "#222")) ,title))
                '())
          ;; grid and y ticks
          ,@(filter-map
             (lambda (t)
               (and (<= y0 t y1)
                    (let ((y (sy t)))
                      `(g (line (@ (x1 ,margin-left) (x2 ,(+ margin-left plot-w))
                                   (y1 ,(fmt y)) (y2 ,(fmt y))
                                   (stroke "#e4e4e4") (stroke-width "1")))
                          (text (@ (x ,(- margin-left 6)) (y ,(fmt (+ y 4)))
                                   (text-anchor "end") (fill "#555"))
                                ,(y-tick-label t))))))
             y-ticks)
          ;; x ticks
          ,@(filter-map
             (lambda (t)
               (and (<= x0 t x1)
                    (let ((x (sx t)))
                      `(g (line (@ (x1 ,(fmt x)) (x2 ,(fmt x))
                                   (y1 ,(+ margin-top plot-h)) (y2 ,(+ margin-top plot-h 4))
                                   (stroke "#888")))
                          (text (@ (x ,(fmt x)) (y ,(+ margin-top plot-h 15))
                                   (text-anchor "middle") (fill "#555"))
                                ,(x-tick-label t))))))
             x-ticks)
          (rect (@ (x ,margin-left) (y ,margin-top) (width ,plot-w) (height ,plot-h)
                   (fill "none") (stroke "#bbb")))
          ,@(if x-label
                `((text (@ (x ,(+ margin-left (/ plot-w 2))) (y ,(- height 6))
                           (text-anchor "middle") (fill "#333")) ,x-label))
                '())
          ,@(if y-label
                `((text (@ (x 12) (y ,(+ margin-top (/ plot-h 2)))
                           (transform ,(format #f "rotate(-90 12 ~a)" (fmt (+ margin-top (/ plot-h 2)))))
                           (text-anchor "middle") (fill "#333")) ,y-label))
                '())
          ;; the data
          ,@(append-map
             (lambda (s index)
               (match s
                 ((name colour points)
                  (let* ((clip (lambda (p) (and (cdr p) (or (not y-log?) (> (cdr p) 0))
                                                (<= x0 (car p) x1)
                                                (cons (sx (car p))
                                                      (sy (max y0 (min y1 (cdr p))))))))
                         (d (path-data (map clip points))))
                    (append
                     (if (and area? (= index 0) (not (string-null? d)))
                         (let ((runs (filter pair? (split-runs (map clip points)))))
                           (map (lambda (run)
                                  `(path (@ (class "area") (fill ,colour) (fill-opacity "0.15")
                                            (stroke "none")
                                            (d ,(string-append
                                                 (path-data run)
                                                 (format #f "L~a,~aL~a,~aZ"
                                                         (fmt (car (last run))) (fmt (+ margin-top plot-h))
                                                         (fmt (car (first run))) (fmt (+ margin-top plot-h))))))))
                                runs))
                         '())
                     `((path (@ (class "series") (data-name ,name) (fill "none")
                                (stroke ,colour) (stroke-width "1.8")
                                (stroke-linejoin "round") (d ,d)))))))))
             series (iota (length series)))
          ;; the legend
          ,@(legend-sxml legend))))

(define (log10* x) (/ (log (max x 1e-300)) (log 10)))

(define (split-runs points)
  ;; Lists of consecutive points that are not #f.
  (let lp ((points points) (run '()) (runs '()))
    (cond
     ((null? points) (reverse (if (null? run) runs (cons (reverse run) runs))))
     ((car points) (lp (cdr points) (cons (car points) run) runs))
     (else (lp (cdr points) '() (if (null? run) runs (cons (reverse run) runs)))))))

(define (path-data points)
  ;; "Mx,yLx,y…", a new M after each gap (#f).  A run of one point
  ;; becomes a short dash so that it shows.
  (string-concatenate
   (map (lambda (run)
          (if (null? (cdr run))
              (string-append "M" (fmt (- (caar run) 1.5)) "," (fmt (cdar run))
                             "L" (fmt (+ (caar run) 1.5)) "," (fmt (cdar run)))
              (string-concatenate
               (cons (string-append "M" (fmt (caar run)) "," (fmt (cdar run)))
                     (map (lambda (p) (string-append "L" (fmt (car p)) "," (fmt (cdr p))))
                          (cdr run))))))
        (split-runs points))))

;;;
;;; Stacked bars
;;;

(define* (stacked-bar-chart rows segments #:key (width 640) (title #f)
                            (value-label format-number) (unit "") (id #f)
                            (normalise? #f))
  "Return an SVG chart as SXML with one horizontal bar per row, cut into
segments.  ROWS is a list of (LABEL . VALUES), VALUES a list of numbers,
one per segment; SEGMENTS a list of (NAME COLOUR), in the same order.
Bars share one scale, or with NORMALISE? each fills the width, so that
rows of very different totals all show their shares.  Each row's total
is written after its bar and each wide enough segment's value inside
it, with UNIT."
  (let* ((label-w 150) (total-w 80) (bar-h 18) (gap 8)
         (top (if title 24 6))
         (legend (legend-rows segments label-w top (- width label-w 10)))
         (bars-top (+ top (* 16 (legend-height legend)) 4))
         (height (+ bars-top (* (length rows) (+ bar-h gap)) 4))
         (totals (map (lambda (row) (apply + (map (lambda (v) (max 0 v)) (cdr row)))) rows))
         (most (if (null? totals) 1 (max 1e-9 (apply max totals))))
         (plot-w (- width label-w total-w)))
    `(svg (@ (xmlns "http://www.w3.org/2000/svg")
             (class "chart") ,@(if id `((id ,id)) '())
             (viewBox ,(format #f "0 0 ~a ~a" width height))
             (width ,width) (height ,height)
             (font-family "system-ui, sans-serif") (font-size "11"))
          ,@(if title `((title ,title)) '())
          (rect (@ (x 0) (y 0) (width ,width) (height ,height) (fill "#ffffff")))
          ,@(if title
                `((text (@ (x 6) (y 16) (font-size "13") (font-weight "bold") (fill "#222"))
                        ,title))
                '())
          ,@(legend-sxml legend)
          ,@(append-map
             (lambda (row total i)
               (let ((y (+ bars-top (* i (+ bar-h gap))))
                     (scale (if normalise? (if (> total 0) total 1) most)))
                 (append
                  `((text (@ (x ,(- label-w 8)) (y ,(+ y 13)) (text-anchor "end") (fill "#222"))
                          ,(let ((label (car row)))
                             (if (> (string-length label) 24)
                                 (string-append (substring label 0 23) "…")
                                 label))))
                  (let lp ((values (cdr row)) (segments segments) (x label-w) (acc '()))
                    (if (or (null? values) (null? segments))
                        (reverse acc)
                        (let* ((value (max 0 (car values)))
                               (w (* plot-w (/ value scale)))
                               (text (string-append (value-label value) unit)))
                          (lp (cdr values) (cdr segments) (+ x w)
                              (if (> w 0)
                                  (append
                                   (if (> w (+ 8 (* 6 (string-length text))))
                                       `((text (@ (x ,(fmt (+ x (/ w 2)))) (y ,(+ y 13))
                                                  (text-anchor "middle") (fill "#fff"))
                                               ,text))
                                       '())
                                   (cons `(path (@ (class "bar") (fill ,(second (car segments)))
                                                   (d ,(format #f "M~a,~ah~av~ah~aZ"
                                                               (fmt x) y (fmt w) bar-h (fmt (- w)))))
                                                (title ,(format #f "~a: ~a" (first (car segments)) text)))
                                         acc))
                                  acc)))))
                  `((text (@ (x ,(fmt (+ label-w 6 (* plot-w (/ total scale))))) (y ,(+ y 13))
                             (fill "#222"))
                          ,(string-append (value-label total) unit))))))
             rows totals (iota (length rows))))))

;;;
;;; Output
;;;

(define (sxml->svg-string svg)
  "Return the SVG element SVG (SXML) as the text of a standalone SVG file."
  (call-with-output-string
    (lambda (port)
      (display "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" port)
      (sxml->xml svg port)
      (newline port))))

;;; (plucky observe chart) ends here
