#!/usr/bin/python3
# bench/upstream.d/hold-client.py --- the connections of bench/upstream's memory test
#
# Copyright (C) 2026 the plucky authors
# SPDX-License-Identifier: LGPL-3.0-or-later
#
# Usage: hold-client.py PORT CONNECTIONS
#
# Steered by lines on stdin, it answers on stdout:
#   (start)  opens CONNECTIONS keep-alive connections to 127.0.0.1:PORT,
#            each sends GET /ok and reads the response; then prints
#            "idle N" (N: the connections that got their response) and
#            leaves them idle;
#   "hold"   each connection sends GET /hold (a handler that waits 30 s)
#            and does not read; prints "sent N";
#   "close"  (or end of input) closes them all, prints "closed", exits.
# Raw asyncio streams rather than an HTTP client: the client must cost
# less than the server it measures, 10,000 connections at a time.
import asyncio
import sys

REQUEST = "GET {} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


async def open_idle(port, limit):
    async with limit:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(REQUEST.format("/ok").encode())
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        await reader.readexactly(length)
        return reader, writer


async def main():
    port, count = int(sys.argv[1]), int(sys.argv[2])
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    # At most 256 connections being opened at a time: the listener's
    # backlog is not what this measures.
    limit = asyncio.Semaphore(256)
    results = await asyncio.gather(*(open_idle(port, limit) for _ in range(count)),
                                   return_exceptions=True)
    conns = [r for r in results if not isinstance(r, BaseException)]
    errors = [r for r in results if isinstance(r, BaseException)]
    print("idle", len(conns), flush=True)
    if errors:
        print("errors", len(errors), repr(errors[0]), file=sys.stderr, flush=True)
    while True:
        line = (await stdin.readline()).decode().strip()
        if line == "hold":
            for _, writer in conns:
                writer.write(REQUEST.format("/hold").encode())
            await asyncio.gather(*(w.drain() for _, w in conns), return_exceptions=True)
            print("sent", len(conns), flush=True)
        else:                           # "close" or end of input
            for _, writer in conns:
                writer.close()
            await asyncio.gather(*(w.wait_closed() for _, w in conns), return_exceptions=True)
            print("closed", flush=True)
            return


asyncio.run(main())
