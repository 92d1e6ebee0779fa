from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator

import pytest

from worker.local.processes import WorkerProcess, cluster, isolated_settings
from worker.runtime.topics import ensure_topics


@pytest.fixture(scope="session")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Kafka broker for the session: EVALSTREAM_TEST_BOOTSTRAP, or a local one started here."""
    with cluster(os.environ.get("EVALSTREAM_TEST_BOOTSTRAP"), tmp_path_factory.mktemp("broker")) as servers:
        yield servers


@pytest.fixture(scope="module")
def worker(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """One `evalstream worker` process per test module, on topics of its own."""
    settings = isolated_settings(bootstrap)
    asyncio.run(ensure_topics(settings))
    process = WorkerProcess(settings, tmp_path_factory.mktemp("worker"))
    try:
        yield process
    finally:
        process.stop()
        print(process.log()[-3000:], file=sys.stderr)  # shown when a test failed
