"""The worker over SASL, against a broker of its own that requires it (SASL_PLAINTEXT,
mechanism PLAIN): it consumes and publishes through that listener, and the password is in
neither its debug log nor its /metrics, nor in what a refused worker prints. Like the
session's local broker, this one needs `java` and `mvn`."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.projections.examples import EXAMPLE_LOG
from tests.worker.test_worker_kafka import by_run
from worker.commands.clients import publish
from worker.commands.replay import replay
from worker.local.clusters import local_broker
from worker.local.processes import WorkerProcess, isolated_settings
from worker.local.records import read_topic
from worker.runtime.topics import ensure_topics
from worker.settings import Settings

pytestmark = pytest.mark.kafka

USER = "evalstream"
PASSWORD = f"sasl-{uuid.uuid4().hex}"


def sasl_env(password: str) -> dict[str, str]:
    return {
        "EVALSTREAM_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "EVALSTREAM_SASL_MECHANISM": "PLAIN",
        "EVALSTREAM_SASL_USERNAME": USER,
        "EVALSTREAM_SASL_PASSWORD": password,
    }


@pytest.fixture(scope="module")
def sasl_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_broker(tmp_path_factory.mktemp("sasl-broker"), sasl_users=((USER, PASSWORD),)) as config:
        yield config.sasl_bootstrap


def sasl_settings(bootstrap: str) -> Settings:
    return isolated_settings(bootstrap, security_protocol="SASL_PLAINTEXT", sasl_username=USER, sasl_password=PASSWORD)


def test_the_worker_folds_over_sasl_and_never_shows_the_password(sasl_bootstrap: str, tmp_path: Path) -> None:
    settings = sasl_settings(sasl_bootstrap)
    asyncio.run(ensure_topics(settings))
    worker = WorkerProcess(settings, tmp_path / "worker", env=sasl_env(PASSWORD), loglevel="debug")
    try:
        worker.wait_serving()
        lines = EXAMPLE_LOG.read_bytes().splitlines()
        asyncio.run(publish(settings, lines))
        out = io.BytesIO()
        replay(iter(lines), out, io.StringIO())
        expected = out.getvalue().splitlines()
        got = read_topic(settings, settings.summaries_topic, until=len(expected))
        assert by_run([record.value for record in got]) == by_run(expected)
        assert PASSWORD not in worker.get("/metrics")[1]
    finally:
        worker.stop()
    log = worker.log()
    assert "Sending username and password in the clear" in log  # aiokafka: it did authenticate by SASL PLAIN
    assert PASSWORD not in log


def test_a_worker_with_the_wrong_password_says_so_without_either_password(sasl_bootstrap: str, tmp_path: Path) -> None:
    wrong = f"wrong-{uuid.uuid4().hex}"
    settings = sasl_settings(sasl_bootstrap)
    command = [sys.executable, "-m", "worker.commands.cli", "worker", "--debug", "--loglevel", "debug"]
    flags = ["--bootstrap", sasl_bootstrap, "--events-topic", settings.events_topic, "--data-dir", str(tmp_path)]
    env = {**os.environ, **sasl_env(wrong)}
    done = subprocess.run([*command, *flags], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1
    shown = done.stdout + done.stderr
    assert "Authentication failed" in shown or "SaslAuthenticationFailed" in shown, shown[-2000:]
    assert wrong not in shown
    assert PASSWORD not in shown
