"""SEMANTICS.md section 6: the run as Harbor's per-dataset stats."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.models import InputEvent, TrialFinished
from projections.assembly.summary import summary
from projections.figures.harbor import value_label
from tests.builders import broken, closed, dead, fold, score, started, task_spec, trial


def harbor(events: Sequence[InputEvent]) -> dict[str, Any]:
    result: dict[str, Any] = summary(fold([*events, closed()]))["harbor"]
    return result


def attempts_log(lists: dict[str, list[Any]], kind: str = "continuous", rules: str | None = None) -> list[InputEvent]:
    """Tasks declaring r.s with `kind` under the Harbor `rules` (None: named by none); each
    value is a score of r.s, "dead" a dead trial."""
    specs = [task_spec(task_id, {"r.s": kind}) for task_id in lists]
    log: list[InputEvent] = [started(tasks=specs, harbor_rules=rules)]
    for task_id, values in lists.items():
        for i, value in enumerate(values):
            trial_id = f"{task_id}-{i}"
            log.append(dead(task_id, trial_id, "r") if value == "dead" else score(task_id, trial_id, "r", {"s": value}))
    return log


def test_n_errors_counts_failed_trial_finished_events() -> None:
    failed = trial("t", "c", "failed", error_type="Boom")
    log: list[InputEvent] = [trial("t", "a"), failed, failed, trial("u", "b", "failed"), dead("t", "c", "r")]
    assert harbor(log)["n_errors"] == 2


def test_n_trials_counts_graded_trials_whatever_trial_finished_said() -> None:
    """Graded: some completed or partial score, of any metric, with or without a semantic value."""
    log: list[InputEvent] = [
        score("t", "a", "r", {"s": 1.0}),
        trial("t", "a", "failed", error_type="VerifierCrash"),  # raised after it was graded: counts
        trial("t", "b", "failed"),
        score("t", "b", "n", {"note": "a label"}, status="partial"),  # graded after its failure arrived
        score("u", "b", "r", {"s": 0.0}),  # the same trial id in another task: one trial, as trial_count
        score("u", "g", "r", {"s": 0.0}),  # no trial.finished (yet)
        dead("t", "c", "r"),
        trial("t", "c", "failed"),  # died before grading
        broken("t", "d", "r"),
        trial("t", "d"),  # its metric broke: unmeasured, not graded
        trial("t", "e"),  # finished, never scored
    ]
    stats = harbor(log)
    assert (stats["n_trials"], stats["n_errors"]) == (3, 3)


def test_exception_stats_by_error_type_in_log_order() -> None:
    no_type = TrialFinished.model_validate(
        {"schema_version": 1, "type": "trial.finished", "event_id": "no-type", "run_id": "run",
         "task_id": "u", "trial_id": "u3", "status": "failed", "error": {"message": "lost"}}
    )  # fmt: skip
    log: list[InputEvent] = [
        trial("u", "u1", "failed", error_type="SandboxTimeout"),
        trial("t", "t1", "failed", error_type="AgentCrash"),
        trial("t", "t2", "completed"),
        trial("t", "t3", "failed"),
        no_type,
        trial("t", "t4", "failed", error_type="SandboxTimeout"),
    ]
    assert harbor(log)["exception_stats"] == {
        "SandboxTimeout": ["u1", "t4"],
        "AgentCrash": ["t1"],
        "UnknownError": ["t3", "u3"],
    }


def ordered(stats: dict[str, dict[str, list[str]]]) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """reward_stats with its key order made part of the comparison."""
    return [(key, list(values.items())) for key, values in stats.items()]


def test_reward_stats_from_non_null_attempts_in_log_order_across_tasks() -> None:
    specs = [task_spec("t2", {"r.s": "continuous", "u.tok": "model"}), task_spec("t1", {"r.s": "continuous"})]
    log: list[InputEvent] = [
        started(tasks=specs),
        score("t1", "a", "r", {"s": 1.0}),
        score("t2", "b", "r", {"s": 0.25}),
        score("t2", "c", "r", {"s": "NaN"}),
        score("t1", "h", "r", {"s": "Infinity"}),
        score("t2", "i", "r", {"s": "-Infinity"}),
        dead("t2", "d", "r"),
        broken("t1", "e", "r"),
        score("t1", "f", "r", {"s": 1}),
        score("t2", "g", "r", {"s": True}),
        score("t2", "b", "r", {"s": 0.25}),
        score("t2", "b", "u", {"tok": 40}),
        score("t2", "b", "n", {"steps": 3}),
    ]
    assert ordered(harbor(log)["reward_stats"]) == [
        ("r.s", [("1.0", ["a", "f", "g"]), ("0.25", ["b", "b"]), ("nan", ["c"]), ("inf", ["h"]), ("-inf", ["i"])]),
        ("n.steps", [("3.0", ["b"])]),
    ]


def test_reward_stats_keys_in_order_of_first_occurrence() -> None:
    """A key first seen in a later task comes first; the keys of one score go by name."""
    specs = [task_spec("t1", {"a.p": "continuous"}), task_spec("t2", {"z.q": "continuous"})]
    log: list[InputEvent] = [
        started(tasks=specs),
        score("t2", "x", "z", {"q": 0.5}),
        score("t1", "y", "a", {"p": 0.0}),
        score("t1", "y", "m", {"w": 2.0, "v": 1.0}),
        score("t2", "x", "a", {"p": 0.0}),
    ]
    assert ordered(harbor(log)["reward_stats"]) == [
        ("z.q", [("0.5", ["x"])]),
        ("a.p", [("0.0", ["y", "x"])]),
        ("m.v", [("1.0", ["y"])]),
        ("m.w", [("2.0", ["y"])]),
    ]


def test_keys_with_only_null_attempts_have_no_reward_stats() -> None:
    assert harbor(attempts_log({"t": ["dead", "dead"]}))["reward_stats"] == {}


def test_pass_at_k_under_0_25_with_null_as_zero_over_tasks_with_attempts() -> None:
    """t1: n = 5, c = 2; t2: n = 6, c = 0; t3 has no attempt. ks up to min n = 5: 2, 4, 5."""
    lists: dict[str, list[Any]] = {"t1": [1, 0, 1.0, 0, "dead"], "t2": [0, "dead", 0, 0, False, 0.0], "t3": []}
    log = [*attempts_log(lists, rules="0.25"), broken("t3", "x", "r")]
    pass_at_k = harbor(log)["pass_at_k"]
    assert list(pass_at_k) == ["r.s"]
    assert pass_at_k["r.s"] == pytest.approx({"2": (1 - 3 / 10) / 2, "4": 0.5, "5": 0.5})


@pytest.mark.parametrize("rules", ["0.26", None])
def test_pass_at_k_under_0_26_counts_only_non_null_attempts(rules: str | None) -> None:
    """The same tasks: t1 n = 4, c = 2; t2 n = 5, c = 0; ks up to min n = 4: 2, 4. A task
    whose attempts are all null (t4) is left out, as t3 without attempts is."""
    lists: dict[str, list[Any]] = {
        "t1": [1, 0, 1.0, 0, "dead"],
        "t2": [0, "dead", 0, 0, False, 0.0],
        "t3": [],
        "t4": ["dead", "dead"],
    }
    log = [*attempts_log(lists, rules=rules), broken("t3", "x", "r")]
    assert harbor(log)["pass_at_k"] == {"r.s": {"2": (1 - (2 / 4) * (1 / 3) + 0.0) / 2, "4": (1.0 + 0.0) / 2}}


@pytest.mark.parametrize(("rules", "expected"), [("0.25", {"r.s": {"2": 0.0}}), ("0.26", {})])
def test_a_key_that_only_dead_trials_reached(rules: str, expected: dict[str, Any]) -> None:
    """Under 0.25 its attempts are 0s; under 0.26 no task is in, so the key has no entry."""
    assert harbor(attempts_log({"t": ["dead", "dead", "dead"]}, rules=rules))["pass_at_k"] == expected


binary_lists = st.dictionaries(
    st.sampled_from(["t1", "t2", "t3", "t4"]),
    st.lists(st.sampled_from([1.0, 0.0, "dead"]), max_size=9),
    min_size=1,
)


@given(binary_lists)
def test_under_0_26_dead_trials_change_no_pass_at_k(lists: dict[str, list[Any]]) -> None:
    """Harbor 0.26 skips a trial without a valid reward: the same as the trial not being there."""
    alive = {task: [value for value in values if value != "dead"] for task, values in lists.items()}
    assert harbor(attempts_log(lists, rules="0.26"))["pass_at_k"] == harbor(attempts_log(alive))["pass_at_k"]


@given(binary_lists)
def test_under_0_25_a_dead_trial_is_a_0(lists: dict[str, list[Any]]) -> None:
    zeros = {task: [0.0 if value == "dead" else value for value in values] for task, values in lists.items()}
    assert harbor(attempts_log(lists, rules="0.25"))["pass_at_k"] == harbor(attempts_log(zeros))["pass_at_k"]


def test_n_trials_and_reward_stats_leave_out_scores_failed_as_metric() -> None:
    """A reward Harbor 0.26 holds not valid arrives as a failed metric score: not graded, no
    reward, not in pass@k; the trial's exception still counts in n_errors."""
    log = [
        *attempts_log({"t": [1, 0, 1]}),
        trial("t", "t-3", "failed", error_type="RateLimitError"),
        score("t", "t-3", "r", status="failed", failure="metric"),
    ]
    figures = harbor(log)
    assert (figures["n_trials"], figures["n_errors"]) == (3, 1)
    assert figures["reward_stats"] == {"r.s": {"1.0": ["t-0", "t-2"], "0.0": ["t-1"]}}
    assert figures["pass_at_k"] == {"r.s": {"2": 1.0}}  # n = 3, c = 2: n - c < k


def test_pass_at_k_per_task_multiplies_in_harbor_order() -> None:
    """n = 3, c = 1, k = 2: Harbor's 1 - (2/3)(1/2), one ulp from section 2's 1 - (1 - 2/3)."""
    value = harbor(attempts_log({"t": [1, 0, 0]}))["pass_at_k"]["r.s"]["2"]
    assert value == 1 - (2 / 3) * (1 / 2)
    assert value != 1 - (1 - 2 / 3)


def test_pass_at_k_adds_the_tasks_as_python_3_12_sum() -> None:
    """n = 5, k = 2: per task 1 - (4/5)(3/4) (c = 1), then 1 - (2/5)(1/4) twice (c = 3). The
    compensated sum of these three is their exact sum rounded; a plain sum is one ulp below."""
    lists = {"t1": [1, 0, 0, 0, 0], "t2": [1, 1, 1, 0, 0], "t3": [0, 0, 1, 1, 1]}
    figures = [1 - (4 / 5) * (3 / 4), 1 - (2 / 5) * (1 / 4), 1 - (2 / 5) * (1 / 4)]
    value = harbor(attempts_log(lists))["pass_at_k"]["r.s"]["2"]
    assert value == math.fsum(figures) / 3
    assert value != (figures[0] + figures[1] + figures[2]) / 3


@pytest.mark.parametrize(
    ("n", "ks"),
    [
        (2, ["2"]),
        (3, ["2"]),
        (5, ["2", "4", "5"]),
        (10, ["2", "4", "5", "8", "10"]),
        (17, ["2", "4", "5", "8", "10", "15", "16"]),
        (32, ["2", "4", "5", "8", "10", "15", "16", "20", "25", "30", "32"]),
    ],
)
def test_harbor_k_values_up_to_the_smallest_n(n: int, ks: list[str]) -> None:
    pass_at_k = harbor(attempts_log({"t1": [1] * n, "t2": [0] * (n + 3)}))["pass_at_k"]["r.s"]
    assert sorted(pass_at_k, key=int) == ks
    assert all(value == pytest.approx(0.5) for value in pass_at_k.values())


@pytest.mark.parametrize("odd", [0.5, 2, "NaN", "Infinity", -1])
def test_a_key_with_a_value_other_than_0_or_1_is_left_out(odd: Any) -> None:
    log = attempts_log({"t1": [1, 0, 1], "t2": [0, odd]})
    assert harbor(log)["pass_at_k"] == {}


def test_boolean_keys_count_as_0_and_1() -> None:
    log = attempts_log({"t1": [False, False], "t2": [True, False], "t3": [True, True]}, kind="boolean")
    assert harbor(log)["pass_at_k"] == {"r.s": {"2": pytest.approx(2 / 3)}}


def test_only_pass_at_k_eligible_keys_get_harbor_pass_at_k() -> None:
    log = attempts_log({"t1": [1, 0], "t2": [1, 1]}, kind="discrete")
    assert harbor(log)["pass_at_k"] == {}


def test_a_key_without_any_k_is_left_out() -> None:
    """Smallest n = 1: Harbor's ks start at 2, so there is nothing to report for the key."""
    assert harbor(attempts_log({"t1": [1], "t2": [1, 0]}))["pass_at_k"] == {}


@given(st.floats() | st.sampled_from([0.0, -0.0, 1.0, -1.0, 1.0000000000000002, 5e-324]))
def test_a_reward_label_is_the_value_as_python_writes_it(value: float) -> None:
    """The labels spelled out for the usual rewards (0.0 of either sign, 1.0) are repr's, and so
    are the non-finite ones: Harbor's result.json spells them "nan", "inf" and "-inf"."""
    assert value_label(value) == repr(value)


def test_non_finite_reward_labels_are_spelled_as_harbor_writes_them() -> None:
    assert [value_label(value) for value in (math.nan, math.inf, -math.inf)] == ["nan", "inf", "-inf"]
