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

from events.codec import encode
from tests import builders
from tests.worker.runtime.engine_harness import Broker, run, worker
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


def test_an_output_that_times_out_is_no_refusal_and_its_partition_is_read_again() -> None:
    """A broker gone is not a refusal: nothing of the checkpoint is committed, the partition
    is read again from its checkpoint, and the summary is committed once, not dead-lettered."""
    timeouts = [KafkaTimeoutError()]

    def fail(step: str) -> BaseException | None:
        return timeouts.pop() if step == "answer" and timeouts else None

    broker = Broker(fail=fail)
    solo = worker(broker, [(0, b"run-a", encode(builders.closed("run-a")))], flush_every=1)

    async def go() -> None:
        solo.engine.assigned([0])
        await run(solo)

    asyncio.run(go())
    assert [write.stream for write in broker.outputs() if write.stream != "progress"] == ["summary"]
    assert solo.engine.counts.redone == 1
    assert solo.gave_up == []


def test_a_refusal_is_counted_once_and_its_dead_letter_names_the_run_and_the_event() -> None:
    broker = Broker(refuse=lambda write: "at once" if write.stream == "summary" else None)
    solo = worker(broker, [(0, b"run-a", encode(builders.closed("run-a")))], flush_every=1)

    async def go() -> None:
        solo.engine.assigned([0])
        await run(solo)

    asyncio.run(go())
    [summary] = broker.refused
    [letter] = [write for write in broker.committed if write.stream == "deadletter"]
    headers = dict(letter.headers)
    assert (letter.key, letter.value) == (b"run-a", summary.value)
    assert headers["evalstream.reason"] == b"output-refused"
    assert headers["evalstream.detail"].startswith(b"the broker refused the summary of run 'run-a'")
    assert (headers["evalstream.source.partition"], headers["evalstream.source.offset"]) == (b"0", b"0")
    assert solo.processor.counts.refused == {"summary": 1}
    assert solo.processor.counts.dead_lettered == {"output-refused": 1}
    assert solo.gave_up == []
