"""A run held by the native fold, as the worker holds it (`projections.native_step` applies
events to it): beside the `projections._kernels.NativeRun`, the run.started's declarations as
the Python fold reads them, which its stored header keeps.
"""

from __future__ import annotations

from typing import Any, Final, final

from projections.fold.declarations import Declarations
from projections.native_events import NATIVE


@final
class NativeState:
    """A run held by the native fold, with what the worker reads of a `RunState`: its id,
    whether it is closed, its event count and summary revision, and its declarations (the
    run.started as the Python fold reads it, kept here for its stored header)."""

    __slots__ = ("declarations", "native", "run_id")

    def __init__(self, run_id: str, native: Any = None, declarations: Declarations | None = None) -> None:
        assert NATIVE is not None, "the native fold is not built"
        self.run_id: Final = run_id
        self.native: Final[Any] = NATIVE.NativeRun(run_id) if native is None else native
        """The `projections._kernels.NativeRun`."""
        self.declarations = declarations

    @property
    def closed(self) -> bool:
        closed: bool = self.native.closed()
        return closed

    @property
    def event_count(self) -> int:
        count: int = self.native.event_count()
        return count

    @property
    def revision(self) -> int:
        revision: int = self.native.revision()
        return revision
