"""A headless browser for UI tests: Debian's Chromium driven by Playwright, and a static site served
over HTTP on a free loopback port, with a crawler that finds broken internal links and images.

Playwright drives the Chromium that ``make browser`` installs from Debian (``/usr/bin/chromium``);
it never downloads a browser of its own. Each browser starts with a fresh profile in a temporary
folder and with the flags below, which keep it off the network and from updating itself.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def chromium_page(viewport: tuple[int, int] = (1280, 900)) -> Iterator[Any]:
    """A Playwright page of a headless Chromium with a fresh profile, closed on exit."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: `make browser` installs Debian's chromium")
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                headless=True,
                args=CHROMIUM_FLAGS,
                viewport={"width": viewport[0], "height": viewport[1]},
            )
            try:
                yield context.pages[0] if context.pages else context.new_page()
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """No access log on stderr."""


@contextmanager
def serve_directory(root: Path) -> Iterator[str]:
    """Serve ``root`` over HTTP on a free loopback port; yields the base URL (ending in ``/``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, name="site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class _References(HTMLParser):
    """The ids of a page, and the URLs its links, images, objects, scripts and stylesheets name."""

    ATTRIBUTES = {"a": "href", "img": "src", "object": "data", "script": "src", "link": "href", "iframe": "src"}

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.urls: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"] or "")
        if tag == "a" and values.get("name"):
            self.ids.add(values["name"] or "")
        wanted = self.ATTRIBUTES.get(tag)
        url = values.get(wanted) if wanted else None
        if url:
            self.urls.append((tag, url))


@dataclass
class CrawlReport:
    """What a crawl of a site found: the pages read, every internal URL checked, and what is broken."""

    pages: list[str] = field(default_factory=list)
    checked: set[str] = field(default_factory=set)
    broken: list[str] = field(default_factory=list)


def crawl_site(base_url: str, start: str = "index.html") -> CrawlReport:
    """Follow every link inside ``base_url`` from ``start``: each page, image, object, script and
    stylesheet it names must load, and each ``#fragment`` must name an id on its page."""
    report = CrawlReport()
    pages: dict[str, _References] = {}
    queue = [urljoin(base_url, start)]
    fragments: list[tuple[str, str, str]] = []
    while queue:
        url = queue.pop()
        if url in report.checked:
            continue
        report.checked.add(url)
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = response.read()
                kind = response.headers.get_content_type()
        except urllib.error.URLError as error:
            report.broken.append(f"{url}: {error}")
            continue
        if kind != "text/html":
            continue
        parser = _References()
        parser.feed(body.decode("utf-8", "replace"))
        pages[url] = parser
        report.pages.append(url)
        for tag, reference in parser.urls:
            target, fragment = urldefrag(urljoin(url, reference))
            if not target.startswith(base_url):
                continue  # another site: not ours to check, and the check stays offline
            if fragment and tag == "a":
                fragments.append((url, target, fragment))
            if urlsplit(target).path.endswith("/"):
                target = urljoin(target, "index.html")
            queue.append(target)
    for source, target, fragment in fragments:
        page = pages.get(target)
        if page is not None and fragment not in page.ids:
            report.broken.append(f"{source}: link to {target}#{fragment}, which has no such id")
    return report
