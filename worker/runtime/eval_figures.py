"""The eval's own figures on `/metrics`: each open run's progress, pass@1 per key with its
95% interval, dead trials and ETA, as of its last progress event (`worker.runtime.progress`
hands each one over, encoded, as it is published; a scrape reads the figures of the runs it
shows from them, so that the worker's hot path decodes nothing).

Series (gauges; `run`: the run id, `key`: a pass@k key, `<metric>.<output>`):
`evalstream_run_trials_finished{run}`, `evalstream_run_trials_dead{run}`,
`evalstream_run_trials_expected{run}` (when its run.started gave attempts_per_task),
`evalstream_run_progress_ratio{run}` (finished / expected, the same condition),
`evalstream_run_eta_seconds{run}` (when there is an ETA),
`evalstream_run_pass_at_1{run,key}`, `evalstream_run_pass_at_1_low{run,key}` and
`evalstream_run_pass_at_1_high{run,key}` (the interval, from two measured tasks on),
`evalstream_open_runs_dropped` (open runs left out for the bound below).

Cardinality is bounded: only open runs (a run's series go once its closing progress is
published, or its partition leaves the worker), at most `MAX_RUNS` of them per worker (the
most recently updated; the rest are counted in `evalstream_open_runs_dropped`), and at most
`MAX_KEYS` keys per run (the first in sorted order). Per worker at most
MAX_RUNS x (5 + 3 x MAX_KEYS) = 6,500 series.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from prometheus_client.core import GaugeMetricFamily, Metric

MAX_RUNS = 100
MAX_KEYS = 20


@dataclass(frozen=True, slots=True)
class RunFigures:
    finished: int
    dead: int
    expected: int | None
    eta: float | None
    pass_at_1: tuple[tuple[str, float | None, float | None, float | None], ...]
    """(key, mean, interval low, interval high) of the first MAX_KEYS keys."""


def _number(value: Any) -> float | None:
    """A figure as a float; None for a null or a non-finite string (Prometheus would take NaN,
    but a panel reads a missing sample better than a NaN)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def figures_of(payload: Mapping[str, Any]) -> RunFigures:
    """A `run.progress` payload's figures."""
    trials = payload["trials"]
    keys = []
    for key in sorted(payload["pass_at_k"])[:MAX_KEYS]:
        mean = _number(payload["pass_at_k"][key].get("1", {}).get("mean"))
        intervals = payload["statistics"].get(key, {}).get("pass_at_k", [])
        first: Mapping[str, Any] = next((entry for entry in intervals if entry["k"] == 1), {})
        keys.append((key, mean, _number(first.get("ci95_low")), _number(first.get("ci95_high"))))
    return RunFigures(
        trials["finished"],
        trials["failed"],
        trials["expected"],
        _number(payload["eta_seconds"]),
        tuple(keys),
    )


class EvalFigures:
    def __init__(self) -> None:
        self.runs: OrderedDict[str, tuple[int, bytes]] = OrderedDict()
        """Run id -> (its partition, its last progress event), of open runs."""
        self.dropped = 0

    def update(self, run_id: str, event: bytes, closed: bool, partition: int) -> None:
        """Take a run's progress event (encoded): its figures while it is open, none once it closed."""
        if closed:
            self.runs.pop(run_id, None)
            return
        self.runs[run_id] = (partition, event)
        self.runs.move_to_end(run_id)
        while len(self.runs) > MAX_RUNS:
            self.runs.popitem(last=False)
            self.dropped += 1

    def forget(self, partitions: Iterable[int] | None = None) -> None:
        """Drop the runs of these partitions (all: None): another worker reports them now."""
        dropped = None if partitions is None else set(partitions)
        for run_id, (partition, _) in list(self.runs.items()):
            if dropped is None or partition in dropped:
                del self.runs[run_id]

    def collect(self) -> Iterator[Metric]:
        def gauge(name: str, doc: str, labels: tuple[str, ...] = ("run",)) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"evalstream_run_{name}", doc, labels=list(labels))

        finished = gauge("trials_finished", "Trials finished (completed or dead) of an open run")
        dead = gauge("trials_dead", "Trials of an open run that died")
        expected = gauge("trials_expected", "Trials an open run declared (attempts_per_task x tasks)")
        ratio = gauge("progress_ratio", "Finished of expected trials of an open run")
        eta = gauge("eta_seconds", "Seconds an open run is expected to take still")
        both = ("run", "key")
        mean = gauge("pass_at_1", "pass@1 of a key of an open run, as its summary would say now", both)
        low = gauge("pass_at_1_low", "Low end of the 95% interval of pass@1", both)
        high = gauge("pass_at_1_high", "High end of the 95% interval of pass@1", both)
        for run_id, (_, event) in self.runs.items():
            figures = figures_of(orjson.loads(event))
            finished.add_metric([run_id], figures.finished)
            dead.add_metric([run_id], figures.dead)
            if figures.expected:
                expected.add_metric([run_id], figures.expected)
                ratio.add_metric([run_id], min(1.0, figures.finished / figures.expected))
            if figures.eta is not None:
                eta.add_metric([run_id], figures.eta)
            for key, value, below, above in figures.pass_at_1:
                for family, figure in ((mean, value), (low, below), (high, above)):
                    if figure is not None:
                        family.add_metric([run_id, key], figure)
        yield from (finished, dead, expected, ratio, eta, mean, low, high)
        yield GaugeMetricFamily(
            "evalstream_open_runs_dropped", "Open runs left out of the run series (past MAX_RUNS)", self.dropped
        )
