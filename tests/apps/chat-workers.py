#!/usr/bin/python3
# tests/apps/chat-workers.py PORT [PREFIX]: apps/chat.scm across workers.
# Opens connections until two are on different workers (each asks
# PREFIX/worker on a keep-alive connection, then upgrades that very
# connection to the WebSocket), then each client says something and
# the other must hear it; an event stream on a third connection hears
# both.  Prints "ok NAME" or "fail NAME: WHY" per check.  Every wait is
# bounded.

import asyncio
import socket
import sys
import urllib.request

from websockets.client import connect

PORT = int(sys.argv[1])
PREFIX = sys.argv[2] if len(sys.argv) > 2 else "/"
results = []


def check(name, ok, why=""):
    results.append(f"ok {name}" if ok else f"fail {name}: {why}")


def on_worker():
    """A socket connected to the server, and the pid of its worker."""
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    s.sendall(f"GET {PREFIX}worker HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    head, body = data.split(b"\r\n\r\n", 1)
    length = int([line.split(b":")[1] for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:")][0])
    while len(body) < length:
        body += s.recv(4096)
    return s, int(body)


async def hear(ws, text):
    """Read WS until TEXT comes (the history may come first)."""
    while True:
        got = await asyncio.wait_for(ws.recv(), 10)
        if got == text:
            return True


async def main():
    first, pid1 = on_worker()
    second, pid2 = None, pid1
    for _ in range(200):
        s, pid = on_worker()
        if pid != pid1:
            second, pid2 = s, pid
            break
        s.close()
    check("two workers seen", second is not None, pid1)
    if second is None:
        return
    url = f"ws://127.0.0.1:{PORT}{PREFIX}ws"
    async with connect(url, sock=first) as a, connect(url, sock=second) as b:
        await a.send("from the first worker")
        check("a message crosses to the other worker",
              await hear(b, "from the first worker"))
        await b.send("from the second worker")
        check("and back", await hear(a, "from the second worker"))
    # The history reached both workers: a new client of either sees both.
    for _ in range(2):
        async with connect(url) as c:
            seen = set()
            try:
                while len(seen) < 2:
                    seen.add(await asyncio.wait_for(c.recv(), 5))
            except asyncio.TimeoutError:
                pass
            check("a new client sees both in its history",
                  {"from the first worker", "from the second worker"} <= seen, seen)


asyncio.run(asyncio.wait_for(main(), 60))
for line in results:
    print(line)
