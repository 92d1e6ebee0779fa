"""Which broker a test session or benchmark gets, decided without Docker."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from worker.local.clusters import CONTAINER_IMAGE, EngineProbe, choose_broker, docker_engine


def never_asked() -> EngineProbe:
    raise AssertionError("the Docker engine was asked although servers were given")


def test_given_servers_win_and_the_engine_is_not_asked() -> None:
    choice = choose_broker("10.0.0.1:9092", never_asked)
    assert (choice.kind, choice.reason) == ("existing", "the broker at 10.0.0.1:9092, as given")


def test_an_answering_engine_gets_testcontainers_kafka() -> None:
    choice = choose_broker(None, lambda: EngineProbe(True, "Docker engine 28.2 at unix://x"))
    assert choice.kind == "container"
    assert CONTAINER_IMAGE in choice.reason
    assert "Docker engine 28.2 at unix://x" in choice.reason


@pytest.mark.parametrize("given", [None, ""])
def test_without_an_engine_the_local_broker_and_why(given: str | None) -> None:
    choice = choose_broker(given, lambda: EngineProbe(False, "no Docker engine answers (refused)"))
    assert choice.kind == "local"
    assert choice.reason.endswith("since no Docker engine answers (refused)")


def test_a_missing_socket_is_no_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    probe = docker_engine(timeout=2)
    assert not probe.answers
    assert probe.detail.startswith("no Docker engine answers")


class FakeEngine(BaseHTTPRequestHandler):
    """Answers the two calls the probe makes (API version, then engine version) as dockerd does."""

    def do_GET(self) -> None:
        body = json.dumps({"ApiVersion": "1.45", "Version": "27.0.0-fake"}).encode()
        self.send_response(200 if self.path.endswith("/version") else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def fake_engine() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), FakeEngine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_an_engine_that_answers_is_found(monkeypatch: pytest.MonkeyPatch, fake_engine: str) -> None:
    monkeypatch.setenv("DOCKER_HOST", fake_engine)
    probe = docker_engine(timeout=2)
    assert probe.answers, probe.detail
    assert "27.0.0-fake" in probe.detail
