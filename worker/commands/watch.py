"""`evalstream watch RUN_ID`: a live terminal view of one run, from its progress events."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from rich.console import Group
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Table

from worker.settings import Settings


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
    table = Table(
        title=f"pass@k  ({tasks['declared']} tasks, {tasks['pending']} pending, {record['scores_applied']} scores)"
    )
    table.add_column("key", no_wrap=True)
    ks = sorted({int(k) for by_k in record["pass_at_k"].values() for k in by_k})[:3]
    for k in ks:
        table.add_column(f"pass@{k}", justify="right")
    for column in ("solved", "flaky", "failed", "unmeas.", "pending"):
        table.add_column(column, justify="right")
    for key, verdicts in record["verdicts"].items():
        by_k = record["pass_at_k"].get(key, {})
        cells = [f"{by_k[str(k)]['mean']:.3f}" if str(k) in by_k else "" for k in ks]
        table.add_row(
            escape(key), *cells, *(str(verdicts[v]) for v in ("solved", "flaky", "failed", "unmeasured", "pending"))
        )
    return Group(bar, table)


async def watch(settings: Settings, run_id: str, *, until_closed: bool = True) -> dict[str, Any] | None:
    """Follow the run's progress events and redraw; returns the last one seen."""
    consumer = AIOKafkaConsumer(**settings.client_options(), enable_auto_commit=False)
    await consumer.start()
    last: dict[str, Any] | None = None
    try:
        partitions: list[TopicPartition] = []
        while not partitions:
            cluster = await consumer._client.fetch_all_metadata()
            found = cluster.partitions_for_topic(settings.progress_topic) or ()
            partitions = [TopicPartition(settings.progress_topic, p) for p in found]
            if not partitions:
                await asyncio.sleep(0.5)
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        wanted = run_id.encode()
        with Live(refresh_per_second=8) as live:
            live.update(escape(f"waiting for progress of run {run_id!r} on {settings.progress_topic} ..."))
            while True:
                for records in (await consumer.getmany(timeout_ms=250)).values():
                    for record in records:
                        if record.key == wanted:
                            last = orjson.loads(record.value)
                            live.update(render(last))
                if until_closed and last is not None and last["status"] == "closed":
                    return last
    finally:
        await consumer.stop()
