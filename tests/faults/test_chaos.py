"""The fault scenarios, reduced to run in CI in a few minutes (`bench/chaos.py` is the long
version): after every fault, each run's latest summary equals what its events give."""

from __future__ import annotations

from pathlib import Path

from tests.faults import scenarios


def test_worker_killed_at_random_moments_loses_and_doubles_nothing(bootstrap: str, tmp_path: Path) -> None:
    result = scenarios.worker_crashes(bootstrap, tmp_path, kills=3, runs=3, tasks=40, seconds=20, seed=1)
    assert result.details == []
    assert max(result.recoveries) < 60


def test_broker_stopped_and_killed_mid_run_the_worker_carries_on(tmp_path: Path) -> None:
    result = scenarios.broker_crashes(tmp_path, restarts=2, runs=3, tasks=30, seconds=20, seed=2)
    assert result.details == []
    assert max(result.recoveries) < 90


def test_workers_joining_leaving_and_dying_keep_every_run_exact(bootstrap: str, tmp_path: Path) -> None:
    result = scenarios.rebalances(bootstrap, tmp_path, changes=3, runs=6, tasks=30, seconds=30, seed=3)
    assert result.details == []
    assert max(result.recoveries) < 90


def test_malformed_messages_are_dead_lettered_precisely_and_runs_stay_exact(bootstrap: str, tmp_path: Path) -> None:
    result, problems = scenarios.bad_input(bootstrap, tmp_path, count=300, runs=3, tasks=30, seconds=15, seed=4)
    assert problems == []
    assert result.details == []


def test_restarts_recover_empty_and_compacted_changelog_partitions(bootstrap: str, tmp_path: Path) -> None:
    result = scenarios.state_edges(bootstrap, tmp_path, restarts=2, tasks=60, seconds=20, seed=5)
    assert result.details == []


def test_owners_frozen_past_their_session_then_thawed_write_nothing_after_the_new_owner(
    bootstrap: str, tmp_path: Path
) -> None:
    result = scenarios.frozen_owners(bootstrap, tmp_path, freezes=3, runs=8, tasks=30, seconds=45, seed=6)
    assert result.details == []
    assert result.mismatches == 0
