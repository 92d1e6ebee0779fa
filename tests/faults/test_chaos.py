"""The fault scenarios, reduced to run in CI in a few minutes (`bench/chaos.py` is the long
version): after every fault, each run's latest summary equals what its events give, and the
fault's own trace shows that it happened (a scenario whose fault stopped biting would pass on
its outputs alone)."""

from __future__ import annotations

from pathlib import Path

from tests.faults import scenarios


def test_worker_killed_at_random_moments_loses_and_doubles_nothing(bootstrap: str, tmp_path: Path) -> None:
    result = scenarios.worker_crashes(bootstrap, tmp_path, kills=3, runs=3, tasks=40, seconds=20, seed=1)
    assert result.details == []
    assert max(result.recoveries) < 60
    assert result.traces["workers_killed"] == 3


def test_broker_stopped_and_killed_mid_run_the_worker_carries_on(tmp_path: Path) -> None:
    result = scenarios.broker_crashes(tmp_path, restarts=2, runs=3, tasks=30, seconds=20, seed=2)
    assert result.details == []
    assert max(result.recoveries) < 90
    redone_or_failed = ("evalstream_partitions_redone_total", "evalstream_partition_failures_total")
    assert sum(result.traces[name] for name in redone_or_failed) > 0, result.traces


def test_workers_joining_leaving_and_dying_keep_every_run_exact(bootstrap: str, tmp_path: Path) -> None:
    result = scenarios.rebalances(bootstrap, tmp_path, changes=3, runs=6, tasks=30, seconds=30, seed=3)
    assert result.details == []
    assert max(result.recoveries) < 90
    assert result.traces["workers_killed"] >= 1, result.traces


def test_malformed_messages_are_dead_lettered_precisely_and_runs_stay_exact(bootstrap: str, tmp_path: Path) -> None:
    result, problems = scenarios.bad_input(bootstrap, tmp_path, count=300, runs=3, tasks=30, seconds=15, seed=4)
    assert problems == []
    assert result.details == []
    assert result.faults > 200  # dead letters the oracle expected, and the worker wrote


def test_restarts_recover_empty_and_compacted_changelog_partitions(bootstrap: str, tmp_path: Path) -> None:
    result = scenarios.state_edges(bootstrap, tmp_path, restarts=2, tasks=60, seconds=20, seed=5)
    assert result.details == []
    assert result.traces["workers_killed"] == 2


def test_owners_frozen_past_their_session_then_thawed_write_nothing_after_the_new_owner(
    bootstrap: str, tmp_path: Path
) -> None:
    result = scenarios.frozen_owners(bootstrap, tmp_path, freezes=3, runs=8, tasks=30, seconds=45, seed=6)
    assert result.details == []
    assert result.mismatches == 0
    # A thawed owner is mostly told of its revocation before it writes again (a fence is rare:
    # 1 in 3 freezes measured), so the freeze's sure trace is the other worker's takeover.
    assert result.traces["freezes the other worker took over"] == 3, result.traces


def test_a_worker_cut_off_past_its_session_while_another_goes_on_writes_nothing_after_it(tmp_path: Path) -> None:
    result = scenarios.network_partition(tmp_path, cuts=2, runs=6, tasks=30, seconds=40, seed=8)
    assert result.details == []
    assert result.traces["cuts the other worker took over"] == 2, result.traces
    assert result.traces["sessions expired"] >= 2, result.traces


def test_latency_and_connection_resets_during_commits_lose_and_double_nothing(tmp_path: Path) -> None:
    result = scenarios.slow_and_reset(tmp_path, faults=4, runs=3, tasks=30, seconds=25, seed=9)
    assert result.details == []
    assert result.traces["slow checkpoints"] > 0, result.traces
    assert result.traces["connections reset"] > 0, result.traces


def test_coordinator_and_leaders_killed_hard_on_three_nodes_lose_and_double_nothing(tmp_path: Path) -> None:
    result = scenarios.coordinator_loss(tmp_path, bounces=2, runs=4, tasks=30, seconds=30, seed=10)
    assert result.details == []
    assert result.traces["leads moved"] == 2, result.traces


def test_partitions_idle_past_the_coordinators_expiry_lose_nothing(tmp_path: Path) -> None:
    result = scenarios.idle_expiry(tmp_path, bursts=3, runs=3, tasks=10, seconds=4, seed=11)
    assert result.details == []
    assert result.traces["transactional ids expired"] > 0, result.traces
    # The worker met the forgotten ids (InvalidProducerIdMapping) and renewed its producers.
    assert result.traces["evalstream_partition_failures_total"] > 0, result.traces


def test_workers_end_within_their_bound_when_the_broker_dies_during_a_revocation(tmp_path: Path) -> None:
    result = scenarios.outage_during_revocation(tmp_path, outages=2, runs=4, tasks=30, seconds=30, seed=12)
    assert result.traces["workers ended during an outage"] >= 4, result.traces
    assert result.traces["revocations under way when the broker died"] == 1, result.traces
    assert result.traces["slowest exit (s)"] < result.traces["exit bound (s)"], result.traces
    assert result.traces["stops forced at the bound"] == 0, result.traces
    assert result.details == []
