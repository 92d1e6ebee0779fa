"""SEMANTICS.md section 3: per-task verdicts in `run.summary` (pending is tested with progress)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from events.models import InputEvent
from projections.assembly.summary import summary
from tests.builders import broken, closed, dead, fold, score, started, task_spec

DEAD = object()
"""Stands for a dead trial (`failed`, `failure: "trial"`) in a list of attempts."""


def verdicts(events: Sequence[InputEvent]) -> dict[str, dict[str, str]]:
    result: dict[str, dict[str, str]] = summary(fold([*events, closed()]))["verdicts"]
    return result


def one_task(values: list[Any]) -> list[InputEvent]:
    log: list[InputEvent] = [started(tasks=[task_spec("t", {"r.s": "continuous"})])]
    for i, value in enumerate(values):
        log.append(dead("t", f"x{i}", "r") if value is DEAD else score("t", f"x{i}", "r", {"s": value}))
    return log


@pytest.mark.parametrize(
    ("values", "verdict"),
    [
        ([], "unmeasured"),
        ([1.0], "solved"),
        ([1, 1.0, 2.5], "solved"),
        ([0.0], "failed"),
        ([0.0, 0.5, 0.99], "failed"),
        ([DEAD], "failed"),
        (["NaN"], "failed"),
        ([1.0, 0.0], "flaky"),
        ([1.0, DEAD], "flaky"),
        ([DEAD, 1.0], "flaky"),
        ([1.0, "NaN"], "flaky"),
        ([True, False], "flaky"),
    ],
)
def test_verdict_of_a_list_of_attempts(values: list[Any], verdict: str) -> None:
    assert verdicts(one_task(values)) == {"t": {"r.s": verdict}}


def test_metric_failures_leave_a_key_unmeasured() -> None:
    log = [*one_task([]), broken("t", "a", "r"), broken("t", "b", "r")]
    assert verdicts(log) == {"t": {"r.s": "unmeasured"}}


def test_metric_failures_do_not_spoil_a_solved_key() -> None:
    log = [*one_task([1.0]), broken("t", "b", "r")]
    assert verdicts(log) == {"t": {"r.s": "solved"}}


def test_only_pass_at_k_eligible_keys_get_a_verdict() -> None:
    spec = task_spec("t", {"r.s": "continuous", "b.ok": "boolean", "n.steps": "discrete", "u.tok": "model"})
    log: list[InputEvent] = [
        started(tasks=[spec]),
        score("t", "a", "r", {"s": 1.0}),
        score("t", "a", "b", {"ok": False}),
        score("t", "a", "n", {"steps": 1}),
        score("t", "a", "u", {"tok": 1}),
        score("t", "a", "x", {"extra": 1.0}),
    ]
    assert verdicts(log) == {"t": {"b.ok": "failed", "r.s": "solved"}}


def test_every_task_gets_verdicts_for_its_own_keys() -> None:
    """Eligibility is run-wide; a task gets a verdict for an eligible key it has, however it got it."""
    specs = [
        task_spec("t1", {"m.x": "continuous"}),
        task_spec("t2", {"m.x": "discrete"}),
        task_spec("t3", {"m.x": "label"}),
    ]
    log: list[InputEvent] = [
        started(tasks=specs),
        score("t1", "a", "m", {"x": 0.0}),
        score("t2", "b", "m", {"x": 1}),
        score("t3", "c", "m", {"x": 1}),
        score("t4", "d", "m", {"x": 1.0}),
        dead("t4", "e", "m"),
    ]
    assert verdicts(log) == {"t1": {"m.x": "failed"}, "t2": {"m.x": "solved"}, "t3": {}, "t4": {"m.x": "flaky"}}


def test_declared_task_nothing_arrived_for_is_unmeasured_in_the_summary() -> None:
    specs = [task_spec("busy", {"r.s": "continuous"}), task_spec("idle", {"r.s": "continuous", "b.ok": "boolean"})]
    log: list[InputEvent] = [started(tasks=specs), score("busy", "a", "r", {"s": 1.0})]
    assert verdicts(log) == {"busy": {"r.s": "solved"}, "idle": {"b.ok": "unmeasured", "r.s": "unmeasured"}}


def test_no_specs_run_has_no_eligible_keys() -> None:
    assert verdicts([score("t", "a", "r", {"s": 1.0})]) == {"t": {}}


def test_verdicts_are_per_key_within_a_task() -> None:
    spec = task_spec("t", {"r.s": "continuous", "q.s": "continuous"})
    log: list[InputEvent] = [
        started(tasks=[spec]),
        score("t", "a", "r", {"s": 1.0}),
        score("t", "a", "q", {"s": 0.0}),
        score("t", "b", "r", {"s": 1.0}),
        dead("t", "b", "q"),
    ]
    assert verdicts(log) == {"t": {"q.s": "failed", "r.s": "solved"}}
