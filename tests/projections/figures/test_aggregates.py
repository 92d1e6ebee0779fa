"""SEMANTICS.md sections 4 and 5: range aggregates (metric outputs, views), coverage and counts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.models import InputEvent
from projections.assembly.summary import summary
from projections.figures.aggregates import Growing, range_aggregate
from tests.builders import broken, dead, fold, score, started, task_spec, trial

STATS = ("sum", "mean", "min", "max", "variance", "std_dev", "sample_variance", "sample_std_dev", "percentiles")


def body(events: Sequence[InputEvent]) -> dict[str, Any]:
    result: dict[str, Any] = summary(fold(events))["summary"]
    return result


def scores(events: Sequence[InputEvent]) -> dict[str, dict[str, Any]]:
    return {record["name"]: record for record in body(events)["scores"]}


def values_of(values: list[Any]) -> list[InputEvent]:
    """One task, one metric `m` with output `x` taking `values` in log order."""
    log: list[InputEvent] = [started(tasks=[task_spec("t", {"m.x": "continuous"})])]
    return log + [score("t", f"r{i}", "m", {"x": v}) for i, v in enumerate(values)]


def section_1_example() -> list[InputEvent]:
    spec = task_spec("t", {"reward.score": "continuous", "steps.count": "discrete", "usage.tokens": "model"})
    log: list[InputEvent] = [started(tasks=[spec])]
    rows = [("a", 0.0, 4, 900), ("b", "broken", 6, 950), ("c", "dead", "dead", "dead"), ("d", 1.0, 5, 870)]
    for trial_id, *values in rows:
        keys = [("reward", "score"), ("steps", "count"), ("usage", "tokens")]
        for (metric, output), value in zip(keys, values, strict=True):
            log.append(failed_score(trial_id, metric, value) or score("t", trial_id, metric, {output: value}))
    return log


def failed_score(trial_id: str, metric: str, value: Any) -> InputEvent | None:
    """Task t's failed score when `value` is "dead" or "broken", else None."""
    if value == "dead":
        return dead("t", trial_id, metric)
    return broken("t", trial_id, metric) if value == "broken" else None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("reward.score", {"count": 2, "nan_count": 2, "sum": 1.0, "mean": 0.5, "min": 0.0, "max": 1.0,
                          "variance": 0.25, "sample_variance": 0.5}),
        ("steps.count", {"count": 3, "nan_count": 1, "sum": 15.0, "mean": 5.0, "min": 4.0, "max": 6.0,
                         "variance": 2 / 3, "sample_variance": 1.0}),
        ("usage.tokens", {"count": 3, "nan_count": 1, "sum": 2720.0, "mean": 2720 / 3, "min": 870.0, "max": 950.0,
                          "variance": 29400 / 27, "sample_variance": 29400 / 18}),
    ],
)  # fmt: skip
def test_metric_output_aggregates_of_the_section_1_example(name: str, expected: dict[str, float]) -> None:
    """Totals: 4 scores per metric; values are the numeric outputs of completed scores (usage too)."""
    record = scores(section_1_example())[name]
    assert record["score_type"] == "range"
    assert (record["count"], record["nan_count"]) == (expected["count"], expected["nan_count"])
    assert {stat: record[stat] for stat in expected} == pytest.approx(expected)
    assert record["std_dev"] == pytest.approx(expected["variance"] ** 0.5)
    assert record["sample_std_dev"] == pytest.approx(expected["sample_variance"] ** 0.5)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([7.0], [7.0] * 10),
        ([10.0, 20.0], [10.0, 10.0, 10.0, 12.0, 15.0, 18.0, 20.0, 20.0, 20.0, 20.0]),
        ([3.0, 1.0, 2.0], [1.0, 1.0, 1.2, 1.6, 2.0, 2.4, 2.8, 3.0, 3.0, 3.0]),
        ([4.0, 2.0, 3.0, 1.0], [1.0, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.0, 4.0]),
    ],
)
def test_percentile_rule(values: list[float], expected: list[float]) -> None:
    record = scores(values_of(values))["m.x"]
    names = [f"p{p}" for p in range(10, 101, 10)]
    assert record["percentiles"] == pytest.approx(dict(zip(names, expected, strict=True)))
    assert record["median"] == record["percentiles"]["p50"]


def test_only_finite_numeric_values_in_completed_or_partial_scores_count() -> None:
    log = values_of([1.0, "NaN", "Infinity", "-Infinity", True, "label", None])
    log += [score("t", "p", "m", {"x": 3.0}, status="partial"), score("u", "q", "m", {"x": 5.0})]
    log += [score("u", "s", "m", {"y": 1.0}), dead("t", "d", "m"), broken("u", "e", "m")]
    record = scores(log)["m.x"]
    assert (record["count"], record["nan_count"]) == (3, 9)
    assert (record["sum"], record["min"], record["max"]) == (9.0, 1.0, 5.0)


def test_sums_are_compensated_as_python_3_12_sum() -> None:
    """1e16 + 1.0 loses the 1.0, which the compensation keeps: a plain sum gives 0.0, mean 0.0."""
    record = scores(values_of([1e16, 1.0, -1e16]))["m.x"]
    assert (record["sum"], record["mean"]) == (1.0, 1 / 3)
    assert scores(values_of([0.1, 0.2, 0.3]))["m.x"]["sum"] == 0.6  # plain: 0.6000000000000001


def test_variance_adds_the_squares_with_the_compensated_sum() -> None:
    """Mean 0.0; squares 2**52, 2**52, then eight 1.0s, each lost by a plain sum at 2**53 (ties
    to even), so a plain variance would be 2**53 / 10."""
    record = scores(values_of([2.0**26, -(2.0**26)] + [1.0, -1.0] * 4))["m.x"]
    assert (record["mean"], record["variance"], record["sample_variance"]) == (0.0, (2**53 + 8) / 10, (2**53 + 8) / 9)


def test_one_value_has_no_sample_variance() -> None:
    record = scores(values_of([2.5]))["m.x"]
    assert [record[stat] for stat in STATS[4:8]] == [0.0, 0.0, None, None]


def test_declared_and_seen_outputs_all_get_an_aggregate_nulls_without_finite_values() -> None:
    spec = task_spec("t", {"m.x": "continuous", "m.l": "label", "n.y": "model"})
    log: list[InputEvent] = [started(tasks=[spec]), score("t", "a", "m", {"x": 1.0, "note": "t"}), dead("t", "b", "m")]
    records = scores(log)
    assert [name for name in records if ".pass@" not in name] == ["m.l", "m.note", "m.x", "n.y"]
    for name, nan_count in [("m.l", 2), ("m.note", 2), ("n.y", 0)]:
        assert (records[name]["count"], records[name]["nan_count"]) == (0, nan_count)
        assert [records[name][stat] for stat in (*STATS, "median")] == [None] * 10


def test_nan_count_is_never_below_zero() -> None:
    assert range_aggregate("x", [1.0, 2.0, 3.0], 1)["nan_count"] == 0


def test_score_order_metric_outputs_then_views_then_pass_at_k() -> None:
    view = {"name": "b-view", "reducer": "single", "signals": [{"metric": "a", "output": "z"}]}
    views = [view, {**view, "name": "a-view"}]
    spec = task_spec("t", {"a-b.x": "continuous", "a.z": "continuous", "a.y": "discrete"}, views)
    log: list[InputEvent] = [started(tasks=[spec]), score("t", "r", "a", {"z": 1, "y": 2})]
    log.append(score("t", "r", "a-b", {"x": 0}))
    names = [record["name"] for record in body(log)["scores"]]
    assert names == ["a.y", "a.z", "a-b.x", "view.a-view", "view.b-view", "a-b.x.pass@1", "a.z.pass@1"]


def view_log(reducer: str, outputs: list[tuple[str, Any]], weights: Sequence[float] = (2.0, 1.0)) -> list[InputEvent]:
    """Task t, view v over signals (a.x, weights[0]) and (b.y, weights[1]); trial r emits `outputs` in order."""
    signals = [{"metric": m, "output": o, "weight": w} for m, o, w in zip("ab", "xy", weights, strict=True)]
    view = {"name": "v", "reducer": reducer, "signals": signals}
    log: list[InputEvent] = [started(tasks=[task_spec("t", {"a.x": "continuous", "b.y": "continuous"}, [view])])]
    for key, value in outputs:
        metric, output = key.split(".")
        log.append(failed_score("r", metric, value) or score("t", "r", metric, {output: value}))
    return log


@pytest.mark.parametrize(
    ("reducer", "expected"), [("single", 0.5), ("all", 0.5), ("any", 1.0), ("mean", 0.75), ("weighted", 2 / 3)]
)
def test_view_reducers(reducer: str, expected: float) -> None:
    record = scores(view_log(reducer, [("a.x", 0.5), ("b.y", 1.0)]))["view.v"]
    assert (record["count"], record["nan_count"], record["mean"]) == (1, 0, pytest.approx(expected))


@pytest.mark.parametrize(
    ("reducer", "outputs", "weights"),
    [
        ("single", [("a.x", 0.5)], (1.0, 1.0)),
        ("any", [("a.x", 0.5), ("b.y", "broken")], (1.0, 1.0)),
        ("any", [("a.x", 0.5), ("b.y", "dead")], (1.0, 1.0)),
        ("all", [("a.x", 0.5), ("b.y", "a label")], (1.0, 1.0)),
        ("all", [("a.x", 0.5), ("b.y", None)], (1.0, 1.0)),
        ("single", [("a.x", 0.5), ("b.z", 1.0)], (1.0, 1.0)),
        ("mean", [("a.x", "NaN"), ("b.y", "Infinity")], (1.0, 1.0)),
        ("weighted", [("a.x", 0.5), ("b.y", 1.0)], (1.0, -1.0)),
        ("weighted", [("a.x", 0.5), ("b.y", 1.0)], (0.0, 0.0)),
    ],
)
def test_view_skips_count_in_total_only(reducer: str, outputs: list[tuple[str, Any]], weights: Sequence[float]) -> None:
    record = scores(view_log(reducer, outputs, weights))["view.v"]
    assert (record["count"], record["nan_count"], record["mean"]) == (0, 1, None)


@pytest.mark.parametrize(
    ("reducer", "outputs", "expected"),
    [
        ("mean", [("a.x", "NaN"), ("b.y", 0.5)], 0.5),
        ("any", [("a.x", True), ("b.y", False)], 1.0),
        ("all", [("a.x", True), ("b.y", False)], 0.0),
        ("single", [("a.x", 0.2), ("a.x", 0.8), ("b.y", 0.0)], 0.8),
        ("single", [("a.x", 0.8), ("a.x", "broken"), ("b.y", 0.0)], 0.8),
        ("single", [("a.x", 0.8), ("a.x", "dead"), ("b.y", 0.0)], 0.8),
        ("weighted", [("b.y", 0.4), ("a.x", 0.1), ("b.y", 0.7)], 0.3),
    ],
)
def test_view_signal_values(reducer: str, outputs: list[tuple[str, Any]], expected: float) -> None:
    assert scores(view_log(reducer, outputs))["view.v"]["mean"] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("reducer", "values", "weights", "expected"),
    [
        ("mean", (1e16, 1.0, -1e16), (1.0, 1.0, 1.0), 1 / 3),  # plain: 0.0
        ("weighted", (1.0, 1.0, 1.0), (1e16, 1.0, -1e16), 1.0),  # plain: sum(w) = 0.0, skipped
    ],
)
def test_view_mean_and_weighted_add_with_the_compensated_sum(
    reducer: str, values: Sequence[float], weights: Sequence[float], expected: float
) -> None:
    metrics = ("a", "b", "c")
    signals = [{"metric": m, "output": "x", "weight": w} for m, w in zip(metrics, weights, strict=True)]
    view = {"name": "v", "reducer": reducer, "signals": signals}
    spec = task_spec("t", {f"{m}.x": "continuous" for m in metrics}, [view])
    log: list[InputEvent] = [started(tasks=[spec])]
    log += [score("t", "r", m, {"x": v}) for m, v in zip(metrics, values, strict=True)]
    record = scores(log)["view.v"]
    assert (record["count"], record["mean"]) == (1, expected)


def test_view_total_counts_distinct_trials_of_declaring_tasks() -> None:
    view = {"name": "v", "reducer": "single", "signals": [{"metric": "m", "output": "x"}]}
    specs = [task_spec("t1", {"m.x": "continuous"}, [view]), task_spec("t2", {}, [view]), task_spec("t3")]
    log: list[InputEvent] = [started(tasks=specs), score("t1", "r1", "m", {"x": 0.2}), score("t1", "r1", "n", {"y": 1})]
    log += [dead("t1", "r2", "m"), score("t2", "r3", "m", {"x": 0.4}), score("t3", "r4", "m", {"x": 9.0})]
    log += [score("t4", "r5", "m", {"x": 9.0}), trial("t1", "r6")]
    record = scores(log)["view.v"]
    assert (record["count"], record["nan_count"], record["sum"]) == (2, 1, pytest.approx(0.6))


def test_metric_coverage_of_the_section_1_example() -> None:
    assert body(section_1_example())["metric_coverage"] == {
        "reward": {"score": {"total": 4, "scored": 2, "failed": 2, "missing": 0}},
        "steps": {"count": {"total": 4, "scored": 3, "failed": 1, "missing": 0}},
        "usage": {"tokens": {"total": 4, "scored": 3, "failed": 1, "missing": 0}},
    }


def test_metric_coverage_counts_carriers_of_any_value() -> None:
    spec = task_spec("t", {"m.x": "continuous", "m.l": "label", "n.z": "discrete"})
    log: list[InputEvent] = [started(tasks=[spec]), score("t", "a", "m", {"x": 1.0, "l": "yes"})]
    log += [score("t", "b", "m", {"x": None}), score("u", "c", "m", {"l": "no", "u": "text"}, status="partial")]
    log += [score("t", "d", "m", {}), dead("t", "e", "m"), broken("u", "f", "m")]
    assert body(log)["metric_coverage"] == {
        "m": {
            "l": {"total": 6, "scored": 2, "failed": 2, "missing": 2},
            "u": {"total": 6, "scored": 1, "failed": 2, "missing": 3},
            "x": {"total": 6, "scored": 2, "failed": 2, "missing": 2},
        },
        "n": {"z": {"total": 0, "scored": 0, "failed": 0, "missing": 0}},
    }


def test_counts() -> None:
    specs = [task_spec("t1", {"m.x": "continuous"}), task_spec("t2"), task_spec("idle")]
    log: list[InputEvent] = [started(tasks=specs), score("t1", "a", "m", {"x": 1.0}), score("t1", "a", "n", {"y": 1.0})]
    log += [dead("t1", "b", "m"), broken("t2", "a", "m"), score("extra", "c", "m", {"x": 0.0}), trial("t2", "z")]
    counts = {key: body(log)[key] for key in ("task_count", "trial_count", "score_count")}
    assert counts == {"task_count": 3, "trial_count": 3, "score_count": 5}


VALUES = st.lists(
    st.floats() | st.sampled_from([0.0, -0.0, 1.0, -1.0, 1e308, -1e308, 5e-324, float("inf")]), max_size=150
)


@given(VALUES, st.data())
def test_an_aggregate_grown_piece_by_piece_is_the_aggregate_of_all_values(
    values: list[float], data: st.DataObject
) -> None:
    """A late value's aggregate, from values kept sorted and summed (`Growing`): the record
    of all the values at once, byte for byte (-0.0 and 0.0 keep their order among the
    sorted values, a percentile that lands on a zero takes the same sign)."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(values)), max_size=5)))
    total = len(values) + data.draw(st.integers(0, 3))
    growing = Growing()
    for start, end in zip([0, *cuts], [*cuts, len(values)], strict=True):
        growing.extend(values[start:end])
        expected = range_aggregate("m.x", values[:end], total)
        assert orjson.dumps(growing.aggregate("m.x", total)) == orjson.dumps(expected)


def test_a_zero_of_either_sign_keeps_its_place_among_the_sorted_values() -> None:
    """p50 of [0.0, -0.0, 1.0] is the first zero in log order; a late -0.0 goes after both."""
    growing = Growing()
    growing.extend([0.0, -0.0, 1.0])
    assert repr(growing.aggregate("m.x", 3)["percentiles"]["p10"]) == "0.0"
    growing.extend([-0.0])
    assert [repr(value) for value in growing.ordered] == ["0.0", "-0.0", "-0.0", "1.0"]
