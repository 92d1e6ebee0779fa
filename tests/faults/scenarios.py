"""The fault scenarios, sized by their arguments: small in `tests/faults`, long in
`bench/chaos.py`. Each returns its `Result` (mismatches 0 is the pass)."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from events.codec import encode
from tests import builders
from tests.faults.chaos import (
    Group,
    Message,
    ProgressWatch,
    Publisher,
    Result,
    chaos_log,
    mismatches,
    replayed,
)
from tests.faults.poison import NOT_A_MESSAGE, STATEFUL, poisons
from worker.local import broker
from worker.local.clusters import local_broker, proxied_broker
from worker.local.nodes import TRANSACTION_LOG, three_nodes
from worker.local.processes import WorkerProcess, isolated_settings
from worker.local.records import create_compacting_fast, read_topic, read_whole
from worker.local.toxiproxy import Toxiproxy
from worker.runtime.app import stop_bound
from worker.runtime.topics import ensure_topics
from worker.settings import Settings


def _prepared(bootstrap: str, **overrides: object) -> Settings:
    settings = isolated_settings(bootstrap, **overrides)
    asyncio.run(ensure_topics(settings))
    return settings


def _owned(worker: WorkerProcess) -> set[str]:
    """The events partitions `worker` reports on /metrics (its lag, per partition it owns)."""
    try:
        samples = worker.scrape()
    except (OSError, RuntimeError):
        return set()
    return {name for name in samples if name.startswith("evalstream_consumer_lag{")}


def _taken_over(worker: WorkerProcess, partitions: int, timeout: float) -> bool:
    """Whether `worker` comes to own all `partitions` within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while len(_owned(worker)) < partitions:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


SESSION_EXPIRED = "Heartbeat session expired"
"""What aiokafka logs when a worker finds its group session expired."""


def _run_with_faults(
    settings: Settings,
    root: Path,
    log: list[Message],
    *,
    name: str,
    workers: int,
    seconds: float,
    faults: list[Callable[[Group], None]],
    seed: int,
    env: dict[str, str] | None = None,
    bootstraps: list[str] | None = None,
    pauses: dict[int, float] | None = None,
) -> Result:
    """Publish `log` over `seconds` (`pauses`: silences, as `Publisher` takes them) while
    applying `faults` at random moments, each timed from the moment it hits until every open
    run's progress resumes (`env`: more environment variables for the workers; `bootstraps`:
    theirs, as `Group` takes them). The result's traces are the workers' engine counters
    (`chaos.COUNTERS`) summed, and its stall the committed readers' longest wait for a
    progress record or a summary."""
    rng = random.Random(seed)
    group = Group(settings, root, env, bootstraps)
    for _ in range(workers):
        group.add()
    watch, summaries = ProgressWatch(settings), ProgressWatch(settings, settings.summaries_topic)
    watch.start()
    summaries.start()
    publisher = Publisher(settings, log, seconds, pauses)
    recoveries = []
    try:
        for worker in group.workers:
            worker.wait_ready()
        publisher.start()
        for fault in faults:
            time.sleep(rng.uniform(0.2, 2.0))
            group.scrape_all()
            hit = time.monotonic()
            fault(group)
            recoveries.append(watch.recovery(hit, publisher))
        runs, found = mismatches(settings, publisher)
    finally:
        watch.stopping.set()
        summaries.stopping.set()
        group.stop_all()
    stall = max((s for s in (watch.stall, summaries.stall) if s is not None), default=None)
    result = Result(name, len(faults), len(log), runs, len(found), recoveries, found, stall)
    result.traces.update(group.counted, workers_killed=group.killed)
    return result


def _kill_one(group: Group, rng: random.Random, *, replace: bool) -> None:
    """kill -9 of a worker; `replace`: restarted at once, in place (on its data dir) or as
    a new worker, at random."""
    victim = rng.choice(group.workers)
    group.kill(victim)
    if replace:
        group.add(in_place_of=victim if rng.random() < 0.5 else None)


def worker_crashes(
    bootstrap: str, root: Path, *, kills: int, runs: int, tasks: int, seconds: float, seed: int
) -> Result:
    """kill -9 of the only worker at random moments, restarted at once (on its data dir,
    or as a new worker on an empty one)."""
    settings = _prepared(bootstrap)
    rng = random.Random(seed)
    log = chaos_log("crash", runs=runs, tasks=tasks, attempts=5, seed=seed)
    faults = [lambda group: _kill_one(group, rng, replace=True) for _ in range(kills)]
    return _run_with_faults(
        settings, root, log, name="worker kill -9", workers=1, seconds=seconds, faults=faults, seed=seed
    )


def broker_crashes(root: Path, *, restarts: int, runs: int, tasks: int, seconds: float, seed: int) -> Result:
    """The broker stopped and started again mid-run, cleanly and by kill -9 in turn, on a
    broker of its own; the worker must reconnect by itself."""
    with local_broker(root / "broker") as config:
        settings = _prepared(config.bootstrap)
        log = chaos_log("bounce", runs=runs, tasks=tasks, attempts=5, seed=seed)

        def bounce(index: int) -> Callable[[Group], None]:
            def fault(group: Group) -> None:
                if index % 2:
                    pid = broker.status(config).pid
                    assert pid is not None, "the broker is not running"
                    os.kill(pid, signal.SIGKILL)
                    while broker.status(config).pid is not None:
                        time.sleep(0.05)
                else:
                    broker.stop(config)
                broker.start(config, timeout=120)

            return fault

        faults = [bounce(index) for index in range(restarts)]
        return _run_with_faults(
            settings, root, log, name="broker stop / kill -9", workers=1, seconds=seconds, faults=faults, seed=seed
        )


def rebalances(bootstrap: str, root: Path, *, changes: int, runs: int, tasks: int, seconds: float, seed: int) -> Result:
    """Two to three workers over a 3-partition topic: workers added, stopped cleanly and
    killed in turn, so partitions move and their state is restored from the changelog."""
    settings = _prepared(bootstrap, partitions=3)
    rng = random.Random(seed)
    log = chaos_log("moved", runs=runs, tasks=tasks, attempts=5, seed=seed)

    def change(index: int) -> Callable[[Group], None]:
        def fault(group: Group) -> None:
            if len(group.workers) < 3 and index % 3 == 0:
                group.add()
            elif index % 3 == 1:
                group.stop(rng.choice(group.workers))
                group.add()
            else:
                _kill_one(group, rng, replace=len(group.workers) < 3)

        return fault

    faults = [change(index) for index in range(changes)]
    return _run_with_faults(settings, root, log, name="rebalance", workers=2, seconds=seconds, faults=faults, seed=seed)


def bad_input(
    bootstrap: str, root: Path, *, count: int, runs: int, tasks: int, seconds: float, seed: int
) -> tuple[Result, list[str]]:
    """`count` malformed messages interleaved with valid runs. Besides the summaries, every
    dead letter must be the oracle's (reason and source coordinates), every poison sent must
    be dead-lettered with its own reason (never "internal-error"), and the worker must never
    restart nor log a traceback. Returns the result and the problems found."""
    settings = _prepared(bootstrap)
    rng = random.Random(seed)
    log = chaos_log("dirty", runs=runs, tasks=tasks, attempts=5, seed=seed)
    oversized = 0
    reasons: Counter[str] = Counter()
    for index, bad in enumerate(poisons("dirty-0", count, seed)):
        if bad.kind in NOT_A_MESSAGE:
            continue
        if bad.kind == "oversized":
            oversized += 1
            if oversized > 2:  # 8 MiB each: two say as much as two thousand (so ~4% of `count` is dropped)
                continue
        reasons[bad.reason] += 1
        run = f"dirty-{index % runs}".encode()
        # After the run's run.started (the first message of the run), as STATEFUL requires.
        first = next(at for at, (key, _) in enumerate(log) if key == run)
        at = rng.randrange(first + 1, len(log) + 1) if bad.kind in STATEFUL else rng.randrange(len(log) + 1)
        key = run if bad.key == b"dirty-0" else bad.key
        log.insert(at, (key, bad.value.replace(b"dirty-0", run.decode().encode())))
    result = _run_with_faults(settings, root, log, name="bad input", workers=1, seconds=seconds, faults=[], seed=seed)
    problems = []
    want = {(str(offset).encode(), reason.encode()) for _, offset, reason in replayed(settings).rejected}
    dead = read_topic(settings, settings.deadletter_topic, until=len(want), timeout=60)
    got = {(r.headers["evalstream.source.offset"], r.headers["evalstream.reason"]) for r in dead}
    if got != want:
        problems.append(f"dead letters: {len(want - got)} missing, {len(got - want)} unexpected")
    said = Counter(r.headers["evalstream.reason"].decode() for r in dead)
    if said != reasons:
        problems.append(f"dead-letter reasons {dict(said)}, the poisons' own {dict(reasons)}")
    log_text = Group(settings, root).logs()
    if "Traceback" in log_text or "internal error" in log_text:
        problems.append("the worker logged a traceback")
    result.faults = len(want)
    return result, problems


def state_edges(bootstrap: str, root: Path, *, restarts: int, tasks: int, seconds: float, seed: int) -> Result:
    """One run over four partitions, so three changelog partitions stay empty, and a
    changelog compacted as fast as the broker allows: restarts must recover both."""
    settings = _prepared(bootstrap, partitions=4)
    asyncio.run(create_compacting_fast(settings, f"{settings.app_id}-state-changelog"))
    rng = random.Random(seed)
    log = chaos_log("edge", runs=1, tasks=tasks, attempts=5, seed=seed)
    faults = [lambda group: _kill_one(group, rng, replace=True) for _ in range(restarts)]
    return _run_with_faults(
        settings, root, log, name="empty and compacted changelog", workers=1, seconds=seconds, faults=faults, seed=seed
    )


FROZEN_SESSION = 6.0
"""The frozen-owner workers' session timeout: the broker's smallest (group.min.session.timeout.ms)."""


def frozen_owners(
    bootstrap: str, root: Path, *, freezes: int, runs: int, tasks: int, seconds: float, seed: int
) -> Result:
    """Two workers over four partitions, runs published at a steady pace; one worker at a
    time is frozen (SIGSTOP) past its session timeout, the group moves its partitions to the
    other, and it is thawed (SIGCONT) with whatever it had under way. Every summary must end
    exact and none be published twice. Then every worker stops, a new one on an empty data
    dir restores every partition from the changelog alone, and a late attempt on every run
    must give its next revision, byte for byte what replay gives. Trace: the other worker owned
    every partition before each thaw (`freezes the other worker took over`)."""
    settings = _prepared(bootstrap, partitions=4)
    rng = random.Random(seed)
    log = chaos_log("frozen", runs=runs, tasks=tasks, attempts=5, seed=seed)
    env = {"EVALSTREAM_SESSION_TIMEOUT": str(FROZEN_SESSION)}

    taken_over = []

    def freeze(group: Group) -> None:
        victim = rng.choice(group.workers)
        (other,) = [worker for worker in group.workers if worker is not victim]
        os.kill(victim.process.pid, signal.SIGSTOP)
        try:
            time.sleep(FROZEN_SESSION * rng.uniform(1.3, 2.0))
            taken_over.append(_taken_over(other, 4, FROZEN_SESSION * 4))
        finally:
            os.kill(victim.process.pid, signal.SIGCONT)

    faults: list[Callable[[Group], None]] = [freeze] * freezes
    result = _run_with_faults(
        settings, root, log, name="frozen owner", workers=2, seconds=seconds, faults=faults, seed=seed, env=env
    )
    result.traces["freezes the other worker took over"] = sum(taken_over)
    late: list[Message] = [
        (key, encode(builders.trial("task-00001", f"after-restore-{key.decode()}", run_id=key.decode())))
        for key in dict.fromkeys(key for key, _ in log if key is not None)
    ]
    fresh = Group(settings, root / "fresh")
    try:
        fresh.add().wait_ready()
        publisher = Publisher(settings, late, 1.0)
        publisher.start()
        _, found = mismatches(settings, publisher)
    finally:
        fresh.stop_all()
    result.mismatches += len(found)
    result.details += [f"after a restore from the changelog alone: {detail}" for detail in found]
    return result


def network_partition(root: Path, *, cuts: int, runs: int, tasks: int, seconds: float, seed: int) -> Result:
    """Two workers over four partitions, each reaching a broker of its own through a Toxiproxy
    proxy of its own. One worker at a time is cut off (every byte both ways dropped, no
    connection closed) until the other owns every partition (past the cut one's session),
    then healed: the cut one must find itself fenced and write nothing over the new owner.
    Traces: the other worker owned all four partitions during each cut (`cuts the other
    worker took over`), and the cut worker's client found its group session expired
    (`sessions expired`); a fence of its producer is counted when it wrote before it learnt
    of its revocation."""
    rng = random.Random(seed)
    env = {"EVALSTREAM_SESSION_TIMEOUT": str(FROZEN_SESSION)}
    owned_all = []
    with Toxiproxy(root) as toxiproxy, proxied_broker(root / "broker", toxiproxy, clients=2) as proxied:
        proxy_of = dict(zip(proxied.bootstraps, proxied.proxies, strict=True))
        settings = _prepared(proxied.config.bootstrap, partitions=4)
        log = chaos_log("cut", runs=runs, tasks=tasks, attempts=5, seed=seed)

        def cut(group: Group) -> None:
            victim = rng.choice(group.workers)
            (other,) = [worker for worker in group.workers if worker is not victim]
            toxiproxy.cut(proxy_of[victim.settings.bootstrap])
            try:
                owned_all.append(_taken_over(other, 4, FROZEN_SESSION * 6))
            finally:
                toxiproxy.heal(proxy_of[victim.settings.bootstrap])

        faults: list[Callable[[Group], None]] = [cut] * cuts
        result = _run_with_faults(
            settings, root, log, name="network partition", workers=2, seconds=seconds, faults=faults, seed=seed,
            env=env, bootstraps=list(proxied.bootstraps),
        )  # fmt: skip
    result.traces["cuts the other worker took over"] = sum(owned_all)
    result.traces["sessions expired"] = Group(settings, root).logs().count(SESSION_EXPIRED)
    return result


def slow_and_reset(root: Path, *, faults: int, runs: int, tasks: int, seconds: float, seed: int) -> Result:
    """One worker reaching its broker through a Toxiproxy proxy while checkpoints commit: in
    turn 400 ms of latency each way for a few seconds, then every connection reset as it
    carries data for a moment (commits, offsets and records in flight lost mid-way). Traces:
    checkpoints that took longer than the latency (`slow checkpoints`), and the connections
    the worker saw closed (`connections reset`)."""
    rng = random.Random(seed)
    with Toxiproxy(root) as toxiproxy, proxied_broker(root / "broker", toxiproxy, clients=1) as proxied:
        (proxy,) = proxied.proxies
        settings = _prepared(proxied.config.bootstrap, partitions=2)
        log = chaos_log("slow", runs=runs, tasks=tasks, attempts=5, seed=seed)

        def hit(index: int) -> Callable[[Group], None]:
            def fault(group: Group) -> None:
                if index % 2 == 0:
                    toxiproxy.add(proxy, "slow", "latency", "downstream", latency=400, jitter=100)
                    toxiproxy.add(proxy, "slow-up", "latency", "upstream", latency=400, jitter=100)
                    time.sleep(rng.uniform(3.0, 5.0))
                    toxiproxy.remove(proxy, "slow")
                    toxiproxy.remove(proxy, "slow-up")
                else:
                    toxiproxy.add(proxy, "reset", "reset_peer", "upstream", timeout=0)
                    time.sleep(rng.uniform(0.5, 1.5))
                    toxiproxy.remove(proxy, "reset")

            return fault

        group_slow: list[float] = []

        def slow_checkpoints(group: Group) -> None:
            for worker in group.workers:
                samples = worker.scrape()
                total = samples.get("evalstream_checkpoint_duration_seconds_count", 0.0)
                quick = samples.get('evalstream_checkpoint_duration_seconds_bucket{le="0.25"}', 0.0)
                group_slow.append(total - quick)

        def with_count(fault: Callable[[Group], None]) -> Callable[[Group], None]:
            def counted(group: Group) -> None:
                fault(group)
                slow_checkpoints(group)

            return counted

        result = _run_with_faults(
            settings, root, log, name="latency and resets", workers=1, seconds=seconds,
            faults=[with_count(hit(index)) for index in range(faults)], seed=seed,
            bootstraps=list(proxied.bootstraps),
        )  # fmt: skip
    result.traces["slow checkpoints"] = max(group_slow, default=0.0)
    # aiokafka rides out most resets by itself (a request sent again on a new connection), so
    # the reset's trace is the connections the worker saw closed, not a partition redone.
    result.traces["connections reset"] = Group(settings, root).logs().count("KafkaConnectionError")
    return result


def coordinator_loss(root: Path, *, bounces: int, runs: int, tasks: int, seconds: float, seed: int) -> Result:
    """Two workers over four partitions on a three-node cluster (every topic 3 replicas, 2 in
    sync for a write), as Kafka's transactions system test bounces brokers during a
    transactional copy: in turn the transaction coordinator's node (the transaction log's
    leader) and the node leading an events partition are killed hard while the workers
    commit, then started again. Traces: each node killed led what it was killed for, and
    another node took that lead while it was down (`leads moved`)."""
    rng = random.Random(seed)
    moved = []
    with three_nodes(root / "cluster") as nodes:
        settings = _prepared(nodes.bootstrap, partitions=4)
        log = chaos_log("lost", runs=runs, tasks=tasks, attempts=5, seed=seed)

        def bounce(index: int) -> Callable[[Group], None]:
            def fault(group: Group) -> None:
                topic, partition = (TRANSACTION_LOG, 0) if index % 2 == 0 else (settings.events_topic, rng.randrange(4))
                node = nodes.leader(topic, partition)
                nodes.kill(node)
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    try:
                        if nodes.leader(topic, partition) not in (node, -1):
                            moved.append(f"{topic}[{partition}]")
                            break
                    except Exception:  # the cluster is electing: ask again
                        pass
                    time.sleep(0.5)
                time.sleep(rng.uniform(1.0, 3.0))
                nodes.restart(node)

            return fault

        faults = [bounce(index) for index in range(bounces)]
        result = _run_with_faults(
            settings, root, log, name="coordinator and leaders killed", workers=2, seconds=seconds,
            faults=faults, seed=seed,
        )  # fmt: skip
    result.traces["leads moved"] = len(moved)
    return result


IDLE_EXPIRY = {
    "transactional.id.expiration.ms": "5000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "1000",
}
"""A coordinator that forgets a transactional id idle for 5 s, checking every second (Kafka's
defaults: 7 days, every hour)."""


def idle_expiry(root: Path, *, bursts: int, runs: int, tasks: int, seconds: float, seed: int) -> Result:
    """One worker over four partitions on a broker whose coordinator forgets an idle
    transactional id after 5 s (`IDLE_EXPIRY`); runs are published in `bursts`, `seconds`
    each, separated by 12 s of silence, so that every partition's transactional id is
    forgotten before the next burst writes through it. Traces: the coordinator's tombstones
    for the worker's transactional ids in its log (`transactional ids expired`)."""
    with local_broker(root / "broker", overrides=IDLE_EXPIRY) as config:
        settings = _prepared(config.bootstrap, partitions=4)
        log: list[Message] = []
        pauses = {}
        for burst in range(bursts):
            if burst:
                pauses[len(log)] = 12.0
            log += chaos_log(f"burst{burst}", runs=runs, tasks=tasks, attempts=5, seed=seed + burst)
        result = _run_with_faults(
            settings, root, log, name="idle past the coordinator's expiry", workers=1, seconds=seconds * bursts,
            faults=[], seed=seed, pauses=pauses,
        )  # fmt: skip
        # The coordinator logs nothing when it forgets an id: it writes the id's tombstone.
        expired = [
            record
            for record in read_whole(settings, TRANSACTION_LOG)
            if record.value is None and record.key is not None and settings.app_id.encode() in record.key
        ]
    result.faults = bursts - 1
    result.traces["transactional ids expired"] = len(expired)
    return result


REVOKING = "Revoking previously assigned partitions"
"""What aiokafka logs as a revocation begins."""

EXIT_MARGIN = 3.0
"""Seconds past the worker's stated stop bound (`worker.runtime.app.stop_bound`) for the
process itself to end (the interpreter's exit, a loaded machine)."""


def outage_during_revocation(root: Path, *, outages: int, runs: int, tasks: int, seconds: float, seed: int) -> Result:
    """Two workers over four partitions on a broker of their own; in turn a third worker
    joins and the broker is killed as soon as the group revokes partitions from the two, or
    nothing changes and it is killed mid-checkpoint; then every worker is sent SIGTERM: each
    must end within its stated stop bound (and `EXIT_MARGIN`) though the broker is away. Then
    the broker comes back and the workers restart on their data dirs. Traces: the revocations
    the broker died in, the broker down when each SIGTERM was sent (`workers ended during an
    outage`), the longest exit (`slowest exit (s)`) and the stops that were not clean (`stops
    forced at the bound`: the worker's own timer ended it, its services still stopping)."""
    rng = random.Random(seed)
    exits: list[float] = []
    stuck: list[str] = []
    revocations: list[int] = []
    with local_broker(root / "broker") as config:
        settings = _prepared(config.bootstrap, partitions=4)
        bound = stop_bound(settings) + EXIT_MARGIN
        log = chaos_log("away", runs=runs, tasks=tasks, attempts=5, seed=seed)

        def outage(index: int) -> Callable[[Group], None]:
            def fault(group: Group) -> None:
                if index % 2 == 0:
                    revoking = [worker.log().count(REVOKING) for worker in group.workers]
                    old = list(group.workers)
                    group.add()
                    deadline = time.monotonic() + 60
                    while time.monotonic() < deadline:
                        if [worker.log().count(REVOKING) for worker in old] != revoking:
                            revocations.append(index)
                            break
                        time.sleep(0.05)
                    time.sleep(rng.uniform(0.0, 0.3))
                pid = broker.status(config).pid
                assert pid is not None, "the broker is not running"
                os.kill(pid, signal.SIGKILL)
                while broker.status(config).pid is not None:
                    time.sleep(0.05)
                ended = list(group.workers)
                took = group.end(ended, bound)
                exits.extend(took)
                for worker, exit_after in zip(ended, took, strict=True):
                    if exit_after == float("inf"):
                        stuck.append(f"outage {index}: {worker.log_path.parent.name} (pid {worker.process.pid})")
                broker.start(config, timeout=120)
                for worker in ended[:2]:
                    group.add(in_place_of=worker)

            return fault

        faults = [outage(index) for index in range(outages)]
        result = _run_with_faults(
            settings, root, log, name="outage during revocation", workers=2, seconds=seconds, faults=faults,
            seed=seed,
        )  # fmt: skip
    result.traces["workers ended during an outage"] = len(exits)
    result.traces["revocations under way when the broker died"] = len(revocations)
    result.traces["slowest exit (s)"] = max(exits, default=0.0)
    result.traces["exit bound (s)"] = bound
    result.traces["stops forced at the bound"] = Group(settings, root).logs().count("the worker did not stop within")
    result.traces.update(dict.fromkeys((f"still running {bound:g} s after SIGTERM: {name}" for name in stuck), 1))
    return result
