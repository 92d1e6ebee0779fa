"""Decode benchmark: the fast path against pydantic's validator and orjson, on the same file.

Run: `python -m bench.decode` (two synthetic logs: many small runs, 120,000 events over
2,400 runs of one task, and 4 big runs) or `python -m bench.decode FILE...`. Prints, per file,
from one run (best of `--repeat` passes over the whole file, the three interleaved):
1. `orjson.loads` lines/s: parsing alone, no checks and no models (the ceiling);
2. `events.codec.validate` events/s: pydantic's validator alone, what `decode` was before
   the fast path (`events.fastpath`);
3. `events.codec.decode` events/s, and its ratios to 1 and 2;
then the same per event type. With `--against PYTHON` (another checkout's interpreter, e.g.
main's venv), also `evalstream replay FILE` end to end by that checkout and by this one,
each the best of `--repeat` runs, interleaved: decode's gain when the rest is the same.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench.replay import write_log
from events.codec import decode, validate


def rate(parse: Callable[[bytes], Any], lines: list[bytes]) -> float:
    began = time.perf_counter()
    for line in lines:
        parse(line)
    return len(lines) / (time.perf_counter() - began)


def rates(lines: list[bytes], repeat: int) -> dict[str, float]:
    """The best rate of each way to read `lines`, their passes interleaved so that the
    machine's noise falls on all three alike."""
    best = {"orjson": 0.0, "pydantic": 0.0, "decode": 0.0}
    for _ in range(repeat):
        for name, parse in (("orjson", orjson.loads), ("pydantic", validate), ("decode", decode)):
            best[name] = max(best[name], rate(parse, lines))
    return best


def show(what: str, best: dict[str, float]) -> None:
    print(
        f"  {what:<16} orjson {best['orjson']:>10,.0f}/s  pydantic {best['pydantic']:>9,.0f}/s  "
        f"decode {best['decode']:>9,.0f}/s  decode/orjson {best['decode'] / best['orjson']:.2f}  "
        f"decode/pydantic {best['decode'] / best['pydantic']:.2f}"
    )


OWN_CODE = {**os.environ, "PYTHONSAFEPATH": "1"}
"""Environment in which `python -m` imports the code installed in that interpreter's venv,
not the package in the current directory."""


def replay_seconds(pythons: tuple[str, ...], path: Path, repeat: int) -> list[float]:
    """Best wall time of `evalstream replay path` run by each of `pythons` (its output
    discarded), their runs interleaved."""
    best = [float("inf")] * len(pythons)
    for _ in range(repeat):
        for index, python in enumerate(pythons):
            began = time.perf_counter()
            command = [python, "-m", "worker.commands.cli", "replay", str(path)]
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=OWN_CODE)
            best[index] = min(best[index], time.perf_counter() - began)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, help="event logs (default: two synthetic ones)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", metavar="PYTHON", help="another checkout's interpreter, for replay before/after")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        files = list(args.files)
        if not files:
            for name, runs in (("small-runs", 2400), ("big-runs", 4)):
                files.append(Path(scratch) / f"{name}.jsonl")
                write_log(files[-1], 120_000, runs, seed=1)
        for path in files:
            lines = [line for line in path.read_bytes().splitlines() if line.strip()]
            print(f"{path.name}: {len(lines):,} lines")
            show("all", rates(lines, args.repeat))
            by_type: dict[str, list[bytes]] = {}
            for line in lines:
                try:
                    kind = str(orjson.loads(line).get("type"))
                except (orjson.JSONDecodeError, AttributeError):
                    kind = "not an object"
                by_type.setdefault(kind, []).append(line)
            for kind, group in sorted(by_type.items(), key=lambda item: -len(item[1])):
                show(f"{kind} ({len(group) / len(lines):.0%})", rates(group, args.repeat))
            if args.against:
                before, after = replay_seconds((args.against, sys.executable), path, args.repeat)
                print(
                    f"  replay end to end: {args.against} {len(lines) / before:,.0f} events/s, "
                    f"this checkout {len(lines) / after:,.0f} events/s  (after/before {before / after:.2f})"
                )


if __name__ == "__main__":
    main()
