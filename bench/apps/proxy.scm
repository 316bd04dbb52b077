;;; bench/apps/proxy.scm --- plucky as a reverse proxy in front of one upstream
;;
;; For bench/proxy: `proxy-handler' to the origin in PLUCKY_BENCH_UPSTREAM
;; ("http://127.0.0.1:PORT"), with its defaults: Host kept,
;; X-Forwarded-For, X-Forwarded-Proto, Forwarded and Via added, upstream
;; connections kept alive.

(use-modules (plucky web proxy))

(proxy-handler (getenv "PLUCKY_BENCH_UPSTREAM"))
