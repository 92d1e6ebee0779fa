"""Attempt lists (SEMANTICS.md section 1), the task order of the summary, and the (n, c)
of every pass@k-eligible key's measured tasks in that order (sections 2 and 8)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import final

from projections.assembly.placed import PlacedTallies
from projections.figures.passk import Tally
from projections.fold.declarations import Key, key_name
from projections.fold.run import RunState
from projections.fold.task import TaskState
from projections.packed.records import MetricRecords
from projections.packed.trial_ids import listed

AttemptList = list[tuple[str, float | None, int]]
"""[(trial_id, value, run sequence number of the score that made the attempt)], in log order."""


def summary_tasks(run: RunState) -> list[TaskState]:
    """Declared tasks in declaration order, then tasks named only by scores by first score."""
    declared = run.declarations.tasks if run.declarations else {}
    ordered = [run.tasks[task_id] for task_id in declared]
    others = [task for task in run.tasks.values() if task.first_score >= 0 and task.task_id not in declared]
    if others:  # sorted() with a key is a Python call: only made when there is something to sort
        ordered += sorted(others, key=lambda task: task.first_score)
    return ordered


def key_tallies(run: RunState, keys: Iterable[Key] | None = None) -> Iterator[tuple[str, list[Tally], int]]:
    """(key name, (n, c) of each measured task in summary task order, unmeasured tasks)
    for every eligible key (or those of `keys`), by key name, gathered from every task."""
    gathered = task_tallies(run)
    for key in sorted(run.passk if keys is None else keys, key=key_name):
        name = key_name(key)
        yield name, gathered.measured.tallies.get(name, []), gathered.unmeasured.get(name, 0)


@final
class TaskTallies:
    """Every eligible key's (n, c) of the run's measured tasks (n > 0), placed in summary task
    order, and its unmeasured tasks (n = 0), with the keys and counts tuples of the task at
    each place they were taken from (`task_tallies`): the same two objects, the same
    tallies. A plain class, made natively by the compiled fold."""

    __slots__ = ("counts", "keys", "measured", "names", "unmeasured")

    def __init__(self, tasks: list[TaskState], names: dict[Key, str]) -> None:
        self.keys = [task.keys for task in tasks]
        self.counts = [task.counts for task in tasks]
        self.names = names
        """Eligible key -> its name."""
        self.measured = PlacedTallies()
        self.unmeasured: dict[str, int] = {}

    def move(self, name: str, place: int, before: Tally | None, after: Tally | None) -> None:
        """The key's (n, c) at `place` was `before` and is `after` (None: the task has no such key)."""
        if before is not None and not before[0]:
            self.unmeasured[name] -= 1
            if not self.unmeasured[name]:
                del self.unmeasured[name]
        if after is not None and not after[0]:
            self.unmeasured[name] = self.unmeasured.get(name, 0) + 1
        measured = after if after is not None and after[0] else None
        self.measured.put(name, place, before is not None and before[0] > 0, measured)


def task_tallies(run: RunState, kept: TaskTallies | None = None) -> TaskTallies:
    """Every eligible key's tallies over the run's tasks. `kept`: those this function gave
    for the run before (with the same eligible keys), moved at the places whose task's keys
    or counts are other objects since (each score makes a task's counts anew), where the
    tasks are as many; else gathered anew. O(tasks) either way, but a place unchanged costs
    two comparisons of identity."""
    tasks = summary_tasks(run)
    # Tasks share their keys tuple (`sharing.shared`): which of its keys are eligible, and at
    # which place of the task's counts, is found once per distinct tuple (by identity: every
    # tuple asked for is held by a task or by `kept` meanwhile).
    eligible: dict[int, list[tuple[int, str]]] = {}
    if kept is None or len(kept.keys) != len(tasks):
        kept = TaskTallies(tasks, {key: key_name(key) for key in run.passk})
        for place, task in enumerate(tasks):
            counts = task.counts
            for at, name in _eligible(eligible, kept.names, task.keys):
                n = counts[at]
                if n:
                    kept.measured.append(name, place, (n, counts[at + 1]))
                else:
                    kept.unmeasured[name] = kept.unmeasured.get(name, 0) + 1
        return kept
    for place, task in enumerate(tasks):
        keys, counts = kept.keys[place], kept.counts[place]
        now = task.counts
        if task.keys is keys and now is counts:
            continue
        if task.keys is keys:  # the usual move: an attempt more, on the keys it had
            for at, name in _eligible(eligible, kept.names, keys):
                if counts[at] != now[at] or counts[at + 1] != now[at + 1]:
                    kept.move(name, place, (counts[at], counts[at + 1]), (now[at], now[at + 1]))
        else:
            old = {name: (counts[at], counts[at + 1]) for at, name in _eligible(eligible, kept.names, keys)}
            new = {name: (now[at], now[at + 1]) for at, name in _eligible(eligible, kept.names, task.keys)}
            for name in old.keys() | new.keys():
                kept.move(name, place, old.get(name), new.get(name))
        kept.keys[place], kept.counts[place] = task.keys, now
    return kept


def _eligible(
    eligible: dict[int, list[tuple[int, str]]], names: dict[Key, str], keys: tuple[Key, ...]
) -> list[tuple[int, str]]:
    """(place in the task's counts, key name) of the eligible ones of a task's `keys`."""
    places = eligible.get(id(keys))
    if places is None:
        places = eligible[id(keys)] = [(2 * at, names[key]) for at, key in enumerate(keys) if key in names]
    return places


def task_attempts(
    task: TaskState, read: Mapping[str, MetricRecords] | None = None, trial_ids: list[str] | None = None
) -> dict[str, AttemptList]:
    """The task's attempt list of each of its keys, by key name; `read`: the task's
    records (`TaskState.read`), `trial_ids`: its trial ids (`projections.packed.trial_ids.listed`),
    when the caller has them."""
    if read is None:
        read = task.read()
    if trial_ids is None:
        trial_ids = listed(task.trials)
    lists: dict[str, AttemptList] = {}
    for metric, output in sorted(task.kept_keys(), key=key_name):
        records = read.get(metric)
        lists[key_name((metric, output))] = (
            [(trial_ids[trial], value, seq) for trial, value, seq in records.attempts(output)] if records else []
        )
    return lists
