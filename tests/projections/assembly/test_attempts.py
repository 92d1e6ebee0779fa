"""SEMANTICS.md section 1: which keys a task has and what each score adds to their attempt lists."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from events.models import InputEvent
from projections.assembly.summary import summary
from tests.builders import broken, dead, fold, score, started, task_spec


def attempts(events: Sequence[InputEvent]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    result: dict[str, dict[str, list[dict[str, Any]]]] = summary(fold(events))["summary"]["task_metric_attempts"]
    return result


def pairs(attempt_list: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(attempt["trial_id"], attempt["value"]) for attempt in attempt_list]


def test_worked_example_of_section_1() -> None:
    spec = task_spec("t", {"reward.score": "continuous", "steps.count": "discrete", "usage.tokens": "model"})
    log: list[InputEvent] = [
        started(tasks=[spec]),
        score("t", "a", "reward", {"score": 0.0}),
        score("t", "a", "steps", {"count": 4}),
        score("t", "a", "usage", {"tokens": 900}),
        broken("t", "b", "reward"),
        score("t", "b", "steps", {"count": 6}),
        score("t", "b", "usage", {"tokens": 950}),
        dead("t", "c", "reward"),
        dead("t", "c", "steps"),
        dead("t", "c", "usage"),
        score("t", "d", "reward", {"score": 1.0}),
        score("t", "d", "steps", {"count": 5}),
        score("t", "d", "usage", {"tokens": 870}),
    ]
    result = attempts(log)
    assert result == {
        "t": {
            "reward.score": [
                {"trial_id": "a", "value": 0.0},
                {"trial_id": "c", "value": None},
                {"trial_id": "d", "value": 1.0},
            ],
            "steps.count": [
                {"trial_id": "a", "value": 4.0},
                {"trial_id": "b", "value": 6.0},
                {"trial_id": "c", "value": None},
                {"trial_id": "d", "value": 5.0},
            ],
        }
    }
    assert all(isinstance(a["value"], float) for a in result["t"]["steps.count"] if a["value"] is not None)


@pytest.mark.parametrize("kind", ["continuous", "discrete", "boolean"])
def test_rule_1_declared_measurable_key_exists_with_nothing_measured(kind: str) -> None:
    result = attempts([started(tasks=[task_spec("t", {"m.x": kind})]), score("t", "a", "other", {"y": "label"})])
    assert result["t"] == {"m.x": []}


@pytest.mark.parametrize(
    ("status", "value", "kept"),
    [
        ("completed", 0.5, True),
        ("partial", 0.5, True),
        ("completed", 3, True),
        ("completed", True, True),
        ("completed", False, True),
        ("completed", "NaN", True),
        ("completed", "Infinity", True),
        ("completed", "a label", False),
        ("completed", None, False),
    ],
)
def test_rule_2_undeclared_output_kept_only_with_a_semantic_value(status: str, value: Any, kept: bool) -> None:
    result = attempts(
        [
            started(tasks=[task_spec("t", {"m.x": "continuous"})]),
            score("t", "a", "m", {"x": 1, "u": value}, status=status),
        ]
    )
    assert ("m.u" in result["t"]) is kept


def test_rule_2_undeclared_output_is_decided_per_task() -> None:
    log: list[InputEvent] = [score("t1", "a", "m", {"u": None}), score("t2", "b", "m", {"u": 0.25})]
    assert attempts(log) == {"t1": {}, "t2": {"m.u": [{"trial_id": "b", "value": 0.25}]}}


@pytest.mark.parametrize("kind", ["label", "model"])
@pytest.mark.parametrize("value", [1.0, 7, True, "NaN", "free text"])
def test_rule_3_label_and_model_outputs_never_get_a_key(kind: str, value: Any) -> None:
    result = attempts([started(tasks=[task_spec("t", {"m.x": kind})]), score("t", "a", "m", {"x": value})])
    assert result == {"t": {}}


def test_rule_3_exclusion_is_per_task() -> None:
    specs = [task_spec("t1", {"m.x": "label"}), task_spec("t2", {"m.y": "continuous"})]
    log: list[InputEvent] = [started(tasks=specs), score("t1", "a", "m", {"x": 1.0}), score("t2", "b", "m", {"x": 1.0})]
    result = attempts(log)
    assert "m.x" not in result["t1"]
    assert pairs(result["t2"]["m.x"]) == [("b", 1.0)]


def test_dead_trial_adds_null_to_every_key_of_its_metric_only() -> None:
    spec = task_spec("t", {"m.x": "continuous", "m.y": "boolean", "n.z": "discrete"})
    result = attempts([started(tasks=[spec]), dead("t", "a", "m")])
    assert result["t"] == {
        "m.x": [{"trial_id": "a", "value": None}],
        "m.y": [{"trial_id": "a", "value": None}],
        "n.z": [],
    }


def test_dead_trial_before_an_undeclared_key_appears_still_counts_for_it() -> None:
    log: list[InputEvent] = [dead("t", "a", "m"), score("t", "b", "m", {"u": 0.5})]
    assert pairs(attempts(log)["t"]["m.u"]) == [("a", None), ("b", 0.5)]


def test_metric_failure_adds_nothing() -> None:
    spec = task_spec("t", {"m.x": "continuous"})
    result = attempts([started(tasks=[spec]), broken("t", "a", "m"), score("t", "b", "m", {"x": 0.0})])
    assert pairs(result["t"]["m.x"]) == [("b", 0.0)]


@pytest.mark.parametrize("outputs", [{}, {"x": None}, {"x": "a label"}, {"y": 1.0}])
def test_completed_score_without_a_semantic_value_for_the_key_adds_nothing(outputs: dict[str, Any]) -> None:
    result = attempts([started(tasks=[task_spec("t", {"m.x": "continuous"})]), score("t", "a", "m", outputs)])
    assert result["t"]["m.x"] == []


@pytest.mark.parametrize(
    ("value", "wire"),
    [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), (True, 1.0), (False, 0.0), (2, 2.0)],
)
def test_completed_score_adds_its_semantic_value(value: Any, wire: Any) -> None:
    result = attempts([started(tasks=[task_spec("t", {"m.x": "continuous"})]), score("t", "a", "m", {"x": value})])
    assert result["t"]["m.x"] == [{"trial_id": "a", "value": wire}]


def test_two_lists_of_a_task_are_aligned_by_trial_id_not_position() -> None:
    spec = task_spec("t", {"r.s": "continuous", "q.s": "continuous"})
    log: list[InputEvent] = [
        started(tasks=[spec]),
        broken("t", "a", "r"),
        score("t", "a", "q", {"s": 0.1}),
        score("t", "b", "r", {"s": 0.9}),
        score("t", "b", "q", {"s": 0.2}),
    ]
    result = attempts(log)["t"]
    assert pairs(result["q.s"]) == [("a", 0.1), ("b", 0.2)]
    assert pairs(result["r.s"]) == [("b", 0.9)]


def test_same_trial_id_twice_gives_two_attempts() -> None:
    log: list[InputEvent] = [score("t", "a", "m", {"x": 0.0}), score("t", "a", "m", {"x": 1.0})]
    assert pairs(attempts(log)["t"]["m.x"]) == [("a", 0.0), ("a", 1.0)]


def test_declared_task_nothing_arrived_for_has_every_declared_key_empty() -> None:
    spec = task_spec(
        "idle", {"r.s": "continuous", "s.n": "discrete", "b.ok": "boolean", "u.t": "model", "v.l": "label"}
    )
    result = attempts(
        [started(tasks=[spec, task_spec("busy", {"r.s": "continuous"})]), score("busy", "a", "r", {"s": 1})]
    )
    assert result["idle"] == {"b.ok": [], "r.s": [], "s.n": []}


def test_attempts_follow_log_order_of_the_task() -> None:
    log: list[InputEvent] = [
        score("t", trial, "m", {"x": value}) for trial, value in [("c", 0.3), ("a", 0.1), ("b", 0.2)]
    ]
    assert pairs(attempts(log)["t"]["m.x"]) == [("c", 0.3), ("a", 0.1), ("b", 0.2)]
