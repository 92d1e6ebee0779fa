"""The long fault-injection run: every scenario of `tests/faults` at full size.

Run: `make bench-chaos` (or `python -m bench.chaos`). Uses EVALSTREAM_BOOTSTRAP if set,
else starts a local broker (free ports, temporary state); the broker scenario always runs
on a broker of its own, since it stops and kills it. Prints one table: scenario, faults
injected, events published, runs, mismatches (runs whose latest summary differs from what
their events give, or with a revision published twice: 0 is the pass), and the max and
median recovery time (from the fault to progress resuming for every open run).
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
from pathlib import Path

from tests.faults import scenarios
from tests.faults.chaos import TABLE_HEAD, Result
from worker.local.clusters import cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--kills", type=int, default=20, help="worker kill -9s in the crash scenario")
    parser.add_argument("--freezes", type=int, default=10, help="owners frozen past their session (SIGSTOP)")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (worker logs, broker state)")
    args = parser.parse_args()
    # The publisher and watchers retry through broker restarts; aiokafka logs each failed
    # attempt (tens of thousands of lines per restart), which would bury the table.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    seed = args.seed
    results: list[Result] = []
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        root = args.keep or Path(scratch)
        try:
            with cluster(os.environ.get("EVALSTREAM_BOOTSTRAP"), root / "broker") as bootstrap:
                results.append(
                    scenarios.worker_crashes(
                        bootstrap, root / "crash", kills=args.kills, runs=6, tasks=300, seconds=240, seed=seed
                    )
                )
                results.append(
                    scenarios.broker_crashes(root / "bounce", restarts=4, runs=4, tasks=200, seconds=120, seed=seed)
                )
                results.append(
                    scenarios.rebalances(
                        bootstrap, root / "moved", changes=9, runs=12, tasks=150, seconds=180, seed=seed
                    )
                )
                dirty, problems = scenarios.bad_input(
                    bootstrap, root / "dirty", count=10_500, runs=6, tasks=150, seconds=90, seed=seed
                )
                results.append(dirty)
                results.append(
                    scenarios.state_edges(bootstrap, root / "edge", restarts=3, tasks=300, seconds=90, seed=seed)
                )
                results.append(
                    scenarios.frozen_owners(
                        bootstrap, root / "frozen", freezes=args.freezes, runs=24, tasks=60, seconds=240, seed=seed
                    )
                )
        finally:
            print(TABLE_HEAD)
            for result in results:
                print(result.row())
            for problem in problems:
                print(f"bad input: {problem}")
            for result in results:
                for detail in result.details:
                    print(f"{result.scenario}: {detail}")


if __name__ == "__main__":
    main()
