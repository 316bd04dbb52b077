"""tests/apps/h2-browser.py --- the demo over HTTP/2 in Chromium

Copyright (C) 2026 the plucky authors
SPDX-License-Identifier: LGPL-3.0-or-later

Usage: h2-browser.py BASE-URL CA-FILE OUT-DIR

Headless Chromium, trusting the test CA CA-FILE as a user would (an NSS
database in a throw-away HOME), loads the demo's landing page at
BASE-URL (https) and checks that the page and its assets came over
HTTP/2 (ALPN h2): `nextHopProtocol' of the navigation and of each
resource.  Prints a line per check, "ok - WHAT" or "not ok - WHAT: WHY",
and saves a screenshot, h2-landing.png, under OUT-DIR.  Exit status 0
when every check passed.
"""

import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from cdp import Browser, check, run, trusting_home  # noqa: E402


async def scenario(base, ca, out):
    home = trusting_home(ca)
    try:
        async with Browser(home=home) as b:
            await b.goto(base)
            check("the landing page loads over HTTPS",
                  await b.eval("location.protocol") == "https:"
                  and "plucky" in (await b.text("h1") or ""),
                  await b.url())
            protocol = await b.eval("performance.getEntries()[0].nextHopProtocol")
            check("the page came over HTTP/2", protocol == "h2", protocol)
            resources = await b.eval(
                "JSON.stringify(performance.getEntriesByType('resource')"
                ".map(e => [e.name, e.nextHopProtocol]))")
            check("and each of its assets", resources and '"h2"' in resources
                  and '"http/1.1"' not in resources, resources)
            check("the stylesheet applies",
                  await b.eval("document.styleSheets.length > 0"
                               " && getComputedStyle(document.body).fontFamily !== ''"))
            await b.screenshot(os.path.join(out, "h2-landing.png"))
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    run(scenario, sys.argv[1], sys.argv[2], sys.argv[3])
