from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from worker.local.processes import cluster


@pytest.fixture(scope="session")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Kafka broker for the session: EVALSTREAM_TEST_BOOTSTRAP, or a local one started here."""
    with cluster(os.environ.get("EVALSTREAM_TEST_BOOTSTRAP"), tmp_path_factory.mktemp("broker")) as servers:
        yield servers
