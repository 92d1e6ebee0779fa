"""The run as Harbor's per-dataset stats (SEMANTICS.md section 6).

Figures are Harbor's own, bit for bit: its pass@k estimator multiplies in its own order
(not section 2's product form) and its mean adds as Python >= 3.12's `sum` does.
"""

from __future__ import annotations

import heapq
import math
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final, final

import orjson

from projections.assembly.placed import PlacedTallies
from projections.figures.aggregates import compensated_sum
from projections.figures.passk import Tally
from projections.fold.run import RunState

if TYPE_CHECKING:
    from projections.assembly.contributions import InOrder, SummaryCache, TaskContribution


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
    """A value as a reward_stats key: Python's repr, as Harbor's result.json has it, the
    non-finite values too ("nan", "inf", "-inf"; not the wire's "NaN" and "Infinity")."""
    # It runs once per attempt of a summary, and repr formats a float digit by digit: the
    # usual rewards are spelled out (0.0 by its sign: -0.0 == 0.0).
    if value == 1.0:
        return "1.0"
    if value == 0.0:
        return "0.0" if math.copysign(1.0, value) > 0.0 else "-0.0"
    return repr(value)


def harbor_stats(run: RunState, tasks: list[TaskContribution], cache: SummaryCache) -> dict[str, Any]:
    """`tasks`: every task's contribution, in summary task order (the order Harbor adds its
    per-task pass@k in); `cache` holds the run's reward_stats lists, the pass@k last
    computed per key, and the exception_stats last gathered."""
    lists = binary_lists(cache, tasks)
    pass_at_k: dict[str, dict[str, float]] = {}
    for name in sorted(lists.binary.tallies.keys() - lists.broken.keys()):
        tallies = lists.binary.tallies[name]
        known = cache.harbor.get(name)
        if known is None or known[0] != tallies:
            # A copy: the kept lists change in place (`binary_lists`).
            known = cache.harbor[name] = (list(tallies), _pass_at_k(tallies))
        if known[1]:
            pass_at_k[name] = known[1]
    return {
        "n_trials": len(cache.graded),
        "n_errors": run.trials_failed,
        "reward_stats": reward_stats(cache),
        "exception_stats": exception_stats(run, cache),
        "pass_at_k": pass_at_k,
    }


@final
class HarborLists:
    """The Harbor pass@k tallies of a run's tasks, by key name, as gathered from the tasks'
    contributions in summary task order (`harbor.binary_lists`). A plain class, made
    natively by the compiled fold."""

    __slots__ = ("binary", "broken", "shares")

    def __init__(self, shares: list[TaskContribution]) -> None:
        self.shares = shares
        """The contributions they were gathered from, in summary task order."""
        self.binary = PlacedTallies()
        """Key name -> the (n, c) of the contributions that have the key (places: in `shares`)."""
        self.broken: dict[str, int] = {}
        """Key name -> the contributions where the key is broken (some value not 0 nor 1)."""


def binary_lists(cache: SummaryCache, tasks: list[TaskContribution]) -> HarborLists:
    """The Harbor tallies of `tasks` (every task's contribution, in summary task order), by
    key name, kept in `cache.harbor_lists`: where the tasks are as many as when last
    gathered, only the places whose contribution changed are moved (a revision after a late
    attempt moves one); otherwise gathered anew."""
    kept = cache.harbor_lists
    if kept is None or len(kept.shares) != len(tasks):
        kept = cache.harbor_lists = HarborLists(tasks)
        for place, task in enumerate(tasks):
            for name, tally in task.harbor.items():
                kept.binary.append(name, place, tally)
            for name in task.broken:
                kept.broken[name] = kept.broken.get(name, 0) + 1
        return kept
    before = kept.shares
    for place, task in enumerate(tasks):
        old = before[place]
        if old is not task:
            for name in old.harbor.keys() | task.harbor.keys():
                kept.binary.put(name, place, name in old.harbor, task.harbor.get(name))
            for name in old.broken:
                kept.broken[name] -= 1
                if not kept.broken[name]:
                    del kept.broken[name]
            for name in task.broken:
                kept.broken[name] = kept.broken.get(name, 0) + 1
    kept.shares = tasks
    return kept


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


def reward_stats(cache: SummaryCache) -> dict[str, dict[str, list[str] | orjson.Fragment]]:
    """Harbor's reward_stats: key -> value label -> trial ids, in the log order of the scores
    that made the attempts, keys and labels as they first appear in that order (the
    attempts of one score by key name). Each list encoded (`encoded_ids`)."""
    # Sorted as tuples, without a key function (a call per item): within a key, a score
    # gives one label, so labels' first seqs differ; across keys, a score's outputs may
    # share a first seq, and the key name breaks the tie. The tuples never compare further.
    names = []
    for name, labels in cache.rewards.items():
        ordered_labels = sorted([(ordered.seqs[0], label, ordered) for label, ordered in labels.items()])
        names.append((ordered_labels[0][0], name, ordered_labels))
    names.sort()
    return {
        name: {label: encoded_ids(cache, name, label, ordered) for _, label, ordered in ordered_labels}
        for _, name, ordered_labels in names
    }


_KEPT_IDS: Final = 256
"""The trial ids of a list from which its encoding is kept: a shorter list is encoded with
the summary, for less than keeping its bytes costs (a small run's lists are all short)."""


def encoded_ids(cache: SummaryCache, name: str, label: str, ordered: InOrder) -> list[str] | orjson.Fragment:
    """The trial ids of `ordered` encoded as a JSON list (the list itself when short), kept
    in `cache.reward_lists`: while ids were only appended to the list since
    (`InOrder.rearranged` unmoved, as late attempts land), the ids past those encoded are
    encoded and joined to the kept bytes, where encoding the whole list again made a
    revision O(the run's attempts) in its largest part."""
    items = ordered.items
    if len(items) < _KEPT_IDS:
        return items
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
