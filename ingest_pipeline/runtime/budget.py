"""A per-document time budget for the work a stage does on one document's content in the run
process (the chunk map's merge, its token offsets and embedding texts), where no parse worker's
timeout reaches: checked in the loops that grow with the document, so a document over it
becomes one errors row naming the stage and the budget, and the batch goes on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class OverBudget(Exception):
    """One document's stage went over its time budget."""


_ACTIVE: ContextVar[tuple[float, str, float] | None] = ContextVar("stage_budget", default=None)


@contextmanager
def stage_budget(stage: str, seconds: float) -> Iterator[None]:
    """Within the block, ``check`` raises OverBudget once ``seconds`` passed (0: no budget)."""
    token = _ACTIVE.set((time.monotonic() + seconds, stage, seconds) if seconds > 0 else None)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def check() -> None:
    """Raise OverBudget when the budget of the stage this thread runs is spent."""
    active = _ACTIVE.get()
    if active is not None and time.monotonic() > active[0]:
        deadline, stage, seconds = active
        raise OverBudget(
            f"{stage}: over the time budget of {seconds:g} s per document ([limits] stage_timeout); "
            f"the rest of the batch goes on"
        )
