"""The dashboard with a year of runs on its topics: its memory, and how fast its pages come.

Run: `make bench-dashboard-scale` (or `python -m bench.dashboard_scale [--runs 1000 10000]`).
Uses EVALSTREAM_BOOTSTRAP if set, else starts a local broker (free ports, temporary state).
Needs Chromium (Debian's `chromium`, or EVALSTREAM_CHROMIUM) for the in-browser figure.

For each count of runs, fresh topics get that many closed runs (each run's last progress event
and its summary, the bytes replay publishes). The runs are small, 20 tasks of 4 attempts
(~8 KB of summary JSON): what grows with history is the number of runs, which is what the
dashboard's memory must not follow. Ten synthetic runs (labels `benchmark=synthetic`,
`seed=0..9`) are published again and again under other run ids, so that a label filter picks a
tenth of them and every run shares its tasks with the others. Then an `evalstream dashboard`
(keeping `--recent` closed runs in memory, its default 200) reads them, and this prints:
- its RSS once it serves, after the pages below were each loaded but the task page over every
  run, and after that one too (VmRSS, /proc);
- the runs page's time to first byte (median of 20 GETs): page 1, page 100, and page 1
  filtered by `seed=3`; and in Chromium, the time from navigation to the page loaded and
  its live stream open (median of 5);
- an older run's page (its summary read back from the topic), time to first byte;
- the task page (the task's history and the changed-task list) over a tenth of the runs
  (`/task?id=task-00003&label=seed=3`) and over every run (`label=benchmark=synthetic`), time to
  first byte, and in Chromium.
The ratio of the RSS with the most runs to the RSS with the fewest is the figure to watch.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import orjson
from aiokafka import AIOKafkaProducer
from playwright.async_api import Browser, async_playwright, expect

from bench.dashboard import outputs
from events.clients.kafka import running
from events.codec import MAX_EVENT_BYTES
from worker.local.clusters import cluster
from worker.local.processes import DashboardProcess, chromium, isolated_settings
from worker.runtime.topics import ensure_topics
from worker.settings import Settings

TEMPLATES = 10
TASK = "task-00003"


def templates() -> list[dict[str, bytes]]:
    """The last progress event and the summary of each template run."""
    return [dict(outputs(f"template-{seed}", tasks=20, seed=seed)) for seed in range(TEMPLATES)]


async def fill(settings: Settings, runs: int) -> None:
    made = templates()
    producer = AIOKafkaProducer(
        **settings.client_options(), max_request_size=MAX_EVENT_BYTES + 4096, linger_ms=20, compression_type="zstd"
    )
    async with running(producer):
        for index in range(runs):
            seed = index % TEMPLATES
            run_id = f"run-{index:06d}"
            template = f'"run_id":"template-{seed}"'.encode()
            renamed = f'"run_id":"{run_id}"'.encode()
            for kind, topic in (("progress", settings.progress_topic), ("summary", settings.summaries_topic)):
                record = made[seed][kind].replace(template, renamed)
                await producer.send(topic, record, key=run_id.encode())
        await producer.flush()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def first_byte(address: str, times: int = 20) -> float:
    """Median seconds from a GET to the first byte of the answer (the whole body read after)."""
    taken = []
    for _ in range(times):
        began = time.perf_counter()
        with urllib.request.urlopen(address) as response:
            response.read(1)
            taken.append(time.perf_counter() - began)
            response.read()
    return statistics.median(taken)


async def in_browser(browser: Browser, address: str, times: int = 5) -> float:
    """Median seconds from navigation to the page loaded with its live stream open."""
    taken = []
    for _ in range(times):
        page = await browser.new_page()
        began = time.perf_counter()
        await page.goto(address)
        await expect(page.locator("#live")).to_have_text("live", timeout=60_000)  # the page's CSP allows no eval
        taken.append(time.perf_counter() - began)
        await page.close()
    return statistics.median(taken)


async def measure(bootstrap: str, runs: int, recent: int, scratch: Path) -> dict[str, float]:
    settings = isolated_settings(bootstrap)
    await ensure_topics(settings)
    began = time.perf_counter()
    await fill(settings, runs)
    print(f"{runs:,} runs on the topics in {time.perf_counter() - began:.1f} s", flush=True)
    began = time.perf_counter()
    dashboard = DashboardProcess(settings, scratch / f"dashboard-{runs}", timeout=600, recent=recent)
    figures = {"serving_s": time.perf_counter() - began}
    try:
        pid = dashboard.process.pid
        figures["rss_serving_mb"] = rss_mb(pid)
        base = dashboard.url.rstrip("/")
        pages = {
            "runs page 1": f"{base}/",
            "runs page 100": f"{base}/?page={min(100, runs // 50)}",
            "runs page 1, seed=3": f"{base}/?{urlencode({'label': 'seed=3'})}",
            "an older run's page": f"{base}/run?id=run-{runs // 2:06d}",
            "task page, seed=3": f"{base}/task?{urlencode([('id', TASK), ('label', 'seed=3')])}",
            "task page": f"{base}/task?{urlencode({'id': TASK, 'label': 'benchmark=synthetic'})}",
        }
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium())
            # The task page over every run last: the one page whose work grows with the topic.
            for name, address in pages.items():
                if name == "task page":
                    figures["rss_after_pages_mb"] = rss_mb(pid)
                figures[f"{name} first byte_ms"] = first_byte(address) * 1000
                if name in ("runs page 1", "runs page 1, seed=3", "task page, seed=3", "task page"):
                    figures[f"{name} in Chromium_ms"] = await in_browser(browser, address) * 1000
            await browser.close()
        for name in ("task page, seed=3", "task page"):
            with urllib.request.urlopen(pages[name] + "&format=json") as response:
                shown = orjson.loads(response.read())
            figures[f"{name} runs"] = len(shown["runs"])
            figures[f"{name} flips"] = len(shown["flips"])
        figures["rss_after_all_runs_task_page_mb"] = rss_mb(pid)
    finally:
        dashboard.stop()
    return figures


def main() -> None:
    if chromium() is None:
        raise SystemExit("bench.dashboard_scale needs Chromium: `apt-get install chromium`, or set EVALSTREAM_CHROMIUM")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, nargs="+", default=[1_000, 10_000], help="counts of runs to measure")
    parser.add_argument("--recent", type=int, default=200, help="the dashboard's --recent")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as scratch,
        cluster(os.environ.get("EVALSTREAM_BOOTSTRAP"), Path(scratch) / "broker") as bootstrap,
    ):
        measured = {runs: asyncio.run(measure(bootstrap, runs, args.recent, Path(scratch))) for runs in args.runs}
    names = list(next(iter(measured.values())))
    print(f"\n{'':<36}" + "".join(f"{runs:>12,} runs" for runs in measured))
    for name in names:
        print(f"{name:<36}" + "".join(f"{figures[name]:>17.1f}" for figures in measured.values()))
    low, high = min(measured), max(measured)
    for name in ("rss_serving_mb", "rss_after_pages_mb", "rss_after_all_runs_task_page_mb"):
        print(f"{name}: {high:,} runs / {low:,} runs = {measured[high][name] / measured[low][name]:.2f}")


if __name__ == "__main__":
    main()
