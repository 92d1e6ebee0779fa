"""The faust app: events topic in; summaries, coalesced progress and dead letters out.

It moves bytes and holds no figure logic: `worker.processor` decides, the projections
compute. Traps avoided (shared/notes/FAUST.md): raw serializers (no JSON decoding by
faust), one event at a time (no `take()`), concurrency 1, every error caught and
dead-lettered (an exception in an agent would skip the message), keys sent explicitly.

State is written behind (see `worker.processor`): a partition's changes are flushed every
`flush_every` events and by a timer. The state, not the committed offset, decides where a
partition is read from: after every rebalance the worker rewinds each of its partitions to
the checkpoint the table holds, and handles only messages fetched after that rewind
(`Rewind`, `worker.consumer`); until then, nothing of the partition is handled. Committed offsets
follow the checkpoints, for lag reporting and so that faust's own seeks land there too.
Before giving partitions up, the worker waits until the broker has every changelog write
(`worker.changelog`). The local RocksDB copy is wiped at start (`wipe_local_state`): after a
crash it can hold writes the changelog never got, and the changelog is the state every
other worker would see.
"""

from __future__ import annotations

import logging
import shutil
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import faust
from faust.streams import _current_event
from faust.types import TP

from events.codec import MAX_EVENT_BYTES
from worker import changelog, consumer
from worker.processor import Admission, Processor, Publish, Source, dead_letter
from worker.settings import SUMMARY_MAX_BYTES, Settings

log = logging.getLogger("evalstream.worker")


def _credentials(settings: Settings) -> Any:
    if settings.security_protocol == "PLAINTEXT":
        return None
    options = settings.client_options()
    if settings.security_protocol.startswith("SASL"):
        return faust.SASLCredentials(
            username=settings.sasl_username,
            password=settings.sasl_password,
            mechanism=settings.sasl_mechanism,
            ssl_context=options.get("ssl_context"),
        )
    return faust.SSLCredentials(options["ssl_context"])


@contextmanager
def handling(event: faust.EventT[bytes]) -> Iterator[None]:
    """Table writes outside the agent, as if `event` were being handled: faust sends a
    changelog record to the partition of the current event and has no public way to name
    another, so the flush timer borrows the last event seen of the partition it flushes."""
    token = _current_event.set(weakref.ref(event))
    try:
        yield
    finally:
        _current_event.reset(token)


async def commit_offsets(app: faust.App, offsets: dict[TP, int]) -> bool:
    """Commit consumer offsets now (faust's own commit commits what its streams acked)."""
    return bool(await app.consumer._commit(offsets))  # type: ignore[attr-defined]  # the driver's, not ConsumerT's


def wipe_local_state(app: faust.App) -> None:
    shutil.rmtree(app.conf.tabledir, ignore_errors=True)


def _faust_app(settings: Settings) -> faust.App:
    app = faust.App(
        settings.app_id,
        broker=[f"kafka://{server}" for server in settings.bootstrap.split(",")],
        broker_credentials=_credentials(settings),
        store="rocksdb://",
        datadir=str(settings.data_dir),
        web_port=settings.web_port,
        topic_partitions=settings.partitions,
        key_serializer="raw",
        value_serializer="raw",
        producer_max_request_size=SUMMARY_MAX_BYTES,
        # A 200,000-attempt summary is ~20 MB of JSON; gzip took 8% of the worker in a profile.
        producer_compression_type="zstd",
        producer_linger_ms=5,  # batch the changelog and output writes of consecutive events
        consumer_max_fetch_size=MAX_EVENT_BYTES * 2,
        broker_session_timeout=settings.session_timeout,
        # Offsets are committed by the worker after its flushes (see `build_app`).
        broker_commit_interval=365 * 24 * 3600.0,
        broker_commit_every=2**62,
        broker_heartbeat_interval=settings.session_timeout / 5,
    )
    consumer.install(app, settings.fetch_max_wait_ms, fenced=frozenset([settings.events_topic]))
    return app


class Rewind:
    """The table's recovery callback: after every rebalance, each events partition is read
    again from its checkpoint, and only messages fetched after that seek are handled.

    The seek waits for the rebalance to end (`seek_pending`, on a timer): faust clears the
    agents' queues when it resumes the flow at the very end of recovery, after the recovery
    callbacks, so messages fetched after a seek made in the callback could be dropped there,
    and the partition would go on past them."""

    def __init__(self, app: faust.App, topic: str, processor: Processor) -> None:
        self.app, self.topic, self.processor = app, topic, processor
        self.pending: dict[int, int] = {}
        """Partition -> where to seek it once the rebalance is over."""
        self.fences: dict[int, int] = {}
        """Partition -> the fence of its seek (`worker.consumer.seek`)."""

    def forget(self) -> None:
        """Partitions may move: drop the cache and handle nothing until the next rewind."""
        self.processor.forget()
        self.pending.clear()
        self.fences.clear()

    def fenced_in(self, message: faust.types.Message) -> bool:
        return consumer.fetched_after(message, self.fences.get(message.partition))

    async def __call__(self) -> None:
        self.forget()
        assigned = [tp.partition for tp in self.app.consumer.assignment() if tp.topic == self.topic]
        self.pending = self.processor.resume_offsets(assigned)
        if not self.pending:
            return
        resume = {TP(self.topic, p): offset for p, offset in self.pending.items()}
        log.info("resuming %s at %s (the state's checkpoints)", self.topic, resume)
        # faust's own seek, right after recovery callbacks, goes to the committed offset,
        # which the previous owner may have left past the checkpoint; committing the
        # checkpoint (backwards is allowed) makes it start there. Correctness does not
        # depend on it: only what is fetched after `seek_pending` is handled.
        if not await commit_offsets(self.app, resume):
            log.warning("could not commit the checkpoints %s (a new rebalance is under way)", resume)

    async def seek_pending(self) -> None:
        while self.pending and not self.app.rebalancing:
            partition, offset = self.pending.popitem()
            # The fence is held before the seek is made: the first message fetched after
            # it may reach the agent before this coroutine resumes.
            self.fences[partition] = fence = consumer.fence(self.app)
            await consumer.seek(self.app, TP(self.topic, partition), offset, fence)


def build_app(settings: Settings) -> faust.App:
    app = _faust_app(settings)
    events = app.topic(settings.events_topic, key_type=bytes, value_type=bytes)
    outputs = {
        "summary": app.topic(settings.summaries_topic, key_type=bytes, value_type=bytes),
        "progress": app.topic(settings.progress_topic, key_type=bytes, value_type=bytes),
        "deadletter": app.topic(settings.deadletter_topic, key_type=bytes, value_type=bytes),
    }
    state = changelog.Table(app, name="state", key_type=bytes, value_type=bytes, partitions=settings.partitions)
    app.tables.add(state)
    processor = Processor(settings.progress_interval, store=state, flush_every=settings.flush_every)
    last_event: dict[int, faust.EventT[bytes]] = {}
    rewind = Rewind(app, settings.events_topic, processor)
    state.on_recover(rewind)

    @app.on_partitions_revoked.connect
    async def forget_runs(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        rewind.forget()
        last_event.clear()
        await state.acknowledged(timeout=settings.session_timeout)

    @app.on_before_shutdown.connect
    async def shutting_down(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        await state.acknowledged(timeout=settings.session_timeout)

    async def commit(partition: int, offset: int | None) -> None:
        if offset is not None:
            await commit_offsets(app, {TP(settings.events_topic, partition): offset})

    async def publish(items: Iterable[Publish]) -> None:
        for item in items:
            await outputs[item.stream].send(key=item.key, value=item.value, headers=list(item.headers))

    @app.agent(events, concurrency=1)
    async def fold(stream: faust.StreamT[bytes]) -> None:
        async for event in stream.events():
            message = event.message
            if not rewind.fenced_in(message):
                continue  # fetched before the partition's rewind: it is read again after it
            source = Source(message.topic, message.partition, message.offset)
            admission = processor.admit(source)
            if admission is Admission.SKIP:
                continue
            if admission is Admission.AHEAD:
                log.warning(
                    "%s: offsets %d to %d are not in the topic (transaction markers, or deleted by retention)",
                    source.topic,
                    processor.next_offset(source.partition),
                    source.offset - 1,
                )
            key = event.key if isinstance(event.key, bytes) else None
            value = event.value if isinstance(event.value, bytes) else b""
            try:
                items = processor.handle(key, value, source)
            except Exception as error:  # a bug must not stop the run: dead-letter it, go on
                log.exception("internal error on %s", source)
                items = [dead_letter(key, value, "internal-error", repr(error), source)]
            last_event[source.partition] = event
            if processor.flush_due(source.partition):
                await commit(source.partition, processor.flush(source.partition))
            await publish(items)

    @app.timer(interval=0.05)
    async def resume_reading() -> None:
        await rewind.seek_pending()

    @app.timer(interval=settings.flush_interval)
    async def flush_state() -> None:
        # Never write once partitions may belong to someone else (a rebalance or a stop
        # suspends the flow first): the new owner may already have read the changelog,
        # and a late write would mix two owners' records. What was not flushed is redone
        # from the checkpoint by whoever owns the partition next.
        if app.rebalancing or not app.flow_control.is_active():
            return
        for partition in processor.unflushed():
            with handling(last_event[partition]):
                committable = processor.flush(partition)
            await commit(partition, committable)

    # A tenth of the coalescing window: progress is out at most ~10% after it is due.
    @app.timer(interval=settings.progress_interval / 10)
    async def flush_progress() -> None:
        await publish(processor.progress_due())

    return app
