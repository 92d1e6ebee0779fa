"""Which errors of an output's send are the broker's final no to that one output.

A refusal (too large for the topic, not authorised, an invalid record: a Kafka error that
is not retriable) says the output will never be taken as it is, so sending it again
(after a restart, from the same offset) fails again: the engine dead-letters it and the
partition goes on. Any other error (a timeout, a lost connection, a broker that keeps
answering with a retriable error past the request timeout) says nothing about the
output: the worker stops, and its restart sends the output again.
"""

from __future__ import annotations

from aiokafka.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, OutOfOrderSequenceNumber


def refusal(error: BaseException) -> KafkaError | None:
    """The Kafka error in `error` or its causes (faust raises its `ProducerSendError` from
    aiokafka's) that refuses the output for good; None if it is not a refusal."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, KafkaError):
            # Out of sequence: the producer's state after another record's refusal, not this one's.
            transient = seen.retriable or isinstance(
                seen, KafkaTimeoutError | KafkaConnectionError | OutOfOrderSequenceNumber
            )
            return None if transient else seen
        seen = seen.__cause__
    return None
