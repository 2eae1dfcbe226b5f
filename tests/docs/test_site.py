"""The documentation site as a reader meets it: built by Sphinx, served over HTTP, opened in headless
Chromium (tests/support/browser.py).

``make docs-check`` runs this on the site ``make docs`` built (``DOCS_HTML``); without it the site is
built here, with the same warnings-as-errors settings. ``DOCS_SCREENSHOTS`` names a folder for the
pages' screenshots (default: the test's temporary folder).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import chromium_page, crawl_site, serve_directory

DOCS = Path(__file__).resolve().parents[2] / "docs"
SPHINX_BUILD = Path(sys.executable).with_name("sphinx-build")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The built site's base URL."""
    html = os.environ.get("DOCS_HTML")
    if html:
        root = Path(html).resolve()
    else:
        root = tmp_path_factory.mktemp("docs-html")
        command = [SPHINX_BUILD, "-E", "-W", "--keep-going", "-n", "-q", "-b", "html", DOCS, root]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-4000:]
    assert (root / "index.html").is_file(), f"no site in {root}: run `make docs`"
    with serve_directory(root) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    with chromium_page() as browser_page:
        yield browser_page


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("DOCS_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def images_loaded(page: Any) -> dict[str, Any]:
    """Every image and SVG object of the page, and those that did not load."""
    return page.evaluate(
        """() => {
            const images = [...document.querySelectorAll('img')];
            const objects = [...document.querySelectorAll('object')];
            const broken = images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)
                .concat(objects.filter(o => !(o.contentDocument && o.contentDocument.querySelector('svg'))).map(o => o.data));
            return {count: images.length + objects.length, broken};
        }"""
    )


def test_index_leads_to_an_operator_reference_in_two_clicks(site: str, page: Any, screenshots: Path) -> None:
    page.goto(site + "index.html", wait_until="load")
    assert "airflow-pulsar" in page.title()
    assert page.locator("h1").first.inner_text().startswith("airflow-pulsar")
    page.screenshot(path=str(screenshots / "index.png"), full_page=False)

    page.locator(".sidebar-tree a", has_text="API reference").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith("api/index.html")
    page.locator("article a", has_text="Operators").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith("api/operators.html")
    produce = page.locator("dt[id='airflow_pulsar.operators.produce.PulsarProduceOperator']")
    assert produce.count() == 1
    assert "PulsarProduceOperator" in produce.inner_text()
    page.screenshot(path=str(screenshots / "api-operators.png"), full_page=False)


def test_ingestion_page_draws_its_diagram(site: str, page: Any, screenshots: Path) -> None:
    page.goto(site + "index.html", wait_until="load")
    page.locator(".sidebar-tree a", has_text="Spark ingestion").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith("spark-ingestion.html")
    assert page.locator("h1").first.inner_text().startswith("Spark ingestion")
    images = images_loaded(page)
    assert images["count"] >= 1 and not images["broken"], images
    diagram = page.locator("object.graphviz").first
    diagram.scroll_into_view_if_needed()
    text = diagram.evaluate("o => o.contentDocument.querySelector('svg').textContent")
    for step in ("hold", "plan", "record the plan", "write", "acknowledge"):
        assert step in text, f"the ingestion diagram lacks {step!r}"
    page.screenshot(path=str(screenshots / "spark-ingestion.png"), full_page=False)


def test_search_box_finds_pages(site: str, page: Any, screenshots: Path) -> None:
    page.goto(site + "index.html", wait_until="load")
    box = page.locator("input.sidebar-search")
    box.fill("deferrable")
    box.press("Enter")
    page.wait_for_url("**/search.html?*")
    results = page.locator("#search-results ul.search li")
    results.first.wait_for(timeout=15_000)
    found = results.all_inner_texts()
    assert any("Sensors and triggers" in text for text in found), found
    page.screenshot(path=str(screenshots / "search.png"), full_page=False)
    results.locator("a", has_text="Sensors and triggers").first.click()
    page.wait_for_load_state("load")
    assert "sensors-triggers.html" in page.url


def test_every_internal_link_and_image_resolves(site: str) -> None:
    report = crawl_site(site)
    assert not report.broken, "\n".join(report.broken)
    names = {url.removeprefix(site) for url in report.pages}
    for expected in ("index.html", "spark-ingestion.html", "api/operators.html", "changelog.html", "benchmarks.html"):
        assert expected in names, f"{expected} is not reachable from the index"
    assert any(url.endswith(".svg") for url in report.checked), "no diagram was checked"
