"""A JSONL log of valid runs with hostile lines spliced in (`tests.faults.poison`'s kinds that a
file can hold), and what replay must report of it."""

from __future__ import annotations

import random
from dataclasses import dataclass

import orjson

from tests.faults.poison import KINDS, NOT_A_LINE, STATEFUL, line, poison

LINE_KINDS = tuple(kind for kind in KINDS if kind not in NOT_A_LINE)


@dataclass(frozen=True)
class Hostile:
    lines: list[bytes]
    """The log: the valid lines in their order, the hostile ones among them."""
    reported: list[tuple[int, str]]
    """(line number, reason) of each hostile line, in order: what replay must say."""


def started_at(lines: list[bytes]) -> dict[str, int]:
    """Run id -> the index of its run.started."""
    found: dict[str, int] = {}
    for index, value in enumerate(lines):
        event = orjson.loads(value)
        if event["type"] == "run.started":
            found.setdefault(event["run_id"], index)
    return found


def hostile_log(valid: list[bytes], kinds: list[str], rng: random.Random) -> Hostile:
    """`valid` with one line of each of `kinds` (in that order, each aimed at a run that has a
    run.started) at a random place: a stateful kind after its run's run.started."""
    starts = started_at(valid)
    runs = sorted(starts)
    log: list[tuple[bytes, str | None]] = [(value, None) for value in valid]
    for index, kind in enumerate(kinds):
        run_id = rng.choice(runs)
        bad = poison(kind, run_id, index)
        first = 0
        if kind in STATEFUL:
            declared = valid[starts[run_id]]
            first = 1 + next(at for at, (value, reason) in enumerate(log) if reason is None and value == declared)
        log.insert(rng.randrange(first, len(log) + 1), (line(bad), bad.reason))
    return Hostile(
        [value for value, _ in log],
        [(number, reason) for number, (_, reason) in enumerate(log, 1) if reason is not None],
    )
