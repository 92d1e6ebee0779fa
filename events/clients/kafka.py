"""Kafka plumbing the clients share: a client started safely, and a consumer over a whole topic
(every partition, in no consumer group, from its start or end).

A whole-topic consumer reads output topics (summaries, progress) and the events topic without
joining the worker's group, so that nothing anyone else reads or commits moves. A group member
(the exporters') reads a topic in a consumer group of its own, committed records only.

A client that cannot bootstrap says why (`bootstrapped`): aiokafka logs the cause and raises
only "Unable to bootstrap", so a wrong password or an untrusted certificate would read as an
unreachable broker. The cause is found by connecting once more the same way, and raised as
aiokafka's or ssl's own error (`SaslAuthenticationFailed`, `ssl.SSLCertVerificationError`, ...).
A topic the user may not describe is absent from an all-topics metadata answer; the
whole-topic consumer asks for it by name, so that it is told as not authorised, not missing.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.client import AIOKafkaClient
from aiokafka.conn import create_conn
from aiokafka.errors import BrokerResponseError, KafkaConnectionError, TopicAuthorizationFailedError, for_code
from aiokafka.protocol.metadata import MetadataRequest

from events.outputs import SUMMARY_MAX_BYTES

Client = TypeVar("Client", AIOKafkaProducer, AIOKafkaConsumer)


class TopicMissing(LookupError):
    """The topic a client reads does not exist on the cluster (args[0]: its name)."""

    def __init__(self, topic: str, bootstrap: str | None = None) -> None:
        super().__init__(topic, bootstrap)
        self.topic = topic
        self.bootstrap = bootstrap

    def __str__(self) -> str:
        return f"no topic {self.topic!r}" + ("" if self.bootstrap is None else f" at {self.bootstrap}")


class ConnectionClosed(KafkaConnectionError):  # type: ignore[misc]  # aiokafka is untyped
    """A broker was reached and closed the connection before it answered: it expects TLS or
    SASL where the client speaks neither, or the other way round."""


async def bootstrapped(start: Awaitable[None], client: AIOKafkaClient) -> None:
    """Await `start` (a client's start, which bootstraps `client`); when it cannot bootstrap,
    raise why a broker refused, if one did (chained to aiokafka's error)."""
    try:
        await start
    except KafkaConnectionError as error:
        refused = await refusal(client)
        if refused is None:
            raise
        raise refused from error


async def refusal(client: AIOKafkaClient) -> Exception | None:
    """What a bootstrap server answered `client`'s connection with: a TLS error (its
    certificate not trusted, ours refused), a SASL error (authentication failed), or
    `ConnectionClosed`; None when no server was reached."""
    for host, port, _ in client.hosts:
        try:
            conn = await create_conn(
                host,
                port,
                client_id=client._client_id,
                request_timeout_ms=client._request_timeout_ms,
                ssl_context=client._ssl_context,
                security_protocol=client._security_protocol,
                sasl_mechanism=client._sasl_mechanism,
                sasl_plain_username=client._sasl_plain_username,
                sasl_plain_password=client._sasl_plain_password,
            )
        except (ssl.SSLError, BrokerResponseError) as error:
            return error
        except (KafkaConnectionError, ConnectionResetError, ConnectionAbortedError, BrokenPipeError):
            # Reached, then dropped: the server speaks another protocol, or (over TLS 1.3, where a
            # refused client certificate shows only after the handshake) sent an alert that
            # aiokafka reads as a closed connection: ask once more, plainly, for that alert.
            if client._ssl_context is not None and (alert := await _tls_alert(host, port, client._ssl_context)):
                return alert
            return ConnectionClosed(f"{host}:{port} closed the connection before answering")
        except OSError:
            continue
        conn.close()
    return None


async def _tls_alert(host: str, port: int, context: ssl.SSLContext) -> ssl.SSLError | None:
    """The TLS alert the server sends after the handshake, in answer to a first request
    (ApiVersions v0), if it sends one."""
    request = struct.pack(">hhih", 18, 0, 1, 0)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=context), 10)
    except OSError as error:
        return error if isinstance(error, ssl.SSLError) else None
    try:
        writer.write(struct.pack(">i", len(request)) + request)
        await asyncio.wait_for(reader.read(4), 10)
    except ssl.SSLError as error:
        return error
    except OSError:
        return None
    finally:
        writer.close()
    return None


async def started(client: Client) -> Client:
    """`client` started; a start that fails stops it again (aiokafka leaves an unclosed
    client behind otherwise, and prints it at exit), and says why a broker refused it."""
    # The producer's own AIOKafkaClient is public, the consumer's is not.
    kafka = client.client if isinstance(client, AIOKafkaProducer) else client._client
    try:
        await bootstrapped(client.start(), kafka)
    except BaseException:
        await client.stop()
        raise
    return client


@asynccontextmanager
async def running(client: Client) -> AsyncIterator[Client]:
    """`client` started, and stopped on every path."""
    await started(client)
    try:
        yield client
    finally:
        await client.stop()


COMMITTED_FETCH_WAIT_MS = 50
"""How long the broker may hold a committed reader's fetch that finds nothing new. A
transaction's records become readable when its commit marker is written, and a fetch already
waiting can go on waiting its whole time after that: with aiokafka's 500 ms, a progress event
reached its reader 550 ms after the event at the 99th percentile (`bench.e2e`, 1,000 events/s),
with 50 ms 310 ms. An idle reader pays for it with one fetch a broker every 50 ms."""


async def whole_topic(
    topic: str, *, at_end: bool = False, wait: float, fetch_bytes: int = SUMMARY_MAX_BYTES, **client_options: Any
) -> AIOKafkaConsumer | None:
    """A started consumer, in no group, assigned every partition of `topic` at its start
    (or its end), reading committed records only (the worker writes in transactions: an
    aborted record is never seen, and a record is seen once its transaction commits). Waits
    up to `wait` seconds for the topic to exist; None if it does not by then. `fetch_bytes`
    bounds a fetch (a record larger than it still comes, alone: brokers return the first batch
    whole, KIP-74), so it bounds what a reader holds of a topic it reads through.
    `client_options` are aiokafka's (bootstrap_servers, security). The caller stops the
    consumer."""
    consumer = AIOKafkaConsumer(
        **client_options,
        enable_auto_commit=False,
        isolation_level="read_committed",
        fetch_max_wait_ms=COMMITTED_FETCH_WAIT_MS,
        max_partition_fetch_bytes=fetch_bytes,
        fetch_max_bytes=fetch_bytes,
    )
    found = await _topic_partitions(consumer, topic, wait)
    if found is None:
        return None
    partitions = [TopicPartition(topic, p) for p in sorted(found)]
    consumer.assign(partitions)
    await (consumer.seek_to_end if at_end else consumer.seek_to_beginning)(*partitions)
    return consumer


async def group_member(
    topic: str, group_id: str, *, wait: float, fetch_bytes: int = SUMMARY_MAX_BYTES, **client_options: Any
) -> AIOKafkaConsumer | None:
    """A started consumer in the consumer group `group_id`, subscribed to `topic`: it reads
    committed records only (`read_committed`: nothing of an aborted transaction), from the
    group's committed offsets (a new group: the start of the topic), and commits nothing by
    itself; the caller commits what it has done with. Waits for the topic as `whole_topic`
    does; None if it does not exist by then. The caller stops the consumer."""
    consumer = AIOKafkaConsumer(
        **client_options,
        group_id=group_id,
        isolation_level="read_committed",
        fetch_max_wait_ms=COMMITTED_FETCH_WAIT_MS,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=fetch_bytes,
        fetch_max_bytes=fetch_bytes,
    )
    if await _topic_partitions(consumer, topic, wait) is None:
        return None
    consumer.subscribe([topic])
    return consumer


async def _topic_partitions(consumer: AIOKafkaConsumer, topic: str, wait: float) -> set[int] | None:
    """Start `consumer` and wait up to `wait` seconds for `topic` to exist: its partitions, or
    None (the consumer stopped) when it does not by then."""
    await started(consumer)
    deadline = time.monotonic() + wait
    asked = False
    try:
        while True:
            # The consumer's own metadata covers subscribed topics only; ask the cluster.
            if found := (await consumer._client.fetch_all_metadata()).partitions_for_topic(topic):
                return set(found)
            if not asked:
                await authorised(consumer._client, topic)  # or it would wait for what it may not see
                asked = True
            if time.monotonic() >= deadline:
                await consumer.stop()
                return None
            await asyncio.sleep(0.1)
    except BaseException:
        await consumer.stop()
        raise


async def authorised(client: AIOKafkaClient, topic: str) -> None:
    """Raise `TopicAuthorizationFailedError` if the user may not describe `topic` (all-topics
    metadata leaves such a topic out, as if it did not exist)."""
    response = await client.send(client.get_random_node(), MetadataRequest([topic], allow_auto_topic_creation=False))
    if any(entry[1] == topic and for_code(entry[0]) is TopicAuthorizationFailedError for entry in response.topics):
        raise TopicAuthorizationFailedError(topic)
