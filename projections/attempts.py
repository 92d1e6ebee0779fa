"""Attempt lists (SEMANTICS.md section 1), the task order of the summary, and the (n, c)
of every pass@k-eligible key's measured tasks in that order (sections 2 and 8)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from projections.columns import MetricRecords
from projections.declarations import Key, key_name
from projections.passk import Tally
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
    for every eligible key (or those of `keys`), by key name. O(tasks): the tallies are
    kept as attempts land, and one pass over the tasks gathers every key's."""
    wanted = sorted(run.passk if keys is None else keys, key=key_name)
    measured: dict[Key, list[Tally]] = {key: [] for key in wanted}
    unmeasured = dict.fromkeys(wanted, 0)
    # Tasks share their keys tuple (`sharing.shared`): which of its keys are wanted, and at
    # which place of the task's counts, is found once per distinct tuple, where a search of
    # each task's keys for each key compared the keys' strings task after task.
    places: dict[int, list[tuple[int, Key]]] = {}
    for task in summary_tasks(run):
        task_keys = task.keys
        wanted_at = places.get(id(task_keys))
        if wanted_at is None:
            wanted_at = places[id(task_keys)] = [(2 * at, key) for at, key in enumerate(task_keys) if key in measured]
        counts = task.counts
        for at, key in wanted_at:
            n = counts[at]
            if n:
                measured[key].append((n, counts[at + 1]))
            else:
                unmeasured[key] += 1
    for key in wanted:
        yield key_name(key), measured[key], unmeasured[key]


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
