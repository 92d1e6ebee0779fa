"""Commits: one at a time per partition, in the order asked for across rebalances, the
newest offset next, failures asked again."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.runtime.commits import Commits


class Coordinator:
    """Commits that complete (or fail) when, and in the order, the test says."""

    def __init__(self) -> None:
        self.pending: list[tuple[int, int, asyncio.Future[bool]]] = []
        self.landed: list[tuple[int, int]] = []
        self.most_in_flight = 0

    async def commit(self, partition: int, offset: int) -> bool:
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.pending.append((partition, offset, done))
        in_flight = sum(1 for p, _, _ in self.pending if p == partition)
        self.most_in_flight = max(self.most_in_flight, in_flight)
        taken = await done
        if taken:
            self.landed.append((partition, offset))
        return taken

    def complete(self, at: int, taken: bool = True) -> None:
        _, _, done = self.pending.pop(at)
        done.set_result(taken)

    def started(self) -> list[tuple[int, int]]:
        return [(partition, offset) for partition, offset, _ in self.pending]


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def test_offsets_handed_over_during_a_commit_are_overtaken_by_the_newest() -> None:
    async def go() -> Coordinator:
        coordinator = Coordinator()
        commits = Commits(coordinator.commit)
        commits.request(0, 10)
        await settle()
        commits.request(0, 20)
        commits.request(0, 30)
        commits.request(1, 5)  # another partition does not wait for partition 0's commit
        await settle()
        assert coordinator.started() == [(0, 10), (1, 5)]
        coordinator.complete(1)
        coordinator.complete(0)
        await settle()
        coordinator.complete(0)
        await settle()
        return coordinator

    assert asyncio.run(go()).landed == [(1, 5), (0, 10), (0, 30)]


def test_forget_drops_the_offsets_not_yet_being_committed() -> None:
    async def go() -> Coordinator:
        coordinator = Coordinator()
        commits = Commits(coordinator.commit)
        commits.request(0, 10)
        await settle()
        commits.request(0, 20)
        commits.forget()
        coordinator.complete(0)
        await settle()
        return coordinator

    coordinator = asyncio.run(go())
    assert coordinator.landed == [(0, 10)]
    assert coordinator.pending == []


def test_the_commit_at_assignment_lands_after_a_commit_from_before_the_revocation() -> None:
    """The stale commit (offset 10, asked before the revocation) is still under way when the
    partition is assigned again and rewound to its checkpoint (7): the rewind's commit waits
    for it, so the last to land is the rewind's, whichever the coordinator would answer first."""

    async def go() -> tuple[Coordinator, bool]:
        coordinator = Coordinator()
        commits = Commits(coordinator.commit)
        commits.request(0, 10)
        await settle()
        commits.forget()
        rewinding = asyncio.ensure_future(commits.now({0: 7}))
        await settle()
        assert coordinator.started() == [(0, 10)], "the rewind's commit went out beside the stale one"
        coordinator.complete(0)
        await settle()
        coordinator.complete(0)
        return coordinator, await rewinding

    coordinator, taken = asyncio.run(go())
    assert taken
    assert coordinator.landed == [(0, 10), (0, 7)]


def test_a_commit_not_taken_is_asked_again_unless_a_newer_one_came(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> Coordinator:
        coordinator = Coordinator()
        commits = Commits(coordinator.commit, retry_after=0)
        commits.request(0, 10)
        await settle()
        coordinator.complete(0, taken=False)
        await settle()
        assert coordinator.started() == [(0, 10)]  # asked again
        coordinator.complete(0, taken=False)
        commits.request(0, 20)  # newer: the retry of 10 is overtaken
        await settle()
        assert coordinator.started() == [(0, 20)]
        coordinator.complete(0)
        await settle()
        assert commits.failures == 2
        return coordinator

    assert asyncio.run(go()).landed == [(0, 20)]
    assert "could not commit offset 10 of partition 0" in caplog.text


def test_a_commit_that_raises_is_asked_again_and_forget_stops_it() -> None:
    calls: list[int] = []

    async def refuse(partition: int, offset: int) -> bool:
        calls.append(offset)
        raise RuntimeError("the coordinator is gone")

    async def go() -> None:
        commits = Commits(refuse, retry_after=0)
        commits.request(0, 10)
        await settle()
        commits.forget()
        await settle()

    asyncio.run(go())
    assert len(calls) >= 2
    assert set(calls) == {10}


Step = tuple[str, int, int]
steps = st.lists(
    st.one_of(
        st.tuples(st.just("request"), st.integers(0, 1), st.just(0)),
        st.tuples(st.just("rebalance"), st.integers(0, 1), st.just(0)),
        st.tuples(st.just("complete"), st.integers(0, 3), st.integers(0, 1)),
        st.tuples(st.just("settle"), st.just(0), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(steps)
def test_commits_land_in_the_order_asked_one_at_a_time_per_partition(script: list[Step]) -> None:
    """Checkpoints hand offsets over, revocations and assignments (a forget, then the
    rewind's commit) come between them, and the coordinator answers the commits under way
    in any order, some not taken. Offsets are asked in increasing order, so in each
    partition the offsets that land increase: no commit lands after a newer one."""

    async def go() -> Coordinator:
        coordinator = Coordinator()
        commits = Commits(coordinator.commit, retry_after=0)
        asked = 0
        rewinds = []
        for action, partition, choice in script:
            if action == "request":
                asked += 1
                commits.request(partition, asked)
            elif action == "rebalance":
                commits.forget()
                asked += 1
                rewinds.append(asyncio.ensure_future(commits.now({partition: asked})))
            elif action == "complete" and coordinator.pending:
                coordinator.complete(partition % len(coordinator.pending), taken=bool(choice))
            await settle()
        while coordinator.pending:
            coordinator.complete(0)
            await settle()
        await asyncio.gather(*rewinds)
        return coordinator

    coordinator = asyncio.run(go())
    assert coordinator.most_in_flight <= 1
    for partition in (0, 1):
        landed = [offset for p, offset in coordinator.landed if p == partition]
        assert landed == sorted(set(landed))
