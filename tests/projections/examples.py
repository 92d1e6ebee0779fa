"""The worked examples of SEMANTICS.md and the contract's example log (docs/spec), for the
tests that check them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from events.models import InputEvent
from tests.builders import broken, dead, score, started, task_spec

SPEC = Path(__file__).resolve().parents[2] / "docs" / "spec"
EXAMPLES = SPEC / "examples"
EXAMPLE_LOG = EXAMPLES / "mixed-runs.jsonl"
"""The contract's realistic mixed log, and the summaries it must produce."""
EXPECTED = EXAMPLES / "mixed-runs.expected.jsonl"


def reward_tasks(*task_ids: str, **fields: Any) -> InputEvent:
    """A run.started declaring `reward.score` continuous for each task."""
    return started(tasks=[task_spec(task_id, {"reward.score": "continuous"}) for task_id in task_ids], **fields)


def reward(task_id: str, trial_id: str, value: Any) -> InputEvent:
    return score(task_id, trial_id, "reward", {"score": value})


def section_2_example() -> list[InputEvent]:
    """Attempts [1, 1, 1], [1, null, 0], [1] (metric failed on the 2nd), [] (a metric failure
    arrived) and [] (nothing arrived)."""
    return [
        reward_tasks("t1", "t2", "t3", "t4", "t5"),
        reward("t1", "a", 1), reward("t1", "b", 1), reward("t1", "c", 1),
        reward("t2", "d", 1), dead("t2", "e", "reward"), reward("t2", "f", 0),
        reward("t3", "g", 1), broken("t3", "h", "reward"),
        broken("t4", "i", "reward"),
    ]  # fmt: skip


# Two runs' attempts (reward.score, one list per task) that `evalstream gate` compares:
# the hand-computed example of tests/projections/analysis/test_compare.py.
BASELINE: dict[str, list[object]] = {
    "a": [1, 1, 1],  # solved
    "b": [1, None, 1],  # flaky: a dead trial is an attempt that did not pass
    "c": [0, 0, 0.5],  # failed: partial credit is not a pass
    "d": [1, 1],
    "e": [1, 1, 0],  # only the baseline has it
    "g": [],  # unmeasured here, measured in the candidate
    "h": [1],
}
CANDIDATE: dict[str, list[object]] = {
    "a": [1, 1, "NaN"],  # NaN never passes: solved -> flaky
    "b": [0, 0, None],  # flaky -> failed
    "c": [0, "Infinity", 0],  # Infinity is >= 1.0: failed -> flaky
    "d": [1, 1, 1, 1],  # solved either way, on another number of attempts
    "f": [1],  # only the candidate has it
    "g": [1],
    "h": [],
}
