"""A NeMo Evaluator 0.3 (`nel eval run`) output directory as v1 event logs, one run per
benchmark.

The layout (NeMo Evaluator's `docs/result-format.mdx`): nested, an output directory with
`nel_run.json` and one directory per benchmark; or flat, one benchmark's directory itself.
A benchmark's directory holds `results.jsonl` (one line per attempt: `problem_idx`,
`repeat`, `reward`, `scorer_rewards`, `scoring_details`, `tokens`, `latency_ms`,
`trajectory`), `eval-<run>.json` (the bundle: `config` with the model, `config_hash`,
`benchmark` with `repeats`, `n_results` and `scores`), `trajectories.jsonl` (per attempt its
`failure_category`) and `runtime_stats.json`, all when the benchmark ends; while it runs,
nel appends each verified attempt to `verified_log.jsonl` (the same fields but
`scorer_rewards` and `trajectory`, `response` for `model_response`). evalstream reads
`results.jsonl` and the bundle (and `nel_run.json`); a benchmark without `results.jsonl`
(running, or stopped) is read from `verified_log.jsonl`.

Mapping choices:
- Runs: one per benchmark. The run id is `<nel run id>:<benchmark>` (`nel_run.json`'s
  `run_id`), or the benchmark directory's name where there is no `nel_run.json`;
  `--run-id ID` names the run `ID` when the directory has one benchmark, `ID:<benchmark>`
  for each otherwise. Labels: `benchmark`, `model` and `config_hash` from the bundle,
  `nel_run` where known.
- Trials: each (`problem_idx`, `repeat`) is one trial, `<benchmark>/<problem_idx>#<repeat>`,
  of the task `<benchmark>/<problem_idx>` (`<benchmark>`: the directory's name, known before
  the bundle is; `repeat` 0 where a line has none, as nel reads it); tasks declared in
  `problem_idx` order.
- Scores: one score of the metric `nel` per attempt, its outputs the primary `reward` and
  one per scorer (`scorer:<name>` as `<name>`), all `continuous`. Each scorer's reward is
  read from `scoring_details["scorer:<name>"]["reward"]`, which every line has (a resumed
  run's cached attempts and the live log carry no `scorer_rewards`, which repeats it); a
  scorer that raised (an `error` there) has no output.
- Failed attempts, by `scoring_details.method`: `infra_error`, `solve_failed` and
  `graceful_error` (the model endpoint failed after its retries, or the solver gave up)
  are trials that died: `trial.finished` failed (type: the method, message: the error)
  and the score failed, failure `trial` (nel scores them 0, and a dead attempt counts as
  not passed: the same pass@k). `system_error` (the scoring raised after its retries) is
  a metric that failed: failure `metric`, the attempt unmeasured (nel scores it 0; its
  pass@k and mean then differ from ours). Any other method was scored, and is `completed`:
  an empty or refused answer the scorer graded 0 is a measured 0, as nel counts it (its
  `failure_category` in `trajectories.jsonl` is not read: nel writes that file when the
  benchmark ends, and a followed run must give the same events as its import).
- Usage is not carried: nel splits an attempt's tokens into prompt and completion only in
  its trajectory, which the live log and a resumed run's cached attempts lack, and an
  attempt must be the same events whichever file it is read from.
- Event ids: `nel:<run id>:<trial>:finished` and `...:score`, `...:started`, `...:closed`.
- Close: a benchmark whose bundle is there and whose `results.jsonl` holds the bundle's
  `n_results` attempts (any, for a bundle without the count) is closed `completed`;
  otherwise it is still running and its run is left open.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from events.codec import from_object
from events.importers.source import ImportOptions, SourceError, event_id, json_lines, json_value
from events.models import InputEvent

METRIC = "nel"
PRIMARY = "reward"
SCORER = "scorer:"
DIED = frozenset({"infra_error", "solve_failed", "graceful_error"})
"""`scoring_details.method`s of an attempt whose model or solver failed: a dead trial."""
SCORING_FAILED = frozenset({"system_error"})
"""`scoring_details.method`s of an attempt whose scoring failed: an unmeasured attempt."""

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One line of `results.jsonl`."""

    where: str
    problem: int
    repeat: int
    rewards: dict[str, float]
    """Output name -> value: `reward` and each scorer's that has one."""
    method: str
    error: str


@dataclass(frozen=True, slots=True)
class Benchmark:
    """One benchmark's directory, as far as it is written."""

    path: Path
    name: str
    run_id: str
    attempts: list[Attempt]
    bundle: Row | None
    """The `eval-*.json` bundle, once written."""

    @property
    def finished(self) -> bool:
        """The bundle is written and, where it counts them (nel does), so are its attempts."""
        if self.bundle is None:
            return False
        count = self.bundle.get("n_results")
        return count == len(self.attempts) if isinstance(count, int) else True


def is_nel(path: Path) -> bool:
    """Whether `path` looks like a nel output directory, nested or flat."""
    return bool(benchmark_dirs(path)) or (path / "nel_run.json").exists()


def benchmark_dirs(path: Path) -> list[Path]:
    """The benchmark directories at `path`: itself when flat, else its subdirectories with results."""
    if _is_benchmark(path):
        return [path]
    return sorted(child for child in path.iterdir() if child.is_dir() and _is_benchmark(child)) if path.is_dir() else []


def _is_benchmark(path: Path) -> bool:
    return any((path / name).exists() for name in ("results.jsonl", "verified_log.jsonl")) or any(
        path.glob("eval-*.json")
    )


def run_ended(path: Path) -> bool:
    """Whether the nel run whose output is `path` (nested) has ended: nel writes its
    `report.<format>` files once every benchmark is done."""
    return any(path.glob("report.*"))


def read(path: Path, options: ImportOptions) -> Iterator[InputEvent]:
    """Every benchmark of the nel output at `path` as a run (see the module's docstring)."""
    for benchmark in read_benchmarks(path, options):
        yield from events_of(benchmark)


def read_benchmarks(path: Path, options: ImportOptions, *, partial_last_line: bool = False) -> list[Benchmark]:
    """The benchmarks at `path`; `partial_last_line` (`follow`): a last line not yet whole
    is left for later rather than an error."""
    directories = benchmark_dirs(path)
    if not directories:
        raise SourceError(
            f"{path}: not a nel output directory (no benchmark directory with results.jsonl, verified_log.jsonl "
            "or eval-*.json); "
            "pass the directory `nel eval run` wrote (its -o), or one benchmark's directory in it"
        )
    nested = directories != [path]
    nel_run = _nel_run_id(path if nested else path.parent)
    several = len(directories) > 1
    benchmarks = []
    for directory in directories:
        name = directory.name
        if options.run_id is not None:
            run_id = event_id(options.run_id, name) if several else options.run_id
        else:
            run_id = event_id(nel_run, name) if nel_run is not None else name
        bundle = _bundle(directory)
        benchmarks.append(
            Benchmark(
                path=directory,
                name=name,
                run_id=run_id,
                attempts=_attempts(_attempts_file(directory), partial_last_line=partial_last_line),
                bundle=bundle,
            )
        )
    return benchmarks


def events_of(benchmark: Benchmark) -> list[InputEvent]:
    """The benchmark's run: run.started, each attempt's trial.finished and score, run.closed once finished."""
    events = [event for attempt in benchmark.attempts for event in attempt_events(benchmark, attempt)]
    closing = run_closed(benchmark)
    return [run_started(benchmark), *events, *([closing] if closing is not None else [])]


def attempt_events(benchmark: Benchmark, attempt: Attempt) -> list[InputEvent]:
    """One attempt's `trial.finished` and its `nel` score."""
    task, trial = _task_id(benchmark, attempt.problem), f"{benchmark.name}/{attempt.problem}#{attempt.repeat}"
    envelope = {"schema_version": 1, "run_id": benchmark.run_id, "task_id": task, "trial_id": trial}
    finished: Row = {**envelope, "type": "trial.finished", "event_id": _id(benchmark, trial, "finished")}
    score: Row = {
        **envelope,
        "type": "score.emitted",
        "event_id": _id(benchmark, trial, "score"),
        "metric_type": METRIC,
    }
    if attempt.method in DIED:
        error = {"type": attempt.method, "message": attempt.error}
        finished.update(status="failed", error=error)
        score.update(status="failed", failure="trial", error=error)
    elif attempt.method in SCORING_FAILED:
        finished["status"] = "completed"
        score.update(status="failed", failure="metric", error={"type": attempt.method, "message": attempt.error})
    else:
        finished["status"] = "completed"
        score.update(status="completed", outputs=[{"name": k, "value": v} for k, v in attempt.rewards.items()])
    return [_event(finished, attempt.where), _event(score, attempt.where)]


def run_started(benchmark: Benchmark) -> InputEvent:
    """The benchmark's declarations: its problems, each with `nel`'s outputs seen in the run."""
    outputs: dict[str, None] = {PRIMARY: None}
    for attempt in benchmark.attempts:
        outputs.update(dict.fromkeys(attempt.rewards))
    problems = sorted({attempt.problem for attempt in benchmark.attempts})
    bundle = benchmark.bundle or {}
    named = bundle.get("benchmark", {}).get("name")
    labels = {"benchmark": named if isinstance(named, str) and named else benchmark.name}
    config = bundle.get("config")
    if not isinstance(config, dict):
        config = {}
    for label, value in (("model", config.get("model")), ("config_hash", bundle.get("config_hash"))):
        if isinstance(value, str) and value:
            labels[label] = value
    body: Row = {
        "schema_version": 1,
        "type": "run.started",
        "event_id": _id(benchmark, "started"),
        "run_id": benchmark.run_id,
        "labels": labels,
        "tasks": [
            {
                "task_id": _task_id(benchmark, problem),
                "metrics": [{"metric_type": METRIC, "outputs": [{"name": n, "kind": "continuous"} for n in outputs]}],
            }
            for problem in problems
        ],
    }
    repeats = bundle.get("benchmark", {}).get("repeats") if isinstance(bundle.get("benchmark"), dict) else None
    if isinstance(repeats, int) and not isinstance(repeats, bool) and repeats >= 1:
        body["attempts_per_task"] = repeats
    return _event(body, str(benchmark.path / "results.jsonl"))


def run_closed(benchmark: Benchmark) -> InputEvent | None:
    if not benchmark.finished:
        return None
    body = {
        "schema_version": 1,
        "type": "run.closed",
        "event_id": _id(benchmark, "closed"),
        "run_id": benchmark.run_id,
        "reason": "completed",
    }
    return _event(body, str(benchmark.path))


def _task_id(benchmark: Benchmark, problem: int) -> str:
    return f"{benchmark.name}/{problem}"


def _id(benchmark: Benchmark, *parts: str) -> str:
    return event_id("nel", benchmark.run_id, *parts)


def _nel_run_id(path: Path) -> str | None:
    file = path / "nel_run.json"
    if not file.exists():
        return None
    data = _json(file)
    run_id = data.get("run_id") if isinstance(data, dict) else None
    if not isinstance(run_id, str) or not run_id:
        raise SourceError(f"{file}: no `run_id` string; is this the nel_run.json `nel eval run` writes?")
    return run_id


def _bundle(directory: Path) -> Row | None:
    files = sorted(directory.glob("eval-*.json"))
    if not files:
        return None
    if len(files) > 1:
        names = ", ".join(file.name for file in files)
        raise SourceError(f"{directory}: several nel bundles ({names}); keep one run's output per directory")
    try:
        data = _json(files[0])
    except SourceError:
        return None  # nel writes the bundle in place: whole at the next look
    if not isinstance(data, dict) or not isinstance(data.get("benchmark"), dict):
        raise SourceError(f"{files[0]}: no `benchmark` object; is this a nel eval-*.json bundle?")
    return data


def _attempts_file(directory: Path) -> Path:
    """`results.jsonl`, or while nel has not written it (the benchmark runs, or was
    stopped), its live log."""
    results = directory / "results.jsonl"
    return results if results.exists() else directory / "verified_log.jsonl"


def _attempts(file: Path, *, partial_last_line: bool) -> list[Attempt]:
    if not file.exists():
        return []
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SourceError(f"{file}: cannot be read ({error})") from None
    lines = text.split("\n")
    if partial_last_line and lines and lines[-1]:
        lines = lines[:-1]  # a last line without its newline is still being written
    attempts: list[Attempt] = []
    seen: set[tuple[int, int]] = set()
    for where, row in json_lines(lines, file, f"is this nel's {file.name}?"):
        attempt = _attempt(row, where)
        if (attempt.problem, attempt.repeat) in seen:
            raise SourceError(f"{where}: problem {attempt.problem} repeat {attempt.repeat} is given twice")
        seen.add((attempt.problem, attempt.repeat))
        attempts.append(attempt)
    return attempts


def _attempt(row: dict[str, Any], where: str) -> Attempt:
    problem, repeat = _count(row, "problem_idx", where), _count({"repeat": 0, **row}, "repeat", where)
    reward = row.get("reward")
    if not isinstance(reward, int | float) or isinstance(reward, bool):
        raise SourceError(f"{where}: `reward` is not a number")
    details = row.get("scoring_details") or {}
    if not isinstance(details, dict):
        raise SourceError(f"{where}: `scoring_details` is not an object")
    rewards = {PRIMARY: float(reward), **_scorer_rewards(details)}
    return Attempt(
        where=where,
        problem=problem,
        repeat=repeat,
        rewards=rewards,
        method=str(details.get("method") or ""),
        error=str(details.get("error") or ""),
    )


def _count(row: Mapping[str, Any], field: str, where: str) -> int:
    value = row.get(field)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise SourceError(f"{where}: `{field}` is not a count (>= 0); is this a nel results line?")
    return value


def _scorer_rewards(details: Mapping[str, Any]) -> dict[str, float]:
    """Each scorer's reward by scorer name, from its entry in `scoring_details`."""
    rewards: dict[str, float] = {}
    for key, entry in details.items():
        if key.startswith(SCORER) and isinstance(entry, dict) and "error" not in entry:
            value = entry.get("reward")
            if isinstance(value, int | float) and not isinstance(value, bool):
                rewards[key.removeprefix(SCORER)] = float(value)
    return rewards


def _json(file: Path) -> Any:
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SourceError(f"{file}: cannot be read ({error})") from None
    try:
        return json_value(text, str(file))
    except json.JSONDecodeError as error:
        raise SourceError(f"{file}, line {error.lineno}: not valid JSON ({error.msg})") from None


def _event(body: Row, where: str) -> InputEvent:
    try:
        return from_object(body)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise SourceError(f"{where}: cannot be written as a v1 event ({problems})") from None
