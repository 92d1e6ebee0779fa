"""The local copy is a prefix of the changelog: a write reaches it only once acknowledged,
and the offset of each acknowledged checkpoint record is recorded with it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from faust.types import TP

from worker.runtime.changelog import TableState
from worker.runtime.keys import checkpoint_key


class FakeStore:
    def __init__(self) -> None:
        self.dbs: dict[int, dict[bytes, bytes]] = {}
        self.offsets: dict[TP, int] = {}

    def _db_for_partition(self, partition: int) -> dict[bytes, bytes]:
        return self.dbs.setdefault(partition, {})

    def set_persisted_offset(self, tp: TP, offset: int) -> None:
        self.offsets[tp] = offset


def test_a_write_reaches_the_local_copy_once_acknowledged_and_a_refused_one_never() -> None:
    sent: list[asyncio.Future[Any]] = []

    async def send(topic: str, key: bytes, value: bytes | None, partition: int, *rest: Any) -> asyncio.Future[Any]:
        sent.append(asyncio.get_running_loop().create_future())
        return sent[-1]

    data = FakeStore()
    table = SimpleNamespace(data=data, changelog_topic=SimpleNamespace(get_topic_name=lambda: "state-changelog"))
    state = TableState(SimpleNamespace(producer=SimpleNamespace(send=send)), table, "events")  # type: ignore[arg-type]

    async def go() -> None:
        task = await state.write(0, b"t1", b"one")
        refused = await state.write(0, b"t2", b"two")
        mark = await state.write(0, checkpoint_key(0), b"7")
        assert data.dbs.get(0, {}) == {}, "written locally before the broker acknowledged it"
        sent[0].set_result(SimpleNamespace(offset=40))
        await task
        assert data.dbs[0] == {b"t1": b"one"}
        assert data.offsets == {}
        sent[1].set_exception(RuntimeError("refused"))
        sent[2].set_result(SimpleNamespace(offset=42))
        with pytest.raises(RuntimeError):
            await refused
        await mark
        tombstone = await state.write(0, b"t1", None)
        assert b"t1" in data.dbs[0], "deleted locally before the broker acknowledged the tombstone"
        sent[3].set_result(SimpleNamespace(offset=43))
        await tombstone

    asyncio.run(go())
    assert data.dbs[0] == {checkpoint_key(0): b"7"}
    assert data.offsets == {TP("state-changelog", 0): 42}
