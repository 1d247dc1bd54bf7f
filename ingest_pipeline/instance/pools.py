"""The pool the LanceDB writers share, made before any step of a run claims a slot of it.

Dagster makes a pool's row the first time a step claims a slot of it. On PostgreSQL, two runs
doing that at once both insert the row, and the one that loses has its transaction aborted
before the update that should follow, so its step fails (dagster#33552): two ingest runs on a
fresh shared instance could lose one of them. So every run makes the row when its resources
start, before any step holds a slot: the first insert wins, and a run whose insert lost finds
the row when it reads again. A row already there, at the default limit or set by hand, is left
as it is.
"""

from __future__ import annotations

import logging
import time
from typing import Any

LANCEDB_POOL = "lancedb"
_ATTEMPTS = 5

log = logging.getLogger(__name__)


def _made(storage: Any, pool: str, default: int) -> bool:
    known = {p.name: p for p in storage.get_pool_limits()}.get(pool)
    return known is not None and (not known.from_default or known.limit == default)


def ensure_pool(instance: Any, pool: str = LANCEDB_POOL) -> bool:
    """Make ``pool``'s row at the instance's default limit unless it is there; False when the
    instance keeps no pool limits (none configured, or a storage without them)."""
    storage = instance.event_log_storage
    default = instance.global_op_concurrency_default_limit
    if default is None or not storage.supports_global_concurrency_limits:
        return False
    for attempt in range(_ATTEMPTS):
        if _made(storage, pool, default):
            return True
        try:
            storage.initialize_concurrency_limit_to_default(pool)
        except Exception as exc:  # noqa: BLE001 - another process inserted it first
            log.debug("pool %s: another run made it first (%s)", pool, exc)
            time.sleep(0.05 * (attempt + 1))
    return _made(storage, pool, default)
