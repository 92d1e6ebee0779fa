"""Local plumbing for tests and benchmarks: free ports, isolated settings, a worker process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from worker.local import broker
from worker.settings import Settings


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def local_broker(state_dir: Path, *, secure: bool = False) -> Iterator[broker.BrokerConfig]:
    """A broker of its own on free ports, with its state in `state_dir`, stopped on exit;
    `secure`: the secured one (`worker.local.secured`)."""
    config = broker.BrokerConfig(port=free_port(), controller_port=free_port(), state_dir=state_dir, secure=secure)
    broker.start(config, timeout=180)
    try:
        yield config
    finally:
        broker.stop(config)


@contextmanager
def cluster(existing: str | None, state_dir: Path) -> Iterator[str]:
    """Bootstrap servers: `existing` if given, else those of a `local_broker` for the duration."""
    if existing:
        yield existing
        return
    with local_broker(state_dir) as config:
        yield config.bootstrap


def isolated_settings(bootstrap: str, **overrides: object) -> Settings:
    """Settings with topic names and an app id of their own, so that runs never share data.
    The names start as the defaults do, so that ACLs on those prefixes cover them."""
    tag = uuid.uuid4().hex[:8]
    return Settings(
        bootstrap=bootstrap,
        app_id=f"evalstream-{tag}",
        events_topic=f"evalstream.events-{tag}",
        progress_topic=f"evalstream.progress-{tag}",
        summaries_topic=f"evalstream.summaries-{tag}",
        deadletter_topic=f"evalstream.deadletter-{tag}",
        web_port=free_port(),
    ).with_overrides(**overrides)


class WorkerProcess:
    """`evalstream worker` as a subprocess, as it runs in production."""

    def __init__(self, settings: Settings, data_dir: Path) -> None:
        self.settings = settings
        self.log_path = data_dir / "worker.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **settings.security.env(), "EVALSTREAM_APP_ID": settings.app_id}
        command = [
            sys.executable, "-m", "worker.commands.cli", "worker",
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

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until faust says the worker is ready (partitions assigned, state recovered)."""
        deadline = time.monotonic() + timeout
        while "Worker ready" not in self.log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker not ready after {timeout:.0f}s; its log:\n{self.log()[-3000:]}")
            time.sleep(0.1)
