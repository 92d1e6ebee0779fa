"""Where publish-to-progress latency goes.

Run: `python -m bench.latency` (`--rates 1000,10000`, `--seconds 20`; `--against PYTHON`:
another checkout's worker too, each rate measured by the two in turn, `--pairs` times).
EVALSTREAM_BOOTSTRAP if set, else a local broker. A run is published at a steady pace, as
`bench.e2e` publishes it, through one worker timed from inside (`bench.latency_probe`), and
a committed reader reads its progress. Each event's latency, from its publish to the first
progress event that counts it read by the reader, is split into:
- arrival: published, to its batch folded by the worker;
- window: to its run's progress event made (the end of the progress window);
- to write: to the write of the checkpoint holding that progress begun;
- records: to every record of the checkpoint sent and answered (AddPartitionsToTxn, the
  produce);
- commit: the group's offset and the commit (AddOffsetsToTxn, TxnOffsetCommit, EndTxn);
- to reader: from the commit's answer to the reader's (the markers, the reader's fetch).
For each rate, the p50 and p99 of the whole, then of each part its p50 and its mean over the
events at or past the whole's p99 (the tail: what the p99 is made of). The probe adds a
little work to the worker: compare within one run, not with `bench.e2e`'s figures.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.e2e import paced, warm
from worker.local.clusters import cluster
from worker.local.processes import WorkerProcess, isolated_settings
from worker.runtime.topics import ensure_topics

PARTS = ("arrival", "window", "to write", "records", "commit", "to reader")


def parts(
    run_id: str, sent_at: list[float], reads: list[tuple[float, int]], trace: list[dict[str, Any]]
) -> list[dict[str, float]]:
    """Each event's latency and its parts (`PARTS`), from the reader's times and the worker's."""
    handled = [(note["at"], note["counts"][run_id]) for note in trace if run_id in note.get("counts", ())]
    made = [(note["at"], note["count"]) for note in trace if note["step"] == "made" and note["run"] == run_id]
    writes: dict[int, dict[str, float]] = {}
    current: dict[str, float] | None = None
    for note in trace:
        if note["step"] == "write":
            current = {"write": note["at"]}
            for event_id in note["progress"]:
                if event_id.startswith(f"{run_id}/"):
                    writes[int(event_id.rsplit("/", 1)[1])] = current
        elif current is not None and note["step"] in ("commit", "committed"):
            current.setdefault(note["step"], note["at"])
    out = []
    first = [_first(points) for points in (reads, handled, made)]
    for index, sent in enumerate(sent_at):
        read, fold, make = (at(index + 1) for at in first)
        if read is None or fold is None or make is None:
            continue
        written = writes.get(make[1])
        if written is None or "committed" not in written:
            continue
        times = [sent, fold[0], make[0], written["write"], written["commit"], written["committed"], read[0]]
        split = {part: end - begin for part, begin, end in zip(PARTS, times, times[1:], strict=False)}
        out.append({"total": read[0] - sent, **split})
    return out


def _first(points: list[tuple[float, int]]) -> Callable[[int], tuple[float, int] | None]:
    """The first of `points` (time, count) whose count reaches a count (counts never decrease)."""
    counts = [seen for _, seen in points]

    def at(count: int) -> tuple[float, int] | None:
        index = bisect.bisect_left(counts, count)
        return points[index] if index < len(points) else None

    return at


def report(name: str, rate: float, events: list[dict[str, float]]) -> str:
    totals = sorted(event["total"] for event in events)
    p99 = totals[int(len(totals) * 0.99)]
    tail = [event for event in events if event["total"] >= p99]
    ms = 1000.0
    lines = [
        f"{name}, {rate:,.0f} events/s: p50 {statistics.median(totals) * ms:.0f} ms, p99 {p99 * ms:.0f} ms "
        f"over {len(events):,} events; each part's p50 / mean in the tail (ms):"
    ]
    shares = []
    for part in PARTS:
        typical = statistics.median(event[part] for event in events)
        shares.append(f"{part} {typical * ms:.0f} / {statistics.mean(event[part] for event in tail) * ms:.0f}")
    lines.append("  " + ", ".join(shares))
    return "\n".join(lines)


def measure(bootstrap: str, scratch: Path, python: str, rate: float, seconds: float) -> list[dict[str, float]]:
    """One worker (`python`'s checkout) under the probe, on topics of its own: one paced run."""
    settings = isolated_settings(bootstrap)
    trace_path = scratch / "trace.jsonl"
    probe = scratch / "python"
    probe.write_text(f'#!/bin/sh\nexec "{python}" "{Path(__file__).with_name("latency_probe.py")}" "$@"\n')
    probe.chmod(0o755)
    asyncio.run(ensure_topics(settings))
    env = {"BENCH_LATENCY_TRACE": str(trace_path), "PYTHONSAFEPATH": "1"}
    worker = WorkerProcess(settings, scratch / "worker", env=env, python=str(probe))
    try:
        warm(settings)
        run_id, sent_at, reads = asyncio.run(paced(settings, rate, seconds))
    finally:
        worker.stop()
    trace = [json.loads(line) for line in trace_path.read_text().splitlines() if line]
    return parts(run_id, sent_at, reads, trace)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="1000,10000")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--against", metavar="PYTHON", help="another checkout's interpreter, measured first")
    parser.add_argument("--pairs", type=int, default=1, help="rounds of the two checkouts, alternating")
    args = parser.parse_args()
    pythons = [("the other", args.against)] if args.against else []
    pythons.append(("this checkout", sys.executable))
    with (
        tempfile.TemporaryDirectory() as scratch,
        cluster(os.environ.get("EVALSTREAM_BOOTSTRAP"), Path(scratch) / "broker") as bootstrap,
    ):
        for rate in (float(r) for r in args.rates.split(",") if r):
            for pair in range(args.pairs):
                for name, python in pythons:
                    place = Path(scratch) / f"{name}-{rate:.0f}-{pair}"
                    place.mkdir()
                    print(report(name, rate, measure(bootstrap, place, python, rate, args.seconds)), flush=True)


if __name__ == "__main__":
    main()
