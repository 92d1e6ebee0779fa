"""The alert rules (projections.analysis.alerts): what each alerts on, under which name."""

from __future__ import annotations

import pytest

from events.codec import encode_payload
from events.outputs import RunProgress
from projections.analysis.alerts import (
    DEAD_TRIALS,
    RUN_CLOSED,
    VERDICT_FLIP,
    Previous,
    Rules,
    progress_alerts,
    summary_alerts,
)
from projections.assembly.progress import progress
from tests.builders import fold, scored_run, summary_of, trial


def run(run_id: str, attempts: dict[str, list[object]], benchmark: str | None = "b") -> list:  # type: ignore[type-arg]
    return scored_run(run_id, attempts, labels={"benchmark": benchmark} if benchmark else {})


def progress_of(run_id: str, attempts: dict[str, list[object]]) -> RunProgress:
    """An open run's progress, each attempt with its trial.finished (failed for a dead one)."""
    events = run(run_id, attempts)[:-1]
    trials = [
        trial(task_id, f"{task_id}-{number}", "failed" if value is None else "completed", run_id=run_id)
        for task_id, values in attempts.items()
        for number, value in enumerate(values)
    ]
    return RunProgress.model_validate_json(encode_payload(progress(fold([*events, *trials], run_id), 1)))


def test_a_summary_alerts_its_close_under_its_revision() -> None:
    (alert,) = summary_alerts(summary_of(run("r1", {"a": [1, 1], "b": [0, 1]}), "r1"), None, Rules())
    assert (alert.key, alert.rule) == ("r1/1/run-closed", RUN_CLOSED)
    assert alert.text == "run r1 closed (completed): 1 solved, 1 flaky"
    assert alert.record()["verdicts"] == {"solved": 1, "flaky": 1, "failed": 0, "unmeasured": 0}


@pytest.mark.parametrize(
    ("attempts", "rules", "alerted"),
    [
        ({f"t{i}": [None, 1] for i in range(6)}, Rules(0.2, 10), True),  # 6 of 12 died
        ({f"t{i}": [None, 1] for i in range(4)}, Rules(0.2, 10), False),  # 8 finished: too few to say
        ({f"t{i}": [None, 1, 1, 1, 1] for i in range(4)}, Rules(0.2, 10), False),  # 4 of 20: 20% is not past 20%
        ({f"t{i}": [None, 1, 1, 1, 1] for i in range(4)}, Rules(0.19, 10), True),
    ],
)
def test_dead_trials_alert_once_past_the_threshold_with_enough_trials(
    attempts: dict[str, list[object]], rules: Rules, alerted: bool
) -> None:
    found = progress_alerts(progress_of("r1", attempts), rules)
    assert [alert.key for alert in found] == (["r1/0/dead-trials"] if alerted else [])
    if alerted:
        assert found[0].rule == DEAD_TRIALS


def test_a_verdict_flip_is_against_the_previous_run_of_the_same_labels() -> None:
    previous = Previous(("benchmark",))
    rules = Rules()
    first = summary_of(run("r1", {"a": [1, 1], "b": [0, 0], "c": [1, 0], "u": []}), "r1")
    other = summary_of(run("x1", {"a": [0, 0]}, benchmark="other"), "x1")
    second = summary_of(run("r2", {"a": [0, 0], "b": [0, 0], "c": [1, 1], "u": [1]}), "r2")
    assert [a.rule for a in summary_alerts(first, previous.before(first), rules)] == [RUN_CLOSED]
    assert [a.rule for a in summary_alerts(other, previous.before(other), rules)] == [RUN_CLOSED]
    alerts = summary_alerts(second, previous.before(second), rules)
    assert [a.rule for a in alerts] == [RUN_CLOSED, VERDICT_FLIP]
    flip = alerts[1]
    assert flip.key == "r2/1/verdict-flip"
    assert flip.record()["flips"] == [  # u was unmeasured in r1: passed over
        {"task_id": "a", "key": "reward.score", "from": "solved", "to": "failed"},
        {"task_id": "c", "key": "reward.score", "from": "flaky", "to": "solved"},
    ]
    assert (
        flip.text
        == "run r2: 2 verdicts changed since r1: a reward.score solved -> failed; c reward.score flaky -> solved"
    )
    # A later revision of r2 is still compared with r1, not with itself.
    assert previous.before(second) is not None
    assert previous.before(second).run_id == "r1"  # type: ignore[union-attr]


def test_a_run_without_the_match_labels_is_compared_with_nothing() -> None:
    previous = Previous(("benchmark",))
    for run_id in ("n1", "n2"):
        summary = summary_of(run(run_id, {"a": [1]}, benchmark=None), run_id)
        assert previous.before(summary) is None
