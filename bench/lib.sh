# bench/lib.sh --- what the load scripts in bench/ share; sourced, not run
#
# Copyright (C) 2026 the plucky authors
# SPDX-License-Identifier: LGPL-3.0-or-later
#
# Commentary:
#
# Starting and stopping servers, finding free ports on 127.0.0.1, pinning
# (server on one CPU, load generator on another), describing the machine.
# The rules every load script keeps:
#   - only 127.0.0.1, on ports the kernel hands out as free;
#   - every server started here is remembered by PID and stopped by PID,
#     with its descendants (found through /proc), also on error or Ctrl-C;
#   - every load is bounded in time (wrk -d, ab -s, and `timeout' around both);
#   - readiness is polled with curl, never assumed after a fixed sleep.
#
# Code:

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$BENCH_DIR")

SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
READY_SECONDS=${READY_SECONDS:-10}

STARTED_PIDS=()                         # every server PID started here

### Output directory and clean-up

# bench_init NAME: make bench/out/NAME-STAMP for raw logs, install traps.
bench_init() {
  STAMP=$(date -u +%Y%m%d-%H%M%S)
  OUT="$ROOT/bench/out/$1-$STAMP"
  mkdir -p "$OUT"
  trap bench_cleanup EXIT
  trap 'echo "bench: interrupted; stopping the servers started" >&2; exit 130' INT TERM
  if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null 2>&1; then
    PIN_SERVER=(taskset -c "$SERVER_CPU")
    PIN_LOAD=(taskset -c "$LOAD_CPU")
    PINNING="server pinned to CPU $SERVER_CPU, load generator to CPU $LOAD_CPU (taskset)"
  else
    PIN_SERVER=(); PIN_LOAD=()
    PINNING="no pinning (fewer than 2 CPUs or no taskset): server and load share the CPUs"
  fi
}

bench_cleanup() {
  local pid
  if [ -n "${LOAD_PID:-}" ] && alive "$LOAD_PID"; then
    kill -TERM "$LOAD_PID" 2>/dev/null  # `timeout', which passes it on to wrk/ab
    wait "$LOAD_PID" 2>/dev/null
  fi
  for pid in "${STARTED_PIDS[@]}"; do stop_server "$pid"; done
  STARTED_PIDS=()
}

# run_load FILE COMMAND...: run the load generator COMMAND, its output in
# FILE; answer its exit status.  It runs in the background and we `wait':
# a trapped SIGINT interrupts `wait' at once, whereas for a foreground
# command bash runs no INT trap if the command exits normally (wrk and
# `timeout' catch SIGINT and do), and Ctrl-C would be lost.
run_load() {
  local file=$1 rc; shift
  "$@" >"$file" 2>&1 &
  LOAD_PID=$!
  wait "$LOAD_PID"; rc=$?
  LOAD_PID=""
  return "$rc"
}

### Load generators

# parse_wrk FILE -> "req/s|p50 ms|p99 ms|errors|detail", empty fields when
# the output holds no result.
parse_wrk() {
  awk '
    function ms(v,  n) {
      n = v + 0
      if (v ~ /us$/) return n / 1000
      if (v ~ /ms$/) return n
      if (v ~ /s$/)  return n * 1000
      if (v ~ /m$/)  return n * 60000
      if (v ~ /h$/)  return n * 3600000
      return n
    }
    / requests in /   { total = $1 }
    $1 == "50%"       { p50 = ms($2) }
    $1 == "99%"       { p99 = ms($2) }
    /^ *Socket errors:/ { gsub(",", ""); c = $4; r = $6; w = $8; t = $10 }
    /^ *Non-2xx or 3xx responses:/ { bad = $5 }
    /^Requests\/sec:/ { rps = $2 }
    END {
      if (rps == "") { print "||||no Requests/sec in output"; exit }
      errors = c + r + w + t + bad
      detail = ""
      if (c)   detail = detail " connect " c
      if (r)   detail = detail " read " r
      if (w)   detail = detail " write " w
      if (t)   detail = detail " timeout " t
      if (bad) detail = detail " non-2xx " bad
      if (detail != "") detail = "of " total " requests:" detail
      printf "%.0f|%.2f|%.2f|%d|%s\n", rps, p50, p99, errors, detail
    }' "$1"
}

### Processes

# descendants PID: print the PIDs of PID's children, grandchildren, ...
# One pass over /proc: a loaded machine forks slowly, and a walk that
# reread /proc for each child took minutes there.
descendants() {
  cat /proc/[0-9]*/stat 2>/dev/null | awk -v root="$1" '
    function walk(parent,  n, kids, i) {
      n = split(children[parent], kids, " ")
      for (i = 1; i <= n; i++) { print kids[i]; walk(kids[i]) }
    }
    {
      pid = $1
      # The command name may hold spaces and parentheses: cut after the last ")".
      rest = $0; sub(/.*\) /, "", rest); split(rest, field, " ")
      children[field[2]] = children[field[2]] " " pid
    }
    END { walk(root) }'
}

alive() { kill -0 "$1" 2>/dev/null; }

# server_pids PID: PID and its descendants.
server_pids() { echo "$1"; descendants "$1"; }

# stop_server PID: SIGTERM it, wait up to 5 s, then SIGKILL; then the same
# for any descendant it left behind.  Prints a warning for leftovers.
stop_server() {
  local pid=$1 kids k i
  alive "$pid" || return 0
  kids=$(descendants "$pid")
  kill -TERM "$pid" 2>/dev/null
  for i in $(seq 50); do alive "$pid" || break; sleep 0.1; done
  if alive "$pid"; then
    echo "bench: PID $pid ignored SIGTERM for 5 s; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
  for k in $kids; do
    for i in $(seq 20); do alive "$k" || break; sleep 0.1; done
    if alive "$k"; then
      echo "bench: PID $k (child of $pid) outlived its parent; sending SIGKILL" >&2
      kill -KILL "$k" 2>/dev/null
    fi
  done
}

# free_port: print a port on 127.0.0.1 that the kernel just gave out as free.
free_port() {
  guile --no-auto-compile -c '
    (let ((s (socket AF_INET SOCK_STREAM 0)))
      (bind s AF_INET INADDR_LOOPBACK 0)
      (display (sockaddr:port (getsockname s)))
      (close s))'
}

# start_server NAME PORT COMMAND...: start COMMAND pinned to the server CPU,
# logging to $OUT/NAME.log; set SERVER_PID.  Fails if something already
# answers on PORT, so that we never measure a stranger.
start_server() {
  local name=$1 port=$2; shift 2
  if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/"; then
    echo "bench: something already answers on 127.0.0.1:$port" >&2
    return 1
  fi
  "${PIN_SERVER[@]}" "$@" >"$OUT/$name.log" 2>&1 &
  SERVER_PID=$!
  STARTED_PIDS+=("$SERVER_PID")
}

# wait_ready PORT PID [PATH]: poll http://127.0.0.1:PORT/PATH (default /)
# with curl until it answers 200, for at most READY_SECONDS; fail early if
# PID dies.  On failure NOT_READY says why.
wait_ready() {
  local port=$1 pid=$2 path=${3:-/} deadline code="" rc
  deadline=$(( $(date +%s) + READY_SECONDS ))
  while [ "$(date +%s)" -le "$deadline" ]; do
    if ! alive "$pid"; then
      wait "$pid"; rc=$?
      NOT_READY="exited with status $rc before answering"
      return 1
    fi
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$port$path")
    [ "$code" = 200 ] && return 0
    sleep 0.1
  done
  NOT_READY="did not answer 200 within ${READY_SECONDS}s (last answer: ${code:-none})"
  return 1
}

# news_sign_up NAME BASE: sign NAME up on the news site at BASE (its
# root's URL, no slash at the end), through the login page's token; print
# the session cookie ("session=…").
news_sign_up() {
  local jar="$OUT/jar-$1" csrf
  csrf=$(curl -s -c "$jar" "$2/login" |
         sed -n 's/.*name="csrf" value="\([^"]*\)".*/\1/p' | head -n1)
  curl -s -o /dev/null -b "$jar" -c "$jar" \
       --data-urlencode "name=$1" --data-urlencode "password=bench password 12345" \
       --data-urlencode "csrf=$csrf" "$2/signup"
  awk '$6 == "session" { print "session=" $7 }' "$jar" | tail -n1
}

# rss_kib PID...: the sum of VmRSS (KiB) of the given processes.
rss_kib() {
  local total=0 pid v
  for pid in "$@"; do
    v=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
    total=$(( total + ${v:-0} ))
  done
  echo "$total"
}

# show_cmd ARG...: the command as one shell line, quoting what needs it.
show_cmd() {
  local arg out=""
  for arg in "$@"; do
    if [[ $arg =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then out+="$arg "
    else out+="'$arg' "; fi
  done
  echo "${out% }"
}

### Contention

# The CPUs are shared: other people's builds and loads may run during ours.
# Each load is bracketed with cpu_snapshot and cpu_others, which answers the
# share of the machine's CPU time (percent of all CPUs, steal included)
# that went to neither the server nor the load generator.  Interrupt and
# softirq time is left out on both sides: loopback TCP work lands there.

# machine_ticks: busy ticks of all CPUs (user, nice, system, steal).
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $9 }' /proc/stat; }

# process_ticks PID...: user + system ticks of the given live processes.
process_ticks() {
  local total=0 pid v
  for pid in "$@"; do
    v=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{ print $12 + $13 }')
    total=$(( total + ${v:-0} ))
  done
  echo "$total"
}

# read_children_ticks: set CHILDREN_TICKS to the user + system ticks of
# this shell's reaped children.  `times' must run in this very shell (a
# subshell has no children of its own), hence a file, not $(...).
read_children_ticks() {
  times >"$OUT/.times"
  CHILDREN_TICKS=$(awk -v hz="$(getconf CLK_TCK)" 'NR == 2 {
    split($1, u, /[ms]/); split($2, s, /[ms]/)
    printf "%d\n", (u[1] * 60 + u[2] + s[1] * 60 + s[2]) * hz }' "$OUT/.times")
}

# cpu_snapshot PID...: remember the counters, the PIDs being the server's.
cpu_snapshot() {
  SNAP_TIME=$EPOCHREALTIME
  SNAP_MACHINE=$(machine_ticks)
  SNAP_SERVER=$(process_ticks "$@")
  read_children_ticks
  SNAP_CHILDREN=$CHILDREN_TICKS
}

# cpu_others PID...: set CPU_OTHERS to the percent of all CPUs used by
# others since cpu_snapshot.  Call it in this shell, not in $(...).
cpu_others() {
  local now=$EPOCHREALTIME machine server
  machine=$(( $(machine_ticks) - SNAP_MACHINE ))
  server=$(( $(process_ticks "$@") - SNAP_SERVER ))
  read_children_ticks
  CPU_OTHERS=$(awk -v t0="$SNAP_TIME" -v t1="$now" -v hz="$(getconf CLK_TCK)" \
      -v n="$(nproc)" -v m="$machine" -v s="$server" \
      -v c="$(( CHILDREN_TICKS - SNAP_CHILDREN ))" 'BEGIN {
    others = m - s - c; if (others < 0) others = 0
    printf "%.0f%%\n", 100 * others / ((t1 - t0) * hz * n) }')
}

# wait_quiet: before a load, wait (at most QUIET_SECONDS, default 30) for a
# second in which the CPUs are at most 10% busy, so that a build or a load
# someone else started does not land in our figures.  Sets QUIET to how
# long it waited, or to a warning.
wait_quiet() {
  local limit=${QUIET_SECONDS:-30} waited=0 m0 m1 busy
  while :; do
    m0=$(machine_ticks); sleep 1; m1=$(machine_ticks)
    busy=$(( 100 * (m1 - m0) / ($(getconf CLK_TCK) * $(nproc)) ))
    if [ "$busy" -le 10 ]; then QUIET="${waited}s"; return 0; fi
    waited=$((waited + 1))
    if [ "$waited" -ge "$limit" ]; then
      QUIET="machine still ${busy}% busy after ${limit}s"
      echo "bench: the machine is still ${busy}% busy after ${limit}s; measuring anyway" >&2
      return 1
    fi
  done
}

### The machine

# machine_info: a Markdown list describing the machine and the tools.
machine_info() {
  echo "- machine: $(nproc) CPUs ($(grep -m1 '^model name' /proc/cpuinfo | sed 's/.*: //')), Linux $(uname -r)"
  echo "- guile: $(guile --version | head -n1)"
  echo "- nginx: $(nginx -v 2>&1 | sed 's/^nginx version: //')"
  echo "- wrk: $(wrk -v 2>&1 | head -n1 | awk '{ print $2 }')"
  echo "- ab: $(ab -V 2>&1 | head -n1 | sed 's/^This is //')"
  echo "- plucky: $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null)$(cd "$ROOT" && [ -n "$(git status --porcelain -- plucky bin web apps 2>/dev/null)" ] && echo ' plus uncommitted changes to plucky/ bin/ web/ apps/')"
  echo "- $PINNING"
}

# results_file: create bench/RESULTS.md with its introduction if missing;
# print its path.  BENCH_RESULTS overrides it (e.g. /dev/null for a try-out).
results_file() {
  local file=${BENCH_RESULTS:-$ROOT/bench/RESULTS.md}
  if [ ! -e "$file" ]; then
    cat >"$file" <<'EOF'
# plucky benchmark results

Every figure below was measured by a script in bench/ and written here by
it, with the date, the machine, and the exact commands it ran; none is typed
by hand.  A run replaces the section of its benchmark (bench/lib.sh's
`record_results'), so this file holds the latest run of each; earlier runs,
and analyses made by hand, are in git's history (`git log -p
bench/RESULTS.md'), and the figures a change is about are in the body of
its commit.  Servers listen on 127.0.0.1 only, on ports the kernel hands out as
free; the server runs pinned to one CPU and the load generator (wrk or ab)
to the other, so on a 2-CPU machine they do not fight over a core.  Ratios
compare servers measured in the same run, one after the other.

- `bench/hello` (what `make bench` runs): hello world on plucky (1 worker),
  Guile's built-in server (bench/builtin-hello.scm, the 2012 profile's
  handler) and nginx (1 worker); for each, wrk keep-alive, wrk with
  `Connection: close`, and ab (HTTP/1.0, a new connection per request).
  Latencies are wrk's/ab's p50 and p99.
- `bench/rss`: resident memory before and after a long keep-alive run,
  bytes allocated per request and collections per 1000 requests, read from
  the server's own `(gc-stats)` through a /gc route (bench/apps/).

The machine may be shared (other people's builds, tests and loads), so
each row also says what share of the CPUs' time went to processes other
than the server and the load generator during that load ("others' CPU");
the scripts wait up to 30 s for a quiet second before each load, and a row
with more than a few percent there is disturbed: compare runs, not rows.

Raw wrk/ab outputs and server logs of each run go to bench/out/ (not
committed).
EOF
  fi
  echo "$file"
}

# record_results REPORT: put the section in the file REPORT, which begins
# (after blank lines) with "## NAME, DATE…" or "## NAME — DATE…", into
# the results file in place of the sections of NAME already there (where
# the first of them was; at the end when there is none), so that the file
# keeps the latest run of each benchmark: its table, date and commands.
# Older runs live in git's history.  Headings inside ``` blocks are text.
record_results() {
  local report=$1 file heading name
  file=$(results_file)
  [ "$file" = /dev/null ] && return 0
  heading=$(grep -m1 '^## ' "$report")
  name=${heading#\#\# }
  name=${name%%, *}
  name=${name%% — *}
  if [ -z "$heading" ] || [ -z "$name" ]; then
    echo "record_results: $report has no '## NAME, DATE' heading" >&2
    return 1
  fi
  awk -v report="$report" -v name="$name" '
    function key(line,   s, i, j) {
      s = substr(line, 4)
      i = index(s, ", "); j = index(s, " — ")
      if (j && (!i || j < i)) i = j
      return i ? substr(s, 1, i - 1) : s
    }
    function put_report(   line, started) {
      started = 0
      while ((getline line < report) > 0) {
        if (!started && line !~ /^## /) continue
        started = 1
        print line
        last = line
      }
      close(report)
      if (last != "") print ""
      placed = 1
    }
    /^```/ { fenced = !fenced }
    !fenced && /^## / {
      skipping = (key($0) == name)
      if (skipping && !placed) put_report()
    }
    !skipping { print; last = $0 }
    END {
      if (!placed) {
        if (last != "") print ""
        put_report()
      }
    }' "$file" >"$file.new" && mv "$file.new" "$file"
}

# bench/lib.sh ends here
