"""`evalstream replay`: an event log in, every output event the worker would publish out.

Reads JSON Lines, takes each through the same step as the worker (`projections.step`), and
writes each output event as one JSON line, in the order the worker would publish them.
Invalid lines are reported on stderr (line number, reason) and skipped, and so is a line
whose step failed ("internal-error": its run is left as before it, as in the worker).

With `jobs > 1` the runs are split across worker processes (a run's events all go to
one process, so each run still sees its log order); every output is tagged with its
line number and the outputs are written in line order, so the bytes are the same as
with one process.
"""

from __future__ import annotations

import heapq
import multiprocessing
import pickle
import re
from collections.abc import Iterable, Iterator
from dataclasses import astuple
from io import IOBase
from itertools import islice
from multiprocessing.connection import Connection
from multiprocessing.queues import Queue
from typing import BinaryIO, TextIO

import orjson

from projections.closed_caches import CLOSED_CACHES_BYTES
from projections.native_replay import replayer
from projections.replayer import STDOUT, Output, ReplayStats

Chunk = tuple[list[int], list[bytes]]
"""Line numbers and lines sent to one process."""
CHUNK_LINES = 2048
"""Lines folded in one call (and sent to a process in one chunk)."""
IN_FLIGHT = 4


def replay(
    lines: Iterable[bytes],
    out: BinaryIO,
    err: TextIO,
    *,
    progress_every: int | None = None,
    jobs: int = 1,
    closed_caches_bytes: int = CLOSED_CACHES_BYTES,
    native: bool = True,
) -> ReplayStats:
    """Fold `lines` (one event each) and write summaries (and progress, when
    `progress_every` is set: every that many applied events of a run, and at close).
    `closed_caches_bytes`: each process's budget for closed runs' summary caches
    (`projections.closed_caches`); `native`: False for the Python fold even where the native
    one is built (`projections.native_replay.replayer`)."""
    stats = ReplayStats()
    if jobs > 1:
        write(_sharded(_counted(lines, stats), jobs, progress_every, closed_caches_bytes, stats), out, err)
        return stats
    folding = replayer(progress_every, closed_caches_bytes, native=native)
    # Lines are folded CHUNK_LINES a call, but a pipe's line by line, so that a summary comes
    # out as soon as the line that makes it goes in, however slowly the pipe fills.
    chunk_lines = 1 if isinstance(lines, IOBase) and not lines.seekable() else CHUNK_LINES
    stream = iter(lines)
    while chunk := list(islice(stream, chunk_lines)):
        if outputs := folding.feed_lines(stats.lines + 1, chunk):
            write(outputs, out, err)
        stats.lines += len(chunk)
    stats.add(folding.finish())
    return stats


def write(outputs: Iterable[Output], out: BinaryIO, err: TextIO) -> None:
    for _, stream, data in outputs:
        if stream == STDOUT:
            out.write(data)
        else:
            err.write(data.decode())


def _counted(lines: Iterable[bytes], stats: ReplayStats) -> Iterator[tuple[int, bytes]]:
    for number, line in enumerate(lines, 1):
        stats.lines = number
        yield number, line


_RUN_ID = re.compile(rb'"run_id"\s*:\s*"([^"\\]*)"')


def route_key(line: bytes) -> bytes:
    """The run_id of a line, found without parsing the line when that is unambiguous.

    Inside a JSON string every quote is escaped, so `"run_id"` can only be a key; when it
    occurs once, and its value has no escapes, that value is the event's run_id. Otherwise
    (a label named run_id, escapes, not JSON) parse the line; no run_id gives b"".
    """
    if line.count(b'"run_id"') == 1 and (match := _RUN_ID.search(line)) is not None:
        return match.group(1)
    try:
        parsed = orjson.loads(line)
    except orjson.JSONDecodeError:
        return b""
    run_id = parsed.get("run_id") if isinstance(parsed, dict) else None
    return run_id.encode() if isinstance(run_id, str) else b""


def _shard_main(
    inbox: Queue[Chunk | None], outbox: Connection, progress_every: int | None, closed_caches_bytes: int
) -> None:
    folding = replayer(progress_every, closed_caches_bytes)
    while (chunk := inbox.get()) is not None:
        numbers, lines = chunk
        outbox.send_bytes(
            pickle.dumps([output for n, line in zip(numbers, lines, strict=True) for output in folding.feed(n, line)])
        )
    outbox.send_bytes(pickle.dumps(astuple(folding.finish())))


def _sharded(
    numbered: Iterator[tuple[int, bytes]],
    jobs: int,
    progress_every: int | None,
    closed_caches_bytes: int,
    stats: ReplayStats,
) -> Iterator[Output]:
    """Outputs in line order, the runs folded in `jobs` processes (a run stays in one)."""
    # Chunks go out through queues (a feeder thread writes them), results come back through
    # pipes read here: the reader never blocks on a full input pipe while a process blocks
    # on a full result pipe, whatever the size of a summary.
    context = multiprocessing.get_context("fork")
    inboxes: list[Queue[Chunk | None]] = []
    connections = []
    processes = []
    for _ in range(jobs):
        inbox: Queue[Chunk | None] = context.Queue()
        parent, child = context.Pipe(duplex=False)
        process = context.Process(
            target=_shard_main, args=(inbox, child, progress_every, closed_caches_bytes), daemon=True
        )
        process.start()
        child.close()
        inboxes.append(inbox)
        connections.append(parent)
        processes.append(process)
    owner: dict[bytes, int] = {}
    load = [0] * jobs
    in_flight = 0
    finished = False
    try:
        while chunk := list(islice(numbered, CHUNK_LINES)):
            shards: list[tuple[list[int], list[bytes]]] = [([], []) for _ in range(jobs)]
            for number, line in chunk:
                key = route_key(line)
                shard = owner.get(key)
                if shard is None:
                    # Runs go to the least loaded process so far: deterministic and balanced.
                    shard = owner[key] = load.index(min(load))
                load[shard] += 1
                shards[shard][0].append(number)
                shards[shard][1].append(line)
            for inbox, shard_lines in zip(inboxes, shards, strict=True):
                inbox.put(shard_lines)
            in_flight += 1
            if in_flight == IN_FLIGHT:  # keep chunks queued so that no process waits on the reader
                yield from _merged(connections)
                in_flight -= 1
        for _ in range(in_flight):
            yield from _merged(connections)
        for inbox in inboxes:
            inbox.put(None)
        for connection in connections:
            stats.add(ReplayStats(*pickle.loads(connection.recv_bytes())))
        finished = True
    finally:
        for process in processes:
            if not finished:  # abandoned (the output's reader went away, an interrupt): nobody reads their results
                process.kill()
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
        for inbox, process in zip(inboxes, processes, strict=True):
            inbox.close()
            if process.exitcode != 0:
                inbox.cancel_join_thread()  # nobody will read what is left in it
            inbox.join_thread()  # no feeder thread may outlive this call: a later fork would copy its locks


def _merged(connections: list[Connection]) -> Iterator[Output]:
    yield from heapq.merge(*(pickle.loads(connection.recv_bytes()) for connection in connections), key=_line)


def _line(output: Output) -> int:
    return output[0]
