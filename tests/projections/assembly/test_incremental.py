"""Laws of the incremental summary (`projections.assembly.contributions`): after every event, the
revision a run's kept contributions give is the spec's (`tests.projections.oracle`, computed
from scratch from the events applied so far, sharing nothing with the fold), and the one a
fresh restore of the same state gives, byte for byte; over random logs with late events after
the close, redeliveries, a late run.started, values over the whole double range."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import ExitStack
from unittest.mock import patch

import orjson
from hypothesis import given
from hypothesis import strategies as st

import projections.step
from events.codec import encode, encode_payload
from events.models import InputEvent
from projections.assembly.attempts import TaskTallies, task_tallies
from projections.assembly.contributions import SummaryCache
from projections.assembly.harbor_stats import HarborKept, HarborShare, binary_lists, encoded_ids
from projections.assembly.log_order import InOrder
from projections.assembly.progress import progress
from projections.assembly.summary import summary, summary_bytes
from projections.fold.run import RunState, apply
from projections.held import Held
from projections.step import step
from projections.storage import header_of, header_to_bytes, restore, task_from_bytes, task_to_bytes
from tests.builders import closed, score, started, task_spec
from tests.projections.oracle import assert_spec, summary_after
from tests.strategies import run_logs


def restored(run: RunState) -> RunState:
    """The run as a store gives it back: no contribution kept."""
    tasks = [task_from_bytes(task_id, task_to_bytes(task)) for task_id, task in run.tasks.items()]
    return restore(run.run_id, header_to_bytes(header_of(run)) if run.run_events else None, tasks)


def assert_oracles(kept: bytes, lines: Iterable[bytes], run_id: str = "run") -> None:
    """A summary is the oracle's for the log so far; an open run's, but for its revision
    (the contract numbers published summaries only, and an open run publishes none)."""
    got, expected = orjson.loads(kept), summary_after(lines, run_id)
    if expected["revision"] is None:
        got["revision"] = None
    assert_spec(got, expected)


def with_redeliveries(log: list[InputEvent], data: st.DataObject) -> list[InputEvent]:
    replayed = list(log)
    for event in data.draw(st.lists(st.sampled_from(log), max_size=6)) if log else ():
        replayed.insert(data.draw(st.integers(replayed.index(event) + 1, len(replayed))), event)
    return replayed


@given(run_logs(), st.data())
def test_every_revision_equals_the_summary_built_from_scratch_and_from_a_fresh_restore(
    log: list[InputEvent], data: st.DataObject
) -> None:
    run = RunState("run")
    cache = SummaryCache()
    lines: list[bytes] = []
    for event in with_redeliveries(log, data):
        apply(run, event)
        lines.append(encode(event))
        if data.draw(st.booleans(), label="summarize now"):
            kept = summary_bytes(run, cache)
            assert_oracles(kept, lines)
            assert kept == summary_bytes(restored(run))
            assert encode_payload(summary(run)) == kept
        if data.draw(st.booleans(), label="progress now"):
            assert progress(run, 1, cache=cache) == progress(restored(run), 1)
    assert_oracles(summary_bytes(run, cache), lines)


@given(run_logs(), st.data())
def test_a_failed_step_leaves_the_kept_contributions_as_a_fresh_restore_has_them(
    log: list[InputEvent], data: st.DataObject
) -> None:
    """A step that raises after applying its event is undone (`projections.fold.savepoint`): the
    next revision must not keep anything of it."""
    runs: dict[str, Held] = {}

    def lookup(run_id: str) -> Held:
        return runs.setdefault(run_id, Held(RunState(run_id)))

    def failing(run: RunState, cache: SummaryCache) -> bytes:
        summary_bytes(run, cache)  # the contributions move, then the step fails
        raise RuntimeError("injected")

    broken = data.draw(st.sets(st.integers(0, max(len(log) - 1, 0))), label="steps that fail")
    applied = [encode(event) for number, event in enumerate(log) if number not in broken]
    for number, event in enumerate(log):
        with ExitStack() as faults:
            if number in broken:  # a revision built, open run or not, then the step fails
                faults.enter_context(patch.object(projections.step, "summary_due", lambda *_: True))
                faults.enter_context(patch.object(projections.step, "summary_bytes", failing))
            stepped = step(encode(event), lookup)
        assert number not in broken or stepped.rejected is not None
    for held in runs.values():
        run = held.run
        assert_oracles(summary_bytes(run, held.summaries), applied, run.run_id)
        assert summary_bytes(run, held.summaries) == summary_bytes(restored(run))


def test_a_late_attempt_moves_only_the_figures_of_its_task_and_key() -> None:
    run, cache = RunState("run"), SummaryCache()
    tasks = [task_spec(f"t{i}", {"reward.score": "continuous", "judge.pass": "boolean"}) for i in range(3)]
    log = [started("run", tasks), *[score(f"t{i}", f"t{i}-0", "reward", {"score": 0.5}) for i in range(3)], closed()]
    for event in log:
        apply(run, event)
    before = summary(run, cache)
    kept = dict(cache.tasks)
    log.append(score("t1", "t1-late", "reward", {"score": 1.0}))
    apply(run, log[-1])
    after = summary(run, cache)
    assert [cache.tasks[task] is kept[task] for task in ("t0", "t1", "t2")] == [True, False, True]
    assert_oracles(encode_payload(after), [encode(event) for event in log])
    attempts = after["summary"]["task_metric_attempts"]
    assert attempts["t1"]["reward.score"][-1] == {"trial_id": "t1-late", "value": 1.0}
    assert attempts["t0"] == before["summary"]["task_metric_attempts"]["t0"]
    assert after["verdicts"]["t1"]["reward.score"] == "flaky"


def test_a_view_value_that_turns_from_0_to_minus_0_moves_the_view_aggregate() -> None:
    """The kept view aggregates are computed again when a task's view values change to the
    bit: 0.0 == -0.0, yet the aggregate's min, max and percentiles spell them apart."""
    view = {"name": "v", "reducer": "single", "signals": [{"metric": "reward", "output": "score"}]}
    run, cache = RunState("run"), SummaryCache()
    log: list[InputEvent] = [started("run", [task_spec("t", {"reward.score": "continuous"}, [view])])]
    log += [score("t", "a", "reward", {"score": 0.0}), closed()]
    for event in log:
        apply(run, event)
    assert_oracles(summary_bytes(run, cache), [encode(event) for event in log])
    log.append(score("t", "a", "reward", {"score": -0.0}))  # the later score of trial a wins
    apply(run, log[-1])
    after = summary(run, cache)
    assert_oracles(encode_payload(after), [encode(event) for event in log])
    view_record = next(record for record in after["summary"]["scores"] if record["name"] == "view.v")
    assert str(view_record["min"]) == "-0.0"


@given(
    st.lists(st.tuples(st.lists(st.integers(0, 400), min_size=1, max_size=200, unique=True), st.booleans()), max_size=6)
)
def test_kept_reward_ids_encode_as_the_whole_list_after_appends_and_insertions(
    batches: list[tuple[list[int], bool]],
) -> None:
    kept = HarborKept()
    ordered = InOrder()
    seen: set[int] = set()
    # The first list long enough for its encoding to be kept, with gaps to insert into.
    for drawn, after in [(list(range(0, 600, 2)), True), *batches]:
        # `after`: all after those there, appended (as late attempts land); else anywhere.
        batch = [seq + max(seen, default=0) + 1 for seq in drawn] if after else drawn
        new = [(seq, f"trial-{seq}") for seq in batch if seq not in seen]
        seen.update(batch)
        if new:
            ordered.add(new)
        encoded = orjson.dumps(encoded_ids(kept, "r.s", "1.0", ordered))
        assert encoded == orjson.dumps(ordered.items)
        assert orjson.dumps(encoded_ids(kept, "r.s", "1.0", ordered)) == encoded


shares_of = st.builds(
    lambda tallies, broken: HarborShare(tallies, frozenset(broken)),
    st.dictionaries(st.sampled_from(["a.x", "b.y", "c.z"]), st.tuples(st.integers(1, 9), st.integers(0, 9))),
    st.sets(st.sampled_from(["a.x", "b.y"])),
)


@given(st.lists(shares_of, min_size=1, max_size=6), st.lists(st.tuples(st.integers(0, 5), shares_of), max_size=12))
def test_kept_harbor_lists_equal_those_gathered_afresh_as_shares_change(
    tasks: list[HarborShare], changes: list[tuple[int, HarborShare]]
) -> None:
    kept_by = HarborKept()
    for place, new in [(0, tasks[0]), *changes]:
        tasks = list(tasks)
        if place < len(tasks):
            tasks[place] = new
        else:
            tasks.append(new)  # a task more: gathered anew
        kept = binary_lists(kept_by, tasks)
        fresh = binary_lists(HarborKept(), tasks)
        assert kept.binary.tallies == fresh.binary.tallies
        assert kept.broken == fresh.broken
        assert kept.binary.tallies == {
            name: [task.tallies[name] for task in tasks if name in task.tallies]
            for name in sorted({name for task in tasks for name in task.tallies})
        }
        assert set(kept.broken) == {name for task in tasks for name in task.broken}


view_values_drawn = st.sampled_from([0.0, -0.0, 1.0, -2.5, float("inf"), float("nan")]) | st.floats()


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), view_values_drawn), min_size=1, max_size=24))
def test_a_view_aggregate_revised_as_task_values_change_equals_the_one_built_from_scratch(
    scores: list[tuple[int, int, float]],
) -> None:
    """The view's values kept in order (`SummaryCache.view_sorted`) follow every task's values
    as they change, through equal values, -0.0 (which `single` passes on as it is, where a
    weighted sum gives 0.0) and non-finite ones."""
    view = {"name": "v", "reducer": "single", "signals": [{"metric": "r", "output": "s"}]}
    run, cache = RunState("run"), SummaryCache()
    log: list[InputEvent] = [started(tasks=[task_spec(f"t{task}", {"r.s": "continuous"}, [view]) for task in range(3)])]
    apply(run, log[0])
    for task, trial, value in scores:
        log.append(score(f"t{task}", f"t{task}-{trial}", "r", {"s": value}))
        apply(run, log[-1])
        assert_oracles(summary_bytes(run, cache), [encode(event) for event in log])


@given(run_logs(), st.data())
def test_kept_task_tallies_equal_those_gathered_afresh_after_every_event(
    log: list[InputEvent], data: st.DataObject
) -> None:
    run = RunState("run")
    kept: TaskTallies | None = None
    eligible = run.passk
    for event in with_redeliveries(log, data):
        apply(run, event)
        if run.passk is not eligible:  # declarations decided the keys afresh
            kept, eligible = None, run.passk
        if data.draw(st.booleans(), label="take the tallies now"):
            kept = task_tallies(run, kept)
            fresh = task_tallies(run)
            assert kept.measured.tallies == fresh.measured.tallies
            assert kept.measured.places == fresh.measured.places
            assert kept.unmeasured == fresh.unmeasured
