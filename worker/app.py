"""The faust app: events topic in; summaries, coalesced progress and dead letters out.

It moves bytes and holds no figure logic: `worker.processor` decides, the projections
compute. Traps avoided (shared/notes/FAUST.md): raw serializers (no JSON decoding by
faust), one event at a time (no `take()`), concurrency 1, every error caught and
dead-lettered (an exception in an agent would skip the message), keys sent explicitly.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import faust

from events.codec import MAX_EVENT_BYTES
from worker.processor import Processor, Publish, Source, dead_letter
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


def build_app(settings: Settings) -> faust.App:
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
        producer_compression_type="gzip",  # a 200,000-attempt summary is ~20 MB of JSON
        producer_linger_ms=5,  # batch the changelog and output writes of consecutive events
        consumer_max_fetch_size=MAX_EVENT_BYTES * 2,
    )
    events = app.topic(settings.events_topic, key_type=bytes, value_type=bytes)
    outputs = {
        "summary": app.topic(settings.summaries_topic, key_type=bytes, value_type=bytes),
        "progress": app.topic(settings.progress_topic, key_type=bytes, value_type=bytes),
        "deadletter": app.topic(settings.deadletter_topic, key_type=bytes, value_type=bytes),
    }
    state = app.Table("state", key_type=bytes, value_type=bytes, partitions=settings.partitions)
    processor = Processor(settings.progress_interval, store=state)

    @app.on_partitions_revoked.connect
    async def forget_runs(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        processor.forget()

    async def publish(items: Iterable[Publish]) -> None:
        for item in items:
            await outputs[item.stream].send(key=item.key, value=item.value, headers=list(item.headers))

    @app.agent(events, concurrency=1)
    async def fold(stream: faust.StreamT[bytes]) -> None:
        async for event in stream.events():
            message = event.message
            source = Source(message.topic, message.partition, message.offset)
            key = event.key if isinstance(event.key, bytes) else None
            value = event.value if isinstance(event.value, bytes) else b""
            try:
                items = processor.handle(key, value, source)
            except Exception as error:  # a bug must not stop the run: dead-letter it, go on
                log.exception("internal error on %s", source)
                items = [dead_letter(key, value, "internal-error", repr(error), source)]
            await publish(items)

    @app.timer(interval=settings.progress_interval / 4)
    async def flush_progress() -> None:
        await publish(processor.progress_due())

    return app
