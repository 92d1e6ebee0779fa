"""Inspect AI early stopping on the live gate's evidence: `Task(early_stopping=GateStopping(...))`.

Inspect asks an `EarlyStopping` manager before each sample and epoch whether to run it, and
tells it each one's scores. `GateStopping` folds those scores as evalstream folds the events of
the same eval (`events.importers.inspect_events`, the conversion `evalstream import inspect`
and the Inspect hook use: a sample is a task, an epoch a trial, a scorer a metric) into a run
state, and after each sample asks the live gate (`projections.analysis.gate.live`, the sequence
`gate --live` decides on) about the candidate against a baseline run's summary. Once the gate
has decided in a way `stop_on` names (default: BLOCK, a regression beyond `threshold`
established), every sample and epoch not yet scheduled is skipped, each with the decision as
its reason; the eval log's `EarlyStoppingSummary` holds the decision, its evidence per key and
how many were skipped.

Which stops are safe, given how the gate decides:
- after a decision: any. The sequence is anytime-valid: its error rate holds whenever it is
  looked at, so acting on it after any sample keeps the gate's 5%.
- before a decision, only samples whose scores cannot reach the sequence: an epoch past the
  baseline's attempts of its sample (it has no partner), and a sample the baseline did not
  measure (`skip_unpaired`, on by default). Skipping them changes nothing the gate sees.
- never a sample chosen by how its earlier epochs or other samples scored (say, one that
  already passed every time): which attempt lands next must not depend on outcomes, or the
  sequence's guarantee is gone. So no such stop is offered.

A sample's scores are all the manager is told: a sample that errored arrives with the scores
it has, or none (then unmeasured, where the log, which has its error, counts a dead trial).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from inspect_ai.util import EarlyStop

from events.importers import inspect_events
from events.outputs import RunSummary
from projections.analysis.gate.decision import BLOCK
from projections.analysis.gate.live import LiveGate, Look, live_gate
from projections.fold.run import RunState, apply

if TYPE_CHECKING:
    from inspect_ai.dataset import Sample
    from inspect_ai.log import EvalSpec
    from inspect_ai.scorer import SampleScore
    from pydantic import JsonValue

NAME = "evalstream-live-gate"


class GateStopping:
    """An Inspect `EarlyStopping` manager deciding with the live gate against `baseline`."""

    def __init__(
        self,
        baseline: RunSummary,
        *,
        threshold: float = 0.0,
        keys: Sequence[str] | None = None,
        stop_on: Sequence[str] = (BLOCK,),
        skip_unpaired: bool = True,
    ) -> None:
        self.baseline = baseline
        self.threshold = threshold
        self.keys = keys
        self.stop_on = frozenset(stop_on)
        self.skip_unpaired = skip_unpaired
        self.gate: LiveGate = live_gate(baseline, keys, threshold)
        self.run = RunState("candidate")
        self.spec: dict[str, Any] = {}
        self.samples = 0
        self.decision: str | None = None
        self.decided_after: int | None = None
        """Samples complete when the gate decided."""
        self.evidence: list[Look] = []
        self.skipped = 0
        self.unpaired = 0

    @classmethod
    def from_file(cls, path: str, run_id: str, **options: Any) -> GateStopping:
        """Against the latest summary of `run_id` in a JSON Lines file of summaries (as
        `evalstream replay` or `evalstream summaries` print them)."""
        from events.latest import Latest, revision

        latest: Latest[RunSummary] = Latest(revision)
        with open(path, "rb") as lines:
            for line in lines:
                if line.strip():
                    summary = RunSummary.model_validate_json(line)
                    if summary.run_id == run_id:
                        latest.offer(summary)
        found = latest.get(run_id)
        if found is None:
            raise LookupError(f"no summary of run {run_id!r} in {path}")
        return cls(found, **options)

    async def start_task(self, task: EvalSpec, samples: list[Sample], epochs: int) -> str:
        self.spec = json.loads(task.model_dump_json(include=set(inspect_events.SPEC_FIELDS)))
        self.run = RunState(inspect_events.run_id(self.spec))
        apply(self.run, inspect_events.run_started(self.spec))
        return NAME

    async def schedule_sample(self, id: str | int, epoch: int) -> EarlyStop | None:
        if self.decision is not None and self.decision in self.stop_on:
            self.skipped += 1
            return EarlyStop(id=id, epoch=epoch, reason=self._reason(), metadata={"decision": self.decision})
        if self.skip_unpaired and not self._paired(str(id), epoch):
            self.unpaired += 1
            return EarlyStop(
                id=id,
                epoch=epoch,
                reason=f"the baseline {self.baseline.run_id} has no attempt to pair with this epoch: "
                "its scores cannot change the gate's decision",
                metadata={"decision": None},
            )
        return None

    async def complete_sample(self, id: str | int, epoch: int, scores: dict[str, SampleScore]) -> None:
        sample = {
            "id": id,
            "epoch": epoch,
            "uuid": None,
            "scores": {name: json.loads(score.score.model_dump_json()) for name, score in scores.items()},
        }
        for event in inspect_events.sample_events(self.spec, sample):
            applied = apply(self.run, event)
            self.gate.after(self.run, applied.task_id)
        self.samples += 1
        if self.decision is None:
            self.decision = self.gate.decision(closed=False)
            if self.decision is not None:
                self.decided_after = self.samples
                self.evidence = [self.gate.look(key) for key in sorted(self.gate.sequences)]

    async def complete_task(self) -> dict[str, JsonValue]:
        looks = self.evidence or [self.gate.look(key) for key in sorted(self.gate.sequences)]
        return {
            "baseline": self.baseline.run_id,
            "threshold": self.threshold,
            "decision": self.decision,
            "stopped": self.decision in self.stop_on if self.decision else False,
            "reason": self._reason() if self.decision else None,
            "decided_after_samples": self.decided_after,
            "samples_completed": self.samples,
            "samples_skipped": self.skipped,
            "samples_skipped_unpaired": self.unpaired,
            "keys": [look.record() for look in looks],
        }

    def _paired(self, task_id: str, epoch: int) -> bool:
        """Whether some key's baseline has an attempt for this epoch of this sample (epochs
        count from 1; the candidate's n-th attempt pairs with the baseline's n-th)."""
        return any(len(tasks.get(task_id, ())) >= epoch for tasks in self.gate.baseline.values())

    def _reason(self) -> str:
        shown = "; ".join(
            f"{look.key}: {look.pairs} attempts paired, 95% CS [{look.interval[0]:+.4f}, {look.interval[1]:+.4f}]"
            for look in self.evidence
        )
        return (
            f"evalstream live gate against {self.baseline.run_id}: {str(self.decision).upper()} "
            f"(threshold {self.threshold:g}) after {self.decided_after} samples: {shown}"
        )
