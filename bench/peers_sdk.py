"""The peers' side of `bench.peers`, run under the NeMo evaluator SDK's interpreter (Python
3.12, `nemo-platform` 0.6 and `harbor` 0.25): reads the run `bench.peers` wrote (tasks and
trials as plain JSON), builds the SDK's and Harbor's own objects for it (untimed), then
times, in memory, what each recomputes from them: the SDK's `AgentEvalSummary.from_scores`,
and Harbor's job stats (`JobStats.from_trial_results` and `compute_pass_at_k_by_evals`, what
Harbor's result.json holds). Prints one JSON object: CPU seconds, best of the rounds."""

import copy
import json
import sys
import time
from pathlib import Path

from harbor.models.job.result import JobStats
from harbor.models.trial.result import TrialResult
from harbor.utils.pass_at_k import compute_pass_at_k_by_evals
from nemo_evaluator_sdk.agent_eval.results import AgentEvalSummary
from nemo_evaluator_sdk.agent_eval.scores import AgentEvalDiagnostic, AgentEvalTaskScore
from nemo_evaluator_sdk.agent_eval.tasks import AgentEvalTask
from nemo_evaluator_sdk.agent_eval.trials import AgentEvalTrial, AgentOutput, TrialError
from nemo_evaluator_sdk.metrics.protocol import MetricOutputSpec


class Declared:
    """A metric that only declares its outputs (the scores are given)."""

    type = "reward"

    def output_spec(self) -> list[MetricOutputSpec]:
        return [MetricOutputSpec.continuous_score("score")]

    async def compute_scores(self, input):
        raise NotImplementedError


def best(function, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.process_time()
        function()
        times.append(time.process_time() - began)
    return min(times)


def nemo(run: dict, rounds: int) -> float:
    metric = Declared()
    tasks = [
        AgentEvalTask(id=task, intent=task, inputs={"instruction": task}, metrics=[metric]) for task in run["tasks"]
    ]
    trials, scores = [], []
    for task, trial, reward, error in run["trials"]:
        trials.append(
            AgentEvalTrial(
                id=trial,
                task_id=task,
                status="failed" if error else "completed",
                output=AgentOutput(output_text="x"),
                error=TrialError(type=error) if error else None,
            )
        )
        fields = {"id": f"s:{trial}", "run_id": "peers", "task_id": task, "trial_id": trial, "metric_type": "reward"}
        if error:
            dead = AgentEvalDiagnostic(severity="error", message="trial failed", details={"trial_status": "failed"})
            scores.append(AgentEvalTaskScore(**fields, status="failed", diagnostics=[dead]))
        else:
            scores.append(
                AgentEvalTaskScore(**fields, status="completed", outputs=[{"name": "score", "value": reward}])
            )
    return best(lambda: AgentEvalSummary.from_scores(scores, tasks=tasks, trials=trials), rounds)


def harbor(run: dict, templates: Path, rounds: int) -> float:
    graded = json.loads(next(templates.glob("flaky__*/result.json")).read_text())
    dead = json.loads(next(templates.glob("dead__*/result.json")).read_text())
    results = []
    for task, trial, reward, error in run["trials"]:
        made = copy.deepcopy(dead if error else graded)
        made["trial_name"], made["task_name"] = trial, task
        if error:
            made["exception_info"]["exception_type"] = error
        else:
            made["verifier_result"] = {"rewards": {"reward": reward}}
        results.append(TrialResult.model_validate(made))

    def stats() -> None:
        JobStats.from_trial_results(results)
        compute_pass_at_k_by_evals(results)

    return best(stats, rounds)


def main() -> None:
    run = json.loads(Path(sys.argv[1]).read_text())
    templates, rounds = Path(sys.argv[2]), int(sys.argv[3])
    print(json.dumps({"nemo": nemo(run, rounds), "harbor": harbor(run, templates, rounds)}))


if __name__ == "__main__":
    main()
