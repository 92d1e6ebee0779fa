"""Local plumbing for tests and benchmarks: free ports, isolated settings, a worker process
(its brokers: `worker.local.clusters`)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from worker.settings import Settings


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


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


def chromium() -> str | None:
    """The Chromium the browser tests and the dashboard bench drive: EVALSTREAM_CHROMIUM, else
    Debian's `chromium` on the PATH (Playwright downloads no browser of its own here)."""
    return os.environ.get("EVALSTREAM_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def topic_flags(settings: Settings) -> list[str]:
    """The connection flags that point a command at these settings' broker and topics."""
    return [
        "--bootstrap", settings.bootstrap,
        "--events-topic", settings.events_topic,
        "--progress-topic", settings.progress_topic,
        "--summaries-topic", settings.summaries_topic,
        "--deadletter-topic", settings.deadletter_topic,
        "--partitions", str(settings.partitions),
    ]  # fmt: skip


class CommandProcess:
    """An `evalstream` command running as a subprocess, its output in `log_path`."""

    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


class WorkerProcess(CommandProcess):
    """`evalstream worker` as a subprocess, as it runs in production."""

    def __init__(
        self,
        settings: Settings,
        data_dir: Path,
        env: Mapping[str, str] | None = None,
        loglevel: str = "info",
        python: str = sys.executable,
    ) -> None:
        """`env`: more environment variables for the process (on top of this one's); `python`:
        the interpreter, another checkout's venv for a before/after benchmark. It runs in its
        data dir, so that `-m` finds the package that interpreter installed, not the one in
        this process's working directory."""
        self.settings = settings
        self.log_path = data_dir / "worker.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **settings.security.env(), **(env or {}), "EVALSTREAM_APP_ID": settings.app_id}
        command = [
            python, "-m", "worker.commands.cli", "worker", *topic_flags(settings),
            "--web-host", settings.web_host,
            "--web-port", str(settings.web_port),
            "--data-dir", str(data_dir),
            "--loglevel", loglevel,
        ]  # fmt: skip
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=data_dir)

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


class DashboardProcess(CommandProcess):
    """`evalstream dashboard` as a subprocess on `port` (0: a free one), keeping `recent` closed
    runs in memory (None: its default); `url` is where it serves."""

    def __init__(
        self, settings: Settings, log_dir: Path, timeout: float = 60.0, *, port: int = 0, recent: int | None = None
    ) -> None:
        self.log_path = log_dir / "dashboard.log"
        log_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "worker.commands.cli", "dashboard", "--port", str(port)]
        command += [*topic_flags(settings), *(["--recent", str(recent)] if recent is not None else [])]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not (served := re.search(r"evalstream dashboard: (http://\S+)", self.log())):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"dashboard not serving after {timeout:.0f}s; its log:\n{self.log()[-3000:]}")
            time.sleep(0.05)
        self.url: str = served.group(1)
