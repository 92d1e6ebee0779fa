from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Dialog, Page, sync_playwright

from worker.local.processes import DashboardProcess, WorkerProcess, chromium


def chromium_or_fail() -> str:
    found = chromium()
    if not found:
        pytest.fail(
            "the browser tests need Chromium: `apt-get install chromium` (what .ci/run does), or point "
            "EVALSTREAM_CHROMIUM at one; `pytest -m 'not browser'` leaves these tests out",
            pytrace=False,
        )
    return found


@pytest.fixture(scope="module")
def dashboard(worker: WorkerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardProcess]:
    """`evalstream dashboard` on the module worker's topics."""
    process = DashboardProcess(worker.settings, tmp_path_factory.mktemp("dashboard"))
    try:
        yield process
    finally:
        process.stop()
        print(process.log()[-3000:])


@pytest.fixture(scope="session")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the browser tests save screenshots: EVALSTREAM_SCREENSHOTS, else a temporary folder."""
    chosen = os.environ.get("EVALSTREAM_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("screens")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless Chromium, driven by Playwright (no browser of Playwright's own is downloaded)."""
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_or_fail())
        try:
            yield launched
        finally:
            launched.close()


def is_problem(message: ConsoleMessage, tab: Page) -> bool:
    """An error on the console, but the 404 of the page itself: a page for a run not found
    answers 404 and is drawn all the same (any other 404, of a script say, is a problem)."""
    own_404 = "status of 404" in message.text and message.location.get("url") == tab.url
    return message.type == "error" and not own_404


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh tab that fails the test on any script error or dialog (an injected `alert`)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    tab.on("console", lambda message: problems.append(message.text) if is_problem(message, tab) else None)

    def dialog(shown: Dialog) -> None:
        problems.append(f"dialog: {shown.message}")
        shown.dismiss()

    tab.on("dialog", dialog)
    try:
        yield tab
    finally:
        context.close()
    assert not problems, problems
