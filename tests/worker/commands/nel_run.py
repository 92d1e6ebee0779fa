"""A nel output directory written as `nel eval run` writes it, step by step, for the
`follow nemo` tests: per benchmark, `verified_log.jsonl` grows an attempt at a time (each
line written in two halves); when the benchmark ends, its bundle, `results.jsonl`, the
trajectories and runtime stats; when the whole run ends, `report.md`."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

FIXTURES = Path(__file__).parents[2] / "fixtures" / "nemo"


def write_run(source: Path, target: Path) -> Iterator[str]:
    """Write the nel output `source` into `target` step by step, yielding after each step
    what it wrote."""
    target.mkdir()
    shutil.copy(source / "nel_run.json", target)
    yield "started"
    for bench in sorted(path for path in source.iterdir() if path.is_dir()):
        (target / bench.name).mkdir()
        lines = (bench / "verified_log.jsonl").read_text().splitlines(keepends=True)
        live = target / bench.name / "verified_log.jsonl"
        for number, line in enumerate(lines):
            with live.open("a") as out:
                out.write(line[: len(line) // 2])
            yield f"{bench.name} {number} half-written"
            with live.open("a") as out:
                out.write(line[len(line) // 2 :])
            yield f"{bench.name} {number} written"
        (bundle,) = bench.glob("eval-*.json")
        for file in (bundle, bench / "results.jsonl", bench / "trajectories.jsonl", bench / "runtime_stats.json"):
            shutil.copy(file, target / bench.name)
        yield f"{bench.name} done"
    shutil.copy(source / "report.md", target)
    yield "run ended"
