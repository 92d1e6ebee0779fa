"""Laws of the fold, checked on generated run logs (hypothesis)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from events.codec import decode, encode, encode_payload
from events.models import InputEvent
from events.nonfinite import NONFINITE_STRINGS
from events.outputs import RunProgress, RunSummary
from projections.assembly.progress import progress
from projections.assembly.summary import summary
from projections.fold.run import RunState, apply
from tests.builders import fold
from tests.strategies import graded_runs, moderate_values, run_logs


def passing(values: list[Any]) -> int:
    """How many wire attempt values pass (non-finite ones are spelled as strings)."""
    return sum(1 for value in values if value is not None and NONFINITE_STRINGS.get(value, value) >= 1.0)


def reference_passk(attempts: dict[str, dict[str, list[dict[str, Any]]]], key: str) -> dict[int, tuple[float, int]]:
    """pass@k of `key` from the summary's attempt lists, with exact binomials."""
    lists = [[a["value"] for a in keys[key]] for keys in attempts.values() if key in keys]
    measured = [(len(v), passing(v)) for v in lists if v]
    figures: dict[int, tuple[float, int]] = {}
    for k in range(1, max((n for n, _ in measured), default=0) + 1):
        per_task = [1.0 - math.comb(n - c, k) / math.comb(n, k) for n, c in measured if n >= k]
        figures[k] = (sum(per_task) / len(per_task), len(per_task))
    return figures


@given(run_logs())
def test_incremental_passk_equals_a_from_scratch_computation_after_every_event(log: list[InputEvent]) -> None:
    run = RunState("run")
    for seq, event in enumerate(log, 1):
        apply(run, event)
        live = progress(run, seq)
        RunProgress.model_validate(live)
        whole = summary(run)
        attempts = whole["summary"]["task_metric_attempts"]
        for key, by_k in live["pass_at_k"].items():
            expected = reference_passk(attempts, key)
            assert sorted(int(k) for k in by_k) == sorted(expected)
            for k, figures in by_k.items():
                mean, count = expected[int(k)]
                assert figures["count"] == count
                assert math.isclose(figures["mean"], mean, rel_tol=1e-12, abs_tol=1e-12)
        # SEMANTICS.md 7: progress says exactly what summary.scores says, to the bit.
        scores = {record["name"]: record for record in whole["summary"]["scores"]}
        for key, by_k in live["pass_at_k"].items():
            for k, figures in by_k.items():
                record = scores[f"{key}.pass@{k}"]
                assert (figures["mean"], figures["count"], figures["nan_count"]) == (
                    record["mean"],
                    record["count"],
                    record["nan_count"],
                )
        # Section 8 for progress too: the summary's statistics, byte for byte.
        assert orjson.dumps(live["statistics"]) == orjson.dumps(whole["statistics"])
        for key, counts in live["verdicts"].items():
            verdicts = [keys[key] for keys in whole["verdicts"].values() if key in keys]
            for verdict in ("solved", "flaky", "failed"):
                assert counts[verdict] == verdicts.count(verdict)
            assert counts["unmeasured"] + counts["pending"] == verdicts.count("unmeasured")


def _canonical(payload: dict[str, Any]) -> dict[str, Any]:
    """A summary with list order and float rounding taken out (what a permutation may change)."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: walk(value) for key, value in node.items()}
        if isinstance(node, list):
            return sorted(
                (walk(item) for item in node), key=lambda item: orjson.dumps(item, option=orjson.OPT_SORT_KEYS)
            )
        if isinstance(node, float):
            return round(node, 9) + 0.0  # + 0.0: -0.0 and 0.0 are one value, whichever sorted first
        return node

    canonical: dict[str, Any] = walk(orjson.loads(encode_payload(payload)))
    canonical.pop("revision")
    return canonical


MODERATE_WEIGHTS = st.sampled_from([1.0, 2.0, 0.5, 0.0])


@given(
    run_logs(unique_scores=True, output_values=moderate_values, weight_values=MODERATE_WEIGHTS),
    st.randoms(use_true_random=False),
)
def test_permuting_a_runs_events_changes_no_aggregate(log: list[InputEvent], random: Any) -> None:
    shuffled = list(log)
    random.shuffle(shuffled)
    assert _canonical(summary(fold(shuffled))) == _canonical(summary(fold(log)))


ORDER_FREE = ("name", "score_type", "count", "nan_count", "min", "max", "percentiles", "median")
"""What a range aggregate says whatever order its values come in: over the whole double
range a sum does depend on it (overflow, cancellation), so sum, mean and spread do too."""


def _order_free(payload: dict[str, Any]) -> dict[str, Any]:
    scores = payload["summary"]["scores"]
    payload["summary"]["scores"] = [{stat: record[stat] for stat in ORDER_FREE} for record in scores]
    return _canonical(payload)


@given(run_logs(unique_scores=True), st.randoms(use_true_random=False))
def test_permuting_a_runs_events_over_the_whole_double_range_changes_no_order_statistic(
    log: list[InputEvent], random: Any
) -> None:
    shuffled = list(log)
    random.shuffle(shuffled)
    assert _order_free(summary(fold(shuffled))) == _order_free(summary(fold(log)))


@given(run_logs(), st.data())
def test_redelivering_any_subset_of_events_changes_nothing(log: list[InputEvent], data: st.DataObject) -> None:
    redelivered = list(log)
    for event in data.draw(st.lists(st.sampled_from(log), max_size=10)):
        redelivered.insert(data.draw(st.integers(redelivered.index(event) + 1, len(redelivered))), event)
    assert encode_payload(summary(fold(redelivered))) == encode_payload(summary(fold(log)))


@given(run_logs())
def test_events_and_summaries_round_trip_through_json_losslessly(log: list[InputEvent]) -> None:
    for event in log:
        wire = encode(event)
        assert encode(decode(wire)) == wire
    payload = encode_payload(summary(fold(log)))
    model = RunSummary.model_validate_json(payload)
    assert orjson.loads(model.model_dump_json()) == orjson.loads(payload)


@given(run_logs())
def test_passk_is_a_probability_and_never_falls_as_k_grows(log: list[InputEvent]) -> None:
    live = progress(fold(log), 1)
    for by_k in live["pass_at_k"].values():
        means = [by_k[k]["mean"] for k in sorted(by_k, key=int)]
        assert all(0.0 <= mean <= 1.0 for mean in means)
        # Per task the estimator rises with k; across tasks, ks with fewer tasks may drop, so
        # check the per-task law on the summary's per-task inputs instead of across k means.
    whole = summary(fold(log))
    attempts = whole["summary"]["task_metric_attempts"]
    for key in live["pass_at_k"]:
        for lists in attempts.values():
            values = [a["value"] for a in lists.get(key, [])]
            n = len(values)
            c = passing(values)
            figures = [
                1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1)) if n - c >= k else 1.0
                for k in range(1, n + 1)
            ]
            assert figures == sorted(figures)


def reference_statistics(attempts: dict[str, dict[str, list[dict[str, Any]]]], key: str) -> dict[str, Any]:
    """Section 8 of `key` from the summary's attempt lists with exact rationals: per k,
    (count, mean, stderr) of pass@k and of pass^k (C(c, k) / C(n, k))."""
    lists = [[a["value"] for a in keys[key]] for keys in attempts.values() if key in keys]
    measured = [(len(v), passing(v)) for v in lists if v]

    def figures(per_task: list[Fraction]) -> tuple[int, float, float | None]:
        count = len(per_task)
        mean = sum(per_task, Fraction(0)) / count
        if count < 2:
            return count, float(mean), None
        variance = sum(((f - mean) ** 2 for f in per_task), Fraction(0)) / (count - 1)
        return count, float(mean), math.sqrt(variance / count)

    ks = range(1, max(n for n, _ in measured) + 1)
    return {
        "tasks": len(measured),
        "pass_at_k": [
            figures([1 - Fraction(math.comb(n - c, k), math.comb(n, k)) for n, c in measured if n >= k]) for k in ks
        ],
        "pass_hat_k": [
            figures([Fraction(math.comb(c, k), math.comb(n, k)) for n, c in measured if n >= k]) for k in ks
        ],
    }


@given(st.one_of(run_logs(), graded_runs()))
def test_statistics_agree_with_exact_rationals_and_their_intervals_hold_the_mean(log: list[InputEvent]) -> None:
    whole = summary(fold(log))
    attempts = whole["summary"]["task_metric_attempts"]
    eligible = {key for by_key in whole["verdicts"].values() for key in by_key}
    measured_keys = {key for key in eligible if any(keys.get(key) for keys in attempts.values())}
    assert list(whole["statistics"]) == sorted(measured_keys)
    for key, figures in whole["statistics"].items():
        reference = reference_statistics(attempts, key)
        assert figures["tasks"] == reference["tasks"]
        for name in ("pass_at_k", "pass_hat_k"):
            assert len(figures[name]) == len(reference[name])
            for entry, (count, mean, stderr) in zip(figures[name], reference[name], strict=True):
                assert entry["count"] == count
                assert math.isclose(entry["mean"], mean, rel_tol=1e-12, abs_tol=1e-12)
                assert 0.0 <= entry["mean"] <= 1.0
                if stderr is None:
                    assert (entry["stderr"], entry["ci95_low"], entry["ci95_high"]) == (None, None, None)
                    continue
                assert math.isclose(entry["stderr"], stderr, rel_tol=1e-9, abs_tol=1e-12)
                assert 0.0 <= entry["ci95_low"] <= entry["mean"] <= entry["ci95_high"] <= 1.0
        # pass^1 is pass@1 (c / n per task) up to the product forms' last bits.
        assert math.isclose(figures["pass_hat_k"][0]["mean"], figures["pass_at_k"][0]["mean"], rel_tol=1e-12)


@given(graded_runs(equal_attempts=True))
def test_pass_hat_k_never_rises_with_k_over_the_same_tasks(log: list[InputEvent]) -> None:
    """Per task each k multiplies by (c - k + 1) / (n - k + 1) <= 1, so over one task set
    (every task with the same n: none leaves as k grows) the mean never rises."""
    for figures in summary(fold(log))["statistics"].values():
        entries = figures["pass_hat_k"]
        assert len({entry["count"] for entry in entries}) == 1
        means = [entry["mean"] for entry in entries]
        # Up to the last bit of the compensated sum, which need not round monotonically.
        assert all(later <= earlier + 1e-15 for earlier, later in itertools.pairwise(means))
