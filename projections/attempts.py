"""Attempt lists (SEMANTICS.md section 1), the task order of the summary, and the (n, c)
of every pass@k-eligible key's measured tasks in that order (sections 2 and 8)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import final

from projections.columns import MetricRecords
from projections.declarations import Key, key_name
from projections.passk import Tally
from projections.placed import PlacedTallies
from projections.run import RunState
from projections.task import TaskState
from projections.trials import listed

AttemptList = list[tuple[str, float | None, int]]
"""[(trial_id, value, run sequence number of the score that made the attempt)], in log order."""


def summary_tasks(run: RunState) -> list[TaskState]:
    """Declared tasks in declaration order, then tasks named only by scores by first score."""
    declared = run.declarations.tasks if run.declarations else {}
    others = sorted(
        (task for task in run.tasks.values() if task.first_score >= 0 and task.task_id not in declared),
        key=lambda task: task.first_score,
    )
    return [run.tasks[task_id] for task_id in declared] + others


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
    order, and its unmeasured tasks (n = 0), with the tasks' keys and counts they were taken
    from (`task_tallies`). A plain class, made natively by the compiled fold."""

    __slots__ = ("counts", "keys", "measured", "tasks", "unmeasured")

    def __init__(self, tasks: list[TaskState]) -> None:
        self.tasks = tasks
        self.keys = [task.keys for task in tasks]
        self.counts = [task.counts for task in tasks]
        self.measured = PlacedTallies()
        self.unmeasured: dict[str, int] = {}


def task_tallies(run: RunState, kept: TaskTallies | None = None) -> TaskTallies:
    """Every eligible key's tallies over the run's tasks. `kept`: those this function gave
    for the run before (with the same eligible keys), moved at the places whose task's keys
    or counts are other objects since (each score makes a task's counts anew), where the
    tasks are as many; else gathered anew. O(tasks) either way, but a place unchanged costs
    three comparisons of identity."""
    tasks = summary_tasks(run)
    names = {key: key_name(key) for key in run.passk}
    # Tasks share their keys tuple (`sharing.shared`): which of its keys are eligible, and at
    # which place of the task's counts, is found once per distinct tuple (by identity: every
    # tuple asked for is held by a task or by `kept` meanwhile).
    eligible: dict[int, list[tuple[int, str]]] = {}
    if kept is None or len(kept.tasks) != len(tasks):
        kept = TaskTallies(tasks)
        for place, task in enumerate(tasks):
            for name, tally in _eligible(eligible, names, task.keys, task.counts):
                if tally[0]:
                    kept.measured.append(name, place, tally)
                else:
                    kept.unmeasured[name] = kept.unmeasured.get(name, 0) + 1
        return kept
    for place, task in enumerate(tasks):
        keys, counts = kept.keys[place], kept.counts[place]
        if task is kept.tasks[place] and task.keys is keys and task.counts is counts:
            continue
        old = dict(_eligible(eligible, names, keys, counts))
        new = dict(_eligible(eligible, names, task.keys, task.counts))
        for name in old.keys() | new.keys():
            before, after = old.get(name), new.get(name)
            if before is not None and not before[0]:
                kept.unmeasured[name] -= 1
                if not kept.unmeasured[name]:
                    del kept.unmeasured[name]
            if after is not None and not after[0]:
                kept.unmeasured[name] = kept.unmeasured.get(name, 0) + 1
            measured = after if after is not None and after[0] else None
            kept.measured.put(name, place, before is not None and before[0] > 0, measured)
        kept.keys[place], kept.counts[place] = task.keys, task.counts
    kept.tasks = tasks
    return kept


def _eligible(
    eligible: dict[int, list[tuple[int, str]]], names: dict[Key, str], keys: tuple[Key, ...], counts: tuple[int, ...]
) -> list[tuple[str, Tally]]:
    """(key name, (n, c)) of the eligible ones of a task's `keys` (with their `counts`)."""
    places = eligible.get(id(keys))
    if places is None:
        places = eligible[id(keys)] = [(2 * at, names[key]) for at, key in enumerate(keys) if key in names]
    return [(name, (counts[at], counts[at + 1])) for at, name in places]


def task_attempts(
    task: TaskState, read: Mapping[str, MetricRecords] | None = None, trial_ids: list[str] | None = None
) -> dict[str, AttemptList]:
    """The task's attempt list of each of its keys, by key name; `read`: the task's
    records (`TaskState.read`), `trial_ids`: its trial ids (`projections.trials.listed`),
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
