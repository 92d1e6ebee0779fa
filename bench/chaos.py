"""The long fault-injection run: every scenario of `tests/faults` at full size.

Run: `make bench-chaos` (or `python -m bench.chaos`). Uses EVALSTREAM_BOOTSTRAP if set,
else starts a local broker (free ports, temporary state); the scenarios that stop, kill,
reconfigure or proxy a broker run on brokers of their own (the network faults through
Toxiproxy, the coordinator's loss on three nodes). Prints one table: scenario, faults
injected, events published, runs, mismatches (runs whose latest summary differs from what
their events give, or with a revision published twice: 0 is the pass), the max and median
recovery time (from the fault to progress resuming for every open run), and the longest a
committed reader waited for a progress record or summary (from its production to its
reading: an open transaction holds back everything after it). Then each scenario's traces:
what shows that its faults happened.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.faults import scenarios
from tests.faults.chaos import TABLE_HEAD, Result
from worker.local.clusters import cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--kills", type=int, default=20, help="worker kill -9s in the crash scenario")
    parser.add_argument("--freezes", type=int, default=10, help="owners frozen past their session (SIGSTOP)")
    parser.add_argument("--only", nargs="*", help="run only the scenarios whose name contains one of these")
    parser.add_argument("--scale", type=float, default=1.0, help="tasks, seconds and bad messages times this")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (worker logs, broker state)")
    args = parser.parse_args()
    # The publisher and watchers retry through broker restarts; aiokafka logs each failed
    # attempt (tens of thousands of lines per restart), which would bury the table.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    results: list[Result] = []
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        root = args.keep or Path(scratch)
        try:
            with cluster(os.environ.get("EVALSTREAM_BOOTSTRAP"), root / "broker") as bootstrap:
                for name, scenario in _scenarios(bootstrap, root, args).items():
                    if args.only and not any(word in name for word in args.only):
                        continue
                    if name == "dirty":
                        dirty, problems = scenario()
                        results.append(dirty)
                    else:
                        results.append(scenario())
        finally:
            print(TABLE_HEAD)
            for result in results:
                print(result.row())
            for problem in problems:
                print(f"bad input: {problem}")
            for result in results:
                traces = ", ".join(f"{name} {value:g}" for name, value in sorted(result.traces.items()))
                print(f"{result.scenario}: traces: {traces or '-'}")
                for detail in result.details:
                    print(f"{result.scenario}: {detail}")


def _scenarios(bootstrap: str, root: Path, args: argparse.Namespace) -> dict[str, Callable[[], Any]]:
    """Each scenario at full size (tasks, seconds and malformed messages times `--scale`), by
    a short name (`--only` picks among them)."""
    seed = args.seed

    def size(full: int) -> int:
        return max(1, round(full * float(args.scale)))

    return {
        "crash": lambda: scenarios.worker_crashes(
            bootstrap, root / "crash", kills=args.kills, runs=6, tasks=size(300), seconds=size(240), seed=seed
        ),
        "bounce": lambda: scenarios.broker_crashes(
            root / "bounce", restarts=4, runs=4, tasks=size(200), seconds=size(120), seed=seed
        ),
        "moved": lambda: scenarios.rebalances(
            bootstrap, root / "moved", changes=9, runs=12, tasks=size(150), seconds=size(180), seed=seed
        ),
        "dirty": lambda: scenarios.bad_input(
            bootstrap, root / "dirty", count=size(10_500), runs=6, tasks=size(150), seconds=size(90), seed=seed
        ),
        "edge": lambda: scenarios.state_edges(
            bootstrap, root / "edge", restarts=3, tasks=size(300), seconds=size(90), seed=seed
        ),
        "frozen": lambda: scenarios.frozen_owners(
            bootstrap, root / "frozen", freezes=args.freezes, runs=24, tasks=size(60), seconds=size(240), seed=seed
        ),
        "partition": lambda: scenarios.network_partition(
            root / "partition", cuts=6, runs=12, tasks=size(60), seconds=size(180), seed=seed
        ),
        "slow": lambda: scenarios.slow_and_reset(
            root / "slow", faults=10, runs=6, tasks=size(100), seconds=size(120), seed=seed
        ),
        "coordinator": lambda: scenarios.coordinator_loss(
            root / "coordinator", bounces=6, runs=8, tasks=size(100), seconds=size(180), seed=seed
        ),
        "idle": lambda: scenarios.idle_expiry(
            root / "idle", bursts=3, runs=10, tasks=size(30), seconds=size(10), seed=seed
        ),
        "outage": lambda: scenarios.outage_during_revocation(
            root / "outage", outages=4, runs=8, tasks=size(100), seconds=size(150), seed=seed
        ),
    }


if __name__ == "__main__":
    main()
