"""The worker's log, as a file wants it: `[time] [pid] [LEVEL] logger: message` a record.

- No terminal control codes: a record's control characters (a producer's run id, an error
  message with a terminal escape) are written escaped (`\\x1b`); a traceback's newlines and
  tabs stay. faust's start-up spinner, which writes backspaces and cursor codes to stdout
  whether or not it is a terminal, is the caller's to turn off (`faust.Worker.spinner`).
- aiokafka logs a failed coordinator lookup at ERROR and retries it. While a fresh group's
  coordinator is elected (a new cluster, a new app id) the broker answers
  GroupCoordinatorNotAvailable: normal, so that record is INFO.
- When a producer's sender loop dies (a coordinator that forgot an idle transactional id, a
  connection lost during a coordinator lookup), aiokafka logs its traceback and fails every
  pending batch with it; the worker sorts that failure and says what it does about it
  (`worker.runtime.engine`). So the sender's record is one WARNING line naming the cause,
  and asyncio's "Future exception was never retrieved" for those batches' inner futures,
  which nobody can retrieve, is dropped.
"""

from __future__ import annotations

import logging
import re
from typing import Final

from aiokafka.errors import GroupCoordinatorNotAvailableError, KafkaError

FORMAT: Final = "[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s"

_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 and C1 control characters but newline and tab."""


class Plain(logging.Formatter):
    """`FORMAT`, its control characters escaped."""

    def format(self, record: logging.LogRecord) -> str:
        return _CONTROL.sub(lambda found: repr(found.group())[1:-1], super().format(record))


def forming_group(record: logging.LogRecord) -> bool:
    """Filter: a coordinator lookup that failed because the group is still forming becomes
    INFO, and is dropped where the log's level is above INFO."""
    if (
        record.levelno == logging.ERROR
        and record.name == "aiokafka.consumer.group_coordinator"
        and isinstance(record.args, tuple)
        and record.args
        and isinstance(record.args[0], GroupCoordinatorNotAvailableError)
    ):
        record.levelno, record.levelname = logging.INFO, "INFO"
        return logging.getLogger().isEnabledFor(logging.INFO)
    return True


def sender_stopped(record: logging.LogRecord) -> bool:
    """Filter: aiokafka's sender loop dying is one line with its cause, not a traceback; the
    never-retrieved Kafka errors of its batches are dropped."""
    error = record.exc_info[1] if record.exc_info else None
    if record.name == "aiokafka.producer.sender" and error is not None:
        record.msg, record.args = "a producer's sender stopped: %r; its pending records fail with it", (error,)
        record.exc_info = record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True
    return not (
        record.name == "asyncio"
        and isinstance(error, KafkaError)
        and str(record.msg).startswith("Future exception was never retrieved")
    )


def setup(level: str) -> None:
    """The root logger at `level` (a name: INFO, DEBUG, ...), writing `Plain` lines to stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(Plain(FORMAT))
    handler.addFilter(forming_group)
    handler.addFilter(sender_stopped)
    logging.basicConfig(level=level, handlers=[handler])
