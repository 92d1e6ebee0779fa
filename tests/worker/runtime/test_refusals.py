"""Which errors of the real client are a refusal of a record (dead-lettered), which stop the
worker, and which say nothing about any record (the producer renewed, the write tried again)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest
from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    CorruptRecordException,
    GroupAuthorizationFailedError,
    IllegalOperation,
    InvalidProducerEpoch,
    InvalidProducerIdMapping,
    InvalidTimestampError,
    InvalidTransactionTimeout,
    InvalidTxnState,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NotEnoughReplicasError,
    NotLeaderForPartitionError,
    OutOfOrderSequenceNumber,
    PolicyViolationError,
    ProducerClosed,
    ProducerFenced,
    RecordListTooLargeError,
    RequestTimedOutError,
    SaslAuthenticationFailed,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
    UnknownError,
    UnknownProducerId,
    UnsupportedVersionError,
    for_code,
)
from faust.exceptions import ProducerSendError

from events.codec import encode
from events.models import InputEvent
from tests import builders
from tests.worker.runtime.engine_harness import Broker, Message, run, too_large, worker
from worker.runtime.engine import FAILING_AFTER
from worker.runtime.ownership import Fatal
from worker.runtime.refusals import InvalidRecordError, fatal, refusal, why_fatal


def wrapped(error: Exception) -> Exception:
    """`error` as a caller's error raised from it (faust's `ProducerSendError` wraps so)."""
    try:
        raise ProducerSendError(f"Error while sending: {error!r}") from error
    except ProducerSendError as outer:
        return outer


REFUSALS = [
    MessageSizeTooLargeError(),
    RecordListTooLargeError(),
    CorruptRecordException(),
    InvalidRecordError(),
    PolicyViolationError(),
    InvalidTimestampError(),
    TopicAuthorizationFailedError("summaries"),  # a produce answer names its topic
    TopicAuthorizationFailedError({"summaries", "progress"}),  # AddPartitionsToTxn's, the set of topics
]


@pytest.mark.parametrize("error", REFUSALS, ids=lambda error: type(error).__name__)
def test_the_brokers_final_no_about_a_record_is_a_refusal_also_when_wrapped(error: Exception) -> None:
    assert refusal(error, "summaries") is error
    assert refusal(wrapped(error), "summaries") is error


def test_a_topic_the_broker_refused_is_a_refusal_only_of_that_topics_records() -> None:
    refused = TopicAuthorizationFailedError({"summaries"})
    assert refusal(refused, "progress") is None
    assert refusal(refused, None) is None, "the changelog's authorisation is the worker's, not a record's"
    assert fatal(refused) is refused


def sender_died(cause: Exception) -> KafkaError:
    """aiokafka's sender, when its loop dies, fails every pending batch with this wrapper."""
    try:
        raise KafkaError("Unexpected error during batch delivery") from cause
    except KafkaError as error:
        return error


NO_REFUSALS = [
    KafkaTimeoutError(),
    KafkaConnectionError(),
    NotLeaderForPartitionError(),
    NotEnoughReplicasError(),
    RequestTimedOutError(),
    UnknownError(),  # a code aiokafka does not know: nothing is known of the record
    RuntimeError("a bug"),
    IllegalOperation("Can't send messages while not in transaction"),
    # The producer's, not the record's: a fenced producer's records in flight fail so.
    ProducerFenced(),
    InvalidProducerEpoch(),
    ProducerClosed(),
    OutOfOrderSequenceNumber(),
    UnknownProducerId(),
    # A coordinator that forgot the transactional id, and what the batches see of it.
    InvalidProducerIdMapping(),
    InvalidTxnState(),
    sender_died(InvalidProducerIdMapping()),
    sender_died(KafkaConnectionError()),
    sender_died(MessageSizeTooLargeError()),  # the sender's death is no record's fault, whatever it died of
    KafkaError("NotCoordinatorError()"),  # a coordinator lookup's unexpected answer, as the sender wraps it
    AssertionError("Invalid state transition TransactionState.FATAL_ERROR -> ..."),  # a dead producer's state
]


@pytest.mark.parametrize("error", NO_REFUSALS, ids=repr)
def test_an_error_that_says_nothing_about_the_record_is_no_refusal(error: Exception) -> None:
    assert refusal(error, "summaries") is None
    assert refusal(wrapped(error), "summaries") is None
    assert fatal(error) is None


FATAL = [
    TransactionalIdAuthorizationFailed(),
    ClusterAuthorizationFailedError(),
    GroupAuthorizationFailedError(),
    SaslAuthenticationFailed(),
    UnsupportedVersionError(),
    InvalidTransactionTimeout(),
]


@pytest.mark.parametrize("error", FATAL, ids=repr)
def test_what_refuses_the_worker_itself_is_fatal_and_says_what_to_grant(error: Exception) -> None:
    assert fatal(sender_died(error)) is error
    assert refusal(error, "summaries") is None
    assert why_fatal(error)


def test_kafkas_invalid_record_code_is_known_to_the_client() -> None:
    assert for_code(87) is InvalidRecordError


def test_an_output_that_times_out_is_no_refusal_and_its_checkpoint_is_written_again() -> None:
    """A broker gone is not a refusal: nothing of the checkpoint is committed, a new producer
    writes it again, and the summary is committed once, not dead-lettered."""
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
    assert (solo.engine.counts.failures, solo.engine.counts.redone) == (1, 0)
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


def test_a_topic_refused_to_the_transaction_dead_letters_its_outputs_and_the_rest_is_committed() -> None:
    """The broker will not add the summaries topic to the transaction (not authorised): the
    summary's answer is that refusal, and every other record of the transaction fails with it
    (aiokafka's abortable transaction, a send after it raises the transaction's failure). The
    summary is dead-lettered; its progress and the run's state are committed."""
    broker = Broker(
        refuse=lambda write: "answered" if write.stream == "summary" else None,
        refusal=lambda write: TopicAuthorizationFailedError({write.stream}),
        collateral=lambda write: TopicAuthorizationFailedError({"summary"}),
    )
    solo = worker(broker, [(0, b"run-a", encode(event)) for event in _one_task_run("run-a")], flush_every=1)

    async def go() -> None:
        solo.engine.assigned([0])
        await run(solo)

    asyncio.run(go())
    streams = [write.stream for write in broker.outputs()]
    assert "summary" not in streams
    assert "progress" in streams
    [letter] = [write for write in broker.committed if write.stream == "deadletter"]
    assert dict(letter.headers)["evalstream.reason"] == b"output-refused"
    assert solo.gave_up == []
    assert solo.engine.counts.parked == {}


def _one_task_run(run_id: str) -> list[InputEvent]:
    return [
        builders.started(run_id, [builders.task_spec("t")]),
        builders.trial("t", "t-1", run_id=run_id),
        builders.closed(run_id),
    ]


def test_a_partition_failing_again_and_again_says_so_once_and_recovers(caplog: pytest.LogCaptureFixture) -> None:
    """Commits that keep failing with no refusal: each is tried again with a new producer;
    the partition is said to be failing once (counted for `/ready` and the metrics), and no
    longer once a checkpoint commits. Nothing is lost or doubled."""
    failures = [KafkaTimeoutError() for _ in range(FAILING_AFTER + 1)]
    seen: list[dict[int, str]] = []

    def fail(step: str) -> BaseException | None:
        if step == "commit" and failures:
            seen.append(dict(solo.engine.counts.failing))
            error: BaseException = failures.pop()
            return error
        return None

    broker = Broker(fail=fail)
    solo = worker(broker, [(0, b"run-a", encode(event)) for event in _one_task_run("run-a")], flush_every=1)

    async def go() -> None:
        solo.engine.assigned([0])
        await run(solo)

    with caplog.at_level(logging.WARNING, "evalstream.worker"):
        asyncio.run(go())
    assert seen[FAILING_AFTER] == {0: "KafkaTimeoutError()"}, "failing once it failed FAILING_AFTER times in a row"
    assert solo.engine.counts.failing == {}, "no longer failing once a checkpoint committed"
    assert solo.engine.counts.failures == FAILING_AFTER + 1
    said = [record.getMessage() for record in caplog.records if "times in a row" in record.getMessage()]
    assert len(said) == 1
    assert "check that every broker runs" in said[0]
    assert [write.key for write in broker.outputs() if write.stream == "summary"] == [b"run-a"]
    assert solo.gave_up == []


@pytest.mark.parametrize(
    "make",
    [
        TransactionalIdAuthorizationFailed,
        lambda: TopicAuthorizationFailedError({"changelog"}),
        InvalidTransactionTimeout,
    ],
)
def test_what_no_retry_can_help_stops_the_worker_naming_the_grant(make: Callable[[], Exception]) -> None:
    # Made here: an error raised keeps its traceback, and with it the worker, as long as it lives.
    error = make()
    errors = [error]

    def fail(step: str) -> BaseException | None:
        return errors.pop() if step == "commit" and errors else None

    broker = Broker(fail=fail)
    solo = worker(broker, [(0, b"run-a", encode(event)) for event in _one_task_run("run-a")], flush_every=1)

    async def go() -> None:
        solo.engine.assigned([0])
        await run(solo)

    asyncio.run(go())
    [stopped] = solo.gave_up
    assert isinstance(stopped, Fatal)
    assert str(stopped) == why_fatal(error)
    assert broker.outputs() == []


def test_a_changelog_record_the_producer_itself_finds_too_large_parks_its_run_only() -> None:
    """A task record over the producer's `max_request_size`: aiokafka's own check raises at
    the send, outside any answer. That record's run is parked (its events dead-lettered as
    state-refused) and the partition's other run lands; nothing is retried for ever."""
    big_key = b't["run-a","t"]'
    broker = Broker(refuse=lambda write: "at once" if write.stream == "changelog" and write.key == big_key else None)
    messages: list[Message] = [
        (0, run.encode(), encode(event)) for run in ("run-a", "run-c") for event in _one_task_run(run)
    ]
    solo = worker(broker, messages, flush_every=1)

    async def go() -> None:
        solo.engine.assigned([0])
        await run(solo)

    asyncio.run(go())
    assert [write.key for write in broker.outputs() if write.stream == "summary"] == [b"run-c"]
    assert solo.engine.counts.parked == {"state-refused": 1}
    reasons = {dict(write.headers)["evalstream.reason"] for write in broker.committed if write.stream == "deadletter"}
    assert reasons == {b"state-refused"}
    assert solo.gave_up == []


def test_a_refused_batch_is_sought_a_record_at_a_time_and_only_the_refused_output_is_dead_lettered() -> None:
    """Two runs' summaries in one batch of the summaries topic, one too large for it: the
    broker refuses the batch whole, so both answers are the refusal. The checkpoint is
    written again a record a batch; the small run's summary is committed, the big one's
    alone dead-lettered."""
    broker = Broker(
        refuse=lambda write: "answered" if write.stream == "summary" and write.key == b"big" else None,
        collateral=lambda write: too_large(write) if write.stream == "summary" else None,
    )
    messages: list[Message] = [
        (0, run.encode(), encode(event)) for run in ("big", "small") for event in _one_task_run(run)
    ]
    solo = worker(broker, messages)

    async def go() -> None:
        solo.engine.assigned([0])
        await run(solo)

    asyncio.run(go())
    assert [write.key for write in broker.outputs() if write.stream == "summary"] == [b"small"]
    [letter] = [write for write in broker.committed if write.stream == "deadletter"]
    assert letter.key == b"big"
    assert solo.processor.counts.refused == {"summary": 1}
    assert solo.gave_up == []
