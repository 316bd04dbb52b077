"""bench/news-votes.py --- logged-in clients voting at once, for bench/news

Copyright (C) 2026 the plucky authors
SPDX-License-Identifier: LGPL-3.0-or-later

Usage: news-votes.py BASE-URL CLIENTS SECONDS FIRST-ID LAST-ID PREFIX

CLIENTS clients, each on its own keep-alive connection to 127.0.0.1,
sign up as PREFIX-N (through the login page's CSRF token, as a browser
would), then vote up the items FIRST-ID..LAST-ID in an order of their
own until SECONDS have passed or they have voted on every one.  Prints
one line of JSON: the votes the server accepted (a 303), those it
refused (by status), the 99th percentile of a vote's time, the seconds
the voting took, and votes per second.
bench/news then counts the votes in the database: none may be lost.
"""

import asyncio
import json
import random
import re
import sys
import time
from urllib.parse import quote, urlsplit


class Connection:
    def __init__(self, host, port):
        self.host, self.port = host, port

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def request(self, method, path, cookie=None, form=None):
        body = b""
        headers = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        if cookie:
            headers.append(f"Cookie: {cookie}")
        if form is not None:
            body = "&".join(f"{quote(k)}={quote(v)}" for k, v in form).encode()
            headers.append("Content-Type: application/x-www-form-urlencoded")
            headers.append(f"Content-Length: {len(body)}")
        self.writer.write(("\r\n".join(headers) + "\r\n\r\n").encode() + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        fields = [line.split(":", 1) for line in lines[1:] if ":" in line]
        length = sum(int(v) for k, v in fields if k.lower() == "content-length")
        data = await self.reader.readexactly(length) if length else b""
        cookies = [v.strip() for k, v in fields if k.lower() == "set-cookie"]
        return status, cookies, data.decode("utf-8", "replace")


def session_cookie(cookies, old):
    for c in cookies:
        m = re.match(r"(session=[^;]*)", c)
        if m:
            return m.group(1)
    return old


async def client(base, n, ids, prefix, tally, gate):
    url = urlsplit(base)
    conn = Connection(url.hostname, url.port)
    await conn.open()
    path = url.path
    status, cookies, page = await conn.request("GET", path + "login")
    cookie = session_cookie(cookies, None)
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    status, cookies, _ = await conn.request(
        "POST", path + "signup", cookie,
        [("name", f"{prefix}{n}"), ("password", "bench password 12345"), ("csrf", csrf)])
    if status != 303:
        raise RuntimeError(f"signup of {prefix}{n}: {status}")
    cookie = session_cookie(cookies, cookie)
    deadline = await gate.arrive()
    order = list(ids)
    random.Random(n).shuffle(order)
    for item in order:
        start = time.monotonic()
        if start >= deadline:
            break
        status, cookies, _ = await conn.request(
            "POST", path + "vote", cookie,
            [("id", str(item)), ("dir", "up"), ("whence", "news"), ("csrf", csrf)])
        cookie = session_cookie(cookies, cookie)
        tally[status] = tally.get(status, 0) + 1
        tally["times"].append(time.monotonic() - start)
    conn.writer.close()


class Gate:
    """Every client signs up first; the clock starts when the last has."""

    def __init__(self, clients, seconds):
        self.waiting, self.seconds = clients, seconds
        self.open = asyncio.Event()

    async def arrive(self):
        self.waiting -= 1
        if self.waiting == 0:
            self.start = time.monotonic()
            self.open.set()
        await self.open.wait()
        return self.start + self.seconds


async def main():
    base, clients, seconds, first, last, prefix = sys.argv[1:7]
    clients, seconds = int(clients), float(seconds)
    ids = range(int(first), int(last) + 1)
    tally = {"times": []}
    gate = Gate(clients, seconds)
    await asyncio.gather(*[client(base, n, ids, prefix, tally, gate)
                           for n in range(clients)])
    took = time.monotonic() - gate.start
    accepted = tally.get(303, 0)
    times = sorted(tally.pop("times"))
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))] if times else None
    print(json.dumps({"clients": clients, "accepted": accepted,
                      "refused": {str(k): v for k, v in tally.items() if k != 303},
                      "p99_ms": round(p99 * 1000, 1) if p99 is not None else None,
                      "seconds": round(took, 3),
                      "votes_per_second": round(accepted / took, 1)}))


if __name__ == "__main__":
    asyncio.run(main())
