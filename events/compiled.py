"""The recogniser compiled from Rust (`events/native`), picked when it was built from the
sources as they are.

`setup.py` builds it with setuptools-rust (the extension module `events/_native*.so`; in
place, also `events/native.digest`, the digest of the sources it was built from). `COMPILED`, when
it is current, is the fast path `events.codec.decode` tries first, before
`events.fastpath.recognise` (the Python reference it is tested against) and pydantic's
validator (`tests/events/test_fastpath.py` runs every case on both). It also takes the
valid run.started, which the Python fast path leaves to pydantic: there pydantic's validator
is its reference. `EVALSTREAM_PURE=1` leaves it out, as it leaves the compiled fold out; a
build older than its sources is left out with a warning. The same module holds
`events.codec.decode`'s `Decoder`. `events.builds.Crate` is how a crate's build is found and
judged, here and for the fold's kernels (`projections/native`, `projections/kernels.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

from events import fastpath
from events.builds import crates
from events.models import (
    EVENT_ID_MAX,
    MOMENT,
    NAME_MAX,
    RUN_ID_MAX,
    ErrorInfo,
    InputEvent,
    MetricSpec,
    Output,
    OutputSpec,
    Record,
    RunClosed,
    RunStarted,
    ScoreFailed,
    ScoreMeasured,
    Signal,
    TaskSpec,
    TrialFinished,
    Usage,
    ViewSpec,
)
from events.nonfinite import NONFINITE_STRINGS
from events.timestamps import epoch_seconds

_HERE = Path(__file__).resolve().parent

Recognise = Callable[[bytes | str], InputEvent | None]


RECOGNISER: Final = crates(_HERE.parent)["events._native"]
"""`events/native` (`event-recogniser`): this module's."""

NATIVE: Final = RECOGNISER.load()
"""`events._native`, when built from the sources as they are (else None)."""


def required(model: type[Record]) -> frozenset[str]:
    """The fields every `model` has given: its required ones."""
    return frozenset(name for name, field in model.model_fields.items() if field.is_required())


def compiled_recogniser() -> Recognise | None:
    """The compiled recogniser, given what it must agree with; None where `NATIVE` is."""
    if NATIVE is None:
        return None
    recognise: Recognise = NATIVE.Recogniser(
        {
            "score_measured": ScoreMeasured,
            "score_failed": ScoreFailed,
            "trial_finished": TrialFinished,
            "run_closed": RunClosed,
            "output": Output,
            "error_info": ErrorInfo,
            "usage": Usage,
            "run_started": RunStarted,
            "task_spec": TaskSpec,
            "metric_spec": MetricSpec,
            "output_spec": OutputSpec,
            "view_spec": ViewSpec,
            "signal": Signal,
            "epoch_seconds": epoch_seconds,
            "moment": MOMENT,
            "envelope_given": fastpath.ENVELOPE_GIVEN,
            "score_given": fastpath.SCORE_GIVEN,
            "trial_given": fastpath.TRIAL_GIVEN,
            "output_given": fastpath.OUTPUT_GIVEN,
            "started_given": required(RunStarted),
            "task_given": required(TaskSpec),
            "metric_given": required(MetricSpec),
            "output_spec_given": required(OutputSpec),
            "view_given": required(ViewSpec),
            "signal_given": required(Signal),
            "nonfinite": NONFINITE_STRINGS,
            "event_id_max": EVENT_ID_MAX,
            "run_id_max": RUN_ID_MAX,
            "name_max": NAME_MAX,
        }
    )
    return recognise


COMPILED: Final = compiled_recogniser()
