"""What the exporters' tests share: the command, and summaries files `evalstream replay` printed."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import orjson

from events.codec import encode
from events.models import InputEvent
from events.outputs import RunSummary
from events.synthetic import synthetic_run
from tests.builders import scored_run

OLD: dict[str, list[object]] = {"a": [1, 1], "b": [1, 1], "c": [0, 0], "d": [1, 0], "e": [1, 1]}
NEW: dict[str, list[object]] = {"a": [0, 0], "b": [1, 1], "c": [1, 1], "d": [0, 0], "e": [0, None]}
"""Two runs of one benchmark: a and e flip from solved to failed, c the other way, d flaky to failed."""


def evalstream(
    *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
        input=None if stdin is None else stdin.decode(),
    )


def replayed(folder: Path, events: Iterable[InputEvent | dict[str, Any]], name: str = "summaries") -> Path:
    """The summaries (and progress lines) `evalstream replay --progress` prints for `events`."""
    log = folder / f"{name}.log.jsonl"
    log.write_bytes(b"".join((orjson.dumps(e) if isinstance(e, dict) else encode(e)) + b"\n" for e in events))
    done = evalstream("replay", str(log), "--progress", "--progress-every", "50")
    assert done.returncode == 0, done.stderr
    path = folder / f"{name}.jsonl"
    path.write_text(done.stdout)
    return path


def benchmark_runs() -> list[InputEvent | dict[str, Any]]:
    """`old` and `new` of benchmark `flips`, a synthetic run of another benchmark, and `late`,
    whose attempts after its close make revisions 2 and 3."""
    return [
        *scored_run("old", OLD, labels={"benchmark": "flips", "model": "m-1"}),
        *scored_run("new", NEW, labels={"benchmark": "flips", "model": "m-2"}),
        *synthetic_run("synthetic", tasks=6, attempts=3, seed=3),
        *scored_run("late", {"a": [1, 0], "b": [1, 1]}, labels={"benchmark": "late/one"}),
        *scored_run("late", {"a": [1], "b": [0]})[1:-1],
    ]


def summaries_of(path: Path) -> dict[str, RunSummary]:
    """Each run's highest revision in a summaries file."""
    latest: dict[str, RunSummary] = {}
    for line in path.read_bytes().splitlines():
        if b'"run.summary"' not in line:
            continue
        summary = RunSummary.model_validate_json(line)
        if summary.run_id not in latest or latest[summary.run_id].revision < summary.revision:
            latest[summary.run_id] = summary
    return latest


def expected_pass_figures(
    summary: RunSummary,
) -> list[tuple[str, str, int, float, float | None, float | None, float | None]]:
    """(key, figure, k, mean, stderr, low, high) of every statistics entry with a mean."""
    rows = []
    for key, statistics in summary.statistics.items():
        for figure, entries in (("pass@k", statistics.pass_at_k), ("pass^k", statistics.pass_hat_k)):
            rows += [
                (key, figure, e.k, e.mean, e.stderr, e.ci95_low, e.ci95_high) for e in entries if e.mean is not None
            ]
    return sorted(rows)


def keep(lines: Sequence[str], word: str) -> list[str]:
    return [line for line in lines if word in line]


def query(sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    """The rows of a DuckDB query (named parameters: `$name`)."""
    return duckdb.execute(sql, params or {}).fetchall()
