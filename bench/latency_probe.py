"""`python bench/latency_probe.py -m worker.commands.cli worker ...`: the worker, timed from
inside for `bench.latency`.

It wraps what a progress event goes through in the worker and writes one JSON line per step
to the file `BENCH_LATENCY_TRACE` names, with the machine's monotonic clock (the bench's
`time.perf_counter` reads the same one): a batch folded (`handled`: its runs and their event
counts), a progress event made (`made`), a checkpoint's write begun (`write`: the progress
events it holds), its commit called (`commit`: every record answered) and returned
(`committed`). Run by path under another checkout's interpreter (with
`PYTHONSAFEPATH`), it times that checkout's worker: it names only what both sides have.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
from typing import Any

from worker.runtime import checkpoint, progress, transactions

_trace = open(os.environ["BENCH_LATENCY_TRACE"], "a", buffering=1)  # noqa: SIM115  # open for the process's life


def _note(step: str, **fields: Any) -> None:
    _trace.write(json.dumps({"step": step, "at": time.monotonic(), **fields}) + "\n")


def _probe() -> None:
    made, changed = progress.Progress._publish, progress.Progress.changed
    write = checkpoint.Checkpoint.write
    commit = transactions.KafkaTransactions.commit

    def timed_made(self: Any, entry: Any, *args: Any) -> Any:
        item = made(self, entry, *args)
        _note("made", run=entry.run.run_id, count=entry.run.event_count)
        return item

    def timed_changed(self: Any, entries: Any, *args: Any) -> Any:
        entries = list(entries)
        _note("handled", counts={entry.run.run_id: entry.run.event_count for entry in entries})
        return changed(self, entries, *args)

    async def timed_write(self: Any, producer: Any, **kwargs: Any) -> Any:
        _note("write", progress=[item.event_id for item in self.outputs if item.stream == "progress"])
        return await write(self, producer, **kwargs)

    async def timed_commit(self: Any, *args: Any) -> Any:
        _note("commit")
        await commit(self, *args)
        _note("committed")

    progress.Progress._publish = timed_made  # type: ignore[method-assign]
    progress.Progress.changed = timed_changed  # type: ignore[method-assign,assignment]
    checkpoint.Checkpoint.write = timed_write  # type: ignore[method-assign]
    transactions.KafkaTransactions.commit = timed_commit  # type: ignore[method-assign,assignment]


if __name__ == "__main__":
    _probe()
    if sys.argv[1:2] != ["-m"]:
        raise SystemExit("usage: latency_probe.py -m MODULE [ARGS...]")
    sys.argv = sys.argv[2:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
