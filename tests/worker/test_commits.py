"""Commits: one at a time per partition, the newest offset next, failures only logged."""

from __future__ import annotations

import asyncio

import pytest

from worker.runtime.commits import Commits


class SlowConsumer:
    """Commits that finish when the test says so."""

    def __init__(self) -> None:
        self.started: list[tuple[int, int]] = []
        self.done: list[tuple[int, int]] = []
        self.release = asyncio.Event()
        self.fail = False

    async def commit(self, partition: int, offset: int) -> None:
        self.started.append((partition, offset))
        await self.release.wait()
        if self.fail:
            raise RuntimeError("the coordinator is gone")
        self.done.append((partition, offset))


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_offsets_handed_over_during_a_commit_are_overtaken_by_the_newest() -> None:
    async def go() -> SlowConsumer:
        consumer = SlowConsumer()
        commits = Commits(consumer.commit)
        commits.request(0, 10)
        await settle()
        commits.request(0, 20)
        commits.request(0, 30)
        commits.request(1, 5)  # another partition does not wait for partition 0's commit
        await settle()
        assert consumer.started == [(0, 10), (1, 5)]
        consumer.release.set()
        await settle()
        return consumer

    consumer = asyncio.run(go())
    assert consumer.started == [(0, 10), (1, 5), (0, 30)]
    assert sorted(consumer.done) == sorted(consumer.started)


def test_forget_drops_the_offsets_not_yet_being_committed() -> None:
    async def go() -> SlowConsumer:
        consumer = SlowConsumer()
        commits = Commits(consumer.commit)
        commits.request(0, 10)
        await settle()
        commits.request(0, 20)
        commits.forget()
        consumer.release.set()
        await settle()
        return consumer

    assert asyncio.run(go()).done == [(0, 10)]


def test_a_failed_commit_is_logged_and_the_next_offset_is_still_committed(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> SlowConsumer:
        consumer = SlowConsumer()
        consumer.fail = True
        commits = Commits(consumer.commit)
        commits.request(0, 10)
        await settle()
        consumer.release.set()
        await settle()
        consumer.fail = False
        commits.request(0, 20)
        await settle()
        return consumer

    consumer = asyncio.run(go())
    assert consumer.done == [(0, 20)]
    assert "could not commit offset 10 of partition 0" in caplog.text
