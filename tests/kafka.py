"""Real-broker helpers for the tests: the broker, a worker process, and topic readers.

The broker is the local recipe (`worker.broker`, Kafka jars from Maven Central) unless
EVALSTREAM_TEST_BOOTSTRAP names an existing cluster. Nothing here skips: a missing
broker is a failure.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

from worker.settings import SUMMARY_MAX_BYTES, Settings


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def fresh_settings(bootstrap: str, **overrides: object) -> Settings:
    """Settings with topic names and an app id of their own, so tests never share data."""
    tag = uuid.uuid4().hex[:8]
    return Settings(
        bootstrap=bootstrap,
        app_id=f"evalstream-test-{tag}",
        events_topic=f"events-{tag}",
        progress_topic=f"progress-{tag}",
        summaries_topic=f"summaries-{tag}",
        deadletter_topic=f"deadletter-{tag}",
        web_port=free_port(),
    ).with_overrides(**overrides)


@dataclass
class Record:
    key: bytes | None
    value: bytes
    partition: int
    offset: int
    headers: dict[str, bytes]


def read_topic(settings: Settings, topic: str, *, until: int, timeout: float = 60.0) -> list[Record]:
    """Every record of `topic` from the beginning, once at least `until` have arrived."""
    return asyncio.run(_read(settings, topic, until, timeout))


async def _read(settings: Settings, topic: str, until: int, timeout: float) -> list[Record]:
    consumer = AIOKafkaConsumer(
        **settings.client_options(), enable_auto_commit=False, max_partition_fetch_bytes=SUMMARY_MAX_BYTES
    )
    await consumer.start()
    records: list[Record] = []
    try:
        deadline = time.monotonic() + timeout
        partitions: list[TopicPartition] = []
        while not partitions and time.monotonic() < deadline:
            cluster = await consumer._client.fetch_all_metadata()
            partitions = [TopicPartition(topic, p) for p in cluster.partitions_for_topic(topic) or ()]
            if not partitions:
                await asyncio.sleep(0.2)
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        while len(records) < until and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                records.extend(
                    Record(r.key, r.value, r.partition, r.offset, {k: bytes(v) for k, v in r.headers}) for r in batch
                )
        return records
    finally:
        await consumer.stop()


class WorkerProcess:
    """`evalstream worker` as a subprocess, as it runs in production."""

    def __init__(self, settings: Settings, data_dir: Path) -> None:
        self.settings = settings
        self.log_path = data_dir / "worker.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "EVALSTREAM_APP_ID": settings.app_id}
        command = [
            sys.executable, "-m", "worker.cli", "worker",
            "--bootstrap", settings.bootstrap,
            "--events-topic", settings.events_topic,
            "--progress-topic", settings.progress_topic,
            "--summaries-topic", settings.summaries_topic,
            "--deadletter-topic", settings.deadletter_topic,
            "--partitions", str(settings.partitions),
            "--web-port", str(settings.web_port),
            "--data-dir", str(data_dir),
        ]  # fmt: skip
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")
