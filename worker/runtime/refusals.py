"""Which errors of an output's send are the broker's final no to that one output.

A refusal (too large for the topic, not authorised, an invalid record: a Kafka error that
is not retriable) says the output will never be taken as it is, so sending it again
(after a restart, from the same offset) fails again: the engine dead-letters it and the
partition goes on. Any other error (a timeout, a lost connection, a broker that keeps
answering with a retriable error past the request timeout) says nothing about the
output: the worker stops, and its restart sends the output again.
"""

from __future__ import annotations

from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    ConcurrentTransactions,
    DuplicateSequenceNumber,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    OutOfOrderSequenceNumber,
    ProducerClosed,
    TransactionalIdAuthorizationFailed,
    TransactionCoordinatorFenced,
    UnknownProducerId,
)

from worker.runtime.transactions import FENCED, causes

OF_THE_PRODUCER = (
    *FENCED,
    ProducerClosed,
    OutOfOrderSequenceNumber,  # the producer's state after another record's refusal
    DuplicateSequenceNumber,
    UnknownProducerId,
    ConcurrentTransactions,
    TransactionCoordinatorFenced,
    TransactionalIdAuthorizationFailed,
    ClusterAuthorizationFailedError,
)
"""Errors that are the broker's word on the producer or its transaction, not on the record
sent: a fenced producer's records in flight all fail with one of them, and taking that for a
refusal would dead-letter good outputs and park good runs, on a worker that no longer owns
the partition."""


def refusal(error: BaseException) -> KafkaError | None:
    """The Kafka error in `error` or its causes (faust raises its `ProducerSendError` from
    aiokafka's) that refuses the output for good; None if it is not a refusal."""
    kafka = next((seen for seen in causes(error) if isinstance(seen, KafkaError)), None)
    if kafka is None:
        return None
    transient = kafka.retriable or isinstance(kafka, KafkaTimeoutError | KafkaConnectionError)
    return None if transient or isinstance(kafka, OF_THE_PRODUCER) else kafka
