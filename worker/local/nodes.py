"""A local KRaft cluster of three nodes (each a broker and a controller), for the faults one
node cannot show: a transaction coordinator or a partition leader lost while the others go on.

Each node is a `worker.local.broker` of its own (its folder, ports and process) rendered from
the single node's template with settings that replace its own: a node id, the three voters,
and replication 3 for every topic, the offsets and transaction logs included, with at least 2
replicas in sync for a write (so one node may die, and a write acknowledged is on two). Every
node is formatted with one cluster id. A node is killed hard (`kill`) and started again
(`restart`) one at a time; `leader` says which node leads a partition now.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient

from worker.local import broker
from worker.local.processes import free_port

NODES = 3

REPLICATED = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    # A node killed hard is fenced (its leadership moved) once it misses its session: 4 s,
    # not Kafka's 9, so that a test waits less for what it brings about.
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "1000",
}
TRANSACTION_LOG = "__transaction_state"


@dataclass(frozen=True)
class Nodes:
    """The three nodes' configurations; node `n` (1 to 3) is `configs[n - 1]`."""

    configs: tuple[broker.BrokerConfig, ...]

    @property
    def bootstrap(self) -> str:
        return ",".join(config.bootstrap for config in self.configs)

    def config(self, node: int) -> broker.BrokerConfig:
        return self.configs[node - 1]

    def kill(self, node: int) -> None:
        """SIGKILL node `node` (no shutdown, no leadership handed over) and wait until it is gone."""
        config = self.config(node)
        pid = broker.status(config).pid
        if pid is None:
            raise broker.BrokerError(f"node {node} of the cluster is not running")
        os.kill(pid, signal.SIGKILL)
        while broker.status(config).pid is not None:
            time.sleep(0.05)

    def restart(self, node: int, timeout: float = 120.0) -> None:
        """Start node `node` again on its folder, and wait until it answers."""
        broker.start(self.config(node), timeout=timeout)

    def leader(self, topic: str, partition: int = 0) -> int:
        """The node that leads `topic`'s `partition` now (the transaction log's: the coordinator
        of the transactional ids it holds)."""
        return asyncio.run(_leader(self.bootstrap, topic, partition))


async def _leader(bootstrap: str, topic: str, partition: int) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
        leaders = {p["partition"]: p["leader"] for p in described["partitions"]}
        if partition not in leaders:
            raise broker.BrokerError(f"{topic}[{partition}] does not exist (yet)")
        return int(leaders[partition])
    finally:
        await admin.close()


def _cluster_id() -> str:
    cid = "-"
    while cid.startswith("-"):  # a Kafka Uuid never starts with '-'
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    return cid


@contextmanager
def three_nodes(state_dir: Path, overrides: dict[str, str] | None = None, timeout: float = 180.0) -> Iterator[Nodes]:
    """Three nodes on free ports with their state under `state_dir`, launched together (no node
    answers before a quorum of controllers runs), stopped on exit; `overrides` for each."""
    ports = [(free_port(), free_port()) for _ in range(NODES)]
    voters = ",".join(f"{node}@{broker.HOST}:{controller}" for node, (_, controller) in enumerate(ports, 1))
    cluster_id = _cluster_id()
    configs = []
    for node, (port, controller) in enumerate(ports, 1):
        settings = {**REPLICATED, **(overrides or {}), "node.id": str(node), "controller.quorum.voters": voters}
        folder = state_dir / f"node-{node}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cluster.id").write_text(cluster_id + "\n")
        configs.append(broker.BrokerConfig(port, controller, folder, overrides=tuple(settings.items())))
    nodes = Nodes(tuple(configs))
    try:
        pids = [broker.launch(config) for config in configs]
        for config, pid in zip(configs, pids, strict=True):
            broker.wait_ready(config, pid, timeout)
        yield nodes
    finally:
        with ThreadPoolExecutor(NODES) as pool:  # at once: a node shutting down alone waits for the others
            list(pool.map(broker.stop, configs))
