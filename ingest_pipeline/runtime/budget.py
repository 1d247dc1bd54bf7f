"""A per-document budget of time and memory for the work a stage does on one document's
content in the run process (the chunk map's merge, its token offsets and embedding texts,
its checks, the page pictures), where no parse worker's timeout or memory cap reaches:
checked in the loops that grow with the document, so a document over it becomes one errors
row naming the stage and the budget, and the batch goes on.

Memory is the growth of the process's resident set since the stage began on the document,
read from ``/proc/self/statm`` (where there is none, only time is budgeted). The process
is shared, so growth from work beside the stage counts too: the budget is a guard against
one document's content taking the machine, not an accounting of its bytes."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

MiB = 1024 * 1024
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# Reading the resident set costs a system call: it is read at most this often.
_MEMORY_EVERY = 0.05


class OverBudget(Exception):
    """One document's stage went over its time or memory budget."""


def resident_bytes() -> int | None:
    """The process's resident set now, or None where /proc is not there."""
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class _Budget:
    stage: str
    seconds: float
    deadline: float | None
    memory_bytes: int
    baseline: int | None
    next_read: float = 0.0


_ACTIVE: ContextVar[_Budget | None] = ContextVar("stage_budget", default=None)


@contextmanager
def stage_budget(stage: str, seconds: float, memory_bytes: int = 0) -> Iterator[None]:
    """Within the block, ``check`` raises OverBudget once ``seconds`` passed or the process
    grew by more than ``memory_bytes`` (0: no budget of that kind)."""
    budget = None
    if seconds > 0 or memory_bytes > 0:
        budget = _Budget(
            stage,
            seconds,
            time.monotonic() + seconds if seconds > 0 else None,
            memory_bytes,
            resident_bytes() if memory_bytes > 0 else None,
        )
    token = _ACTIVE.set(budget)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def check() -> None:
    """Raise OverBudget when the stage this thread runs spent its time or memory budget."""
    budget = _ACTIVE.get()
    if budget is None:
        return
    now = time.monotonic()
    if budget.deadline is not None and now > budget.deadline:
        raise OverBudget(
            f"{budget.stage}: over the time budget of {budget.seconds:g} s per document "
            "([limits] stage_timeout); the rest of the batch goes on"
        )
    if budget.baseline is None or now < budget.next_read:
        return
    budget.next_read = now + _MEMORY_EVERY
    resident = resident_bytes()
    if resident is not None and resident - budget.baseline > budget.memory_bytes:
        raise OverBudget(
            f"{budget.stage}: over the memory budget of {budget.memory_bytes // MiB} MiB per document "
            f"([limits] stage_memory_mib; the run grew by {(resident - budget.baseline) // MiB} MiB); "
            "the rest of the batch goes on"
        )
