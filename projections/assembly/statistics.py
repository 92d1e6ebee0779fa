"""`statistics`: pass@k and pass^k with standard errors and 95% intervals (SEMANTICS.md 8).

Per eligible key with pass@k entries, keys sorted, `{"tasks", "pass_at_k", "pass_hat_k"}`,
each list one entry per k = 1..the largest n: `{"k", "count", "nan_count", "mean", "stderr",
"ci95_low", "ci95_high"}`, in that key order (the contract's bytes).

One figure per measured task and k, from the task's (n, c) alone (`passk.estimates`,
`passk.hat_estimates`, both cached), so a task's figures change only when its attempts do
and an entry costs O(tasks). pass@k's count, nan_count and mean are `center`'s, the very
function `range_aggregate` takes them from, over the same figures in the same order: they
equal the summary's `<key>.pass@<k>` aggregate to the bit. The standard error is the range
aggregate's sample standard deviation (`spread`) over sqrt(count): one figure per task, so
it is clustered by task (Miller 2024, "Adding Error Bars to Evals"). A key's figures are kept
in the run's cache with the (n, c) list they came from (`key_figures`), so progress and a
summary compute them again only for the keys whose tasks' tallies moved, and within such a
key only the ks whose per-task figures moved (`Column`). The `<key>.pass@<k>` aggregates
only the summary shows are made from those columns when a summary asks for them
(`pass_at_k_aggregates`), not by every progress event.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

import orjson

from events.compiled import NATIVE
from projections.assembly.attempts import task_tallies
from projections.assembly.contributions import Column, KeyFigures, cache_of, fragment
from projections.figures.aggregates import Center, Spread, aggregate_of, finite_center_and_spread
from projections.figures.passk import Tally, estimates, hat_estimates
from projections.figures.t975 import t975
from projections.fold.declarations import key_name
from projections.fold.run import RunState

Statistics = dict[str, dict[str, Any]]
"""key name -> {"tasks", "pass_at_k", "pass_hat_k"}: JSON-ready, in the contract's key order."""

Estimator = Callable[[int, int], tuple[float, ...]]
"""A task's per-k figures for k = 1..n from its (n, c)."""

_TRANSPOSED: Final[Any] = None if NATIVE is None else NATIVE.transposed
"""`events/native`'s `by_k` transposition where built: the same float objects in the same
columns, moved by reference, where the compiled fold reads each figure out of its tuple and
makes a new float of it (tests/projections/test_transpose.py holds it to the Python below)."""


def statistics(run: RunState) -> Statistics:
    """Section 8 for the events applied to `run` so far (a progress event's and a summary's)."""
    return {name: figures.statistics for name, figures in key_figures(run) if figures.statistics is not None}


def key_figures(run: RunState) -> list[tuple[str, KeyFigures]]:
    """Every eligible key's pass@k and pass^k columns and section 8 entry, by key name: the
    (n, c) list taken again only for the keys some task's (n, c) moved in since the run's
    last call (`KeyTally.moves`), and the figures computed again only where it changed."""
    kept = cache_of(run)
    cache = kept.keys
    names = {key_name(key): key for key in run.passk}
    moves = {name: run.passk[key].moves for name, key in names.items()}
    moved = sorted(name for name, count in moves.items() if name not in cache or cache[name].moves != count)
    tallies = kept.tallies = task_tallies(run, kept.tallies) if moved else kept.tallies
    for name in moved:
        assert tallies is not None
        # A copy: the kept lists move in place, and the figures keep the list they came from.
        measured = list(tallies.measured.tallies.get(name, ()))
        unmeasured = tallies.unmeasured.get(name, 0)
        figures = cache.get(name)
        if figures is None or figures.unmeasured != unmeasured or figures.measured != measured:
            figures = _figures(name, measured, unmeasured, figures)
        figures.moves = moves[name]
        cache[name] = figures
    return [(name, cache[name]) for name in sorted(moves)]


def _figures(name: str, measured: list[Tally], unmeasured: int, before: KeyFigures | None) -> KeyFigures:
    """pass@k's and pass^k's columns and section 8's entries, over one center and spread per
    k; a k whose per-task figures are those of `before` (a task's (n, c) moved without
    moving them: 1.0 stays 1.0 while every attempt passes) keeps its column, and pass^k's
    column at k is pass@k's when their figures are the same (each task passing all or none
    of its attempts)."""
    if before is not None and before.unmeasured != unmeasured:
        before = None
    at_k = _columns(by_k(measured, estimates), unmeasured, before.at_k if before else [])
    hat_k = _columns(by_k(measured, hat_estimates), unmeasured, before.hat_k if before else [], at_k)
    if not measured:
        return KeyFigures(measured, unmeasured, at_k, hat_k, None)
    figures = {
        "tasks": len(measured),
        "pass_at_k": [column.entry for column in at_k],
        "pass_hat_k": [column.entry for column in hat_k],
    }
    return KeyFigures(measured, unmeasured, at_k, hat_k, figures)


def _columns(figures: list[list[float]], unmeasured: int, *known: list[Column]) -> list[Column]:
    """Each k's column of `figures` (`by_k`'s): a column of one of the `known` lists at the
    same k where it has the same figures (its entry is then the same too), else a new one.
    The figures are never NaN, infinite nor -0.0 (products of positive ratios at most 1.0,
    1.0 minus one, or 0.0 written as such), so == on them is equality to the bit, and each
    column's center keeps its list as the finite values it is."""
    columns = []
    # `enumerate` without `start`: the compiled fold makes a C loop of that form only.
    for index, values in enumerate(figures):
        k = index + 1
        for kept in known:
            if k <= len(kept) and kept[k - 1].values == values:
                columns.append(kept[k - 1])
                break
        else:
            middle, spreads = finite_center_and_spread(values, len(values) + unmeasured)
            columns.append(Column(middle, spreads, entry(k, middle, spreads)))
    return columns


def pass_at_k_aggregates(name: str, figures: KeyFigures) -> list[orjson.Fragment]:
    """The key's `<key>.pass@<k>` aggregates, encoded, for k = 1..the largest n: each made
    when a summary first asks for it, from its column's center and spread, and kept there."""
    records = []
    for index, column in enumerate(figures.at_k):
        if column.aggregate is None:
            column.aggregate = fragment(aggregate_of(f"{name}.pass@{index + 1}", column.middle, column.spreads))
        records.append(column.aggregate)
    return records


def by_k(measured: list[Tally], estimator: Estimator) -> list[list[float]]:
    """For k = 1..the largest n, the figures of the tasks with n >= k, in the order of
    `measured` (summary task order: it orders the compensated sums)."""
    figures = [estimator(n, c) for n, c in measured]
    if not figures:
        return []
    if _TRANSPOSED is not None:
        columns: list[list[float]] | None = _TRANSPOSED(figures)
        if columns is not None:
            return columns
    # Up to the smallest n every task has a figure: those columns are the figures transposed
    # (a C-level loop; most runs give every task the same n). Past it, a task has n
    # figures, one per k = 1..n: column k - 1 takes those with more than k - 1.
    columns = [list(column) for column in zip(*figures, strict=False)]  # to the shortest
    columns += [[task[k] for task in figures if len(task) > k] for k in range(len(columns), max(map(len, figures)))]
    return columns


def entry(k: int, middle: Center, spreads: Spread | None) -> dict[str, Any]:
    """One k's figures from the center and spread of its tasks' figures (the ones without
    a figure count as NaN)."""
    mean = middle.mean
    stderr = low = high = None
    sample_variance = None if spreads is None else spreads.sample_variance
    if mean is not None and sample_variance is not None:
        # float(): the compiled fold calls C's sqrt on a float, and Python's `math.sqrt` on an
        # int (which converts it the same way).
        stderr = math.sqrt(sample_variance) / math.sqrt(float(middle.count))
        margin = t975(middle.count - 1) * stderr
        low, high = _clip(mean - margin), _clip(mean + margin)
    return {
        "k": k,
        "count": middle.count,
        "nan_count": middle.nan_count,
        "mean": mean,
        "stderr": stderr,
        "ci95_low": low,
        "ci95_high": high,
    }


def _clip(value: float) -> float:
    return min(1.0, max(0.0, value))
