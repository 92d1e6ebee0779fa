"""`run.summary`: the summary, harbor, verdicts and statistics objects of a run (SEMANTICS.md 1-6, 8).

Built as JSON-ready data (non-finite floats already in their wire strings) in the exact key
order of the contract, so that encoding it is one `orjson.dumps` and the same state always
gives the same bytes. `events.outputs.RunSummary` is the model of this shape.

A revision is assembled from what each task contributes (`projections.assembly.contributions`,
kept in the run's summary cache: only the tasks changed since are computed again, their
attempt lists encoded again) and the run-wide figures summed over those contributions in the
order the specification fixes: metric values in run log order, views and pass@k in summary
task order. `summary_bytes` is the encoded revision (what the worker and replay publish);
`summary` is the same revision as plain data, read back from those bytes. Without a cache
they build it from the state alone, to the same bytes.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import orjson

from projections.assembly.attempts import summary_tasks
from projections.assembly.contributions import MetricCoverage, SummaryCache, fragment, refreshed
from projections.assembly.harbor_stats import harbor_stats
from projections.assembly.key_figures import key_figures, pass_at_k_aggregates
from projections.assembly.log_order import InOrder
from projections.figures.aggregates import Aggregate, Growing, aggregate_of, center_and_spread, negative_zero
from projections.fold.declarations import Key
from projections.fold.run import RunState

Summary = dict[str, Any]


def summary(run: RunState, cache: SummaryCache | None = None) -> Summary:
    """The `run.summary` event of a closed run (its `revision` counts events since close)."""
    parsed: Summary = orjson.loads(summary_bytes(run, cache))
    return parsed


def summary_bytes(run: RunState, cache: SummaryCache | None = None) -> bytes:
    """`summary(run, cache)` encoded, as `events.codec.encode_payload` encodes it."""
    cache = refreshed(run, SummaryCache() if cache is None else cache)
    tasks = summary_tasks(run)
    # One pass over the tasks for their shares and the two maps made of them.
    harbor = []
    task_attempts, verdicts = {}, {}
    for task in tasks:
        share = cache.tasks[task.task_id]
        harbor.append(share.harbor)
        task_attempts[task.task_id] = share.attempts
        verdicts[task.task_id] = share.verdicts
    figures = key_figures(run, cache)
    outputs = metric_outputs(run, cache)
    payload = {
        "schema_version": 1,
        "type": "run.summary",
        "run_id": run.run_id,
        "revision": run.revision,
        "closed_reason": run.closed_reason,
        "labels": dict(run.declarations.labels) if run.declarations else {},
        "event_count": run.event_count,
        "summary": {
            "scores": [
                *metric_aggregates(outputs, cache),
                *view_aggregates(cache),
                *(record for name, key in figures for record in pass_at_k_aggregates(name, key)),
            ],
            "metric_coverage": metric_coverage(outputs, cache),
            "task_metric_attempts": task_attempts,
            "task_count": len(run.declarations.tasks) if run.declarations else len(tasks),
            "trial_count": len(cache.trials),
            "score_count": run.score_count,
        },
        "harbor": harbor_stats(run, harbor, cache.harbor),
        "verdicts": verdicts,
        "statistics": {name: key.statistics for name, key in figures if key.statistics is not None},
    }
    return orjson.dumps(payload)


MetricOutputs = list[tuple[str, list[str]]]
"""(metric_type, its output names, sorted), metric types sorted: the order of the metric
aggregates and of `metric_coverage`."""


def metric_outputs(run: RunState, cache: SummaryCache) -> MetricOutputs:
    """Per metric_type, the output names declared (any kind) or carried by any score."""
    names: dict[str, set[str]] = {}
    if run.declarations:
        for metric, declared in run.declarations.outputs.items():
            names.setdefault(metric, set()).update(declared)
    for metric, carried in cache.outputs.items():
        names.setdefault(metric, set()).update(carried)
    return [(metric, sorted(outputs)) for metric, outputs in sorted(names.items())]


def metric_aggregates(outputs: MetricOutputs, cache: SummaryCache) -> list[orjson.Fragment]:
    records = []
    for metric, names in outputs:
        total = cache.coverage[metric].scores if metric in cache.coverage else 0
        for output in names:
            key = (metric, output)
            known = cache.metric_records.get(key)
            if known is None or known[0] != total:
                record = fragment(grown(cache, key).aggregate(f"{metric}.{output}", total))
                known = cache.metric_records[key] = (total, record)
            records.append(known[1])
    return records


def grown(cache: SummaryCache, key: Key) -> Growing:
    """The key's values in run log order, ready for its aggregate: those landed since added,
    or all of them again when some landed before others (`InOrder.rearranged`)."""
    ordered = cache.numeric.get(key) or InOrder()
    kept = cache.metric_values.get(key)
    if kept is None or kept[0] != ordered.rearranged:
        kept = cache.metric_values[key] = (ordered.rearranged, Growing())
    growing = kept[1]
    growing.extend(ordered.items[growing.taken :])
    return growing


def metric_coverage(outputs: MetricOutputs, cache: SummaryCache) -> dict[str, dict[str, dict[str, int]]]:
    coverage: dict[str, dict[str, dict[str, int]]] = {}
    for metric, names in outputs:
        counts = cache.coverage.get(metric) or MetricCoverage()
        total, failed = counts.scores, counts.failed
        coverage[metric] = {}
        for output in names:
            scored = counts.carried.get(output, 0)
            coverage[metric][output] = {
                "total": total,
                "scored": scored,
                "failed": failed,
                "missing": total - scored - failed,
            }
    return coverage


def view_aggregates(cache: SummaryCache) -> list[orjson.Fragment]:
    """The view aggregates, encoded, kept in `cache` until some task's views change."""
    if cache.view_records is None:
        cache.view_records = [fragment(record) for record in _view_records(cache)]
    return cache.view_records


def _view_records(cache: SummaryCache) -> list[Aggregate]:
    """Each view's aggregate over its values, in declared task order (each task's slot in
    `cache.view_values`, kept as tasks change), by view name; their percentiles from the
    values kept in order (`cache.view_sorted`), sorted afresh where none are kept."""
    records = []
    for name, total in sorted(cache.view_totals.items()):
        middle, spreads = center_and_spread(list(chain.from_iterable(cache.view_values[name])), total)
        ordered = cache.view_sorted.get(name)
        if ordered is None:
            ordered = sorted(middle.finite)
            if not any(negative_zero(value) for value in ordered):
                cache.view_sorted[name] = ordered
        records.append(aggregate_of(f"view.{name}", middle, spreads, ordered))
    return records
