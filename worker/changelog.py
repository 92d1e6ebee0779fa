"""The worker's table: faust's, plus a way to wait until every write has reached the broker.

A worker giving partitions up (a rebalance, a stop) must not leave changelog writes in
flight: the next owner restores the changelog up to the end it sees when it starts, and a
record of the previous owner landing after that would sit behind the new owner's records
and bring back an older state on the restore after. faust flushes its producer before
letting partitions go, but that flush gives up on a message after 0.1 s
(`ProducerBuffer.flush_atmost`), so the worker also waits for each write's acknowledgement.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust
from faust.types import FutureMessage

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
