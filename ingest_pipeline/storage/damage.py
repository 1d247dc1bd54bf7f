"""A damaged store, named in one line with its fix: lake files that are not whole Parquet, a
profile's LanceDB table gone (or emptied) while the lake says documents were indexed in it.
``ingest`` repairs both (damaged files set aside and rebuilt, the table filled again from
the lake's vectors); ``query`` and ``search`` say so instead of answering empty or failing."""

from __future__ import annotations

from typing import Any

from ingest_pipeline.storage.lake import DAMAGED, Lake
from ingest_pipeline.storage.vector_index import table_name

FIX = "run `ingest-pipeline ingest` to repair it"


def lake_damage(lake: Lake) -> str | None:
    """One line naming the lake's damaged files, or None."""
    damaged = lake.damaged()
    if not damaged:
        return None
    more = f" and {len(damaged) - 1} more" if len(damaged) > 1 else ""
    return (
        f"damaged store: {damaged[0]}{more} in the lake is not whole Parquet (truncated?); {FIX} "
        f"(the file is set aside in {DAMAGED}/ and rebuilt from the sources)"
    )


def index_damage(lake: Lake, index: Any, profile: str) -> str | None:
    """One line when the lake says documents of ``profile`` are indexed but its LanceDB table
    is missing or empty, or None."""
    indexed = sum(1 for _ in lake.files(f"indexed/{profile}"))
    if not indexed:
        return None
    table = index.open(profile)
    if table is not None and table.count_rows() > 0:
        return None
    state = "missing" if table is None else "empty"
    return (
        f"damaged store: the LanceDB table {table_name(profile)!r} is {state} while the lake has "
        f"{indexed} indexed documents of profile {profile!r}; {FIX} (the table is rebuilt from the lake)"
    )
