"""The Kafka broker a test session or benchmark uses (`cluster`), and local brokers of a
scenario's own (`local_broker`; `proxied_broker`, its clients behind Toxiproxy).

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
from worker.local.toxiproxy import Toxiproxy


@contextmanager
def local_broker(
    state_dir: Path,
    *,
    secure: bool = False,
    overrides: dict[str, str] | None = None,
    ports: tuple[int, int] | None = None,
) -> Iterator[broker.BrokerConfig]:
    """A broker of its own on free ports (`ports`: its client and controller ports, chosen by
    the caller), with its state in `state_dir`, stopped on exit; `secure`: the secured one
    (`worker.local.secured`); `overrides`: broker settings that replace the template's."""
    port, controller = ports or (free_port(), free_port())
    config = broker.BrokerConfig(
        port=port,
        controller_port=controller,
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


@dataclass(frozen=True)
class ProxiedBroker:
    """A local broker whose clients each reach it through a proxy of their own."""

    config: broker.BrokerConfig
    proxies: tuple[str, ...]
    """The toxiproxy proxies' names, one per client."""
    bootstraps: tuple[str, ...]
    """Each client's bootstrap servers: its proxy's address, which the broker advertises on
    that client's listener."""


@contextmanager
def proxied_broker(
    state_dir: Path, toxiproxy: Toxiproxy, clients: int, overrides: dict[str, str] | None = None
) -> Iterator[ProxiedBroker]:
    """A local broker (as `local_broker`) with a listener per client behind a toxiproxy proxy,
    so that a toxic on one client's proxy leaves the others alone. A broker answers metadata
    with the addresses of the listener asked, so each listener advertises its proxy and a
    client, once bootstrapped through its proxy, never goes around it. The first listener
    (`config.bootstrap`) is direct, for the clients that judge the outcome."""
    port, controller = free_port(), free_port()
    names = [f"CLIENT{index}" for index in range(clients)]
    inner = {name: free_port() for name in names}
    outer = {name: toxiproxy.proxy(name.lower(), f"{broker.HOST}:{inner[name]}") for name in names}
    listeners = [f"PLAINTEXT://{broker.HOST}:{port}", f"CONTROLLER://{broker.HOST}:{controller}"]
    listeners += [f"{name}://{broker.HOST}:{inner[name]}" for name in names]
    advertised = [f"PLAINTEXT://{broker.HOST}:{port}"] + [f"{name}://{broker.HOST}:{outer[name]}" for name in names]
    protocols = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"] + [f"{name}:PLAINTEXT" for name in names]
    wiring = {
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised),
        "listener.security.protocol.map": ",".join(protocols),
    }
    with local_broker(state_dir, overrides={**(overrides or {}), **wiring}, ports=(port, controller)) as config:
        yield ProxiedBroker(
            config,
            tuple(name.lower() for name in names),
            tuple(f"{broker.HOST}:{outer[name]}" for name in names),
        )
