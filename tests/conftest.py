from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from worker import broker
from worker.local import free_port


@pytest.fixture(scope="session")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Kafka broker for the session: EVALSTREAM_TEST_BOOTSTRAP, or a local one started here."""
    existing = os.environ.get("EVALSTREAM_TEST_BOOTSTRAP")
    if existing:
        yield existing
        return
    config = broker.BrokerConfig(
        port=free_port(), controller_port=free_port(), state_dir=tmp_path_factory.mktemp("broker")
    )
    broker.start(config, timeout=180)
    try:
        yield config.bootstrap
    finally:
        broker.stop(config)
