#!/usr/bin/python3
# bench/websocket.d/client.py echo URL CONNECTIONS SECONDS
#   CONNECTIONS clients each send a 32-byte text message and wait for its
#   echo, again and again, for SECONDS; prints "messages/s p50_ms p99_ms".
# bench/websocket.d/client.py idle URL CONNECTIONS SECONDS
#   opens CONNECTIONS WebSockets, prints "open N" when they are, holds them
#   SECONDS, closes them.
# Raw sockets and frames rather than the websockets client: the load
# generator must cost less CPU than the servers it compares.
import asyncio, os, socket, sys, time

HEAD = (b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        b"Sec-WebSocket-Version: 13\r\n\r\n")
PAYLOAD = b"0123456789abcdef0123456789abcdef"
FRAME = bytes([0x81, 0x80 | len(PAYLOAD)]) + b"\0\0\0\0" + PAYLOAD  # mask 0

def parse(url):
    host, port = url.split("//")[1].split("/")[0].split(":")
    return host, int(port)

async def upgrade(host, port):
    r, w = await asyncio.open_connection(host, port)
    sock = w.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    w.write(HEAD)
    await r.readuntil(b"\r\n\r\n")
    return r, w

async def echo_client(host, port, stop, times):
    r, w = await upgrade(host, port)
    n = 2 + len(PAYLOAD)
    while time.monotonic() < stop:
        t = time.monotonic()
        w.write(FRAME)
        await r.readexactly(n)
        times.append(time.monotonic() - t)
    w.close()

async def echo(url, conns, seconds):
    host, port = parse(url)
    times = []
    start = time.monotonic()
    stop = start + seconds
    await asyncio.gather(*(echo_client(host, port, stop, times) for _ in range(conns)))
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
asyncio.run((echo if mode == "echo" else idle)(url, conns, seconds))
