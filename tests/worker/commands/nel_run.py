"""A nel output directory written as `nel eval run` writes it, step by step, for the
`follow nemo` tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

FIXTURES = Path(__file__).parents[2] / "fixtures" / "nemo"


def write_run(source: Path, target: Path) -> Iterator[str]:
    """Write the nel output `source` into `target` step by step, as nel does, yielding after
    each step what it wrote."""
    target.mkdir()
    shutil.copy(source / "nel_run.json", target)
    yield "started"
    for bench in sorted(path for path in source.iterdir() if path.is_dir()):
        (target / bench.name).mkdir()
        lines = (bench / "results.jsonl").read_text().splitlines(keepends=True)
        results = target / bench.name / "results.jsonl"
        for number, line in enumerate(lines):
            with results.open("a") as out:
                out.write(line[: len(line) // 2])
            yield f"{bench.name} {number} half-written"
            with results.open("a") as out:
                out.write(line[len(line) // 2 :])
            yield f"{bench.name} {number} written"
        for name in ("trajectories.jsonl", "runtime_stats.json"):
            shutil.copy(bench / name, target / bench.name)
        (bundle,) = bench.glob("eval-*.json")
        shutil.copy(bundle, target / bench.name)
        yield f"{bench.name} done"
    shutil.copy(source / "report.md", target)
    yield "run ended"
