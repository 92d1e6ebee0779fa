"""The worker's writes to Kafka: one transactional producer per owned events partition.

Every record the worker writes because of an events partition (its summaries, progress and
dead letters, its changelog records, its archive records) and the consumer group's offset of
that partition are written by that partition's producer, in Kafka transactions
(`worker.runtime.checkpoint` says what one holds). Its transactional id,
`<app id>-<partition>`, is the partition's, whichever worker owns it: a worker that takes a
partition over starts a producer under that id, and the broker then aborts whatever the
previous producer had not committed and refuses it anything more (it is fenced, KIP-98). So
a worker that stalled past its session and woke up can no longer write for a partition that
has moved: its next write fails with `ProducerFenced`.

`Transactions` is what the checkpoint needs of a producer; `KafkaTransactions` is aiokafka's,
and `tests/worker/runtime/engine_harness.py` has a broker in memory with the same rules.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterator
from typing import Any, Literal, Protocol

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    IllegalOperation,
    InvalidProducerEpoch,
    InvalidTransactionTimeout,
    ProducerFenced,
    TransactionalIdAuthorizationFailed,
)

from worker.runtime.outputs import Headers, Output, Publish
from worker.settings import SUMMARY_MAX_BYTES, Settings

Stream = Output | Literal["changelog", "archive"]


class Transactions(Protocol):
    """One events partition's producer, as the checkpoint uses it."""

    def topic(self, stream: Stream) -> str:
        """The topic a stream's records go to."""
        ...

    async def begin(self) -> None: ...

    async def send(
        self, stream: Stream, key: bytes | None, value: bytes | None, *, partition: int | None, headers: Headers = ()
    ) -> Awaitable[int]:
        """Send a record in the open transaction (`partition` None: by key); the awaitable
        resolves to its offset once the broker has it, or raises what the broker answered.
        Raises at once what the producer refuses before sending (a record too large)."""
        ...

    async def output(self, item: Publish) -> Awaitable[int]:
        """`send` an output, keyed, with its CloudEvents headers (`worker.runtime.outputs`)."""
        ...

    async def commit(self, offset: int | None) -> None:
        """Commit the open transaction, with `offset` as the consumer group's offset of the
        events partition (None: no offset)."""
        ...

    async def abort(self) -> None:
        """Abort the open transaction, if any (best effort, and within `CLOSE_SECONDS`: a
        fenced producer cannot, a broker away may not answer)."""
        ...

    async def close(self) -> None:
        """Close the producer, within `CLOSE_SECONDS` whatever the broker does."""
        ...


FENCED = (ProducerFenced, InvalidProducerEpoch)
"""What a producer gets once another producer of its transactional id has started, or once
the broker aborted its transaction for running past the transaction timeout (the
coordinator bumps the epoch then). A coordinator that forgot the id
(`InvalidProducerIdMapping`) or a transaction in a state the broker did not expect
(`InvalidTxnState`) is not another owner: the partition's producer is renewed at once."""

CLOSE_SECONDS = 5.0
"""The longest an abort, and then a close, waits for the broker. aiokafka's idempotent
producer retries a batch until the broker takes it and `stop()` waits for every batch, so
while the broker is away neither would end; past this bound the producer is dropped
unflushed. Nothing is lost: its transaction never commits (the next producer of its id
aborts it, or the broker does after the transaction timeout)."""


def causes(error: BaseException) -> Iterator[BaseException]:
    """`error`, then what it was raised from, and so on (faust raises its errors from
    aiokafka's)."""
    seen: BaseException | None = error
    while seen is not None:
        yield seen
        seen = seen.__cause__


def fenced(error: BaseException) -> bool:
    return any(isinstance(seen, FENCED) for seen in causes(error))


class TransactionalIdRefused(TransactionalIdAuthorizationFailed):  # type: ignore[misc]  # aiokafka is untyped
    """The worker's user may not use the partition's transactional id."""


def transactional_id(settings: Settings, partition: int) -> str:
    return f"{settings.app_id}-{partition}"


class KafkaTransactions:
    def __init__(self, producer: AIOKafkaProducer, settings: Settings, partition: int) -> None:
        self.producer = producer
        self.group = settings.app_id
        self.source = f"/evalstream/{settings.app_id}"
        """`ce_source` of the outputs (`worker.runtime.outputs`)."""
        self.events = TopicPartition(settings.events_topic, partition)
        self.topics: dict[Stream, str] = {
            "summary": settings.summaries_topic,
            "progress": settings.progress_topic,
            "deadletter": settings.deadletter_topic,
            "changelog": settings.changelog_topic,
            "archive": settings.archive_topic,
        }

    def topic(self, stream: Stream) -> str:
        return self.topics[stream]

    async def begin(self) -> None:
        await self.producer.begin_transaction()

    async def send(
        self, stream: Stream, key: bytes | None, value: bytes | None, *, partition: int | None, headers: Headers = ()
    ) -> Awaitable[int]:
        try:
            sent = await self.producer.send(
                self.topics[stream], value, key, partition=partition, headers=list(headers) or None
            )
        except IllegalOperation as error:
            # aiokafka's word for "the transaction already failed": the failure itself (a
            # topic the broker would not add to it) says what is wrong.
            raise self._failure() or error from None
        return _offset(sent)

    def _failure(self) -> BaseException | None:
        """Why the open transaction failed (aiokafka keeps it for the commit to raise)."""
        outcome: asyncio.Future[None] | None = self.producer._txn_manager._transaction_waiter
        if outcome is None or not outcome.done() or outcome.cancelled():
            return None
        return outcome.exception()

    async def output(self, item: Publish) -> Awaitable[int]:
        return await self.send(item.stream, item.key, item.value, partition=None, headers=item.cloudevent(self.source))

    async def commit(self, offset: int | None) -> None:
        if offset is not None:
            await self.producer.send_offsets_to_transaction({self.events: offset}, self.group)
        await self.producer.commit_transaction()

    async def abort(self) -> None:
        # The transaction's failure, if any, is known already (what its records raised): read,
        # so that asyncio does not log it as never retrieved.
        self._failure()
        # Not in a transaction, fenced, or the broker away: nothing of it commits either way.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.producer.abort_transaction(), CLOSE_SECONDS)

    async def close(self) -> None:
        await closed(self.producer)


async def _offset(sent: Awaitable[Any]) -> int:
    offset: int = (await sent).offset
    return offset


async def closed(producer: AIOKafkaProducer) -> None:
    """Stop `producer`, within `CLOSE_SECONDS` (then dropped unflushed: its sender's loop
    cancelled, its connections closed)."""
    try:
        await asyncio.wait_for(producer.stop(), CLOSE_SECONDS)
        return
    except Exception:  # the broker away, or the producer failed: drop it
        pass
    sender = producer._sender.sender_task
    if sender is not None:
        sender.cancel()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(producer.client.close(), CLOSE_SECONDS)
    if sender is not None:
        await asyncio.wait([sender], timeout=CLOSE_SECONDS)


class TransactionTimeoutRefused(InvalidTransactionTimeout):  # type: ignore[misc]  # aiokafka is untyped
    """The broker's `transaction.max.timeout.ms` is below the worker's transaction timeout."""


async def start_transactions(settings: Settings, partition: int) -> KafkaTransactions:
    """A new producer of the partition, started: from here on no earlier producer of the
    partition (another worker's, or this one's) can commit anything."""
    producer = AIOKafkaProducer(
        transactional_id=transactional_id(settings, partition),
        transaction_timeout_ms=round(settings.transaction_timeout * 1000),
        max_request_size=SUMMARY_MAX_BYTES,
        # A 200,000-attempt summary is ~20 MB of JSON; gzip took 8% of the worker in a profile.
        compression_type="zstd",
        # A checkpoint's records are sent at once, and wait for their partitions to join the
        # transaction before they go anyway: a linger would only lengthen the commit.
        linger_ms=0,
        # aiokafka keeps one batch a partition in flight: at its 16 KB default a checkpoint's
        # ~2 KB task records went eight a round trip.
        max_batch_size=2**20,
        **settings.client_options(),
    )
    try:
        await producer.start()
    except TransactionalIdAuthorizationFailed:
        await closed(producer)
        raise TransactionalIdRefused(
            f"the broker refused the worker the transactional id {transactional_id(settings, partition)!r}: "
            f"grant its user WRITE and DESCRIBE on transactional ids with the prefix {settings.app_id!r}"
        ) from None
    except InvalidTransactionTimeout:
        await closed(producer)
        raise TransactionTimeoutRefused(
            f"the broker refused the worker's transaction timeout of {settings.transaction_timeout:g} s: it is "
            "above the broker's transaction.max.timeout.ms. Lower EVALSTREAM_TRANSACTION_TIMEOUT, or raise "
            "transaction.max.timeout.ms on every broker"
        ) from None
    except BaseException:
        await asyncio.shield(closed(producer))
        raise
    return KafkaTransactions(producer, settings, partition)
