"""tests/lib/cdp.py --- drive headless Chromium through the DevTools protocol

Copyright (C) 2026 the plucky authors
SPDX-License-Identifier: LGPL-3.0-or-later

Commentary:

The end-to-end tests of the apps click through pages as a person would:
load a page, type into its fields, press its buttons, follow the page
the server answers with, and take screenshots to look at.  This module
is the smallest client of the Chrome DevTools Protocol that does that,
over Debian's python3-websockets and Debian's chromium; no browser build
or driver is downloaded.

  async with Browser() as b:
      await b.goto("http://127.0.0.1:8080/news/")
      await b.fill("#title", "Hello")
      await b.submit("form.news button")       # waits for the next page
      text = await b.text("body")
      await b.screenshot("tests/out/news.png")

Every wait is bounded (TIMEOUT seconds); Chromium runs with a throw-away
profile and is stopped by its PID when the block ends.  Browser(home=DIR)
runs it with HOME=DIR, where a test may have put an NSS database that
trusts its own CA; `await b.new_tab()' gives a second page of the same
browser, with the same methods.

A scenario reports with check(WHAT, CONDITION, WHY), a line "ok - WHAT"
or "not ok - WHAT: WHY" each, which (tests lib command)'s
`run-browser-script' makes tests of; run(scenario, *args) runs it and
exits 1 if a check failed or a step raised.
"""

import asyncio
import base64
import copy
import itertools
import json
import os
import shutil
import subprocess
import tempfile

import websockets
import sys

TIMEOUT = 20

failures = 0


def check(what, condition, why=""):
    """Print whether WHAT holds (CONDITION true); WHY says what was seen."""
    global failures
    if condition:
        print(f"ok - {what}", flush=True)
    else:
        failures += 1
        print(f"not ok - {what}: {why}", flush=True)


def run(scenario, *args):
    """Run the coroutine function SCENARIO with ARGS; exit 0 if all checks held."""
    try:
        asyncio.run(scenario(*args))
    except Exception as e:  # a step that could not run is a failure
        check("the scenario ran to its end", False, repr(e))
    sys.exit(1 if failures else 0)


def trusting_home(ca):
    """A new HOME whose NSS database trusts CA for servers."""
    home = tempfile.mkdtemp(prefix="plucky-chromium-home-")
    db = "sql:" + os.path.join(home, ".pki", "nssdb")
    os.makedirs(os.path.join(home, ".pki", "nssdb"))
    subprocess.run(["certutil", "-N", "-d", db, "--empty-password"], check=True,
                   timeout=30)
    subprocess.run(["certutil", "-A", "-d", db, "-n", "plucky-test-ca",
                    "-t", "C,,", "-i", ca], check=True, timeout=30)
    return home


def find_chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, width=1200, height=900, home=None):
        self.width, self.height = width, height
        self.home = home
        self.ids = itertools.count(1)
        self.pending = {}
        self.events = asyncio.Queue()
        self.queues = {}                # session id -> its tab's events

    async def __aenter__(self):
        self.profile = tempfile.mkdtemp(prefix="plucky-chromium-")
        self.proc = subprocess.Popen(
            [find_chromium(), "--headless=new", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking",
             "--remote-debugging-address=127.0.0.1",
             "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}",
             f"--window-size={self.width},{self.height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=dict(os.environ, HOME=self.home) if self.home else None)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        while not os.path.exists(port_file) or os.path.getsize(port_file) == 0:
            if loop.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("chromium did not start")
            await asyncio.sleep(0.05)
        with open(port_file) as f:
            port, path = f.read().split("\n")[:2]
        self.ws = await websockets.connect(f"ws://127.0.0.1:{port}{path}",
                                           max_size=None)
        self.reader = asyncio.create_task(self._read())
        await self._open_page()
        return self

    async def _open_page(self):
        target = await self.send("Target.createTarget", {"url": "about:blank"})
        attached = await self.send("Target.attachToTarget",
                                   {"targetId": target["targetId"], "flatten": True})
        self.session = attached["sessionId"]
        self.queues[self.session] = self.events
        await self.send("Page.enable", session=True)
        await self.send("Runtime.enable", session=True)
        await self.send("Emulation.setDeviceMetricsOverride",
                        {"width": self.width, "height": self.height,
                         "deviceScaleFactor": 1, "mobile": False}, session=True)

    async def new_tab(self):
        """Return another page of this browser, driven as this one is."""
        tab = copy.copy(self)           # shares the connection and ids
        tab.events = asyncio.Queue()
        await tab._open_page()
        return tab

    async def __aexit__(self, *exc):
        self.reader.cancel()
        try:
            await self.ws.close()
        except Exception:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    async def _read(self):
        async for message in self.ws:
            data = json.loads(message)
            if "id" in data and data["id"] in self.pending:
                self.pending.pop(data["id"]).set_result(data)
            elif "method" in data:
                await self.queues.get(data.get("sessionId"), self.events).put(data)

    async def send(self, method, params=None, session=False):
        """Send METHOD with PARAMS; return its result or raise its error."""
        ident = next(self.ids)
        message = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        future = asyncio.get_running_loop().create_future()
        self.pending[ident] = future
        await self.ws.send(json.dumps(message))
        data = await asyncio.wait_for(future, TIMEOUT)
        if "error" in data:
            raise RuntimeError(f"{method}: {data['error']}")
        return data["result"]

    async def _drain_events(self):
        while not self.events.empty():
            self.events.get_nowait()

    async def _wait_event(self, name):
        async def wait():
            while True:
                event = await self.events.get()
                if event["method"] == name:
                    return event
        return await asyncio.wait_for(wait(), TIMEOUT)

    async def goto(self, url):
        """Load URL and wait until the page has loaded."""
        await self._drain_events()
        await self.send("Page.navigate", {"url": url}, session=True)
        await self._wait_event("Page.loadEventFired")

    async def eval(self, expression):
        """Return the value of the JavaScript EXPRESSION in the page."""
        result = await self.send("Runtime.evaluate",
                                 {"expression": expression,
                                  "returnByValue": True, "awaitPromise": True},
                                 session=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def fill(self, selector, value):
        """Type VALUE into the field SELECTOR names (its old value replaced)."""
        ok = await self.eval(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            f" if (!e) return false; e.focus(); e.value = {json.dumps(value)};"
            f" e.dispatchEvent(new Event('input', {{bubbles: true}})); return true; }})()")
        if not ok:
            raise RuntimeError(f"no field {selector}")

    async def submit(self, selector):
        """Click the button SELECTOR names and wait for the page that follows."""
        await self._drain_events()
        ok = await self.eval(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            f" if (!e) return false; e.click(); return true; }})()")
        if not ok:
            raise RuntimeError(f"no button {selector}")
        await self._wait_event("Page.loadEventFired")

    async def text(self, selector="body"):
        """Return the text the element SELECTOR names shows, or None."""
        return await self.eval(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            f" return e ? e.innerText : null; }})()")

    async def url(self):
        return await self.eval("location.href")

    async def screenshot(self, path):
        """Save a PNG of the page as it shows to PATH."""
        result = await self.send("Page.captureScreenshot", {"format": "png"},
                                 session=True)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(result["data"]))
