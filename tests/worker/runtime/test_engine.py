"""Exactly once, by the broker's rules: the crash law, the zombie law and a failure at every
step of a transaction, then the engine's seek, ownership and backpressure rules, without a
broker (`tests/worker/runtime/engine_harness.py` has one in memory)."""

from __future__ import annotations

import asyncio
import gc
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from aiokafka.errors import (
    InvalidProducerEpoch,
    InvalidProducerIdMapping,
    InvalidTxnState,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFenced,
)
from hypothesis import event, given, settings
from hypothesis import strategies as st

from events.codec import encode
from events.models import InputEvent
from projections.native_events import NATIVE
from projections.storage import checkpoint_from_bytes, marker_of
from tests import builders
from tests.strategies import run_logs
from tests.worker.runtime.engine_harness import (
    Broker,
    Message,
    Refusal,
    Store,
    Worker,
    Write,
    claimed,
    never,
    run,
    settle,
    step,
    worker,
)
from worker.runtime.archive import Read, Slow
from worker.runtime.changes import PartitionChanges, Snapshot
from worker.runtime.processor import Record

RUNS = ("run-a", "run-b", "run-c")
PARTITION_OF = {"run-a": 0, "run-b": 1, "run-c": 0}
JUNK = (b"{nope", b'{"schema_version": 1}', encode(builders.closed("run-a", event_id="refused-twin"))[:-1])
REFUSED_PROGRESS = b"the broker refused the progress"


@st.composite
def topic_logs(draw: st.DrawFn) -> list[Message]:
    """Up to three runs interleaved over two partitions, with bad messages, producer
    duplicates and late events after a close."""
    logs: list[list[Message]] = []
    for run_id in RUNS[: draw(st.integers(1, 3))]:
        events: list[InputEvent] = draw(run_logs(run_id=run_id))
        messages: list[Message] = [(PARTITION_OF[run_id], run_id.encode(), encode(event)) for event in events]
        for n in range(draw(st.integers(0, 2))):  # after the close: on a run retired, maybe
            late = builders.trial("t0", f"late-{n}", run_id=run_id)
            messages.append((PARTITION_OF[run_id], run_id.encode(), encode(late)))
        for _ in range(draw(st.integers(0, 2))):
            messages.insert(draw(st.integers(0, len(messages))), draw(st.sampled_from(messages)))
        for junk in draw(st.lists(st.sampled_from(JUNK), max_size=2)):
            messages.insert(draw(st.integers(0, len(messages))), (PARTITION_OF[run_id], run_id.encode(), junk))
        logs.append(messages)
    merged: list[Message] = []
    while any(logs):
        merged.append(draw(st.sampled_from([log for log in logs if log])).pop(0))
    return merged


def outputs(writes: list[Write]) -> tuple[dict[bytes | None, list[bytes]], list[tuple[bytes, ...]]]:
    """Each run's summaries in the order committed, and the dead letters. Progress is
    coalesced by time, so which progress events a worker publishes depends on its batches:
    neither progress nor the dead letters of refused progress are compared."""
    summaries: dict[bytes | None, list[bytes]] = {}
    for write in writes:
        if write.stream == "summary":
            summaries.setdefault(write.key, []).append(write.value or b"")
    dead = sorted(
        (write.value or b"", *(value for _, value in write.headers))
        for write in writes
        if write.stream == "deadletter" and not dict(write.headers)["evalstream.detail"].startswith(REFUSED_PROGRESS)
    )
    return summaries, dead


def pace(rng: random.Random) -> dict[str, Callable[[], object]]:
    """Batches, answers and time at random as the test goes: the orders that find a wrong
    order of writes soonest."""
    return {
        "batch": lambda: rng.randint(1, 6),
        "acknowledgements": lambda: rng.randint(0, 3),
        "clock_step": lambda: rng.choice([0.0, 0.1, 0.3]),
    }


def randomness(data: st.DataObject) -> random.Random:
    """One draw for a whole run's pace and the broker's choices (a draw each would make the
    smallest example too large to search)."""
    return random.Random(data.draw(st.integers(0, 2**32), label="seed"))


def refusals(data: st.DataObject) -> Refusal:
    """Outputs the broker refuses, the same for every worker: every summary (and maybe
    progress) of some runs, at once or in its answer; maybe their dead letters too."""
    runs = data.draw(st.sets(st.sampled_from([run.encode() for run in RUNS])), label="refused runs")
    streams = data.draw(st.sampled_from([{"summary"}, {"summary", "progress"}]), label="refused streams")
    how = data.draw(st.sampled_from(["at once", "answered"]), label="refused how")
    letters = data.draw(st.booleans(), label="their dead letters refused too")

    def refuse(write: Write) -> str | None:
        if write.key not in runs:
            return None
        if write.stream in streams or (letters and write.stream == "deadletter" and is_refusal_letter(write)):
            return how
        return None

    return refuse


def is_refusal_letter(write: Write) -> bool:
    return ("evalstream.reason", b"output-refused") in write.headers


def crash_free(messages: list[Message], refuse: Refusal = never) -> Broker:
    broker = Broker(refuse=refuse)
    solo = worker(broker, messages)
    asyncio.run(_assigned_and_run(solo))
    assert solo.gave_up == []
    return broker


async def _assigned_and_run(solo: Worker, **pace_: object) -> None:
    solo.engine.assigned(solo.consumer.topic.keys())
    await run(solo, **pace_)  # type: ignore[arg-type]


def drawn_worker(broker: Broker, messages: list[Message], data: st.DataObject, store: Store | None = None) -> Worker:
    return worker(
        broker,
        messages,
        store,
        flush_every=data.draw(st.integers(1, 8), label="flush every"),
        cache_runs=data.draw(st.sampled_from([0, 1, 100]), label="cache runs"),
    )


@settings(max_examples=150, deadline=None)
@given(topic_logs(), st.data())
def test_a_crash_at_any_step_loses_nothing_and_publishes_nothing_twice(
    messages: list[Message], data: st.DataObject
) -> None:
    """A worker crashes after any number of its steps, with transactions open or being
    answered; what it committed is all that survives. A worker restarted on its local copy
    (or on a new machine: from the changelog alone) reads on from the checkpoints, and the
    committed outputs are exactly a crash-free worker's: each run's summaries in order, none
    twice, every dead letter once. The broker may refuse some outputs for good: each is
    dead-lettered once and the law still holds."""
    refuse = refusals(data)
    want = outputs(crash_free(messages, refuse).committed)
    rng = randomness(data)
    broker = Broker(refuse=refuse, choose=lambda candidates: rng.randrange(len(candidates)))
    first = drawn_worker(broker, messages, data)
    crash_after = data.draw(st.integers(0, 60), label="crash after steps")

    async def go() -> None:
        first.engine.assigned(first.consumer.topic.keys())
        for _ in range(crash_after):
            await step(first, **pace(rng))  # type: ignore[arg-type]
        store = first.store if data.draw(st.booleans(), label="same machine") else None
        restarted = drawn_worker(broker, messages, data, store)
        await _assigned_and_run(restarted, **pace(rng))
        assert restarted.gave_up == []

    asyncio.run(go())
    assert outputs(broker.committed) == want


@settings(max_examples=100, deadline=None)
@given(topic_logs(), st.data())
def test_a_stalled_owner_that_wakes_up_writes_nothing_after_the_new_owner(
    messages: list[Message], data: st.DataObject
) -> None:
    """A worker stalls past its session; the group gives its partitions to another, which
    claims them (fencing the first) and goes on. The first wakes up and goes on too, its
    steps interleaved with the new owner's, until the group tells it its partitions are gone:
    whatever it tries, the committed outputs are exactly a crash-free worker's."""
    want = outputs(crash_free(messages).committed)
    rng = randomness(data)
    broker = Broker(choose=lambda candidates: rng.randrange(len(candidates)))
    stalled = drawn_worker(broker, messages, data)
    owner = drawn_worker(broker, messages, data)

    async def go() -> None:
        stalled.engine.assigned(stalled.consumer.topic.keys())
        for _ in range(data.draw(st.integers(0, 30), label="steps before the stall")):
            await step(stalled, **pace(rng))  # type: ignore[arg-type]
        owner.engine.assigned(owner.consumer.topic.keys())
        for _ in range(data.draw(st.integers(0, 40), label="steps until the group tells it")):
            await step(rng.choice([stalled, owner]), **pace(rng))  # type: ignore[arg-type]
        await stalled.engine.revoked(timeout=0)
        await run(owner, **pace(rng))  # type: ignore[arg-type]
        assert (owner.gave_up, stalled.gave_up) == ([], [])

    asyncio.run(go())
    assert outputs(broker.committed) == want


@settings(max_examples=60, deadline=None)
@given(topic_logs(), st.data())
def test_a_worker_given_its_partition_back_restores_what_the_owner_between_wrote(
    messages: list[Message], data: st.DataObject
) -> None:
    """A worker checkpoints, loses its partition to another that checkpoints more, and gets it
    back with its local copy as it left it: the copy must take the other owner's changelog
    records, which it does only if it recorded the offset of its own last changelog record
    (outputs' offsets, in other topics, run far ahead of it)."""
    want = outputs(crash_free(messages).committed)
    rng = randomness(data)
    broker = Broker(choose=lambda candidates: rng.randrange(len(candidates)))
    first = drawn_worker(broker, messages, data)
    between = drawn_worker(broker, messages, data)

    async def go() -> None:
        first.engine.assigned(first.consumer.topic.keys())
        for _ in range(data.draw(st.integers(1, 30), label="steps of the first owner")):
            await step(first, **pace(rng))  # type: ignore[arg-type]
        await first.engine.revoked(timeout=0)
        between.engine.assigned(between.consumer.topic.keys())
        for _ in range(data.draw(st.integers(1, 30), label="steps of the owner between")):
            await step(between, **pace(rng))  # type: ignore[arg-type]
        await between.engine.revoked(timeout=0)
        back = drawn_worker(broker, messages, data, first.store)
        await _assigned_and_run(back)
        assert (first.gave_up, between.gave_up, back.gave_up) == ([], [], [])

    asyncio.run(go())
    assert outputs(broker.committed) == want


STEPS = ("begin", "send", "answer", "offsets", "commit", "committed")


def sender_died() -> KafkaError:
    """What aiokafka fails every pending batch with when its sender's loop dies, here of a
    coordinator that forgot the transactional id (`aiokafka/producer/sender.py`)."""
    try:
        raise KafkaError("Unexpected error during batch delivery") from InvalidProducerIdMapping()
    except KafkaError as error:
        return error


FAILURES: list[Callable[[], BaseException]] = [
    KafkaTimeoutError,
    KafkaConnectionError,
    ProducerFenced,
    InvalidProducerEpoch,
    InvalidProducerIdMapping,
    InvalidTxnState,
    sender_died,
]
"""Errors the real client raises that say nothing about any record sent."""


def test_a_failure_at_any_step_of_a_transaction_is_redone_exactly_once() -> None:
    """The law below, and proof that its fault happened: some of its examples (a step fails
    with probability 0.3) must have failed a step with a fence, or the law held only for
    transactions that never failed."""
    injected: Counter[str] = Counter()
    _failure_at_any_step_is_redone_exactly_once(injected)
    assert injected["fenced"] > 0, f"no example fenced a producer: {dict(injected)}"
    assert injected["examples"] - injected["nothing"] > 0, f"no example injected a failure: {dict(injected)}"


def _failure_at_any_step_is_redone_exactly_once(injected_in: Counter[str]) -> None:
    @settings(max_examples=100, deadline=None)
    @given(topic_logs(), st.data())
    def law(messages: list[Message], data: st.DataObject) -> None:
        _failure_at_any_step(messages, data, injected_in)

    law()


def _failure_at_any_step(messages: list[Message], data: st.DataObject, injected_in: Counter[str]) -> None:
    """Any step of a checkpoint's transaction fails with an error of the real client that
    says nothing about a record (a timeout, a lost broker, the producer fenced as aiokafka
    answers a record in flight when another producer takes the partition's transactional id,
    a coordinator that forgot the id, aiokafka's sender dying), some of them after the commit
    took effect (the worker cannot tell): the partition's producer is renewed and the
    checkpoint written again, or the partition read again from what was committed, and the
    committed outputs are exactly a crash-free worker's. None of them refuses a record:
    nothing is dead-lettered or parked for it."""
    want = outputs(crash_free(messages).committed)
    failing = set(data.draw(st.lists(st.sampled_from(STEPS), min_size=1, unique=True), label="failing steps"))
    budget = data.draw(st.integers(1, 6), label="failures")
    kind = data.draw(st.sampled_from(FAILURES), label="failure")
    rng = randomness(data)
    injected: list[str] = []

    def fail(step_: str) -> BaseException | None:
        if step_ in failing and len(injected) < budget and rng.random() < 0.3:
            injected.append(step_)
            error: BaseException = kind()
            return error
        return None

    broker = Broker(fail=fail)
    flaky = drawn_worker(broker, messages, data)
    asyncio.run(_assigned_and_run(flaky, **pace(rng)))
    assert flaky.gave_up == []
    assert outputs(broker.committed) == want
    counts = flaky.engine.counts
    assert counts.redone + counts.failures >= (1 if injected else 0)
    assert [write for write in broker.committed if write.stream == "deadletter" and is_refusal_letter(write)] == []
    assert flaky.engine.counts.parked == {}
    name = getattr(kind, "__name__", "?") if injected else "nothing"
    event(f"injected: {name}")
    injected_in.update(
        {"examples": 1, name: 1, "fenced": bool(injected) and kind in (ProducerFenced, InvalidProducerEpoch)}
    )


def test_a_run_whose_state_the_broker_refuses_is_parked_and_the_others_go_on() -> None:
    """A changelog record refused (a task's state too large for the changelog): nothing of
    that checkpoint is committed, the run is parked (its events dead-lettered as
    state-refused) and the partition is read again; the partition's other run is exact."""
    a = [builders.started("run-a", [builders.task_spec("t")]), builders.trial("t", "a-1", run_id="run-a")]
    a.append(builders.closed("run-a"))
    c = [builders.started("run-c", [builders.task_spec("t")]), builders.trial("t", "c-1", run_id="run-c")]
    c.append(builders.closed("run-c"))
    messages: list[Message] = [
        (0, event.run_id.encode(), encode(event)) for pair in zip(a, c, strict=True) for event in pair
    ]

    def refuse(write: Write) -> str | None:
        return "answered" if write.stream == "changelog" and write.key == b't["run-a","t"]' else None

    broker = Broker(refuse=refuse, batched=True)
    solo = worker(broker, messages)
    asyncio.run(_assigned_and_run(solo))
    summaries, _ = outputs(broker.committed)
    assert set(summaries) == {b"run-c"}, "run-c shared a refused batch with run-a, and was not parked for it"
    assert summaries[b"run-c"] == outputs(crash_free([m for m in messages if m[1] == b"run-c"]).committed)[0][b"run-c"]
    reasons = [dict(write.headers)["evalstream.reason"] for write in broker.committed if write.stream == "deadletter"]
    assert reasons == [b"state-refused"] * 3
    assert solo.engine.counts.parked == {"state-refused": 1}


# The engine's rules, one at a time.


def _events(run_id: str = "run-a", trials: int = 1) -> list[InputEvent]:
    events: list[InputEvent] = [builders.started(run_id, [builders.task_spec("t")])]
    events += [builders.trial("t", f"t-{n}", run_id=run_id) for n in range(trials)]
    return [*events, builders.closed(run_id)]


def _messages(events: list[InputEvent], partition: int = 0) -> list[Message]:
    return [(partition, event.run_id.encode(), encode(event)) for event in events]


def test_records_fetched_before_the_seek_are_dropped_and_the_seek_waits_for_the_rebalance() -> None:
    messages = _messages(_events())
    broker = Broker()
    solo = worker(broker, messages, flush_every=1)

    async def go() -> None:
        solo.engine.assigned([0])
        await settle()
        assert not solo.engine.ready(0)
        await solo.engine.handle(0, [Record(0, b"run-a", messages[0][2])])  # fetched before the seek: dropped
        await solo.engine.tick(rebalancing=True)
        assert solo.consumer.seeks == []
        await solo.engine.tick(rebalancing=False)
        assert solo.consumer.seeks == [(0, 0)]
        assert solo.engine.ready(0)
        await run(solo)

    asyncio.run(go())
    summaries, _ = outputs(broker.committed)
    assert len(summaries[b"run-a"]) == 1


def test_a_revocation_waits_for_the_checkpoint_being_written_and_then_writes_nothing() -> None:
    messages = _messages(_events())
    broker = Broker()
    solo = worker(broker, messages, flush_every=1)

    async def go() -> None:
        await claimed(solo.engine)
        await solo.engine.handle(0, solo.consumer.take(0, 1))  # a checkpoint starts, waiting for answers
        assert solo.engine.checkpointing
        revoking = asyncio.ensure_future(solo.engine.revoked(timeout=5))
        await settle()
        assert not revoking.done()  # it waits for the checkpoint being written
        while not revoking.done():
            broker.acknowledge_all()
            await settle()
        await revoking
        await solo.engine.handle(0, solo.consumer.take(0, 2))  # not its partition any more: dropped

    asyncio.run(go())
    assert broker.commits == 1
    assert broker.offsets == {0: 1}


def test_a_refusal_answered_during_a_revocation_claims_nothing_again() -> None:
    """The broker refuses a record of the checkpoint a revocation waits for: the partition is
    no longer this worker's, so it makes no new producer (which would fence the next owner's)
    and writes nothing; the next owner meets the refusal itself."""
    messages = _messages(_events())

    def refuse(write: Write) -> str | None:
        return "answered" if write.stream == "summary" else None

    broker = Broker(refuse=refuse)
    solo = worker(broker, messages, flush_every=1)

    async def go() -> None:
        await claimed(solo.engine)
        await solo.engine.handle(0, solo.consumer.take(0, 3))
        assert solo.engine.checkpointing
        claims_before = solo.claims.claimed
        revoking = asyncio.ensure_future(solo.engine.revoked(timeout=5))
        while not revoking.done():
            broker.acknowledge_all()
            await settle()
        await revoking
        assert broker.refused != []
        assert solo.claims.claimed == claims_before

    asyncio.run(go())
    assert solo.engine.counts.refusals == 0
    assert broker.committed == []


def test_consuming_once_every_assigned_partition_is_claimed_and_sought_and_not_after_a_revocation() -> None:
    solo = worker(Broker(), [])

    async def go() -> list[bool]:
        seen = [solo.engine.consuming]  # nothing assigned yet
        solo.engine.assigned([0, 1])
        await settle()
        seen.append(solo.engine.consuming)  # claimed, not sought
        await solo.engine.tick(rebalancing=True)
        seen.append(solo.engine.consuming)  # the seeks wait for the rebalance
        await solo.engine.tick(rebalancing=False)
        seen.append(solo.engine.consuming)
        await solo.engine.revoked(timeout=1)
        seen.append(solo.engine.consuming)
        solo.engine.assigned([])
        seen.append(solo.engine.consuming)  # the group has nothing for it: idle, and ready
        return seen

    assert asyncio.run(go()) == [False, False, False, True, False, True]


def test_each_committed_checkpoint_reports_how_long_it_took() -> None:
    took: list[float] = []
    broker = Broker()
    solo = worker(broker, _messages([builders.closed("run-a")]), flush_every=1, on_checkpoint=took.append)

    async def go() -> None:
        await claimed(solo.engine)
        await solo.engine.handle(0, solo.consumer.take(0, 1))
        assert solo.engine.checkpointing
        solo.clock[0] += 0.125  # the broker takes its time
        for _ in range(5):
            await settle()
            broker.acknowledge_all()
        assert not solo.engine.checkpointing

    asyncio.run(go())
    assert took == [0.125]
    assert broker.offsets == {0: 1}


def test_a_checkpoint_holding_progress_is_started_at_once_and_state_alone_waits_for_the_interval() -> None:
    """Progress is readable once its checkpoint commits: a checkpoint is sealed as soon as it
    holds progress, whatever the flush interval (0.25 s in the harness), so that progress
    waits for its window alone; a change without progress waits for the interval. Progress
    that falls due while a checkpoint is being written goes in the next one, sealed once
    that one is committed."""
    broker = Broker()
    events = _events(trials=4)[:-1]  # the run stays open
    solo = worker(broker, _messages(events), progress_interval=0.2)
    engine = solo.engine

    def committed_progress() -> list[int]:
        return [orjson.loads(write.value or b"")["event_count"] for write in broker.outputs()]

    async def at(now: float, events_: int = 0) -> None:
        solo.clock[0] = now
        if events_:
            await engine.handle(0, solo.consumer.take(0, events_))
        await engine.tick(rebalancing=False)

    async def written() -> None:
        for _ in range(10):
            broker.acknowledge_all()
            await settle()
        assert not engine.checkpointing

    async def go() -> None:
        await claimed(engine)
        await at(0.0, 1)  # the run starts: an idle partition's progress at once
        assert engine.checkpointing
        await written()
        assert committed_progress() == [1]
        await at(0.1, 1)  # within the window: a change, no progress
        assert not engine.checkpointing, "a checkpoint without progress was sealed before the flush interval"
        await at(0.2)  # the window is over, the flush interval (0.25 s since 0.0) is not
        assert engine.checkpointing, "progress waits for the flush interval"
        await at(0.3, 1)  # still being written
        await at(0.4, 1)  # the next window's progress, due while the one before is being written
        assert broker.commits == 1
        await written()
        assert committed_progress() == [1, 2]
        await at(0.41)
        assert engine.checkpointing  # right after: not at 0.45, the flush interval after 0.2
        await written()

    asyncio.run(go())
    assert committed_progress() == [1, 2, 4]
    assert broker.offsets == {0: 4}


@pytest.mark.parametrize(
    ("progress_interval", "sealed_by_time"),
    [(0.4, False), (0.6, True)],
    ids=["window-ends-within-the-flush-interval", "window-ends-later"],
)
def test_changes_alone_go_with_the_progress_due_within_a_flush_interval(
    progress_interval: float, sealed_by_time: bool
) -> None:
    """Changes without outputs, due by time (the harness's flush interval: 0.25 s), wait for
    their partition's progress when its window ends within a flush interval, and go in its
    checkpoint: one transaction instead of two. A window ending later does not hold them."""
    broker = Broker()
    solo = worker(broker, _messages(_events(trials=2)[:-1]), progress_interval=progress_interval)
    engine = solo.engine

    async def at(now: float, events: int = 0) -> None:
        solo.clock[0] = now
        if events:
            await engine.handle(0, solo.consumer.take(0, events))
        await engine.tick(rebalancing=False)
        for _ in range(10):
            broker.acknowledge_all()
            await settle()

    async def go() -> list[int]:
        await claimed(engine)
        await at(0.0, 1)  # the run starts: its progress at once
        await at(0.1, 1)  # a change
        await at(0.3)  # due by time; the window ends at 0.4 or at 0.6
        commits = [broker.commits]
        await at(progress_interval)
        return [*commits, broker.commits]

    assert asyncio.run(go()) == ([2, 3] if sealed_by_time else [1, 2])
    assert [orjson.loads(write.value or b"")["event_count"] for write in broker.outputs()] == [1, 2]
    assert broker.offsets == {0: 2}


def test_a_broker_slower_than_the_fetcher_holds_the_fetcher_back_at_two_checkpoints() -> None:
    """Backpressure: with a checkpoint still being written, the fetcher takes the next due
    one's events and then waits; the changes in memory never pass two checkpoints'."""
    broker = Broker()
    solo = worker(broker, _messages(_events(trials=5)), flush_every=2)

    async def go() -> None:
        engine, processor = solo.engine, solo.processor
        await claimed(engine)
        await engine.handle(0, solo.consumer.take(0, 2))
        assert engine.checkpointing  # the first checkpoint waits for its answers
        await engine.handle(0, solo.consumer.take(0, 1))  # gathering: not due yet
        held = asyncio.ensure_future(engine.handle(0, solo.consumer.take(0, 1)))
        await settle(20)
        assert not held.done(), "the fetcher went on while two checkpoints' changes were in memory"
        assert processor.partitions[0].handled == 2
        while not held.done():
            broker.acknowledge(1)
            await settle()
        await held
        assert engine.checkpointing  # the second one, sealed once the first was committed
        assert processor.partitions[0].handled == 0

    asyncio.run(go())
    checkpoints = [
        checkpoint_from_bytes(write.value or b"").offset for write in broker.changelog(0) if write.key == b"o0"
    ]
    assert checkpoints == [1]


def test_a_checkpoint_a_stuck_broker_never_answers_is_abandoned_at_a_revocation() -> None:
    """A broker that never answers: the revocation waits its timeout, then cancels the
    checkpoint, counts it, and nothing is left holding its snapshot."""
    broker = Broker()
    solo = worker(broker, _messages([builders.closed("run-a")]), flush_every=1)

    async def go() -> None:
        await claimed(solo.engine)
        await solo.engine.handle(0, solo.consumer.take(0, 1))
        assert solo.engine.checkpointing
        await solo.engine.revoked(timeout=0.01)
        assert not solo.engine.checkpointing
        await settle()
        assert [task for task in asyncio.all_tasks() if task is not asyncio.current_task()] == []

    asyncio.run(go())
    assert solo.engine.counts.abandoned == 1
    assert broker.commits == 0
    gc.collect()
    assert [held for held in gc.get_objects() if isinstance(held, Snapshot)] == []


def test_the_local_copy_gets_a_checkpoint_only_once_it_is_committed_and_runs_stay_until_then() -> None:
    """A run that left the cache is restored from the local copy, so it must not leave while
    its checkpoint is uncommitted, and the copy must not hold what was not committed."""
    broker = Broker(choose=lambda candidates: len(candidates) - 1)
    solo = worker(broker, _messages(_events()), flush_every=100, cache_runs=0)

    async def go() -> None:
        engine = solo.engine
        await claimed(engine)
        await engine.handle(0, solo.consumer.take(0, 1))
        solo.clock[0] += 1.0
        await engine.tick(rebalancing=False)  # a checkpoint by time
        broker.acknowledge(1)
        await settle()
        assert engine.checkpointing
        assert solo.store.partitions == {}  # nothing committed: nothing in the copy
        assert "run-a" in solo.processor.cache
        await engine.handle(0, solo.consumer.take(0, 2))
        await run(solo)

    asyncio.run(go())
    assert outputs(broker.committed) == outputs(crash_free(_messages(_events())).committed)


def _retiring_log() -> tuple[list[Message], list[Message]]:
    messages: list[Message] = []
    for run_id in ("run-a", "run-c"):
        tasks = [builders.task_spec(f"t{n}") for n in range(3)]
        events: list[InputEvent] = [builders.started(run_id, tasks)]
        events += [builders.trial(f"t{n}", f"{run_id}-{n}", run_id=run_id) for n in range(3)]
        events.append(builders.closed(run_id))
        messages += _messages(events)
    late = [_messages([builders.trial("t1", f"late-{run_id}", run_id=run_id)])[0] for run_id in ("run-a", "run-c")]
    return messages, late


def test_closed_runs_retire_and_their_late_events_give_the_next_revision_after_any_crash() -> None:
    """Closed runs retired (archive records, markers, tombstones: one transaction), then a
    crash before or after it committed, then their late events: each gives the revision one
    pass over the log gives, byte for byte, from the run's parts or from its archive record,
    on the same machine or a new one."""
    messages, late = _retiring_log()
    want = outputs(crash_free(messages + late).committed)
    for crash_after in range(0, 12):
        for same_machine in (True, False):
            broker = Broker()
            first = worker(broker, messages, cache_runs=0)

            async def go(
                first: Worker = first,
                broker: Broker = broker,
                crash_after: int = crash_after,
                same: bool = same_machine,
            ) -> None:
                await _assigned_and_run(first)
                first.consumer.topic[0] += [
                    Record(len(first.consumer.topic[0]) + n, k, v) for n, (_, k, v) in enumerate(late)
                ]
                for _ in range(crash_after):
                    first.clock[0] += 1.0
                    await step(first, batch=lambda: 1, acknowledgements=lambda: 1)
                restarted = worker(broker, messages + late, first.store if same else None, cache_runs=0)
                await _assigned_and_run(restarted)

            asyncio.run(go())
            assert outputs(broker.committed) == want, f"crash after {crash_after} steps, same machine: {same_machine}"
            summaries = outputs(broker.committed)[0]
            assert [orjson.loads(summaries[run.encode()][-1])["revision"] for run in ("run-a", "run-c")] == [2, 2]
    retired = Broker()
    asyncio.run(_assigned_and_run(worker(retired, messages, cache_runs=0)))
    store = Store()
    store.apply(0, [(write.key or b"", write.value) for write in retired.changelog(0)], 0)
    assert set(store.partitions[0]) == {b'h"run-a"', b'h"run-c"', b"o0"}, "only markers are left"
    assert all(marker_of(store.partitions[0][key]) is not None for key in (b'h"run-a"', b'h"run-c"'))


def test_a_slow_archive_read_is_asked_again_and_a_gone_one_parks_only_its_run() -> None:
    """The archive does not answer in time, twice: the read is asked again (counted), the
    batch waits, and the late event gives revision 2. A run whose archive record is gone is
    parked: its late event dead-lettered as archive-lost, the other run's exact."""
    messages, late = _retiring_log()
    broker = Broker()
    first = worker(broker, messages, cache_runs=0)
    asyncio.run(_assigned_and_run(first))
    second = worker(broker, messages + late, cache_runs=0)
    reads: list[tuple[int, int]] = []
    slow = [2]

    async def read(partition: int, offset: int) -> Read:
        reads.append((partition, offset))
        if slow[0]:
            slow[0] -= 1
            return Slow()
        found = broker.read_archive(partition, offset)
        return found if b"run-c" in (getattr(found, "key", b"") or b"") else broker.read_archive(partition, -1)

    second.engine.archive.read = read  # type: ignore[method-assign]
    asyncio.run(_assigned_and_run(second))
    summaries, _ = outputs(broker.committed)
    assert orjson.loads(summaries[b"run-c"][-1])["revision"] == 2
    assert len(summaries[b"run-a"]) == 1, "the parked run gets no new revision"
    letters = [write for write in broker.committed if write.stream == "deadletter"]
    assert [(write.key, dict(write.headers)["evalstream.reason"]) for write in letters] == [(b"run-a", b"archive-lost")]
    assert b"replay the events topic into a new app id" in dict(letters[0].headers)["evalstream.detail"]
    assert second.engine.counts.archive_retries == 2
    assert second.engine.counts.parked == {"archive-lost": 1}


def _retired(messages: list[Message], **options: object) -> tuple[Broker, Worker]:
    broker = Broker()
    first = worker(broker, messages, cache_runs=0, **options)  # type: ignore[arg-type]
    asyncio.run(_assigned_and_run(first))
    return broker, first


def _late_checkpoint(broker: Broker, messages: list[Message], late: list[Message], store: Store | None) -> list[Write]:
    """What the checkpoints of `late` events (read on from `messages`) commit."""
    before = len(broker.committed)
    asyncio.run(_assigned_and_run(worker(broker, messages + late, store, cache_runs=0)))
    return broker.committed[before:]


def test_a_late_event_on_a_retired_run_writes_only_its_task_and_the_run_stays_retired() -> None:
    """O(the task), not O(the run): the late attempt's checkpoint writes the task it changed
    and the checkpoint record, nothing to the archive; the marker stays. A worker restoring
    from the changelog alone then gives the next late event its revision, byte for byte."""
    messages, _ = _retiring_log()
    broker, first = _retired(messages)
    late = _messages([builders.trial("t1", "late-1", run_id="run-a")])
    written = _late_checkpoint(broker, messages, late, first.store)
    state = [(write.stream, write.key) for write in written if write.stream in ("changelog", "archive")]
    assert state == [("changelog", b't["run-a","t1"]'), ("changelog", b"o0")]
    later = _messages([builders.trial("t2", "late-2", run_id="run-a")])
    written = _late_checkpoint(broker, messages + late, later, None)  # from the changelog alone
    assert next(write.key for write in written if write.stream == "changelog") == b't["run-a","t2"]'
    want = outputs(crash_free(messages + late + later).committed)
    assert outputs(broker.committed) == want
    assert orjson.loads(want[0][b"run-a"][-1])["revision"] == 3
    store = Store()
    store.apply(0, [(write.key or b"", write.value) for write in broker.changelog(0)], 0)
    assert marker_of(store.partitions[0][b'h"run-a"']) is not None, "still retired"


def test_a_first_run_started_after_the_retirement_writes_the_run_back_whole() -> None:
    """The archive record holds the declarations; a run retired without any, then declared,
    cannot keep them beside its marker: every part goes back to the changelog, the header
    in place of the marker, and later events fold as one pass over the log folds them."""
    events: list[InputEvent] = [builders.trial("t0", "r-0", run_id="run-a"), builders.closed("run-a")]
    messages = _messages(events)
    broker, first = _retired(messages)
    late = _messages([builders.started("run-a", [builders.task_spec("t0"), builders.task_spec("t1")])])
    written = _late_checkpoint(broker, messages, late, first.store)
    header = next(write.value for write in written if write.key == b'h"run-a"')
    assert header is not None
    assert marker_of(header) is None, "the header again, not a marker"
    later = _messages([builders.trial("t1", "r-1", run_id="run-a")])
    _late_checkpoint(broker, messages + late, later, None)
    assert outputs(broker.committed) == outputs(crash_free(messages + late + later).committed)


UNDECLARED: list[InputEvent] = [
    builders.trial("t0", "r-0", run_id="run-a"),
    builders.trial("t1", "r-1", run_id="run-a"),
    builders.closed("run-a"),
]
CHANGES_WHILE_RETIRING = {
    "a late attempt": builders.trial("t1", "late-a", run_id="run-a"),
    "a first run.started": builders.started("run-a", [builders.task_spec("t0"), builders.task_spec("t2")]),
}


@pytest.mark.parametrize("late_event", CHANGES_WHILE_RETIRING.values(), ids=CHANGES_WHILE_RETIRING.keys())
@pytest.mark.parametrize("cache_runs", [0, 100])
def test_a_run_changed_while_its_retirement_is_being_written_writes_every_part_back(
    late_event: InputEvent, cache_runs: int
) -> None:
    """A late event handled between the retirement's seal and its commit, on the run cached
    or restored from the local copy's parts: its checkpoint comes after the marker replaced
    those parts, so it writes them all back (a changed run.started could not stand beside a
    marker whose archive record holds none); later restores give the right revisions."""
    messages = _messages(UNDECLARED)
    late = _messages([late_event])
    later = _messages([builders.trial("t0", "late-b", run_id="run-a")])
    want = outputs(crash_free(messages + late + later).committed)
    broker = Broker()
    solo = worker(broker, messages, cache_runs=cache_runs)

    def changes() -> PartitionChanges:
        return solo.processor.partitions[0].changes

    async def go() -> None:
        engine = solo.engine
        await claimed(engine)
        await engine.handle(0, solo.consumer.take(0, len(messages)))
        for _ in range(20):  # until the close is committed: the run is a candidate
            broker.acknowledge_all()
            await settle()
            if "run-a" in changes().retire and not engine.checkpointing:
                break
            solo.clock[0] += 1.0
            await engine.tick(rebalancing=False)
        solo.clock[0] += 1.0
        await engine.tick(rebalancing=False)  # the retirement's checkpoint is sealed
        assert engine.checkpointing
        assert "run-a" not in changes().retire, "being retired"
        solo.consumer.topic[0].append(Record(len(messages), *late[0][1:]))
        await engine.handle(0, solo.consumer.take(0, 1))  # the late event, before it commits
        await run(solo)

    asyncio.run(go())
    _late_checkpoint(broker, messages + late, later, None)
    assert outputs(broker.committed) == want


@pytest.mark.parametrize("fold", ["python", *(["native"] if NATIVE is not None else [])])
def test_a_run_that_could_not_be_put_back_stops_the_worker_with_nothing_of_it_committed(
    monkeypatch: pytest.MonkeyPatch, fold: str
) -> None:
    """A step failed and its rollback too (the Python fold), or the native fold failed inside
    an apply (a panic): the worker stops (naming the run) before anything of the batch is
    committed, and the partition's records are handled no more."""
    from projections import native_events, native_step
    from projections import step as step_module

    messages = _messages(_events(trials=2))
    broker = Broker()
    if fold == "python":
        real_apply = step_module.apply  # type: ignore[attr-defined]

        def apply(run: object, event: InputEvent, position: int | None) -> object:
            if getattr(event, "trial_id", None) == "t-1":
                raise RuntimeError("apply broke")
            return real_apply(run, event, position)  # type: ignore[arg-type]

        def rollback(self: object, run: object) -> None:
            raise RuntimeError("rollback broke")

        monkeypatch.setattr("projections.step.apply", apply)
        monkeypatch.setattr("projections.step.Savepoint.rollback", rollback)
    else:
        monkeypatch.setattr(native_step, "fold_reader", lambda: Panicking(native_events.fold_reader()))
    solo = worker(broker, messages, flush_every=1, native=fold == "native")

    async def go() -> None:
        await claimed(solo.engine)
        await solo.engine.handle(0, solo.consumer.take(0, 3))  # run.started, t-0, then t-1 breaks
        await settle()
        broker.acknowledge_all()
        await settle()
        await solo.engine.handle(0, solo.consumer.take(0, 1))

    asyncio.run(go())
    assert [type(error).__name__ for error in solo.gave_up] == ["RollbackFailed"]
    assert "run 'run-a'" in str(solo.gave_up[0])
    assert not solo.engine.ready(0)
    assert broker.offsets.get(0, 0) <= 2, "nothing past the broken event is committed"
    assert all(write.stream != "summary" for write in broker.committed)


def test_closed_runs_a_worker_stopped_before_retiring_are_retired_by_the_next_claim() -> None:
    """A worker stops right after the runs' closes are committed, before it retires them: the
    next worker to claim the partition finds them closed in its local copy and retires them,
    so that the changelog keeps one marker per closed run whatever the stops."""
    messages, _ = _retiring_log()
    broker = Broker()
    first = worker(broker, messages, flush_every=1000)

    async def stop_after_close() -> None:
        await claimed(first.engine)
        await first.engine.handle(0, first.consumer.take(0, len(messages)))
        revoking = asyncio.ensure_future(first.engine.revoked(timeout=5))  # commits what gathered
        while not revoking.done():
            broker.acknowledge_all()
            await settle()
        await revoking

    asyncio.run(stop_after_close())
    assert set(outputs(broker.committed)[0]) == {b"run-a", b"run-c"}, "the stop committed what it gathered"
    assert not any(write.stream == "archive" for write in broker.committed), "nothing retired yet"
    asyncio.run(_assigned_and_run(worker(broker, messages, first.store)))
    store = Store()
    store.apply(0, [(write.key or b"", write.value) for write in broker.changelog(0)], 0)
    assert set(store.partitions[0]) == {b'h"run-a"', b'h"run-c"', b"o0"}, "only markers are left"


class Panicking:
    """The native fold's reader, panicking on trial t-1's events as a bug in it would."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader

    def apply_keyed(self, lookup: Any, raw: bytes, key: bytes | None, position: int | None) -> Any:
        if b'"t-1"' in raw:
            assert NATIVE is not None
            raise NATIVE.PanicException("apply broke")
        return self.reader.apply_keyed(lookup, raw, key, position)
