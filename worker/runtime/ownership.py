"""Claiming an events partition: fence every earlier writer, then read what they committed.

`claim` is the first thing a worker does with a partition the group gives it, and what it
does again whenever it can no longer trust what it holds of one (its producer was fenced or
failed, or a checkpoint's outcome is unknown). In this order:
1. start the partition's transactional producer (`worker.runtime.transactions`): the broker
   aborts whatever an earlier producer of the partition left open, and refuses it anything
   more;
2. look up the cluster's id and the changelog's and events topic's ids
   (`worker.runtime.identity`);
3. restore the local copy to the changelog's committed end (`worker.runtime.restore`);
4. read the events partition's end, which a checkpoint must not be past.
Only then does the processor read the checkpoint from the copy (`Processor.assign`): the
state it starts from is everything that was ever committed for the partition, and nothing
else.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition

from events.clients.kafka import bootstrapped
from worker.runtime.identity import describe
from worker.runtime.restore import FETCH_BYTES, restore
from worker.runtime.store import Identity, LocalStore
from worker.runtime.transactions import (
    TransactionalIdRefused,
    Transactions,
    TransactionTimeoutRefused,
    start_transactions,
)
from worker.settings import Settings

log = logging.getLogger("evalstream.worker")


@dataclass(frozen=True, slots=True)
class Claim:
    producer: Transactions
    """The partition's producer, started: the only one that can commit for it now."""
    moved: int
    """Changelog records the local copy took in (0: nobody wrote the partition since this
    worker last did)."""
    events_topic: str | None
    """The events topic's id (None: not known)."""
    events_end: int
    """The events partition's end offset: a checkpoint at or past it names records the topic
    does not hold."""


class Claims(Protocol):
    async def claim(self, partition: int) -> Claim: ...


class Fatal(Exception):
    """What a claim fails on that claiming again would fail on too: the worker stops."""


class KafkaClaims:
    def __init__(self, settings: Settings, store: LocalStore) -> None:
        self.settings = settings
        self.store = store

    async def claim(self, partition: int) -> Claim:
        settings = self.settings
        try:
            producer = await start_transactions(settings, partition)
        except (TransactionalIdRefused, TransactionTimeoutRefused) as error:
            raise Fatal(str(error)) from None
        try:
            consumer = AIOKafkaConsumer(
                enable_auto_commit=False,
                isolation_level="read_committed",
                # Past a restore's last record there may be only transaction markers: a fetch
                # the broker held for aiokafka's default half second would wait for nothing.
                fetch_max_wait_ms=20,
                max_partition_fetch_bytes=FETCH_BYTES,
                fetch_max_bytes=FETCH_BYTES,
                **settings.client_options(),
            )
            await bootstrapped(consumer.start(), consumer._client)
            try:
                view = await describe(consumer._client, [settings.changelog_topic, settings.events_topic])
                topic = view.topics.get(settings.changelog_topic)
                if topic is None:
                    raise Fatal(
                        f"the changelog topic {settings.changelog_topic!r} does not exist: "
                        "start the worker again, which creates it"
                    )
                _same_partitions(settings, view.partitions)
                identity = Identity(view.cluster, topic, settings.app_id)
                store, restored = await restore(
                    self.store.partition(partition),
                    consumer,
                    TopicPartition(settings.changelog_topic, partition),
                    identity,
                )
                self.store.replace(partition, store)
                log.info(
                    "partition %d claimed: %d changelog records read into its local copy%s",
                    partition,
                    restored.records,
                    "" if restored.wiped is None else " (wiped first)",
                )
                events = TopicPartition(settings.events_topic, partition)
                consumer.assign([events])
                end = (await consumer.end_offsets([events]))[events]
            finally:
                await consumer.stop()
        except BaseException:
            await producer.close()
            raise
        return Claim(producer, restored.records, view.topics.get(settings.events_topic), end)


def _same_partitions(settings: Settings, counts: dict[str, int]) -> None:
    """Raise `Fatal` if the events topic and the changelog no longer have as many partitions
    (checked at start too, by `worker.runtime.topics.check_topics`): partitions added to the
    events topic while workers ran. A run's events then go to another partition than its
    state, which no claim can mend."""
    events, changelog = counts.get(settings.events_topic), counts.get(settings.changelog_topic)
    if events is not None and changelog is not None and events != changelog:
        raise Fatal(
            f"the events topic {settings.events_topic!r} now has {events} partitions and the changelog "
            f"{settings.changelog_topic!r} {changelog}: partitions were added while the worker ran, and runs' events "
            "now go to other partitions than their state. Stop the workers, and replay the events topic into a new "
            "app id (EVALSTREAM_APP_ID) with topics of as many partitions"
        )
