"""Every eligible key's pass@k and pass^k columns and section 8 entry for a run, as a progress
event and a summary show them, kept in the run's summary cache between the two.

A key's (n, c) list is taken again only when some task's (n, c) moved in it since the last
call (`KeyTally.moves`), and its figures computed again only where that list changed
(`projections.figures.passk.key_figures_of`, which also keeps every column whose figures did
not move). The `<key>.pass@<k>` aggregates only a summary shows are made from the columns
when a summary asks for them, not by every progress event.
"""

from __future__ import annotations

import orjson

from projections.assembly.attempts import task_tallies
from projections.assembly.contributions import SummaryCache, current, fragment
from projections.figures.aggregates import aggregate_of
from projections.figures.passk import KeyFigures, key_figures_of
from projections.figures.statistics import Statistics
from projections.fold.declarations import key_name
from projections.fold.run import RunState


def key_figures(run: RunState, cache: SummaryCache) -> list[tuple[str, KeyFigures]]:
    """Every eligible key's figures, by key name, kept in `cache`."""
    current(run, cache)
    kept = cache.keys
    names = {key_name(key): key for key in run.passk}
    moves = {name: run.passk[key].moves for name, key in names.items()}
    moved = sorted(name for name, count in moves.items() if name not in kept or kept[name].moves != count)
    tallies = cache.tallies = task_tallies(run, cache.tallies) if moved else cache.tallies
    for name in moved:
        assert tallies is not None
        # A copy: the kept lists move in place, and the figures keep the list they came from.
        measured = list(tallies.measured.tallies.get(name, ()))
        unmeasured = tallies.unmeasured.get(name, 0)
        figures = kept.get(name)
        if figures is None or figures.unmeasured != unmeasured or figures.measured != measured:
            figures = key_figures_of(measured, unmeasured, figures)
        figures.moves = moves[name]
        kept[name] = figures
    return [(name, kept[name]) for name in sorted(moves)]


def statistics(run: RunState) -> Statistics:
    """Section 8 for the events applied to `run` so far, computed afresh (progress and
    summaries take theirs from `key_figures` with the run's cache)."""
    figures = key_figures(run, SummaryCache())
    return {name: key.statistics for name, key in figures if key.statistics is not None}


def pass_at_k_aggregates(name: str, figures: KeyFigures) -> list[orjson.Fragment]:
    """The key's `<key>.pass@<k>` aggregates, encoded, for k = 1..the largest n: each made
    when a summary first asks for it, from its column's center and spread, and kept there."""
    records = []
    for index, column in enumerate(figures.at_k):
        if column.aggregate is None:
            column.aggregate = fragment(aggregate_of(f"{name}.pass@{index + 1}", column.middle, column.spreads))
        records.append(column.aggregate)
    return records
