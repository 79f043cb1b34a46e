"""Shared helpers for tests that start a marimo server and look at it with Debian's chromium.

Playwright's own browser download is never used: ``launch_chromium`` drives ``/usr/bin/chromium``
(installed by ``.ci/install-browser.sh``). Without it the tests skip, except under ``CI`` where a
missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SCREENSHOTS = REPO / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-quic"]
CHART_SELECTOR = "marimo-vega .marks"
ERROR_SELECTORS = (".marimo-error", "[data-testid='marimo-error']", ".traceback")
ERROR_TEXTS = ("Traceback (most recent call last)", "An internal error occurred", "ModuleNotFoundError")


def require_chromium() -> Path:
    """The chromium binary; skips the test when it is missing, fails instead when ``CI`` is set."""
    if CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    message = f"{CHROMIUM} not found: run .ci/install-browser.sh"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_get(url: str, headers: dict[str, str] | None = None, timeout: float = 5.0) -> tuple[int, dict[str, str]]:
    """(status, headers) of a GET that does not follow redirects."""

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(_NoRedirect)
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers)


@dataclass
class Server:
    """A server process started in its own process group, with its output in ``log``."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path
    argv: list[str] = field(default_factory=list)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_healthy(self, timeout: float = 120.0) -> None:
        """Poll ``/health`` until it answers 200; fail with the server's output if it dies or times out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"server exited with {self.process.returncode}:\n{self.output()}")
            try:
                if http_get(f"{self.url}/health", timeout=2.0)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"server not healthy after {timeout:.0f} s:\n{self.output()}")

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM the whole process group, SIGKILL it if it lingers; returns the exit status."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=timeout)
        return int(self.process.returncode)


@contextmanager
def serve(argv: Sequence[str], port: int, log: Path, env: dict[str, str] | None = None,
          timeout: float = 120.0) -> Iterator[Server]:
    """Start ``argv`` (a server listening on ``port``) in a new session, wait for ``/health``, stop it after."""
    with open(log, "wb") as out:
        process = subprocess.Popen(list(argv), cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True,
                                   env={**os.environ, **(env or {})})
    server = Server(process, f"http://127.0.0.1:{port}", log, list(argv))
    try:
        server.wait_healthy(timeout)
        yield server
    finally:
        server.stop()


@contextmanager
def chromium_page(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A fresh headless Debian chromium page (Playwright), with console errors collected on
    ``page.console_errors``."""
    from playwright.sync_api import sync_playwright

    executable = require_chromium()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(executable), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            errors: list[str] = []
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.console_errors = errors
            yield page
        finally:
            browser.close()


def wait_for_charts(page: Any, minimum: int, timeout: float = 120.0) -> int:
    """Wait until at least ``minimum`` altair charts have drawn their marks; returns how many did.

    Only charts of ``mo.ui.altair_chart`` count (marimo-vega), not the histograms in table headers.
    """
    deadline = time.monotonic() + timeout
    count = 0
    while time.monotonic() < deadline:
        count = page.locator(CHART_SELECTOR).count()
        if count >= minimum:
            return count
        page.wait_for_timeout(500)
    raise AssertionError(f"only {count} of {minimum} charts rendered after {timeout:.0f} s")


CHART_TEXT_JS = """() => {
  const svg = document.querySelector('svg'), box = svg.getBoundingClientRect();
  const drawn = r => r.width > 0 && r.left >= box.left - 1 && r.right <= box.right + 1 && r.top >= box.top - 1
                     && r.bottom <= box.bottom + 1;
  const texts = role => [...svg.querySelectorAll(`.role-${role} text`)].map(t => [t.textContent,
                                                                                  drawn(t.getBoundingClientRect())]);
  const all = ['title-text', 'legend-label', 'axis-title', 'axis-label'].flatMap(texts);
  return {title: texts('title-text').map(t => t[0]).join(' '),
          legend_symbols: svg.querySelectorAll('.role-legend-symbol path').length,
          legend_labels: texts('legend-label').filter(t => t[1] && t[0].trim()).map(t => t[0]),
          axis_titles: texts('axis-title').map(t => t[0]), axis_labels: texts('axis-label').map(t => t[0]),
          clipped: all.filter(t => !t[1]).map(t => t[0])};
}"""
"""What a chart exported as SVG draws: title, legend symbols, the legend labels drawn within the chart, axis titles
and labels, and every text that falls (in part) outside the chart's bounds."""


@dataclass(frozen=True)
class ChartText:
    """The text of one drawn chart (``chart_texts``)."""

    title: str
    legend_symbols: int
    legend_labels: list[str]
    axis_titles: list[str]
    axis_labels: list[str]
    clipped: list[str]


def chart_texts(page: Any) -> list[ChartText]:
    """The text of every drawn altair chart of ``page``, as drawn: marimo draws charts on a canvas, so each is
    exported by the "Save as SVG" link of its vega-embed menu (pressed without opening the menu: the chart's scene at
    the size drawn) and measured in a second page."""
    links = page.locator("marimo-vega").filter(has=page.locator(".marks")).get_by_text("Save as SVG")
    svgs = links.evaluate_all("""async links => Promise.all(links.map(async a => {
        a.dispatchEvent(new MouseEvent('mousedown'));  // vega-embed makes the SVG and points the link at it
        for (let i = 0; i < 200 && a.getAttribute('href') === '#'; i++) await new Promise(done => setTimeout(done, 50));
        if (a.getAttribute('href') === '#') throw new Error('vega-embed made no SVG of a chart in 10 s');
        return (await fetch(a.href)).text();
    }))""")
    viewer = page.context.browser.new_page()
    try:
        found = []
        for svg in svgs:
            viewer.set_content(svg)
            found.append(ChartText(**viewer.evaluate(CHART_TEXT_JS)))
        return found
    finally:
        viewer.close()


def inner_scroll_areas(page: Any) -> list[str]:
    """The start of each cell output that scrolls inside itself (taller than the area it is shown in)."""
    return page.evaluate("""() => [...document.querySelectorAll('.output-area')]
        .filter(e => e.scrollHeight > e.clientHeight + 1).map(e => e.innerText.slice(0, 60))""")


def page_errors(page: Any) -> list[str]:
    """marimo error outputs and traceback texts in the page (Playwright's locators pierce the shadow
    roots marimo renders cell outputs in; ``inner_text`` of the body would not)."""
    found = [f"{selector} x{page.locator(selector).count()}" for selector in ERROR_SELECTORS
             if page.locator(selector).count()]
    found.extend(phrase for phrase in ERROR_TEXTS if page.get_by_text(phrase).count())
    return found


def has_text(page: Any, text: str, exact: bool = False) -> bool:
    """Whether ``text`` is shown anywhere in the page, shadow roots included."""
    return page.get_by_text(text, exact=exact).count() > 0


def screenshot(page: Any, name: str, folder: Path) -> Path:
    """Save a full-page screenshot in ``folder`` and copy it to ``screenshots/`` for humans."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    SCREENSHOTS.mkdir(exist_ok=True)
    shutil.copyfile(path, SCREENSHOTS / path.name)
    return path
