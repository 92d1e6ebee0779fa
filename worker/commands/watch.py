"""`evalstream watch RUN_ID`: a live terminal view of one run, from its progress events."""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import orjson
from rich import box
from rich.console import Group
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Table

from worker.failure import ENVIRONMENT, CommandError
from worker.settings import Settings
from worker.topic_reader import topic_reader


def render(record: dict[str, Any]) -> Group:
    """One progress event as a progress bar, a pass@k table and verdict counts."""
    trials = record["trials"]
    bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[detail]}"))
    eta = record["eta_seconds"]
    detail = f"{trials['finished']}/{trials['expected'] or '?'} trials, {trials['failed']} died"
    if eta is not None and record["status"] == "open":
        detail += f", ETA {eta:.0f}s"
    bar.add_task(
        escape(f"{record['run_id']} [{record['status']}]"),  # not rich markup: run ids are anyone's text
        total=trials["expected"] or None,
        completed=trials["finished"],
        detail=detail,
    )
    tasks = record["tasks"]
    # Fits 80 columns: rules only under the header, one space between columns, the figures and
    # their headers never cut; a long key wraps instead.
    table = Table(
        title=f"pass@k  ({tasks['declared']} tasks, {tasks['pending']} pending, {record['scores_applied']} scores)",
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        pad_edge=False,
        show_edge=False,
    )
    table.add_column("key", overflow="fold")
    ks = sorted({int(k) for by_k in record["pass_at_k"].values() for k in by_k})[:3]
    for header in [*(f"pass@{k}" for k in ks), "solved", "flaky", "failed", "unmeas.", "pending"]:
        table.add_column(header, justify="right", no_wrap=True, min_width=len(header))
    for key, verdicts in record["verdicts"].items():
        by_k = record["pass_at_k"].get(key, {})
        cells = [f"{by_k[str(k)]['mean']:.3f}" if str(k) in by_k else "" for k in ks]
        table.add_row(
            escape(key), *cells, *(str(verdicts[v]) for v in ("solved", "flaky", "failed", "unmeasured", "pending"))
        )
    return Group(bar, table)


async def watch(
    settings: Settings, run_id: str, *, until_closed: bool = True, timeout: float | None = None
) -> dict[str, Any] | None:
    """Follow the run's progress events and redraw; returns the last one seen.

    Until the first one arrives it says what it waits for; with `timeout`, it gives up
    (`CommandError`) when nothing of the run has come after that many seconds.
    """
    where = f"topic {settings.progress_topic!r} at {settings.bootstrap}"
    print(f"evalstream watch: waiting for progress of run {run_id!r} on {where} ...", file=sys.stderr, flush=True)
    deadline = math.inf if timeout is None else time.monotonic() + timeout
    consumer = await topic_reader(settings, settings.progress_topic, wait=deadline - time.monotonic())
    if consumer is None:
        raise CommandError(
            f"no {where} after {timeout:g} s; start the worker (it creates the topic), "
            "or check --progress-topic and --bootstrap",
            ENVIRONMENT,
        )
    last: dict[str, Any] | None = None
    wanted = run_id.encode()
    try:
        with Live(refresh_per_second=8) as live:
            while True:
                for records in (await consumer.getmany(timeout_ms=250)).values():
                    for record in records:
                        if record.key == wanted:
                            last = orjson.loads(record.value)
                            live.update(render(last))
                if until_closed and last is not None and last["status"] == "closed":
                    return last
                if last is None and time.monotonic() >= deadline:
                    raise CommandError(
                        f"no progress of run {run_id!r} on {where} in {timeout:g} s; check the run id "
                        "(`evalstream summaries` prints the closed runs) and that a worker is running",
                        ENVIRONMENT,
                    )
    finally:
        await consumer.stop()
