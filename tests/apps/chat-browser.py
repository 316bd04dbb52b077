"""tests/apps/chat-browser.py --- the demo's chat over HTTPS in Chromium

Copyright (C) 2026 the plucky authors
SPDX-License-Identifier: LGPL-3.0-or-later

Usage: chat-browser.py BASE-URL CA-FILE OUT-DIR

BASE-URL is the demo served over HTTPS with a certificate CA-FILE signed.
Chromium is made to trust CA-FILE as a user would: an NSS database in a
throw-away HOME (certutil, from libnss3-tools), no flag that ignores
certificate errors.  Then the landing page, and the chat in two tabs:
each opens its WebSocket (wss://, compressed with permessage-deflate),
and what one tab says shows in the other; a third tab without WebSocket
falls back to server-sent events.  Prints a line per check, "ok
- WHAT" or "not ok - WHAT: WHY", and saves screenshots under OUT-DIR.
Exit status 0 when every check passed.
"""

import asyncio
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from cdp import Browser, check, run, trusting_home  # noqa: E402


async def until(tab, expression, seconds=15):
    """Wait until EXPRESSION is true in TAB; return whether it became so."""
    for _ in range(int(seconds * 10)):
        if await tab.eval(expression):
            return True
        await asyncio.sleep(0.1)
    return False


async def say(tab, text):
    await tab.fill("#text", text)
    await tab.eval("document.querySelector('#say button').click()")


def shown(text):
    return ("[...document.querySelectorAll('#log li')]"
            f".some(li => li.textContent === {text!r})")


async def scenario(base, ca, out):
    home = trusting_home(ca)
    try:
        async with Browser(home=home) as one:
            await one.goto(base)
            check("the landing page loads over HTTPS",
                  await one.eval("location.protocol") == "https:"
                  and "plucky" in (await one.text("h1") or ""),
                  await one.url())
            check("it links to the chat",
                  await one.eval("document.querySelector('a[href=\"/chat/\"]') !== null"))
            await one.screenshot(os.path.join(out, "chat-landing-https.png"))

            await one.goto(base + "chat/")
            check("tab one: the chat's WebSocket opens",
                  await until(one, "document.querySelector('#how').textContent === 'WebSocket'"),
                  await one.text("#how"))
            check("over wss://", (await one.eval("ws.url") or "").startswith("wss://"),
                  await one.eval("ws.url"))
            check("compressed (permessage-deflate)",
                  "permessage-deflate" in (await one.eval("ws.extensions") or ""),
                  await one.eval("ws.extensions"))

            two = await one.new_tab()
            await two.goto(base + "chat/")
            check("tab two: the chat's WebSocket opens",
                  await until(two, "document.querySelector('#how').textContent === 'WebSocket'"),
                  await two.text("#how"))

            await say(one, "Hello from tab one")
            check("tab two shows what tab one said", await until(two, shown("Hello from tab one")))
            await say(two, "And hello from tab two")
            check("tab one shows what tab two said",
                  await until(one, shown("And hello from tab two")))
            check("tab one shows its own message too", await until(one, shown("Hello from tab one")))
            await one.screenshot(os.path.join(out, "chat-tab-one.png"))
            await two.screenshot(os.path.join(out, "chat-tab-two.png"))

            # A page with no WebSocket falls back to server-sent events
            # (and POST for what it says).
            three = await one.new_tab()
            await three.send("Page.addScriptToEvaluateOnNewDocument",
                             {"source": "delete window.WebSocket;"}, session=True)
            await three.goto(base + "chat/")
            check("tab three, no WebSocket: server-sent events",
                  await until(three, "document.querySelector('#how').textContent"
                              " === 'server-sent events'"),
                  await three.text("#how"))
            check("it shows the history", await until(three, shown("And hello from tab two")))
            await say(three, "Hello over server-sent events")
            check("tab one shows what tab three posted",
                  await until(one, shown("Hello over server-sent events")))
            await say(one, "Back to tab three")
            check("tab three shows what tab one said",
                  await until(three, shown("Back to tab three")))
            await three.screenshot(os.path.join(out, "chat-tab-sse.png"))
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    os.makedirs(sys.argv[3], exist_ok=True)
    run(scenario, *sys.argv[1:4])
