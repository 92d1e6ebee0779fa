"""One task's state within a run: its trials, score columns and per-key tallies.

A task's state changes only through the events that name it, and it is small and
self-contained, so a store can write one task's change without rewriting the run.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, TypeVar

from events.models import ScoreEmitted
from projections.figures.passk import Tally, passes
from projections.fold.declarations import Declarations, Key
from projections.fold.key_tallies import KeyTally
from projections.kernels import trial_index
from projections.packed import positions
from projections.packed.fingerprints import NO_PAIRS
from projections.packed.records import (
    METRIC_FAILED,
    NON_SEMANTIC,
    OK,
    TRIAL_FAILED,
    MetricColumns,
    MetricRecords,
    classify,
    record_layout,
)
from projections.packed.sharing import shared
from projections.packed.trial_ids import NONE, appended, listed

ONE_OUTPUT: Final = record_layout(1)
T = TypeVar("T")


@dataclass(slots=True, init=False)
class TaskState:
    # Its __init__ is written out: a dataclass's generated one runs as Python even in the
    # compiled fold (mypyc compiles the methods of the class body only).
    task_id: str
    first_score: int
    """The log position (`run.apply`) of the task's first score (orders undeclared tasks); -1: none yet."""
    trials: str
    """The task's trial ids, in the order its scores first named them, as one string
    (`projections.packed.trial_ids`: an object per id cost ~20 bytes a stored attempt)."""
    metric_names: tuple[str, ...]
    """The metrics the task's scores named, in the order they first did. A metric's
    `MetricColumns` is its fields at the same index in `output_names`, `records` and
    `spilled`, made when asked for (`metric`, `metrics`): a dict of them per task cost
    ~17 bytes a stored attempt more (its table and an object a metric)."""
    output_names: tuple[tuple[str, ...], ...]
    """Each metric's `MetricColumns.names`. It and `metric_names` are each one tuple shared
    by the tasks whose metrics are alike."""
    records: tuple[bytes, ...]
    """Each metric's `MetricColumns.packed`."""
    spilled: tuple[bytes | None, ...] | None
    """Each metric's `MetricColumns.spilled`; None: no metric of the task has any."""
    keys: tuple[Key, ...]
    """The task's keys, in the order it got them: one tuple shared by the tasks whose keys
    are alike (most tasks of a run), where a dict of dicts per task cost ~1.2 KB."""
    counts: tuple[int, ...]
    """n, c of each of `keys`, flat: the task's (n, c) of `keys[i]` is `counts[2 * i : 2 * i + 2]`.
    Made anew by a change: one block, where a list is two (~2 bytes a stored attempt more)."""
    events: bytes
    """Fingerprints (`projections.packed.fingerprints.PAIR`s) of the events applied to this task:
    persisted with it, they rebuild the run's redelivery index on restore."""
    trial_positions: bytes
    """Log positions of the task's trial.finished events (`projections.packed.positions`; its
    scores' are in their columns)."""
    excluded: frozenset[Key]
    """Keys the task declares label or model: never an attempt list (rule 3)."""
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
        trials: str = NONE,
        metrics: Mapping[str, MetricColumns] | None = None,
        keys: tuple[Key, ...] = (),
        counts: tuple[int, ...] = (),
        events: bytes = NO_PAIRS,
        trial_positions: bytes = positions.NONE,
        excluded: frozenset[Key] = frozenset(),
        first_at: float | None = None,
        last_at: float | None = None,
        failed_trials: list[tuple[int, str, str]] | None = None,
    ) -> None:
        self.task_id = task_id
        self.first_score = first_score
        self.trials = trials
        self.metric_names = ()
        self.output_names = ()
        self.records = ()
        self.spilled = None
        for name, columns in (metrics or {}).items():
            self._put(self._new_metric(name), columns)
        self.keys = keys
        self.counts = counts
        self.events = events
        self.trial_positions = trial_positions
        self.excluded = excluded
        self.first_at = first_at
        self.last_at = last_at
        self.failed_trials = failed_trials

    def record_score(self, event: ScoreEmitted, seq: int, eligible: Mapping[Key, KeyTally]) -> None:
        """Append one score, updating this task's (n, c) per key and, for pass@k-eligible
        keys, the run-wide tallies in `eligible`. O(trials of the task + rows of the metric
        (its records are made anew, in C) + outputs of the score)."""
        if self.first_score < 0:
            self.first_score = seq
        trial = self._trial_of(event.trial_id)
        metric = event.metric_type
        at = self._metric_at(metric)
        if at < 0:
            at = self._new_metric(metric)
        if event.status == "failed":
            dead = event.failure == "trial"
            columns = self._columns_at(at)
            columns.append(trial, TRIAL_FAILED if dead else METRIC_FAILED, seq)
            self._put(at, columns)
            if dead:
                self._died(metric, eligible)
            return
        keys = self.keys
        names, outputs = self.output_names[at], event.outputs
        if len(outputs) == 1 and not names and not self.records[at]:
            # The metric's first score: its one output needs no record widened.
            names = shared((sys.intern(outputs[0].name),))
            self.output_names = shared(_replaced(self.output_names, at, names))
        # The hot path of the whole fold: a score carrying its metric's one output, packed
        # inline, since a call costs as much as the append itself.
        if len(outputs) == 1 and len(names) == 1 and (output := outputs[0]).name == names[0]:
            kind, value = classify(output.value)
            self.records = _replaced(self.records, at, self.records[at] + ONE_OUTPUT.pack(trial, OK, seq, kind, value))
            landed: list[tuple[str, int, float]] = [(names[0], kind, value)]
        else:
            landed = [(out.name, *classify(out.value)) for out in outputs]
            columns = self._columns_at(at)
            columns.append(trial, OK, seq, {columns.slot_of(name): (kind, value) for name, kind, value in landed})
            self._put(at, columns)
        for name, kind, value in landed:
            if kind == NON_SEMANTIC:
                continue
            key = (metric, name)
            if key in keys:
                at = 2 * keys.index(key)
                counts = self.counts
                n, c = counts[at], counts[at + 1]
                passed = c + passes(value)
                self.counts = _moved(counts, at, n + 1, passed)
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

    def _trial_of(self, trial_id: str) -> int:
        """The index of `trial_id` among the task's trials, added if new."""
        # A task has a few trials: its ids searched in C cost about what a dict lookup
        # does, where an index dict would cost ~360 bytes a task.
        trials = self.trials
        trial = trial_index(trials, trial_id)
        if trial < 0:
            trial = -1 - trial
            self.trials = appended(trials, trial_id)
        return trial

    def _died(self, metric: str, eligible: Mapping[Key, KeyTally]) -> None:
        """A dead trial's null attempt on each of the metric's keys (it passes none)."""
        for at, key in enumerate(self.keys):
            if key[0] == metric:
                counts = self.counts
                n, c = counts[2 * at], counts[2 * at + 1]
                self.counts = _moved(counts, 2 * at, n + 1, c)
                tally = eligible.get(key)
                if tally is not None:
                    tally.move(n, c, n + 1, c)

    @property
    def touched(self) -> bool:
        """Some trial or score event named this task (a declared untouched task is pending):
        each keeps its fingerprint here."""
        return bool(self.events)

    @property
    def trials_failed(self) -> int:
        """The task's failed trial.finished events."""
        return 0 if self.failed_trials is None else len(self.failed_trials)

    @property
    def trials_completed(self) -> int:
        """The task's completed trial.finished events: the others (a trial.finished is
        completed or failed, and each has its position kept)."""
        return len(self.trial_positions) // positions.POSITION.size - self.trials_failed

    def metric(self, name: str) -> MetricColumns | None:
        """The records of metric `name`, if a score named it (a view: changing it changes
        nothing of the task)."""
        at = self._metric_at(name)
        return None if at < 0 else self._columns_at(at)

    def metrics(self) -> Iterator[tuple[str, MetricColumns]]:
        """(metric, its records) of each metric, in the order the scores first named them."""
        for at, name in enumerate(self.metric_names):
            yield name, self._columns_at(at)

    def score_rows(self) -> int:
        """The task's applied scores: its metrics' records."""
        return sum(len(columns) for _, columns in self.metrics())

    def _metric_at(self, name: str) -> int:
        """The index of metric `name` among `metric_names` (-1: no score named it)."""
        for at, held in enumerate(self.metric_names):
            if held == name:
                return at
        return -1

    def _columns_at(self, at: int) -> MetricColumns:
        spilled = self.spilled
        return MetricColumns(self.records[at], self.output_names[at], None if spilled is None else spilled[at])

    def _new_metric(self, name: str) -> int:
        """Add metric `name`, without records: its index."""
        self.metric_names = shared((*self.metric_names, sys.intern(name)))
        self.output_names = shared((*self.output_names, ()))
        self.records = (*self.records, b"")
        if self.spilled is not None:
            self.spilled = (*self.spilled, None)
        return len(self.records) - 1

    def _put(self, at: int, columns: MetricColumns) -> None:
        """Make `columns` the records of metric number `at`."""
        self.records = _replaced(self.records, at, columns.packed)
        if columns.names is not self.output_names[at]:
            self.output_names = shared(_replaced(self.output_names, at, columns.names))
        if columns.spilled is not None or self.spilled is not None:
            spilled = self.spilled if self.spilled is not None else (None,) * len(self.records)
            self.spilled = _replaced(spilled, at, columns.spilled)

    def read(self) -> dict[str, MetricRecords]:
        """Per metric, its records unpacked (`MetricColumns.read`)."""
        return {metric: columns.read() for metric, columns in self.metrics()}

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
        counts = self.counts
        # any() of a generator is a C loop in the compiled fold; of a slice, two Python calls.
        return any(counts[at] for at in range(0, len(counts), 2))

    def kept_keys(self) -> list[Key]:
        return list(self.keys)

    def rekey(self, declarations: Declarations | None) -> None:
        """Decide the task's keys afresh (SEMANTICS.md section 1 rules) from its columns."""
        self.keys = ()
        self.counts = ()
        declared = declarations.tasks.get(self.task_id) if declarations else None
        if declared is None:
            kinds: Mapping[Key, str] = {}
            self.excluded = _NOTHING
        else:
            kinds = declared.kinds
            self.excluded = declared.excluded
            if not self.metric_names:  # no score yet: every declared key, with nothing counted
                self.keys = declared.attempt_keys
                self.counts = _zeros(len(self.keys))
                return
            for key in declared.attempt_keys:
                self._keep(key)
        for metric, columns in self.metrics():
            for output, column in columns.outputs.items():
                if (metric, output) not in kinds and column.semantic():
                    self._keep((metric, output))

    def _keep(self, key: Key) -> Tally:
        """Give the task `key`, its (n, c) counted from the columns."""
        metric, output = key
        n = c = 0
        columns = self.metric(metric)
        for _, value, _ in columns.read().attempts(output) if columns else ():
            n += 1
            c += passes(value)
        self.keys = shared((*self.keys, key))
        self.counts += (n, c)
        return n, c


def _replaced(values: tuple[T, ...], at: int, value: T) -> tuple[T, ...]:
    """`values` with item `at` replaced by `value`. Through a list: two copies in C in the
    compiled fold, where slicing and unpacking the tuple builds more."""
    items = list(values)
    items[at] = value
    return tuple(items)


def _moved(counts: tuple[int, ...], at: int, n: int, c: int) -> tuple[int, ...]:
    """`counts` with the (n, c) at `at` replaced."""
    items = list(counts)
    items[at] = n
    items[at + 1] = c
    return tuple(items)


_NOTHING: Final[frozenset[Key]] = frozenset()


@lru_cache(maxsize=64)
def _zeros(keys: int) -> tuple[int, ...]:
    """The (n, c) counts of `keys` keys with no attempt, one shared tuple per length."""
    return (0,) * (2 * keys)
