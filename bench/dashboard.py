"""Time from a progress event published to the dashboard's pages showing it, in a real browser.

Run: `make bench-dashboard` (or `python -m bench.dashboard`). Uses EVALSTREAM_BOOTSTRAP if
set, else starts a local broker (free ports, temporary state). Needs Chromium (Debian's
`chromium`, or EVALSTREAM_CHROMIUM) and Playwright (a dev dependency).

No worker: the bench publishes the progress records itself, the bytes a worker publishes
(replay's output for a synthetic run), so the time measured is the dashboard's alone. First
`--closed` closed runs (their last progress and summary) are put on the topics, so the board
is not empty; then an `evalstream dashboard` process starts and headless Chromium opens the
runs page and the measured run's page, each with a MutationObserver noting (seq, Date.now())
whenever the run's row (or head) shows a new progress event. The measured run's progress is
published at `--rate` events/s for `--seconds`, while `--others` other open runs publish theirs
at 5 events/s each (the worker's coalescing pace). A record's publish time is taken just
before it is sent (so the broker's acknowledgement is inside the figure); it counts as shown
when the page shows it or a later one (a page may skip a state it was too late for). The same
clock serves both ends (one machine). Prints p50, p99 and max per page.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
from aiokafka import AIOKafkaProducer
from playwright.async_api import Page, async_playwright

from events.clients.kafka import running
from events.codec import MAX_EVENT_BYTES
from events.synthetic import synthetic_run
from projections.replayer import Replayer
from worker.dashboard.pages import dom_id
from worker.local.clusters import cluster
from worker.local.processes import DashboardProcess, chromium, isolated_settings
from worker.runtime.topics import ensure_topics
from worker.settings import Settings

MEASURED = "measured"
WATCH = """([id, attribute]) => {
  window.shown = [];
  const note = () => {
    const element = document.getElementById(id);
    const seq = element ? Number(element.getAttribute(attribute)) : 0;
    const last = window.shown.length ? window.shown[window.shown.length - 1][0] : 0;
    if (seq > last) window.shown.push([seq, Date.now()]);
  };
  new MutationObserver(note).observe(document.body, {subtree: true, childList: true, attributes: true});
  note();
}"""


def outputs(run_id: str, tasks: int, seed: int) -> Iterator[tuple[str, bytes]]:
    """("progress" | "summary", record) of a synthetic run, one progress per applied event."""
    replayer = Replayer(progress_every=1)
    for number, event in enumerate(synthetic_run(run_id, tasks=tasks, attempts=4, seed=seed), 1):
        for _, _, output in replayer.feed(number, orjson.dumps(event)):
            yield ("summary" if b'"type":"run.summary"' in output else "progress"), output.rstrip(b"\n")


async def fill(settings: Settings, closed: int) -> None:
    """Closed runs on the topics: each run's last progress event and its summary."""
    producer = AIOKafkaProducer(**settings.client_options(), max_request_size=MAX_EVENT_BYTES + 4096, linger_ms=5)
    async with running(producer):
        for index in range(closed):
            run_id = f"closed-{index:04d}"
            last: dict[str, bytes] = dict(outputs(run_id, tasks=20, seed=index))
            await producer.send(settings.progress_topic, last["progress"], key=run_id.encode())
            await producer.send(settings.summaries_topic, last["summary"], key=run_id.encode())
        await producer.flush()


async def stream(settings: Settings, rate: float, seconds: float, others: int) -> dict[int, float]:
    """Publish the measured run's progress at `rate`/s (and the others'); seq -> publish time."""
    count = int(rate * seconds)
    measured = [record for kind, record in outputs(MEASURED, tasks=count // 20 + 1, seed=7) if kind == "progress"]
    background = [
        [
            r
            for kind, r in outputs(f"open-{index:03d}", tasks=int(5 * seconds) // 20 + 1, seed=index)
            if kind == "progress"
        ]
        for index in range(others)
    ]
    sent: dict[int, float] = {}
    producer = AIOKafkaProducer(**settings.client_options(), max_request_size=MAX_EVENT_BYTES + 4096, linger_ms=0)

    async def pace(run_id: str, records: list[bytes], per_second: float, note: bool) -> None:
        start = time.perf_counter()
        for index, record in enumerate(records):
            await asyncio.sleep(max(0.0, start + index / per_second - time.perf_counter()))
            if note:
                sent[orjson.loads(record)["seq"]] = time.time()
            await producer.send(settings.progress_topic, record, key=run_id.encode())

    async with running(producer):
        await asyncio.gather(
            pace(MEASURED, measured[:count], rate, True),
            *(pace(f"open-{i:03d}", records[: int(5 * seconds)], 5.0, False) for i, records in enumerate(background)),
        )
        await producer.flush()
    return sent


async def shown(page: Page) -> list[tuple[int, float]]:
    return [(int(seq), at / 1000) for seq, at in await page.evaluate("window.shown")]


def delays(sent: dict[int, float], seen: list[tuple[int, float]]) -> list[float]:
    """Per published record: from its publish to the first time the page showed it or a later one."""
    found = []
    for seq, at in sent.items():
        later = [when for shown_seq, when in seen if shown_seq >= seq]
        if later:
            found.append(min(later) - at)
    return sorted(found)


async def measure(settings: Settings, args: argparse.Namespace, scratch: Path) -> None:
    await ensure_topics(settings)
    await fill(settings, args.closed)
    began = time.perf_counter()
    dashboard = DashboardProcess(settings, scratch / "dashboard")
    print(f"dashboard serving after {time.perf_counter() - began:.1f} s with {args.closed} closed runs on the topics")
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium())
            runs_page = await browser.new_page()
            run_page = await browser.new_page()
            await runs_page.goto(dashboard.url)
            await run_page.goto(f"{dashboard.url}run?id={MEASURED}")
            for page in (runs_page, run_page):
                await page.wait_for_function("document.getElementById('live').textContent === 'live'")
            await runs_page.evaluate(WATCH, [dom_id("run", MEASURED), "data-seq"])
            await run_page.evaluate(WATCH, ["run-head", "data-seq"])
            sent = await stream(settings, args.rate, args.seconds, args.others)
            await asyncio.sleep(2.0)
            for name, page in (("runs page", runs_page), ("run page", run_page)):
                times = delays(sent, await shown(page))
                p50, p99 = statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))]
                print(
                    f"progress published -> {name} shows it: p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
                    f"max {times[-1] * 1000:.0f} ms over {len(times)} of {len(sent)} events"
                )
            await browser.close()
    finally:
        dashboard.stop()


def main() -> None:
    if chromium() is None:
        raise SystemExit("bench.dashboard needs Chromium: `apt-get install chromium`, or set EVALSTREAM_CHROMIUM")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=10.0, help="the measured run's progress events per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--others", type=int, default=20, help="other open runs streaming at 5 progress events/s")
    parser.add_argument("--closed", type=int, default=200, help="closed runs on the topics before the start")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as scratch,
        cluster(os.environ.get("EVALSTREAM_BOOTSTRAP"), Path(scratch) / "broker") as bootstrap,
    ):
        print(
            f"{args.rate:g} progress events/s of one run for {args.seconds:g} s, {args.others} other runs at 5/s, "
            f"{args.closed} closed runs"
        )
        asyncio.run(measure(isolated_settings(bootstrap), args, Path(scratch)))


if __name__ == "__main__":
    main()
