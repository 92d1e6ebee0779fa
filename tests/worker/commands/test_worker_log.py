"""The worker's log: plain lines a file can hold, and no ERROR for a group still forming."""

from __future__ import annotations

import asyncio
import io
import logging
import re
from pathlib import Path

import pytest
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    GroupCoordinatorNotAvailableError,
    InvalidProducerIdMapping,
    KafkaError,
)

from worker.commands import worker_log
from worker.local.clusters import local_broker
from worker.local.processes import WorkerProcess, isolated_settings
from worker.runtime.topics import ensure_topics

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
COORDINATOR = logging.getLogger("aiokafka.consumer.group_coordinator")


def logged_at(level: str, monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """What the worker's log setup at `level` writes from now on."""
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    monkeypatch.setattr(logging.getLogger(), "level", logging.WARNING)
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    worker_log.setup(level)
    return log


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    return logged_at("INFO", monkeypatch)


def test_control_characters_are_written_escaped(written: io.StringIO) -> None:
    logging.getLogger("worker.runtime").warning("run %s\tclosed", "evil\x1b[2J\x07\r")
    try:
        raise ValueError("bad\x1b[31m value\nsecond line")
    except ValueError:
        logging.getLogger("worker.runtime").exception("failed")
    text = written.getvalue()
    assert CONTROL.search(text) is None
    assert "run evil\\x1b[2J\\x07\\r\tclosed" in text
    assert "ValueError: bad\\x1b[31m value\nsecond line" in text  # a traceback keeps its lines


def test_a_group_still_forming_is_info_and_other_failures_stay_errors(written: io.StringIO) -> None:
    COORDINATOR.error("Group Coordinator Request failed: %s", GroupCoordinatorNotAvailableError())
    COORDINATOR.error("Group Coordinator Request failed: %s", GroupAuthorizationFailedError())
    lines = written.getvalue().splitlines()
    assert "[INFO] aiokafka.consumer.group_coordinator: Group Coordinator Request failed: [Error 15]" in lines[0]
    assert "[ERROR] aiokafka.consumer.group_coordinator: Group Coordinator Request failed: [Error 30]" in lines[1]


def test_a_dead_sender_is_one_line_naming_its_cause_and_its_batches_futures_are_not_logged(
    written: io.StringIO,
) -> None:
    """aiokafka's sender loop dies of a coordinator that forgot the transactional id: it logs
    a traceback and fails its batches' futures, which nobody can retrieve. The worker's log
    holds one line with the cause (the engine says what it does about it); other futures'
    errors still show."""
    try:
        raise InvalidProducerIdMapping()
    except InvalidProducerIdMapping as cause:  # as aiokafka's sender: logged, then wrapped
        logging.getLogger("aiokafka.producer.sender").exception("Unexpected error in sender routine")
        wrapper = KafkaError("Unexpected error during batch delivery")
        wrapper.__cause__ = cause
    logging.getLogger("asyncio").error("Future exception was never retrieved", exc_info=wrapper)
    logging.getLogger("asyncio").error("Future exception was never retrieved", exc_info=ValueError("a bug"))
    text = written.getvalue()
    assert "Traceback" not in text.split("ValueError")[0]
    [sender] = [line for line in text.splitlines() if "aiokafka.producer.sender" in line]
    assert "[WARNING]" in sender
    assert "a producer's sender stopped: InvalidProducerIdMapping()" in sender
    assert text.count("never retrieved") == 1
    assert "ValueError: a bug" in text


def test_above_info_a_group_still_forming_is_not_written(monkeypatch: pytest.MonkeyPatch) -> None:
    log = logged_at("WARNING", monkeypatch)
    COORDINATOR.error("Group Coordinator Request failed: %s", GroupCoordinatorNotAvailableError())
    assert log.getvalue() == ""


@pytest.mark.kafka
def test_a_fresh_worker_on_a_fresh_broker_logs_no_error_and_no_terminal_codes(tmp_path: Path) -> None:
    """A new broker has no group coordinator until the first group asks: the worker's first
    lookup meets GroupCoordinatorNotAvailable, which is normal and logged as such."""
    with local_broker(tmp_path / "broker") as config:
        settings = isolated_settings(config.bootstrap)
        asyncio.run(ensure_topics(settings))
        worker = WorkerProcess(settings, tmp_path / "worker")
        try:
            worker.wait_serving()
        finally:
            worker.stop()
    text = worker.log()
    assert CONTROL.search(text) is None, repr(CONTROL.search(text))
    assert "[ERROR]" not in text
    assert re.search(r"\[INFO\] aiokafka\.consumer\.group_coordinator: .*GroupCoordinatorNotAvailableError", text)
