"""Offset commits: one at a time per partition, of the newest offset handed over.

A committed offset reports a partition's progress (lag), and it is where faust seeks a
partition when it is assigned (the engine then seeks to the checkpoint itself). It is not
what makes anything durable, so a checkpoint hands its offset over and goes on. A commit
goes through faust's consumer thread and the group coordinator: ~1 s under a backlog of
200,000 events (measured), while a checkpoint's writes take tens of milliseconds. Had
checkpoints waited for their commits, the next checkpoint's changes would pile up in memory
for that second. So a partition has at most one commit under way; offsets handed over
meanwhile are overtaken by newer ones, and only the newest is committed next.

Every offset handed over is one past a durable checkpoint, so whichever is committed, and
in whatever order commits from before a rebalance land, the committed offset never passes
a checkpoint the broker might still lose.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("evalstream.worker")


class Commits:
    def __init__(self, commit: Callable[[int, int], Awaitable[Any]]) -> None:
        """`commit(partition, offset)`: commit it now (the consumer's own commit)."""
        self.commit = commit
        self._wanted: dict[int, int] = {}
        """Partition -> the newest offset handed over and not yet being committed."""
        self._committing: dict[int, asyncio.Task[None]] = {}

    def request(self, partition: int, offset: int) -> None:
        """Have `offset` committed for `partition`, after the commit under way, if any."""
        self._wanted[partition] = offset
        if partition not in self._committing:
            self._committing[partition] = asyncio.ensure_future(self._commit_wanted(partition))

    def forget(self) -> None:
        """Drop the offsets not yet being committed (the partitions may have moved; the next
        owner commits its own)."""
        self._wanted.clear()

    async def _commit_wanted(self, partition: int) -> None:
        try:
            while (offset := self._wanted.pop(partition, None)) is not None:
                try:
                    await self.commit(partition, offset)
                except Exception as error:  # a report of progress: the next checkpoint's commit retries it
                    log.warning("could not commit offset %d of partition %d: %r", offset, partition, error)
        finally:
            del self._committing[partition]
