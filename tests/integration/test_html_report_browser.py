"""The report page in a real browser: a sample report (no cluster) written the way the runner
writes it, with evidence files on disk, opened from ``file://`` in headless Chromium through
Selenium and read through the DOM: the verdicts, every behaviour row and its outcome, an evidence
link that resolves to a file, the filter script allowed by the page's CSP, and no network request.
A screenshot goes to ``reports/html-report-screenshot.png``.

Needs the Debian packages ``chromium`` and ``chromium-driver`` (``KTHENA_CHROMIUM`` and
``KTHENA_CHROMEDRIVER`` point elsewhere); without them the test fails when ``CI`` is set and is
skipped otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import unquote, urlparse

import psutil
import pytest

from conformance.framework import report as report_module
from tests.unit.framework.test_html_report import ACCELERATORS, COVERAGE, MIXED, sample, with_levels

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

INSTALL = "apt-get install chromium chromium-driver"
REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "reports" / "html-report-screenshot.png"
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
WAIT = 60.0  # seconds for the browser to start, load the page or apply a filter


def _unavailable(reason: str) -> NoReturn:
    """No browser here: a failure in CI (it must run there), a skip on a developer's machine."""
    message = f"{reason}; install them with `{INSTALL}` (Debian/Ubuntu)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _binaries() -> tuple[str, str]:
    chromium = os.environ.get("KTHENA_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    driver = os.environ.get("KTHENA_CHROMEDRIVER") or shutil.which("chromedriver") or "/usr/bin/chromedriver"
    missing = [p for p in (chromium, driver) if not Path(p).is_file()]
    if missing:
        _unavailable(f"headless Chromium is needed for this test but {', '.join(missing)} is missing")
    return chromium, driver


def _reap(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Wait (with a deadline) for ``processes`` to end, kill what is left; returns survivors."""

    def alive() -> list[psutil.Process]:
        left = []
        for p in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    left.append(p)
        return left

    _, still = psutil.wait_procs(alive(), timeout=10)
    for p in still:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(still, timeout=10)
    return alive()


@contextlib.contextmanager
def headless_chromium() -> Iterator[Any]:
    """Headless Chromium through chromedriver, with a fresh profile; nothing of it outlives the
    block (a context manager, not a fixture, so a missing browser fails the test rather than
    erroring its setup)."""
    chromium, driver_path = _binaries()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _unavailable("the selenium package is missing (pip install 'selenium>=4.30,<5'), and Chromium may be too")
    profile = tempfile.mkdtemp(prefix="kthena-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    service = Service(executable_path=driver_path)
    driver = None
    tree: dict[int, psutil.Process] = {}

    def remember() -> None:
        """chromedriver and every Chromium process under it (they reparent once it exits)."""
        with contextlib.suppress(psutil.NoSuchProcess):
            if service.process is not None:
                root = psutil.Process(service.process.pid)
                tree.update({p.pid: p for p in (root, *root.children(recursive=True))})

    try:
        driver = webdriver.Chrome(service=service, options=options)
        driver.set_page_load_timeout(WAIT)
        remember()
        yield driver
    finally:
        remember()
        try:
            if driver is not None:
                driver.quit()
        finally:
            survivors = _reap(list(tree.values()))
            shutil.rmtree(profile, ignore_errors=True)
        assert not survivors, f"browser processes survived the test (killed): {[p.pid for p in survivors]}"


def _wait(driver: Any, condition: Any, what: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT, poll_frequency=0.1).until(condition, message=f"waited {WAIT:.0f}s for {what}")


def _sample_report(report_dir: Path) -> dict[str, Any]:
    """The mixed sample with everything optional the page can show, and its evidence on disk."""
    data = with_levels(sample(MIXED, accelerators=ACCELERATORS, coverage=COVERAGE))
    evidence = report_dir / "artifacts" / "core_recovery_replace"
    evidence.mkdir(parents=True)
    (evidence / "pods.yaml").write_text("items: []\n")
    (evidence / "events.yaml").write_text("items: []\n")
    (evidence / "pod-history.txt").write_text("+   0.10s ADDED    p-0 phase=Pending ready=False restarts=0\n")
    (report_dir / "kthena-ref.log").write_text("started\n")
    return data


def test_the_report_page_in_headless_chromium(tmp_path: Path) -> None:
    with headless_chromium() as browser:
        _check_the_page(browser, tmp_path / "reports")


def _check_the_page(browser: Any, report_dir: Path) -> None:
    from selenium.webdriver.common.by import By

    data = _sample_report(report_dir)
    report_module.write(data, report_dir)
    page = report_dir / "index.html"

    browser.get("about:blank")  # leave the browser's start page first: only the report's requests count
    browser.get_log("performance")
    browser.get(page.as_uri())
    _wait(browser, lambda d: d.execute_script("return document.readyState") == "complete", "the page to load")

    verdict = browser.find_element(By.ID, "overall-verdict")
    assert verdict.text == "failure" and verdict.get_attribute("data-verdict") == "failure"
    assert browser.find_element(By.ID, "exit-code").text == "1"

    profiles = {
        row.get_attribute("data-profile"): (
            row.get_attribute("data-verdict"),
            row.find_element(By.CSS_SELECTOR, ".badge").text,
        )
        for row in browser.find_elements(By.CSS_SELECTOR, "tr[data-profile][data-verdict]")
    }
    assert profiles == {p["profile"]: (p["verdict"], p["verdict"]) for p in data["profiles"]}
    coverage = browser.find_element(By.CSS_SELECTOR, 'tr[data-profile="Core"] td[data-coverage]').text
    assert coverage == "MUST 17/20 asserted (85.0%), 3 gaps; SHOULD 1/2 asserted (50.0%)"

    rows = browser.find_elements(By.CSS_SELECTOR, "tr[data-behaviour]")
    assert len(rows) == len(data["tests"]) == len(MIXED)
    expected = {t["id"]: t["outcome"] for t in data["tests"]}
    seen = {}
    for row in rows:
        behaviour, outcome = row.get_attribute("data-behaviour"), row.get_attribute("data-outcome")
        assert row.is_displayed()
        assert outcome in row.find_element(By.CSS_SELECTOR, ".badge").text  # written, not colour alone
        seen[behaviour] = outcome
    assert seen == expected

    _save_screenshot(browser)

    links = browser.find_elements(By.CSS_SELECTOR, 'tr[data-behaviour="core/recovery/replace"] a.evidence-link')
    assert [link.text for link in links] == ["events.yaml", "pod-history.txt", "pods.yaml"]
    for link in links:
        href = link.get_attribute("href") or ""
        target = Path(unquote(urlparse(href).path))
        assert href.startswith("file://") and target.is_file(), href
        assert target.resolve().is_relative_to(report_dir.resolve())

    # A long message is collapsed behind its first line and opens on a click.
    long = browser.find_element(By.CSS_SELECTOR, 'tr[data-behaviour="core/scale/up"] details.message')
    assert not long.find_element(By.TAG_NAME, "pre").is_displayed()
    long.find_element(By.TAG_NAME, "summary").click()
    _wait(browser, lambda d: long.find_element(By.TAG_NAME, "pre").is_displayed(), "the long message to open")

    # The filter script ran (the CSP allows exactly it): "not passed" hides the passed rows.
    filters = browser.find_element(By.ID, "filters")
    assert filters.is_displayed()
    filters.find_element(By.CSS_SELECTOR, 'button[data-filter="not-passed"]').click()
    not_passed = sorted(id for id, outcome in expected.items() if outcome in ("non-conformant", "error", "warning"))
    _wait(
        browser,
        lambda d: sorted(r.get_attribute("data-behaviour") for r in rows if r.is_displayed()) == not_passed,
        "the not-passed filter",
    )
    assert browser.find_element(By.ID, "filter-count").text == f"{len(not_passed)} of {len(rows)} shown"

    _assert_no_network(browser, page.as_uri())
    severe = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
    assert not severe, severe  # no CSP violation, no script error


def _save_screenshot(browser: Any) -> None:
    """The whole page, for people to look at (CI keeps reports/ as an artifact)."""
    height = int(browser.execute_script("return document.documentElement.scrollHeight"))
    browser.set_window_size(1400, min(max(height, 1000), 8000))
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(SCREENSHOT)), "the screenshot could not be saved"
    browser.set_window_size(1400, 1000)


def _assert_no_network(browser: Any, page: str) -> None:
    """The report page loaded nothing but itself (file:) and inline data: URLs, and nothing in the
    browser went to the network (Chromium's own chrome:// pages are not network)."""
    resources = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(str(name).startswith("file:") for name in resources), resources
    navigation = browser.execute_script("return performance.getEntriesByType('navigation').map(e => e.name)")
    assert navigation == [page], navigation
    requests: list[tuple[str, str]] = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            params = message["params"]
            requests.append((params["request"]["url"], params.get("documentURL", "")))
    assert (page, page) in requests, f"Chromium's performance log does not show the page's own load: {requests}"
    from_page = [url for url, document in requests if document.startswith("file:")]
    assert all(url.startswith(("file:", "data:")) for url in from_page), from_page
    network = [url for url, _ in requests if urlparse(url).scheme not in ("file", "data", "chrome", "about", "blob")]
    assert not network, network
