"""Local plumbing for tests and benchmarks: a broker, free ports, isolated settings, a worker process.

The broker (`cluster`): the bootstrap servers given (EVALSTREAM_TEST_BOOTSTRAP in tests,
EVALSTREAM_BOOTSTRAP in benchmarks); else, where a Docker engine answers, testcontainers'
Kafka (`CONTAINER_IMAGE`, KRaft); else a local broker from Maven Central's jars
(`worker.local.broker`). Which one, and why, is said on stderr.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from prometheus_client.parser import text_string_to_metric_families

from worker.local import broker
from worker.settings import Settings


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def local_broker(state_dir: Path, sasl_users: tuple[tuple[str, str], ...] = ()) -> Iterator[broker.BrokerConfig]:
    """A broker of its own on free ports, with its state in `state_dir`, stopped on exit;
    with `sasl_users`, a SASL_PLAINTEXT listener (PLAIN) for them too (`sasl_bootstrap`)."""
    config = broker.BrokerConfig(
        port=free_port(),
        controller_port=free_port(),
        state_dir=state_dir,
        sasl_port=free_port() if sasl_users else None,
        sasl_users=sasl_users,
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
    """testcontainers' Kafka for the duration: its bootstrap servers."""
    from testcontainers.community.kafka import KafkaContainer

    with KafkaContainer(CONTAINER_IMAGE).with_kraft() as container:
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


def isolated_settings(bootstrap: str, **overrides: object) -> Settings:
    """Settings with topic names and an app id of their own, so that runs never share data."""
    tag = uuid.uuid4().hex[:8]
    return Settings(
        bootstrap=bootstrap,
        app_id=f"evalstream-{tag}",
        events_topic=f"events-{tag}",
        progress_topic=f"progress-{tag}",
        summaries_topic=f"summaries-{tag}",
        deadletter_topic=f"deadletter-{tag}",
        web_port=free_port(),
    ).with_overrides(**overrides)


class WorkerProcess:
    """`evalstream worker` as a subprocess, as it runs in production."""

    def __init__(
        self, settings: Settings, data_dir: Path, env: Mapping[str, str] | None = None, loglevel: str = "info"
    ) -> None:
        """`env`: more environment variables for the process (on top of this one's)."""
        self.settings = settings
        self.log_path = data_dir / "worker.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **(env or {}), "EVALSTREAM_APP_ID": settings.app_id}
        command = [
            sys.executable, "-m", "worker.commands.cli", "worker",
            "--bootstrap", settings.bootstrap,
            "--events-topic", settings.events_topic,
            "--progress-topic", settings.progress_topic,
            "--summaries-topic", settings.summaries_topic,
            "--deadletter-topic", settings.deadletter_topic,
            "--partitions", str(settings.partitions),
            "--web-host", settings.web_host,
            "--web-port", str(settings.web_port),
            "--data-dir", str(data_dir),
            "--loglevel", loglevel,
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

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until faust says the worker is ready (partitions assigned, state recovered)."""
        deadline = time.monotonic() + timeout
        while "Worker ready" not in self.log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker not ready after {timeout:.0f}s; its log:\n{self.log()[-3000:]}")
            time.sleep(0.1)

    def get(self, path: str, method: str = "GET", host: str | None = None) -> tuple[int, str]:
        """(status, body) of a request to the worker's web port (at `host`, default its own)."""
        url = f"http://{host or self.settings.web_host}:{self.settings.web_port}{path}"
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def scrape(self) -> dict[str, float]:
        """Every sample of /metrics, keyed as Prometheus prints it: `name` or `name{label="value"}`."""
        status, text = self.get("/metrics")
        if status != 200:
            raise RuntimeError(f"/metrics answered {status}: {text[:200]}")
        samples = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f'{key}="{value}"' for key, value in sorted(sample.labels.items()))
                samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return samples

    def wait_serving(self, timeout: float = 120.0) -> None:
        """Until /ready says so: partitions restored and sought, consuming."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.get("/ready")[0] == 200:
                    return
            except OSError:
                pass  # the web server is not up yet
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker not ready after {timeout:.0f}s; its log:\n{self.log()[-3000:]}")
            time.sleep(0.1)
