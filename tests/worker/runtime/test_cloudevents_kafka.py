"""Every record the worker writes to the progress, summaries and dead-letter topics is a
CloudEvent in Kafka's binary mode, read back here with the CloudEvents SDK over a real broker:
its attributes in `ce_*` headers, its value unchanged as the event's data."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from cloudevents.core.base import BaseCloudEvent
from cloudevents.core.bindings.kafka import KafkaMessage, from_binary_event

from events.codec import encode
from tests import builders
from worker.commands.clients import publish
from worker.local.processes import WorkerProcess
from worker.local.records import Record, read_topic

pytestmark = pytest.mark.kafka


def cloudevent(record: Record) -> BaseCloudEvent:
    return from_binary_event(KafkaMessage(record.headers, record.key, record.value))


def test_every_output_reads_back_as_a_cloudevent_in_binary_mode(worker: WorkerProcess) -> None:
    settings = worker.settings
    worker.wait_serving()
    began = datetime.now(UTC) - timedelta(seconds=1)
    events = [builders.started("ce-run", [builders.task_spec("t")]), builders.trial("t", "t-1", run_id="ce-run")]
    events.append(builders.closed("ce-run"))
    bad = b'{"schema_version": 1, "type": "nope"}'
    lines = [encode(event) for event in events]
    asyncio.run(publish(settings, [*lines[:1], bad, *lines[1:]]))
    source = f"/evalstream/{settings.app_id}".encode()

    [summary] = [r for r in read_topic(settings, settings.summaries_topic, until=1) if r.key == b"ce-run"]
    progress = [r for r in read_topic(settings, settings.progress_topic, until=1) if r.key == b"ce-run"]
    [letter] = read_topic(settings, settings.deadletter_topic, until=1)

    event = cloudevent(summary)
    assert event.get_type() == "dev.evalstream.run.summary"
    assert event.get_source() == source.decode()
    assert event.get_id() == "ce-run/summary/1"
    assert event.get_datacontenttype() == "application/json"
    assert event.get_data() == orjson.loads(summary.value)
    time = event.get_time()
    assert time is not None
    assert began <= time <= datetime.now(UTC)

    ids = set()
    for record in progress:
        event = cloudevent(record)
        assert event.get_type() == "dev.evalstream.run.progress"
        assert event.get_data() == orjson.loads(record.value)
        ids.add(event.get_id())
    assert ids == {f"ce-run/progress/{orjson.loads(record.value)['seq']}" for record in progress}

    event = cloudevent(letter)
    assert event.get_type() == "dev.evalstream.deadletter"
    assert event.get_id() == f"{settings.events_topic}/0/1"
    assert event.get_datacontenttype() == "application/octet-stream"
    assert letter.value == bad  # unchanged, with its evalstream.* headers beside the CloudEvents ones
    assert letter.headers["evalstream.reason"] == b"unknown-type"
