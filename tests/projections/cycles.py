"""The reference cycles the worker's step leaves behind, per fold, in the build this process
runs: `python -m tests.projections.cycles` prints `{"build": ..., "python": n, "native": n}`,
n being what a full collection finds after a keyed log went through `projections.step.step`
(the Python fold) and `NativeStepper.step` (the native fold) with the collector off.
`tests/projections/test_cycles.py` runs it in this process and in the compiled build's."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from functools import partial
from typing import Final

import orjson

import projections
from events.synthetic import interleave, synthetic_run
from projections.fold.run import RunState
from projections.held import FoldState
from projections.step import Stepped, step
from tests.projections.test_native_step import Held

Step = Callable[..., Stepped]

python_step: Final = partial(step, keyed=True)
"""The Python fold's step as the worker takes it (keyed messages), beside `NativeStepper.step`."""


def keyed_log() -> list[tuple[bytes, bytes]]:
    """(key, value) of the events of runs interleaved, each event given twice (a redelivery),
    and each run's first score again after its close (a summary revision)."""
    runs = [synthetic_run(f"run-{number}", tasks=3, attempts=3, seed=number) for number in range(4)]
    events = list(interleave(runs, seed=1))
    late: dict[object, dict[str, object]] = {}
    for event in events:
        if event["type"] == "score.emitted":
            late.setdefault(event["run_id"], {**event, "event_id": f"late-{event['run_id']}"})
    log = []
    for event in [*events, *late.values()]:
        value = orjson.dumps(event)
        log += [(str(event["run_id"]).encode(), value)] * 2
    return log


def garbage(stepper: Step, make: Callable[[str], FoldState]) -> int:
    """What a full collection finds after every message of `keyed_log` went through `stepper`."""
    runs: dict[str, Held] = {}

    def lookup(run_id: str) -> Held:
        return runs.setdefault(run_id, Held(make(run_id)))

    log = keyed_log()
    gc.collect()
    gc.disable()
    try:
        for position, (key, value) in enumerate(log):
            stepped = stepper(value, lookup, position=position, key=key)
            assert stepped.rejected is None, stepped.rejected
        return gc.collect()
    finally:
        gc.enable()


def main() -> None:
    from projections.native_state import NativeState
    from projections.native_step import NativeStepper

    found = {
        "build": projections.BUILD,
        "python": garbage(python_step, RunState),
        "native": garbage(NativeStepper().step, NativeState),
    }
    sys.stdout.write(orjson.dumps(found).decode() + "\n")


if __name__ == "__main__":
    main()
