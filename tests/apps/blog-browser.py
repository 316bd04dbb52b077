"""tests/apps/blog-browser.py --- the blog clicked through in Chromium

Copyright (C) 2026 the plucky authors
SPDX-License-Identifier: LGPL-3.0-or-later

Usage: blog-browser.py BASE-URL OUT-DIR PASSWORD

What a reader and then the author do on the blog, in headless Chromium:
read the index, open the newest post, post a comment (first with no
name, which the form refuses with its message and the text kept), see it
on the post; log in to the admin (first with a wrong password), write and
publish a post, see it first on the index, log out.  Prints a line per
check, "ok - WHAT" or "not ok - WHAT: WHY", and saves screenshots of the
index, a post with the new comment, the refused form and the admin's
editor under OUT-DIR.  Exit status 0 when every check passed.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from cdp import Browser, check, run  # noqa: E402


async def submit(b, form):
    """Submit the form FORM names as its button would, and wait for the
    page that follows.  requestSubmit() runs the form's validation and
    its submit event as a click does; a scripted click() on these forms'
    buttons did not navigate in headless Chromium."""
    await b._drain_events()
    ok = await b.eval(f"(() => {{ const f = document.querySelector({form!r});"
                      " if (!f) return false; f.requestSubmit(); return true; })()")
    if not ok:
        raise RuntimeError(f"no form {form}")
    await b._wait_event("Page.loadEventFired")


async def scenario(base, out, password):
    title = "Plucky publishes from Chromium"
    async with Browser() as b:
        await b.goto(base)
        count = await b.eval("document.querySelectorAll('article').length")
        check("the index shows 10 posts", count == 10, count)
        side = await b.eval("getComputedStyle(document.querySelector('main')).cssFloat")
        check("the inline stylesheet applies: the posts float left", side == "left", side)
        await b.screenshot(os.path.join(out, "blog-index.png"))

        href = await b.eval("document.querySelector('article h2 a').getAttribute('href')")
        check("the newest post's link is relative", href.startswith("archives/"), href)
        await b.goto(base + href)
        check("the post page has the comment form",
              await b.eval("document.querySelector('#comment-form') !== null"))

        await b.fill("#comment", "A comment without a name")
        await submit(b, "#comment-form")
        text = await b.text()
        check("a comment without a name is refused with its message",
              "Please give a name" in (text or ""), text and text[:200])
        check("the comment typed is kept",
              await b.eval("document.querySelector('#comment').value") == "A comment without a name")
        await b.screenshot(os.path.join(out, "blog-comment-error.png"))

        await b.fill("#author", "Chromium <b>reader</b>")
        await b.fill("#comment", "Hello from Chromium <script>alert(1)</script>")
        await submit(b, "#comment-form")
        text = await b.text()
        url = await b.url()
        check("back on the post, at its comments", url.endswith("#comments"), url)
        check("the comment shows on the post, as text",
              "Hello from Chromium <script>alert(1)</script>" in (text or ""), text and text[-300:])
        check("no script element came of it",
              await b.eval("document.querySelectorAll('.comments script').length") == 0)
        await b.eval("document.querySelector('.comments li:last-child').scrollIntoView()")
        await b.screenshot(os.path.join(out, "blog-post.png"))

        await b.goto(base + "admin")
        await b.fill("#name", "admin")
        await b.fill("#password", "wrong password")
        await submit(b, "form")
        check("a wrong password is refused", "Wrong name or password" in (await b.text() or ""))
        await b.fill("#name", "admin")
        await b.fill("#password", password)
        await submit(b, "form")
        check("logged in to the admin", "write a new post" in (await b.text() or ""))

        await b.goto(base + "admin/new")
        await b.fill("#title", title)
        await b.fill("#tags", "plucky, browser")
        await b.fill("#body", "Written in <em>Chromium</em>.\n\nSecond paragraph.")
        await b.screenshot(os.path.join(out, "blog-admin-editor.png"))
        await submit(b, "form")
        check("saved: back on the editor", "edit post" in (await b.text() or ""))

        await b.goto(base)
        first = await b.eval("document.querySelector('article h2 a').textContent")
        check("the new post is first on the index", first == title, first)
        await b.screenshot(os.path.join(out, "blog-index-after.png"))

        await b.goto(base + "admin")
        await submit(b, "form[action$='admin/logout']")
        await b.goto(base + "admin")
        check("logged out", "log in" in (await b.text() or ""))


if __name__ == "__main__":
    os.makedirs(sys.argv[2], exist_ok=True)
    run(scenario, *sys.argv[1:4])
