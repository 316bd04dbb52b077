#!/usr/bin/python3
# tests/web/websocket-deflate.py PORT: permessage-deflate (RFC 7692)
# against plucky's echo server (tests/web/websocket.scm), with Debian's
# python3-websockets, which offers it by default, and hand-made frames;
# print one line per check, "ok NAME" or "fail NAME: WHY".  Every wait
# is bounded.

import asyncio
import socket
import sys
import zlib

from websockets.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory

PORT = int(sys.argv[1])
URL = f"ws://127.0.0.1:{PORT}/echo"
results = []


def check(name, ok, why=""):
    results.append(f"ok {name}" if ok else f"fail {name}: {why}")


def agreed(ws):
    return ws.response_headers.get("Sec-WebSocket-Extensions")


async def echoes(ws, name):
    # Both ways, several messages, so that a context kept on one side
    # and not the other would garble the second.
    texts = ["hello", "hello", "hello, hello, hello", "é" * 20000, "hello"]
    for text in texts:
        await ws.send(text)
        got = await asyncio.wait_for(ws.recv(), 10)
        if got != text:
            check(name, False, f"{text[:20]!r} -> {got[:20]!r}")
            return
    data = bytes(range(256)) * 64
    await ws.send(data)
    got = await asyncio.wait_for(ws.recv(), 10)
    check(name, got == data, "binary differs")


async def default():
    async with connect(URL, max_size=None) as ws:
        check("offer accepted", (agreed(ws) or "").startswith("permessage-deflate"),
              agreed(ws))
        await echoes(ws, "echo with context takeover")


async def no_takeover():
    factory = ClientPerMessageDeflateFactory(server_no_context_takeover=True,
                                             client_no_context_takeover=True)
    async with connect(URL, extensions=[factory], max_size=None) as ws:
        a = agreed(ws) or ""
        check("no context takeover agreed",
              "server_no_context_takeover" in a and "client_no_context_takeover" in a, a)
        await echoes(ws, "echo without context takeover")


async def window_10():
    factory = ClientPerMessageDeflateFactory(server_max_window_bits=10)
    async with connect(URL, extensions=[factory], max_size=None) as ws:
        check("server_max_window_bits=10 agreed",
              "server_max_window_bits=10" in (agreed(ws) or ""), agreed(ws))
        await echoes(ws, "echo with a window of 2^10")


async def window_8():
    factory = ClientPerMessageDeflateFactory(server_max_window_bits=8)
    async with connect(URL, extensions=[factory], max_size=None) as ws:
        check("server_max_window_bits=8 declined", agreed(ws) is None, agreed(ws))
        await echoes(ws, "echo after a declined offer")


async def without():
    async with connect(URL, compression=None) as ws:
        check("no offer, no extension", agreed(ws) is None, agreed(ws))
        await echoes(ws, "echo uncompressed")


async def bomb():
    # Ten megabytes of zeros compress to a few kilobytes: under the
    # server's 64 KiB bound on the wire, far over it inflated.
    async with connect(URL, max_size=None) as ws:
        await ws.send(b"\x00" * (10 * 1024 * 1024))
        try:
            await asyncio.wait_for(ws.recv(), 10)
            check("deflate bomb: 1009", False, "echoed")
        except ConnectionClosed as e:
            check("deflate bomb: 1009", e.rcvd and e.rcvd.code == 1009, e)


def upgrade(extensions):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    s.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
              b"Sec-WebSocket-Extensions: " + extensions + b"\r\n"
              b"Sec-WebSocket-Version: 13\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    head, data = data.split(b"\r\n\r\n", 1)
    return s, head, data


def receive(s, data, n):
    while len(data) < n:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data[:n], data[n:]


def masked(first, payload):
    key = b"\x01\x02\x03\x04"
    body = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return bytes([first, 0x80 | len(payload)]) + key + body


def rfc_hello():
    # RFC 7692, 7.2.3.1 and 7.2.3.2: "Hello" compressed, then "Hello"
    # again compressed with the context of the first.  The server's
    # echoes are those very bytes: its deflater keeps its context too.
    s, head, data = upgrade(b"permessage-deflate")
    first = b"\xf2\x48\xcd\xc9\xc9\x07\x00"
    again = b"\xf2\x00\x11\x00\x00"
    s.sendall(masked(0xC1, first))
    got1, data = receive(s, data, 2 + len(first))
    s.sendall(masked(0xC1, again))
    got2, data = receive(s, data, 2 + len(again))
    s.close()
    check("the RFC's Hello echoed compressed", got1 == b"\xc1\x07" + first, got1)
    check("and again with the context kept", got2 == b"\xc1\x05" + again, got2)


def close_code(extensions, frame):
    s, head, data = upgrade(extensions)
    s.sendall(frame)
    while len(data) < 4:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    s.close()
    return int.from_bytes(data[2:4], "big") if data[:1] == b"\x88" else data[:8]


def raw_errors():
    got = close_code(b"permessage-deflate", masked(0xC2, b"\xff\xff\xff\xff\xff"))
    check("not deflate: 1007", got == 1007, got)
    got = close_code(b"x-unknown", masked(0xC1, b"\xf2\x48\xcd\xc9\xc9\x07\x00"))
    check("RSV1 without the extension: 1002", got == 1002, got)
    d = zlib.compressobj(wbits=-15)
    bad = d.compress(b"\xff\xfe") + d.flush(zlib.Z_SYNC_FLUSH)[:-4]
    got = close_code(b"permessage-deflate", masked(0xC1, bad))
    check("compressed text not UTF-8: 1007", got == 1007, got)


async def main():
    for test in (default, no_takeover, window_10, window_8, without, bomb):
        try:
            await asyncio.wait_for(test(), 30)
        except Exception as e:
            check(test.__name__, False, repr(e))
    for test in (rfc_hello, raw_errors):
        try:
            await asyncio.get_running_loop().run_in_executor(None, test)
        except Exception as e:
            check(test.__name__, False, repr(e))


asyncio.run(main())
for line in results:
    print(line)
