#!/usr/bin/python3
# bench/sse.d/client.py PORT PATH CONNECTIONS SECONDS HOLD
#   Opens CONNECTIONS event streams (GET PATH, HTTP/1.1) on 127.0.0.1:PORT
#   and prints "open N errors E" once every one is open or has failed.
#   Then it counts, for SECONDS, the events ("data: N MS\n\n") each
#   stream receives, and prints one line:
#     window EVENTS_PER_S COMPLETE STREAMS ERRORS DROPPED P50_MS P99_MS CPU
#            PERIOD_MEAN_MS PERIOD_P99_MS
#   EVENTS_PER_S: events received in the window, all streams, per second
#   (ideal: one per stream); COMPLETE: the streams that received at least
#   SECONDS - 1 events in it, none missing from their numbering; ERRORS:
#   connections that failed or were not answered 200; DROPPED: streams
#   the server closed; P50_MS, P99_MS: from the time in the event to its
#   arrival here; CPU: this client's CPU time in the window, % of one CPU
#   (near 100, the client is the bottleneck); PERIOD_*: the time between
#   a stream's consecutive events by their timestamps (ideal: 1000).  It keeps reading for HOLD
#   more seconds (while bench/sse measures hello beside the streams),
#   closes every stream and prints "closed".
# Raw sockets (asyncio protocols): the client must cost less CPU than the
# server it measures.
import asyncio, re, resource, sys, time

EVENT = re.compile(rb"data: (\d+) (\d+)\n\n")
state = {"measuring": False, "delays": [], "periods": [], "dropped": 0, "errors": 0}


class Stream(asyncio.Protocol):
    def __init__(self, request):
        self.request = request
        self.buffer = b""
        self.head = False
        self.count = 0                  # events in the window
        self.last = None                # the last event's number
        self.stamp = None               # the last event's time, ms
        self.gaps = 0                   # events missing from the numbering
        self.closing = False
        self.ok = True

    def connection_made(self, transport):
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data):
        buffer = self.buffer + data
        if not self.head:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                self.buffer = buffer
                return
            if not buffer.startswith(b"HTTP/1.1 200"):
                state["errors"] += 1
                self.ok = False
                self.transport.close()
                return
            self.head = True
            buffer = buffer[end + 4:]
        end = 0
        now = time.time() * 1000
        measuring = state["measuring"]
        for m in EVENT.finditer(buffer):
            n, stamp = int(m.group(1)), int(m.group(2))
            if self.last is not None and n != self.last + 1:
                if measuring:
                    self.gaps += 1
            if measuring:
                self.count += 1
                state["delays"].append(now - stamp)
                if self.last is not None and n == self.last + 1:
                    state["periods"].append(stamp - self.stamp)
            self.last, self.stamp = n, stamp
            end = m.end()
        # Keep what may begin an event; chunk framing between events is skipped.
        self.buffer = buffer[end:][-256:]

    def connection_lost(self, exc):
        if not self.closing and self.ok:
            state["dropped"] += 1


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def main(port, path, conns, seconds, hold):
    loop = asyncio.get_running_loop()
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".encode()
    streams = []
    gate = asyncio.Semaphore(200)       # connections being opened at once

    async def one():
        async with gate:
            try:
                _, s = await asyncio.wait_for(
                    loop.create_connection(lambda: Stream(request), "127.0.0.1", port), 10)
                streams.append(s)
            except (OSError, asyncio.TimeoutError):
                state["errors"] += 1

    await asyncio.gather(*(one() for _ in range(conns)))
    print(f"open {len(streams)} errors {state['errors']}", flush=True)
    cpu0, t0 = cpu(), time.monotonic()
    state["measuring"] = True
    await asyncio.sleep(seconds)
    state["measuring"] = False
    elapsed, used = time.monotonic() - t0, cpu() - cpu0
    total = sum(s.count for s in streams)
    complete = sum(1 for s in streams
                   if s.ok and s.gaps == 0 and s.count >= seconds - 1
                   and not s.transport.is_closing())
    delays, periods = sorted(state["delays"]), sorted(state["periods"])
    q = lambda xs, p: xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")
    mean = sum(periods) / len(periods) if periods else float("nan")
    print(f"window {total / elapsed:.0f} {complete} {len(streams)} {state['errors']} "
          f"{state['dropped']} {q(delays, 0.5):.0f} {q(delays, 0.99):.0f} {100 * used / elapsed:.0f} "
          f"{mean:.0f} {q(periods, 0.99):.0f}", flush=True)
    state["delays"] = []
    await asyncio.sleep(hold)
    for s in streams:
        s.closing = True
        s.transport.close()
    await asyncio.sleep(0.5)
    print("closed", flush=True)


port, path, conns, seconds, hold = sys.argv[1:6]
asyncio.run(main(int(port), path, int(conns), float(seconds), float(hold)))
