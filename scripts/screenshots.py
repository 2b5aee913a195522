"""Screenshots of the example project for the docs' tour page, and the overflow check behind them.

    .venv/bin/python scripts/screenshots.py           # check, then write docs/django/img/*.png
    .venv/bin/python scripts/screenshots.py --check   # check only, write nothing

It serves the example project on the embedded default (a fresh SQLite database in a temporary folder,
the offline demo model), logs in as the local superuser ``admin``, has one conversation with a tool call,
then opens the chat page, the admin's list of runs, one run's admin page and the usage page at 1,400 and
390 px wide. A page overflows when the document scrolls sideways or an element reaches past the viewport's
right edge (outside a box that scrolls on its own, such as a code block); at 1,400 px no box may scroll
sideways either. Each overflow is printed and the script exits 1, before any picture is written.
``tests/example_project`` runs the same check in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MANAGE = ROOT / "example_project" / "manage.py"
OUT = ROOT / "docs" / "django" / "img"
WIDTHS = (1400, 390)
DESKTOP = 1000
"""From this width on, nothing may scroll sideways, not even inside its own box."""
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

#: The elements past the right edge of the viewport, outside boxes that scroll sideways on their own; at
#: desktop widths (``strict``) also the boxes that do scroll sideways (a table cut off at 1,400 px is a fault).
OVERFLOW_JS = """(strict) => {
  const width = window.innerWidth;
  const scrolls = (el) => ["auto", "scroll", "hidden"].includes(getComputedStyle(el).overflowX);
  const contained = (el) => {
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      if (scrolls(up) && up.getBoundingClientRect().right <= width + 1) { return true; }
    }
    return false;
  };
  const name = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
    (typeof el.className === "string" && el.className.trim() ? "." + el.className.trim().split(/\\s+/).join(".") : "");
  const wide = [];
  for (const el of document.body.querySelectorAll("*")) {
    const box = el.getBoundingClientRect();
    if (box.width > 0 && box.right > width + 1 && getComputedStyle(el).position !== "fixed" && !contained(el)) {
      wide.push(`${name(el)} reaches ${Math.round(box.right)} px`);
    }
  }
  if (strict) {
    for (const el of document.body.querySelectorAll("*")) {
      if (["auto", "scroll"].includes(getComputedStyle(el).overflowX) && el.scrollWidth > el.clientWidth + 1) {
        wide.push(`${name(el)} scrolls sideways (${el.scrollWidth} px in ${el.clientWidth} px)`);
      }
    }
  }
  return {scrollWidth: document.scrollingElement.scrollWidth, width, wide: wide.slice(0, 8)};
}"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _env(folder: Path) -> dict[str, str]:
    """A fresh clone's environment: no keys, no services, the database in ``folder``."""
    env = {key: value for key, value in os.environ.items()
           if not key.endswith("_API_KEY") and key not in ("DATABASE_URL", "REDIS_URL", "ROBOTLAB_EXECUTOR",
                                                            "DJANGO_SETTINGS_MODULE", "ROBOT_LAB_MODEL")}
    env["DATABASE_URL"] = f"sqlite:///{folder / 'db.sqlite3'}"
    return env


@contextlib.contextmanager
def serve() -> Iterator[str]:
    """The example project, migrated with its local logins, served on a free port; yields its base URL."""
    with tempfile.TemporaryDirectory() as folder:
        env = _env(Path(folder))
        for command in (["migrate", "--noinput"], ["demo_user"]):
            subprocess.run([sys.executable, str(MANAGE), *command], cwd=ROOT, env=env, check=True,
                           capture_output=True, timeout=120)
        port = _free_port()
        server = subprocess.Popen([sys.executable, str(MANAGE), "runserver", "--noreload", f"127.0.0.1:{port}"],
                                  cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("the example project did not start") from None
                    time.sleep(0.1)  # runserver is still binding its port
            yield f"http://127.0.0.1:{port}"
        finally:
            server.terminate()
            server.wait(10)


def _converse(page: Any, base: str) -> dict[str, str]:
    """Log in as admin, chat twice (once with a tool call); the tour's page URLs."""
    from playwright.sync_api import expect

    page.goto(base + "/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "admin")
    page.click("#rl-login")
    page.click("#rl-new-thread")
    page.wait_for_selector("#robotlab-chat")
    for text in ("Tell me something nice about robots", "What is 12 * 7?"):
        page.fill("#rl-input", text)
        page.click("#rl-send")
        expect(page.locator(".rl-message.assistant .rl-status").last).to_be_empty(timeout=30_000)
    expect(page.locator(".rl-message.assistant .rl-text").last).to_contain_text("84")
    chat = page.url
    results = base + "/admin/robotlab/robotresult/"
    page.goto(results)
    page.locator("#result_list tbody tr").first.locator("a").first.click()
    page.wait_for_load_state()
    return {"chat": chat, "admin-results": results, "admin-result": page.url, "admin-usage": results + "usage/"}


def capture(base: str, out: Path | None) -> list[str]:
    """Check each tour page at each width; with ``out``, also write ``<page>-<width>.png`` there.

    Returns:
        One line per page that overflows (nothing is written then).
    """
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    shots: list[tuple[Any, Path]] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            urls = _converse(context.new_page(), base)
            for width in WIDTHS:
                page = context.new_page()
                page.set_viewport_size({"width": width, "height": 900})
                for name, url in urls.items():
                    page.goto(url)
                    page.wait_for_load_state("networkidle")
                    found = page.evaluate(OVERFLOW_JS, width >= DESKTOP)
                    if found["scrollWidth"] > width or found["wide"]:
                        problems.append(f"{name} at {width} px: the page is {found['scrollWidth']} px wide; "
                                        + "; ".join(found["wide"]))
                    elif out is not None:
                        shots.append((page.screenshot(full_page=True), out / f"{name}-{width}.png"))
        finally:
            browser.close()
    if out is not None and not problems:
        out.mkdir(parents=True, exist_ok=True)
        for image, path in shots:
            path.write_bytes(image)
    return problems


def main(argv: list[str] | None = None) -> int:
    """Run the check (and write the pictures unless ``--check``); 1 when a page overflows."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check for overflow; write nothing")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the PNGs go (default {OUT})")
    args = parser.parse_args(argv)
    with serve() as base:
        problems = capture(base, None if args.check else args.out)
    for line in problems:
        print("overflow:", line)
    if not problems:
        print("no overflow at", ", ".join(f"{w} px" for w in WIDTHS) + ("" if args.check else f"; wrote {args.out}"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
