"""A task's trial ids held as one string (`projections.packed.trial_ids`): the same ids, order and
indexes (`projections.kernels.trial_index`) as a list of them, whatever characters the ids hold
(NUL and SOH included)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from projections.assembly.attempts import task_attempts
from projections.fold.run import RunState, apply
from projections.kernels import trial_index
from projections.packed.trial_ids import NONE, appended, count, joined, listed
from projections.storage import header_of, header_to_bytes, restore, task_from_bytes, task_to_bytes
from tests.builders import score, trial

# Ids made mostly of the characters the held form escapes, so that they meet each other.
ids = st.lists(st.sampled_from(["\0", "\1", "\2", "a", "\1\1", "\1\2", "é", "\U0001f600"]), min_size=1).map(
    "".join
) | st.text(min_size=1)


@given(st.lists(ids, unique=True))
def test_the_held_form_gives_back_the_ids_their_count_and_indexes(trial_ids: list[str]) -> None:
    held = NONE
    for trial_id in trial_ids:
        assert trial_index(held, trial_id) == -1 - len(listed(held))
        held = appended(held, trial_id)
    assert held == joined(trial_ids)
    assert listed(held) == trial_ids
    assert count(held) == len(trial_ids)
    for at, trial_id in enumerate(trial_ids):
        assert trial_index(held, trial_id) == at


@given(st.lists(ids, unique=True), ids)
def test_an_id_not_held_is_not_found_even_as_part_of_others(trial_ids: list[str], other: str) -> None:
    held = joined(trial_ids)
    expected = trial_ids.index(other) if other in trial_ids else -1 - len(trial_ids)
    assert trial_index(held, other) == expected


def test_no_trial() -> None:
    assert listed(NONE) == []
    assert count(NONE) == 0
    assert trial_index(NONE, "a") == -1


def test_a_task_keeps_ids_with_nul_and_soh_apart_through_its_scores_and_its_store() -> None:
    trial_ids = ["a\0b", "a", "b", "\1", "a\1\2", "\0"]
    run = RunState("run")
    for at, trial_id in enumerate(trial_ids):
        apply(run, score("t", trial_id, "reward", {"score": float(at % 2)}))
    apply(run, score("t", "a", "reward", {"score": 1.0}))  # the same trial again: its index
    apply(run, trial("t", "\1", "failed"))
    task = run.tasks["t"]
    assert listed(task.trials) == trial_ids
    expected = [*[(trial_id, float(at % 2)) for at, trial_id in enumerate(trial_ids)], ("a", 1.0)]
    attempts = task_attempts(task)["reward.score"]
    assert [(trial_id, value) for trial_id, value, _ in attempts] == expected
    stored = restore("run", header_to_bytes(header_of(run)), [task_from_bytes("t", task_to_bytes(task))]).tasks["t"]
    assert stored.trials == task.trials
    assert task_attempts(stored)["reward.score"] == attempts
