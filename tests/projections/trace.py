"""Everything the fold makes of a log, as bytes: what each message did (its rejection, outcome,
task and summary revision), then for every run its stored form, its progress, its summary and
the summary of its state restored from that stored form.

`tests/projections/test_compiled.py` compares the trace of the build it runs in (the Python
source) with the one of the compiled build, which runs this module as a process of its own:
`python -m tests.projections.trace` answers each log it reads on stdin (a 4-byte length, then
the log's lines) with the log's trace (the same framing), after one line naming its build.
"""

from __future__ import annotations

import struct
import sys
from typing import IO

import orjson

import projections
from events.codec import encode_payload
from projections.assembly.progress import progress
from projections.assembly.summary import summary_bytes
from projections.fold.run import RunState
from projections.held import Held, summaries_of
from projections.step import step
from projections.storage import header_of, header_to_bytes, restore, task_from_bytes, task_to_bytes

FRAME = struct.Struct("<I")


def trace(log: bytes) -> bytes:
    runs: dict[str, Held] = {}

    def lookup(run_id: str) -> Held:
        held = runs.get(run_id)
        if held is None:
            held = runs[run_id] = Held(RunState(run_id))
        return held

    steps = []
    for line in log.splitlines():
        stepped = step(line, lookup)
        rejected = None if stepped.rejected is None else [stepped.rejected.code, stepped.rejected.detail]
        outcome = None if stepped.outcome is None else stepped.outcome.name
        summary = None if stepped.summary is None else stepped.summary.decode()
        steps.append([rejected, outcome, stepped.task_id, summary])
    stored = {}
    for run_id, held in sorted(runs.items()):
        run = held.run
        header = header_to_bytes(header_of(run)) if run.run_events else None
        tasks = {task_id: task_to_bytes(task) for task_id, task in sorted(run.tasks.items())}
        again = restore(run_id, header, [task_from_bytes(task_id, data) for task_id, data in tasks.items()])
        stored[run_id] = {
            "header": None if header is None else header.decode(),
            "tasks": {task_id: data.decode() for task_id, data in tasks.items()},
            "progress": encode_payload(progress(run, run.event_count, cache=summaries_of(held))).decode(),
            "summary": summary_bytes(run, summaries_of(held)).decode(),
            "restored summary": summary_bytes(again).decode(),
        }
    return orjson.dumps({"steps": steps, "runs": stored})


def read_frame(stream: IO[bytes]) -> bytes | None:
    head = stream.read(FRAME.size)
    if len(head) < FRAME.size:
        return None
    (size,) = FRAME.unpack(head)
    return stream.read(size)


def write_frame(stream: IO[bytes], data: bytes) -> None:
    stream.write(FRAME.pack(len(data)) + data)
    stream.flush()


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    replies.write(projections.BUILD.encode() + b"\n")
    replies.flush()
    while (log := read_frame(requests)) is not None:
        write_frame(replies, trace(log))


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
