"""The eval's figures on /metrics (worker.runtime.eval_figures): what each series says, and the
bounds on how many there are."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from events.codec import encode_payload
from projections.assembly.progress import progress
from tests.builders import fold, scored_run, trial
from worker.runtime import eval_figures
from worker.runtime.eval_figures import EvalFigures


def payload(run_id: str, values: list[int | None], *, closed: bool = False) -> tuple[str, bytes, bool]:
    """(run id, its progress event, whether it is closed), as `EvalFigures.update` takes them."""
    events = scored_run(run_id, {f"t{i}": [value] for i, value in enumerate(values)})
    events[0] = events[0].model_copy(update={"attempts_per_task": 2})
    trials = [
        trial(f"t{i}", f"t{i}-0", "failed" if value is None else "completed", run_id=run_id)
        for i, value in enumerate(values)
    ]
    run = fold([*events[:-1], *trials, *(events[-1:] if closed else [])], run_id)
    return run_id, encode_payload(progress(run, 1)), closed


def exposition(figures: EvalFigures) -> str:
    registry = CollectorRegistry()
    registry.register(figures)
    return generate_latest(registry).decode()


def test_an_open_run_shows_its_progress_pass_at_1_with_its_interval_and_dead_trials() -> None:
    figures = EvalFigures()
    figures.update(*payload("r1", [1, 1, 0, None]), partition=0)
    shown = exposition(figures)
    assert 'evalstream_run_trials_finished{run="r1"} 4.0' in shown
    assert 'evalstream_run_trials_dead{run="r1"} 1.0' in shown
    assert 'evalstream_run_trials_expected{run="r1"} 8.0' in shown
    assert 'evalstream_run_progress_ratio{run="r1"} 0.5' in shown
    assert 'evalstream_run_pass_at_1{key="reward.score",run="r1"} 0.5' in shown
    assert 'evalstream_run_pass_at_1_low{key="reward.score",run="r1"}' in shown
    assert 'evalstream_run_pass_at_1_high{key="reward.score",run="r1"}' in shown


def test_a_closed_run_and_a_partition_that_left_take_their_series_with_them() -> None:
    figures = EvalFigures()
    figures.update(*payload("r1", [1]), partition=0)
    figures.update(*payload("r2", [1]), partition=1)
    figures.update(*payload("r1", [1], closed=True), partition=0)
    assert list(figures.runs) == ["r2"]
    figures.forget([1])
    assert 'run="' not in exposition(figures)


def test_at_most_max_runs_the_latest_updated_and_the_rest_counted(monkeypatch: Any) -> None:
    monkeypatch.setattr(eval_figures, "MAX_RUNS", 3)
    figures = EvalFigures()
    for number in range(5):
        figures.update(*payload(f"r{number}", [1]), partition=0)
    figures.update(*payload("r2", [1, 1]), partition=0)  # updated last: kept
    assert list(figures.runs) == ["r3", "r4", "r2"]
    assert "evalstream_open_runs_dropped 2.0" in exposition(figures)
