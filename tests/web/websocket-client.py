#!/usr/bin/python3
# tests/web/websocket-client.py PORT: talk to plucky's WebSocket echo
# server (tests/web/websocket.scm) with Debian's python3-websockets and raw
# sockets; print one line per check, "ok NAME" or "fail NAME: WHY".
# Every wait is bounded.

import asyncio
import socket
import struct
import sys

from websockets.client import connect
from websockets.exceptions import ConnectionClosed

PORT = int(sys.argv[1])
URL = f"ws://127.0.0.1:{PORT}/echo"
results = []


def check(name, ok, why=""):
    results.append(f"ok {name}" if ok else f"fail {name}: {why}")


async def echo():
    async with connect(URL, max_size=None) as ws:
        await ws.send("hello")
        got = await asyncio.wait_for(ws.recv(), 5)
        check("echo text", got == "hello", repr(got))
        await ws.send(b"\x00\x01\xff")
        got = await asyncio.wait_for(ws.recv(), 5)
        check("echo binary", got == b"\x00\x01\xff", repr(got))
        big = "é" * 30000
        await ws.send(big)
        got = await asyncio.wait_for(ws.recv(), 10)
        check("echo 60 kB", got == big, len(got))
        await ws.send(["frag", "ment", "ed ✓"])
        got = await asyncio.wait_for(ws.recv(), 5)
        check("fragmented message reassembled", got == "fragmented ✓", repr(got))
        pong = await ws.ping(b"abc")
        await asyncio.wait_for(pong, 5)
        check("ping answered with pong", True)
        await ws.close(4000, "done")
        check("close code echoed", ws.close_code == 4000, ws.close_code)


async def protocol():
    async with connect(URL, subprotocols=["nope", "chat"]) as ws:
        check("subprotocol chosen", ws.subprotocol == "chat", ws.subprotocol)


async def server_close():
    async with connect(URL) as ws:
        await ws.send("close me")
        try:
            await asyncio.wait_for(ws.recv(), 5)
            check("server closes with 4001", False, "a message came")
        except ConnectionClosed as e:
            check("server closes with 4001", e.rcvd and e.rcvd.code == 4001, e)


async def oversized():
    async with connect(URL, max_size=None) as ws:
        await ws.send(b"x" * (70 * 1024))
        try:
            await asyncio.wait_for(ws.recv(), 5)
            check("oversized message: 1009", False, "echoed")
        except ConnectionClosed as e:
            check("oversized message: 1009", e.rcvd and e.rcvd.code == 1009, e)


def raw(frames):
    """Upgrade a raw socket, send FRAMES, return the close code received."""
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    s.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
              b"Sec-WebSocket-Version: 13\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    head, data = data.split(b"\r\n\r\n", 1)
    s.sendall(frames)
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    s.close()
    if len(data) >= 4 and data[0] == 0x88:
        return struct.unpack(">H", data[2:4])[0]
    return ("no close frame", head[:40], data[:20])


def masked(opcode, payload, fin=True):
    key = b"\x01\x02\x03\x04"
    body = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return bytes([(0x80 if fin else 0) | opcode, 0x80 | len(payload)]) + key + body


async def main():
    for test in (echo, protocol, server_close, oversized):
        try:
            await asyncio.wait_for(test(), 20)
        except Exception as e:
            check(test.__name__, False, repr(e))
    for name, frames, code in (
            ("invalid UTF-8: 1007", masked(1, b"a\xffb"), 1007),
            ("invalid UTF-8 across fragments: 1007",
             masked(1, b"ok\xe2", fin=False) + masked(0, b"\x28"), 1007),
            ("unmasked frame: 1002", bytes([0x81, 2]) + b"hi", 1002),
            ("reserved bit: 1002", bytes([0xC1]) + masked(1, b"hi")[1:], 1002),
            ("opcode 3: 1002", masked(3, b"hi"), 1002),
            ("fragmented ping: 1002", masked(9, b"hi", fin=False), 1002)):
        try:
            got = await asyncio.get_running_loop().run_in_executor(None, raw, frames)
            check(name, got == code, got)
        except Exception as e:
            check(name, False, repr(e))


asyncio.run(main())
for line in results:
    print(line)
