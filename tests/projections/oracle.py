"""SEMANTICS.md and EVENTS.md transcribed from their words, for tests: what `evalstream replay`
must write for a log, computed with nothing of the fold. It imports nothing of `projections`
nor of `events` (it reads the lines as JSON itself) and shares no helper with them: only the
standard library and `tests.projections.reference`, section 4's aggregate transcribed the same
way. Each figure is computed the way its sentence says, from the run's applied events, from
scratch, with no state kept between revisions.

The oracle reads logs of valid events (as producers write them) and lines that are plainly no
event (not JSON, not an object, no known `type`, a required field missing); it does not
re-check the rest of the schema, which `tests/events` holds the codec to.

Where the spec fixes no rounding (section 2's per-task estimator is "a product"), the form is
the one docs/choices.md writes down, and the comparison stays exact: the choice is part of the
contract the project publishes."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.projections.reference import cpython_312_sum, range_aggregate

SPEC = Path(__file__).resolve().parents[2] / "docs" / "spec"
_T975 = json.loads((SPEC / "t975.json").read_text())

NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
MEASURABLE = ("continuous", "discrete", "boolean")  # section 1, rule 1
PASS_AT_K_KINDS = ("continuous", "boolean")  # section 2
MEASURED = ("completed", "partial")
REQUIRED = {
    "run.started": ("tasks",),
    "trial.finished": ("task_id", "trial_id", "status"),
    "score.emitted": ("task_id", "trial_id", "metric_type", "status"),
    "run.closed": (),
}
"""Input types (EVENTS.md) and the fields each must have besides the envelope's."""

Key = tuple[str, str]
"""(metric_type, output name); its name is "<metric_type>.<output>"."""


def name(key: Key) -> str:
    return f"{key[0]}.{key[1]}"


# --- values ------------------------------------------------------------------------------


def numeric(value: Any) -> float | None:
    """ "A JSON number or a non-finite string, and not a boolean", as a float."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return NONFINITE.get(value)
    return None


def semantic(value: Any) -> float | None:
    """1.0 / 0.0 for a boolean, the float of a numeric value, nothing for anything else."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    return numeric(value)


def wire(value: float | None) -> float | str | None:
    """EVENTS.md: a non-finite number is written "NaN", "Infinity" or "-Infinity"."""
    if value is None or math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def wired(node: Any) -> Any:
    if isinstance(node, float):
        return wire(node)
    if isinstance(node, dict):
        return {key: wired(value) for key, value in node.items()}
    if isinstance(node, list):
        return [wired(value) for value in node]
    return node


def passes(value: float | None) -> bool:
    """Section 2: not null and >= 1.0 (NaN never passes)."""
    return value is not None and value >= 1.0


# --- the log -----------------------------------------------------------------------------


def _refuse_constant(literal: str) -> Any:
    raise ValueError(f"{literal} is no JSON number")  # EVENTS.md: write "NaN", not NaN


def read(line: bytes) -> dict[str, Any] | None:
    """The event a line holds, or None for a line that is plainly no event."""
    try:
        event = json.loads(line, parse_constant=_refuse_constant)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("schema_version") != 1 or event.get("type") not in REQUIRED:
        return None
    envelope = ("event_id", "run_id", *REQUIRED[event["type"]])
    return event if all(field in event for field in envelope) else None


@dataclass
class Run:
    run_id: str
    started: dict[str, Any] | None = None
    closed_reason: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    """The applied input events, in log order."""
    event_ids: set[str] = field(default_factory=set)
    revision: int = 0


@dataclass
class Oracle:
    """What replay writes: a `run.summary` for each event applied to a closed run and, with
    `progress`, before it a `run.progress` for each applied event (`replay --progress`)."""

    progress: bool = False
    runs: dict[str, Run] = field(default_factory=dict)

    def apply(self, line: bytes) -> Run | None:
        """The run the line's event was applied to, or None when it was not."""
        event = read(line)
        if event is None:
            return None
        run = self.runs.setdefault(event["run_id"], Run(event["run_id"]))
        if event["event_id"] in run.event_ids:
            return None  # a redelivery changes nothing
        if event["type"] == "run.started":
            if run.started is not None:
                return None  # "Another one with a different event_id is refused"
            run.started = event
        if event["type"] == "run.closed":
            if run.closed_reason is not None:
                return None  # docs/choices.md: a second run.closed is ignored
            run.closed_reason = event.get("reason") or "completed"
        run.event_ids.add(event["event_id"])
        run.events.append(event)
        if run.closed_reason is not None:
            # "Emitted when a run closes, and again, with revision one higher, whenever later
            # events change it": every applied event changes event_count at least.
            run.revision += 1
        return run

    def feed(self, line: bytes) -> list[dict[str, Any]]:
        """What replay writes for the line."""
        run = self.apply(line)
        if run is None:
            return []
        written = [progress(run)] if self.progress else []
        if run.closed_reason is not None:
            written.append(summary(run))
        return written


def replayed(lines: Iterable[bytes], *, with_progress: bool = False) -> Iterator[dict[str, Any]]:
    """Every output of a log, in the order replay writes them."""
    oracle = Oracle(with_progress)
    for line in lines:
        if line.strip():
            yield from oracle.feed(line)


def summary_after(lines: Iterable[bytes], run_id: str = "run") -> dict[str, Any]:
    """The summary of a run after a log, closed or not. An open run has no summary in the
    contract, so it has no revision here (None); its figures are those of its events so far."""
    oracle = Oracle()
    for line in lines:
        oracle.apply(line)
    run = oracle.runs.get(run_id) or Run(run_id)
    return summary(run) | ({"revision": None} if run.closed_reason is None else {})


# --- comparing with the oracle -----------------------------------------------------------


def exact(node: Any, *, ordered: bool = True) -> Any:
    """A JSON value with its order and its number types kept: objects as lists of pairs (key
    order is part of the bytes, and the spec orders tasks, keys and aggregates; not
    `ordered`: in key order, for a record whose order the contract leaves open), floats by
    their repr (-0.0 is not 0.0; 1.0 is not 1)."""
    if isinstance(node, dict):
        pairs = [[key, exact(value, ordered=ordered)] for key, value in node.items()]
        return pairs if ordered else sorted(pairs)
    if isinstance(node, list):
        return [exact(value, ordered=ordered) for value in node]
    if isinstance(node, float):
        return ("float", repr(node))
    return node


def difference(got: Any, expected: Any, path: str = "") -> str | None:
    """Where two JSON values first differ, for a failure message."""
    if isinstance(got, dict) and isinstance(expected, dict):
        if list(got) != list(expected):
            return f"{path}: keys {list(got)} != {list(expected)}"
        for key in got:
            if (found := difference(got[key], expected[key], f"{path}.{key}")) is not None:
                return found
        return None
    if isinstance(got, list) and isinstance(expected, list):
        if len(got) != len(expected):
            return f"{path}: {len(got)} items != {len(expected)}: {got!r} != {expected!r}"
        for number, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
            if (found := difference(mine, theirs, f"{path}[{number}]")) is not None:
                return found
        return None
    return None if exact(got) == exact(expected) else f"{path}: got {got!r}, the spec says {expected!r}"


def assert_spec(got: Any, expected: Any, where: str = "") -> None:
    """`got` (parsed JSON) is `expected` exactly: order, number types, float bits."""
    assert exact(got) == exact(expected), f"{where}{difference(got, expected)}"


# --- declarations and attempts (section 1) -----------------------------------------------


@dataclass
class Tasks:
    """The run's tasks in summary order, with what each declares."""

    order: list[str]
    kinds: dict[str, dict[Key, str]]
    views: dict[str, list[dict[str, Any]]]


def tasks_of(run: Run, scores: list[dict[str, Any]]) -> Tasks:
    declared = run.started["tasks"] if run.started is not None else []
    order = [task["task_id"] for task in declared]
    kinds: dict[str, dict[Key, str]] = {task_id: {} for task_id in order}
    views: dict[str, list[dict[str, Any]]] = {task["task_id"]: task.get("views") or [] for task in declared}
    for task in declared:
        for metric in task.get("metrics") or []:
            for output in metric.get("outputs") or []:
                kinds[task["task_id"]][metric["metric_type"], output["name"]] = output["kind"]
    for score in scores:  # "then tasks named only by scores in order of their first score"
        if score["task_id"] not in kinds:
            order.append(score["task_id"])
            kinds[score["task_id"]] = {}
    return Tasks(order, kinds, views)


@dataclass
class Attempt:
    trial_id: str
    value: float | None
    made_by: int
    """The position, among the run's scores, of the score that made it."""


def task_keys(kinds: dict[Key, str], scores: list[dict[str, Any]]) -> list[Key]:
    """Rules 1 to 3 for one task, sorted by name."""
    keys = {key for key, kind in kinds.items() if kind in MEASURABLE}
    for score in scores:
        if score["status"] in MEASURED:
            for output in score.get("outputs") or []:
                key = (score["metric_type"], output["name"])
                if key not in kinds and semantic(output["value"]) is not None:
                    keys.add(key)
    return sorted(keys, key=name)


def attempts_of(tasks: Tasks, scores: list[dict[str, Any]]) -> dict[str, dict[Key, list[Attempt]]]:
    result = {}
    for task_id in tasks.order:
        own = [(position, score) for position, score in enumerate(scores) if score["task_id"] == task_id]
        lists: dict[Key, list[Attempt]] = {key: [] for key in task_keys(tasks.kinds[task_id], [s for _, s in own])}
        for position, score in own:
            for key, attempts in lists.items():
                if key[0] != score["metric_type"]:
                    continue
                if score["status"] == "failed":
                    if score.get("failure") == "trial":
                        attempts.append(Attempt(score["trial_id"], None, position))
                    continue  # failure "metric": the attempt is unmeasured
                for output in score.get("outputs") or []:
                    if output["name"] == key[1] and (value := semantic(output["value"])) is not None:
                        attempts.append(Attempt(score["trial_id"], value, position))
        result[task_id] = lists
    return result


# --- the summary -------------------------------------------------------------------------


@dataclass
class Folded:
    """What every figure of a run is computed from."""

    scores: list[dict[str, Any]]
    trials: list[dict[str, Any]]
    tasks: Tasks
    attempts: dict[str, dict[Key, list[Attempt]]]
    eligible: list[Key]
    """The pass@k-eligible keys, sorted by name."""
    tallies: dict[Key, Tallies]


def folded(run: Run) -> Folded:
    scores = [event for event in run.events if event["type"] == "score.emitted"]
    tasks = tasks_of(run, scores)
    attempts = attempts_of(tasks, scores)
    eligible = sorted(
        {key for kinds in tasks.kinds.values() for key, kind in kinds.items() if kind in PASS_AT_K_KINDS}, key=name
    )
    tallies = {key: key_tallies(tasks, attempts, key) for key in eligible}
    trials = [event for event in run.events if event["type"] == "trial.finished"]
    return Folded(scores, trials, tasks, attempts, eligible, tallies)


def summary(run: Run) -> dict[str, Any]:
    fold = folded(run)
    outputs = metric_outputs(fold.tasks, fold.scores)
    return {
        "schema_version": 1,
        "type": "run.summary",
        "run_id": run.run_id,
        "revision": run.revision,
        "closed_reason": run.closed_reason,
        "labels": (run.started.get("labels") or {}) if run.started is not None else {},
        "event_count": len(run.events),
        "summary": {
            "scores": wired(
                metric_aggregates(outputs, fold.scores)
                + view_aggregates(fold.tasks, fold.scores)
                + pass_at_k_aggregates(fold.tallies)
            ),
            "metric_coverage": coverage(outputs, fold.scores),
            "task_metric_attempts": {
                task_id: {
                    name(key): [{"trial_id": a.trial_id, "value": wire(a.value)} for a in attempt_list]
                    for key, attempt_list in lists.items()
                }
                for task_id, lists in fold.attempts.items()
            },
            "task_count": len(run.started["tasks"]) if run.started is not None else len(fold.tasks.order),
            "trial_count": len({score["trial_id"] for score in fold.scores}),
            "score_count": len(fold.scores),
        },
        "harbor": harbor(run, fold),
        "verdicts": {
            task_id: {name(key): verdict(attempt_list) for key, attempt_list in lists.items() if key in fold.tallies}
            for task_id, lists in fold.attempts.items()
        },
        "statistics": statistics(fold.tallies),
    }


def progress(run: Run) -> dict[str, Any]:
    """The figures of a `run.progress` that the contract fixes (EVENTS.md, SEMANTICS.md 3 and
    7), for the events applied so far. Not `seq` (the contract says only "increasing"), nor
    `percent_done` and `eta_seconds`, whose arithmetic it leaves open."""
    fold = folded(run)
    whole = summary(run)
    open_ = run.closed_reason is None
    declared = [task["task_id"] for task in run.started["tasks"]] if run.started is not None else []
    # Section 3: "a declared task nothing has arrived for while the run is open".
    arrived = {event.get("task_id") for event in run.events}
    pending = {task_id for task_id in declared if task_id not in arrived} if open_ else set()
    aggregates = {aggregate["name"]: aggregate for aggregate in whole["summary"]["scores"]}
    pass_at_k = {}
    for key in fold.eligible:
        by_k = {}
        for k in range(1, max((n for n, _ in fold.tallies[key].measured), default=0) + 1):
            aggregate = aggregates[f"{name(key)}.pass@{k}"]  # section 7: exactly the summary's
            by_k[str(k)] = {field: aggregate[field] for field in ("mean", "count", "nan_count")}
        if by_k:
            pass_at_k[name(key)] = by_k
    verdicts = {}
    for key in fold.eligible:
        counts = dict.fromkeys(("solved", "flaky", "failed", "unmeasured", "pending"), 0)
        for task_id, lists in fold.attempts.items():
            if key in lists:
                said = verdict(lists[key])
                counts["pending" if said == "unmeasured" and task_id in pending else said] += 1
        verdicts[name(key)] = counts
    attempts_per_task = run.started.get("attempts_per_task") if run.started is not None else None
    return {
        "type": "run.progress",
        "run_id": run.run_id,
        "status": "open" if open_ else "closed",
        "event_count": len(run.events),
        "tasks": {
            "declared": len(declared),
            "with_attempts": sum(1 for lists in fold.attempts.values() if any(lists.values())),
            "pending": len(pending),
        },
        "trials": {
            # "trials finished and failed": the applied trial.finished events (the contract
            # does not say whether one trial id finished twice is one trial or two).
            "finished": len(fold.trials),
            "failed": sum(1 for trial in fold.trials if trial["status"] == "failed"),
            "expected": attempts_per_task * len(declared) if attempts_per_task else None,
        },
        "scores_applied": len(fold.scores),
        "pass_at_k": pass_at_k,
        "statistics": whole["statistics"],
        "verdicts": verdicts,
    }


def metric_outputs(tasks: Tasks, scores: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Section 4: per metric_type, the output names declared (any kind) or seen in any score."""
    names: dict[str, set[str]] = {}
    for kinds in tasks.kinds.values():
        for metric, output in kinds:
            names.setdefault(metric, set()).add(output)
    for score in scores:
        names.setdefault(score["metric_type"], set()).update(o["name"] for o in score.get("outputs") or [])
    return names


def metric_aggregates(outputs: dict[str, set[str]], scores: list[dict[str, Any]]) -> list[dict[str, Any]]:
    records = []
    for metric in sorted(outputs):
        of_metric = [score for score in scores if score["metric_type"] == metric]
        for output in sorted(outputs[metric]):
            values = [
                value
                for score in of_metric
                if score["status"] in MEASURED
                for o in score.get("outputs") or []
                if o["name"] == output and (value := numeric(o["value"])) is not None
            ]
            records.append(range_aggregate(f"{metric}.{output}", values, len(of_metric)))
    return records


def coverage(outputs: dict[str, set[str]], scores: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, int]]]:
    result: dict[str, dict[str, dict[str, int]]] = {}
    # A metric with no output names (undeclared, only failed scores) is there, empty: the
    # spec does not say; the example's expected summaries have none such.
    for metric in sorted(outputs):
        of_metric = [score for score in scores if score["metric_type"] == metric]
        failed = sum(1 for score in of_metric if score["status"] == "failed")
        result[metric] = {}
        for output in sorted(outputs[metric]):
            scored = sum(
                1
                for score in of_metric
                if score["status"] != "failed" and any(o["name"] == output for o in score.get("outputs") or [])
            )
            result[metric][output] = {
                "total": len(of_metric),
                "scored": scored,
                "failed": failed,
                "missing": len(of_metric) - scored - failed,
            }
    return result


# --- views (section 4) -------------------------------------------------------------------


def view_aggregates(tasks: Tasks, scores: list[dict[str, Any]]) -> list[dict[str, Any]]:
    totals: dict[str, int] = {}
    values: dict[str, list[float]] = {}
    for task_id in tasks.order:
        views = tasks.views.get(task_id) or []
        own = [score for score in scores if score["task_id"] == task_id]
        for trial_id in dict.fromkeys(score["trial_id"] for score in own):
            for view in views:
                totals[view["name"]] = totals.get(view["name"], 0) + 1
                value = view_value(view, [s for s in own if s["trial_id"] == trial_id])
                if value is not None:
                    values.setdefault(view["name"], []).append(value)
    # docs/choices.md: a view with no trial (no total) has no aggregate.
    return [range_aggregate(f"view.{view}", values.get(view, []), totals[view]) for view in sorted(totals)]


def view_value(view: dict[str, Any], trial_scores: list[dict[str, Any]]) -> float | None:
    signals = []
    for signal in view["signals"]:
        measured = [s for s in trial_scores if s["metric_type"] == signal["metric"] and s["status"] in MEASURED]
        if not measured:
            return None
        latest = measured[-1]  # "the later score wins if several"
        found = [semantic(o["value"]) for o in latest.get("outputs") or [] if o["name"] == signal["output"]]
        if not found or found[0] is None:
            return None  # "if any signal has none, skip"
        weight = signal.get("weight")
        signals.append((found[0], 1.0 if weight is None else float(weight)))
    reducer = view["reducer"]
    if reducer == "single":
        return signals[0][0]
    # `min` and `max` of signals one of which is NaN: the spec says nothing; docs/choices.md
    # follows Python's (the first value holds unless a later one compares below or above
    # it, so NaN first stays NaN and NaN later is passed over), as the fold does.
    if reducer == "all":
        return min(value for value, _ in signals)
    if reducer == "any":
        return max(value for value, _ in signals)
    if reducer == "mean":
        finite = [value for value, _ in signals if math.isfinite(value)]
        return cpython_312_sum(finite) / len(finite) if finite else None
    weights = cpython_312_sum([weight for _, weight in signals])
    if weights == 0:
        return None
    return cpython_312_sum([value * weight for value, weight in signals]) / weights


# --- pass@k, verdicts, statistics (sections 2, 3, 8) -------------------------------------


@dataclass
class Tallies:
    measured: list[tuple[int, int]]
    """(n, c) of each measured task, in summary task order."""
    unmeasured: int


def key_tallies(tasks: Tasks, attempts: dict[str, dict[Key, list[Attempt]]], key: Key) -> Tallies:
    lists = [attempts[task_id][key] for task_id in tasks.order if key in attempts[task_id]]
    measured = [(len(values), sum(1 for a in values if passes(a.value))) for values in lists if values]
    return Tallies(measured, len(lists) - len(measured))


def unbiased(n: int, c: int, k: int) -> float:
    """`1 - C(n-c, k) / C(n, k)` as a product: docs/choices.md's `1 - prod(1 - k/i)` over
    i = n-c+1 .. n (the NeMo evaluator's form; section 2 fixes no rounding)."""
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def hat(n: int, c: int, k: int) -> float:
    """Section 8's pass^k: `prod(i = 0..k-1) (c - i)/(n - i)` in that order, 0.0 when c < k."""
    if c < k:
        return 0.0
    product = 1.0
    for i in range(k):
        product *= (c - i) / (n - i)
    return product


def per_k(tallies: Tallies, estimate: Any) -> list[list[float]]:
    """For k = 1 .. the largest n, the per-task figures of the tasks with n >= k."""
    largest = max((n for n, _ in tallies.measured), default=0)
    return [[estimate(n, c, k) for n, c in tallies.measured if n >= k] for k in range(1, largest + 1)]


def pass_at_k_aggregates(tallies: dict[Key, Tallies]) -> list[dict[str, Any]]:
    return [
        range_aggregate(f"{name(key)}.pass@{k}", figures, len(figures) + key_tally.unmeasured)
        for key, key_tally in tallies.items()
        for k, figures in enumerate(per_k(key_tally, unbiased), start=1)
    ]


def verdict(attempts: list[Attempt]) -> str:
    if not attempts:
        return "unmeasured"
    passed = sum(1 for a in attempts if passes(a.value))
    return "solved" if passed == len(attempts) else "failed" if passed == 0 else "flaky"


def statistics(tallies: dict[Key, Tallies]) -> dict[str, Any]:
    return {
        name(key): {
            "tasks": len(key_tally.measured),
            "pass_at_k": entries(per_k(key_tally, unbiased), key_tally.unmeasured),
            "pass_hat_k": entries(per_k(key_tally, hat), key_tally.unmeasured),
        }
        for key, key_tally in tallies.items()
        if key_tally.measured
    }


def t975(degrees: int) -> float:
    return float(_T975["t_975"][degrees - 1] if degrees <= len(_T975["t_975"]) else _T975["normal_975"])


def entries(columns: list[list[float]], unmeasured: int) -> list[dict[str, Any]]:
    result = []
    for k, figures in enumerate(columns, start=1):
        aggregate = range_aggregate("", figures, len(figures) + unmeasured)
        count, mean, std_dev = aggregate["count"], aggregate["mean"], aggregate["sample_std_dev"]
        stderr = None if std_dev is None else std_dev / math.sqrt(count)
        low = high = None
        if stderr is not None:
            margin = t975(count - 1) * stderr
            low, high = min(max(mean - margin, 0.0), 1.0), min(max(mean + margin, 0.0), 1.0)
        result.append(
            wired(
                {
                    "k": k,
                    "count": count,
                    "nan_count": aggregate["nan_count"],
                    "mean": mean,
                    "stderr": stderr,
                    "ci95_low": low,
                    "ci95_high": high,
                }
            )
        )
    return result


# --- harbor (section 6) ------------------------------------------------------------------


def harbor(run: Run, fold: Folded) -> dict[str, Any]:
    exception_stats: dict[str, list[str]] = {}
    for trial in fold.trials:
        if trial["status"] == "failed":
            error_type = (trial.get("error") or {}).get("type") or "UnknownError"
            exception_stats.setdefault(error_type, []).append(trial["trial_id"])
    return {
        "n_trials": len({score["trial_id"] for score in fold.scores if score["status"] in MEASURED}),
        "n_errors": sum(1 for trial in fold.trials if trial["status"] == "failed"),
        "reward_stats": reward_stats(fold.attempts),
        "exception_stats": exception_stats,
        "pass_at_k": harbor_pass_at_k(run, fold.attempts, fold.eligible),
    }


def reward_stats(attempts: dict[str, dict[Key, list[Attempt]]]) -> dict[str, dict[str, list[str]]]:
    made = sorted(
        (
            (a.made_by, name(key), a.value, a.trial_id)
            for lists in attempts.values()
            for key, values in lists.items()
            for a in values
            if a.value is not None
        ),
        key=lambda attempt: attempt[:2],  # docs/choices.md: one score's attempts by key name
    )
    stats: dict[str, dict[str, list[str]]] = {}
    # A trial id twice (two attempts of one trial, section 1) is listed twice, as the
    # example's expected summaries do (run-11-0's reward.score "0.0").
    for _, key_name, value, trial_id in made:
        stats.setdefault(key_name, {}).setdefault(repr(value), []).append(trial_id)
    return stats


def harbor_estimate(n: int, c: int, k: int) -> float:
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(k):
        product *= (n - c - i) / (n - i)
    return 1.0 - product


def harbor_ks(smallest: int) -> list[int]:
    ks = set()
    power = 2
    while power <= smallest:
        ks.add(power)
        power *= 2
    ks.update(range(5, smallest + 1, 5))
    return sorted(ks)


def harbor_pass_at_k(
    run: Run, attempts: dict[str, dict[Key, list[Attempt]]], eligible: list[Key]
) -> dict[str, dict[str, float]]:
    rules = (run.started.get("harbor_rules") if run.started is not None else None) or "0.26"
    result: dict[str, dict[str, float]] = {}
    for key in eligible:
        lists = [lists[key] for lists in attempts.values() if key in lists]
        if any(a.value not in (0.0, 1.0) for values in lists for a in values if a.value is not None):
            continue  # "a key that breaks the 0/1 rule is left out"
        tallies = []
        for values in lists:
            counted = [a for a in values if a.value is not None or rules == "0.25"]
            if counted:
                tallies.append((len(counted), sum(1 for a in counted if a.value == 1.0)))
        ks = harbor_ks(min((n for n, _ in tallies), default=0))
        if ks:
            result[name(key)] = {
                str(k): cpython_312_sum([harbor_estimate(n, c, k) for n, c in tallies]) / len(tallies) for k in ks
            }
    return result
