"""The live gate's fold: a candidate run's paired differences against a closed baseline, as
the candidate's events apply, each key's confidence sequence, and the decision.

One observation per (key, task), frozen when it is made:
- a task is observed on a key once the candidate has `attempts_per_task` attempts of it (its
  `run.started` says how many; a dead trial is an attempt that did not pass, a `failed` /
  `metric` score is none) and the baseline measured the task on that key; its value is
  candidate pass rate - baseline pass rate at that moment (each as in `projections.analysis.compare`),
  and attempts landing later do not change it;
- at the candidate's close, every task not observed yet that both runs measured on the key is
  observed, in summary task order, with the attempts it has; a run whose `run.started` gave no
  `attempts_per_task` is observed at its close only.

Why: the confidence sequence (`projections.analysis.gate.sequence`) needs each observation's conditional
mean, given the earlier ones, to be the mean it covers. A task's difference is fixed once
counted, and which task completes next is the harness's scheduling, not its outcome; so under
the null (candidate and baseline share each task's pass rate) every observation has mean 0
and the false-alarm rate is at most alpha however often the gate looks. Counting a task before
its attempts are complete would make its value depend on how fast its attempts fail or pass.
Under an alternative the tasks' means differ; the CS then covers the weighted mean difference
of the tasks observed so far (the paper's weights), which is what the decision is about.

Several keys: each key's CS is at level 1 - alpha / (number of keys) (Bonferroni), so the
gate's overall false-alarm rate stays at most alpha. Each key's state is `projections.analysis.gate.decision`'s
on its CS. The gate decides BLOCK as soon as a key's CS lies below -threshold; PASS or WARN
(the worse of its keys') as soon as every key has ruled out a drop beyond the threshold (its
CS lies above -threshold, so it can never block); at the candidate's close, the worst of its
keys' states, INCONCLUSIVE when some key's CS still holds both 0 and -threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from events.outputs import RunSummary
from projections.analysis.compare import NotComparable, key_attempts, pass_rate, passk_keys
from projections.analysis.gate.decision import BLOCK, INCONCLUSIVE, PASS, WARN, decide, worst
from projections.analysis.gate.sequence import ConfidenceSequence
from projections.assembly.attempts import summary_tasks
from projections.fold.declarations import key_name
from projections.fold.run import RunState
from projections.fold.task import TaskState

ALPHA = 0.05


@dataclass(frozen=True, slots=True)
class Look:
    """One key's state after an observation."""

    key: str
    paired: int
    """Paired tasks observed on this key."""
    mean: float | None
    interval: tuple[float, float]
    decision: str
    """`projections.analysis.gate.decision`'s on the CS: INCONCLUSIVE before any observation."""


@dataclass(slots=True)
class LiveGate:
    """Build with `live_gate`; call `after` with the candidate's state after each applied event."""

    threshold: float
    baseline: dict[str, dict[str, float]]
    """key -> task_id -> the baseline's pass rate, for the tasks it measured."""
    sequences: dict[str, ConfidenceSequence]
    observed: dict[str, set[str]] = field(default_factory=dict)

    def after(self, run: RunState, task_id: str | None) -> list[Look]:
        """Observe what the event that changed `task_id` (None: the run header) completed, and
        everything left at the close; the looks of the keys that got an observation."""
        changed: set[str] = set()
        per_task = run.declarations.attempts_per_task if run.declarations else None
        task = run.tasks.get(task_id) if task_id is not None else None
        if task is not None and per_task:
            changed |= self._observe(task, per_task)
        if run.closed:
            for each in summary_tasks(run):
                changed |= self._observe(each, 1)
        return [self.look(key) for key in sorted(changed)]

    def look(self, key: str) -> Look:
        sequence = self.sequences[key]
        interval = sequence.interval
        decision = decide(interval, self.threshold) if sequence.count else INCONCLUSIVE
        return Look(key, sequence.count, sequence.mean, interval, decision)

    def decision(self, closed: bool) -> str | None:
        """BLOCK if some key established a drop beyond the threshold; the worst of the keys'
        PASS and WARN once every key ruled one out; at the candidate's close, the worst of
        every key's state; else None (keep looking)."""
        decisions = [self.look(key).decision for key in self.sequences]
        if BLOCK in decisions:
            return BLOCK
        if closed or all(decision in (PASS, WARN) for decision in decisions):
            return worst(decisions)
        return None

    def observe(self, key: str, task_id: str, attempts: int, passed: int, needed: int) -> bool:
        """Observe `task_id` on `key` if the candidate's `attempts` (of which `passed` pass)
        reach `needed` and the baseline measured it, once; whether it was observed now."""
        rates = self.baseline.get(key)
        if rates is None or attempts < needed or attempts == 0:
            return False
        rate = rates.get(task_id)
        seen = self.observed.setdefault(key, set())
        if rate is None or task_id in seen:
            return False
        seen.add(task_id)
        self.sequences[key].add(passed / attempts - rate)
        return True

    def _observe(self, task: TaskState, needed: int) -> set[str]:
        changed = set()
        for key in task.kept_keys():
            tally = task.tally(key)
            name = key_name(key)
            if tally is not None and self.observe(name, task.task_id, tally[0], tally[1], needed):
                changed.add(name)
        return changed


def gate_of_rates(baseline: dict[str, dict[str, float]], threshold: float) -> LiveGate:
    """The gate against a baseline given as key -> task_id -> pass rate (at least one key)."""
    alpha = ALPHA / len(baseline)
    return LiveGate(threshold, baseline, {key: ConfidenceSequence(alpha) for key in baseline})


def live_gate(baseline: RunSummary, keys: Sequence[str] | None, threshold: float) -> LiveGate:
    """The gate of a candidate against `baseline` on `keys` (default: every pass@k key of the
    baseline). Raises `NotComparable` for a key the baseline has no pass@k of."""
    known = passk_keys(baseline)
    chosen = known if keys is None else list(dict.fromkeys(keys))
    if not chosen:
        raise NotComparable(f"the baseline {baseline.run_id!r} has no pass@k key; nothing to gate on")
    missing = [key for key in chosen if key not in known]
    if missing:
        raise NotComparable(
            f"{', '.join(map(repr, missing))} {'is' if len(missing) == 1 else 'are'} not a pass@k key "
            f"of the baseline {baseline.run_id!r}; its keys: {', '.join(known) or 'none'}"
        )
    rates = {
        key: {task: pass_rate(attempts) for task, attempts in key_attempts(baseline, key).items() if attempts}
        for key in chosen
    }
    return gate_of_rates(rates, threshold)
