"""`evalstream retry`: the tasks of a run a harness must run again."""

from __future__ import annotations

import argparse

from worker.commands.cli.arguments import Commands, command, connection_flags, settings_of, summaries_file_flag


def add(commands: Commands) -> None:
    parser = command(
        commands,
        "retry",
        "list, as JSON lines, the tasks of a run whose attempts are dead or missing, and how many each lacks",
        "evalstream retry run-7 --attempts-per-task 5",
        handle,
    )
    parser.description = (
        f"{parser.description}\nOne line per task: {{run_id, task_id, lacks, attempts_per_task, dead_trials, keys}};\n"
        "a harness runs `lacks` more trials of the task. attempts_per_task: --attempts-per-task, else the run's\n"
        "latest run.progress (expected trials / declared tasks), else exit 2. Trials the run's not_retried label\n"
        "names (Harbor's retry rule, written by its importer) are not counted as missing."
    )
    parser.add_argument("run_id", help="the run whose tasks to list")
    summaries_file_flag(parser)
    parser.add_argument(
        "--attempts-per-task", type=int, metavar="N", help="the attempts each task should have (default: the run's)"
    )
    connection_flags(parser)


def handle(args: argparse.Namespace) -> int:
    from worker.commands.retry import run

    return run(
        args.run_id, from_file=args.from_file, attempts_per_task=args.attempts_per_task, settings=settings_of(args)
    )
