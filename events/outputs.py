"""The v1 output events: `run.summary` and `run.progress` (EVENTS.md, "Output events").

The worker and replay build these payloads as plain JSON-ready data for speed (see
`projections.assembly.summary`); these models are their contract: the JSON Schema subscribers
read, and what the tests validate every produced payload against.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from events.models import CloseReason, Record, RunId

SUMMARY_MAX_BYTES = 64 * 1024 * 1024
"""Largest summary message: a 200,000-attempt run's summary is ~20 MB of JSON (zstd on the wire)."""

WireFloat = float | Literal["NaN", "Infinity", "-Infinity"]


class Percentiles(Record):
    p10: WireFloat
    p20: WireFloat
    p30: WireFloat
    p40: WireFloat
    p50: WireFloat
    p60: WireFloat
    p70: WireFloat
    p80: WireFloat
    p90: WireFloat
    p100: WireFloat


class RangeAggregate(Record):
    """Statistics of the finite values among `count + nan_count` (null when none is finite).
    They are finite, except where the arithmetic overflows (SEMANTICS.md section 4): a sum
    past the largest double is "Infinity", and what follows from it is IEEE's ("NaN" for
    Infinity - Infinity)."""

    name: str
    score_type: Literal["range"]
    count: int
    nan_count: int
    sum: WireFloat | None
    mean: WireFloat | None
    min: float | None
    max: float | None
    variance: WireFloat | None
    std_dev: WireFloat | None
    sample_variance: WireFloat | None
    sample_std_dev: WireFloat | None
    percentiles: Percentiles | None
    median: WireFloat | None


class Coverage(Record):
    total: int
    scored: int
    failed: int
    missing: int


class Attempt(Record):
    trial_id: str
    value: WireFloat | None


class AgentEvalSummary(Record):
    """Field for field the NeMo evaluator SDK's `AgentEvalSummary` (SEMANTICS.md)."""

    scores: list[RangeAggregate]
    metric_coverage: dict[str, dict[str, Coverage]]
    task_metric_attempts: dict[str, dict[str, list[Attempt]]]
    task_count: int
    trial_count: int
    score_count: int


class HarborStats(Record):
    n_trials: int
    n_errors: int
    reward_stats: dict[str, dict[str, list[str]]]
    exception_stats: dict[str, list[str]]
    pass_at_k: dict[str, dict[str, float]]


Verdict = Literal["solved", "flaky", "failed", "unmeasured"]


class Interval(Record):
    """One k of pass@k or pass^k (SEMANTICS.md section 8): the per-task figures' count,
    nan_count and mean, their standard error clustered by task, and the 95% interval."""

    k: int = Field(ge=1)
    count: int
    nan_count: int
    mean: float | None
    stderr: float | None
    """Null below two tasks."""
    ci95_low: float | None
    """mean - t * stderr clipped to [0, 1], t from Student's t with count - 1 degrees of freedom."""
    ci95_high: float | None


class KeyStatistics(Record):
    tasks: int
    """Measured tasks."""
    pass_at_k: list[Interval]
    """k = 1..largest n; count, nan_count and mean are the summary's `<key>.pass@<k>`'s."""
    pass_hat_k: list[Interval]
    """pass^k: the chance that k attempts drawn from a task's n all pass, k = 1..largest n."""


class RunSummary(Record):
    schema_version: Literal[1]
    type: Literal["run.summary"]
    run_id: RunId
    revision: int = Field(ge=1)
    closed_reason: CloseReason
    labels: dict[str, str]
    event_count: int
    summary: AgentEvalSummary
    harbor: HarborStats
    verdicts: dict[str, dict[str, Verdict]]
    statistics: dict[str, KeyStatistics]


class TaskCounts(Record):
    declared: int
    with_attempts: int
    """Tasks with at least one attempt in some key."""
    pending: int


class TrialCounts(Record):
    finished: int
    failed: int
    expected: int | None
    """attempts_per_task x declared tasks, when run.started gave attempts_per_task."""
    percent_done: float | None


class PassAtK(Record):
    mean: float
    count: int
    nan_count: int


class VerdictCounts(Record):
    solved: int
    flaky: int
    failed: int
    unmeasured: int
    pending: int


class RunProgress(Record):
    schema_version: Literal[1]
    type: Literal["run.progress"]
    run_id: RunId
    seq: int = Field(ge=1)
    """Increasing per run: the worker and replay use the number of events applied so far."""
    status: Literal["open", "closed"]
    event_count: int
    tasks: TaskCounts
    trials: TrialCounts
    scores_applied: int
    pass_at_k: dict[str, dict[str, PassAtK]]
    """key -> k -> figures; exactly the summary's `<key>.pass@<k>` mean, count and nan_count."""
    statistics: dict[str, KeyStatistics]
    """What the summary's `statistics` would say for the events applied so far."""
    verdicts: dict[str, VerdictCounts]
    eta_seconds: float | None
    """From the span of the events' `occurred_at` (or the caller's clock) and the trials left."""


OutputEvent = RunSummary | RunProgress
