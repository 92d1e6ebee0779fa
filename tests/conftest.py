from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from worker.local.broker import BrokerConfig
from worker.local.processes import cluster, local_broker


@pytest.fixture(scope="session")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Kafka broker for the session: EVALSTREAM_TEST_BOOTSTRAP, or a local one started here."""
    with cluster(os.environ.get("EVALSTREAM_TEST_BOOTSTRAP"), tmp_path_factory.mktemp("broker")) as servers:
        yield servers


@pytest.fixture(scope="session")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerConfig]:
    """A secured broker (`evalstream broker start --secure`) of the session's own, started from
    nothing: a new CA, new users and passwords, their ACLs."""
    with local_broker(tmp_path_factory.mktemp("secure-broker"), secure=True) as config:
        yield config
