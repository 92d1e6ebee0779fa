"""The dashboard at many runs, in a real browser (headless Chromium) against a real broker,
worker and `evalstream dashboard` keeping 3 closed runs in memory: the runs page paged, filtered
and searched, live; a page kept open while the dashboard restarts; a task's history moving
when a new run of its benchmark closes."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from playwright.sync_api import Browser, Page, expect

from events.models import InputEvent
from tests.builders import scored_run
from tests.worker.dashboard.test_browser import LIVE, publish, url
from worker.local.processes import DashboardProcess, WorkerProcess

pytestmark = [pytest.mark.kafka, pytest.mark.browser]

RECENT = 3


@pytest.fixture(scope="module")
def scaled(worker: WorkerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardProcess]:
    process = DashboardProcess(worker.settings, tmp_path_factory.mktemp("dashboard"), recent=RECENT)
    try:
        yield process
    finally:
        process.stop()
        print(process.log()[-3000:])


def closed_run(run_id: str, values: Sequence[object], **labels: str) -> list[InputEvent]:
    return scored_run(run_id, {"flip": values, "steady": [1.0]}, labels=labels)


def listed(dashboard: DashboardProcess, **query: str) -> dict[str, Any]:
    with urllib.request.urlopen(url(dashboard, "/", **query, format="json")) as response:
        found: dict[str, Any] = orjson.loads(response.read())
        return found


def wait_for_runs(dashboard: DashboardProcess, count: int, **query: str) -> None:
    deadline = time.monotonic() + LIVE
    while listed(dashboard, **query)["total"] < count:
        assert time.monotonic() < deadline, f"fewer than {count} runs of {query} on the dashboard"
        time.sleep(0.2)


def shown_runs(page: Page) -> list[str]:
    return page.locator("#runs a.run-id").all_inner_texts()


def test_the_runs_page_pages_filters_and_searches_live(
    worker: WorkerProcess, scaled: DashboardProcess, page: Page, shots: Path
) -> None:
    worker.wait_ready()
    for index in range(8):
        publish(worker.settings, closed_run(f"pg-{index}", [1.0], benchmark="pager", model=f"m{index % 2}"))
        wait_for_runs(scaled, index + 1, label="benchmark=pager")  # one at a time: closed in this order
    page.goto(url(scaled, "/", label="benchmark=pager", per="3"))
    expect(page.locator("#live")).to_have_text("live")
    page.evaluate("window.sameDocument = true")
    assert shown_runs(page) == ["pg-7", "pg-6", "pg-5"]
    expect(page.locator("#pager")).to_contain_text("runs 1–3 of 8 matching")

    page.click("#pager a[rel=next]")
    expect(page).to_have_url(url(scaled, "/", label="benchmark=pager", page="2", per="3"))
    assert shown_runs(page) == ["pg-4", "pg-3", "pg-2"]  # past the 3 in memory: from the index
    page.screenshot(path=shots / "runs-page-2.png", full_page=True)

    page.locator("#runs .label", has_text="model=m1").first.click()  # a label filters by it too
    expect(page.locator("#pager")).to_contain_text("of 4 matching")
    assert "model%3Dm1" in page.url
    assert shown_runs(page) == ["pg-7", "pg-5", "pg-3"]

    page.fill("input[name=q]", "pg-1")
    page.click("#filter button")
    expect(page.locator("#pager")).to_contain_text("runs 1–1 of 1 matching")
    assert shown_runs(page) == ["pg-1"]

    page.click("#runs a.run-id")  # a run out of memory: its summary is read back from the topic
    expect(page.locator("#run-figures")).to_have_attribute("data-from", "summary")
    expect(page.locator("h1 .run-id")).to_have_text("pg-1")

    page.goto(url(scaled, "/", label="benchmark=pager", per="3"))
    expect(page.locator("#live")).to_have_text("live")
    page.evaluate("window.sameDocument = true")
    publish(worker.settings, closed_run("pg-8", [0.0], benchmark="pager", model="m0"))
    expect(page.locator("#runs a.run-id").first).to_have_text("pg-8", timeout=LIVE * 1000)
    assert shown_runs(page) == ["pg-8", "pg-7", "pg-6"]  # the page keeps its 3 rows
    expect(page.locator("#pager")).to_contain_text("of 9 matching")
    assert page.evaluate("window.sameDocument") is True
    page.screenshot(path=shots / "runs-filtered-live.png", full_page=True)


def test_a_page_open_across_a_restart_of_the_dashboard_catches_up_without_a_reload(
    worker: WorkerProcess, browser: Browser, tmp_path: Path
) -> None:
    worker.wait_ready()
    context = browser.new_context()
    page = context.new_page()
    problems: list[str] = []  # the stream's reconnections fail while the dashboard is down, nothing else may
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.on(
        "console",
        lambda message: (
            problems.append(message.text)
            if message.type == "error" and "ERR_CONNECTION_REFUSED" not in message.text
            else None
        ),
    )
    first = DashboardProcess(worker.settings, tmp_path / "first", recent=RECENT)
    port = int(first.url.rstrip("/").rsplit(":", 1)[1])
    second: DashboardProcess | None = None
    try:
        publish(worker.settings, closed_run("rs-1", [1.0], benchmark="restart"))
        wait_for_runs(first, 1, label="benchmark=restart")
        page.goto(url(first, "/", label="benchmark=restart"))
        expect(page.locator("#live")).to_have_text("live")
        page.evaluate("window.sameDocument = true")
        first.stop()
        expect(page.locator("#live")).to_have_text("reconnecting…")
        publish(worker.settings, closed_run("rs-2", [0.0], benchmark="restart"))  # while it is down
        second = DashboardProcess(worker.settings, tmp_path / "second", port=port, recent=RECENT)
        expect(page.locator("#runs a.run-id").first).to_have_text("rs-2", timeout=LIVE * 1000)
        assert shown_runs(page) == ["rs-2", "rs-1"]
        expect(page.locator("#live")).to_have_text("live")
        assert page.evaluate("window.sameDocument") is True
        assert not problems, problems
    finally:
        context.close()
        first.stop()
        if second is not None:
            second.stop()


def test_a_task_history_moves_when_a_new_run_of_its_benchmark_closes(
    worker: WorkerProcess, scaled: DashboardProcess, page: Page, shots: Path
) -> None:
    worker.wait_ready()
    for index, values in enumerate([[1.0, 1.0], [0.0, 1.0]]):
        publish(worker.settings, closed_run(f"hs-{index}", values, benchmark="history"))
        wait_for_runs(scaled, index + 1, label="benchmark=history")
    page.goto(url(scaled, "/task", id="flip", label="benchmark=history"))
    expect(page.locator("#live")).to_have_text("live")
    page.evaluate("window.sameDocument = true")
    rows = page.locator("#task-runs tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(1).locator("td[data-key='reward.score']")).to_have_attribute("data-verdict", "flaky")
    expect(page.locator("#task-flips tr[data-task='flip'] td.num").first).to_have_text("1")

    publish(worker.settings, closed_run("hs-2", [0.0, 0.0], benchmark="history"))
    expect(rows).to_have_count(3, timeout=LIVE * 1000)
    expect(rows.nth(2)).to_have_attribute("data-run", "hs-2")
    expect(rows.nth(2).locator("td[data-key='reward.score']")).to_have_attribute("data-rate", "0.0")
    expect(page.locator("#task-flips tr[data-task='flip'] td.num").first).to_have_text("2")
    assert page.locator("#task-flips tr[data-task='steady']").count() == 0
    assert page.evaluate("window.sameDocument") is True
    page.screenshot(path=shots / "task-history.png", full_page=True)
