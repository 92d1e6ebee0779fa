"""Malformed Kafka messages for the fault-injection suite, deterministic by seed.

Each kind is one way a bad message reaches the events topic: a producer bug, a text encoding
mix-up, a binary file sent by mistake, a client of a newer contract. `Poison.reason` is the
dead-letter reason code the worker must give it (its `evalstream.reason` header). The codes
are not guesses: each was found by running the kind through `events.codec.decode` and
`worker.runtime.processor.Processor`, and `tests/faults/test_poison.py` checks them still hold.

Apart from its one fault each message looks valid: the envelope names the target run,
`event_id` is unique (`poison:<kind>:<index>`), and the message is keyed by the run (except the
key kinds). Trial ids are fresh (`poison-<index>`), so a poison the worker wrongly applied would
add an attempt and change the run's summary, which is what the suite looks for.

State-dependent kinds (`STATEFUL`): "second-run-started" is a valid `run.started` with an
`event_id` of its own, refused ("refused") only because the run has already started. Sent
before the real `run.started`, it is applied and becomes the run's declaration, and the real
one is dead-lettered instead. The caller must deliver these after the run's valid
`run.started`. Every other kind is dead-lettered whatever the state of its run.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, cast

import orjson
from pydantic import BaseModel

from events import builders
from events.codec import MAX_EVENT_BYTES, encode
from events.models import INT_LIMIT

TASK_ID: Final = "task-00000"
"""The task the poisons name: the first task of an `events.synthetic` run, so that a poison
looks like it belongs to the run it is aimed at."""

OVERSIZED_BYTES: Final = MAX_EVENT_BYTES + 1
"""Just over the decoder's limit, and well under the events topic's `max.message.bytes`
(MAX_EVENT_BYTES + 1024), so the broker accepts it and the worker has to dead-letter it."""

NESTING_DEPTH: Final = 10_000
"""Arrays nested this deep in an output value: far past any parser's recursion limit."""

GIANT_DIGITS: Final = 5_000
"""Digits of the "giant-integer" kind: more than Python's default int-to-string limit (4,300)."""


@dataclass(frozen=True, slots=True)
class Poison:
    """One malformed message and what the worker must do with it.

    `reason` is the dead-letter reason code (`evalstream.reason` header) the worker gives it.
    """

    kind: str
    key: bytes | None
    value: bytes
    reason: str


@dataclass(frozen=True, slots=True)
class _Target:
    """What a kind's builder needs: the run, a unique event id, a fresh trial id, a seeded rng."""

    run_id: str
    event_id: str
    trial_id: str
    rng: random.Random

    @property
    def key(self) -> bytes:
        return self.run_id.encode()


_RAW: Final = "@@poison-raw@@"
"""Placeholder for a literal JSON cannot be made to hold (NaN, a 5,000-digit number)."""


def _wire(event: BaseModel) -> dict[str, Any]:
    """A valid event as an editable JSON object: built by `tests.builders`, as the contract encodes it."""
    return cast(dict[str, Any], orjson.loads(encode(event)))


def _trial(target: _Target) -> dict[str, Any]:
    return _wire(builders.trial(TASK_ID, target.trial_id, run_id=target.run_id, event_id=target.event_id))


def _score(target: _Target) -> dict[str, Any]:
    return _wire(
        builders.score(
            TASK_ID, target.trial_id, "reward", {"score": 0.5}, run_id=target.run_id, event_id=target.event_id
        )
    )


def _started(target: _Target) -> dict[str, Any]:
    task = builders.task_spec(TASK_ID, {"reward.score": "continuous"})
    return _wire(builders.started(target.run_id, [task], event_id=target.event_id))


def _score_value(target: _Target, literal: bytes) -> bytes:
    """A score whose one output value is `literal`, spliced in as raw JSON text."""
    body = _score(target)
    body["outputs"][0]["value"] = _RAW
    return orjson.dumps(body).replace(orjson.dumps(_RAW), literal)


def _without(body: dict[str, Any], field: str) -> dict[str, Any]:
    return {name: value for name, value in body.items() if name != field}


def _truncated_json(target: _Target) -> tuple[bytes | None, bytes]:
    value = orjson.dumps(_score(target))
    return target.key, value[: len(value) // 2]


def _binary_garbage(target: _Target) -> tuple[bytes | None, bytes]:
    # A PNG signature first, so no seed can make the bytes start like JSON.
    return target.key, b"\x89PNG\r\n\x1a\n" + target.rng.randbytes(248)


def _non_utf8(target: _Target) -> tuple[bytes | None, bytes]:
    # A producer that encoded its text as Latin-1: "é" is the lone byte 0xE9.
    body = {**_trial(target), "status": "failed", "error": {"type": "UnicodeError", "message": "café"}}
    return target.key, orjson.dumps(body).replace("é".encode(), "é".encode("latin-1"))


def _wrong_type(target: _Target) -> tuple[bytes | None, bytes]:
    # outputs as a name -> value map instead of a list of {"name", "value"}.
    return target.key, orjson.dumps({**_score(target), "outputs": {"score": 0.5}})


def _missing_field(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps(_without(_score(target), "metric_type"))


def _missing_type(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps(_without(_trial(target), "type"))


def _unknown_type(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps({**_trial(target), "type": "trial.started"})


def _schema_version_2(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps({**_trial(target), "schema_version": 2})


def _boolean_schema_version(target: _Target) -> tuple[bytes | None, bytes]:
    # `true` == 1 in Python: a lax check would let it through.
    return target.key, orjson.dumps({**_trial(target), "schema_version": True})


def _unknown_field(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps({**_trial(target), "duration_s": 12.5})


def _string_number(target: _Target) -> tuple[bytes | None, bytes]:
    # Validation is strict: "1200" is not 1200.
    return target.key, orjson.dumps({**_trial(target), "usage": {"input_tokens": "1200"}})


def _bad_timestamp(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps({**_trial(target), "occurred_at": "2026-11-30 12:00:00"})


def _failed_with_outputs(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps({**_score(target), "status": "failed", "failure": "trial"})


def _key_mismatch(target: _Target) -> tuple[bytes | None, bytes]:
    return (target.run_id + ".other").encode(), orjson.dumps(_trial(target))


def _empty_key(target: _Target) -> tuple[bytes | None, bytes]:
    return b"", orjson.dumps(_trial(target))


def _null_key(target: _Target) -> tuple[bytes | None, bytes]:
    return None, orjson.dumps(_trial(target))


def _oversized(target: _Target) -> tuple[bytes | None, bytes]:
    # Valid but for its size: a failed trial whose error message is padded to the byte.
    body = {**_trial(target), "status": "failed", "error": {"type": "Log", "message": ""}}
    padding = OVERSIZED_BYTES - len(orjson.dumps(body))
    body["error"]["message"] = "x" * padding
    value = orjson.dumps(body)
    assert len(value) == OVERSIZED_BYTES
    return target.key, value


def _second_run_started(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, orjson.dumps(_started(target))


def _non_finite_number(target: _Target) -> tuple[bytes | None, bytes]:
    # A bare NaN literal (Python's json.dumps writes one); the contract wants the string "NaN".
    return target.key, _score_value(target, b"NaN")


def _huge_number(target: _Target) -> tuple[bytes | None, bytes]:
    # The smallest integer that does not fit in 64 bits (signed).
    return target.key, _score_value(target, str(INT_LIMIT).encode())


def _giant_integer(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, _score_value(target, b"9" * GIANT_DIGITS)


def _deep_nesting(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, _score_value(target, b"[" * NESTING_DEPTH + b"]" * NESTING_DEPTH)


def _not_an_object(target: _Target) -> tuple[bytes | None, bytes]:
    # A batch in one message: a JSON array of events.
    return target.key, orjson.dumps([_trial(target)])


def _empty_value(target: _Target) -> tuple[bytes | None, bytes]:
    # What a tombstone (null value) becomes in `worker.runtime.app`.
    return target.key, b""


def _utf8_bom(target: _Target) -> tuple[bytes | None, bytes]:
    return target.key, b"\xef\xbb\xbf" + orjson.dumps(_trial(target))


_KINDS: Final[dict[str, tuple[Callable[[_Target], tuple[bytes | None, bytes]], str]]] = {
    "truncated-json": (_truncated_json, "not-json"),
    "binary-garbage": (_binary_garbage, "not-json"),
    "non-utf8": (_non_utf8, "not-json"),
    "wrong-type": (_wrong_type, "invalid-field"),
    "missing-field": (_missing_field, "missing-field"),
    "unknown-type": (_unknown_type, "unknown-type"),
    "schema-version-2": (_schema_version_2, "schema-version"),
    "unknown-field": (_unknown_field, "unknown-field"),
    "key-mismatch": (_key_mismatch, "key-mismatch"),
    "empty-key": (_empty_key, "key-mismatch"),
    "oversized": (_oversized, "oversized"),
    "second-run-started": (_second_run_started, "refused"),
    "non-finite-number": (_non_finite_number, "invalid-field"),
    "huge-number": (_huge_number, "invalid-field"),
    "deep-nesting": (_deep_nesting, "not-json"),
    "not-an-object": (_not_an_object, "not-object"),
    "empty-value": (_empty_value, "not-json"),
    "null-key": (_null_key, "key-mismatch"),
    "missing-type": (_missing_type, "missing-field"),
    "boolean-schema-version": (_boolean_schema_version, "schema-version"),
    "string-number": (_string_number, "invalid-field"),
    "bad-timestamp": (_bad_timestamp, "invalid-field"),
    "failed-with-outputs": (_failed_with_outputs, "invalid-field"),
    "giant-integer": (_giant_integer, "not-json"),
    "utf8-bom": (_utf8_bom, "not-json"),
}
"""kind -> (builder, reason code), codes as observed (see the module docstring)."""

KINDS: Final = tuple(_KINDS)

STATEFUL: Final = frozenset({"second-run-started"})
"""Kinds dead-lettered only if delivered after the run's valid `run.started`."""


def poison(kind: str, run_id: str, index: int) -> Poison:
    """One message of `kind` aimed at `run_id`; `index` makes its event id unique and seeds its bytes."""
    build, reason = _KINDS[kind]
    target = _Target(run_id, f"poison:{kind}:{index}", f"poison-{index}", random.Random(f"{run_id}:{kind}:{index}"))
    key, value = build(target)
    return Poison(kind, key, value, reason)


def poisons(run_id: str, count: int, seed: int) -> list[Poison]:
    """`count` poisons for `run_id`: KINDS in a seeded shuffle, reshuffled each round, so every
    kind appears once `count >= len(KINDS)`. Indices (and so event ids) are 0..count-1.
    Deliver the `STATEFUL` ones after the run's valid `run.started`."""
    rng = random.Random(seed)
    order: list[str] = []
    while len(order) < count:
        round_ = list(KINDS)
        rng.shuffle(round_)
        order.extend(round_)
    return [poison(kind, run_id, index) for index, kind in enumerate(order[:count])]
