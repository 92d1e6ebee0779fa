"""Declarations share what tasks declare alike, and keep the run.started they were made of."""

from __future__ import annotations

from typing import Any

from events.codec import encode
from projections.declarations import COMPRESSED_FROM, Declarations
from tests import builders

OUTPUTS = {"reward.score": "continuous", "usage.tokens": "model"}


def view(weight: float) -> dict[str, Any]:
    return {
        "name": "quality",
        "reducer": "weighted",
        "signals": [{"metric": "reward", "output": "score", "weight": weight}],
    }


def test_tasks_that_declare_the_same_share_one_declaration_across_runs() -> None:
    one = Declarations.of(builders.started("one", [builders.task_spec(t, OUTPUTS, [view(2.0)]) for t in "ab"]))
    other = Declarations.of(builders.started("other", [builders.task_spec("c", OUTPUTS, [view(2.0)])]))
    assert one.tasks["a"] is one.tasks["b"] is other.tasks["c"]
    assert [spec.model_dump() for spec in one.tasks["a"].views] == [view(2.0)]
    assert dict(one.tasks["a"].kinds) == {("reward", "score"): "continuous", ("usage", "tokens"): "model"}


def test_declarations_that_differ_only_on_the_wire_are_not_shared() -> None:
    declared = Declarations.of(
        builders.started(
            "run", [builders.task_spec("a", OUTPUTS, [view(0.0)]), builders.task_spec("b", OUTPUTS, [view(-0.0)])]
        )
    )
    assert declared.tasks["a"] is not declared.tasks["b"]
    assert str(declared.tasks["b"].views[0].signals[0].weight) == "-0.0"


def test_the_run_started_is_kept_as_given() -> None:
    event = builders.started("run", [builders.task_spec("a", OUTPUTS)], attempts_per_task=3, labels={"model": "m"})
    assert Declarations.of(event).started_wire() == encode(event)
    as_stored = encode(event).replace(b"{", b"{ ", 1)  # what an older encoder may have written
    assert Declarations.of(event, as_stored).started_wire() == as_stored


def test_a_large_run_started_is_kept_compressed_and_given_back_as_encoded() -> None:
    tasks = [builders.task_spec(f"task-{i:04d}", OUTPUTS, [view(1.0)]) for i in range(200)]
    small, large = builders.started("run", tasks[:1]), builders.started("run", tasks)
    assert len(encode(small)) < COMPRESSED_FROM <= len(encode(large))
    kept_small, kept_large = Declarations.of(small), Declarations.of(large)
    assert kept_small.started == encode(small)
    assert len(kept_large.started) < len(encode(large)) // 10
    assert kept_large.started_wire() == encode(large)
