"""Checks that Playwright drives the Chromium scripts/install-browser.sh
unpacked: a page is rendered, read back from the DOM, timed in the
browser and photographed. The dashboard's tests (issue 48) start from
this. Usage: python3 tests/ui/browser_check.py OUT.png"""

import os
import shutil
import site
import sys

from playwright.sync_api import sync_playwright


def chromium_path():
    """The wrapper install-browser.sh writes, on PATH or in the user bin."""
    found = shutil.which("trainyard-chromium")
    if found:
        return found
    candidate = os.path.join(site.getuserbase(), "bin", "trainyard-chromium")
    if os.access(candidate, os.X_OK):
        return candidate
    sys.exit("trainyard-chromium not found: run scripts/install-browser.sh")


def main(out):
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path())
        page = browser.new_page(viewport={"width": 800, "height": 400})
        cells = "".join(f"<i>{i % 8}</i>" for i in range(40_000))
        page.set_content(f"<style>i{{display:inline-block;width:6px;height:6px;background:#0072B2;margin:1px}}</style><main>{cells}</main>")
        count = page.evaluate("document.querySelectorAll('main i').length")
        assert count == 40_000, count
        ms = page.evaluate(
            """() => { const t = performance.now();
                       document.querySelector('main').innerHTML += '<i>x</i>';
                       return new Promise(r => requestAnimationFrame(() => r(performance.now() - t))); }"""
        )
        page.screenshot(path=out)
        print(f"chromium {browser.version}: 40,000 cells in the DOM, one update and a frame in {ms:.0f} ms; screenshot {out}")
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "browser-check.png")
