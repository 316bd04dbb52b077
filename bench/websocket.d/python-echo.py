#!/usr/bin/python3
# bench/websocket.d/python-echo.py PORT: the peer of bench/websocket, an
# echo server with Debian's python3-websockets (asyncio, one process).
import asyncio, sys
from websockets.server import serve

async def echo(ws):
    async for message in ws:
        await ws.send(message)

async def main():
    async with serve(echo, "127.0.0.1", int(sys.argv[1]), compression=None,
                     ping_interval=None, max_queue=None):
        await asyncio.Future()

asyncio.run(main())
