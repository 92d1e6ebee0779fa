"""Offset commits: one at a time per partition, in the order asked for, the newest offset next.

A committed offset reports a partition's progress (lag), and it is where faust seeks a
partition when it is assigned (the engine then seeks to the checkpoint itself). It is not
what makes anything durable, so a checkpoint hands its offset over and goes on (`request`).
A commit goes through faust's consumer thread and the group coordinator: ~1 s under a
backlog of 200,000 events (measured), while a checkpoint's writes take tens of
milliseconds. Had checkpoints waited for their commits, the next checkpoint's changes would
pile up in memory for that second. So a partition has at most one commit under way; offsets
handed over meanwhile are overtaken by newer ones, and only the newest is committed next.

**Order.** Every commit of a partition, the checkpoints' and the one made when the
partition is assigned (`now`), waits for the one under way to be done, so commits land in
the order they were asked for, across rebalances too: a commit from before a revocation
can never land after the one that rewinds the partition to its checkpoint. `forget` (a
revocation) drops the offsets not yet being committed; the one under way is waited for by
the next commit of its partition, never overtaken.

**Failures.** A commit the coordinator did not take (it raised, or answered that the group
rebalanced) is logged and asked for again after `retry_after` seconds, unless a newer
offset was handed over meanwhile or the partition was forgotten; a report of progress is
never dropped while the partition is this worker's.

Every offset handed over is one past a durable checkpoint, so whichever is committed, the
committed offset never passes a checkpoint the broker might still lose.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

log = logging.getLogger("evalstream.worker")


class Commits:
    def __init__(self, commit: Callable[[int, int], Awaitable[bool]], *, retry_after: float = 1.0) -> None:
        """`commit(partition, offset)`: commit it now (the consumer's own commit); whether the
        coordinator took it."""
        self.commit = commit
        self.retry_after = retry_after
        self.failures = 0
        """Commits the coordinator did not take, since the worker started."""
        self._wanted: dict[int, int] = {}
        """Partition -> the newest offset handed over and not yet being committed."""
        self._draining: dict[int, asyncio.Task[None]] = {}
        self._turns: dict[int, asyncio.Lock] = {}
        """Partition -> held by its commit under way; asyncio's locks are first come, first served."""
        self._generation = 0
        """Bumped by `forget`: a retry of an older generation is dropped."""

    def request(self, partition: int, offset: int) -> None:
        """Have `offset` committed for `partition`, after the commit under way, if any."""
        self._wanted[partition] = offset
        if partition not in self._draining:
            self._draining[partition] = asyncio.ensure_future(self._drain(partition))

    def forget(self) -> None:
        """Drop the offsets not yet being committed, and their retries (the partitions may
        have moved; the next owner commits its own)."""
        self._wanted.clear()
        self._generation += 1

    async def now(self, offsets: Mapping[int, int]) -> bool:
        """Commit `offsets` (partition -> offset) once each partition's commit under way is
        done, in place of any offset handed over before; whether every one was taken."""
        for partition in offsets:
            self._wanted.pop(partition, None)
        taken = await asyncio.gather(*(self._commit(partition, offset) for partition, offset in offsets.items()))
        return all(taken)

    async def _drain(self, partition: int) -> None:
        try:
            while (offset := self._wanted.pop(partition, None)) is not None:
                generation = self._generation
                if await self._commit(partition, offset) or generation != self._generation:
                    continue
                self._wanted.setdefault(partition, offset)  # unless a newer one came meanwhile
                await asyncio.sleep(self.retry_after)
        finally:
            del self._draining[partition]

    async def _commit(self, partition: int, offset: int) -> bool:
        async with self._turns.setdefault(partition, asyncio.Lock()):
            try:
                taken = await self.commit(partition, offset)
            except Exception as error:
                taken, why = False, repr(error)
            else:
                why = "the group is rebalancing, or the partition is no longer this worker's"
        if not taken:
            self.failures += 1
            log.warning("could not commit offset %d of partition %d (%s); asking again", offset, partition, why)
        return taken
