"""`evalstream gate`: two runs compared, and a CI job failed when the candidate did worse."""

from __future__ import annotations

import argparse

from worker.commands.cli.arguments import Commands, command, connection_flags, settings_of, summaries_file_flag
from worker.failure import CommandError


def add(commands: Commands) -> None:
    parser = command(
        commands,
        "gate",
        "compare two runs' latest summaries task by task, and fail when the candidate did worse",
        "evalstream gate run-main run-pr-42 --max-regressions 2",
        handle,
    )
    parser.description = (
        f"{parser.description}\nPer pass@k key, on the tasks both runs have: per-task pass rates, their paired\n"
        "difference with a 95% interval (tasks as the unit), pass@1 and pass@k of both, verdicts that changed.\n\n"
        "Each key is PASS (a drop beyond THRESHOLD ruled out), WARN (a real drop within it), INCONCLUSIVE (the\n"
        "interval holds both 0 and -THRESHOLD; how many more paired tasks would decide is said) or BLOCK (a drop\n"
        "beyond it); the gate is its worst key. The interval: exact sign-flip below 20 paired tasks, Student's t\n"
        "from 20 on.\n\n"
        "exit codes: 0 PASS (and WARN, INCONCLUSIVE unless --fail-on names them); 1 no broker, no summaries\n"
        "topic, or no summary of a run in it yet; 2 bad usage or input; 3 BLOCK; 4 WARN with --fail-on warn;\n"
        "5 INCONCLUSIVE with --fail-on inconclusive\n\n"
        "--live: fold the candidate from the events topic as it runs, on an anytime-valid 95% confidence\n"
        "sequence: exit 3 once a key's lies wholly below -THRESHOLD, 0 (or WARN's) once every key's lies above\n"
        "it, or decide at the candidate's close: evalstream gate --live run-main run-pr-42"
    )
    parser.add_argument("baseline", help="run id of the baseline (e.g. the main branch's run)")
    parser.add_argument("candidate", help="run id of the candidate (the change under test)")
    summaries_file_flag(parser)
    parser.add_argument(
        "--key", action="append", help="a pass@k key to compare, e.g. reward.score (repeatable; default: all shared)"
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.0,
        help="the drop tolerated: fail when a key's interval lies wholly below -THRESHOLD (default 0)",
    )
    parser.add_argument(
        "--max-regressions", type=int, metavar="N", help="fail when a key has more than N tasks that got worse"
    )
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON instead of a table")
    parser.add_argument(
        "--format",
        choices=("json", "junit", "markdown"),
        help="print this report instead of the table (JUnit XML for CI test views, Markdown for a job summary)",
    )
    parser.add_argument(
        "--report",
        metavar="PATH",
        help="write the report (--format, or by the name: .json, .xml, .md) to PATH; the table still prints",
    )
    parser.add_argument(
        "--fail-on",
        action="append",
        default=[],
        choices=("warn", "inconclusive"),
        help="exit non-zero on this decision too (warn: 4, inconclusive: 5); repeatable",
    )
    parser.add_argument(
        "--live", action="store_true", help="decide while the candidate runs, from the events topic (see above)"
    )
    parser.add_argument(
        "--timeout", type=float, metavar="SECONDS", help="with --live: give up (exit 1) if nothing is decided by then"
    )
    parser.add_argument(
        "--on-decision",
        metavar="CMD",
        help="with --live: run CMD in a shell once decided, the decision as JSON on its stdin and in "
        "EVALSTREAM_GATE_* variables (e.g. to cancel the candidate's job)",
    )
    parser.add_argument(
        "--webhook",
        metavar="URL",
        help="with --live: post the decision to URL as JSON ({\"text\": ...}: Slack's and Teams' incoming webhooks "
        "show it)",
    )
    connection_flags(parser)


def handle(args: argparse.Namespace) -> int:
    from worker.commands.gate import Options, run

    options = Options(
        keys=args.key,
        threshold=args.threshold,
        max_regressions=args.max_regressions,
        as_json=args.json,
        fail_on=frozenset(args.fail_on),
        report_format=args.format,
        report=args.report,
    )
    if args.live:
        from worker.commands.gate_actions import Actions
        from worker.commands.gate_live import run_live

        return run_live(
            args.baseline,
            args.candidate,
            from_file=args.from_file,
            settings=settings_of(args),
            options=options,
            timeout=args.timeout,
            actions=Actions(command=args.on_decision, webhook=args.webhook),
        )
    if args.timeout is not None:
        raise CommandError("--timeout bounds the wait of --live; without --live the gate does not wait")
    if args.on_decision is not None or args.webhook is not None:
        raise CommandError(
            "--on-decision and --webhook act on the live gate's decision: use them with --live "
            "(without it, act on the exit code)"
        )
    return run(args.baseline, args.candidate, from_file=args.from_file, settings=settings_of(args), options=options)
