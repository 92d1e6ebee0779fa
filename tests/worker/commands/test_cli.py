"""Every command run as a user runs it (a subprocess), against each failure it can meet:
the message names what failed and what to do, the exit code says which kind of failure
(2 bad usage or input, 1 an environment that is not there), and stderr holds no
traceback and none of the Kafka client's own noise."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import pytest

from projections.storage import VERSION as STORAGE_VERSION
from tests.projections.examples import EXAMPLE_LOG
from worker import failure
from worker.commands.cli.main import parser
from worker.local.processes import free_port, isolated_settings
from worker.runtime.topics import ensure_topics

NOISE = ("Traceback", "Unclosed", "Unable connect", "object at 0x")
MISSING = "/nonexistent/log.jsonl"
UNREACHABLE_PORT = free_port()
UNREACHABLE = f"127.0.0.1:{UNREACHABLE_PORT}"  # nothing listens there
HARBOR_JOB = Path(__file__).parents[2] / "fixtures" / "harbor" / "job-mixed"


def evalstream(
    *args: str, stdin: bytes = b"", timeout: float = 120, env: dict[str, str] | None = None
) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )
    return done.returncode, done.stderr.decode()


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    code: int
    says: tuple[str, ...]
    stdin: bytes = b""

    def check(self, *extra: str) -> None:
        code, stderr = evalstream(*self.args, *extra, stdin=self.stdin)
        assert code == self.code, stderr
        for phrase in self.says:
            assert phrase in stderr
        for noise in NOISE:
            assert noise not in stderr


def unreachable(*args: str) -> Case:
    return Case(
        (*args, "--bootstrap", UNREACHABLE),
        1,
        (f"cannot reach a Kafka broker at {UNREACHABLE}", f"`evalstream broker start --port {UNREACHABLE_PORT}`"),
    )


CASES = {
    "replay a missing file": Case(("replay", MISSING), 2, (f"evalstream replay: cannot read {MISSING}", "- for stdin")),
    "replay a directory": Case(("replay", "/tmp"), 2, ("cannot read /tmp: Is a directory",)),
    "replay without a log": Case(("replay",), 2, ("pass a JSONL event log, - for stdin, or --from-topic",)),
    "replay a file and the topic": Case(("replay", "x", "--from-topic"), 2, ("not both",)),
    "replay --run without the topic": Case(("replay", "x", "--run", "r"), 2, ("--run is for --from-topic",)),
    "replay a bad line": Case(("replay", "-"), 0, ("line 2: not-json:", "1 skipped"), stdin=b"\n garbage\n"),
    "replay with no jobs": Case(("replay", "-", "--jobs", "0"), 2, ("argument --jobs: invalid positive value: '0'",)),
    "digest a missing file": Case(("digest", MISSING), 2, (f"evalstream digest: cannot read {MISSING}",)),
    "digest a bad line": Case(("digest",), 2, ("stdin line 2: not JSON", "evalstream replay"), stdin=b"\ngarbage\n"),
    "digest an input event": Case(
        ("digest", "-"), 2, ("stdin line 1: not a run.summary or run.progress event",), stdin=EXAMPLE_LOG.read_bytes()
    ),
    "publish a missing file": Case(("publish", MISSING), 2, (f"evalstream publish: cannot read {MISSING}",)),
    "import a missing job": Case(("import", "harbor", MISSING), 2, (f"evalstream import: {MISSING}",)),
    "import --as-recorded of harbor": Case(("import", "harbor", "x", "--as-recorded"), 2, ("NeMo bundles only",)),
    "import an unknown source": Case(("import", "lm-eval", "x"), 2, ("invalid choice: 'lm-eval'",)),
    "schema into a file": Case(("schema", str(EXAMPLE_LOG)), 2, (f"cannot write into {EXAMPLE_LOG}",)),
    "simulate no tasks": Case(("simulate", "--tasks", "0"), 2, ("argument --tasks: invalid positive value",)),
    "an unknown command": Case(("serve",), 2, ("invalid choice: 'serve'",)),
    "broker, no action": Case(("broker",), 2, ("evalstream broker", "the following arguments are required")),
    "worker, no broker": unreachable("worker"),
    "publish, no broker": unreachable("publish", "-"),
    "import --publish of a missing job, no broker": Case(
        ("import", "harbor", MISSING, "--publish", "--bootstrap", UNREACHABLE), 2, (MISSING,)
    ),
    "import --publish, no broker": unreachable("import", "harbor", str(HARBOR_JOB), "--publish"),
    "follow a missing job": Case(
        ("follow", "harbor", MISSING), 2, (f"evalstream follow: {MISSING}: no such directory",)
    ),
    "follow, no broker": unreachable("follow", "harbor", str(HARBOR_JOB)),
    "summaries, no broker": unreachable("summaries"),
    "simulate, no broker": unreachable("simulate"),
    "watch, no broker": unreachable("watch", "run-7"),
    "replay --from-topic, no broker": unreachable("replay", "--from-topic"),
    "gate, no broker": unreachable("gate", "run-main", "run-pr"),
    "dashboard, no broker": unreachable("dashboard", "--port", "0"),
    "dashboard on a bad port": Case(("dashboard", "--port", "x"), 2, ("argument --port: invalid int value",)),
    "gate a missing file": Case(
        ("gate", "a", "b", "--from-file", MISSING), 2, (f"evalstream gate: cannot read {MISSING}", "summaries JSONL")
    ),
    "gate with a negative threshold": Case(("gate", "a", "b", "--threshold", "-1"), 2, ("the drop tolerated, >= 0",)),
    "history, no broker": unreachable("history", "--label", "benchmark=b"),
    "history a missing file": Case(
        ("history", "--from-file", MISSING), 2, (f"evalstream history: cannot read {MISSING}", "summaries")
    ),
    "history with a bad label": Case(("history", "--label", "model"), 2, ("--label 'model' is not NAME=VALUE",)),
    "history of an input event log": Case(
        ("history", "--from-file", "-"), 2, ("stdin line 1: not an output record",), stdin=EXAMPLE_LOG.read_bytes()
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_failing_command_says_what_and_what_to_do(case: Case) -> None:
    case.check()


@pytest.mark.parametrize(("setting", "value"), [("CACHE_MB", "lots"), ("PROGRESS_INTERVAL", "0,2")])
def test_a_setting_that_is_not_a_number_is_named(setting: str, value: str) -> None:
    code, stderr = evalstream("worker", "--bootstrap", UNREACHABLE, env={f"EVALSTREAM_{setting}": value})
    assert code == 2
    assert f"evalstream worker: EVALSTREAM_{setting} is {value!r}, which is not a" in stderr
    assert "unset it" in stderr
    for noise in NOISE:
        assert noise not in stderr


def test_debug_shows_the_traceback() -> None:
    code, stderr = evalstream("replay", "--from-topic", "--bootstrap", UNREACHABLE, "--debug")
    assert code == 1
    assert "Traceback" in stderr
    assert "KafkaConnectionError" in stderr


def commands() -> list[str]:
    subparsers = parser()._subparsers
    assert subparsers is not None
    choices = subparsers._group_actions[0].choices
    assert isinstance(choices, dict)
    return sorted(choices)


@pytest.mark.parametrize("command", commands())
def test_every_command_has_help_with_an_example(command: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", command, "--help"], capture_output=True, check=False
    )
    assert done.returncode == 0
    shown = done.stdout.decode()
    assert shown.startswith(f"usage: evalstream {command}")
    examples = [line for line in shown.splitlines() if line.startswith("example: ")]
    assert len(examples) == 1
    assert f"evalstream {command}" in examples[0]


def test_version_names_the_package_the_contract_and_the_store() -> None:
    done = subprocess.run([sys.executable, "-m", "worker.commands.cli", "--version"], capture_output=True, check=False)
    assert done.returncode == 0
    assert done.stdout.decode().strip() == (
        f"evalstream {version('evalstream')} (event contract version 1, storage version {STORAGE_VERSION})"
    )


@pytest.mark.kafka
def test_what_is_not_there_on_a_running_broker_is_named(bootstrap: str, tmp_path: Path) -> None:
    settings = isolated_settings(bootstrap)
    flags = (
        *("--bootstrap", bootstrap, "--progress-topic", settings.progress_topic),
        *("--summaries-topic", settings.summaries_topic, "--events-topic", settings.events_topic),
    )
    missing = f"no topic '{settings.summaries_topic}' at {bootstrap}"
    Case(("summaries", *flags), 1, (missing, "start the worker")).check()
    Case(("replay", "--from-topic", *flags), 1, (f"no topic '{settings.events_topic}' at {bootstrap}",)).check()
    Case(("gate", "a", "b", *flags), 1, (missing, "--from-file")).check()
    Case(("watch", "run-7", "--timeout", "1", *flags), 1, ("waiting for progress of run 'run-7'", "after 1 s")).check()
    asyncio.run(ensure_topics(settings))
    Case(("summaries", "--run", "nope", *flags), 1, ("no summary of run 'nope'",)).check()
    Case(("watch", "nope", "--timeout", "1", *flags), 1, ("no progress of run 'nope'", "in 1 s")).check()
    Case(("gate", "nope", "nada", *flags), 1, ("no summary of run 'nope' and 'nada' in topic",)).check()


@pytest.mark.parametrize(
    ("bootstrap", "secure", "says"),
    [
        ("127.0.0.1:19092", False, "Start one with `evalstream broker start --port 19092`"),
        ("localhost:9093,localhost:9095", False, "Start one with `evalstream broker start --port 9093`"),
        ("localhost", False, "Start one with `evalstream broker start --port 9092`"),
        ("127.0.0.1:29094", True, "Start one with `evalstream broker start --secure --port 29094`"),
        ("kafka.internal:9092", False, "Check that a broker runs at kafka.internal:9092 and that this machine"),
    ],
)
def test_the_unreachable_broker_hint_is_for_the_address_asked(bootstrap: str, secure: bool, says: str) -> None:
    said = failure.unreachable(bootstrap, secure=secure)
    assert said.startswith(f"cannot reach a Kafka broker at {bootstrap} (the connection failed). ")
    assert says in said
