"""The Kafka broker a test session or benchmark uses (`cluster`).

The bootstrap servers given (EVALSTREAM_TEST_BOOTSTRAP in tests, EVALSTREAM_BOOTSTRAP in
benchmarks); else, where a Docker engine answers, testcontainers' Kafka (`CONTAINER_IMAGE`,
KRaft); else a local broker from Maven Central's jars (`worker.local.broker`). Which one,
and why, is said on stderr (tests: past pytest's capture).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from worker.local import broker
from worker.local.processes import free_port


@contextmanager
def local_broker(
    state_dir: Path, *, secure: bool = False, overrides: dict[str, str] | None = None
) -> Iterator[broker.BrokerConfig]:
    """A broker of its own on free ports, with its state in `state_dir`, stopped on exit;
    `secure`: the secured one (`worker.local.secured`); `overrides`: broker settings that
    replace the template's."""
    config = broker.BrokerConfig(
        port=free_port(),
        controller_port=free_port(),
        state_dir=state_dir,
        secure=secure,
        overrides=tuple((overrides or {}).items()),
    )
    broker.start(config, timeout=180)
    try:
        yield config
    finally:
        broker.stop(config)


CONTAINER_IMAGE = "confluentinc/cp-kafka:7.9.0"
"""testcontainers' Kafka module runs Confluent's image (Apache Kafka 3.9) in KRaft mode."""


@dataclass(frozen=True)
class EngineProbe:
    answers: bool
    detail: str
    """The engine's version and address, or why none could be used."""


@dataclass(frozen=True)
class BrokerChoice:
    kind: Literal["existing", "container", "local"]
    reason: str


def docker_engine(timeout: float = 3.0) -> EngineProbe:
    """Whether a Docker engine answers (DOCKER_HOST, else the default socket) and
    testcontainers is there to use it."""
    try:
        import docker
        import testcontainers.community.kafka  # noqa: F401
    except ImportError as error:
        return EngineProbe(False, f"testcontainers is not installed ({error})")
    try:
        client = docker.from_env(timeout=int(timeout))
        try:
            version = client.version().get("Version", "unknown")
            return EngineProbe(True, f"Docker engine {version} at {client.api.base_url}")
        finally:
            client.close()
    except Exception as error:  # the docker SDK raises many kinds; every one means "not usable"
        return EngineProbe(False, f"no Docker engine answers ({error})")


def choose_broker(existing: str | None, engine: Callable[[], EngineProbe]) -> BrokerChoice:
    """The broker to use: `existing` servers if given (the engine is not asked), else a
    container where `engine` answers, else a local broker."""
    if existing:
        return BrokerChoice("existing", f"the broker at {existing}, as given")
    probe = engine()
    if probe.answers:
        return BrokerChoice("container", f"testcontainers' Kafka ({CONTAINER_IMAGE}), since a {probe.detail}")
    return BrokerChoice("local", f"a local broker (worker/local/broker.py), since {probe.detail}")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextmanager
def kafka_container() -> Iterator[str]:
    """testcontainers' Kafka for the duration: its bootstrap servers. One node, so its
    transaction log (the worker writes in transactions) has one replica, as the offsets
    topic has in testcontainers' own settings."""
    from testcontainers.community.kafka import KafkaContainer

    container = KafkaContainer(CONTAINER_IMAGE).with_kraft()
    container.with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
    container.with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
    with container:
        yield container.get_bootstrap_server()


@contextmanager
def cluster(
    existing: str | None,
    state_dir: Path,
    *,
    engine: Callable[[], EngineProbe] = docker_engine,
    say: Callable[[str], None] = _say,
) -> Iterator[str]:
    """Bootstrap servers for the duration (see the module docstring for which); `say` is told the choice."""
    choice = choose_broker(existing, engine)
    say(f"kafka: {choice.reason}")
    if choice.kind == "existing":
        assert existing is not None
        yield existing
    elif choice.kind == "container":
        with kafka_container() as servers:
            say(f"kafka: container up at {servers}")
            yield servers
    else:
        with local_broker(state_dir) as config:
            say(f"kafka: local broker up at {config.bootstrap}")
            yield config.bootstrap
