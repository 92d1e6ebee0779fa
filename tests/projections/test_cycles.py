"""The worker's step leaves no reference cycles behind, in either build of either fold.

The worker makes full collections rare (`worker.runtime.collector`), so a cycle made per
message outlives the young collections, and what it references (a run the cache has since
evicted) stays in memory until the next full one: the worker's memory grows with the runs it
has seen. mypyc compiles a nested function into an object and an environment that reference
each other, where CPython's closure makes no cycle, so the compiled build is checked in a
process of its own (`tests.projections.cycles`)."""

from __future__ import annotations

import subprocess
import sys

import orjson

from projections.fold.run import RunState
from projections.native_state import NativeState
from projections.native_step import NativeStepper
from tests.projections.cycles import garbage, python_step
from tests.projections.test_compiled import NOT_BUILT, ROOT, compiled_environment


def test_the_steps_of_the_python_source_leave_no_cycles() -> None:
    assert garbage(python_step, RunState) == 0
    assert garbage(NativeStepper().step, NativeState) == 0


def test_the_steps_of_the_compiled_build_leave_no_cycles() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.projections.cycles"],
        cwd=ROOT,
        env=compiled_environment(),
        capture_output=True,
        check=True,
        timeout=120,
    )
    found = orjson.loads(done.stdout)
    assert found["build"] == "compiled", NOT_BUILT
    assert (found["python"], found["native"]) == (0, 0)
