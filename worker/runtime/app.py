"""The faust app: events topic in; summaries, coalesced progress and dead letters out.

It wires Kafka to the engine and holds no figure logic: `worker.runtime.processor`
decides, the projections compute, `worker.runtime.checkpoint` makes it durable. faust keeps
the consumer group, assignment, the changelog table and its recovery, and the web server;
the events topic's records reach the engine a batch per partition on faust's fetcher task
(`worker.runtime.consumer`), never through a faust stream. Traps avoided
(shared/notes/FAUST.md): raw serializers, keys sent explicitly, errors dead-lettered.

The local RocksDB copy is kept across restarts: it is a prefix of the changelog, checked
against it before the worker starts (`keep_local_state`), so a restart reads only the
changelog's tail (`worker.runtime.changelog`).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Awaitable
from typing import Any

import faust
from faust.types import TP

from events.codec import MAX_EVENT_BYTES
from projections.storage import NewerStore
from worker.runtime import consumer, internals, web
from worker.runtime.archive import TopicArchive
from worker.runtime.changelog import TableState, verify_local_copies
from worker.runtime.engine import Engine
from worker.runtime.metrics import WorkerMetrics
from worker.runtime.outputs import Publish
from worker.runtime.processor import Processor, Record
from worker.settings import SUMMARY_MAX_BYTES, Settings

log = logging.getLogger("evalstream.worker")

ROCKSDB_OPTIONS = {
    "write_buffer_size": 8 * 2**20,
    "max_write_buffer_number": 2,
    "block_cache_size": 32 * 2**20,
    "block_cache_compressed_size": 0,
}
"""Per partition. faust's defaults (a 2 GiB block cache, three 64 MiB write buffers) let
RSS grow with the store for as long as the worker runs; the run cache in front of the store
is what keeps hot runs in memory."""

CHANGELOG_CONFIGS = {
    "segment.ms": str(10 * 60 * 1000),
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": str(10 * 60 * 1000),
}
"""The changelog topic's, past faust's `cleanup.policy=compact`: the broker cleans only
rolled segments, so at Kafka's defaults (a segment rolls at 1 GiB or 7 days, tombstones are
kept a day) the records of retired runs stayed for a week in a worker's changelog and every
restore from its start read them. A reader that misses a tombstone because it was cleaned
mid-read keeps a task record of a retired run, which the run's marker makes unread."""


def _credentials(settings: Settings) -> Any:
    security = settings.security
    if security.protocol == "PLAINTEXT":
        return None
    options = security.options()
    if security.sasl:
        return faust.SASLCredentials(
            username=security.sasl_username,
            password=security.sasl_password,
            mechanism=security.sasl_mechanism,
            ssl_context=options.get("ssl_context"),
        )
    return faust.SSLCredentials(options["ssl_context"])


def keep_local_state(app: faust.App, settings: Settings) -> None:
    """Before the worker starts: wipe the local copies the changelog does not vouch for."""
    table: faust.Table[bytes, bytes] = app.tables["state"]  # type: ignore[assignment]  # the one build_app adds
    paths = {partition: internals.partition_path(table, partition) for partition in range(settings.partitions)}
    asyncio.run(verify_local_copies(settings, table.changelog_topic.get_topic_name(), paths))


def _faust_app(settings: Settings, hooks: consumer.Hooks) -> faust.App:
    app = faust.App(
        settings.app_id,
        broker=[f"kafka://{server}" for server in settings.bootstrap.split(",")],
        broker_credentials=_credentials(settings),
        store="rocksdb://",
        datadir=str(settings.data_dir),
        web_bind=settings.web_host,
        web_port=settings.web_port,
        topic_partitions=settings.partitions,
        key_serializer="raw",
        value_serializer="raw",
        producer_max_request_size=SUMMARY_MAX_BYTES,
        # A 200,000-attempt summary is ~20 MB of JSON; gzip took 8% of the worker in a profile.
        producer_compression_type="zstd",
        producer_linger_ms=5,  # batch the changelog and output writes of consecutive events
        # aiokafka keeps one batch a partition in flight: at its 16 KB default a checkpoint's
        # ~2 KB task records went eight a round trip (10,000 records took 4 s under a backlog,
        # while the next checkpoint's changes piled up in memory).
        producer_max_batch_size=2**20,
        consumer_max_fetch_size=MAX_EVENT_BYTES * 2,
        broker_session_timeout=settings.session_timeout,
        # Offsets are committed by the checkpoints only (`worker.runtime.checkpoint`).
        broker_commit_interval=365 * 24 * 3600.0,
        broker_commit_every=2**62,
        broker_heartbeat_interval=settings.session_timeout / 5,
        # Static membership (KIP-345): a worker restarted under the same name gets its
        # partitions back at once, with no rebalance and no wait for its session to expire.
        consumer_group_instance_id=settings.instance_id,
        # A static member rejoining is given its previous incarnation's assignment, and faust
        # asserts that the assignment names this worker's URL: keep it the name's, whatever
        # the web port (the worker serves no table routes, the URL's only use).
        canonical_url=f"http://{settings.instance_id}" if settings.instance_id else None,
        # A standby's copy is never trusted (worker.runtime.changelog): reading one is waste.
        table_standby_replicas=0,
    )
    consumer.install(app, settings.fetch_max_wait_ms, hooks)
    return app


class _Producer:
    """The outputs, through faust's producer (keyed; partitioned by key)."""

    def __init__(self, app: faust.App, settings: Settings) -> None:
        self.app = app
        self.topics = {
            "summary": settings.summaries_topic,
            "progress": settings.progress_topic,
            "deadletter": settings.deadletter_topic,
        }

    async def send(self, item: Publish) -> Awaitable[Any]:
        headers = list(item.headers) or None
        return await self.app.producer.send(self.topics[item.stream], item.key, item.value, None, None, headers)


class _Seeker:
    def __init__(self, app: faust.App, topic: str) -> None:
        self.app, self.topic = app, topic

    async def seek(self, partition: int, offset: int) -> None:
        await internals.seek_on_thread(self.app, TP(self.topic, partition), offset)


def _refuse(error: NewerStore, refused: list[NewerStore] | None) -> None:
    """Stop the worker as a clean stop does: it consumes nothing more, and waits for what it wrote."""
    log.critical("stopping: %s", error)
    if refused is not None:
        refused.append(error)
    signal.raise_signal(signal.SIGTERM)


def build_app(settings: Settings, refused: list[NewerStore] | None = None) -> faust.App:
    """The worker's app. A store written by a newer version stops it (SIGTERM, as a clean
    stop) before it consumes, the reason appended to `refused` for the command to tell."""
    absent = internals.missing()
    if absent:
        raise RuntimeError("faust internals the worker needs are missing: " + "; ".join(absent))
    # A tenth of the progress window: progress is out at most ~10% after it is due.
    hooks = consumer.Hooks(settings.events_topic, poll=settings.progress_interval / 10)
    app = _faust_app(settings, hooks)
    # faust subscribes the group to the events topic (and co-partitions the table with it)
    # only if an agent reads it; this one never gets a message (see worker.runtime.consumer).
    events = app.topic(settings.events_topic, key_type=bytes, value_type=bytes)
    table: faust.Table[bytes, bytes] = faust.Table(
        app,
        name="state",
        key_type=bytes,
        value_type=bytes,
        partitions=settings.partitions,
        options=ROCKSDB_OPTIONS,
        extra_topic_configs=CHANGELOG_CONFIGS,
    )
    app.tables.add(table)
    state = TableState(app, table, settings.events_topic)
    processor = Processor(
        state,
        topic=settings.events_topic,
        progress_interval=settings.progress_interval,
        flush_every=settings.flush_every,
        cache_runs=settings.cache_runs,
        cache_bytes=settings.cache_mb * 2**20,
        retire=settings.retire_closed,
    )
    archive = TopicArchive(app, settings)

    async def stop_worker(error: BaseException) -> None:
        log.critical("stopping: the broker refused a write the state depends on (%r); a restart resumes safely", error)
        await app.crash(error)

    def highwater(partition: int) -> int | None:
        try:
            return app.consumer.highwater(TP(settings.events_topic, partition))
        except Exception:  # not assigned (any more), or the consumer not started: no figure
            return None

    metrics = WorkerMetrics(processor, highwater, hooks.last_timestamp)
    engine = Engine(
        processor,
        _Producer(app, settings),
        state,
        _Seeker(app, settings.events_topic),
        archive=archive,
        flush_interval=settings.flush_interval,
        clock=time.monotonic,
        on_failure=stop_worker,
        on_checkpoint=metrics.checkpoint_seconds.observe,
    )

    def not_ready() -> str | None:
        if app.rebalancing:
            return "the consumer group is rebalancing"
        if not engine.consuming:
            return "partitions are being restored from the changelog"
        return None

    web.serve(app, not_ready, metrics)

    async def tick() -> None:
        await engine.tick(app.rebalancing)

    async def handle(partition: int, records: list[Record]) -> None:
        if processor.refused is not None:
            return
        try:
            await engine.handle(partition, records)
        except NewerStore as error:
            _refuse(error, refused)

    hooks.tick, hooks.handle = tick, handle

    @app.agent(events, concurrency=1)
    async def subscribe(stream: faust.StreamT[bytes]) -> None:
        async for _ in stream:
            log.error("an events message reached faust's stream; the consumer hook is not installed")

    async def rewind() -> None:
        assigned = [tp.partition for tp in app.consumer.assignment() if tp.topic == settings.events_topic]
        try:
            resume = engine.assigned(assigned)
        except NewerStore as error:
            _refuse(error, refused)  # no partition is sought, so none is consumed
            return
        # faust seeks to the committed offsets right after this callback; committing the
        # checkpoints (backwards is allowed) makes that seek agree with the engine's.
        if resume and not await engine.commit_checkpoints(resume):
            log.warning("could not commit the checkpoints %s (a new rebalance is under way)", resume)

    table.on_recover(rewind)

    @app.on_partitions_revoked.connect
    async def revoked(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        await engine.revoked(timeout=settings.session_timeout)

    @app.on_before_shutdown.connect
    async def shutting_down(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        await engine.revoked(timeout=settings.session_timeout)
        await archive.close()

    return app
