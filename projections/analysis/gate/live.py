"""The live gate's fold: a candidate run's attempts paired with a closed baseline's as the
candidate's events apply, each key's confidence sequence, and the decision. `gate --live`, the
Inspect manager and `bench.gate` all decide through this one sequence.

One observation per attempt, paired and frozen when it lands: the candidate's k-th attempt of
a task on a key (in log order, as SEMANTICS.md section 1 orders attempts; a dead trial is an
attempt that did not pass, a `failed` / `metric` score is none) is paired with the baseline's
k-th attempt of that task on that key, and the observation is candidate passed - baseline
passed, in {-1, 0, 1}. A candidate attempt past the baseline's count for its task has no
partner and is not observed; nor is a task the baseline did not measure. Several attempts
landing in one event (one tally step of k attempts with c passes) are k observations, each
c/k - the baseline's partner.

Why per attempt: a harness interleaves its trials, so a task's attempts complete late, and a
gate that waited for whole tasks would see little until the end. Under the null (candidate and
baseline share each task's pass probability), an attempt and its partner are two independent
draws of the same Bernoulli, so each observation's mean given everything observed before is 0,
however the tasks and attempts are scheduled, as long as which attempt lands next does not
depend on its outcome; then the false-alarm rate is at most alpha however often the gate looks
(`projections.analysis.gate.sequence`). Pairing by position in log order, not by a task's
rate, is what makes this exact: the baseline's pass rate is an estimate, and a candidate
attempt's mean given that rate is not the rate (a task the baseline solved every time has
candidate attempts that can only fall short of it). Pairing by position also keeps the
symmetry when a harness lands failing attempts earlier than passing ones in both runs.

Under an alternative the CS covers the mean difference over the pairs observed so far: with
the same attempts per task in both runs, at the close, the mean of the tasks' pass-rate
differences (the fixed gate's mean).

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

from pydantic import JsonValue

from events.outputs import RunSummary
from projections.analysis.compare import NotComparable, key_attempts, passed, passk_keys
from projections.analysis.gate.decision import BLOCK, INCONCLUSIVE, PASS, WARN, decide, worst
from projections.analysis.gate.sequence import ConfidenceSequence
from projections.fold.declarations import key_name
from projections.fold.run import RunState

ALPHA = 0.05


@dataclass(frozen=True, slots=True)
class Look:
    """One key's state after an observation."""

    key: str
    paired: int
    """Tasks with at least one attempt paired on this key."""
    pairs: int
    """Attempts paired (observations) on this key."""
    mean: float | None
    interval: tuple[float, float]
    decision: str
    """`projections.analysis.gate.decision`'s on the CS: INCONCLUSIVE before any observation."""

    def record(self) -> dict[str, JsonValue]:
        """The look as JSON-ready data (the live gate's records, Inspect's summary)."""
        return {
            "key": self.key,
            "paired": self.paired,
            "pairs": self.pairs,
            "mean": self.mean,
            "interval": list(self.interval),
            "decision": self.decision,
        }


@dataclass(slots=True)
class LiveGate:
    """Build with `live_gate` (or `gate_of_attempts`); call `after` with the candidate's state
    after each applied event, or `observe` with a task's tally on a key."""

    threshold: float
    baseline: dict[str, dict[str, tuple[bool, ...]]]
    """key -> task_id -> whether each of the baseline's attempts passed, in log order."""
    sequences: dict[str, ConfidenceSequence]
    seen: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    """(key, task_id) -> the candidate's (attempts, passed) when last observed."""
    paired: dict[str, set[str]] = field(default_factory=dict)
    """key -> the tasks with an attempt paired."""

    def after(self, run: RunState, task_id: str | None) -> list[Look]:
        """Observe the attempts the event that changed `task_id` (None: the run header) added;
        the looks of the keys that got an observation."""
        task = run.tasks.get(task_id) if task_id is not None else None
        if task is None:
            return []
        changed = set()
        for key, attempts, passes in task.tallies():
            name = key_name(key)
            if self.observe(name, task.task_id, attempts, passes):
                changed.add(name)
        return [self.look(key) for key in sorted(changed)]

    def observe(self, key: str, task_id: str, attempts: int, passes: int) -> bool:
        """The candidate's tally of `task_id` on `key` is now `attempts`, `passes` of them
        passing: pair the attempts added since the last call; whether any was paired."""
        partners = self.baseline.get(key, {}).get(task_id)
        before_attempts, before_passes = self.seen.get((key, task_id), (0, 0))
        if attempts <= before_attempts:
            return False  # nothing new (a tally never shrinks; were it to, what was observed stays)
        self.seen[key, task_id] = (attempts, passes)
        if not partners:
            return False
        new = attempts - before_attempts
        value = min(max(passes - before_passes, 0), new) / new
        sequence = self.sequences[key]
        observed = False
        for partner in partners[before_attempts:attempts]:
            sequence.add(value - partner)
            observed = True
        if observed:
            self.paired.setdefault(key, set()).add(task_id)
        return observed

    def look(self, key: str) -> Look:
        sequence = self.sequences[key]
        interval = sequence.interval
        decision = decide(interval, self.threshold) if sequence.count else INCONCLUSIVE
        return Look(key, len(self.paired.get(key, ())), sequence.count, sequence.mean, interval, decision)

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


def gate_of_attempts(baseline: dict[str, dict[str, tuple[bool, ...]]], threshold: float) -> LiveGate:
    """The gate against a baseline given as key -> task_id -> its attempts' passes (one key at least)."""
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
    attempts = {
        key: {task: tuple(map(passed, listed)) for task, listed in key_attempts(baseline, key).items() if listed}
        for key in chosen
    }
    return gate_of_attempts(attempts, threshold)
