"""EVENTS.md run rules and SEMANTICS.md task sets: redelivery, run.started, run.closed, revisions, counts, order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from events.codec import decode, encode, from_object
from events.models import MOMENT, InputEvent
from projections.assembly.progress import progress
from projections.assembly.summary import summary
from projections.fold.run import Outcome, RunState, apply
from tests.builders import broken, closed, dead, fold, score, started, task_spec, trial
from tests.projections.assembly.test_incremental import restored


def body(events: Sequence[InputEvent]) -> dict[str, Any]:
    result: dict[str, Any] = summary(fold(events))["summary"]
    return result


def a_log() -> list[InputEvent]:
    return [
        started(tasks=[task_spec("t", {"r.s": "continuous", "u.n": "model"})], labels={"model": "m"}),
        trial("t", "a"), score("t", "a", "r", {"s": 1.0}), score("t", "a", "u", {"n": 7}),
        trial("t", "b", "failed", error_type="Crash"), dead("t", "b", "r"), broken("t", "c", "r"),
        score("x", "d", "r", {"s": 0.5}), closed(reason="cancelled"),
    ]  # fmt: skip


@pytest.mark.parametrize("index", range(9))
def test_a_redelivery_changes_nothing(index: int) -> None:
    log = a_log()
    run = fold(log)
    before = summary(run)
    assert apply(run, log[index]).outcome is Outcome.REDELIVERY
    assert summary(run) == before


def test_redeliveries_anywhere_in_the_log_change_nothing() -> None:
    log = a_log()
    doubled = [event for event in log for _ in range(2)]
    assert summary(fold(doubled)) == summary(fold(log))
    assert summary(fold(doubled))["event_count"] == 9


def test_same_trial_id_twice_is_two_attempts_and_two_scores() -> None:
    log: list[InputEvent] = [score("t", "a", "r", {"s": 0.0}), score("t", "a", "r", {"s": 0.0})]
    result = body(log)
    assert result["task_metric_attempts"]["t"]["r.s"] == [{"trial_id": "a", "value": 0.0}] * 2
    assert (result["score_count"], result["trial_count"]) == (2, 1)


def test_a_second_run_started_with_another_event_id_is_refused() -> None:
    first = started(tasks=[task_spec("t", {"r.s": "continuous"})], labels={"v": "1"})
    run = fold([first, score("t", "a", "r", {"s": 1.0})])
    before = summary(run)
    second = started(tasks=[task_spec("other", {"q.z": "discrete"})], labels={"v": "2"})
    assert apply(run, second).outcome is Outcome.REFUSED
    assert apply(run, first).outcome is Outcome.REDELIVERY
    assert summary(run) == before
    assert before["event_count"] == 2


def test_run_started_after_scores_applies_its_declarations() -> None:
    specs = [
        task_spec("t2", {"r.s": "continuous", "u.tok": "model", "j.verdict": "label"}),
        task_spec("t1", {"r.s": "continuous", "s.n": "discrete"}),
        task_spec("idle", {"b.ok": "boolean"}),
    ]
    log: list[InputEvent] = [
        score("t1", "a", "r", {"s": 1.0}),
        score("t2", "b", "u", {"tok": 900}),
        score("t2", "b", "j", {"verdict": 1.0}),
        score("x", "c", "r", {"s": 0.0}),
        score("t1", "a", "z", {"w": 0.5}),
        dead("t2", "b", "r"),
        started(tasks=specs, labels={"bench": "b1"}),
    ]
    run = summary(fold([*log, closed()]))
    attempts = run["summary"]["task_metric_attempts"]
    assert list(attempts) == ["t2", "t1", "idle", "x"]
    assert attempts["t2"] == {"r.s": [{"trial_id": "b", "value": None}]}
    assert attempts["t1"] == {
        "r.s": [{"trial_id": "a", "value": 1.0}],
        "s.n": [],
        "z.w": [{"trial_id": "a", "value": 0.5}],
    }
    assert attempts["idle"] == {"b.ok": []}
    assert attempts["x"] == {"r.s": [{"trial_id": "c", "value": 0.0}]}
    assert run["summary"]["task_count"] == 3
    assert run["labels"] == {"bench": "b1"}
    assert run["verdicts"] == {
        "t2": {"r.s": "failed"},
        "t1": {"r.s": "solved"},
        "idle": {"b.ok": "unmeasured"},
        "x": {"r.s": "failed"},
    }
    passk = {r["name"]: (r["count"], r["nan_count"]) for r in run["summary"]["scores"] if ".pass@" in r["name"]}
    assert passk == {"r.s.pass@1": (3, 0)}


def test_events_after_run_closed_are_applied_as_new_revisions() -> None:
    run = fold([score("t", "a", "r", {"s": 0.0}), closed()])
    assert (summary(run)["revision"], summary(run)["event_count"]) == (1, 2)
    late = score("t", "b", "r", {"s": 1.0})
    steps: list[tuple[int, InputEvent]] = [(2, late), (3, trial("t", "b")), (3, late), (4, dead("t", "c", "r"))]
    for revision, event in steps:
        apply(run, event)
        assert summary(run)["revision"] == revision
    assert summary(run)["event_count"] == 5
    assert [a["value"] for a in summary(run)["summary"]["task_metric_attempts"]["t"]["r.s"]] == [0.0, 1.0, None]


def test_the_revision_counts_the_events_positioned_after_the_close_whenever_they_were_applied() -> None:
    # A state folded out of log order (the worker's, restored in parts): events at later
    # positions than the close's count toward the revision even when applied before it.
    run = RunState("r")
    for position, event in [(1, score("t", "a", "r", {"s": 0.0})), (5, score("t", "b", "r", {"s": 1.0}))]:
        apply(run, event, position)
    apply(run, closed(), 3)
    assert summary(run)["revision"] == 2
    apply(run, trial("t", "b"), 4)
    assert summary(run)["revision"] == 3
    apply(run, trial("t", "c"), 2)  # before the close: no new revision
    assert summary(run)["revision"] == 3
    assert summary(restored(run))["revision"] == 3


def test_a_second_run_closed_is_ignored() -> None:
    run = fold([score("t", "a", "r", {"s": 0.0}), closed(reason="failed")])
    assert apply(run, closed(reason="completed")).outcome is Outcome.IGNORED
    result = summary(run)
    assert (result["closed_reason"], result["event_count"], result["revision"]) == ("failed", 2, 1)


def test_closed_reason_and_labels_default() -> None:
    result = summary(fold([score("t", "a", "r", {"s": 0.0}), closed()]))
    assert (result["closed_reason"], result["labels"]) == ("completed", {})


def test_event_count_counts_distinct_applied_events() -> None:
    first = started(tasks=[task_spec("t")])
    log: list[InputEvent] = [first, trial("t", "a"), first, started(tasks=[]), closed(), closed()]
    assert summary(fold(log))["event_count"] == 3


def test_no_specs_run_uses_rule_2_only() -> None:
    log: list[InputEvent] = [
        score("b", "1", "r", {"s": 1.0, "note": "text", "empty": None}),
        score("a", "2", "r", {"s": True}),
        dead("a", "3", "r"),
        broken("c", "4", "q"),
        trial("only-trial", "5"),
    ]
    run = summary(fold([*log, closed()]))
    assert run["summary"]["task_metric_attempts"] == {
        "b": {"r.s": [{"trial_id": "1", "value": 1.0}]},
        "a": {"r.s": [{"trial_id": "2", "value": 1.0}, {"trial_id": "3", "value": None}]},
        "c": {},
    }
    assert (run["summary"]["task_count"], run["summary"]["trial_count"], run["summary"]["score_count"]) == (3, 4, 4)
    assert [r["name"] for r in run["summary"]["scores"]] == ["r.empty", "r.note", "r.s"]
    assert run["verdicts"] == {"b": {}, "a": {}, "c": {}}
    assert run["harbor"]["pass_at_k"] == {}


def test_task_order_is_declared_order_then_first_score() -> None:
    specs = [task_spec("z", {"r.s": "continuous"}), task_spec("m"), task_spec("a")]
    log: list[InputEvent] = [
        trial("u1", "1"),
        score("u3", "2", "r", {"s": 1.0}),
        score("a", "3", "r", {"s": 1.0}),
        score("u1", "1", "r", {"s": 1.0}),
        started(tasks=specs),
        score("u2", "4", "r", {"s": 1.0}),
        trial("u0", "5"),
    ]
    assert list(body(log)["task_metric_attempts"]) == ["z", "m", "a", "u3", "u1", "u2"]


def test_keys_within_a_task_are_sorted() -> None:
    spec = task_spec("t", {"z.a": "discrete", "a.z": "continuous", "a-b.c": "boolean", "a.b": "continuous"})
    log: list[InputEvent] = [started(tasks=[spec]), score("t", "1", "m", {"y": 1.0, "b": 2.0})]
    assert list(body(log)["task_metric_attempts"]["t"]) == ["a-b.c", "a.b", "a.z", "m.b", "m.y", "z.a"]


def test_an_event_built_without_its_moment_folds_to_the_state_a_decoded_one_does() -> None:
    """Decoding keeps an event's moment on it (`events.models.MOMENT`) for the fold; an event
    built in code without validation, or a copy, carries none and the fold reads its
    `occurred_at` itself: the same moments, the same state."""
    stamps = ["2026-11-30T12:00:00Z", "2026-11-30T13:00:30.25+01:00", None, "2016-12-31T23:59:60Z"]
    log = [
        from_object({**event.model_dump(), "occurred_at": stamps[number % len(stamps)]})
        for number, event in enumerate(a_log())
    ]
    decoded = [decode(encode(event)) for event in log]
    built = [type(event).model_construct(event.model_fields_set, **dict(event)) for event in log]
    assert all(hasattr(event, MOMENT) for event in decoded)
    assert not any(hasattr(event, MOMENT) for event in built)
    states = [fold(events) for events in (log, decoded, built)]
    first = states[0]
    for run in states[1:]:
        assert summary(run) == summary(first)
        assert progress(run, 1) == progress(first, 1)
        assert (run.first_at, run.last_at, run.span()) == (first.first_at, first.last_at, first.span())
        assert {t: (task.first_at, task.last_at) for t, task in run.tasks.items()} == {
            t: (task.first_at, task.last_at) for t, task in first.tasks.items()
        }
    assert first.span() == 1796040030.25 - 1483228800.0  # the leap second read as the next one


def test_attempts_per_task_and_occurred_at_never_change_the_summary() -> None:
    spec = [task_spec("t", {"r.s": "continuous"})]
    rest: list[InputEvent] = [score("t", "a", "r", {"s": 1.0}), dead("t", "b", "r"), closed()]
    plain = summary(fold([started(tasks=spec), *rest]))
    informed = summary(fold([started(tasks=spec, attempts_per_task=4, occurred_at="2026-01-01T00:00:00Z"), *rest]))
    assert informed == plain
