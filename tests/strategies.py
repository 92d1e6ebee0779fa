"""Hypothesis strategies: whole run logs with declarations, dead trials, failed metrics,
labels, booleans, numbers over the whole double range (subnormals, -0.0, the extremes, the
non-finite strings), undeclared outputs, late run.started and closes."""

from __future__ import annotations

import math
import sys
from typing import Any

from hypothesis import strategies as st

from events.codec import encode
from events.models import INT_LIMIT, InputEvent
from tests import builders

METRICS = {"reward": ("score", "extra"), "judge": ("pass",), "usage": ("tokens",)}
KINDS = ("continuous", "discrete", "boolean", "label", "model")

LARGEST = sys.float_info.max
EXTREMES = (LARGEST, -LARGEST, 1e308, -1e308, 1e155, -1e155, 5e-324, -5e-324, sys.float_info.min, -0.0)
"""Doubles where arithmetic overflows (squares from 1.35e154 on, sums near the largest
double), underflows (subnormals) or keeps a sign (-0.0)."""
NONFINITE = ("NaN", "Infinity", "-Infinity", math.nan, math.inf, -math.inf)
"""As the wire spells them, and as a harness's Python floats."""

moderate_values = st.one_of(
    st.sampled_from([0.0, 1.0, 0.5, 0.25, 1, 0, True, False, None, "yes", math.nan, math.inf]),
    st.floats(min_value=-2, max_value=3, allow_nan=False),
)
"""Values whose sums round alike in any order: for laws about order, which the whole double
range breaks (1e308 + 1e308 - 1e308 is Infinity, 1e308 - 1e308 + 1e308 is 1e308)."""
values = st.one_of(
    moderate_values,
    st.sampled_from((*EXTREMES, *NONFINITE)),
    st.floats(allow_subnormal=True),
    st.integers(-INT_LIMIT, INT_LIMIT - 1),
)
cancelling_values = st.sampled_from([1e16, -1e16, 1.0, 1e308, -1e308])
"""Values whose sums depend on their order and on the compensation (1e16 + 1 - 1e16 is 0.0
added plainly, 1.0 compensated), for laws that fix an order and a summation."""
weights = st.one_of(
    st.sampled_from([1.0, 2.0, 0.5, 0.0, -0.0, 1e308, 5e-324]), st.floats(allow_nan=False, allow_infinity=False)
)


@st.composite
def view_specs(draw: st.DrawFn, weight_values: st.SearchStrategy[float] = weights) -> list[dict[str, Any]]:
    keys = [(metric, output) for metric, outputs in METRICS.items() for output in outputs]
    signals = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=3))
    return [
        {
            "name": draw(st.sampled_from(["quality", "overall"])),
            "reducer": draw(st.sampled_from(["single", "all", "any", "mean", "weighted"])),
            "signals": [{"metric": m, "output": o, "weight": draw(weight_values)} for m, o in signals],
        }
    ]


@st.composite
def run_logs(
    draw: st.DrawFn,
    *,
    unique_scores: bool = False,
    run_id: str = "run",
    output_values: st.SearchStrategy[Any] = values,
    weight_values: st.SearchStrategy[float] = weights,
    late: bool = False,
    shared_trials: bool = False,
) -> list[InputEvent]:
    """A run's log in order, ending with run.closed. With `unique_scores`, no two scores
    share (task, trial, metric), so that no figure depends on which of them is later. With
    `late`, the run.closed comes anywhere (the events after it are late: each makes a new
    revision), now and then a second one follows (ignored), and now and then none does; now
    and then a second run.started comes anywhere, and an event reuses an earlier one's
    event_id with another body. With `shared_trials`, some trial ids are used by several tasks."""
    tasks = [f"t{i}" for i in range(draw(st.integers(1, 4)))]
    events: list[InputEvent] = []
    seen: set[tuple[str, str, str]] = set()
    for _ in range(draw(st.integers(0, 30))):
        task = draw(st.sampled_from(tasks))
        trial = f"{'shared' if shared_trials and draw(st.booleans()) else task}-{draw(st.integers(0, 3))}"
        if draw(st.integers(0, 5)) == 0:
            status = draw(st.sampled_from(["completed", "failed"]))
            error_type = draw(st.sampled_from([None, "SandboxTimeout", "AgentCrash"]))
            events.append(builders.trial(task, trial, status, error_type=error_type, run_id=run_id))
            continue
        metric = draw(st.sampled_from(sorted(METRICS)))
        if unique_scores and (task, trial, metric) in seen:
            continue
        seen.add((task, trial, metric))
        status = draw(st.sampled_from(["completed", "partial", "trial", "metric"]))
        if status in ("trial", "metric"):
            events.append(builders.score(task, trial, metric, status="failed", failure=status, run_id=run_id))
        else:
            names = draw(st.lists(st.sampled_from(METRICS[metric]), unique=True))
            outputs = {name: draw(output_values) for name in names}
            events.append(builders.score(task, trial, metric, outputs, status=status, run_id=run_id))
    if draw(st.booleans()):
        declared = draw(st.lists(st.sampled_from([*tasks, "never-ran"]), unique=True, min_size=1))
        specs = []
        for task in declared:
            kinds = {
                f"{metric}.{output}": draw(st.sampled_from(KINDS))
                for metric, outputs in METRICS.items()
                for output in outputs
                if draw(st.booleans())
            }
            views = draw(view_specs(weight_values)) if draw(st.booleans()) else []
            specs.append(builders.task_spec(task, kinds, views))
        start = builders.started(
            run_id,
            specs,
            attempts_per_task=draw(st.integers(1, 4)),
            harbor_rules=draw(st.sampled_from([None, "0.26", "0.25"])),
        )
        events.insert(draw(st.integers(0, len(events))), start)
    if not late:
        return [*events, builders.closed(run_id)]
    if draw(st.integers(0, 7)):
        reason = draw(st.sampled_from(["completed", "cancelled", "failed"]))
        events.insert(draw(st.integers(0, len(events))), builders.closed(run_id, reason))
    if draw(st.integers(0, 5)) == 0:
        events.append(builders.closed(run_id, "failed"))
    if draw(st.integers(0, 7)) == 0:  # refused, unless it comes first and the other one is
        events.insert(draw(st.integers(0, len(events))), builders.started(run_id, labels={"start": "second"}))
    if events and draw(st.integers(0, 5)) == 0:  # a redelivery by its event_id, whatever its body
        earlier = draw(st.integers(0, len(events) - 1))
        again = builders.score(
            tasks[0], "again", "reward", {"score": 1.0}, run_id=run_id, event_id=events[earlier].event_id
        )
        events.insert(draw(st.integers(earlier + 1, len(events))), again)
    return events


@st.composite
def mixed_logs(draw: st.DrawFn, runs: int = 3, late: bool = False, shared_trials: bool = False) -> bytes:
    """Up to `runs` runs (`run_logs`, given `late` and `shared_trials`) interleaved,
    redeliveries, and now and then a line that is no event, as a JSON Lines log."""
    sources = [
        draw(run_logs(run_id=f"run-{i}", late=late, shared_trials=shared_trials))
        for i in range(draw(st.integers(1, runs)))
    ]
    lines: list[bytes] = []
    while any(sources):
        source = draw(st.sampled_from([run for run in sources if run]))
        lines.append(encode(source.pop(0)))
        if draw(st.integers(0, 7)) == 0:
            lines.append(draw(st.sampled_from(lines)))
        if draw(st.integers(0, 15)) == 0:
            lines.append(draw(st.sampled_from([b"{", b"{}", b'{"type": "score.emitted"}', b"[1]"])))
    return b"\n".join(lines) + b"\n"


@st.composite
def viewed_runs(
    draw: st.DrawFn, run_id: str = "run", output_values: st.SearchStrategy[Any] = values
) -> list[InputEvent]:
    """A closed run whose every task declares a view (`view_specs`) and most of whose trials
    score every metric with all its outputs, where `run_logs` rarely gives a view every
    signal: up to 4 tasks of up to 5 trials, now and then a failed, missing or partial score
    or one given again (the later wins), the scores in any order, run.started anywhere."""
    tasks = [f"t{i}" for i in range(draw(st.integers(1, 4)))]
    specs = [
        builders.task_spec(
            task,
            {
                f"{metric}.{output}": draw(st.sampled_from(KINDS))
                for metric, outputs in METRICS.items()
                for output in outputs
            },
            draw(view_specs()),
        )
        for task in tasks
    ]
    scores: list[InputEvent] = []
    for task in tasks:
        for number in range(draw(st.integers(1, 5))):
            for metric, outputs in METRICS.items():
                for _ in range(draw(st.sampled_from([1, 1, 1, 1, 1, 0, 2]))):
                    status = draw(
                        st.sampled_from(["completed", "completed", "completed", "partial", "trial", "metric"])
                    )
                    if status in ("trial", "metric"):
                        scores.append(
                            builders.score(
                                task, f"{task}-{number}", metric, status="failed", failure=status, run_id=run_id
                            )
                        )
                    else:
                        values_of = {output: draw(output_values) for output in outputs}
                        scores.append(
                            builders.score(task, f"{task}-{number}", metric, values_of, status=status, run_id=run_id)
                        )
    events: list[InputEvent] = draw(st.permutations(scores))
    start = builders.started(run_id, specs, harbor_rules=draw(st.sampled_from([None, "0.26", "0.25"])))
    events.insert(draw(st.integers(0, len(events))), start)
    return [*events, builders.closed(run_id)]


@st.composite
def graded_runs(draw: st.DrawFn, equal_attempts: bool = False, binary: bool = False) -> list[InputEvent]:
    """A closed run of up to 12 tasks declaring `reward.score`, each with up to 8 attempts
    (passes, fails, partial credit, dead trials, NaN): many attempts per task, where pass@k
    and pass^k reach large k. With `equal_attempts`, every task has the same number. With
    `binary`, no partial credit nor NaN: each attempt passes, fails or died (Harbor's pass@k)."""
    attempt = st.sampled_from([1.0, 1.0, 0.0, None, 1, False] if binary else [1.0, 1.0, 0.0, 0.5, None, math.nan])
    size = draw(st.integers(1, 8))
    lists = st.lists(attempt, min_size=size, max_size=size) if equal_attempts else st.lists(attempt, max_size=8)
    tasks = draw(st.lists(lists, min_size=1, max_size=12))
    rules = draw(st.sampled_from([None, "0.26", "0.25"]))
    return builders.scored_run("run", {f"t{i}": values for i, values in enumerate(tasks)}, harbor_rules=rules)
