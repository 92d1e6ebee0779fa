"""What an error of a checkpoint's write says, by what the client really raised.

Three classes, sorted as Kafka Streams sorts a send's failure
(`RecordCollectorImpl.recordSendError`), the narrowest last:
- **fatal** (`fatal`): the cluster refuses the worker itself (authentication, authorisation
  of its group, transactional ids, cluster or stores (the changelog, the archive), a broker
  too old, a transaction timeout the broker does not allow): no retry helps, the worker
  stops and says what to grant or set;
- **a refusal of one record** (`refusal`): a closed list of the broker's answers about that
  record (too large, invalid or corrupt, against a policy, a timestamp out of bounds, not
  authorised for that record's topic) and the producer's own size check. Sending it again
  fails again, so the engine dead-letters the output (or parks the run whose state it is)
  and the partition goes on;
- **everything else** says nothing about any record: a timeout, a lost connection, a
  fenced producer, a coordinator that forgot the transactional id
  (`InvalidProducerIdMapping`, after `transactional.id.expiration.ms` of idleness), and
  aiokafka's `KafkaError("Unexpected error during batch delivery")`, with which its sender
  fails every pending batch when its loop dies (`aiokafka/producer/sender.py`). The
  partition's producer is renewed and the checkpoint written again.

aiokafka knows no class for Kafka's INVALID_RECORD (87, e.g. a record the broker's
validation rejects): its `for_code` would make it an `UnknownError`, which says nothing, so
this module registers one.
"""

from __future__ import annotations

from aiokafka import errors as kafka_errors
from aiokafka.errors import (
    AuthenticationFailedError,
    BrokerResponseError,
    ClusterAuthorizationFailedError,
    CorruptRecordException,
    GroupAuthorizationFailedError,
    IncompatibleBrokerVersion,
    InvalidTimestampError,
    InvalidTransactionTimeout,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    PolicyViolationError,
    RecordListTooLargeError,
    SaslAuthenticationFailed,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
    UnsupportedVersionError,
)

from worker.runtime.transactions import causes


class InvalidRecordError(BrokerResponseError):  # type: ignore[misc]  # aiokafka is untyped
    errno = 87
    message = "INVALID_RECORD"
    description = "This record has failed the validation on the broker and hence was rejected."


kafka_errors.kafka_errors.setdefault(InvalidRecordError.errno, InvalidRecordError)

OF_THE_RECORD = (
    MessageSizeTooLargeError,  # the broker's answer, or the producer's own check at send
    RecordListTooLargeError,
    CorruptRecordException,
    InvalidRecordError,
    PolicyViolationError,
    InvalidTimestampError,
)
"""The broker's answers about a record itself, whatever its topic."""

FATAL = (
    AuthenticationFailedError,
    SaslAuthenticationFailed,
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TransactionalIdAuthorizationFailed,
    UnsupportedVersionError,
    IncompatibleBrokerVersion,
    InvalidTransactionTimeout,
    TopicAuthorizationFailedError,  # when it is no refusal: the changelog's or the archive's
)
"""The cluster's answers about the worker: every partition would meet them again."""


def _first_kafka_error(error: BaseException) -> KafkaError | None:
    """The outermost Kafka error of `error` and its causes: what the client raised. A cause
    below it (the error aiokafka's sender died of) is not the record's doing."""
    return next((seen for seen in causes(error) if isinstance(seen, KafkaError)), None)


def refused_topics(error: BaseException) -> frozenset[str]:
    """The topics a `TopicAuthorizationFailedError` names: one (a produce answer) or several
    (AddPartitionsToTxn's answer, which aiokafka raises with the set)."""
    named = error.args[0] if error.args else None
    if isinstance(named, str):
        return frozenset({named})
    if isinstance(named, set | frozenset | list | tuple):
        return frozenset(str(topic) for topic in named)
    return frozenset()


def refusal(error: BaseException, topic: str | None) -> KafkaError | None:
    """The Kafka error in `error` that refuses, for good, a record sent to `topic` (None:
    a topic whose authorisation is the worker's own, never one record's: the changelog, the
    archive); None if `error` says nothing about the record."""
    kafka = _first_kafka_error(error)
    if isinstance(kafka, OF_THE_RECORD):
        return kafka
    if isinstance(kafka, TopicAuthorizationFailedError) and topic is not None and topic in refused_topics(kafka):
        return kafka
    return None


def fatal(error: BaseException) -> KafkaError | None:
    """The Kafka error in `error` or its causes that no retry can help; None if none is."""
    return next((seen for seen in causes(error) if isinstance(seen, FATAL)), None)


def why_fatal(error: KafkaError) -> str:
    """What the cluster refused the worker, and what to grant or set (`error`: a `fatal` one)."""
    if isinstance(error, TopicAuthorizationFailedError):
        topics = ", ".join(sorted(refused_topics(error))) or "a topic it writes"
        return f"the broker refused the worker's writes to {topics} ({error!r}): grant its user WRITE on them"
    if isinstance(error, GroupAuthorizationFailedError):
        return f"the broker refused the worker its consumer group ({error!r}): grant its user READ on the group"
    if isinstance(error, ClusterAuthorizationFailedError):
        return (
            f"the broker refused the worker idempotent writes ({error!r}): "
            "grant its user IDEMPOTENT_WRITE on the cluster"
        )
    if isinstance(error, AuthenticationFailedError | SaslAuthenticationFailed):
        return (
            f"the broker did not accept the worker's credentials ({error!r}): "
            "check EVALSTREAM_SASL_USERNAME and EVALSTREAM_SASL_PASSWORD"
        )
    if isinstance(error, UnsupportedVersionError | IncompatibleBrokerVersion):
        return f"the broker is too old for the worker ({error!r}): it needs Apache Kafka 2.5 or later"
    return str(error) or repr(error)


def advice(error: BaseException) -> str:
    """What to look at when a partition keeps failing with `error` (no refusal, not fatal)."""
    kafka = _first_kafka_error(error)
    if kafka is None or isinstance(error, TimeoutError) or isinstance(kafka, KafkaTimeoutError) or kafka.retriable:
        return (
            "the broker does not answer, or keeps answering that it cannot take the writes yet: check that every "
            "broker runs, that this worker reaches them, and that the topics' partitions have enough in-sync replicas"
        )
    return "the broker's log says why it answered so; the worker goes on trying"
