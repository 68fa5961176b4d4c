"""The built docs site works the two ways the README says to read it: opened as a file
(`make docs`, then `.site/index.html`) and served (`make docs-serve`).

A browser opening a page over ``file://`` does not turn ``holdout/`` into ``holdout/index.html``
and refuses ``fetch()``/XHR of the search index, so the static checks read every built page's
links, and the browser checks drive a real headless Chromium over the DevTools protocol: they
are skipped where no Chromium is installed (Debian's ``chromium`` package gives one).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from eval_pipelines_tests.helpers.paths import REPO

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on the PATH")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as `make docs` builds it, into a temporary folder."""
    folder = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(folder)],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    return folder


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value and (tag, name) in {("a", "href"), ("link", "href"), ("script", "src")}:
                self.targets.append(value)


def test_every_link_of_every_page_opens_as_a_file(site: Path) -> None:
    """Each local link of each built page names a file that exists: over file:// a link to a
    folder opens a directory listing (every page but the home page did, before
    `use_directory_urls: false`). 404.html is left out: only a server shows it, and its links
    are root-relative on purpose."""
    broken = []
    pages = sorted(page for page in site.glob("*.html") if page.name != "404.html")
    assert len(pages) == len(list((REPO / "docs").glob("*.md")))
    for page in pages:
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for target in parser.targets:
            parts = urlsplit(target)
            if parts.scheme or parts.netloc or not parts.path:
                continue
            resolved = (page.parent / unquote(parts.path)).resolve()
            if not resolved.is_file():
                broken.append(f"{page.name} -> {target}")
    assert broken == []


class _CdpPage:
    """One Chromium tab driven over the DevTools protocol (no Playwright: its browser
    download cannot run here, and Debian's Chromium is the real browser)."""

    def __init__(self, ws_url: str) -> None:
        from websockets.sync.client import connect

        self._ws = connect(ws_url, max_size=None)
        self._next_id = 0

    def call(self, method: str, **params: object) -> dict:
        self._next_id += 1
        self._ws.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv(timeout=30))
            if message.get("id") == self._next_id:
                return message.get("result", {})

    def evaluate(self, expression: str) -> object:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, *, seconds: float = 20.0) -> object:
        """Poll until ``expression`` is truthy; returns its last value (falsy on time-out)."""
        deadline = time.monotonic() + seconds
        value = self.evaluate(expression)
        while not value and time.monotonic() < deadline:
            time.sleep(0.2)
            value = self.evaluate(expression)
        return value

    def close(self) -> None:
        self._ws.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[str]:
    """A headless Chromium with its DevTools endpoint; yields the endpoint's HTTP base URL."""
    assert CHROMIUM is not None
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    process = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            assert process.poll() is None, "chromium exited at start"
            assert time.monotonic() < deadline, "chromium gave no DevTools port in 60 s"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port_file.read_text().split()[0]}"
    finally:
        process.terminate()
        process.wait(timeout=30)
        shutil.rmtree(profile, ignore_errors=True)


@contextlib.contextmanager
def _open(browser: str, url: str) -> Iterator[_CdpPage]:
    request = urllib.request.Request(f"{browser}/json/new?about:blank", method="PUT")
    with urllib.request.urlopen(request, timeout=30) as answer:
        target = json.load(answer)
    page = _CdpPage(target["webSocketDebuggerUrl"])
    try:
        page.call("Page.enable")
        page.call("Page.navigate", url=url)
        page.wait_for("document.readyState === 'complete'")
        yield page
    finally:
        page.close()
        urllib.request.urlopen(f"{browser}/json/close/{target['id']}", timeout=30).close()


@contextlib.contextmanager
def _served(folder: Path) -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


_RESULTS = "document.getElementById('mkdocs-search-results').innerText"


@needs_chromium
def test_a_page_opened_as_a_file_follows_its_links_and_says_search_needs_the_server(
    site: Path, browser: str
) -> None:
    with _open(browser, (site / "index.html").as_uri()) as page:
        href = page.evaluate(
            "[...document.querySelectorAll('a')].map(a => a.href)"
            ".find(h => h.endsWith('/holdout.html'))"
        )
        assert isinstance(href, str) and href.startswith("file://")
        page.call("Page.navigate", url=href)
        title = page.wait_for("document.readyState === 'complete' && document.title")
        assert isinstance(title, str) and title.startswith("Holdout evaluation")
        placeholder = page.evaluate("document.getElementById('mkdocs-search-query').placeholder")
        disabled = page.evaluate("document.getElementById('mkdocs-search-query').disabled")
    assert placeholder == "Search needs the served site: make docs-serve"
    assert disabled is True


@needs_chromium
def test_the_served_site_finds_a_term(site: Path, browser: str) -> None:
    with _served(site) as base, _open(browser, f"{base}/index.html?q=McNemar") as page:
        found = page.wait_for(f"{_RESULTS}.includes('Definitions of the figures') && {_RESULTS}")
        enabled = page.evaluate("!document.getElementById('mkdocs-search-query').disabled")
    assert isinstance(found, str) and "Definitions of the figures" in found, found
    assert enabled is True
    assert re.search(r"McNemar", (site / "figures.html").read_text(encoding="utf-8"))
