"""The run as Harbor's per-dataset stats (SEMANTICS.md section 6).

Figures are Harbor's own, bit for bit: its pass@k estimator multiplies in its own order
(not section 2's product form) and its mean adds as Python >= 3.12's `sum` does.
"""

from __future__ import annotations

import heapq
import math
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import orjson

from events.nonfinite import wire_float
from projections.aggregates import compensated_sum, finite
from projections.passk import Tally
from projections.run import RunState

if TYPE_CHECKING:
    from projections.contributions import InOrder, SummaryCache, TaskContribution


@lru_cache(maxsize=1024)
def harbor_k_values(smallest_n: int) -> tuple[int, ...]:
    """Harbor's ks: 2, 4, 8, ... and 5, 10, 15, ..., up to `smallest_n`; they depend on it
    alone, so they are made once per value."""
    ks = set(range(5, smallest_n + 1, 5))
    k = 2
    while k <= smallest_n:
        ks.add(k)
        k *= 2
    return tuple(sorted(ks))


@lru_cache(maxsize=65_536)
def harbor_estimate(n: int, c: int, k: int) -> float:
    """Harbor's per-task pass@k: 1 - prod(i = 0..k-1) (n-c-i)/(n-i), multiplied in that
    order; 1.0 when n - c < k."""
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(k):
        product *= (n - c - i) / (n - i)
    return 1.0 - product


def value_label(value: float) -> str:
    """A value as a reward_stats key: Python's repr, non-finite as on the wire."""
    # It runs once per attempt of a summary, and repr formats a float digit by digit: the
    # usual rewards are spelled out (0.0 by its sign: -0.0 == 0.0).
    if value == 1.0:
        return "1.0"
    if value == 0.0:
        return "0.0" if math.copysign(1.0, value) > 0.0 else "-0.0"
    return repr(value) if finite(value) else str(wire_float(value))


def harbor_stats(run: RunState, tasks: list[TaskContribution], cache: SummaryCache) -> dict[str, Any]:
    """`tasks`: every task's contribution, in summary task order (the order Harbor adds its
    per-task pass@k in); `cache` holds the run's reward_stats lists, the pass@k last
    computed per key, and the exception_stats last gathered."""
    binary: dict[str, list[Tally]] = {}
    broken: set[str] = set()
    for task in tasks:
        if task.broken:
            broken.update(task.broken)
        for name, tally in task.harbor.items():
            tallies = binary.get(name)
            if tallies is None:
                binary[name] = [tally]
            else:
                tallies.append(tally)
    pass_at_k: dict[str, dict[str, float]] = {}
    for name in sorted(binary.keys() - broken):
        tallies = binary[name]
        known = cache.harbor.get(name)
        if known is None or known[0] != tallies:
            known = cache.harbor[name] = (tallies, _pass_at_k(tallies))
        if known[1]:
            pass_at_k[name] = known[1]
    return {
        "n_trials": len(cache.graded),
        "n_errors": run.trials_failed,
        "reward_stats": reward_stats(cache),
        "exception_stats": exception_stats(run, cache),
        "pass_at_k": pass_at_k,
    }


def exception_stats(run: RunState, cache: SummaryCache) -> dict[str, list[str]]:
    """Harbor's exception_stats: error type -> the failed trials' ids, in log order. Gathered
    again only when a trial failed since: a task's failed trials are only appended, each
    counted in `run.trials_failed` (an undo or a restore drops the cache)."""
    known = cache.exceptions
    if known is not None and known[0] == run.trials_failed:
        return known[1]
    failed = heapq.merge(*(task.failed_trials for task in run.tasks.values() if task.failed_trials))
    gathered: dict[str, list[str]] = {}
    for _, error_type, trial_id in failed:
        gathered.setdefault(error_type, []).append(trial_id)
    cache.exceptions = (run.trials_failed, gathered)
    return gathered


def reward_stats(cache: SummaryCache) -> dict[str, dict[str, orjson.Fragment]]:
    """Harbor's reward_stats: key -> value label -> trial ids, in the log order of the scores
    that made the attempts, keys and labels as they first appear in that order (the
    attempts of one score by key name). Each list encoded (`encoded_ids`)."""

    def first(labels: dict[str, InOrder]) -> int:
        return min(ordered.seqs[0] for ordered in labels.values())

    names = sorted(cache.rewards, key=lambda name: (first(cache.rewards[name]), name))
    return {
        name: {
            label: encoded_ids(cache, name, label, ordered)
            for label, ordered in sorted(cache.rewards[name].items(), key=lambda item: item[1].seqs[0])
        }
        for name in names
    }


def encoded_ids(cache: SummaryCache, name: str, label: str, ordered: InOrder) -> orjson.Fragment:
    """The trial ids of `ordered` encoded as a JSON list, kept in `cache.reward_lists`: while
    ids were only appended to the list since (`InOrder.rearranged` unmoved, as late attempts
    land), the ids past those encoded are encoded and joined to the kept bytes, where
    encoding the whole list again made a revision O(the run's attempts) in its largest part."""
    items = ordered.items
    known = cache.reward_lists.get((name, label))
    if known is not None and known[0] is ordered and known[1] == ordered.rearranged and known[2] <= len(items):
        _, _, count, encoded = known
        if count == len(items):
            return orjson.Fragment(encoded)
        tail = memoryview(orjson.dumps(items[count:]))
        encoded = b"".join((memoryview(encoded)[:-1], b",", tail[1:])) if count else bytes(tail)
    else:
        encoded = bytes(memoryview(orjson.dumps(items)))  # a copy: see `contributions.fragment`
    cache.reward_lists[(name, label)] = (ordered, ordered.rearranged, len(items), encoded)
    return orjson.Fragment(encoded)


def _pass_at_k(tallies: list[Tally]) -> dict[str, float]:
    """Harbor's pass@k per k: the mean of the tasks' estimates, added in task order. Each
    distinct (n, c) is estimated once per k: a run's tasks share a few."""
    ks = harbor_k_values(min(n for n, _ in tallies))
    figures = {}
    for k in ks:
        estimated: dict[Tally, float] = {}
        for tally in tallies:
            if tally not in estimated:
                estimated[tally] = harbor_estimate(tally[0], tally[1], k)
        figures[str(k)] = compensated_sum([estimated[tally] for tally in tallies]) / len(tallies)
    return figures
