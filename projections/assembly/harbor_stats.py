"""The run as Harbor's per-dataset stats (SEMANTICS.md section 6): the summary's `harbor` object,
under the run's `harbor_rules` (a task's share counts its null attempts as 0s under "0.25",
not at all under "0.26").

Its figures are Harbor's own (`projections.kernels.harbor_pass_at_k`, and the labels of
`projections.figures.harbor`); here they are gathered from the tasks' shares in summary task
order, and what a revision would gather again is kept in the run's `HarborKept` (a part of its
summary cache): each key's (n, c) by place, its pass@k, the reward_stats lists (encoded once
long) and the exception_stats.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any, Final, final

import orjson

from events.models import HarborRules
from projections.assembly.attempts import AttemptList
from projections.assembly.log_order import InOrder
from projections.assembly.placed import PlacedTallies
from projections.figures.passk import Tally
from projections.fold.declarations import Key
from projections.fold.run import RunState
from projections.kernels import harbor_pass_at_k


@final
class HarborShare:
    """One task's part of Harbor's pass@k: what the task's attempt lists give it."""

    __slots__ = ("broken", "tallies")

    def __init__(self, tallies: dict[str, Tally], broken: frozenset[str]) -> None:
        self.tallies = tallies
        """Eligible key name -> Harbor's (n, c) (c: values equal to 1.0), keys with attempts
        that count under the run's rules."""
        self.broken = broken
        """Key names with a value neither null, 0.0 nor 1.0 (Harbor gives them no pass@k)."""


def share_of(lists: Mapping[str, AttemptList], eligible: Mapping[str, Key], rules: HarborRules) -> HarborShare:
    """A task's share, from its attempt lists by key name; `eligible`: the run's pass@k keys
    by name; `rules`: the run's `harbor_rules` (under "0.26" a null attempt is not counted,
    under "0.25" it is a 0)."""
    tallies: dict[str, Tally] = {}
    broken = set()
    null_is_zero = rules == "0.25"
    for name, attempt_list in lists.items():
        n = c = 0
        for _, value, _ in attempt_list:
            if value is None:
                if null_is_zero:
                    n += 1
                continue
            n += 1
            if value == 1.0:
                c += 1
            elif value != 0.0:
                broken.add(name)
        if name in eligible and n:
            tallies[name] = (n, c)
    return HarborShare(tallies, frozenset(broken))


@final
class HarborLists:
    """The tasks' Harbor tallies by key name, as gathered from their shares in summary task
    order (`binary_lists`)."""

    __slots__ = ("binary", "broken", "shares")

    def __init__(self, shares: list[HarborShare]) -> None:
        self.shares = shares
        """The shares they were gathered from, in summary task order."""
        self.binary = PlacedTallies()
        """Key name -> the (n, c) of the shares that have the key (places: in `shares`)."""
        self.broken: dict[str, int] = {}
        """Key name -> the shares where the key is broken (some value not 0 nor 1)."""


@final
class HarborKept:
    """What Harbor's stats keep of a run between revisions (a part of its summary cache)."""

    __slots__ = ("exceptions", "figures", "graded", "lists", "reward_lists", "rewards")

    def __init__(self) -> None:
        self.graded: set[str] = set()
        """The trial ids with a completed or partial score, of any task and metric."""
        self.rewards: dict[str, dict[str, InOrder]] = {}
        """Key name -> value label -> trial ids of its non-null attempts, in log order."""
        self.lists: HarborLists | None = None
        self.figures: dict[str, tuple[list[Tally], dict[str, float]]] = {}
        """Key name -> (the tallies its pass@k was computed from, that pass@k)."""
        self.reward_lists: dict[tuple[str, str], tuple[InOrder, int, int, bytes]] = {}
        """(key name, value label) -> (its `rewards` list, the list's `rearranged` and length
        then, its trial ids encoded): `encoded_ids`."""
        self.exceptions: tuple[int, dict[str, list[str]]] | None = None
        """(the run's failed trials then, the exception_stats gathered from them)."""


def harbor_stats(run: RunState, shares: list[HarborShare], kept: HarborKept) -> dict[str, Any]:
    """`shares`: every task's share, in summary task order (the order Harbor adds its
    per-task pass@k in)."""
    lists = binary_lists(kept, shares)
    figures: dict[str, dict[str, float]] = {}
    for name in sorted(lists.binary.tallies.keys() - lists.broken.keys()):
        tallies = lists.binary.tallies[name]
        known = kept.figures.get(name)
        if known is None or known[0] != tallies:
            # A copy: the kept lists change in place (`binary_lists`).
            known = kept.figures[name] = (list(tallies), harbor_pass_at_k(tallies))
        if known[1]:
            figures[name] = known[1]
    return {
        "n_trials": len(kept.graded),
        "n_errors": run.trials_failed,
        "reward_stats": reward_stats(kept),
        "exception_stats": exception_stats(run, kept),
        "pass_at_k": figures,
    }


def binary_lists(kept: HarborKept, shares: list[HarborShare]) -> HarborLists:
    """The Harbor tallies of `shares` (every task's, in summary task order), by key name,
    kept in `kept.lists`: where the tasks are as many as when last gathered, only the places
    whose share changed are moved (a revision after a late attempt moves one); otherwise
    gathered anew."""
    lists = kept.lists
    if lists is None or len(lists.shares) != len(shares):
        lists = kept.lists = HarborLists(shares)
        for place, share in enumerate(shares):
            for name, tally in share.tallies.items():
                lists.binary.append(name, place, tally)
            for name in share.broken:
                lists.broken[name] = lists.broken.get(name, 0) + 1
        return lists
    before = lists.shares
    for place, share in enumerate(shares):
        old = before[place]
        if old is not share:
            for name in old.tallies.keys() | share.tallies.keys():
                lists.binary.put(name, place, name in old.tallies, share.tallies.get(name))
            for name in old.broken:
                lists.broken[name] -= 1
                if not lists.broken[name]:
                    del lists.broken[name]
            for name in share.broken:
                lists.broken[name] = lists.broken.get(name, 0) + 1
    lists.shares = shares
    return lists


def exception_stats(run: RunState, kept: HarborKept) -> dict[str, list[str]]:
    """Harbor's exception_stats: error type -> the failed trials' ids, in log order. Gathered
    again only when a trial failed since: a task's failed trials are only appended, each
    counted in `run.trials_failed` (an undo or a restore starts the cache over)."""
    known = kept.exceptions
    if known is not None and known[0] == run.trials_failed:
        return known[1]
    failed = heapq.merge(*(task.failed_trials for task in run.tasks.values() if task.failed_trials))
    gathered: dict[str, list[str]] = {}
    for _, error_type, trial_id in failed:
        gathered.setdefault(error_type, []).append(trial_id)
    kept.exceptions = (run.trials_failed, gathered)
    return gathered


def reward_stats(kept: HarborKept) -> dict[str, dict[str, list[str] | orjson.Fragment]]:
    """Harbor's reward_stats: key -> value label -> trial ids, in the log order of the scores
    that made the attempts, keys and labels as they first appear in that order (the
    attempts of one score by key name). Each list encoded (`encoded_ids`)."""
    # Sorted as tuples: within a key, a score gives one label, so labels' first seqs differ;
    # across keys, a score's outputs may share a first seq, and the key name breaks the tie.
    # The tuples never compare further.
    names = []
    for name, labels in kept.rewards.items():
        ordered_labels = sorted([(ordered.seqs[0], label, ordered) for label, ordered in labels.items()])
        names.append((ordered_labels[0][0], name, ordered_labels))
    names.sort()
    return {
        name: {label: encoded_ids(kept, name, label, ordered) for _, label, ordered in ordered_labels}
        for _, name, ordered_labels in names
    }


_KEPT_IDS: Final = 256
"""The trial ids of a list from which its encoding is kept: a shorter list is encoded with
the summary, for less than keeping its bytes costs (a small run's lists are all short)."""


def encoded_ids(kept: HarborKept, name: str, label: str, ordered: InOrder) -> list[str] | orjson.Fragment:
    """The trial ids of `ordered` encoded as a JSON list (the list itself when short), kept
    in `kept.reward_lists`: while ids were only appended to the list since
    (`InOrder.rearranged` unmoved, as late attempts land), the ids past those encoded are
    encoded and joined to the kept bytes, where encoding the whole list again made a
    revision O(the run's attempts) in its largest part."""
    items = ordered.items
    if len(items) < _KEPT_IDS:
        return items
    known = kept.reward_lists.get((name, label))
    if known is not None and known[0] is ordered and known[1] == ordered.rearranged and known[2] <= len(items):
        _, _, count, encoded = known
        if count == len(items):
            return orjson.Fragment(encoded)
        tail = memoryview(orjson.dumps(items[count:]))
        encoded = b"".join((memoryview(encoded)[:-1], b",", tail[1:])) if count else bytes(tail)
    else:
        # A copy: orjson's bytes keep its whole output buffer (`contributions.fragment`).
        encoded = bytes(memoryview(orjson.dumps(items)))
    kept.reward_lists[(name, label)] = (ordered, ordered.rearranged, len(items), encoded)
    return orjson.Fragment(encoded)
