"""One task's state within a run: its trials, score columns and per-key tallies.

A task's state changes only through the events that name it, and it is small and
self-contained, so a store can write one task's change without rewriting the run.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from events.models import ScoreEmitted
from projections.columns import (
    METRIC_FAILED,
    NON_SEMANTIC,
    OK,
    TRIAL_FAILED,
    MetricColumns,
    MetricRecords,
    classify,
    record_layout,
)
from projections.declarations import ATTEMPT_KINDS, Declarations, Key
from projections.passk import KeyTally, Tally, passes
from projections.sharing import shared
from projections.trials import NONE, appended, listed, position

ONE_OUTPUT: Final = record_layout(1)


@dataclass(slots=True, init=False)
class TaskState:
    # Its __init__ is written out: a dataclass's generated one runs as Python even in the
    # compiled fold (mypyc compiles the methods of the class body only).
    task_id: str
    first_score: int
    """The log position (`run.apply`) of the task's first score (orders undeclared tasks); -1: none yet."""
    touched: bool
    """Some trial or score event named this task (a declared untouched task is pending)."""
    trials: str
    """The task's trial ids, in the order its scores first named them, as one string
    (`projections.trials`: an object per id cost ~20 bytes a stored attempt)."""
    metrics: dict[str, MetricColumns]
    keys: tuple[Key, ...]
    """The task's keys, in the order it got them: one tuple shared by the tasks whose keys
    are alike (most tasks of a run), where a dict of dicts per task cost ~1.2 KB."""
    counts: list[int]
    """n, c of each of `keys`, flat: the task's (n, c) of `keys[i]` is `counts[2 * i : 2 * i + 2]`."""
    events: array[int]
    """Fingerprints (hi, lo pairs) of the events applied to this task: persisted with it,
    they rebuild the run's redelivery index on restore."""
    trial_positions: array[int]
    """Log positions of the task's trial.finished events (its scores' are in their columns)."""
    excluded: frozenset[Key]
    """Keys the task declares label or model: never an attempt list (rule 3)."""
    trials_completed: int
    trials_failed: int
    first_at: float | None
    last_at: float | None
    """Earliest and latest `occurred_at` (epoch seconds) of the task's events."""
    failed_trials: list[tuple[int, str, str]] | None
    """(log position, error type, trial_id) of failed trial.finished events (None: none yet)."""

    def __init__(
        self,
        task_id: str,
        *,
        first_score: int = -1,
        touched: bool = False,
        trials: str = NONE,
        metrics: dict[str, MetricColumns] | None = None,
        keys: tuple[Key, ...] = (),
        counts: list[int] | None = None,
        events: array[int] | None = None,
        trial_positions: array[int] | None = None,
        excluded: frozenset[Key] = frozenset(),
        trials_completed: int = 0,
        trials_failed: int = 0,
        first_at: float | None = None,
        last_at: float | None = None,
        failed_trials: list[tuple[int, str, str]] | None = None,
    ) -> None:
        self.task_id = task_id
        self.first_score = first_score
        self.touched = touched
        self.trials = trials
        self.metrics = {} if metrics is None else metrics
        self.keys = keys
        self.counts = [] if counts is None else counts
        self.events = array("Q") if events is None else events
        self.trial_positions = array("q") if trial_positions is None else trial_positions
        self.excluded = excluded
        self.trials_completed = trials_completed
        self.trials_failed = trials_failed
        self.first_at = first_at
        self.last_at = last_at
        self.failed_trials = failed_trials

    def record_score(self, event: ScoreEmitted, seq: int, eligible: Mapping[Key, KeyTally]) -> None:
        """Append one score, updating this task's (n, c) per key and, for pass@k-eligible
        keys, the run-wide tallies in `eligible`. O(trials of the task + rows of the metric
        (its records are made anew, in C) + outputs of the score)."""
        if self.first_score < 0:
            self.first_score = seq
        # A task has a few trials: its ids searched in C cost about what a dict lookup
        # does, where an index dict would cost ~360 bytes a task.
        trials, trial_id = self.trials, event.trial_id
        trial = position(trials, trial_id)
        if trial < 0:
            trial = -1 - trial
            self.trials = appended(trials, trial_id)
        metric = event.metric_type
        columns = self.metrics.get(metric)
        if columns is None:
            columns = self.metrics[sys.intern(metric)] = MetricColumns()
        if event.status == "failed":
            dead = event.failure == "trial"
            columns.append(trial, TRIAL_FAILED if dead else METRIC_FAILED, seq)
            if dead:
                self._died(metric, eligible)
            return
        keys, counts = self.keys, self.counts
        names, outputs = columns.names, event.outputs
        if len(outputs) == 1 and not names and not columns.packed:
            # The metric's first score: its one output needs no record widened.
            names = columns.names = shared((sys.intern(outputs[0].name),))
        # The hot path of the whole fold: a score carrying its metric's one output, packed
        # inline, since a call costs as much as the append itself.
        if len(outputs) == 1 and len(names) == 1 and (output := outputs[0]).name == names[0]:
            kind, value = classify(output.value)
            columns.packed += ONE_OUTPUT.pack(trial, OK, seq, kind, value)
            landed: list[tuple[str, int, float]] = [(names[0], kind, value)]
        else:
            landed = [(out.name, *classify(out.value)) for out in outputs]
            columns.append(trial, OK, seq, {columns.slot_of(name): (kind, value) for name, kind, value in landed})
        for name, kind, value in landed:
            if kind == NON_SEMANTIC:
                continue
            key = (metric, name)
            if key in keys:
                at = 2 * keys.index(key)
                n, c = counts[at], counts[at + 1]
                passed = c + passes(value)
                counts[at] = n + 1
                counts[at + 1] = passed
                tally = eligible.get(key)
                if tally is not None:
                    tally.move(n, c, n + 1, passed)
            elif key not in self.excluded:
                # Rule 2: an undeclared output with a semantic value gets its key.
                n, c = self._keep(key)
                tally = eligible.get(key)
                if tally is not None:
                    tally.add((n, c))
                keys = self.keys

    def _died(self, metric: str, eligible: Mapping[Key, KeyTally]) -> None:
        """A dead trial's null attempt on each of the metric's keys (it passes none)."""
        counts = self.counts
        for at, key in enumerate(self.keys):
            if key[0] == metric:
                n, c = counts[2 * at], counts[2 * at + 1]
                counts[2 * at] = n + 1
                tally = eligible.get(key)
                if tally is not None:
                    tally.move(n, c, n + 1, c)

    def read(self) -> dict[str, MetricRecords]:
        """Per metric, its records unpacked (`MetricColumns.read`)."""
        return {metric: columns.read() for metric, columns in self.metrics.items()}

    def graded_trials(self, read: Mapping[str, MetricRecords], trial_ids: list[str] | None = None) -> set[str]:
        """The trial ids with at least one completed or partial score, of any metric;
        `read`: the task's records (`read`); `trial_ids`: `listed(self.trials)`, when the
        caller has it."""
        if trial_ids is None:
            trial_ids = listed(self.trials)
        return {trial_ids[trial] for records in read.values() for trial in records.latest_ok_rows()}

    def tally(self, key: Key) -> Tally | None:
        if key not in self.keys:
            return None
        at = 2 * self.keys.index(key)
        return self.counts[at], self.counts[at + 1]

    def tallies(self) -> Iterator[tuple[Key, int, int]]:
        """(key, n, c) of every key the task has."""
        counts = self.counts
        for at, key in enumerate(self.keys):
            yield key, counts[2 * at], counts[2 * at + 1]

    def attempted(self) -> bool:
        """Whether some key of the task has an attempt."""
        return any(self.counts[::2])

    def kept_keys(self) -> list[Key]:
        return list(self.keys)

    def rekey(self, declarations: Declarations | None) -> None:
        """Decide the task's keys afresh (SEMANTICS.md section 1 rules) from its columns."""
        self.keys = ()
        self.counts = []
        declared = declarations.tasks.get(self.task_id) if declarations else None
        kinds = declared.kinds if declared else {}
        self.excluded = _excluded(kinds)
        for key, kind in kinds.items():
            if kind in ATTEMPT_KINDS:
                self._keep(key)
        for metric, columns in self.metrics.items():
            for output, column in columns.outputs.items():
                if (metric, output) not in kinds and column.semantic():
                    self._keep((metric, output))

    def _keep(self, key: Key) -> Tally:
        """Give the task `key`, its (n, c) counted from the columns."""
        metric, output = key
        n = c = 0
        columns = self.metrics.get(metric)
        for _, value, _ in columns.read().attempts(output) if columns else ():
            n += 1
            c += passes(value)
        self.keys = shared((*self.keys, key))
        self.counts += (n, c)
        return n, c


@lru_cache(maxsize=1024)
def _excluded_of(kinds: tuple[tuple[Key, str], ...]) -> frozenset[Key]:
    return frozenset(key for key, kind in kinds if kind not in ATTEMPT_KINDS)


def _excluded(kinds: Mapping[Key, str]) -> frozenset[Key]:
    """The keys declared label or model, one shared set per distinct declaration."""
    return _excluded_of(tuple(kinds.items()))
