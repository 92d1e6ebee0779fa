"""What a command that failed tells its user: the sentence after the command's name, and the
exit code (`worker.failure`: 2 bad usage or input, 1 an environment that is not there)."""

from __future__ import annotations

import argparse

from aiokafka.errors import KafkaConnectionError, KafkaError

from events.clients.security import SecurityError
from events.importers.source import SourceError
from worker.commands.cli.arguments import settings_of
from worker.commands.refused import refusal
from worker.failure import ENVIRONMENT, USAGE, CommandError, topic_missing, unreachable


def explained(error: Exception, args: argparse.Namespace) -> tuple[str, int]:
    """What to tell the user about `error`, and the exit code."""
    from events.clients.kafka import TopicMissing
    from projections.step import RollbackFailed

    if isinstance(error, CommandError):
        return str(error), error.code
    if isinstance(error, RollbackFailed):
        return f"stopped: {error}", ENVIRONMENT
    if isinstance(error, SourceError | SecurityError):
        return str(error), USAGE
    settings = settings_of(args)
    if (refused := refusal(error, settings)) is not None:
        return refused, ENVIRONMENT
    if isinstance(error, KafkaConnectionError):
        return unreachable(settings.bootstrap, secure=settings.security.protocol != "PLAINTEXT"), ENVIRONMENT
    if isinstance(error, TopicMissing):
        missing = topic_missing(error.topic, settings.bootstrap)
        return str(missing), missing.code
    if isinstance(error, KafkaError):
        return f"Kafka at {settings.bootstrap} refused: {error}", ENVIRONMENT
    return (
        f"unexpected {type(error).__name__}: {error}. This is a bug in evalstream: rerun with --debug for the "
        "traceback and report it.",
        ENVIRONMENT,
    )
