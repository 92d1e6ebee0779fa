"""The crash law, and the engine's rewind and ownership rules, without a broker."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from events import builders
from events.codec import encode
from events.models import InputEvent
from projections import storage
from projections.storage import checkpoint_from_bytes
from tests.strategies import run_logs
from tests.worker.engine_harness import Broker, Message, Store, Write, drive, handled, new_engine
from worker.runtime.processor import Processor, Record, Snapshot

RUNS = ("run-a", "run-b", "run-c")
PARTITION_OF = {"run-a": 0, "run-b": 1, "run-c": 0}
JUNK = (b"{nope", b'{"schema_version": 1}', encode(builders.closed("run-a", event_id="refused-twin"))[:-1])


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


def outputs(writes: list[Write]) -> tuple[dict[bytes | None, bytes], set[tuple[bytes, ...]]]:
    """Each run's latest summary (a compacted topic keeps the last), and the dead letters.
    Progress is coalesced by time, so which progress events a worker publishes depends on
    its batches: neither progress nor the dead letters of refused progress are compared."""
    latest = {write.key: write.value or b"" for write in writes if write.stream == "summary"}
    dead = {
        (write.value or b"", *(value for _, value in write.headers))
        for write in writes
        if write.stream == "deadletter" and not dict(write.headers)["evalstream.detail"].startswith(REFUSED_PROGRESS)
    }
    return latest, dead


REFUSED_PROGRESS = b"the broker refused the progress"


def acknowledgement_order(data: st.DataObject) -> Callable[[list[Write]], int]:
    """The broker's choice of the next write to acknowledge: at random, or the changelog's
    (or the outputs') first whenever it can, the orders that find a wrong order of writes soonest."""
    preferred = data.draw(st.sampled_from(["none", "changelog", "outputs"]), label="acknowledged first")

    def choose(candidates: list[Write]) -> int:
        favoured = [
            at for at, write in enumerate(candidates) if (write.stream == "changelog") == (preferred == "changelog")
        ]
        if preferred != "none" and favoured:
            return favoured[0]
        return data.draw(st.integers(0, len(candidates) - 1))

    return choose


Refusal = Callable[[Write], str | None]


def never(write: Write) -> str | None:
    return None


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
    return (("evalstream.reason", b"output-refused")) in write.headers


def run_worker(
    messages: list[Message], store: Store, data: st.DataObject | None, refuse: Refusal = never, *, cache_runs: int = 100
) -> Broker:
    """A worker over `messages`, restored from `store`: from each partition's checkpoint on.
    With `data`, its cache holds 0, 1 or 100 runs (a late event on a retired run that left
    it is restored from its archive record)."""
    broker = Broker(store, choose=acknowledgement_order(data) if data is not None else lambda candidates: 0)
    broker.refuse = refuse
    clock = [0.0]
    processor = Processor(
        store,
        progress_interval=0.2,
        flush_every=data.draw(st.integers(1, 8)) if data else 1000,
        cache_runs=data.draw(st.sampled_from([0, 1, 100]), label="cache runs") if data else cache_runs,
    )
    engine = new_engine(broker, processor, lambda: clock[0])

    async def go() -> None:
        first = engine.assigned({partition for partition, _, _ in messages})
        if data is None:
            await drive(engine, broker, messages, first, clock=clock)
            return
        # A pause in the log, where every due checkpoint is written (and closed runs retired):
        # the events after it are late ones on retired runs, as often as not.
        lates = [at for at, (_, _, value) in enumerate(messages) if b'"late-' in value]
        cut = data.draw(
            st.sampled_from(lates) | st.integers(0, len(messages)) if lates else st.integers(0, len(messages)),
            label="pause at",
        )
        for part in (messages[:cut], messages):
            await drive(
                engine,
                broker,
                part,
                first,
                clock=clock,
                batch=lambda: data.draw(st.integers(1, 6)),
                acknowledgements=lambda: data.draw(st.integers(0, 3)),
                clock_step=lambda: data.draw(st.sampled_from([0.0, 0.1, 0.3])),
            )
            first = {partition: max(first.get(partition, 0), offset) for partition, offset in _ends(part).items()}

    asyncio.run(go())
    return broker


def _ends(messages: list[Message]) -> dict[int, int]:
    """Each partition's offset after `messages`."""
    ends: dict[int, int] = {}
    for partition, _, _ in messages:
        ends[partition] = ends.get(partition, 0) + 1
    return ends


@settings(max_examples=150, deadline=None)
@given(topic_logs(), st.data())
def test_a_crash_after_any_prefix_of_the_acknowledged_writes_loses_no_output(
    messages: list[Message], data: st.DataObject
) -> None:
    """The worker's writes are acknowledged in an order the broker picks; a crash keeps the
    writes acknowledged so far (in the changelog, the archive and the output topics alike:
    archive records, markers and tombstones of retired runs too). A worker restarted on that
    changelog, reading from its checkpoints, ends with every output a crash-free worker
    publishes: each run's latest summary byte for byte, every dead letter at least once.
    The broker may refuse some outputs for good: each is dead-lettered once, the worker
    never gives up (`new_engine`), and the law still holds."""
    refuse = refusals(data)
    crash_free = run_worker(messages, Store(), None, refuse)
    want_latest, want_dead = outputs(crash_free.durable)
    refused = sorted(write.value or b"" for write in crash_free.refused if write.stream != "deadletter")
    letters = sorted(
        write.value or b"" for write in crash_free.durable + crash_free.refused if is_refusal_letter(write)
    )
    assert letters == refused
    assert crash_free.gave_up == []
    first = run_worker(messages, Store(), data, refuse)
    kept = first.durable[: data.draw(st.integers(0, len(first.durable)), label="crash after")]
    restarted = run_worker(messages, Store.of(kept), None, refuse, cache_runs=data.draw(st.sampled_from([0, 100])))
    got_latest, got_dead = outputs(kept + restarted.durable)
    assert got_latest == want_latest
    assert want_dead <= got_dead


def test_the_crash_law_fails_when_the_checkpoint_is_written_before_the_outputs() -> None:
    """The order the worker had: a checkpoint written before the outputs of the events it
    covers were acknowledged. A crash right after the checkpoint loses the summary."""
    run = [builders.started("run-a", [builders.task_spec("t")]), builders.trial("t", "t-1", run_id="run-a")]
    run.append(builders.closed("run-a"))
    messages: list[Message] = [(0, b"run-a", encode(event)) for event in run]
    # The broker acknowledges changelog records first, then outputs: what the old order allowed.
    first = run_worker(messages, Store(), None)
    changelog_first = sorted(first.issued, key=lambda write: write.stream != "changelog")
    crash = next(at for at, write in enumerate(changelog_first) if write.key == b"o0") + 1
    restarted = run_worker(messages, Store.of(changelog_first[:crash]), None)
    got_latest, _ = outputs(changelog_first[:crash] + restarted.durable)
    assert got_latest == {}, "had the checkpoint not waited for the summary, the summary was lost"
    # And the engine does wait: in its order of issue, the summary comes before the checkpoint.
    streams = [write.stream if write.key != b"o0" else "checkpoint" for write in first.issued]
    assert streams.index("summary") < streams.index("checkpoint")


def test_records_fetched_before_a_rewind_are_dropped_and_the_seek_waits_for_the_rebalance() -> None:
    store = Store({0: {b"o0": b"4"}})
    broker = Broker(store)
    processor = Processor(store, flush_every=1)
    engine = new_engine(broker, processor, lambda: 0.0)
    line = encode(builders.closed("run-a"))

    async def go() -> None:
        assert engine.assigned([0]) == {0: 5}
        await engine.handle(0, [Record(9, b"run-a", line)])  # fetched before the rewind
        await engine.tick(rebalancing=True)
        assert broker.seeks == []
        assert not engine.ready(0)
        await engine.tick(rebalancing=False)
        assert broker.seeks == [(0, 5)]
        assert engine.ready(0)
        await engine.handle(0, [Record(5, b"run-a", line)])

    asyncio.run(go())
    summaries = [write for write in broker.issued if write.stream == "summary"]
    assert len(summaries) == 1  # only the record fetched after the seek


def test_after_a_revocation_nothing_more_is_written_and_the_writes_made_are_waited_for() -> None:
    store = Store()
    broker = Broker(store)
    processor = Processor(store, flush_every=1)
    engine = new_engine(broker, processor, lambda: 0.0)
    lines = [encode(builders.started("run-a", [builders.task_spec("t")])), encode(builders.closed("run-a"))]

    async def go() -> None:
        engine.assigned([0])
        await engine.tick(rebalancing=False)
        await engine.handle(0, [Record(0, b"run-a", lines[0])])  # a checkpoint starts, waiting on outputs
        revoking = asyncio.ensure_future(engine.revoked(timeout=5))
        await asyncio.sleep(0)
        assert not revoking.done()  # it waits for the checkpoint under way
        broker.acknowledge_all()
        await revoking
        await engine.handle(0, [Record(1, b"run-a", lines[1])])  # not ready: dropped

    asyncio.run(go())
    assert [write for write in broker.issued if write.stream == "changelog"] == []
    assert broker.commits == {}


def test_consuming_once_every_assigned_partition_is_sought_and_not_after_a_revocation() -> None:
    store = Store({1: {b"o1": b"7"}})
    engine = new_engine(Broker(store), Processor(store), lambda: 0.0)

    async def go() -> list[bool]:
        seen = [engine.consuming]  # nothing assigned yet
        engine.assigned([0, 1])
        seen.append(engine.consuming)  # restored, not sought
        await engine.tick(rebalancing=True)
        seen.append(engine.consuming)  # the seeks wait for the rebalance
        await engine.tick(rebalancing=False)
        seen.append(engine.consuming)
        await engine.revoked(timeout=1)
        seen.append(engine.consuming)
        engine.assigned([])
        seen.append(engine.consuming)  # the group has nothing for it: idle, and ready
        return seen

    assert asyncio.run(go()) == [False, False, False, True, False, True]


def test_each_committed_checkpoint_reports_how_long_it_took() -> None:
    store = Store()
    broker = Broker(store)
    clock = [0.0]
    took: list[float] = []
    engine = new_engine(broker, Processor(store, flush_every=1), lambda: clock[0], took.append)
    line = encode(builders.closed("run-a"))

    async def go() -> None:
        engine.assigned([0])
        await engine.tick(rebalancing=False)
        await engine.handle(0, [Record(0, b"run-a", line)])
        assert engine.checkpointing
        clock[0] += 0.125  # the broker takes its time
        for _ in range(20):  # outputs, then the changelog writes, are acknowledged as they come
            broker.acknowledge_all()
            await asyncio.sleep(0)
        assert not engine.checkpointing

    asyncio.run(go())
    assert took == [0.125]
    assert broker.commits == {0: 1}


def test_a_broker_slower_than_the_fetcher_holds_the_fetcher_back_at_two_checkpoints() -> None:
    """Backpressure: with a checkpoint still being written, the fetcher takes the next due
    one's events and then waits; the changes in memory never pass two checkpoints'."""
    store = Store()
    broker = Broker(store)
    processor = Processor(store, flush_every=2)
    engine = new_engine(broker, processor, lambda: 0.0)
    lines = [encode(builders.started("run-a", [builders.task_spec("t")]))]
    lines += [encode(builders.trial("t", f"t-{n}", run_id="run-a")) for n in range(5)]

    async def go() -> None:
        engine.assigned([0])
        await engine.tick(rebalancing=False)
        await engine.handle(0, [Record(0, b"run-a", lines[0]), Record(1, b"run-a", lines[1])])
        assert engine.checkpointing  # the first checkpoint waits for its outputs
        await engine.handle(0, [Record(2, b"run-a", lines[2])])  # gathering: not due yet
        held = asyncio.ensure_future(engine.handle(0, [Record(3, b"run-a", lines[3])]))
        for _ in range(10):
            await asyncio.sleep(0)
        assert not held.done(), "the fetcher went on while two checkpoints' changes were in memory"
        assert processor.partitions[0].handled == 2
        while not held.done():
            broker.acknowledge(1)
            await asyncio.sleep(0)
        await held
        assert engine.checkpointing  # the second one, taken once the first was durable
        assert processor.partitions[0].handled == 0

    asyncio.run(go())
    checkpoints = [checkpoint_from_bytes(write.value or b"") for write in broker.durable if write.key == b"o0"]
    assert checkpoints == [1]


def test_a_checkpoint_is_done_when_durable_and_its_commit_does_not_hold_the_next() -> None:
    store = Store()
    broker = Broker(store, commits_wait=asyncio.Event())
    processor = Processor(store, flush_every=1)
    engine = new_engine(broker, processor, lambda: 0.0)
    lines = [encode(builders.started("run-a", [builders.task_spec("t")]))]
    lines += [encode(builders.trial("t", f"t-{n}", run_id="run-a")) for n in range(3)]

    async def go() -> None:
        engine.assigned([0])
        await engine.tick(rebalancing=False)
        for offset, line in enumerate(lines):
            await handled(engine.handle(0, [Record(offset, b"run-a", line)]), broker)
        while engine.checkpointing:
            broker.acknowledge_all()
            await asyncio.sleep(0)
        assert broker.commits == {}  # the first commit is still under way
        assert broker.commit_calls == 1
        assert broker.commits_wait is not None
        broker.commits_wait.set()
        for _ in range(10):
            await asyncio.sleep(0)

    asyncio.run(go())
    assert [checkpoint_from_bytes(write.value or b"") for write in broker.durable if write.key == b"o0"] == [0, 1, 2, 3]
    assert broker.commits == {0: 4}  # the newest, after the one under way; those between were overtaken
    assert broker.commit_calls == 2


def test_checkpoints_a_stuck_broker_never_answers_are_cancelled_at_a_revocation() -> None:
    """A broker that never acknowledges: the revocation waits its timeout, then cancels the
    checkpoint, counts it, and nothing is left holding its snapshot."""
    store = Store()
    broker = Broker(store)
    engine = new_engine(broker, Processor(store, flush_every=1), lambda: 0.0)
    line = encode(builders.closed("run-a"))

    async def go() -> None:
        engine.assigned([0])
        await engine.tick(rebalancing=False)
        await engine.handle(0, [Record(0, b"run-a", line)])
        assert engine.checkpointing
        await engine.revoked(timeout=0.01)
        assert not engine.checkpointing
        await asyncio.sleep(0)
        assert [task for task in asyncio.all_tasks() if task is not asyncio.current_task()] == []

    asyncio.run(go())
    assert engine.abandoned == 1
    gc.collect()
    assert [held for held in gc.get_objects() if isinstance(held, Snapshot)] == []


def test_a_run_leaves_the_cache_only_once_its_writes_are_acknowledged() -> None:
    """The local copy gets a write when the broker acknowledges it; a run that left the
    cache is restored from it, so it must not leave while its checkpoint's writes wait."""
    store = Store()
    broker = Broker(
        store,
        choose=lambda candidates: next((at for at, write in enumerate(candidates) if write.stream != "changelog"), 0),
    )
    clock = [0.0]
    processor = Processor(store, flush_every=100, cache_runs=0)
    engine = new_engine(broker, processor, lambda: clock[0])
    events = [builders.started("run-a", [builders.task_spec("t")]), builders.trial("t", "t-1", run_id="run-a")]
    events.append(builders.closed("run-a"))
    lines = [Record(offset, b"run-a", encode(event)) for offset, event in enumerate(events)]

    async def go() -> None:
        engine.assigned([0])
        await engine.tick(rebalancing=False)
        await engine.handle(0, lines[:1])
        clock[0] += 1.0
        await engine.tick(rebalancing=False)  # a checkpoint by time: outputs, then its writes
        for _ in range(10):
            if broker.pending and all(write.stream == "changelog" for write, _ in broker._pending):
                break
            broker.acknowledge(1)
            await asyncio.sleep(0)
        assert engine.checkpointing
        assert store.partitions == {}  # its writes wait for the broker
        await engine.handle(0, lines[1:])
        while engine.checkpointing or broker.pending:
            broker.acknowledge_all()
            clock[0] += 1.0
            await engine.tick(rebalancing=False)
            await asyncio.sleep(0)

    asyncio.run(go())
    want, _ = outputs(run_worker([(0, b"run-a", encode(event)) for event in events], Store(), None).durable)
    got, _ = outputs(broker.durable)
    assert got == want


def test_a_crash_after_every_prefix_of_a_retirement_restores_the_run_for_its_late_events() -> None:
    """Closed runs retired (archive records, markers, tombstones), their late events after
    a crash at every point of those writes: each late event gives the revision one pass over
    the log gives, byte for byte, from the run's parts or from its archive record."""
    messages: list[Message] = []
    for run_id in ("run-a", "run-c"):
        tasks = [builders.task_spec(f"t{n}") for n in range(3)]
        events: list[InputEvent] = [builders.started(run_id, tasks)]
        events += [builders.trial(f"t{n}", f"{run_id}-{n}", run_id=run_id) for n in range(3)]
        events.append(builders.closed(run_id))
        messages += [(0, run_id.encode(), encode(event)) for event in events]
    late: list[Message] = [
        (0, run_id.encode(), encode(builders.trial("t1", f"late-{run_id}", run_id=run_id)))
        for run_id in ("run-a", "run-c")
    ]
    want, _ = outputs(run_worker(messages + late, Store(), None).durable)
    first = run_worker(messages, Store(), None, cache_runs=0)
    retiring = [at for at, write in enumerate(first.durable) if write.stream == "archive"]
    assert len(retiring) == 2, "both closed runs were retired"
    assert first.store.partitions[0].keys() == {b'h"run-a"', b'h"run-c"', b"o0"}, "only markers are left"
    for crash in range(retiring[0], len(first.durable) + 1):
        kept = first.durable[:crash]
        restarted = run_worker(messages + late, Store.of(kept), None, cache_runs=0)
        got, _ = outputs(kept + restarted.durable)
        assert got == want, f"crash after {crash} writes"
        assert [orjson.loads(got[run.encode()])["revision"] for run in ("run-a", "run-c")] == [2, 2]


def test_a_run_restored_while_its_retirement_is_being_written_writes_every_part_back() -> None:
    """A late event between the archive's acknowledgement and the marker's: the run is
    restored from its parts, still in the local copy, and the marker lands after. Its next
    checkpoint must write every part back (not only the task the event changed), or the
    marker would hide the late event from the next restore."""
    tasks = [builders.task_spec("t0"), builders.task_spec("t1")]
    events: list[InputEvent] = [builders.started("run-a", tasks)]
    events += [builders.trial(f"t{n}", f"run-a-{n}", run_id="run-a") for n in range(2)]
    events += [builders.closed("run-a"), builders.trial("t1", "late-1", run_id="run-a")]
    messages: list[Message] = [(0, b"run-a", encode(event)) for event in events]
    later: list[Message] = [(0, b"run-a", encode(builders.trial("t0", "late-2", run_id="run-a")))]
    store = Store()
    broker = Broker(store)
    clock = [0.0]
    engine = new_engine(broker, Processor(store, cache_runs=0), lambda: clock[0])
    records = [Record(offset, key, value) for offset, (_, key, value) in enumerate(messages)]

    async def settled() -> None:
        while engine.checkpointing or broker.pending:
            broker.acknowledge_all()
            await asyncio.sleep(0)

    async def go() -> None:
        engine.assigned([0])
        await engine.tick(rebalancing=False)
        await engine.handle(0, records[:4])
        clock[0] += 1.0
        await engine.tick(rebalancing=False)  # the close's checkpoint
        await settled()
        clock[0] += 1.0
        await engine.tick(rebalancing=False)  # the retirement's
        while not any(write.stream == "archive" for write in broker.durable):
            broker.acknowledge(1)
            await asyncio.sleep(0)
        for _ in range(5):
            await asyncio.sleep(0)
        assert storage.marker_of(store.partitions[0][b'h"run-a"']) is None, "the marker is not acknowledged yet"
        await engine.handle(0, records[4:])
        await settled()
        clock[0] += 1.0
        await engine.tick(rebalancing=False)
        await settled()

    asyncio.run(go())
    assert storage.marker_of(store.partitions[0][b'h"run-a"']) is None, "back in the changelog, every part"
    restarted = run_worker(messages + later, Store.of(broker.durable), None, cache_runs=0)
    got, _ = outputs(broker.durable + restarted.durable)
    want, _ = outputs(run_worker(messages + later, Store(), None).durable)
    assert got == want
    assert orjson.loads(got[b"run-a"])["revision"] == 3
