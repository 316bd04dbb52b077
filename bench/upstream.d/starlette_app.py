# bench/upstream.d/starlette_app.py --- bench/upstream's rows on Starlette
#
# Copyright (C) 2026 the plucky authors
# SPDX-License-Identifier: LGPL-3.0-or-later
#
# Run it:  BENCH_MODE=sleep uvicorn starlette_app:app --workers 1 ...
#          BENCH_MODE=upstream UPSTREAM_URL=http://127.0.0.1:PORT/ uvicorn ...
#
# asyncio's idiom: async handlers that await.
#   sleep     await asyncio.sleep(0.05), then "ok";
#   upstream  GET UPSTREAM_URL with one aiohttp.ClientSession made at
#             start-up and shared, its connector allowing 1000 kept-alive
#             connections (as the Go app's Transport), then the
#             upstream's body.
# aiohttp's client rather than httpx's: under 100 concurrent requests
# httpx.AsyncClient's pool served 28 requests a second here (bench/upstream
# by hand, 2026-11-29), a limit of the client, not of the server.
import asyncio
import contextlib
import os

import aiohttp
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

MODE = os.environ.get("BENCH_MODE", "sleep")
UPSTREAM_URL = os.environ.get("UPSTREAM_URL")
session = None


async def sleep(request):
    await asyncio.sleep(0.05)
    return PlainTextResponse("ok")


async def upstream(request):
    async with session.get(UPSTREAM_URL) as response:
        return PlainTextResponse(await response.text())


@contextlib.asynccontextmanager
async def lifespan(app):
    global session
    connector = aiohttp.TCPConnector(limit=1000, limit_per_host=1000)
    async with aiohttp.ClientSession(connector=connector) as s:
        session = s
        yield


app = Starlette(routes=[Route("/", sleep if MODE == "sleep" else upstream)],
                lifespan=lifespan)
