"""`evalstream follow nemo`'s polling, without a broker: a nel output directory written as
nel writes it (nel_run.json, then per benchmark results.jsonl line by line, a last line
half-written at times, the bundle, the trajectories; the report when the run ends), and
that it adds up to the import."""

from __future__ import annotations

from pathlib import Path

import pytest

from events.codec import encode
from events.importers.source import ImportOptions
from events.models import InputEvent, RunClosed, RunStarted, TrialFinished
from tests.events.importers.harbor_stats import replayed
from tests.worker.commands.nel_run import FIXTURES, write_run
from worker.commands.follow_nel import NelRun
from worker.commands.importing import import_lines


def _lines(events: list[InputEvent]) -> list[bytes]:
    return [encode(event) for event in events]


@pytest.mark.parametrize("name", ["nel-run", "nel-resumed"])
def test_following_a_nel_run_being_written_adds_up_to_importing_it(tmp_path: Path, name: str) -> None:
    target = tmp_path / name
    follower = NelRun(target, ImportOptions())
    published: list[InputEvent] = []
    for step in write_run(FIXTURES / name, target):
        poll = follower.poll()
        published += poll.events
        trials = [e for e in poll.events if isinstance(e, TrialFinished)]
        if step.endswith("half-written"):
            assert trials == []
        elif step.endswith("written"):
            assert len(trials) == 1
            assert not any(isinstance(e, RunStarted | RunClosed) for e in poll.events)
        elif step.endswith("done"):
            assert [type(e) for e in poll.events] == [RunStarted, RunClosed]
        assert poll.done == (step == "run ended")
    imported = list(import_lines("nemo", target, ImportOptions()))
    assert sorted(_lines(published)) == sorted(imported)
    assert replayed(_lines(published)) == replayed(imported)


def test_a_resumed_run_rewriting_its_results_publishes_only_redeliveries(tmp_path: Path) -> None:
    target = tmp_path / "nel-resumed"
    follower = NelRun(target, ImportOptions())
    for _ in write_run(FIXTURES / "nel-resumed", target):
        follower.poll()
    results = target / "evalfix" / "results.jsonl"
    results.write_text(results.read_text())  # --resume writes results.jsonl whole again
    assert follower.poll().events == []
    again = NelRun(target, ImportOptions()).poll()
    assert again.done
    assert replayed(_lines(again.events)) == replayed(list(import_lines("nemo", target, ImportOptions())))
