"""Replay's bound on the summary caches of closed runs (`projections.closed_caches`): what
replay writes is the same bytes whatever the budget, caches are dropped oldest first while
over it, and only closed runs lose theirs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from events.codec import encode
from events.models import InputEvent
from projections.assembly.summary import summary_bytes
from projections.closed_caches import ClosedCaches
from projections.fold.run import RunState, apply
from projections.footprint import cache_footprint
from projections.held import Held, summaries_of
from projections.replayer import Output, Replayer
from tests.builders import closed, score, started, task_spec
from tests.strategies import run_logs

UNBOUNDED = 2**62


@st.composite
def logs_of_runs_with_late_events(draw: st.DrawFn) -> list[bytes]:
    """Lines of 2-4 runs interleaved, each run's close anywhere in its log (what follows it
    is late)."""
    queues = []
    for index in range(draw(st.integers(2, 4))):
        log = draw(run_logs(run_id=f"r{index}"))
        close = log.pop()
        log.insert(draw(st.integers(0, len(log))), close)
        queues.append([encode(event) for event in log])
    lines = []
    while queues:
        queue = draw(st.sampled_from(queues))
        lines.append(queue.pop(0))
        if not queue:
            queues.remove(queue)
    return lines


def replayed(lines: list[bytes], budget: int, progress_every: int | None = None) -> tuple[list[Output], Replayer]:
    replayer = Replayer(progress_every, closed_caches_bytes=budget)
    outputs = [output for number, line in enumerate(lines, 1) for output in replayer.feed(number, line)]
    return outputs, replayer


@given(logs_of_runs_with_late_events(), st.sampled_from([0, 40_000, 200_000]), st.sampled_from([None, 1, 3]))
def test_what_replay_writes_is_the_same_whatever_the_budget(
    lines: list[bytes], budget: int, progress_every: int | None
) -> None:
    bounded, replayer = replayed(lines, budget, progress_every)
    assert bounded == replayed(lines, UNBOUNDED, progress_every)[0]
    caches = replayer.closed_caches
    assert caches.held_bytes <= budget or len(caches) == 1
    for held in replayer.runs.values():
        if not held.run.closed:
            continue
        # A closed run has a cache only if held; a held run's estimate is its cache's now.
        assert (held.summaries is not None) == (held.run.run_id in caches)


def closed_run(run_id: str, tasks: int) -> Held:
    """A closed run of `tasks` tasks with its first summary built (its cache made)."""
    held = Held(RunState(run_id))
    run = held.run
    events: list[InputEvent] = [
        started(run_id, [task_spec(f"t{i}", {"reward.score": "boolean"}) for i in range(tasks)])
    ]
    events += [score(f"t{i}", f"t{i}-0", "reward", {"score": 1.0}, run_id=run_id) for i in range(tasks)]
    for event in [*events, closed(run_id)]:
        apply(run, event)
    summary_bytes(run, summaries_of(held))
    return held


def test_the_caches_of_the_runs_revised_least_recently_are_dropped_first() -> None:
    runs = [closed_run(f"r{index}", tasks=3) for index in range(4)]
    size = cache_footprint(runs[0].run, runs[0].summaries)
    caches = ClosedCaches(budget=2 * size)
    for run in runs[:2]:
        caches.revised(run)
    caches.revised(runs[0])  # r0 is now the most recently revised
    caches.revised(runs[2])
    assert [held.summaries is not None for held in runs] == [True, False, True, True]
    assert (len(caches), caches.held_bytes, caches.dropped) == (2, 2 * size, 1)
    caches.revised(runs[3])
    assert [held.summaries is not None for held in runs] == [False, False, True, True]
    assert caches.dropped == 2


def test_the_most_recently_revised_run_keeps_its_cache_whatever_its_size() -> None:
    big, small = closed_run("big", tasks=50), closed_run("small", tasks=1)
    caches = ClosedCaches(budget=cache_footprint(small.run, small.summaries))
    caches.revised(small)
    caches.revised(big)
    assert big.summaries is not None
    assert small.summaries is None
    assert caches.held_bytes == cache_footprint(big.run, big.summaries) > caches.budget


def test_an_open_run_keeps_its_cache() -> None:
    held = Held(RunState("open"))
    apply(held.run, score("t", "t-0", "reward", {"score": 1.0}, run_id="open"))
    summary_bytes(held.run, summaries_of(held))
    caches = ClosedCaches(budget=0)
    caches.revised(held)
    assert held.summaries is not None
    assert len(caches) == 0


def test_a_dropped_cache_is_made_again_by_the_next_summary_and_gives_the_same_bytes() -> None:
    held = closed_run("r", tasks=3)
    kept = summary_bytes(held.run, summaries_of(held))
    caches = ClosedCaches(budget=0)
    caches.revised(held)
    caches.revised(closed_run("other", tasks=1))
    assert held.summaries is None
    assert summary_bytes(held.run, summaries_of(held)) == kept
    assert held.summaries is not None
