"""SEMANTICS.md sections 3 (pending) and 7, EVENTS.md `run.progress`: live figures agree with the summary."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from events.codec import encode, from_object
from events.models import InputEvent
from projections.assembly.progress import progress
from projections.assembly.summary import summary
from projections.fold.run import RunState, apply
from tests.builders import broken, closed, dead, fold, score, started, task_spec, trial
from tests.projections.examples import reward, reward_tasks, section_2_example


def summary_passk(run: RunState) -> dict[str, dict[str, dict[str, Any]]]:
    """What `summary.scores` says about pass@k, in the shape of progress's `pass_at_k`."""
    figures: dict[str, dict[str, dict[str, Any]]] = {}
    for record in summary(run)["summary"]["scores"]:
        if ".pass@" in record["name"]:
            key, k = record["name"].rsplit(".pass@", 1)
            figures.setdefault(key, {})[k] = {name: record[name] for name in ("mean", "count", "nan_count")}
    return figures


def test_live_pass_at_k_of_section_2_example_with_a_pending_task() -> None:
    live = progress(fold(section_2_example()), seq=1)["pass_at_k"]
    assert list(live) == ["reward.score"]
    assert {k: (v["count"], v["nan_count"]) for k, v in live["reward.score"].items()} == {
        "1": (3, 2),
        "2": (2, 2),
        "3": (2, 2),
    }
    means = [live["reward.score"][k]["mean"] for k in ("1", "2", "3")]
    assert means == [pytest.approx(7 / 9), pytest.approx(5 / 6), 1.0]


def test_verdict_counts_with_pending_while_open_and_unmeasured_once_closed() -> None:
    run = fold(section_2_example())
    assert progress(run, 1)["verdicts"] == {
        "reward.score": {"solved": 2, "flaky": 1, "failed": 0, "unmeasured": 1, "pending": 1}
    }
    apply(run, closed())
    assert progress(run, 2)["verdicts"] == {
        "reward.score": {"solved": 2, "flaky": 1, "failed": 0, "unmeasured": 2, "pending": 0}
    }


def test_task_counts_while_open_and_once_closed() -> None:
    run = fold([*section_2_example(), trial("t5", "j", "failed"), trial("t1", "a")])
    # t5 is no longer pending: a trial of it arrived, though it has no attempt.
    assert progress(run, 1)["tasks"] == {"declared": 5, "with_attempts": 3, "pending": 0}
    run = fold(section_2_example())
    assert progress(run, 1)["tasks"] == {"declared": 5, "with_attempts": 3, "pending": 1}
    apply(run, closed())
    assert progress(run, 2)["tasks"] == {"declared": 5, "with_attempts": 3, "pending": 0}


def test_a_dead_trial_is_an_attempt_a_metric_failure_is_not() -> None:
    run = fold([reward_tasks("t1", "t2", "t3"), dead("t1", "a", "reward"), broken("t2", "b", "reward")])
    assert progress(run, 1)["tasks"] == {"declared": 3, "with_attempts": 1, "pending": 1}
    assert progress(run, 1)["verdicts"]["reward.score"] == {
        "solved": 0,
        "flaky": 0,
        "failed": 1,
        "unmeasured": 1,
        "pending": 1,
    }


def test_header_trials_and_scores() -> None:
    log = [
        reward_tasks("t1"),
        trial("t1", "a"),
        trial("t1", "b", "failed"),
        reward("t1", "a", 1),
        dead("t1", "b", "reward"),
    ]
    event = progress(fold(log), seq=7)
    assert (event["type"], event["run_id"], event["seq"], event["status"]) == ("run.progress", "run", 7, "open")
    assert (event["trials"]["finished"], event["trials"]["failed"], event["scores_applied"]) == (2, 1, 2)


def test_expected_trials_percent_done_and_eta_with_attempts_per_task() -> None:
    log = [
        reward_tasks("t1", "t2", attempts_per_task=3),
        trial("t1", "a"),
        trial("t2", "b", "failed"),
        trial("t1", "c"),
    ]
    trials = progress(fold(log), 1, elapsed=30.0)
    assert trials["trials"]["expected"] == 6
    assert trials["trials"]["percent_done"] == pytest.approx(50.0)
    assert isinstance(trials["eta_seconds"], float)
    assert trials["eta_seconds"] > 0


def test_no_expected_trials_nor_eta_without_attempts_per_task() -> None:
    event = progress(fold([reward_tasks("t1"), trial("t1", "a")]), 1, elapsed=30.0)
    assert (event["trials"]["expected"], event["trials"]["percent_done"], event["eta_seconds"]) == (None, None, None)


def test_no_specs_run_has_no_live_pass_at_k_nor_pending() -> None:
    event = progress(fold([reward("t", "a", 1.0), trial("t", "a")]), 1)
    assert (event["pass_at_k"], event["verdicts"], event["tasks"]) == (
        {},
        {},
        {"declared": 0, "with_attempts": 1, "pending": 0},
    )


def mixed_log() -> list[InputEvent]:
    """run.started late, a label output, an undeclared task, a redelivery, events after close."""
    late = reward("u", "x", 1.0)
    spec = [
        task_spec("t1", {"reward.score": "continuous", "judge.ok": "boolean"}),
        task_spec("t2", {"reward.score": "label"}),
    ]
    return [
        reward("t1", "a", 0.5), late, dead("t1", "b", "judge"), reward("t2", "c", 1.0), late,
        started(tasks=[*spec, task_spec("t3", {"judge.ok": "boolean"}), task_spec("t4", {"judge.ok": "boolean"})]),
        score("t1", "a", "judge", {"ok": True}), broken("t3", "d", "judge"), reward("t1", "e", 1),
        reward("t3", "g", 0.0), reward("v", "h", 1.0), dead("v", "i", "reward"),
        closed(), score("t3", "f", "judge", {"ok": False}), reward("u", "x", "NaN"),
    ]  # fmt: skip


@pytest.mark.parametrize("log", [section_2_example(), mixed_log()], ids=["section-2", "mixed"])
def test_live_pass_at_k_equals_summary_after_every_event(log: list[InputEvent]) -> None:
    run = RunState("run")
    for seq, event in enumerate(log, 1):
        apply(run, event)
        assert progress(run, seq)["pass_at_k"] == summary_passk(run)


@pytest.mark.parametrize("log", [section_2_example(), mixed_log()], ids=["section-2", "mixed"])
def test_live_statistics_are_the_summarys_to_the_byte_after_every_event(log: list[InputEvent]) -> None:
    """Section 8 holds for progress as section 7 says: pending tasks count as unmeasured."""
    run = RunState("run")
    for seq, event in enumerate(log, 1):
        apply(run, event)
        live = progress(run, seq)
        assert orjson.dumps(live["statistics"]) == orjson.dumps(summary(run)["statistics"])
    assert live["statistics"]["reward.score"]["pass_at_k"]


def test_live_statistics_of_section_2_example_count_a_pending_task_as_unmeasured() -> None:
    live = progress(fold(section_2_example()), seq=1)
    assert live["tasks"]["pending"] == 1
    entries = live["statistics"]["reward.score"]["pass_at_k"]
    assert [(entry["count"], entry["nan_count"]) for entry in entries] == [(3, 2), (2, 2), (2, 2)]
    assert list(live)[list(live).index("pass_at_k") + 1] == "statistics"


@pytest.mark.parametrize("log", [section_2_example(), mixed_log()], ids=["section-2", "mixed"])
def test_live_verdict_counts_count_the_summary_verdicts_after_every_event(log: list[InputEvent]) -> None:
    """Pending tasks are among the summary's unmeasured ones."""
    run = RunState("run")
    for seq, event in enumerate(log, 1):
        apply(run, event)
        expected: dict[str, dict[str, int]] = {}
        for per_key in summary(run)["verdicts"].values():
            for key, verdict in per_key.items():
                expected.setdefault(key, dict.fromkeys(("solved", "flaky", "failed", "unmeasured"), 0))[verdict] += 1
        live = progress(run, seq)["verdicts"]
        merged = {key: {**v, "unmeasured": v["unmeasured"] + v["pending"]} for key, v in live.items()}
        assert {key: {name: n for name, n in v.items() if name != "pending"} for key, v in merged.items()} == expected


def test_undeclared_keys_of_eligible_outputs_count_in_live_verdicts() -> None:
    specs = [task_spec("t1", {"m.x": "continuous"}), task_spec("t2", {"m.y": "continuous"})]
    run = fold([started(tasks=specs), score("t2", "a", "m", {"x": 0.0}), score("t9", "b", "m", {"x": 1.0})])
    assert progress(run, 1)["verdicts"] == {
        "m.x": {"solved": 1, "flaky": 0, "failed": 1, "unmeasured": 0, "pending": 1},
        "m.y": {"solved": 0, "flaky": 0, "failed": 0, "unmeasured": 1, "pending": 0},
    }


@pytest.mark.parametrize("log", [section_2_example(), mixed_log()], ids=["section-2", "mixed"])
def test_consuming_live_gives_the_same_summary_as_replaying(log: list[InputEvent]) -> None:
    live = RunState("run")
    for seq, event in enumerate(log, 1):
        apply(live, event)
        progress(live, seq)
        summary(live)
    assert summary(live) == summary(fold(log))


def test_eta_comes_from_the_span_of_occurred_at_across_run_and_task_events() -> None:
    def at(event: InputEvent, moment: str) -> InputEvent:
        return from_object({**orjson.loads(encode(event)), "occurred_at": moment})

    log = [
        at(reward_tasks("t1", "t2", attempts_per_task=2), "2026-11-30T12:00:00Z"),
        at(trial("t1", "a"), "2026-11-30T12:00:30Z"),
        at(trial("t2", "b"), "2026-11-30T12:01:00+00:00"),
    ]
    # 2 of 4 planned trials in 60 s: 2 more take 60 s.
    assert progress(fold(log), 1)["eta_seconds"] == 60.0
    assert progress(fold(log[1:]), 1)["eta_seconds"] is None  # attempts_per_task unknown without run.started
