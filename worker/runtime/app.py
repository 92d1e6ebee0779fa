"""The faust app: events topic in; summaries, coalesced progress and dead letters out.

It wires Kafka to the engine and holds no figure logic: `worker.runtime.processor`
decides, the projections compute, `worker.runtime.checkpoint` makes it durable, in one
Kafka transaction per checkpoint. faust keeps the consumer group, assignment, and the web
server; the events topic's records reach the engine a batch per partition on faust's
fetcher task (`worker.runtime.consumer`), never through a faust stream. The state is the
worker's own: a local copy of its changelog per partition (`worker.runtime.store`),
restored by the worker when it claims a partition (`worker.runtime.ownership`), not by
faust's table recovery. Traps of faust avoided: raw serializers, keys sent
explicitly, errors dead-lettered.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterable
from typing import Any

import faust
from faust.types import TP

from events.codec import MAX_EVENT_BYTES
from projections.step import RollbackFailed
from projections.storage import NewerStore
from worker.runtime import consumer, internals, web
from worker.runtime.archive import TopicArchive
from worker.runtime.engine import Engine
from worker.runtime.metrics import WorkerMetrics
from worker.runtime.ownership import Fatal, KafkaClaims
from worker.runtime.processor import EventsTopicChanged, Processor, Record
from worker.runtime.store import Change, LocalStore
from worker.runtime.transactions import CLOSE_SECONDS
from worker.settings import Settings

log = logging.getLogger("evalstream.worker")

STOPS = (NewerStore, EventsTopicChanged, Fatal, RollbackFailed)
"""What stops the worker as a clean stop does, its reason told by the command (exit 1):
restarting would meet it again."""

STOP_GRACE = 10.0
"""Seconds faust's own services get to stop after the partitions are let go."""


def stop_bound(settings: Settings) -> float:
    """The longest a stop takes, whatever the broker does: the last checkpoints' wait (half the
    session timeout), the producers' aborts and closes (`CLOSE_SECONDS` each), and
    `STOP_GRACE` for faust's services (its consumer's own close waits on a broker that is
    away). Past it the process exits anyway: what it had not committed, the partitions' next
    owner reads again, and its open transactions that owner's claim aborts."""
    return settings.session_timeout / 2 + 2 * CLOSE_SECONDS + STOP_GRACE


def _exit_after(seconds: float, stopped: list[BaseException] | None) -> None:
    """Exit the process `seconds` from now unless it has exited by then (a daemon timer)."""

    def exit_now() -> None:
        log.error(
            "the worker did not stop within %.0f s (the broker does not answer): exiting now; the next owner of its "
            "partitions reads again what it had not committed",
            seconds,
        )
        logging.shutdown()
        os._exit(1 if stopped else 0)

    timer = threading.Timer(seconds, exit_now)
    timer.daemon = True
    timer.start()


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


def _faust_app(settings: Settings, hooks: consumer.Hooks) -> faust.App:
    app = faust.App(
        settings.app_id,
        broker=[f"kafka://{server}" for server in settings.bootstrap.split(",")],
        broker_credentials=_credentials(settings),
        web_bind=settings.web_host,
        web_port=settings.web_port,
        topic_partitions=settings.partitions,
        key_serializer="raw",
        value_serializer="raw",
        consumer_max_fetch_size=MAX_EVENT_BYTES * 2,
        broker_session_timeout=settings.session_timeout,
        # Offsets are committed by the checkpoints' transactions only (`worker.runtime.checkpoint`).
        broker_commit_interval=365 * 24 * 3600.0,
        broker_commit_every=2**62,
        broker_heartbeat_interval=settings.session_timeout / 5,
        # Partitions added to the events topic show at the next metadata refresh, and the worker
        # stops at that rebalance (`worker.runtime.ownership`): within 30 s, not aiokafka's 5 min,
        # while the events of runs whose keys moved wait unread.
        consumer_metadata_max_age_ms=30_000,
        # Static membership (KIP-345): a worker restarted under the same name gets its
        # partitions back at once, with no rebalance and no wait for its session to expire.
        consumer_group_instance_id=settings.instance_id,
        # A static member rejoining is given its previous incarnation's assignment, and faust
        # asserts that the assignment names this worker's URL: keep it the name's, whatever
        # the web port (the worker serves no table routes, the URL's only use).
        canonical_url=f"http://{settings.instance_id}" if settings.instance_id else None,
    )
    consumer.install(app, settings.fetch_max_wait_ms, hooks)
    return app


class _Seeker:
    def __init__(self, app: faust.App, topic: str) -> None:
        self.app, self.topic = app, topic

    async def seek(self, partition: int, offset: int) -> None:
        await internals.seek_on_thread(self.app, TP(self.topic, partition), offset)


class _Committed:
    """The local copy, as the engine puts committed checkpoints in it."""

    def __init__(self, store: LocalStore) -> None:
        self.store = store

    def apply(self, partition: int, changes: Iterable[Change], offset: int) -> None:
        self.store.partition(partition).apply(changes, offset)


def build_app(settings: Settings, stopped: list[BaseException] | None = None) -> faust.App:
    """The worker's app. What the worker cannot go on from (a store written by a newer
    version, an events topic recreated, a transactional id refused: `STOPS`) stops it as a
    clean stop does (SIGTERM), before it consumes what it cannot fold, its reason appended
    to `stopped` for the command to tell."""
    absent = internals.missing()
    if absent:
        raise RuntimeError("faust internals the worker needs are missing: " + "; ".join(absent))
    # A tenth of the progress window: progress is out at most ~10% after it is due.
    hooks = consumer.Hooks(settings.events_topic, poll=settings.progress_interval / 10)
    app = _faust_app(settings, hooks)
    # faust subscribes the group to the events topic only if an agent reads it; this one
    # never gets a message (see worker.runtime.consumer).
    events = app.topic(settings.events_topic, key_type=bytes, value_type=bytes)
    store = LocalStore(settings.data_dir / settings.app_id)
    processor = Processor(
        store,
        topic=settings.events_topic,
        progress_interval=settings.progress_interval,
        flush_every=settings.flush_every,
        cache_runs=settings.cache_runs,
        cache_bytes=settings.cache_mb * 2**20,
        retire=settings.retire_closed,
        native=settings.native_fold,
    )
    archive = TopicArchive(settings)

    async def stop_worker(error: BaseException) -> None:
        if isinstance(error, STOPS):
            if stopped is not None:
                stopped.append(error)
            signal.raise_signal(signal.SIGTERM)  # consumes nothing more, and waits for what it wrote
            return
        log.critical("stopping: %r; a restart resumes from what was committed", error)
        await app.crash(error)

    def highwater(partition: int) -> int | None:
        try:
            return app.consumer.highwater(TP(settings.events_topic, partition))
        except Exception:  # not assigned (any more), or the consumer not started: no figure
            return None

    engine = Engine(
        processor,
        KafkaClaims(settings, store),
        _Committed(store),
        _Seeker(app, settings.events_topic),
        archive=archive,
        flush_interval=settings.flush_interval,
        clock=time.monotonic,
        on_failure=stop_worker,
        reclaim_after=settings.session_timeout,
        write_timeout=settings.transaction_timeout,
    )
    metrics = WorkerMetrics(processor, engine.counts, highwater, hooks.last_timestamp, store_memory=store.memory)
    engine.on_checkpoint = metrics.checkpoint_seconds.observe

    def not_ready() -> str | None:
        if app.rebalancing:
            return "the consumer group is rebalancing"
        if engine.counts.failing:
            return "; ".join(
                f"partition {partition} keeps failing ({error})"
                for partition, error in sorted(engine.counts.failing.items())
            )
        if not engine.consuming:
            return "partitions are being claimed and restored from the changelog"
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
            await stop_worker(error)

    hooks.tick, hooks.handle = tick, handle

    @app.agent(events, concurrency=1)
    async def subscribe(stream: faust.StreamT[bytes]) -> None:
        async for _ in stream:
            log.error("an events message reached faust's stream; the consumer hook is not installed")

    @app.on_partitions_assigned.connect
    async def assigned(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        engine.assigned(tp.partition for tp in args[0] if tp.topic == settings.events_topic)

    @app.on_partitions_revoked.connect
    async def revoked(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        await engine.revoked(timeout=settings.session_timeout / 2)

    @app.on_before_shutdown.connect
    async def shutting_down(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        _exit_after(stop_bound(settings), stopped)
        await engine.revoked(timeout=settings.session_timeout / 2)
        await archive.close()
        store.close()

    return app
