"""The event factories (`events.builders`), and a fold of events into a run state."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from events.builders import broken, closed, dead, score, started, task_spec, trial
from events.codec import encode_payload
from events.models import InputEvent
from events.outputs import RunSummary
from projections.assembly.summary import summary
from projections.fold.run import RunState, apply

__all__ = [
    "broken", "closed", "dead", "fold", "score", "scored_run", "started", "summary_of", "summary_pair", "task_spec",
    "trial",
]  # fmt: skip


def fold(events: Iterable[InputEvent], run_id: str = "run") -> RunState:
    """A run state with `events` applied in order."""
    run = RunState(run_id)
    for event in events:
        apply(run, event)
    return run


def scored_run(
    run_id: str, attempts: Mapping[str, Sequence[object]], *, labels: Mapping[str, str] | None = None
) -> list[InputEvent]:
    """A closed run declaring `reward.score` continuous on each task of `attempts`, with one
    trial per value in order (None: a dead trial; no value: a task nothing was measured for)."""
    events: list[InputEvent] = [
        started(
            run_id,
            [task_spec(task_id, {"reward.score": "continuous"}) for task_id in attempts],
            labels=dict(labels or {}),
        )
    ]
    for task_id, values in attempts.items():
        for number, value in enumerate(values):
            trial_id = f"{task_id}-{number}"
            if value is None:
                events.append(dead(task_id, trial_id, "reward", run_id=run_id))
            else:
                events.append(score(task_id, trial_id, "reward", {"score": value}, run_id=run_id))
    return [*events, closed(run_id)]


def summary_pair(
    baseline: Mapping[str, Sequence[object]], candidate: Mapping[str, Sequence[object]]
) -> tuple[RunSummary, RunSummary]:
    """The summaries of two `scored_run`s, "base" and "cand", as a gate compares them."""
    return summary_of(scored_run("base", baseline), "base"), summary_of(scored_run("cand", candidate), "cand")


def summary_of(events: Iterable[InputEvent], run_id: str = "run") -> RunSummary:
    """The run.summary of a closed run's events, as a subscriber reads it."""
    return RunSummary.model_validate_json(encode_payload(summary(fold(events, run_id))))
