"""Every client over SASL_SSL against a real secured broker (`broker start --secure`, started
for the session from nothing): SCRAM over TLS with client certificates, users with ACLs.

The worker folds a log to what replay prints; the read-only user follows summaries and
progress and is refused when it publishes; each refusal (a wrong password, an untrusted CA,
no client certificate, another protocol, a topic without an ACL) ends at once in a sentence
naming it, exit 1. No output any of it gave, nor the logs, holds a password."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import SaslAuthenticationFailed
from aiokafka.protocol.admin import CreateAclsRequest

from events.clients.recorder import RunRecorder
from events.clients.subscriber import SummarySubscriber
from events.codec import encode
from events.models import InputEvent
from tests import builders
from tests.projections.examples import EXAMPLE_LOG
from tests.worker.commands.test_cli import NOISE
from tests.worker.runtime.test_worker_kafka import by_run, replayed
from worker.commands.clients import publish
from worker.local import certs, secured
from worker.local.broker import BrokerConfig
from worker.local.processes import WorkerProcess, free_port, isolated_settings, topic_flags
from worker.local.records import read_topic
from worker.runtime.topics import ensure_topics
from worker.settings import Settings

pytestmark = pytest.mark.kafka

WRONG = "not-the-Password-42"


@dataclass(frozen=True)
class Secured:
    broker: BrokerConfig
    settings: Settings
    """Topics of this module's own, as no user."""
    other_ca: Path
    """A CA that signed nothing of this broker's."""
    outputs: list[str] = field(default_factory=list)
    """Everything the commands run here printed."""

    def user(self, name: str) -> Settings:
        return self.settings.with_overrides(security=secured.security(self.broker.state_dir, name))

    @property
    def secrets(self) -> list[str]:
        return [*secured.passwords(self.broker.state_dir).values(), WRONG]

    def run(self, user: str, *args: str, timeout: float = 60, **variables: str) -> subprocess.CompletedProcess[str]:
        """`evalstream ARGS` as `user` on this module's topics, with `variables` (EVALSTREAM_*
        without the prefix) changed; its output holds no password."""
        settings = self.user(user)
        env = {key: value for key, value in os.environ.items() if not key.startswith("EVALSTREAM_")}
        env |= settings.security.env() | {f"EVALSTREAM_{key}": value for key, value in variables.items()}
        done = subprocess.run(
            [sys.executable, "-m", "worker.commands.cli", *args, *topic_flags(settings)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        self.outputs.append(done.stdout + done.stderr)
        assert not [secret for secret in self.secrets if secret in done.stdout + done.stderr]
        return done


@pytest.fixture(scope="module")
def cluster(secure_broker: BrokerConfig, tmp_path_factory: pytest.TempPathFactory) -> Secured:
    other = certs.authority(tmp_path_factory.mktemp("other-ca"), "some other CA")
    return Secured(secure_broker, isolated_settings(secure_broker.bootstrap), other.cert)


@pytest.fixture(scope="module")
def secured_worker(cluster: Secured, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    settings = cluster.user("worker")
    asyncio.run(ensure_topics(settings))
    # At debug level: aiokafka logs the SASL handshake there, which must not show the password.
    process = WorkerProcess(settings, tmp_path_factory.mktemp("secured-worker"), loglevel="debug")
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()
        print(process.log()[-3000:], file=sys.stderr)  # shown when a test failed


def test_the_worker_folds_a_log_over_scram_and_tls_to_what_replay_prints(
    cluster: Secured, secured_worker: WorkerProcess
) -> None:
    published = cluster.run("producer", "publish", str(EXAMPLE_LOG))
    assert published.returncode == 0, published.stderr
    assert "published 678 messages" in published.stderr
    expected = replayed(EXAMPLE_LOG.read_bytes().splitlines())
    reader = cluster.user("reader")
    got = read_topic(reader, reader.summaries_topic, until=len(expected), timeout=90)
    assert by_run([record.value for record in got]) == by_run(expected)


def test_a_harness_records_and_a_service_subscribes_as_their_own_users(
    cluster: Secured, secured_worker: WorkerProcess
) -> None:
    producer, reader = cluster.user("producer"), cluster.user("reader")
    spec = builders.task_spec("t", {"reward.score": "continuous"})
    options = producer.security.options()
    with RunRecorder("recorded", bootstrap=producer.bootstrap, topic=producer.events_topic, **options) as run:
        sent = [run.started([spec], attempts_per_task=2), run.score("t", "t-1", "reward", {"score": 1.0})]
        sent.extend(run.trial_died("t", "t-2", metrics=["reward"], error_type="AgentCrash"))
        sent.append(run.closed())
    [expected] = replayed([encode(event) for event in sent])
    subscriber = SummarySubscriber(
        bootstrap=reader.bootstrap, topic=reader.summaries_topic, run_ids=["recorded"], **reader.security.options()
    )
    deadline = time.monotonic() + 60
    with subscriber:
        while not (latest := subscriber.latest()) and time.monotonic() < deadline:
            time.sleep(0.2)
    assert latest["recorded"].model_dump(mode="json") == orjson.loads(expected)


def test_a_harness_with_a_wrong_password_is_told_so(cluster: Secured) -> None:
    producer = cluster.user("producer")
    options = {**producer.security.options(), "sasl_plain_password": WRONG}
    with (
        pytest.raises(SaslAuthenticationFailed, match="invalid credentials"),
        RunRecorder("refused", bootstrap=producer.bootstrap, topic=producer.events_topic, **options),
    ):
        pass


def test_the_read_only_user_follows_summaries_and_progress_and_may_not_publish(
    cluster: Secured, secured_worker: WorkerProcess
) -> None:
    simulated = cluster.run("producer", "simulate", "--run-id", "followed", "--tasks", "3", "--attempts", "2")
    assert simulated.returncode == 0, simulated.stderr
    watched = cluster.run("reader", "watch", "followed", "--timeout", "60")
    assert watched.returncode == 0, watched.stderr
    assert "followed [closed]" in watched.stdout
    assert "6/6 trials" in watched.stdout
    followed = cluster.run("reader", "summaries", "--run", "followed")
    assert followed.returncode == 0, followed.stderr
    assert [orjson.loads(line)["run_id"] for line in followed.stdout.splitlines()] == ["followed"]
    refused = cluster.run("reader", "publish", str(EXAMPLE_LOG))
    assert refused.returncode == 1
    assert f"not authorised for topic '{cluster.settings.events_topic}': user 'reader'" in refused.stderr


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_every_mechanism_signs_in(cluster: Secured, secured_worker: WorkerProcess, mechanism: str) -> None:
    done = cluster.run("reader", "summaries", SASL_MECHANISM=mechanism)
    assert done.returncode == 0, done.stderr


@dataclass(frozen=True)
class Refusal:
    user: str
    args: tuple[str, ...]
    says: tuple[str, ...]
    """Phrases of the message; {events}, {summaries}, {deadletter} stand for this module's
    topics (here and in `variables`), {other_ca} for a CA that signed nothing of the broker's."""
    variables: dict[str, str] = field(default_factory=dict)


NO_CLIENT_CERTIFICATE = {"SSL_CERTFILE": "", "SSL_KEYFILE": ""}
AUTHENTICATION_FAILED = ("authentication failed for user", "(SCRAM-SHA-512)", "EVALSTREAM_SASL_PASSWORD")
UNTRUSTED = ("certificate not trusted: the TLS certificate of the broker at", "Set EVALSTREAM_SSL_CAFILE")
REFUSALS = {
    "a wrong password": Refusal("reader", ("summaries",), AUTHENTICATION_FAILED, {"SASL_PASSWORD": WRONG}),
    "a wrong password, publishing": Refusal(
        "producer", ("publish", str(EXAMPLE_LOG)), AUTHENTICATION_FAILED, {"SASL_PASSWORD": WRONG}
    ),
    "a wrong password, the worker": Refusal("worker", ("worker",), AUTHENTICATION_FAILED, {"SASL_PASSWORD": WRONG}),
    "an unknown user": Refusal("reader", ("watch", "x"), ("user 'nobody'",), {"SASL_USERNAME": "nobody"}),
    "an untrusted CA": Refusal(
        "reader",
        ("summaries",),
        (*UNTRUSTED, "(self-signed certificate in certificate chain)"),
        {"SSL_CAFILE": "{other_ca}"},
    ),
    "the system's CAs": Refusal(
        "producer", ("publish", "-"), (*UNTRUSTED, "against the system's CAs"), {"SSL_CAFILE": ""}
    ),
    "no client certificate": Refusal(
        "producer",
        ("simulate",),
        (
            "refused this client's TLS certificate",
            "none given",
            "Set EVALSTREAM_SSL_CERTFILE and EVALSTREAM_SSL_KEYFILE",
        ),
        NO_CLIENT_CERTIFICATE,
    ),
    "a plaintext client": Refusal(
        "reader",
        ("summaries",),
        ("closed the connection before answering", "EVALSTREAM_SECURITY_PROTOCOL=PLAINTEXT"),
        {"SECURITY_PROTOCOL": "PLAINTEXT", "SSL_CAFILE": "", **NO_CLIENT_CERTIFICATE},
    ),
    "the reader reads events": Refusal(
        "reader", ("replay", "--from-topic"), ("not authorised for topic '{events}': user 'reader' may not use it",)
    ),
    "the producer reads summaries": Refusal(
        "producer", ("gate", "a", "b"), ("not authorised for topic '{summaries}': user 'producer'",)
    ),
    "the reader runs a worker": Refusal(
        "reader",
        ("worker",),
        (
            "not authorised for topics '{archive}', '{changelog}', '{deadletter}', '{events}'",
            "may neither see nor create",
        ),
    ),
}


@pytest.mark.parametrize("refusal", REFUSALS.values(), ids=REFUSALS.keys())
def test_a_refused_client_is_told_why_at_once(
    cluster: Secured, secured_worker: WorkerProcess, refusal: Refusal, tmp_path: Path
) -> None:
    topics = cluster.settings
    names = {
        **{"events": topics.events_topic, "summaries": topics.summaries_topic, "deadletter": topics.deadletter_topic},
        "archive": Settings().archive_topic,  # the commands run under the default app id
        "changelog": Settings().changelog_topic,
        "other_ca": str(cluster.other_ca),
    }
    variables = {key: value.format(**names) for key, value in refusal.variables.items()}
    extra = ("--data-dir", str(tmp_path), "--web-port", str(free_port())) if refusal.args[0] == "worker" else ()
    began = time.monotonic()
    done = cluster.run(refusal.user, *refusal.args, *extra, timeout=60, **variables)
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - began < 30  # told, not retried
    for phrase in refusal.says:
        assert phrase.format(**names) in done.stderr
    for noise in NOISE:
        assert noise not in done.stderr


def test_no_log_line_and_no_page_of_the_worker_holds_a_secret(cluster: Secured, secured_worker: WorkerProcess) -> None:
    assert cluster.outputs  # the commands above ran, and each was checked as it ended
    shown = [secured_worker.log(), cluster.broker.log_path.read_text(errors="replace")]
    for page in ("/ready", "/live", "/metrics"):  # all the worker serves
        shown.append(secured_worker.get(page)[1])
    assert "Authenticated as worker via SCRAM-SHA-512" in shown[0]  # a real scan of a debug-level log
    for text in shown:
        assert not [secret for secret in cluster.secrets if secret in text]


def test_the_brokers_secrets_are_its_owners_only_and_on_no_command_line(cluster: Secured) -> None:
    state = cluster.broker.state_dir
    private = [state / "users.json", state / "server.properties", *state.glob("*.env"), *state.glob("tls/*.key")]
    assert len(private) == 2 + len(secured.USERS) + 3  # the CA's key, the broker's, the client's
    assert {path.name: path.stat().st_mode & 0o777 for path in private} == {path.name: 0o600 for path in private}
    assert not (state / "format.args").exists()  # the SCRAM passwords were handed to the formatter in it
    pid = cluster.broker.pid_path.read_text().strip()
    command_line = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    assert "kafka.Kafka" in command_line
    assert not [secret for secret in cluster.secrets if secret in command_line]


def test_a_worker_missing_a_grant_stops_before_it_consumes_naming_the_grant(cluster: Secured) -> None:
    """An ACL that denies the worker's user WRITE on its summaries topic: the worker stops
    at start, exit 1, naming the operation and the topic (the broker's own word on what the
    user may do, KIP-430), before it reads any event."""
    settings = cluster.user("worker").with_overrides(
        summaries_topic=f"{cluster.settings.summaries_topic}-denied", app_id=f"{cluster.settings.app_id}-denied"
    )
    asyncio.run(ensure_topics(settings))
    asyncio.run(_deny_write(cluster.broker, settings.summaries_topic))
    env = {key: value for key, value in os.environ.items() if not key.startswith("EVALSTREAM_")}
    env |= settings.security.env() | {"EVALSTREAM_APP_ID": settings.app_id}
    data_dir = str(cluster.broker.state_dir / "denied-worker")
    done = subprocess.run(
        [sys.executable, "-m", "worker.commands.cli", "worker", *topic_flags(settings), "--data-dir", data_dir],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"WRITE on topic {settings.summaries_topic!r}" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


async def _deny_write(broker: BrokerConfig, topic: str) -> None:
    """As admin: an ACL denying the worker's user WRITE on `topic` (a deny beats every allow)."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=broker.bootstrap, **secured.security(broker.state_dir, "admin").options()
    )
    await admin.start()
    try:
        literal, deny = 3, 2
        request = CreateAclsRequest(secured.TOPIC, topic, literal, "User:worker", "*", secured.WRITE, deny)
        response = await admin._client.send(admin._client.get_random_node(), request)
        assert [code for code, _ in response.creation_responses] == [0]
    finally:
        await admin.close()


def test_an_output_topic_that_becomes_unwritable_is_a_refusal_of_its_outputs_and_the_rest_lands(
    cluster: Secured, tmp_path: Path
) -> None:
    """WRITE on the summaries topic taken from a running worker: the broker will not add that
    topic to the next transaction (AddPartitionsToTxn answers TopicAuthorizationFailed for it
    alone, and aiokafka sends the rest and fails the transaction). The summary is
    dead-lettered as refused, naming the topic; the run's progress is committed; the worker
    goes on."""
    suffix = "-revoked"
    settings = cluster.user("worker").with_overrides(
        summaries_topic=f"{cluster.settings.summaries_topic}{suffix}",
        progress_topic=f"{cluster.settings.progress_topic}{suffix}",
        deadletter_topic=f"{cluster.settings.deadletter_topic}{suffix}",
        events_topic=f"{cluster.settings.events_topic}{suffix}",
        app_id=f"{cluster.settings.app_id}{suffix}",
        web_port=free_port(),  # not the module's worker's
    )
    asyncio.run(ensure_topics(settings))
    worker = WorkerProcess(settings, tmp_path / "worker")
    try:
        worker.wait_serving()
        asyncio.run(_deny_write(cluster.broker, settings.summaries_topic))
        events = [*_one_run("revoked")]
        asyncio.run(publish(settings, [encode(event) for event in events]))
        [letter] = read_topic(settings, settings.deadletter_topic, until=1, timeout=60)
        assert letter.key == b"revoked"
        assert letter.headers["evalstream.reason"] == b"output-refused"
        assert "TopicAuthorizationFailed" in letter.headers["evalstream.detail"].decode()
        [expected] = replayed([encode(event) for event in events])
        assert letter.value == expected
        progress = read_topic(settings, settings.progress_topic, until=1, timeout=30)
        assert {record.key for record in progress} == {b"revoked"}
        assert worker.process.poll() is None, "the worker stopped"
    finally:
        worker.stop()
        print(worker.log()[-3000:], file=sys.stderr)


def _one_run(run_id: str) -> list[InputEvent]:
    spec = builders.task_spec("t")
    return [builders.started(run_id, [spec]), builders.trial("t", "t-1", run_id=run_id), builders.closed(run_id)]
