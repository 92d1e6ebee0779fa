"""Which send errors are a refusal of the output (dead-lettered) and which stop the worker."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NotLeaderForPartitionError,
    RecordListTooLargeError,
    TopicAuthorizationFailedError,
)
from faust.exceptions import ProducerSendError

from events import builders
from events.codec import encode
from tests.worker.engine_harness import Broker, Store, new_engine
from worker.runtime.processor import Processor, Record
from worker.runtime.refusals import refusal


def sent_through_faust(error: Exception) -> Exception:
    try:
        raise ProducerSendError(f"Error while sending: {error!r}") from error
    except ProducerSendError as wrapped:
        return wrapped


REFUSALS = [MessageSizeTooLargeError(), RecordListTooLargeError(), TopicAuthorizationFailedError("summaries")]


@pytest.mark.parametrize("error", REFUSALS)
def test_the_brokers_final_no_is_a_refusal_also_through_faust(error: Exception) -> None:
    assert refusal(error) is error
    assert refusal(sent_through_faust(error)) is error


@pytest.mark.parametrize(
    "error", [KafkaTimeoutError(), KafkaConnectionError(), NotLeaderForPartitionError(), RuntimeError("a bug")]
)
def test_an_error_that_says_nothing_about_the_output_is_no_refusal(error: Exception) -> None:
    assert refusal(error) is None
    assert refusal(sent_through_faust(error)) is None


def test_an_output_that_times_out_stops_the_worker_and_is_not_dead_lettered() -> None:
    """A broker gone is not a refusal: the worker stops, and its restart sends it again."""
    store = Store()
    broker = Broker(store)
    engine = new_engine(broker, Processor(store, flush_every=1), lambda: 0.0)

    async def go() -> None:
        engine.assigned([0])
        await engine.tick(rebalancing=False)
        await engine.handle(0, [Record(0, b"run-a", encode(builders.closed("run-a")))])
        [(_, acknowledged)] = [pending for pending in broker._pending if pending[0].stream == "summary"]
        acknowledged.set_exception(KafkaTimeoutError())
        for _ in range(10):
            await asyncio.sleep(0)

    asyncio.run(go())
    assert [type(error) for error in broker.gave_up] == [KafkaTimeoutError]
    assert [write for write in broker.issued if write.stream == "deadletter"] == []


def test_a_refusal_is_counted_once_and_its_dead_letter_names_the_run_and_the_event() -> None:
    store = Store()
    broker = Broker(store, refuse=lambda write: "at once" if write.stream == "summary" else None)
    processor = Processor(store, flush_every=1)
    engine = new_engine(broker, processor, lambda: 0.0)

    async def go() -> None:
        engine.assigned([0])
        await engine.tick(rebalancing=False)
        await engine.handle(0, [Record(0, b"run-a", encode(builders.closed("run-a")))])

    asyncio.run(go())
    [summary] = broker.refused
    [letter] = [write for write in broker.issued if write.stream == "deadletter"]
    headers = dict(letter.headers)
    assert (letter.key, letter.value) == (b"run-a", summary.value)
    assert headers["evalstream.reason"] == b"output-refused"
    assert headers["evalstream.detail"].startswith(b"the broker refused the summary of run 'run-a'")
    assert (headers["evalstream.source.partition"], headers["evalstream.source.offset"]) == (b"0", b"0")
    assert processor.counts.refused == {"summary": 1}
    assert processor.counts.dead_lettered == {"output-refused": 1}
    assert broker.gave_up == []
