"""The ``configs`` table: every config hash a claim or chunk carries, with the values it
stands for, so the settings that cut a chunk can be read back after the settings file
changed. One small file per hash, written when the hash is first used and touched again
(``last_seen``) when a stage computes with it later; nothing deletes it."""

from __future__ import annotations

import datetime as dt
import functools
import json
from importlib import metadata
from typing import Any

import pyarrow as pa

from ingest_pipeline.storage import tables
from ingest_pipeline.storage.store import Store

TABLE = "configs"
# ``last_seen`` is rewritten at most this often per hash (a write per claim would cost one
# small file per document and chunker).
TOUCH_EVERY = dt.timedelta(hours=1)


def code_version(component: Any) -> str:
    """The version of the distribution that ships an object's code (its top-level package),
    else "unknown" (code run from a folder that is not installed)."""
    return _distribution_version((getattr(component, "__module__", None) or "").split(".", 1)[0])


@functools.cache
def _distribution_version(top: str) -> str:
    for dist in metadata.packages_distributions().get(top, ()):
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def remember(
    store: Store, config_hash: str, owner: str, values: dict[str, Any], version: str, now: Any = None
) -> None:
    """Keep what a config hash stands for: its owner (``id@version``), the values as JSON and
    the code version; ``first_seen`` stays, ``last_seen`` moves on."""
    now = now or dt.datetime.now(dt.timezone.utc)
    before = values_of(store, config_hash)
    if before is not None and now - before["last_seen"] < TOUCH_EVERY:
        return
    row = {
        "config_hash": config_hash,
        "owner": owner,
        "config": json.dumps(values, sort_keys=True, default=str),
        "code_version": version,
        "first_seen": before["first_seen"] if before else now,
        "last_seen": now,
    }
    store.lake.write(TABLE, (config_hash,), pa.Table.from_pylist([row], schema=tables.CONFIGS))


def values_of(store: Store, config_hash: str) -> dict[str, Any] | None:
    """The row kept for a config hash (``config`` parsed back into values), or None."""
    table = store.lake.read(TABLE, config_hash)
    if table is None or not table.num_rows:
        return None
    row = table.to_pylist()[0]
    return {**row, "config": json.loads(row["config"])}
