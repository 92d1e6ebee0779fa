"""The worker's table: faust's, with two changes to how its changelog is trusted.

A worker giving partitions up (a rebalance, a stop) must not leave changelog writes in
flight: the next owner restores the changelog up to the end it sees when it starts, and a
record of the previous owner landing after that would sit behind the new owner's records
and bring back an older state on the restore after. faust flushes its producer before
letting partitions go, but that flush gives up on a message after 0.1 s
(`ProducerBuffer.flush_atmost`), so the worker also waits for each write's acknowledgement.

A local copy is never trusted to be complete up to the offset faust recorded for it
(`persisted_offset`): faust drops the changelog records waiting in its queue each time it
resumes the flow at the end of a recovery, and a standby replica then reads on past them,
so its copy has holes behind an offset that says it is up to date. Seen in the rebalance
scenario: a standby promoted to active without reading anything restored runs hundreds of
events short of their checkpoint, whose records the changelog held. So a partition that
becomes active is read from the changelog's start (compaction keeps it near one record per
task and run), not from where its local copy claims to be.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust
from faust.types import TP, FutureMessage

log = logging.getLogger("evalstream.worker")


class Table(faust.Table[bytes, bytes]):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unacknowledged: set[FutureMessage] = set()

    def send_changelog(self, *args: Any, **kwargs: Any) -> FutureMessage:
        sent: FutureMessage = super().send_changelog(*args, **kwargs)
        self._unacknowledged.add(sent)
        sent.add_done_callback(self._unacknowledged.discard)
        return sent

    def persisted_offset(self, tp: TP) -> int | None:
        return None

    async def acknowledged(self, timeout: float) -> bool:
        """Wait until the broker has acknowledged every write so far; False, and an error
        logged, if it has not after `timeout` seconds."""
        pending = list(self._unacknowledged)
        if not pending:
            return True
        _, late = await asyncio.wait(pending, timeout=timeout)
        if late:
            log.error(
                "%d changelog writes not acknowledged after %.0fs: the next owner of their partitions "
                "may restore an older state; check the broker",
                len(late),
                timeout,
            )
        return not late
