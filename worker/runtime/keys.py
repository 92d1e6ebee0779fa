"""The worker's store keys (one changelog-backed table, partitioned like the events topic).

- `h"<run>"`: a run's header (`projections.storage.header_to_bytes`), or once the run is
  retired its marker (`marker_to_bytes`: where its archive record is);
- `t["<run>","<task>"]`: one task of a run (`task_to_bytes`); none for a declared task that
  nothing has arrived for;
- `o<partition>`: the checkpoint of an events partition: the offset of the last event whose
  effects and outputs are durable, as ASCII digits.

Ids are JSON strings in keys, so no character of theirs can be taken for a separator, and
a run's task keys share the prefix `task_prefix(run)` (a JSON string ends at its first
unescaped quote), which a store scans in key order to restore the run.
"""

from __future__ import annotations

import orjson


def header_key(run_id: str) -> bytes:
    return b"h" + orjson.dumps(run_id)


HEADER_PREFIX = b'h"'
"""What every `header_key` starts with."""


def run_id_of(key: bytes) -> str:
    """The run of a `header_key`."""
    run_id: str = orjson.loads(key[1:])
    return run_id


def task_key(run_id: str, task_id: str) -> bytes:
    return b"t" + orjson.dumps([run_id, task_id])


def task_prefix(run_id: str) -> bytes:
    """What every `task_key(run_id, ...)` starts with, and no other run's."""
    return b"t[" + orjson.dumps(run_id) + b","


def task_id_of(key: bytes) -> str:
    task_id: str = orjson.loads(key[1:])[1]
    return task_id


def run_of_key(key: bytes) -> str | None:
    """The run a header or task key is of (None: a checkpoint key)."""
    if key.startswith(b"h"):
        return run_id_of(key)
    if key.startswith(b"t"):
        run_id: str = orjson.loads(key[1:])[0]
        return run_id
    return None


def checkpoint_key(partition: int) -> bytes:
    return b"o" + str(partition).encode()
