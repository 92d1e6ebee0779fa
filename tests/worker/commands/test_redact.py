"""The worker's log masks its secrets, however a library prints them."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from worker.commands.redact import MASK, Redact

SECRET = "pa'ss\\wörd"


@pytest.fixture
def log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(Redact([SECRET, ""]))
    logger = logging.getLogger("test-redact")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
        yield logger, out
    finally:
        logger.removeHandler(handler)


def test_a_secret_is_masked_as_text_and_inside_reprs(log: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = log
    logger.debug("plain %s", SECRET)
    logger.debug("Request: SaslAuthenticateRequest(auth_bytes=%r)", b"\x00evalstream\x00" + SECRET.encode())
    logger.debug("config %r", {"password": SECRET})
    text = out.getvalue()
    assert text.count(MASK) == 3
    for shown in (SECRET, repr(SECRET.encode())[2:-1], repr(SECRET)[1:-1], "ss\\"):
        assert shown not in text


def test_a_traceback_is_masked_too(log: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = log
    try:
        raise ValueError(f"bad password {SECRET}")
    except ValueError:
        logger.exception("failed")
    assert "ValueError: bad password ***" in out.getvalue()
    assert SECRET not in out.getvalue()


def test_without_secrets_nothing_changes() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "keep %s", ("this",), None)
    assert Redact(["", ""]).filter(record)
    assert (record.msg, record.args) == ("keep %s", ("this",))
