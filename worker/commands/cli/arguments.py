"""What every command's parser shares: the sub-command itself (its --help, its example, --debug),
the connection flags, the summaries-file flag, the number types, and the settings they make."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import TypeAlias

from worker.settings import Settings

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Handler = Callable[[argparse.Namespace], int]
EVENT_LOG = "a JSONL event log"


def command(commands: Commands, name: str, summary: str, example: str, handler: Handler) -> argparse.ArgumentParser:
    """A sub-command with its own --help (ending in an example line) and --debug."""
    parser = commands.add_parser(
        name,
        help=summary,
        description=summary[0].upper() + summary[1:] + ".",
        epilog=f"example: {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure (env EVALSTREAM_DEBUG=1)")
    parser.set_defaults(handler=handler)
    return parser


def settings_of(args: argparse.Namespace) -> Settings:
    """The environment's settings, with the flags given on the command line over them."""
    return Settings().with_overrides(**vars(args))


def publishing_settings(args: argparse.Namespace) -> Settings:
    """`settings_of(args)`, once the events topic is there (made if missing): for the commands
    that publish events."""
    from worker.runtime.topics import ensure_topics

    settings = settings_of(args)
    asyncio.run(ensure_topics(settings, needed=[settings.events_topic]))
    return settings


# argparse names the type in its message ("invalid positive value: '0'"), hence these names.
def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def natural(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def connection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap",
        help="Kafka bootstrap servers (env EVALSTREAM_BOOTSTRAP, default 127.0.0.1:9092); a secured cluster's TLS "
        "and SASL settings come from EVALSTREAM_SECURITY_PROTOCOL, _SASL_* and _SSL_* "
        '(docs/operations.md, "Secured clusters")',
    )
    parser.add_argument("--events-topic", help="env EVALSTREAM_EVENTS_TOPIC (default evalstream.events)")
    parser.add_argument("--summaries-topic", help="env EVALSTREAM_SUMMARIES_TOPIC (default evalstream.summaries)")
    parser.add_argument("--progress-topic", help="env EVALSTREAM_PROGRESS_TOPIC (default evalstream.progress)")
    parser.add_argument("--deadletter-topic", help="env EVALSTREAM_DEADLETTER_TOPIC (default evalstream.deadletter)")
    parser.add_argument(
        "--partitions", type=positive, help="partitions of the topics it creates (env EVALSTREAM_PARTITIONS)"
    )


def summaries_file_flag(parser: argparse.ArgumentParser) -> None:
    """--from-file: the commands that read summaries read them from a file instead of the topic."""
    parser.add_argument(
        "--from-file", metavar="PATH", help="read summaries JSONL (as `evalstream replay` prints; - for stdin)"
    )
