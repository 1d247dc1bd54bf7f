"""A crash point for the kill tests: inert unless ``INGEST_CRASH_AT`` names it.

``INGEST_CRASH_AT=embedding`` makes the process SIGKILL itself the first time it passes
``crash_point("embedding")``; ``embedding:2`` the second time. Nothing else reads the
variable, and an unset or unmatched variable costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

ENV = "INGEST_CRASH_AT"
_passed: dict[str, int] = {}


def crash_point(name: str) -> None:
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    target, _, nth = wanted.partition(":")
    if target != name:
        return
    _passed[name] = _passed.get(name, 0) + 1
    if _passed[name] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
