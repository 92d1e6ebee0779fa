"""The dashboard in a real browser (headless Chromium), against a real broker, worker and
`evalstream dashboard` process, with runs published as a harness publishes them."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson
import pytest
from playwright.sync_api import Page, expect

from events.codec import encode
from events.models import InputEvent
from tests.builders import closed, dead, score, started, task_spec, trial
from worker.local.processes import DashboardProcess, WorkerProcess, topic_flags
from worker.settings import Settings

pytestmark = [pytest.mark.kafka, pytest.mark.browser]

States = list[tuple[int, float]]
HOSTILE = "<img src=x onerror=alert(1)>"
SIMULATE = [sys.executable, "-m", "worker.commands.cli", "simulate"]
LIVE = 30.0
"""Seconds a page is given to show what the topics say."""


def evalstream(settings: Settings, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "worker.commands.cli", *args, *topic_flags(settings)]
    done = subprocess.run(command, input=stdin, capture_output=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    return done


def publish(settings: Settings, events: Sequence[InputEvent]) -> None:
    evalstream(settings, "publish", "-", stdin=b"\n".join(encode(event) for event in events))


def summary_of(settings: Settings, run_id: str) -> dict[str, Any]:
    """The run's latest summary, as `evalstream summaries` prints it from the topic."""
    deadline = time.monotonic() + LIVE
    while True:
        printed = subprocess.run(
            [sys.executable, "-m", "worker.commands.cli", "summaries", "--run", run_id, *topic_flags(settings)],
            capture_output=True,
            check=False,
        )
        if printed.returncode == 0 and printed.stdout.strip():
            found: dict[str, Any] = orjson.loads(printed.stdout.splitlines()[-1])
            return found
        assert time.monotonic() < deadline, f"no summary of {run_id!r}: {printed.stderr.decode()}"
        time.sleep(0.5)


def url(dashboard: DashboardProcess, path: str, **query: str) -> str:
    return dashboard.url.rstrip("/") + path + (f"?{urlencode(query)}" if query else "")


def test_a_simulated_run_moves_on_the_runs_page_and_closes_with_its_summary_figures(
    worker: WorkerProcess, dashboard: DashboardProcess, page: Page, shots: Path
) -> None:
    worker.wait_ready()
    settings = worker.settings
    page.goto(dashboard.url)
    expect(page.locator("#live")).to_have_text("live")
    page.evaluate("window.sameDocument = true")  # gone if the page reloads
    run_id = "sim-live"
    simulate = subprocess.Popen(
        [*SIMULATE, "--run-id", run_id, "--tasks", "24", "--attempts", "4", "--pace", "150", *topic_flags(settings)],
        stderr=subprocess.PIPE,
    )
    run_tab = page.context.new_page()
    try:
        seen = watch_row(page, run_id, dashboard, run_tab, shots)
    finally:
        assert simulate.wait(timeout=60) == 0, simulate.stderr.read().decode() if simulate.stderr else ""
    assert len(seen) >= 3, f"the row moved {len(seen)} times while the run streamed"
    assert [percent for _, percent in seen] == sorted(percent for _, percent in seen)
    assert seen[0][1] < 100.0
    assert page.evaluate("window.sameDocument") is True
    page.screenshot(path=shots / "runs.png", full_page=True)

    # The tab opened mid-run turns to the summary's own figures by itself.
    summary = summary_of(settings, run_id)
    expect(run_tab.locator("#run-figures")).to_have_attribute("data-from", "summary", timeout=LIVE * 1000)
    expect(run_tab.locator("#run-head")).to_have_attribute("data-revision", str(summary["revision"]))
    shows_summary_figures(run_tab, summary)
    run_tab.screenshot(path=shots / "run.png", full_page=True)


def watch_row(
    page: Page, run_id: str, dashboard: DashboardProcess, run_tab: Page, shots: Path
) -> list[tuple[int, float]]:
    """(seq, percent done) of each state the run's row showed until it closed; on the third,
    the run's page is opened in `run_tab`, its HTML first checked to hold that state already."""
    row = page.locator("#runs .row", has_text=run_id)
    seen: States = []
    deadline = time.monotonic() + 60
    while not (row.count() and "closed" in (row.locator(".status").text_content() or "")):
        assert time.monotonic() < deadline, "the run never closed on the runs page"
        if row.count():
            seq = int(row.get_attribute("data-seq") or 0)
            percent = float(row.locator("progress").get_attribute("value") or 0)
            if not seen or seen[-1][0] != seq:
                seen.append((seq, percent))
            if len(seen) == 3:
                page.screenshot(path=shots / "runs-live.png", full_page=True)
                # A page opened mid-run shows the run's state in its HTML, before any update.
                with urllib.request.urlopen(url(dashboard, "/run", id=run_id)) as response:
                    served = re.search(rb'<section id="run-head" data-seq="(\d+)"', response.read())
                assert served is not None
                assert int(served.group(1)) >= seq
                run_tab.goto(url(dashboard, "/run", id=run_id))
                run_tab.screenshot(path=shots / "run-live.png", full_page=True)
        time.sleep(0.05)
    return seen


def shows_summary_figures(tab: Page, summary: dict[str, Any]) -> None:
    """The run page shows the summary's pass@k aggregates (exactly, in data-value) and its
    verdicts counted per key, and a row for each flaky or failed task of each key."""
    passk = [aggregate for aggregate in summary["summary"]["scores"] if ".pass@" in aggregate["name"]]
    assert passk
    for aggregate in passk:
        key, _, k = aggregate["name"].rpartition(".pass@")
        cell = tab.locator(f'#run-figures td[data-key="{key}"][data-k="{k}"]')
        assert cell.get_attribute("data-value") == repr(aggregate["mean"])
        assert cell.inner_text() == f"{aggregate['mean']:.3f}"
    counted: dict[str, Counter[str]] = {}
    for by_key in summary["verdicts"].values():
        for key, verdict in by_key.items():
            counted.setdefault(key, Counter())[verdict] += 1
    for key, verdicts in counted.items():
        for verdict in ("solved", "flaky", "failed", "unmeasured", "pending"):
            cell = tab.locator(f'#run-figures td[data-key="{key}"][data-verdict="{verdict}"]')
            assert cell.inner_text() == str(verdicts[verdict])
    flaky_or_failed = sum(verdicts["flaky"] + verdicts["failed"] for verdicts in counted.values())
    assert tab.locator("#run-details table.attempts tr").count() == flaky_or_failed


def known(dashboard: DashboardProcess, run_id: str) -> bool:
    """Whether the dashboard has a record of the run (its JSON view answers 200)."""
    try:
        with urllib.request.urlopen(url(dashboard, "/run", id=run_id, format="json")):
            return True
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return False
        raise


def test_the_error_bars_narrow_on_a_live_run_and_end_on_the_summarys_interval(
    worker: WorkerProcess, dashboard: DashboardProcess, page: Page, shots: Path
) -> None:
    """The pass@1 bar of reward.score while a simulated run streams, as drawn (its height on
    screen) and as said (data-low, data-high): it moves with progress events, is narrower at
    the close than it was while few tasks were measured, and ends on the summary's interval."""
    worker.wait_ready()
    run_id = "sim-bars"
    command = [*SIMULATE, "--run-id", run_id, "--tasks", "30", "--attempts", "3", "--pace", "120", "--seed", "3"]
    simulate = subprocess.Popen([*command, *topic_flags(worker.settings)], stderr=subprocess.PIPE)
    heard_by = time.monotonic() + LIVE
    while not known(dashboard, run_id):  # a page for a run not seen yet answers 404
        assert time.monotonic() < heard_by, f"the dashboard never heard of {run_id!r}"
        time.sleep(0.05)
    page.goto(url(dashboard, "/run", id=run_id))
    figures = page.locator("#run-figures")
    bar = page.locator('figure.passk g.interval[data-series="reward.score"][data-k="1"]')
    hat_bar = page.locator('figure.passhatk g.interval[data-series="reward.score"][data-k="1"]')
    live: list[tuple[str, str, float]] = []
    try:
        deadline = time.monotonic() + 60
        while figures.get_attribute("data-from") != "summary":
            assert time.monotonic() < deadline, "the run's page never showed its summary"
            if bar.count() and figures.get_attribute("data-from") == "progress":
                box = bar.bounding_box()
                said = (bar.get_attribute("data-low") or "", bar.get_attribute("data-high") or "")
                if box is not None and (not live or live[-1][:2] != said):
                    live.append((*said, box["height"]))
                    if len(live) == 2:
                        page.screenshot(path=shots / "run-bars-live.png", full_page=True)
            time.sleep(0.05)
    finally:
        assert simulate.wait(timeout=60) == 0, simulate.stderr.read().decode() if simulate.stderr else ""
    assert len(live) >= 3, f"the bar moved {len(live)} times while the run streamed"
    summary = summary_of(worker.settings, run_id)
    expect(page.locator("#run-head")).to_have_attribute("data-revision", str(summary["revision"]))
    [final] = [entry for entry in summary["statistics"]["reward.score"]["pass_at_k"] if entry["k"] == 1]
    assert (bar.get_attribute("data-low"), bar.get_attribute("data-high")) == (
        repr(final["ci95_low"]),
        repr(final["ci95_high"]),
    )
    closing = bar.bounding_box()
    assert closing is not None
    widest = max(height for _, _, height in live)
    assert closing["height"] < widest, (closing["height"], live)
    print(f"pass@1 bar of reward.score, live (low, high, px): {live}; at close {closing['height']:.1f} px")
    assert hat_bar.count() == 1
    page.screenshot(path=shots / "run-bars.png", full_page=True)


def regression_runs() -> tuple[list[InputEvent], list[InputEvent]]:
    """Two runs of one benchmark: the candidate fails every attempt of `planted`, which the
    baseline solved; everything else is the same."""

    def run(run_id: str, model: str, planted: float) -> list[InputEvent]:
        tasks = ["alpha", "beta", "planted", "delta"]
        events: list[InputEvent] = [
            started(
                run_id,
                [task_spec(task, {"reward.score": "continuous"}) for task in tasks],
                attempts_per_task=3,
                labels={"benchmark": "contracts-v2", "model": model},
            )
        ]
        for task in tasks:
            for attempt in range(3):
                trial_id = f"{task}__{attempt}"
                value = planted if task == "planted" else float(attempt != 2 or task == "alpha")
                events += [
                    trial(task, trial_id, run_id=run_id),
                    score(task, trial_id, "reward", {"score": value}, run_id=run_id),
                ]
        return [*events, closed(run_id)]

    return run("main-7", "m-large", 1.0), run("pr-42", "m-large-rc", 0.0)


def test_the_two_run_view_shows_a_planted_regression(
    worker: WorkerProcess, dashboard: DashboardProcess, page: Page, shots: Path
) -> None:
    worker.wait_ready()
    baseline, candidate = regression_runs()
    page.goto(url(dashboard, "/compare", baseline="main-7", candidate="pr-42"))
    expect(page.locator("#compare-body")).to_contain_text("Waiting for the summary")
    publish(worker.settings, baseline + candidate)
    regressions = page.locator("table.changes.regressions tr", has_text="planted")
    expect(regressions).to_contain_text("solved → failed", timeout=LIVE * 1000)
    expect(regressions).to_contain_text("1.000 → 0.000")
    assert page.locator("table.changes.regressions tbody tr").count() == 1
    expect(page.locator("table.keys tr[data-key='reward.score']")).to_contain_text("0.833 → 0.583")
    # One regression of four tasks is not beyond chance: the page says so, and what would resolve it.
    expect(page.locator(".key[data-key='reward.score'] p.resolution")).to_have_text(
        "Not resolved: the 95% interval [-1.0456, +0.5456] holds 0. About 28 more paired tasks (32 in all) "
        "would resolve a difference of this size (0.2500) at 80% power."
    )
    page.screenshot(path=shots / "compare.png", full_page=True)
    with urllib.request.urlopen(
        urllib.request.Request(
            url(dashboard, "/compare", baseline="main-7", candidate="pr-42"), headers={"Accept": "application/json"}
        )
    ) as response:
        comparison = orjson.loads(response.read())["comparison"]
    [key] = comparison["keys"]
    assert key["regressions"] == [{"task_id": "planted", "baseline": "solved", "candidate": "failed"}]


def test_a_hostile_run_id_renders_as_text(
    worker: WorkerProcess, dashboard: DashboardProcess, page: Page, shots: Path
) -> None:
    worker.wait_ready()
    page.goto(dashboard.url)
    expect(page.locator("#live")).to_have_text("live")
    task = "<b>task</b>"
    events: list[InputEvent] = [
        started(
            HOSTILE,
            [task_spec(task, {"reward.score": "continuous"})],
            attempts_per_task=2,
            labels={"<i>x</i>": "<script>alert(2)</script>"},
        ),
        trial(task, "<svg onload=alert(3)>", run_id=HOSTILE),
        score(task, "<svg onload=alert(3)>", "reward", {"score": 1.0}, run_id=HOSTILE),
        trial(task, "t2", "failed", error_type="<img src=y onerror=alert(4)>", run_id=HOSTILE),
        dead(task, "t2", "reward", run_id=HOSTILE),
        closed(HOSTILE),
    ]
    publish(worker.settings, events)
    link = page.locator("#runs a.run-id", has_text="onerror")  # arrives live, through the page's script
    expect(link).to_have_text(HOSTILE, timeout=LIVE * 1000)
    expect(page.locator("#runs .label", has_text="alert(2)")).to_have_text("<i>x</i>=<script>alert(2)</script>")
    assert page.locator("main img, main script, main b, main i, main svg:not(.chart)").count() == 0
    page.screenshot(path=shots / "hostile-runs.png", full_page=True)
    link.click()
    expect(page.locator("h1 .run-id")).to_have_text(HOSTILE)
    expect(page.locator("#run-details .task-id")).to_have_text(task)
    expect(page.locator("#run-details .error-type")).to_have_text("<img src=y onerror=alert(4)>")
    assert (
        page.locator("#run-details td.cells .cell.passed").get_attribute("title") == "<svg onload=alert(3)>: passed (1)"
    )
    assert page.locator("main img, main script, main b, main i").count() == 0
    page.screenshot(path=shots / "hostile-run.png", full_page=True)


def test_a_second_dashboard_on_a_port_in_use_says_so(worker: WorkerProcess, dashboard: DashboardProcess) -> None:
    port = dashboard.url.rsplit(":", 1)[1].strip("/")
    command = [sys.executable, "-m", "worker.commands.cli", "dashboard", "--port", port, *topic_flags(worker.settings)]
    done = subprocess.run(command, capture_output=True, check=False, timeout=60)
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr.decode()
    assert "Traceback" not in done.stderr.decode()


def test_a_run_not_seen_is_drawn_as_not_found_and_fills_in_when_it_comes(
    worker: WorkerProcess, dashboard: DashboardProcess, page: Page, shots: Path
) -> None:
    """`/run?id=...` of a run nothing has come of says so: no open status, no progress bar.
    The page is live all the same: the run's records, when they come, draw it in place."""
    worker.wait_ready()
    run_id = "not-yet"
    page.goto(url(dashboard, "/run", id=run_id))
    expect(page.locator("#run-head .not-found")).to_contain_text(
        f"Run not found: no progress or summary of run {run_id}"
    )
    expect(page).to_have_title(f"run {run_id}: not found · evalstream")
    for open_run in ("progress", ".status", "#run-figures h2", "#run-details p"):
        expect(page.locator(open_run)).to_have_count(0)
    page.screenshot(path=shots / "run-not-found.png", full_page=True)
    page.evaluate("window.sameDocument = true")  # gone if the page reloads
    spec = task_spec("t1", {"reward.score": "continuous"})
    publish(
        worker.settings,
        [started(run_id, [spec]), score("t1", "a", "reward", {"score": 1.0}, run_id=run_id), closed(run_id)],
    )
    expect(page.locator('#run-head [data-fact="status"]')).to_have_text("closed: completed", timeout=LIVE * 1000)
    expect(page.locator(".not-found")).to_have_count(0)
    expect(page.locator("#run-figures")).to_have_attribute("data-from", "summary", timeout=LIVE * 1000)
    assert page.evaluate("window.sameDocument") is True
