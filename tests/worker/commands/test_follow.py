"""`evalstream follow harbor`'s polling, without a broker: what each look at a job being
written publishes, and that it adds up to the imported job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from events.codec import encode
from events.importers.source import ImportOptions
from events.models import InputEvent, RunClosed, RunStarted, TrialFinished
from tests.events.importers.harbor_stats import FIXTURES, imported, replayed, summaries
from tests.worker.commands.harbor_job import write_job
from worker.commands.follow import HarborJob


def _lines(events: list[InputEvent]) -> list[bytes]:
    return [encode(event) for event in events]


@pytest.mark.parametrize("name", ["job-mixed", "job-groups", "job-b", "job-026-mixed", "job-026-override"])
def test_following_a_job_being_written_adds_up_to_importing_it(tmp_path: Path, name: str) -> None:
    target = tmp_path / name
    follower = HarborJob(target, ImportOptions())
    published: list[InputEvent] = []
    for step in write_job(FIXTURES / name, target):
        poll = follower.poll()
        published += poll.events
        trials = {e.trial_id for e in poll.events if isinstance(e, TrialFinished)}
        if step.endswith("half-written"):
            assert step.split()[0] not in trials
        elif step.endswith(" written"):
            assert trials == {step.split()[0]}
            assert not any(isinstance(e, RunStarted | RunClosed) for e in poll.events)
        assert poll.done == (step == "job finished")
    assert replayed(_lines(published)) == replayed(imported(target))
    assert sorted(_lines(published)) == sorted(imported(target))


def test_a_restarted_follow_publishes_only_redeliveries(tmp_path: Path) -> None:
    target = tmp_path / "job-mixed"
    first = HarborJob(target, ImportOptions())
    published: list[InputEvent] = []
    steps = write_job(FIXTURES / "job-mixed", target)
    for _ in steps:
        published += first.poll().events
        if len(published) >= 20:
            break
    restarted = HarborJob(target, ImportOptions())
    again: list[InputEvent] = []
    for _ in steps:
        again += restarted.poll().events
    assert {e.event_id for e in published} <= {e.event_id for e in again}
    assert replayed(_lines(published + again)) == replayed(imported(target))


def test_with_retries_allowed_failed_trials_wait_for_the_job_to_finish(tmp_path: Path) -> None:
    target = tmp_path / "job-retry"
    assert json.loads((FIXTURES / "job-retry" / "config.json").read_text())["retry"]["max_retries"] == 1
    follower = HarborJob(target, ImportOptions())
    before: list[InputEvent] = []
    for step in write_job(FIXTURES / "job-retry", target):
        poll = follower.poll()
        if step != "job finished":
            before += poll.events
    failed = [e for e in before if isinstance(e, TrialFinished) and e.status == "failed"]
    assert failed == []
    assert [e for e in before if isinstance(e, TrialFinished)]  # the completed ones went out live
    assert sorted(_lines(before + poll.events)) == sorted(imported(target))
    # Held back, the failed trials land after the others: the same figures, other list orders.
    (ours,) = summaries(replayed(_lines(before + poll.events))).values()
    (theirs,) = summaries(replayed(imported(target))).values()
    assert _as_sets(ours["harbor"]) == _as_sets(theirs["harbor"])
    assert ours["harbor"] != theirs["harbor"]


def test_under_harbor_0_26_only_a_trial_whose_every_exception_is_retryable_waits(tmp_path: Path) -> None:
    """job-026-retry: RateLimitError is retryable (held back until the job is done);
    BadRequestError is not (published as its trial ends)."""
    target = tmp_path / "job-026-retry"
    follower = HarborJob(target, ImportOptions())
    live: list[InputEvent] = []
    for step in write_job(FIXTURES / "job-026-retry", target):
        poll = follower.poll()
        if step != "job finished":
            live += poll.events
    errors = {e.error.type for e in live if isinstance(e, TrialFinished) and e.error}
    assert errors == {"BadRequestError"}
    assert sorted(_lines(live + poll.events)) == sorted(imported(target))


def _as_sets(block: dict[str, Any]) -> dict[str, Any]:
    return {
        **block,
        "reward_stats": {k: {v: set(ids) for v, ids in values.items()} for k, values in block["reward_stats"].items()},
        "exception_stats": {error: set(ids) for error, ids in block["exception_stats"].items()},
    }


def test_an_unreadable_trial_after_the_job_finished_is_an_error(tmp_path: Path) -> None:
    target = tmp_path / "job-b"
    for _ in write_job(FIXTURES / "job-b", target):
        pass
    (target / "solid__R8goNSc" / "result.json").write_text("{")
    with pytest.raises(ValueError, match=r"solid__R8goNSc/result.json, line 1: not valid JSON"):
        HarborJob(target, ImportOptions()).poll()
