#!/usr/bin/env python3
# tests/cluster/faults.py --- faults under write load, counted against PostgreSQL
#
# Copyright (C) 2026 the plucky authors
# SPDX-License-Identifier: LGPL-3.0-or-later
#
# Run by `scripts/cluster test' (make cluster-test) in the client namespace
# of a running cluster, with the variables `scripts/cluster env' prints.
#
# Clients (threads, each with its own cookie jar and keep-alive connection
# to HAProxy) sign up, then vote on the front page's stories and comment
# on them, signing up afresh every few comments (the site allows 20
# comments per user in ten minutes).  Every write carries a unique key:
# the username, the comment's text, the (user, story) of a vote.  A write
# is *acknowledged* when the site answered it as it answers success (a
# 303 to where that write leads); it is then recorded.  Any other answer,
# or none, is an error at that second; such a write may or may not be
# stored, and is not counted either way.
#
# Meanwhile the faults, one after the other, with the load on:
#   kill -9 of every process of web host 1, then its restart;
#   a rolling deploy, three times: SIGTERM to each host in turn (it
#   drains), restart;
#   web host 2's link down for 5 s, then up;
#   PostgreSQL's fast shutdown and restart.
# After each: every acknowledged write is in PostgreSQL exactly once
# (rows counted by their unique keys), every client is still logged in
# (its session lives in the database: a client whose host died goes on
# through another), and a line says how long clients saw errors and how
# many requests no host answered (the connection closed without an
# answer, or HAProxy's 502 for one): none may be during a rolling
# deploy.  The last line sums up; the exit status is 1 when a write was
# lost or duplicated, a session lost, a request of a deploy unanswered,
# or a fault's machinery failed.
#
# PLK_CLIENTS: the number of clients (12); PLK_FAULTS: the faults to
# inject, by name, in order (kill,deploy,deploy,deploy,link,db);
# PLK_VERBOSE=1: each error and each fault's step, with its time.

import collections
import http.client
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.parse

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
cluster = os.path.join(root, "scripts", "cluster")
lb = urllib.parse.urlsplit(os.environ["PLK_LB_URL"])
stats_url = urllib.parse.urlsplit(os.environ["PLK_STATS_URL"])
db_url = os.environ["PLK_DB_URL"]
hosts = int(os.environ["PLK_HOSTS"])
clients_n = int(os.environ.get("PLK_CLIENTS", "12"))
comments_per_user = 12            # under the site's 20 in ten minutes
run_id = "%04x" % random.randrange(0x10000)
password = "plk-cluster-test-password"
verbose = os.environ.get("PLK_VERBOSE") == "1"   # each error and its time

def address_pool():
    # "10.231.1-4.1-254" -> a generator of those addresses, round and round
    spec = os.environ.get("PLK_CLIENT_ADDRESSES")
    if not spec:
        while True:
            yield None
    a, b, c, d = spec.split(".")
    span = lambda part: range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1)
    while True:
        for third in span(c):
            for fourth in span(d):
                yield "%s.%s.%d.%d" % (a, b, third, fourth)


addresses = address_pool()
addresses_lock = threading.Lock()


def next_address():
    with addresses_lock:
        return next(addresses)


csrf_re = re.compile(r'name="csrf" value="([^"]+)"')
story_re = re.compile(r'<input type="hidden" name="id" value="(\d+)"')


def log(fmt, *args):
    print(fmt % args, flush=True)


class Ledger:
    """What the clients did: acknowledged writes by kind, and errors."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {"accounts": set(), "comments": set(), "votes": set()}
        self.errors = []                 # (time, what)
        self.requests = 0
        self.slow = []                   # (time, seconds): requests over a second
        self.sessions_lost = []          # (time, user, what)
        self.unanswered = []             # times of requests no host answered

    def ack(self, kind, key):
        with self.lock:
            self.acked[kind].add(key)

    def request(self, seconds):
        with self.lock:
            self.requests += 1
            if seconds > 1:
                self.slow.append((time.monotonic(), seconds))

    def no_answer(self):
        with self.lock:
            self.unanswered.append(time.monotonic())

    def error(self, what):
        with self.lock:
            self.errors.append((time.monotonic(), what))

    def session_lost(self, user, what):
        with self.lock:
            self.sessions_lost.append((time.monotonic(), user, what))

    def snapshot(self):
        with self.lock:
            return ({k: set(v) for k, v in self.acked.items()}, list(self.errors),
                    self.requests, list(self.sessions_lost), list(self.slow))

    def unanswered_between(self, start, end):
        with self.lock:
            return sum(1 for t in self.unanswered if start <= t <= end)


class Unexpected(Exception):
    pass


class Client(threading.Thread):
    def __init__(self, number, ledger, stop):
        super().__init__(daemon=True)
        self.number = number
        self.ledger = ledger
        self.stop = stop
        self.conn = None
        self.source = None               # this account's address
        self.cookies = {}
        self.user = None
        self.csrf = None
        self.users = 0
        self.seq = 0
        self.voted = set()
        self.failure = None

    # HTTP, one keep-alive connection, reopened after any failure
    def call(self, method, path, form=None):
        start = time.monotonic()
        try:
            return self.call_timed(method, path, form)
        finally:
            self.ledger.request(time.monotonic() - start)

    def call_timed(self, method, path, form):
        start = time.monotonic()
        if self.conn is None:
            self.conn = http.client.HTTPConnection(
                lb.hostname, lb.port or 80, timeout=15,
                source_address=(self.source, 0) if self.source else None)
        headers = {"Host": "news.test"}
        if self.cookies:
            headers["Cookie"] = "; ".join("%s=%s" % kv for kv in self.cookies.items())
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            self.conn.request(method, path, body, headers)
            response = self.conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as e:
            # the connection closed (or reset, or timed out) without an
            # answer: the host that had the request never answered it
            self.ledger.no_answer()
            self.conn.close()
            self.conn = None
            if verbose:
                log("  %.3f: %s %s: %s after %.3f s", time.monotonic(), method, path,
                    type(e).__name__, time.monotonic() - start)
            raise Unexpected("%s %s: %s" % (method, path, type(e).__name__))
        for header, value in response.getheaders():
            if header.lower() == "set-cookie":
                name, _, rest = value.partition("=")
                cookie_value = rest.split(";", 1)[0]
                if re.search(r"max-age=0|expires=thu, 01 jan 1970", value, re.I):
                    self.cookies.pop(name, None)
                else:
                    self.cookies[name] = cookie_value
        if response.status == 502:
            # HAProxy's answer when the host closed the request's
            # connection without one (its log says SH--)
            self.ledger.no_answer()
        if response.getheader("Connection", "").lower() == "close":
            self.conn.close()
            self.conn = None
        return response.status, response.getheader("Location", ""), data.decode("utf-8", "replace")

    def expect_redirect(self, what, status, location, to):
        if status != 303:
            raise Unexpected("%s: %s" % (what, status))
        if "login" in location and "login" not in to:
            # Sent to the login page: this client's session is gone.
            self.ledger.session_lost(self.user, what)
            raise Unexpected("%s: sent to %s" % (what, location))
        if to not in location:
            raise Unexpected("%s: %s to %s" % (what, status, location))

    def signup(self):
        self.cookies = {}
        self.voted = set()
        self.user = None
        # each account from an address of its own: the site allows 20
        # comments in ten minutes per address too
        self.source = next_address()
        if self.conn:
            self.conn.close()
            self.conn = None
        status, _, page = self.call("GET", "/login")
        m = csrf_re.search(page)
        if status != 200 or not m:
            raise Unexpected("GET /login: %s" % status)
        self.users += 1
        name = "pk%s%s_%d" % (run_id, chr(ord("a") + self.number), self.users)
        status, location, _ = self.call("POST", "/signup",
                                        {"name": name, "password": password, "csrf": m.group(1)})
        self.expect_redirect("signup", status, location, "news")
        self.ledger.ack("accounts", name)
        self.user = name
        self.comments = 0

    def front_page(self):
        status, _, page = self.call("GET", "/news")
        if status != 200:
            raise Unexpected("GET /news: %s" % status)
        if "logout" not in page:
            self.ledger.session_lost(self.user, "front page")
            raise Unexpected("front page: logged out")
        m = csrf_re.search(page)
        if m:
            self.csrf = m.group(1)
        return [int(i) for i in story_re.findall(page)]

    def vote(self, story):
        status, location, _ = self.call(
            "POST", "/vote", {"id": story, "dir": "up", "whence": "news", "csrf": self.csrf})
        self.voted.add(story)            # tried: never twice, acknowledged or not
        self.expect_redirect("vote", status, location, "news")
        self.ledger.ack("votes", (self.user, story))

    def comment(self, story):
        self.seq += 1
        text = "plk-c %s %s %d" % (run_id, self.user, self.seq)
        # the key a browser takes from the comment form (one a comment):
        # sent again, the same comment would be stored once
        key = "k%s%s%d" % (run_id, chr(ord("a") + self.number), self.seq)
        status, location, _ = self.call(
            "POST", "/comment", {"parent": story, "text": text, "csrf": self.csrf, "key": key})
        self.comments += 1
        self.expect_redirect("comment", status, location, "item?id=")
        self.ledger.ack("comments", text)

    def run(self):
        while not self.stop.is_set():
            try:
                if self.user is None or self.comments >= comments_per_user:
                    self.signup()
                stories = self.front_page()
                fresh = [s for s in stories if s not in self.voted]
                if fresh:
                    self.vote(random.choice(fresh))
                if stories:
                    self.comment(random.choice(stories))
            except Unexpected as e:
                self.ledger.error(str(e))
                time.sleep(0.05)          # not a busy loop while a fault lasts
            except Exception as e:       # a bug here: say it, end the test
                self.failure = repr(e)
                self.ledger.error("client bug: %r" % e)
                return


def psql(sql):
    done = subprocess.run(["psql", db_url, "-X", "-At", "-F", "\t", "-c", sql],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SystemExit("faults: psql: %s: %s" % (sql, done.stderr.strip()))
    out = done.stdout
    return [line.split("\t") for line in out.splitlines() if line]


def votes_user_column():
    # the column of votes that names the voter (a reserved word in SQL:
    # whatever the schema calls it, it is the one that is not these)
    columns = [r[0] for r in psql("SELECT column_name FROM information_schema.columns "
                                  "WHERE table_name = 'votes'")]
    rest = [c for c in columns if c not in ("item", "dir", "time", "ip")]
    if len(rest) != 1:
        raise SystemExit("faults: votes has columns %s: which one is the voter?" % columns)
    return rest[0]


def stored_counts(acked):
    """Compare the acknowledged writes with the rows: -> dict of
    (acknowledged, stored, lost, duplicated) by kind."""
    prefix = "pk" + run_id
    users = collections.Counter(r[0] for r in psql(
        "SELECT name FROM users WHERE name LIKE '%s%%'" % prefix))
    comments = collections.Counter(r[0] for r in psql(
        "SELECT text FROM items WHERE type = 'comment' AND text LIKE 'plk-c %s %%'" % run_id))
    column = votes_user_column()
    votes = collections.Counter((r[0], int(r[1])) for r in psql(
        'SELECT "%s", item FROM votes WHERE "%s" LIKE \'%s%%\'' % (column, column, prefix)))
    result = {}
    for kind, rows in (("accounts", users), ("comments", comments), ("votes", votes)):
        keys = acked[kind]
        stored = sum(1 for k in keys if rows[k] >= 1)
        duplicated = sum(rows[k] - 1 for k in keys if rows[k] > 1) + \
            sum(n - 1 for k, n in rows.items() if n > 1 and k not in keys)
        result[kind] = (len(keys), stored, len(keys) - stored, duplicated)
    return result


def haproxy_status():
    # -> {server: status} from HAProxy's CSV statistics
    conn = http.client.HTTPConnection(stats_url.hostname, stats_url.port, timeout=5)
    conn.request("GET", stats_url.path + ";csv")
    text = conn.getresponse().read().decode()
    conn.close()
    status = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) > 17 and fields[0] == "hosts" and fields[1].startswith("web"):
            status[fields[1]] = fields[17]
    return status


def wait_until(what, test, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if test():
                return
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.1)
    raise SystemExit("faults: %s: not after %s s" % (what, timeout))


def all_up():
    wait_until("HAProxy sees every host up",
               lambda: all(s == "UP" for s in haproxy_status().values()), 60)


def sh(*args):
    if verbose:
        log("  %.3f: cluster %s", time.monotonic(), " ".join(str(a) for a in args))
    subprocess.run([cluster] + [str(a) for a in args], check=True, timeout=120)


def kill_and_restart():
    sh("kill-host", 1)
    time.sleep(3)
    sh("start-host", 1)


def rolling_deploy():
    for i in range(1, hosts + 1):
        sh("stop-host", i)
        sh("start-host", i)
        wait_until("web%d back in HAProxy" % i,
                   lambda: haproxy_status().get("web%d" % i) == "UP", 30)


def cut_link():
    host = min(2, hosts)
    sh("link", host, "down")
    time.sleep(5)
    sh("link", host, "up")


def restart_database():
    sh("db-restart")


# (name, what it does, the procedure, whether every request must be
# answered meanwhile): a drain must cost no request; a host's death costs
# those it was carrying, a cut link may cost those it held
faults = [("kill", "kill -9 web host 1, restart", kill_and_restart, False),
          ("deploy", "rolling deploy: SIGTERM each host, restart", rolling_deploy, True),
          ("link", "web host %d's link down 5 s" % min(2, hosts), cut_link, False),
          ("db", "PostgreSQL fast shutdown, restart", restart_database, False)]
# PLK_FAULTS=deploy,deploy: these faults, in this order.  The default:
# each once, the rolling deploy three times (a worker killed undrained,
# now fixed, showed in about one deploy in six: tests/regress/
# sigterm-to-a-stopped-thread.scm)
by_name = {f[0]: f[1:] for f in faults}
chosen = os.environ.get("PLK_FAULTS", "kill,deploy,deploy,deploy,link,db").split(",")
unknown = [n for n in chosen if n not in by_name]
if unknown:
    raise SystemExit("faults: PLK_FAULTS: no fault %s (the faults: %s)"
                     % (", ".join(unknown), ", ".join(by_name)))
faults = [by_name[n] for n in chosen]


def error_window(errors, start, end):
    """-> (the seconds in [START, END] during which clients saw errors:
    from the first error to the last, at least 0.1 s when there is one;
    the number of errors; the commonest kinds)"""
    inside = [(t, w) for t, w in errors if start <= t <= end]
    if not inside:
        return 0.0, 0, []
    # a story's or an account's number is not a kind of error
    kinds = collections.Counter(re.sub(r"\d{4,}|_\d+", "N", w) for _, w in inside)
    return max(0.1, inside[-1][0] - inside[0][0]), len(inside), kinds.most_common(3)


def main():
    ledger = Ledger()
    stop = threading.Event()
    clients = [Client(i, ledger, stop) for i in range(clients_n)]
    for c in clients:
        c.start()
    all_up()
    time.sleep(5)                         # the load settles
    _, errors, _, _, _ = ledger.snapshot()
    failed = False
    if errors:
        log("before any fault: %d errors, e.g. %s", len(errors), errors[0][1])
        failed = True
    for name, fault, must_answer in faults:
        _, _, before, _, _ = ledger.snapshot()
        start = time.monotonic()
        fault()
        all_up()
        time.sleep(3)                     # the load goes on, errors settle
        end = time.monotonic()
        acked, errors, requests, lost_sessions, slow = ledger.snapshot()
        window, n, kinds = error_window(errors, start, end)
        slow = [s for t, s in slow if start <= t <= end]
        counts = stored_counts(acked)
        log("%s (%.0f s in all): errors for %.1f s (%d of %d requests%s); "
            "%d requests took over 1 s, the slowest %.1f s",
            name, end - start, window, n, requests - before,
            "; " + ", ".join("%s ×%d" % k for k in kinds) if kinds else "",
            len(slow), max(slow, default=0))
        unanswered = ledger.unanswered_between(start, end)
        log("  unanswered %d%s", unanswered, " (must be 0)" if must_answer else "")
        if must_answer and unanswered:
            failed = True
        for kind, (a, s, lost, dup) in counts.items():
            log("  %-8s acknowledged %d, stored %d, lost %d, duplicated %d", kind, a, s, lost, dup)
            if lost or dup:
                failed = True
        if lost_sessions:
            log("  sessions lost: %d, e.g. %s", len(lost_sessions), lost_sessions[0][1:])
            failed = True
    stop.set()
    for c in clients:
        c.join(20)
        if c.failure:
            log("client %d failed: %s", c.number, c.failure)
            failed = True
    acked, errors, requests, lost_sessions, _ = ledger.snapshot()
    counts = stored_counts(acked)
    total = [sum(v[i] for v in counts.values()) for i in range(4)]
    if min(len(acked[k]) for k in acked) == 0:
        log("faults: some kind of write was never acknowledged: %s",
            {k: len(v) for k, v in acked.items()})
        failed = True
    log("%d requests, %d writes; %s", requests, total[0],
        "FAILED" if failed or total[2] or total[3] else "passed")
    log("acknowledged %d, stored %d, lost %d, duplicated %d", *total)
    return 1 if failed or total[2] or total[3] else 0


if __name__ == "__main__":
    sys.exit(main())
