"""No line stops a replay: hostile lines of every kind a file can hold (nesting past any depth
limit, truncation, random bytes, UTF-16, a BOM, NaN and Infinity literals, integers past 64
bits, lone surrogates, NUL bytes, a 10 MB line, a key given twice, every field of every type
with a value of the wrong type), among valid runs. Each is reported once, on its line, with its
reason (never internal-error), and every valid run's output is the bytes of the log without
them."""

from __future__ import annotations

import io
import random
import re
import subprocess
import sys
from pathlib import Path

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.synthetic import interleave, synthetic_run
from tests.projections.examples import EXAMPLE_LOG
from tests.worker.commands.hostile import LINE_KINDS, Hostile, hostile_log
from worker.commands.replay import replay

REPORT = re.compile(r"^line (?P<number>\d+): (?P<reason>[a-z-]+): .+$")


def replayed(lines: list[bytes]) -> tuple[bytes, list[str]]:
    """What replay writes for the log of `lines`, read as a file is read."""
    out, err = io.BytesIO(), io.StringIO()
    replay(io.BytesIO(b"\n".join(lines) + b"\n"), out, err)
    return out.getvalue(), err.getvalue().splitlines()


def reports(said: list[str]) -> list[tuple[int, str]]:
    found = [REPORT.match(line) for line in said]
    assert all(found), said
    return [(int(match["number"]), match["reason"]) for match in found if match]


@st.composite
def hostile_logs(draw: st.DrawFn) -> tuple[list[bytes], Hostile]:
    seed = draw(st.integers(0, 2**16))
    runs = [
        synthetic_run(f"valid-{number}", tasks=draw(st.integers(1, 4)), attempts=draw(st.integers(1, 3)), seed=seed)
        for number in range(draw(st.integers(1, 3)))
    ]
    valid = [orjson.dumps(event) for event in interleave(runs, seed=seed)]
    kinds = draw(st.lists(st.sampled_from(LINE_KINDS), min_size=1, max_size=12))
    return valid, hostile_log(valid, kinds, random.Random(seed))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile_logs())
def test_every_hostile_line_is_reported_and_every_valid_run_is_exact(drawn: tuple[list[bytes], Hostile]) -> None:
    valid, hostile = drawn
    out, said = replayed(hostile.lines)
    assert reports(said) == hostile.reported
    assert "internal-error" not in {reason for _, reason in hostile.reported}
    assert out == replayed(valid)[0]


def test_every_kind_a_file_holds_is_a_hostile_line() -> None:
    """The kinds the property draws from: all of the poisons but those of Kafka alone."""
    assert {"deep-objects", "deep-arrays", "utf-16", "utf8-bom", "lone-surrogate", "nul-byte"} <= set(LINE_KINDS)
    assert {"non-finite-number", "giant-integer", "ten-megabytes", "duplicate-key", "truncated-json"} <= set(LINE_KINDS)
    assert sum(kind.startswith("wrong-type:") for kind in LINE_KINDS) >= 40


def test_a_hostile_log_of_hundreds_of_bad_lines_replays_to_the_end(tmp_path: Path) -> None:
    """The shared example log with every kind three times over, through `evalstream replay`
    as a user runs it, in one process and in two: exit 0, one report a bad line, the example's
    own summaries to the byte."""
    valid = [line for line in EXAMPLE_LOG.read_bytes().splitlines() if line.strip()]
    rng = random.Random(46)
    kinds = [kind for _ in range(3) for kind in rng.sample(LINE_KINDS, len(LINE_KINDS))]
    hostile = hostile_log(valid, kinds, rng)
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"\n".join(hostile.lines) + b"\n")
    clean = replayed(valid)[0]
    for jobs in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-m", "worker.commands.cli", "replay", str(path), "--jobs", jobs],
            capture_output=True,
            check=False,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        *said, last = done.stderr.decode().splitlines()
        assert reports(said) == hostile.reported
        assert len(hostile.reported) == 3 * len(LINE_KINDS)
        assert last.startswith(f"evalstream replay: {len(hostile.lines)} lines, ")
        assert f" {len(hostile.reported)} skipped, " in last
        assert done.stdout == clean
