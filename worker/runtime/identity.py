"""Which cluster, and which incarnation of a topic, the worker is talking to.

A topic deleted and created again under the same name is another topic: Kafka gives every
topic a UUID when it is created (its topic id) and every cluster an id. The worker records
them where offsets would otherwise be trusted by name alone: a local copy of the changelog
records the cluster and the changelog's topic id (`worker.runtime.store`), and a checkpoint
record the events topic's (`projections.storage.checkpoint_to_bytes`).

aiokafka asks for metadata in versions up to 5, which carry the cluster id but no topic ids
(those came in version 10), so this module asks version 12 itself, with aiokafka's own
protocol types and connection.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from io import BytesIO
from typing import Any

from aiokafka import AIOKafkaClient
from aiokafka.errors import for_code
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    AbstractType,
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)


class _Uuid(AbstractType[bytes]):  # type: ignore[misc]  # aiokafka is untyped
    @classmethod
    def encode(cls, value: bytes) -> bytes:
        return value

    @classmethod
    def decode(cls, data: BytesIO) -> bytes:
        return data.read(16)


_NO_TOPIC_ID = bytes(16)


class _MetadataResponseV12(Response):  # type: ignore[misc]
    API_KEY = 3
    API_VERSION = 12
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "brokers",
            CompactArray(
                ("node_id", Int32),
                ("host", CompactString("utf-8")),
                ("port", Int32),
                ("rack", CompactString("utf-8")),
                ("tags", TaggedFields),
            ),
        ),
        ("cluster_id", CompactString("utf-8")),
        ("controller_id", Int32),
        (
            "topics",
            CompactArray(
                ("error_code", Int16),
                ("name", CompactString("utf-8")),
                ("topic_id", _Uuid),
                ("is_internal", Boolean),
                (
                    "partitions",
                    CompactArray(
                        ("error_code", Int16),
                        ("partition_index", Int32),
                        ("leader_id", Int32),
                        ("leader_epoch", Int32),
                        ("replica_nodes", CompactArray(Int32)),
                        ("isr_nodes", CompactArray(Int32)),
                        ("offline_replicas", CompactArray(Int32)),
                        ("tags", TaggedFields),
                    ),
                ),
                ("topic_authorized_operations", Int32),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class _MetadataRequestV12(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 3
    API_VERSION = 12
    RESPONSE_TYPE = _MetadataResponseV12
    SCHEMA = Schema(
        ("topics", CompactArray(("topic_id", _Uuid), ("name", CompactString("utf-8")), ("tags", TaggedFields))),
        ("allow_auto_topic_creation", Boolean),
        ("include_topic_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


class _Metadata(Request[_MetadataRequestV12]):  # type: ignore[misc]
    API_KEY = 3

    def __init__(self, topics: Collection[str], operations: bool) -> None:
        self.topics = list(topics)
        self.operations = operations

    def build(self, request_struct_class: type[_MetadataRequestV12]) -> _MetadataRequestV12:
        return request_struct_class([(_NO_TOPIC_ID, name, {}) for name in self.topics], False, self.operations, {})


@dataclass(frozen=True, slots=True)
class ClusterView:
    """The cluster's id, and of the topics asked for (a topic that does not exist is left
    out) their ids, their partition counts and, when asked, the operations the broker
    allows the client's user on each (KIP-430: a bit per ACL operation code)."""

    cluster: str
    topics: dict[str, str]
    partitions: dict[str, int]
    operations: dict[str, int]


async def describe(client: AIOKafkaClient, topics: Collection[str], *, operations: bool = False) -> ClusterView:
    """Ask a broker of `client` (started) about the cluster and these topics. Raises the
    broker's error for a topic it refuses to describe (not authorised)."""
    node = client.get_random_node()
    response: Any = await client.send(node, _Metadata(topics, operations))
    ids: dict[str, str] = {}
    counts: dict[str, int] = {}
    allowed: dict[str, int] = {}
    for error_code, name, topic_id, _internal, partitions, authorized, _tags in response.topics:
        error = for_code(error_code)
        if error_code == 0 and topic_id != _NO_TOPIC_ID:
            ids[name] = str(uuid.UUID(bytes=topic_id))
            counts[name] = len(partitions)
            if operations:
                allowed[name] = authorized
        elif error.__name__ != "UnknownTopicOrPartitionError":
            raise error(f"describing topic {name!r}")
    return ClusterView(response.cluster_id or "", ids, counts, allowed)
