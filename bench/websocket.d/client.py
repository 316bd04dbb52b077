#!/usr/bin/python3
# bench/websocket.d/client.py echo URL CONNECTIONS SECONDS [BYTES [deflate]]
#   CONNECTIONS clients each send a text message of BYTES (default 32)
#   and wait for its echo, again and again, for SECONDS; prints
#   "messages/s p50_ms p99_ms".  With deflate, the clients offer
#   permessage-deflate (client_no_context_takeover, so that each sends
#   the same compressed frame, deflated once here) and the server
#   compresses its echoes, which are read but not inflated.
# bench/websocket.d/client.py idle URL CONNECTIONS SECONDS
#   opens CONNECTIONS WebSockets, prints "open N" when they are, holds them
#   SECONDS, closes them.
# Raw sockets and frames rather than the websockets client: the load
# generator must cost less CPU than the servers it compares.
import asyncio, os, socket, sys, time, zlib

HEAD = (b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        b"Sec-WebSocket-Version: 13\r\n\r\n")
EXTENSION = b"Sec-WebSocket-Extensions: permessage-deflate; client_no_context_takeover\r\n"


def frame(first, payload):
    # a client frame, masked with the key 0 (so the payload is as is)
    n = len(payload)
    head = bytes([first, 0x80 | n]) if n < 126 else bytes([first, 0x80 | 126]) + n.to_bytes(2, "big")
    return head + b"\0\0\0\0" + payload


def message(size):
    # text that compresses as chat or JSON does, not as zeros
    words = b"plucky serves websocket messages on the event loop of each worker "
    return (words * (size // len(words) + 1))[:size]


def deflated(payload):
    d = zlib.compressobj(wbits=-15)
    return (d.compress(payload) + d.flush(zlib.Z_SYNC_FLUSH))[:-4]


def parse(url):
    host, port = url.split("//")[1].split("/")[0].split(":")
    return host, int(port)

async def upgrade(host, port, deflate=False):
    r, w = await asyncio.open_connection(host, port)
    sock = w.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    w.write(HEAD[:-2] + EXTENSION + b"\r\n" if deflate else HEAD)
    head = await r.readuntil(b"\r\n\r\n")
    if deflate and b"permessage-deflate" not in head:
        raise RuntimeError("permessage-deflate not agreed")
    return r, w

async def echo_client(host, port, stop, times, out, deflate):
    r, w = await upgrade(host, port, deflate)
    while time.monotonic() < stop:
        t = time.monotonic()
        w.write(out)
        head = await r.readexactly(2)
        n = head[1] & 0x7F
        if n == 126:
            n = int.from_bytes(await r.readexactly(2), "big")
        await r.readexactly(n)
        times.append(time.monotonic() - t)
    w.close()

async def echo(url, conns, seconds, size=32, deflate=False):
    host, port = parse(url)
    payload = message(size)
    out = frame(0xC1, deflated(payload)) if deflate else frame(0x81, payload)
    times = []
    start = time.monotonic()
    stop = start + seconds
    await asyncio.gather(*(echo_client(host, port, stop, times, out, deflate)
                           for _ in range(conns)))
    elapsed = time.monotonic() - start
    times.sort()
    q = lambda p: times[min(len(times) - 1, int(p * len(times)))] * 1000
    print(f"{len(times) / elapsed:.0f} {q(0.5):.2f} {q(0.99):.2f}")

async def idle(url, conns, seconds):
    host, port = parse(url)
    opened = []
    sem = asyncio.Semaphore(200)
    async def one():
        async with sem:
            opened.append(await upgrade(host, port))
    await asyncio.gather(*(one() for _ in range(conns)))
    print(f"open {len(opened)}", flush=True)
    await asyncio.sleep(seconds)
    for r, w in opened:
        w.close()

mode, url, conns, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
if mode == "echo":
    size = int(sys.argv[5]) if len(sys.argv) > 5 else 32
    asyncio.run(echo(url, conns, seconds, size, len(sys.argv) > 6 and sys.argv[6] == "deflate"))
else:
    asyncio.run(idle(url, conns, seconds))
