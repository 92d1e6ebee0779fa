"""A command whose output's reader leaves (`| head`) stops there: exit 0, nothing said."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.projections.examples import EXAMPLE_LOG
from tests.worker.commands.pipes import into_head


@pytest.fixture(scope="module")
def summaries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `replay` prints for the example log: ~190 KB of summaries."""
    path = tmp_path_factory.mktemp("closed") / "summaries.jsonl"
    done = into_head("replay", str(EXAMPLE_LOG), head=("-c", "1000000000"))
    assert done.code == 0, done.stderr
    path.write_bytes(done.read)
    return path


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_replay_into_head_stops_quietly(jobs: str) -> None:
    piped = into_head("replay", str(EXAMPLE_LOG), "--progress", "--jobs", jobs, head=("-c", "10"))
    assert (piped.code, piped.stderr, piped.read) == (0, "", b'{"schema_v')


def test_replay_of_stdin_into_head_stops_quietly_and_blames_no_input() -> None:
    piped = into_head("replay", "-", "--progress", stdin=EXAMPLE_LOG.read_bytes())
    assert (piped.code, piped.stderr) == (0, "")
    assert orjson.loads(piped.read)["type"] == "run.progress"


def test_digest_into_head_stops_quietly(summaries: Path) -> None:
    assert len(summaries.read_bytes()) > 100_000
    piped = into_head("digest", str(summaries))
    assert (piped.code, piped.stderr) == (0, "")
    assert piped.read.startswith(b"summary  run-11-2 rev 1 (completed)")


def test_a_reader_that_stays_sees_everything(summaries: Path) -> None:
    """The quiet stop is for a reader that left: `head` that reads it all gets it all."""
    command = [sys.executable, "-m", "worker.commands.cli", "digest", str(summaries)]
    whole = subprocess.run(command, capture_output=True, check=True).stdout
    piped = into_head("digest", str(summaries), head=("-c", str(len(whole))))
    assert (piped.code, piped.stderr, piped.read) == (0, "", whole)
