"""The compiled fold (mypyc, `make install`) against its reference, the Python source it is
compiled from: the same trace (`tests.projections.trace`: every step's outcome and summary,
the stored form, progress, summaries after a restore) to the byte, on random logs and on
the shared example log; and the rule that picks a build (`projections/__init__.py`).

This process runs the Python source (tests/conftest.py sets EVALSTREAM_PURE=1 before
anything imports the fold); the compiled build answers from a process of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hypothesis import given

import projections
from events.builds import PURE_SETTING
from events.synthetic import interleave, synthetic_run
from tests.projections.examples import EXAMPLE_LOG
from tests.projections.trace import read_frame, trace, write_frame
from tests.strategies import mixed_logs

ROOT = Path(__file__).resolve().parents[2]
NOT_BUILT = "the compiled fold is not built from these sources: run `make install` (it compiles projections/)"


def compiled_environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != PURE_SETTING}


class CompiledPeer:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.projections.trace"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            env=compiled_environment(),
        )
        assert self.process.stdout is not None
        self.build = self.process.stdout.readline().strip().decode()

    def trace(self, log: bytes) -> bytes:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        write_frame(self.process.stdin, log)
        reply = read_frame(self.process.stdout)
        assert reply is not None, "the compiled build's process ended"
        return reply

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def compiled() -> Iterator[CompiledPeer]:
    peer = CompiledPeer()
    try:
        assert peer.build == "compiled", NOT_BUILT
        yield peer
    finally:
        peer.close()


def test_this_process_runs_the_reference() -> None:
    assert projections.BUILD == "pure"
    assert projections.step.__file__.endswith(".py")


@given(mixed_logs(late=True))
def test_random_logs_trace_alike_in_both_builds(compiled: CompiledPeer, log: bytes) -> None:
    assert compiled.trace(log) == trace(log)


def test_the_example_log_traces_alike_in_both_builds(compiled: CompiledPeer) -> None:
    log = EXAMPLE_LOG.read_bytes()
    assert compiled.trace(log) == trace(log)


def test_a_log_of_big_runs_traces_alike_in_both_builds(compiled: CompiledPeer) -> None:
    sources = [synthetic_run(f"run-{i}", tasks=60, attempts=5, seed=i) for i in range(3)]
    log = b"".join(orjson.dumps(event) + b"\n" for event in interleave(sources, 3))
    assert compiled.trace(log) == trace(log)


def build_in(directory: Path, *, pure: bool = False) -> subprocess.CompletedProcess[str]:
    environment = compiled_environment() | {"PYTHONPATH": str(directory)}
    if pure:
        environment[PURE_SETTING] = "1"
    probe = (
        "import projections, projections.step as s, projections.figures.t975 as t;"
        " print(projections.BUILD, s.__file__.rsplit('.', 1)[-1], t.__file__.rsplit('.', 1)[-1])"
    )
    return subprocess.run(
        [sys.executable, "-c", probe], cwd=directory, env=environment, capture_output=True, text=True, check=True
    )


def test_a_source_changed_since_its_compilation_runs_every_module_as_python(
    compiled: CompiledPeer, tmp_path: Path
) -> None:
    shutil.copytree(ROOT / "projections", tmp_path / "projections", ignore=shutil.ignore_patterns("__pycache__"))
    for shared in projections.KERNEL_CRATE.shared:  # the kernels' crate is current only beside the crates it uses
        ignored = shutil.ignore_patterns("target", "*.so")
        shutil.copytree(ROOT / shared, tmp_path / shared, ignore=ignored)
    assert build_in(tmp_path).stdout.split() == ["compiled", "so", "so"]
    assert build_in(tmp_path, pure=True).stdout.split() == ["pure", "py", "py"]
    source = tmp_path / "projections" / "figures" / "t975.py"
    source.write_text(source.read_text() + "# edited\n")
    changed = build_in(tmp_path)
    assert changed.stdout.split() == ["pure", "py", "py"]
    assert "older than its sources" in changed.stderr
    assert "make install" in changed.stderr
