"""The one loop every exporter runs: read a batch, keep each run's newest summary of it, write,
and only then commit.

Order of work per batch (a crash anywhere re-reads the batch and writes it again, which the
sinks make harmless by (run, revision)):
1. the source hands out a batch of summaries (`worker.export.sources`);
2. of the summaries of one run in the batch, the highest revision alone is written (it
   replaces the earlier ones anyway);
3. the sink writes them (`worker.export.sink`), in a thread, so that a group member's
   heartbeats go on; a run it refused is named on `err` with the reason, and the rest goes on;
4. the source commits the batch.

Progress: a line on `err` every `every` seconds (and one at the end) with what was read,
written, unchanged and refused, the rate, and the share done when the source knows its size.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from worker.export.sink import REFUSED, UNCHANGED, WRITTEN, Exported, Result, Sink
from worker.export.sources import Counts

PROGRESS_EVERY = 10.0
"""Seconds between two progress lines."""


@dataclass
class Tally:
    """What an export did, for the progress lines and the exit code."""

    counts: Counts
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys((WRITTEN, UNCHANGED, REFUSED), 0))
    began: float = field(default_factory=time.monotonic)

    def line(self, sink: Sink) -> str:
        counts, outcomes = self.counts, self.outcomes
        seconds = max(time.monotonic() - self.began, 1e-9)
        share = f" ({100 * counts.done / counts.total:.0f}% read)" if counts.total else ""
        return (
            f"{counts.read} summaries read{share}, {outcomes[WRITTEN]} runs written to {sink.name}, "
            f"{outcomes[UNCHANGED]} unchanged, {outcomes[REFUSED]} not written, {counts.skipped} records skipped; "
            f"{outcomes[WRITTEN] / seconds:.1f} runs/s"
        )

    @property
    def complete(self) -> bool:
        """Every record read was a summary, and every summary was written (or was already)."""
        return self.outcomes[REFUSED] == 0 and self.counts.skipped == 0


def newest(batch: Sequence[Exported]) -> list[Exported]:
    """Each run's highest revision in `batch`, in the order runs first appear."""
    kept: dict[str, Exported] = {}
    for each in batch:
        held = kept.get(each.summary.run_id)
        if held is None or held.summary.revision < each.summary.revision:
            kept[each.summary.run_id] = each
    return list(kept.values())


async def export(
    batches: AsyncIterator[list[Exported]],
    commit: Callable[[], Awaitable[None]],
    sink: Sink,
    tally: Tally,
    err: TextIO,
    *,
    every: float = PROGRESS_EVERY,
) -> Tally:
    """Write every batch to `sink`, committing after each; returns the tally."""
    said = time.monotonic()
    async for batch in batches:
        results = await asyncio.to_thread(sink.write, newest(batch))
        _report(results, tally, err)
        await commit()
        if time.monotonic() - said >= every:
            print(tally.line(sink), file=err, flush=True)
            said = time.monotonic()
    print(tally.line(sink), file=err, flush=True)
    return tally


def _report(results: list[Result], tally: Tally, err: TextIO) -> None:
    for result in results:
        tally.outcomes[result.outcome] += 1
        if result.outcome == REFUSED:
            print(
                f"run {result.run_id!r} revision {result.revision} not written: {result.reason}", file=err, flush=True
            )
