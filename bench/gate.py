"""The live gate's error rate and decision time, by simulation (no broker: the decision is pure).

Run: `python -m bench.gate` (`--null-pairs`, `--planted-pairs`, `--seed`). Each simulated pair
is a baseline run and a candidate run over the same tasks, `--attempts` attempts a task; each
task's true pass rate p is drawn uniform on [0.2, 1.0] and each attempt passes with its run's
rate. The baseline is closed; the candidate's trials then arrive one at a time, in one of two
orders: task by task (a task's attempts back to back, tasks in random order) or interleaved
(all trials shuffled, so tasks complete late). The gate looks after every trial.

The live gate is `projections.analysis.gate.live` itself (`gate_of_attempts`, `LiveGate.observe`
and `LiveGate.decision`, what `evalstream gate --live` calls after every event), fed the
(attempts, passes) of the task each trial belongs to: each candidate attempt is paired with the
baseline's attempt of the same position. Beside it, the naive gate: the fixed 95% t interval
of `evalstream gate` (mean +- t975(n - 1) x sd / sqrt(n) over the tasks complete so far)
looked at after every trial with the same decision rule (`projections.analysis.gate.decision.decide`).

1. Under the null (candidate rate = baseline rate on every task, 500 tasks): the share of pairs
   in which the gate ever decides BLOCK (exit 3: a false alarm), and in which its interval
   ever excludes 0 on either side. The confidence sequence keeps both at most 5%; the naive
   interval looked at as often does not.
2. A planted regression of 10 points (candidate rate p - 0.1 on every task; mean pass rate
   0.6 -> 0.5), 500 tasks: the share of pairs the live gate decides before the close, and after
   what fraction of the candidate's trials (median, p10, p90), against waiting for the close
   (100% of the trials) and the fixed gate's power there.
3. The same for a regression concentrated on few tasks: 200 tasks, three in four of those the
   baseline nearly always solves (p >= 0.8) now always fail (a mean drop of about 0.17).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from projections.analysis.gate.decision import BLOCK, decide
from projections.analysis.gate.live import gate_of_attempts
from projections.figures.t975 import t975

KEY = "reward.score"
Order = Callable[[random.Random, int, int], list[int]]


def by_task(rng: random.Random, tasks: int, attempts: int) -> list[int]:
    """Each trial's task: tasks in random order, a task's attempts back to back."""
    order = list(range(tasks))
    rng.shuffle(order)
    return [task for task in order for _ in range(attempts)]


def interleaved(rng: random.Random, tasks: int, attempts: int) -> list[int]:
    trials = [task for task in range(tasks) for _ in range(attempts)]
    rng.shuffle(trials)
    return trials


@dataclass
class Outcome:
    live_regression_at: float | None = None
    """Fraction of the candidate's trials when the live gate decided BLOCK (None: never)."""
    live_decided_at: float | None = None
    """... when it decided anything before the close."""
    live_excluded_zero: bool = False
    naive_regression: bool = False
    naive_excluded_zero: bool = False
    fixed_at_close_regression: bool = False


class NaiveInterval:
    """The fixed-n t interval of the tasks so far, from running sums (Welford)."""

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def add(self, value: float) -> None:
        self.n += 1
        delta = value - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (value - self.mean)

    def interval(self) -> tuple[float, float] | None:
        if self.n < 2:
            return None
        half = t975(self.n - 1) * math.sqrt(self.m2 / (self.n - 1)) / math.sqrt(self.n)
        return self.mean - half, self.mean + half


Change = Callable[[random.Random, float], float]
"""The candidate's pass rate of a task whose baseline rate is p."""


def same(rng: random.Random, p: float) -> float:
    return p


def ten_points_lower(rng: random.Random, p: float) -> float:
    return p - 0.1


def most_solved_lost(rng: random.Random, p: float) -> float:
    """Three in four of the tasks the baseline nearly always solves (p >= 0.8) now always fail."""
    return 0.0 if p >= 0.8 and rng.random() < 0.75 else p


def simulate(rng: random.Random, tasks: int, attempts: int, change: Change, order: Order) -> Outcome:
    rates = [rng.uniform(0.2, 1.0) for _ in range(tasks)]
    candidate = [change(rng, p) for p in rates]
    baseline = {str(task): tuple(rng.random() < p for _ in range(attempts)) for task, p in enumerate(rates)}
    gate = gate_of_attempts({KEY: baseline}, 0.0)
    naive = NaiveInterval()
    counts = [[0, 0] for _ in range(tasks)]
    outcome = Outcome()
    trials = order(rng, tasks, attempts)
    for number, task in enumerate(trials, 1):
        tally = counts[task]
        tally[0] += 1
        tally[1] += rng.random() < candidate[task]
        gate.observe(KEY, str(task), tally[0], tally[1])
        if tally[0] == attempts:
            naive.add((tally[1] - sum(baseline[str(task)])) / attempts)
        # The look after this trial.
        if outcome.live_decided_at is None:
            decision = gate.decision(closed=False)
            if decision is not None:
                outcome.live_decided_at = number / len(trials)
                if decision == BLOCK:
                    outcome.live_regression_at = outcome.live_decided_at
        low, high = gate.look(KEY).interval
        outcome.live_excluded_zero |= high < 0.0 or low > 0.0
        shown = naive.interval()
        if shown is not None:
            outcome.naive_regression |= decide(shown, 0.0) == BLOCK
            outcome.naive_excluded_zero |= shown[1] < 0.0 or shown[0] > 0.0
    final = naive.interval()
    outcome.fixed_at_close_regression = final is not None and decide(final, 0.0) == BLOCK
    return outcome


def decided_early(runs: list[Outcome]) -> str:
    """The share of runs the live gate blocked before the close, and when (p10 / median / p90 of the trials)."""
    at = sorted(r.live_regression_at for r in runs if r.live_regression_at is not None)
    spread = (
        " / ".join(f"{100 * q:.0f}%" for q in (at[len(at) // 10], statistics.median(at), at[9 * len(at) // 10]))
        if at
        else "-"
    )
    return f"{share([r.live_regression_at is not None for r in runs]):>14} {spread:>40}"


def share(flags: list[bool]) -> str:
    """The share of True, with a 95% Monte Carlo margin (none seen: the rule of three's bound)."""
    hits = sum(flags)
    if hits in (0, len(flags)):
        bound = 300 / len(flags)
        return f"{100 * hits / len(flags):5.1f}% ({'<' if hits == 0 else '>'}{bound if hits == 0 else 100 - bound:.1f})"
    rate = hits / len(flags)
    return f"{100 * rate:5.1f}% (+-{196 * math.sqrt(rate * (1 - rate) / len(flags)):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--null-pairs", type=int, default=1000)
    parser.add_argument("--planted-pairs", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    orders: dict[str, Order] = {"task by task": by_task, "interleaved": interleaved}
    print(f"{args.tasks} tasks x {args.attempts} attempts, a look after every candidate trial (seed {args.seed})")
    print(f"\n1. null: {args.null_pairs} pairs, the same pass rate in both runs on every task (95% intervals)")
    print(f"{'order':<14} {'live: exit 3':>16} {'live: excl. 0':>16} {'naive t: exit 3':>16} {'naive t: excl. 0':>17}")
    for name, order in orders.items():
        start = time.perf_counter()
        runs = [simulate(rng, args.tasks, args.attempts, same, order) for _ in range(args.null_pairs)]
        print(
            f"{name:<14} {share([r.live_regression_at is not None for r in runs]):>16} "
            f"{share([r.live_excluded_zero for r in runs]):>16} {share([r.naive_regression for r in runs]):>16} "
            f"{share([r.naive_excluded_zero for r in runs]):>17}   ({time.perf_counter() - start:.0f} s)"
        )
    planted = (
        (f"2. planted regression of 10 points: {args.planted_pairs} pairs, candidate rate p - 0.1 on every task",
         args.tasks, ten_points_lower),
        (f"3. most solved tasks lost: {args.planted_pairs} pairs of 200 tasks, 3 in 4 of the tasks with p >= 0.8 "
         "at rate 0", 200, most_solved_lost),
    )  # fmt: skip
    for title, tasks, change in planted:
        print(f"\n{title}")
        head = f"{'order':<14} {'decided early':>14} {'trials at decision: p10 / median / p90':>40}"
        print(f"{head} {'fixed gate at close':>20}")
        for name, order in orders.items():
            runs = [simulate(rng, tasks, args.attempts, change, order) for _ in range(args.planted_pairs)]
            print(f"{name:<14} {decided_early(runs)} {share([r.fixed_at_close_regression for r in runs]):>20}")
    print(
        "(waiting for the close decides after 100% of the candidate's trials; "
        "+- is a 95% Monte Carlo margin, < and > a 95% bound)"
    )


if __name__ == "__main__":
    main()
