from __future__ import annotations

import asyncio
import importlib
import os
import sys
from collections.abc import Iterator

import pytest
from hypothesis import settings

from worker.local.broker import BrokerConfig
from worker.local.clusters import cluster, local_broker
from worker.local.processes import WorkerProcess, isolated_settings
from worker.runtime.topics import ensure_topics

# This process tests the fold's reference, its Python source, whatever `make install` compiled
# (projections/__init__.py reads EVALSTREAM_PURE once, at its import, which none of the imports
# above makes): the processes the tests start (workers, commands) run the compiled build, and
# tests/projections/test_compiled.py holds the two builds to one trace. It decodes with the
# compiled recogniser, as they do (events/compiled.py reads the setting at its import, made
# here before it is set); tests/events/test_fastpath.py holds it to the Python fast path.
importlib.import_module("events.compiled")
asked = os.environ.get("EVALSTREAM_PURE")
os.environ["EVALSTREAM_PURE"] = "1"
importlib.import_module("projections")
if asked is None:
    del os.environ["EVALSTREAM_PURE"]

# One profile for every property test, whichever of them a run collects: no deadline (a
# loaded machine makes timings flaky failures), 150 examples.
settings.register_profile("evalstream", max_examples=150, deadline=None)
settings.load_profile("evalstream")


@pytest.fixture(scope="session")
def bootstrap(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Kafka broker for the session: EVALSTREAM_TEST_BOOTSTRAP, else testcontainers'
    Kafka where a Docker engine answers, else a local one started here. The choice is
    printed past pytest's capture, so it shows in every run's output."""
    capture = request.config.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:
        with capture.global_and_fixture_disabled():
            print(f"\n{line}", file=sys.stderr, flush=True)

    existing = os.environ.get("EVALSTREAM_TEST_BOOTSTRAP")
    with cluster(existing, tmp_path_factory.mktemp("broker"), say=say) as servers:
        yield servers


@pytest.fixture(scope="session")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerConfig]:
    """A secured broker (`evalstream broker start --secure`) of the session's own, started from
    nothing: a new CA, new users and passwords, their ACLs."""
    with local_broker(tmp_path_factory.mktemp("secure-broker"), secure=True) as config:
        yield config


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
