"""Every task across runs: one task's verdict and pass rate in each run of a label set, and the
tasks whose verdict changed between those runs.

A run is reduced to `RunTasks` once, when its summary arrives: per task and pass@k key, the
verdict and the attempts that passed of all (`c` of `n`, the pass rate `c / n` of
`projections.analysis.compare`, an attempt passing as in SEMANTICS.md section 2). It is packed in bytes
(9 a task and key) so that a year of runs fits in a dashboard's memory; `history` reads it back.

What counts as a verdict change: between two consecutive runs of the label set (oldest to
newest, by when their summaries were published) that both measured the task on the key, the
verdict differs. A run that did not measure the task (no attempt: `unmeasured`, or no such task)
is passed over, so a task missing from one run is not counted as a flip.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from events.nonfinite import NONFINITE_STRINGS
from events.outputs import Attempt, RunSummary
from projections.figures.passk import passes
from projections.figures.verdicts import FAILED, FLAKY, SOLVED, UNMEASURED

_CODES = (None, SOLVED, FLAKY, FAILED, UNMEASURED)
"""Verdict codes in the packed bytes; 0: the task has no such key in this run."""
_CODE = {verdict: code for code, verdict in enumerate(_CODES) if verdict is not None}
_PASSED_OVER = frozenset((0, _CODE[UNMEASURED]))
"""No such key in the run, or no attempt: not a verdict to compare."""
_PACKED = struct.Struct("<BII")


def _verdict(code: int) -> str:
    verdict = _CODES[code]
    assert verdict is not None  # code 0 (no such key) is passed over
    return verdict


@dataclass(frozen=True, slots=True)
class RunTasks:
    """One run's per-task verdicts and pass counts, packed."""

    run_id: str
    closed_at: float
    """When its summary was published (seconds since the epoch): the order of runs."""
    labels: Mapping[str, str]
    keys: tuple[str, ...]
    task_ids: tuple[str, ...]
    packed: bytes
    """Per task (in `task_ids` order), per key (in `keys` order): verdict code, passed, attempts."""

    def outcomes(self, task_id: str) -> dict[str, Outcome]:
        """The task's outcome per key it has in this run (none: no such task)."""
        try:
            index = self.task_ids.index(task_id)
        except ValueError:
            return {}
        return self._outcomes(index)

    def _outcomes(self, index: int) -> dict[str, Outcome]:
        found: dict[str, Outcome] = {}
        start = index * len(self.keys)
        for offset, key in enumerate(self.keys):
            code, passed, attempts = _PACKED.unpack_from(self.packed, (start + offset) * _PACKED.size)
            verdict = _CODES[code]
            if verdict is not None:
                found[key] = Outcome(verdict, passed, attempts, passed / attempts if attempts else None)
        return found

    def codes(self) -> bytes:
        """The verdict code of every task and key, in `cells` order, read off the packed bytes."""
        return self.packed[:: _PACKED.size]

    def cells(self) -> list[tuple[str, str]]:
        """(task id, key) of every packed cell, in order."""
        return [(task_id, key) for task_id in self.task_ids for key in self.keys]


@dataclass(frozen=True, slots=True)
class Outcome:
    """A task on one key in one run."""

    verdict: str
    passed: int
    attempts: int
    pass_rate: float | None
    """passed / attempts (None: no attempt)."""


def run_tasks(summary: RunSummary, closed_at: float) -> RunTasks:
    """`summary` reduced to what `history` needs."""
    keys = tuple(sorted({key for by_key in summary.verdicts.values() for key in by_key}))
    attempts = summary.summary.task_metric_attempts
    packed = bytearray()
    for task_id, by_key in summary.verdicts.items():
        lists = attempts.get(task_id, {})
        for key in keys:
            verdict = by_key.get(key)
            tried = lists.get(key, [])
            passed = sum(passes(_value(attempt)) for attempt in tried)
            packed += _PACKED.pack(0 if verdict is None else _CODE[verdict], passed, len(tried))
    return RunTasks(summary.run_id, closed_at, dict(summary.labels), keys, tuple(summary.verdicts), bytes(packed))


def _value(attempt: Attempt) -> float | None:
    value = attempt.value
    return NONFINITE_STRINGS[value] if isinstance(value, str) else value


@dataclass(frozen=True, slots=True)
class TaskRun:
    """The task in one run of the label set."""

    run_id: str
    closed_at: float
    outcomes: dict[str, Outcome]
    """Per key; empty: the run has no such task."""


@dataclass(frozen=True, slots=True)
class Flip:
    """A task whose verdict on a key changed between runs of the label set."""

    task_id: str
    key: str
    changes: int
    """Consecutive measured runs whose verdicts differ."""
    measured: int
    """Runs that measured it."""
    first_changed_in: str
    """The run in which its verdict first changed."""
    last_verdict: str


@dataclass(frozen=True, slots=True)
class History:
    labels: dict[str, str]
    runs: tuple[str, ...]
    """The runs of the label set, oldest first."""
    task_id: str | None
    task: tuple[TaskRun, ...]
    """The task in each of `runs` (empty when no task was asked for)."""
    flips: tuple[Flip, ...]
    """The tasks whose verdict changed: the most changes first, then by task and key."""


def matches(labels: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    """Whether a run's labels hold every wanted one."""
    return all(labels.get(name) == value for name, value in wanted.items())


def history(runs: Iterable[RunTasks], labels: Mapping[str, str], task_id: str | None = None) -> History:
    """The runs holding `labels`, oldest to newest; `task_id`'s outcome in each (if given);
    and every task whose verdict changed between them."""
    chosen = sorted((run for run in runs if matches(run.labels, labels)), key=lambda run: (run.closed_at, run.run_id))
    last: dict[tuple[str, str], int] = {}
    measured: dict[tuple[str, str], int] = {}
    changes: dict[tuple[str, str], int] = {}
    first: dict[tuple[str, str], str] = {}
    layouts: dict[tuple[int, int], list[tuple[str, str]]] = {}
    for run in chosen:
        # Runs of one benchmark share their task and key tuples: their cells are listed once.
        layout = (id(run.task_ids), id(run.keys))
        cells = layouts.get(layout)
        if cells is None:
            cells = layouts[layout] = run.cells()
        for at, code in zip(cells, run.codes(), strict=True):
            if code in _PASSED_OVER:
                continue
            measured[at] = measured.get(at, 0) + 1
            before = last.get(at)
            if before is not None and before != code:
                changes[at] = changes.get(at, 0) + 1
                first.setdefault(at, run.run_id)
            last[at] = code
    flips = sorted(
        (Flip(task, key, count, measured[(task, key)], first[(task, key)], _verdict(last[(task, key)]))
         for (task, key), count in changes.items()),
        key=lambda flip: (-flip.changes, flip.task_id, flip.key),
    )  # fmt: skip
    return History(
        labels=dict(labels),
        runs=tuple(run.run_id for run in chosen),
        task_id=task_id,
        task=tuple(TaskRun(run.run_id, run.closed_at, run.outcomes(task_id)) for run in chosen)
        if task_id is not None
        else (),
        flips=tuple(flips),
    )
