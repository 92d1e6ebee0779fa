"""A Harbor job directory (Harbor 0.25 or 0.26) as v1 event logs, one run per group of
Harbor's own stats.

What is read: the job's `result.json` (its id, whether it finished), `config.json` (its
name, attempts per task, retry rules), `lock.json` (the Harbor version that ran it, the
groups it plans) and every `<trial>/result.json` (a trial directory without one is a trial
still running, and is skipped). Mapping choices:

- Harbor version: `lock.json`'s `harbor.version`; a job without a lock, or whose lock names
  no version, is 0.26 when its trials record `reward_valid` (0.26 writes it), else 0.25. Each run declares the
  `harbor_rules` of that version ("0.25" for 0.25 and older, "0.26" from 0.26 on), so its
  `harbor` block follows the arithmetic of the Harbor that wrote the job.

- Runs: one per key of Harbor's `stats.evals`, `agent[__model]__dataset`, made the way
  Harbor makes it (agent name, model name if any, the trial's `source` or "adhoc"). The run
  id is `<job_name>:<group>`. `--run-id ID` names the run `ID` when the job plans one group
  (the agent/model/dataset of the trials in its `lock.json`, written when the job starts;
  without one, the groups its trials show), and `ID:<group>` for each group when it has
  several (never one run of several groups, which Harbor keeps apart).
- Order: trials in the order they started (`started_at`, then name), which is the order
  Harbor lists them in a finished job's `result.json`; tasks are declared in order of their
  first trial, the order Harbor adds up pass@k in.
- Each trial is a `trial.finished` and one score of the metric `harbor_reward` (the NeMo
  SDK's name). The trial's exceptions are Harbor's `recorded_exceptions`: the trial's own
  `exception_info`, then each step's (`step_results[].exception_info`) in step order. With
  any, the trial is `failed`, its error the first of them (type and message; the message
  names the others' types too); else `completed`. Its usage is the token counts and cost
  of its agent, or the sum of its steps' agents.
- The score: the verifier's rewards, one output per reward key, `completed` even when the
  trial raised (Harbor grades such trials), as long as the reward is valid. Not valid
  (Harbor 0.26: `reward_valid` false, because an exception's resolved `policy`, the job's
  `override_error_policy` included, says `has_valid_reward` false), the score is `failed`,
  failure `metric`, with the first such exception as its error: the attempt is unmeasured,
  as Harbor leaves it out of `n_trials`, `reward_stats` and pass@k. A trial without rewards
  is a dead trial (`failed`, failure `trial`). A 0.25 job records no validity: every
  reward counts, as Harbor 0.25 counted it.
- Exceptions in `exception_stats`: Harbor 0.26 lists a trial under each distinct type it
  recorded; an event carries one error, so a trial that recorded several types is listed
  under its first one only (the others are in the error's message).
- Declarations: each task declares the reward keys its trials returned, all `continuous`;
  a task none of whose trials was graded declares the keys of its group (so its dead
  trials count as failed attempts, as Harbor counts them in pass@k).
- Event ids come from Harbor's names (`<trial>:finished`, `<trial>:reward`,
  `<job id>:started`, `<job id>:closed`), so importing twice is a redelivery.
- Close: a job whose `result.json` has `finished_at` is closed `completed` (`cancelled`
  when a trial ended with Harbor's CancelledError); a job without it is still running or
  was interrupted, and its runs are left open.
- `occurred_at` is the trial's `finished_at` (Harbor writes trials' times in UTC; the
  job's own times have no zone, so run events carry none).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from events.codec import from_object
from events.importers.source import ImportOptions, SourceError, event_id, json_value
from events.models import HarborRules, InputEvent, RunClosed, RunStarted

METRIC = "harbor_reward"
CANCELLED = "CancelledError"
"""Harbor's exception type for a trial cancelled by the job (Ctrl-C)."""

Rewards = Mapping[str, Any]

HARBOR_RULES_FROM = (0, 26)
"""The first Harbor version whose arithmetic is `harbor_rules` "0.26"; older ones are "0.25"."""

RETRY_EXCLUDED_BY_DEFAULT = frozenset(
    {
        "AgentTimeoutError",
        "VerifierTimeoutError",
        "RewardFileNotFoundError",
        "RewardFileEmptyError",
        "VerifierOutputParseError",
        "ApiUsageLimitError",
        "AgentSafetyRefusalError",
        "AgentAuthenticationError",
        "ModelNotFoundError",
        "UnsupportedModelParametersError",
    }
)
"""Harbor 0.25's `RetryConfig.exclude_exceptions` default: never retried (a 0.25 job's
config.json leaves defaults out; 0.26 writes the list it resolved)."""


@dataclass(frozen=True, slots=True)
class Raised:
    """One exception a trial recorded."""

    type: str
    message: str
    valid_reward: bool
    """Whether a reward graded despite it is valid: its resolved `policy` (0.26); True where
    Harbor recorded none (0.25)."""


@dataclass(frozen=True, slots=True)
class Trial:
    """What the events need of one trial's `result.json`."""

    file: Path
    name: str
    task: str
    group: str
    """Harbor's `stats.evals` key."""
    agent: str
    model: str | None
    dataset: str
    started_at: str
    finished_at: str | None
    rewards: Rewards | None
    """The verifier's rewards; None when it returned none."""
    raised: tuple[Raised, ...]
    """Its recorded exceptions: the trial's own, then its steps' in step order."""
    reward_valid: bool
    """Whether its rewards count (Harbor 0.26's `reward_valid`; a 0.25 trial's count when it has any)."""
    records_validity: bool
    """Whether its result.json records `reward_valid` (Harbor 0.26 on)."""
    usage: Mapping[str, int | float] | None

    @property
    def error_type(self) -> str | None:
        return self.raised[0].type if self.raised else None

    def error(self) -> dict[str, str] | None:
        """The trial's error as an event carries it: its first exception, naming the others."""
        if not self.raised:
            return None
        first, others = self.raised[0], [raised.type for raised in self.raised[1:]]
        message = first.message + (f" (also raised: {', '.join(others)})" if others else "")
        return {"type": first.type, "message": message}


@dataclass(frozen=True, slots=True)
class Job:
    """What the events need of the job's `config.json` and `result.json`."""

    path: Path
    id: str
    name: str
    attempts: int | None
    finished: bool
    planned_groups: int | None
    """How many groups the job's lock.json plans (None without a lock.json)."""
    max_retries: int
    """Harbor re-runs a failed trial up to this many times, under the same trial name."""
    retry_include: frozenset[str] | None
    retry_exclude: frozenset[str]
    rules: HarborRules
    """The `harbor_rules` of the Harbor version that ran the job."""

    def may_retry(self, trial: Trial) -> bool:
        """Whether Harbor may still re-run `trial`: it raised, and every exception it recorded
        is retryable (`TrialQueue._execute_trial_with_retries`, `RetryConfig.is_retryable`)."""
        if not trial.raised or self.finished or self.max_retries == 0:
            return False
        return all(self.retryable(raised.type) for raised in trial.raised)

    def retryable(self, exception_type: str) -> bool:
        if exception_type in self.retry_exclude:
            return False
        return self.retry_include is None or exception_type in self.retry_include


def read(path: Path, options: ImportOptions) -> Iterator[InputEvent]:
    trials = [read_trial(file) for file in trial_files(path)]
    job = read_job(path, trials)
    names = run_ids(job, groups(trials), options)
    for group, members in grouped(trials).items():
        run_id = names[group]
        # The trials' events first: a reward Harbor wrote that no event can carry is
        # reported against its trial's file, not against the declarations made of it.
        events = [event for trial in members for event in trial_events(run_id, trial)]
        yield run_started(job, run_id, members)
        yield from events
        closing = run_closed(job, run_id, members)
        if closing is not None:
            yield closing


def read_job(path: Path, trials: Sequence[Trial] = ()) -> Job:
    """The job at `path`; raises `SourceError` when it is not a readable Harbor job.
    `trials`: those read so far, which tell a job without a lock.json's Harbor version."""
    if not path.is_dir():
        raise SourceError(f"{path}: no such directory; pass a Harbor job directory (jobs/<job_name>)")
    result = _json_object(path / "result.json", missing="not a Harbor job directory (it has no result.json)")
    config_file = path / "config.json"
    config = _json_object(config_file) if config_file.exists() else {}
    attempts = config.get("n_attempts", 1)
    retry = config.get("retry") or {}
    if not isinstance(retry, dict) or not isinstance(retry.get("max_retries", 0), int):
        raise SourceError(f"{config_file}: `retry` is not a Harbor retry config")
    include, exclude = retry.get("include_exceptions"), retry.get("exclude_exceptions", RETRY_EXCLUDED_BY_DEFAULT)
    lock_file = path / "lock.json"
    lock = _json_object(lock_file) if lock_file.exists() else None
    return Job(
        path=path,
        id=_text(result, "id", path / "result.json"),
        name=str(config.get("job_name") or path.name),
        attempts=attempts if isinstance(attempts, int) and not isinstance(attempts, bool) and attempts >= 1 else None,
        finished=result.get("finished_at") is not None,
        planned_groups=None if lock is None else _planned_groups(lock, lock_file),
        max_retries=retry.get("max_retries", 0),
        retry_include=None if not include else frozenset(include),
        retry_exclude=frozenset(exclude or ()),
        rules=_rules(lock, lock_file, trials),
    )


def _rules(lock: Mapping[str, Any] | None, file: Path, trials: Sequence[Trial]) -> HarborRules:
    """The `harbor_rules` of the Harbor that wrote the job (see the module's docstring)."""
    harbor = lock.get("harbor") if lock is not None else None
    if lock is not None and not isinstance(harbor, dict):
        raise SourceError(f"{file}: no `harbor` object (its version); is this a Harbor job lock?")
    version = harbor.get("version") if harbor is not None else None
    found = re.match(r"(\d+)\.(\d+)", version) if isinstance(version, str) else None
    if found is None:  # no lock, or Harbor could not name its own version (a source checkout)
        return "0.26" if any(trial.records_validity for trial in trials) else "0.25"
    return "0.26" if (int(found[1]), int(found[2])) >= HARBOR_RULES_FROM else "0.25"


def _planned_groups(lock: Mapping[str, Any], file: Path) -> int:
    """The number of agent/model/dataset groups among the trials the lock plans."""
    trials = lock.get("trials")
    if not isinstance(trials, list) or not all(isinstance(trial, dict) for trial in trials):
        raise SourceError(f"{file}: no `trials` list; is this a Harbor job lock?")
    planned = set()
    for trial in trials:
        agent, task = trial.get("agent") or {}, trial.get("task") or {}
        planned.add((agent.get("name") or agent.get("import_path"), agent.get("model_name"), task.get("source")))
    return len(planned)


def trial_files(path: Path) -> list[Path]:
    """Every trial's `result.json` in the job at `path` (trials still running have none)."""
    return sorted(file for file in path.glob("*/result.json") if file.is_file())


def read_trial(file: Path) -> Trial:
    """One trial's `result.json`; raises `SourceError` when it is not (yet) a whole
    Harbor trial result (Harbor writes it in place, so it may be half-written)."""
    result = _json_object(file)
    agent = result.get("agent_info")
    if not isinstance(agent, dict):
        raise SourceError(f"{file}: no `agent_info` object; is this a Harbor trial result?")
    model_info = agent.get("model_info")
    model = _text(model_info, "name", file) if isinstance(model_info, dict) else None
    agent_name = _text(agent, "name", file)
    dataset = result.get("source") or "adhoc"
    verifier = result.get("verifier_result")
    rewards = verifier.get("rewards") if isinstance(verifier, dict) else None
    if rewards is not None and not isinstance(rewards, dict):
        raise SourceError(f"{file}: `verifier_result.rewards` is not an object of reward keys to numbers")
    raised = _raised(result, file)
    recorded = result.get("reward_valid")
    if isinstance(recorded, bool):
        reward_valid = recorded
    else:  # 0.25 records no validity; a 0.26 result Harbor wrote always does
        reward_valid = rewards is not None and all(exception.valid_reward for exception in raised)
    return Trial(
        file=file,
        name=_text(result, "trial_name", file),
        task=_text(result, "task_name", file),
        group=group_key(agent_name, model, str(dataset)),
        agent=agent_name,
        model=model,
        dataset=str(dataset),
        started_at=str(result.get("started_at") or ""),
        finished_at=_zoned(result.get("finished_at")),
        rewards=rewards,
        raised=raised,
        reward_valid=reward_valid,
        records_validity=isinstance(recorded, bool),
        usage=_usage(_agent_results(result, file)),
    )


def _raised(result: Mapping[str, Any], file: Path) -> tuple[Raised, ...]:
    """The trial's recorded exceptions: its own, then its steps' (Harbor's `recorded_exceptions`)."""
    steps = result.get("step_results") or []
    if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
        raise SourceError(f"{file}: `step_results` is not a list of step results")
    raised = []
    for where, exception in [("exception_info", result.get("exception_info"))] + [
        (f"step_results[{at}].exception_info", step.get("exception_info")) for at, step in enumerate(steps)
    ]:
        if exception is None:
            continue
        if not isinstance(exception, dict):
            raise SourceError(f"{file}: `{where}` is not an object")
        policy = exception.get("policy")
        valid = policy.get("has_valid_reward", True) if isinstance(policy, dict) else True
        if not isinstance(valid, bool):
            raise SourceError(f"{file}: `{where}.policy.has_valid_reward` is not true or false")
        raised.append(
            Raised(
                type=str(exception.get("exception_type") or "UnknownError"),
                message=str(exception.get("exception_message") or ""),
                valid_reward=valid,
            )
        )
    return tuple(raised)


def _agent_results(result: Mapping[str, Any], file: Path) -> list[Mapping[str, Any]]:
    """The trial's agent results: its own, else its steps' (a multi-step trial has one a step)."""
    own = result.get("agent_result")
    if isinstance(own, dict):
        return [own]
    return [
        step["agent_result"] for step in result.get("step_results") or () if isinstance(step.get("agent_result"), dict)
    ]


def group_key(agent: str, model: str | None, dataset: str) -> str:
    """Harbor's `JobStats.format_agent_evals_key`."""
    return f"{agent}__{model}__{dataset}" if model else f"{agent}__{dataset}"


def start_order(trials: Iterable[Trial]) -> list[Trial]:
    return sorted(trials, key=lambda trial: (trial.started_at, trial.name))


def grouped(trials: Iterable[Trial]) -> dict[str, list[Trial]]:
    """Trials by group, groups in order of their first trial, each in start order."""
    groups: dict[str, list[Trial]] = {}
    for trial in start_order(trials):
        groups.setdefault(trial.group, []).append(trial)
    return groups


def groups(trials: Iterable[Trial]) -> list[str]:
    return list(grouped(trials))


def run_ids(job: Job, names: Sequence[str], options: ImportOptions) -> dict[str, str]:
    """The run id of each group (see the module's docstring)."""
    several = len(names) > 1 or (job.planned_groups or 1) > 1
    return {name: run_id(job, name, options, several=several) for name in names}


def run_id(job: Job, group: str, options: ImportOptions, *, several: bool) -> str:
    """The run id of `group`; `several`: whether the job has (or plans) other groups."""
    if options.run_id is not None and not several:
        return options.run_id
    return event_id(job.name if options.run_id is None else options.run_id, group)


def trial_events(run_id: str, trial: Trial) -> list[InputEvent]:
    """A trial's `trial.finished` and its `harbor_reward` score."""
    finished: dict[str, Any] = {
        **_envelope(run_id, event_id(trial.name, "finished"), trial.finished_at),
        "type": "trial.finished",
        "task_id": trial.task,
        "trial_id": trial.name,
        "status": "completed" if trial.error_type is None else "failed",
    }
    error = trial.error()
    if error is not None:
        finished["error"] = error
    if trial.usage:
        finished["usage"] = dict(trial.usage)
    score: dict[str, Any] = {
        **_envelope(run_id, event_id(trial.name, "reward"), trial.finished_at),
        "type": "score.emitted",
        "task_id": trial.task,
        "trial_id": trial.name,
        "metric_type": METRIC,
    }
    if trial.rewards is None:
        score.update(status="failed", failure="trial")
        if error is not None:
            score["error"] = error
    elif not trial.reward_valid:
        score.update(status="failed", failure="metric")
        invalidating = next((raised for raised in trial.raised if not raised.valid_reward), None)
        if invalidating is not None:
            score["error"] = {"type": invalidating.type, "message": invalidating.message}
    else:
        score.update(
            status="completed", outputs=[{"name": key, "value": value} for key, value in trial.rewards.items()]
        )
    return [_event(finished, trial), _event(score, trial)]


def run_started(job: Job, run_id: str, trials: Sequence[Trial]) -> RunStarted:
    """The group's declarations, from all its trials (see the module's docstring)."""
    task_keys: dict[str, dict[str, None]] = {}
    group_keys: dict[str, None] = {}
    for trial in start_order(trials):
        keys = task_keys.setdefault(trial.task, {})
        for key in trial.rewards or ():
            keys[key] = group_keys[key] = None
    first = trials[0]
    labels = {"harbor_job": job.name, "agent": first.agent, "dataset": first.dataset}
    if first.model is not None:
        labels["model"] = first.model
    body: dict[str, Any] = {
        **_envelope(run_id, event_id(job.id, "started"), None),
        "type": "run.started",
        "labels": labels,
        "harbor_rules": job.rules,
        "tasks": [
            {
                "task_id": task,
                "metrics": [
                    {
                        "metric_type": METRIC,
                        "outputs": [{"name": key, "kind": "continuous"} for key in keys or group_keys],
                    }
                ],
            }
            for task, keys in task_keys.items()
        ],
    }
    if job.attempts is not None:
        body["attempts_per_task"] = job.attempts
    event = _event(body, None, job.path / "result.json")
    assert isinstance(event, RunStarted)
    return event


def run_closed(job: Job, run_id: str, trials: Sequence[Trial]) -> RunClosed | None:
    """The group's close, or None while the job has not finished."""
    if not job.finished:
        return None
    cancelled = any(raised.type == CANCELLED for trial in trials for raised in trial.raised)
    reason = "cancelled" if cancelled else "completed"
    event = _event(
        {**_envelope(run_id, event_id(job.id, "closed"), None), "type": "run.closed", "reason": reason},
        None,
        job.path / "result.json",
    )
    assert isinstance(event, RunClosed)
    return event


def _envelope(run_id: str, event: str, occurred_at: str | None) -> dict[str, Any]:
    envelope: dict[str, Any] = {"schema_version": 1, "event_id": event, "run_id": run_id}
    if occurred_at is not None:
        envelope["occurred_at"] = occurred_at
    return envelope


def _event(body: dict[str, Any], trial: Trial | None, file: Path | None = None) -> InputEvent:
    try:
        return from_object(body)
    except ValidationError as error:
        where = trial.file if trial is not None else file
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise SourceError(f"{where}: cannot be written as a v1 event ({problems})") from None


def _json_object(file: Path, missing: str = "missing") -> dict[str, Any]:
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SourceError(f"{file}: {missing}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SourceError(f"{file}: cannot be read ({error})") from None
    try:
        data = json_value(text, str(file))
    except json.JSONDecodeError as error:
        raise SourceError(
            f"{file}, line {error.lineno}: not valid JSON ({error.msg}); a file Harbor is still writing "
            "is whole once its trial ends"
        ) from None
    if not isinstance(data, dict):
        raise SourceError(f"{file}: not a JSON object; is this a Harbor result.json?")
    return data


def _text(data: Mapping[str, Any], field: str, file: Path) -> str:
    value = data.get(field)
    if not isinstance(value, str) or not value:
        raise SourceError(f"{file}: no `{field}` string; is this a Harbor result.json?")
    return value


def _zoned(value: object) -> str | None:
    """`value` if it is a timestamp with a time zone (RFC 3339 needs one), else None."""
    if not isinstance(value, str):
        return None
    try:
        return value if datetime.fromisoformat(value).tzinfo is not None else None
    except ValueError:
        return None


def _usage(agent_results: Sequence[Mapping[str, Any]]) -> dict[str, int | float] | None:
    """The token counts and cost of the trial's agent results, summed (Harbor's
    `compute_token_cost_totals`): a figure none of them has is left out."""
    usage: dict[str, int | float] = {}
    for agent_result in agent_results:
        for ours, theirs in (("input_tokens", "n_input_tokens"), ("output_tokens", "n_output_tokens")):
            tokens = agent_result.get(theirs)
            if isinstance(tokens, int) and not isinstance(tokens, bool):
                usage[ours] = usage.get(ours, 0) + tokens
        cost = agent_result.get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            usage["cost_usd"] = usage.get("cost_usd", 0.0) + float(cost)
    return usage or None
