"""tests/apps/news-browser.py --- the news site clicked through in Chromium

Copyright (C) 2026 the plucky authors
SPDX-License-Identifier: LGPL-3.0-or-later

Usage: news-browser.py BASE-URL OUT-DIR

What a newcomer would do on the demo's news site, in headless Chromium:
sign up (first with a password too short, which the form refuses with
its message), submit a story, comment on it, log out; sign up as a
second user, vote the story up, reply to the comment, see the story on
/newest and on the front page, hide it, see the leaders, log out.  Prints a line per check,
"ok - WHAT" or "not ok - WHAT: WHY", and saves screenshots of the front
page, an item page and the form with a validation error under OUT-DIR.
Exit status 0 when every check passed.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from cdp import Browser, check, run  # noqa: E402


async def sign_up(b, base, name, password):
    await b.goto(base + "login")
    await b.fill("#name", name)
    await b.fill("#password", password)
    await b.submit("form[action=signup] button")


async def log_out(b):
    await b.submit("a[href^='logout']")


async def scenario(base, out):
    title = "plucky in a real browser"
    async with Browser() as b:
        await b.goto(base)
        check("the front page lists 30 stories",
              await b.eval("document.querySelectorAll('tr.athing').length") == 30)
        color = await b.eval(
            "getComputedStyle(document.querySelector('#top')).backgroundColor")
        check("the linked stylesheet applies: the top bar is orange",
              color == "rgb(255, 102, 0)", color)
        await b.screenshot(os.path.join(out, "news-front.png"))

        await sign_up(b, base, "alice", "short")
        text = await b.text()
        check("a short password is refused with its message",
              "at least 8 characters" in (text or ""), text and text[:200])
        check("the name typed is kept",
              await b.eval("document.querySelector('#name').value") == "alice")
        await b.screenshot(os.path.join(out, "news-form-error.png"))

        await sign_up(b, base, "alice", "a long enough password")
        check("signed up and logged in as alice",
              "alice" in (await b.text("#top") or ""))

        await b.goto(base + "submit")
        await b.fill("#title", title)
        await b.fill("#url", "https://plucky.example/browser")
        await b.submit("form[action=submit] button")
        check("the story is on /newest", title in (await b.text() or ""))

        await b.goto(base + "newest")
        href = await b.eval(
            "[...document.querySelectorAll('td.title a')]"
            f".find(a => a.textContent === {title!r}) ? "
            "document.querySelector('tr.sub a[href^=\"item?id=\"]').getAttribute('href') : null")
        check("its item link", href is not None and href.startswith("item?id="), href)
        await b.goto(base + href)
        await b.fill("textarea[name=text]", "Hello from Chromium")
        await b.submit("form[action=comment] button")
        check("the comment shows on the item page",
              "Hello from Chromium" in (await b.text() or ""))
        item_url = await b.url()

        await log_out(b)
        check("logged out", "login" in (await b.text("#top") or ""))

        await sign_up(b, base, "bob", "another long password")
        await b.goto(item_url.split("#")[0])
        score_before = await b.text("span[id^=score_]")
        await b.submit("tr.athing form.vote-form button")
        await b.goto(item_url.split("#")[0])
        score_after = await b.text("span[id^=score_]")
        check("bob's vote counts", score_before == "1 point" and score_after == "2 points",
              f"{score_before} -> {score_after}")
        check("no arrow once voted",
              await b.eval("document.querySelector('tr.athing form.vote-form') === null"))

        await b.eval("document.querySelector('a[href^=\"reply?id=\"]').click()")
        await b._wait_event("Page.loadEventFired")
        await b.fill("textarea[name=text]", "A reply from bob")
        await b.submit("form[action=comment] button")
        text = await b.text()
        check("the reply shows under the comment",
              "A reply from bob" in (text or "")
              and await b.eval("document.querySelector('.tree .tree') !== null"))
        await b.screenshot(os.path.join(out, "news-item.png"))

        await b.goto(base + "newest")
        check("the story is on /newest", title in (await b.text() or ""))
        await b.goto(base)
        check("the story is on the front page", title in (await b.text() or ""))
        await b.screenshot(os.path.join(out, "news-front-logged-in.png"))

        await b.goto(item_url.split("#")[0])
        await b.submit("tr.sub form[action=hide] button")
        await b.goto(base + "newest")
        check("hidden, the story leaves bob's /newest", title not in (await b.text() or ""))
        await b.goto(base + "hidden")
        check("and is on his /hidden", title in (await b.text() or ""))
        await b.goto(base + "leaders")
        check("the leaders page lists users by karma",
              await b.eval("document.querySelectorAll('table.leaders tr').length") > 0)
        await b.screenshot(os.path.join(out, "news-leaders.png"))

        await log_out(b)
        check("logged out at the end", "login" in (await b.text("#top") or ""))


if __name__ == "__main__":
    os.makedirs(sys.argv[2], exist_ok=True)
    run(scenario, *sys.argv[1:3])
