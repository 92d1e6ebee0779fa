"""What `gate --live` does with its decision besides printing it: run a command
(`--on-decision`), post to a webhook (`--webhook`), or both, once, after the decision line.

The command runs in a shell with the decision record (the JSON line `--json` prints) on its
stdin and these variables in its environment:

| variable | value |
|---|---|
| EVALSTREAM_GATE_DECISION | block, pass, warn or inconclusive |
| EVALSTREAM_GATE_PASSED | true, or false for block |
| EVALSTREAM_GATE_EXIT_CODE | the gate's exit code |
| EVALSTREAM_GATE_BASELINE, EVALSTREAM_GATE_CANDIDATE | the two run ids |
| EVALSTREAM_GATE_REASON | the decision's sentence |

Its output goes to the gate's stderr, so that the gate's stdout stays its own (JSON lines with
`--json`). The webhook gets `worker.webhook.chat_body`: the decision line as `text`, the record
as `evalstream`. An action that fails (a command's non-zero exit, a webhook that never took the
message) is reported on stderr and leaves the exit code alone: the code is the decision's, which
a CI job acts on; the report says what to do.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from typing import Any, TextIO

import orjson

from worker.failure import CommandError
from worker.webhook import WebhookFailed, chat_body, checked_url, post


@dataclass(frozen=True)
class Actions:
    command: str | None = None
    webhook: str | None = None

    def check(self) -> None:
        if self.command is not None and not self.command.strip():
            raise CommandError("--on-decision is empty: give the command to run, e.g. --on-decision 'kill -INT $PID'")
        if self.webhook is not None:
            checked_url(self.webhook, "--webhook")

    def __bool__(self) -> bool:
        return self.command is not None or self.webhook is not None


def environment(record: dict[str, Any], code: int) -> dict[str, str]:
    return {
        "EVALSTREAM_GATE_DECISION": str(record["decision"]),
        "EVALSTREAM_GATE_PASSED": "true" if record["passed"] else "false",
        "EVALSTREAM_GATE_EXIT_CODE": str(code),
        "EVALSTREAM_GATE_BASELINE": str(record["baseline"]),
        "EVALSTREAM_GATE_CANDIDATE": str(record["candidate"]),
        "EVALSTREAM_GATE_REASON": str(record["reason"]),
    }


async def act(actions: Actions, record: dict[str, Any], text: str, code: int, err: TextIO = sys.stderr) -> list[str]:
    """Run the command and post to the webhook at once; returns what failed (also written to `err`)."""
    jobs = []
    if actions.command is not None:
        jobs.append(_run(actions.command, record, code, err))
    if actions.webhook is not None:
        jobs.append(_post(actions.webhook, record, text))
    failed = [failure for failure in await asyncio.gather(*jobs) if failure is not None]
    for failure in failed:
        err.write(f"evalstream gate: {failure}; the decision stands (exit {code})\n")
    err.flush()
    return failed


async def _run(command: str, record: dict[str, Any], code: int, err: TextIO) -> str | None:
    try:
        process = await asyncio.create_subprocess_shell(
            command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, **environment(record, code)},
        )
    except OSError as error:
        return f"--on-decision could not start a shell: {error}"
    output, _ = await process.communicate(orjson.dumps(record) + b"\n")
    if output:
        err.write(output.decode(errors="replace"))
    if process.returncode != 0:
        return f"--on-decision {command!r} exited {process.returncode}: see its output above"
    return None


async def _post(url: str, record: dict[str, Any], text: str) -> str | None:
    try:
        await post(url, chat_body(text, record))
    except WebhookFailed as error:
        return f"--webhook: {error}"
    return None
