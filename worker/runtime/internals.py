"""Every private faust and aiokafka attribute the worker relies on, and nothing else.

faust has no public way to take a topic's fetched records before its per-message stream,
to seek a partition from the fetcher's side, or to set the fetch wait and the isolation
level of its consumer; the worker does all three through the names below. aiokafka keeps
a consumer's and an admin's client, and a client's connection settings, private:
`events.clients.kafka` reads them to say why a broker refused a client, and they are listed
here too. They are pinned to the versions in pyproject.toml (`faust-streaming` 0.15,
`aiokafka` 0.14). An upgrade that renames or removes one fails `missing()`, which
`tests/worker/runtime/test_internals.py` and the worker's start-up both check, naming it.
"""

from __future__ import annotations

from typing import Any

import faust
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.client import AIOKafkaClient
from aiokafka.producer.sender import Sender
from aiokafka.producer.transaction_manager import TransactionManager
from faust.transport import consumer as faust_consumer
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

REQUIRED: tuple[tuple[object, str, str], ...] = (
    (faust_aiokafka.AIOKafkaConsumerThread, "_create_worker_consumer", "builds the aiokafka consumer"),
    (faust_aiokafka.AIOKafkaConsumerThread, "_ensure_consumer", "the aiokafka consumer of the thread"),
    (faust_aiokafka.AIOKafkaConsumerThread, "call_thread", "runs a coroutine on the consumer's thread"),
    (faust_aiokafka.Consumer, "_new_consumer_thread", "makes the consumer's thread"),
    (faust_aiokafka.Consumer, "_thread", "the consumer's thread (set in __init__)"),
    (faust_consumer.Consumer, "_wait_next_records", "fetches one batch of records for the fetcher"),
    (AIOKafkaConsumer, "_fetch_max_wait_ms", "the fetch wait, set before the consumer starts"),
    (AIOKafkaConsumer, "_isolation_level", "read committed records only, set before the consumer starts"),
    (AIOKafkaConsumer, "_client", "a consumer's client (events.clients.kafka: metadata, bootstrap errors)"),
    (AIOKafkaAdminClient, "_client", "the admin's client (worker.runtime.topics: bootstrap errors)"),
    (AIOKafkaProducer, "_sender", "a producer's sender (worker.runtime.transactions: closed without waiting)"),
    (AIOKafkaProducer, "_txn_manager", "a producer's transaction (worker.runtime.transactions: why it failed)"),
    (Sender, "sender_task", "the sender's loop (worker.runtime.transactions: closed without waiting)"),
    (TransactionManager, "_transaction_waiter", "the open transaction's outcome (worker.runtime.transactions)"),
    *(
        (AIOKafkaClient, name, "a client's connection settings (events.clients.kafka: why a broker refused it)")
        for name in (
            "_client_id",
            "_request_timeout_ms",
            "_ssl_context",
            "_security_protocol",
            "_sasl_mechanism",
            "_sasl_plain_username",
            "_sasl_plain_password",
        )
    ),
)
"""(owner, attribute, what the worker uses it for), the aiokafka ones read by the clients
the worker shares with the commands too (`events.clients` may not import this module).
Instance attributes (`_thread`, aiokafka's) are checked on the class's `__init__` source."""


def missing() -> list[str]:
    """The required attributes the installed faust/aiokafka lack, as sentences."""
    absent = []
    for owner, name, use in REQUIRED:
        if not _has(owner, name):
            pinned = "aiokafka 0.14" if _name(owner).startswith("aiokafka") else "faust-streaming 0.15"
            absent.append(f"{_name(owner)}.{name} ({use}) is gone: the installed version is not {pinned}")
    return absent


def _has(owner: object, name: str) -> bool:
    if hasattr(owner, name):
        return True
    import inspect

    init = getattr(owner, "__init__", None)
    try:
        return f"self.{name} =" in inspect.getsource(init) if init is not None else False
    except (OSError, TypeError):
        return False


def _name(owner: object) -> str:
    return f"{getattr(owner, '__module__', '?')}.{getattr(owner, '__qualname__', owner)}"


# The worker's uses, each a one-line wrapper so that the private names appear only here.


def set_fetch_max_wait(consumer: Any, milliseconds: int) -> None:
    """Read by aiokafka when the consumer starts; faust hard-codes 1,500 ms."""
    consumer._fetch_max_wait_ms = milliseconds


def read_committed(consumer: Any) -> None:
    """Read by aiokafka when the consumer starts; faust reads committed records only in its
    own exactly-once mode, which the worker does not use."""
    consumer._isolation_level = "read_committed"


def create_worker_consumer(thread: faust_aiokafka.AIOKafkaConsumerThread, transport: Any) -> Any:
    return faust_aiokafka.AIOKafkaConsumerThread._create_worker_consumer(thread, transport)


async def wait_next_records(consumer: faust_consumer.Consumer, timeout: float) -> tuple[Any, Any]:
    return await faust_consumer.Consumer._wait_next_records(consumer, timeout)


async def seek_on_thread(app: faust.App, tp: TP, offset: int) -> None:
    """aiokafka's seek, on the consumer's thread: a fetch that follows it returns records
    from `offset` on (aiokafka drops what it fetched for a stale position)."""
    thread = app.consumer._thread  # type: ignore[attr-defined]

    async def _seek() -> None:
        thread._ensure_consumer().seek(tp, offset)

    await thread.call_thread(_seek)
