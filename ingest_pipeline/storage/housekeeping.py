"""Housekeeping of a storage root: LanceDB tables compacted, their old versions removed and
their indices brought up to date; the append-only embedding cache compacted; files left by
killed writes swept; the catalog refreshed. Plain functions, safe beside running ingests.

Only the embedding cache is compacted in the lake: every other table keeps one file per
(table, [version,] document) on purpose, because re-materializing a partition replaces
exactly its file, and merging documents into one file would break that.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pyarrow as pa

from ingest_pipeline.identity import canonical_json, sha256_text
from ingest_pipeline.storage.lake import Lake
from ingest_pipeline.storage.store import Store
from ingest_pipeline.storage.vector_index import VectorIndex, keyword_column

# Versions newer than this stay readable, so a search that opened an older version of a
# table keeps working while housekeeping runs.
KEEP_VERSIONS = timedelta(hours=1)
# A ``.tmp`` file this old belongs to no write in flight: its writer was killed.
STALE_TEMPORARY = timedelta(hours=1)
# The embedding cache is compacted once it has this many shards (one per embedding run).
CACHE_SHARDS_BEFORE_COMPACTION = 16
# Below this many rows a flat vector scan is fast enough; above it a table gets an IVF index.
VECTOR_INDEX_MIN_ROWS = 50_000


@dataclass
class TableReport:
    table: str
    rows: int
    fragments_before: int
    fragments_after: int
    versions_before: int
    versions_after: int
    indices: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _fragments(table) -> int:
    return int(table.stats()["fragment_stats"]["num_fragments"])


def vector_index_config(rows: int):
    """The vector index for a table of ``rows``: IVF partitions of ~4,000 rows, RaBitQ codes
    (no codebook to train, so it builds in seconds per 100,000 rows on two cores), cosine
    distance like the searches."""
    from lancedb.index import IvfRq

    return IvfRq(distance_type="cosine", num_partitions=max(1, rows // 4096))


def ensure_indices(table, min_vector_rows: int = VECTOR_INDEX_MIN_ROWS) -> list[str]:
    """Create what a table lacks: the full-text index on its keyword column and, once the
    table is large, the vector index. Returns what was created."""
    from lancedb.index import FTS

    created = []
    rows = table.count_rows()
    have = {tuple(i.columns): i for i in table.list_indices()}
    keyword = keyword_column(table)
    if rows and (keyword,) not in have:
        table.create_index(keyword, config=FTS(), replace=True)
        created.append(f"{keyword} (FTS)")
    if rows >= min_vector_rows and ("vector",) not in have:
        table.create_index("vector", config=vector_index_config(rows), replace=True)
        created.append("vector (IVF_RQ)")
    return created


def optimize_lancedb(
    index: VectorIndex, keep_versions: timedelta = KEEP_VERSIONS, min_vector_rows: int = VECTOR_INDEX_MIN_ROWS
) -> list[TableReport]:
    """For each table: create missing indices, then LanceDB's optimize (compacts small
    fragments, adds new rows to the indices, removes versions older than ``keep_versions``).
    Each table holds the write lock only while it is optimized."""
    reports = []
    for name in index.tables():
        started = time.perf_counter()
        with index.writing():
            table = index.db.open_table(name)
            before_fragments, before_versions = _fragments(table), len(table.list_versions())
            created = ensure_indices(table, min_vector_rows)
            table.optimize(cleanup_older_than=keep_versions)
            table.checkout_latest()
            reports.append(
                TableReport(
                    table=name,
                    rows=table.count_rows(),
                    fragments_before=before_fragments,
                    fragments_after=_fragments(table),
                    versions_before=before_versions,
                    versions_after=len(table.list_versions()),
                    indices=sorted(i.name for i in table.list_indices()),
                    created=created,
                    seconds=round(time.perf_counter() - started, 3),
                )
            )
    return reports


def compact_embedding_cache(
    store: Store, model_id: str, min_shards: int = CACHE_SHARDS_BEFORE_COMPACTION
) -> dict[str, int]:
    """Fold the cache's shards into one (a vector per text hash). The new shard is written
    before the old ones are deleted, so a kill in between leaves duplicates, never a gap;
    shards written meanwhile by a running ingest are not touched."""
    shards = store.embedding_cache_files(model_id)
    if len(shards) < min_shards:
        return {"shards_before": len(shards), "shards_after": len(shards), "vectors": 0}
    merged = pa.concat_tables([store.read_cache_file(path) for path in shards])
    # One row per text hash (a text embedded by two concurrent runs has two equal vectors).
    first = (
        pa.table({"sha": merged.column("text_sha256"), "i": pa.array(range(merged.num_rows))})
        .group_by("sha", use_threads=False)
        .aggregate([("i", "min")])
        .column("i_min")
    )
    merged = merged.take(pa.array(sorted(first.to_pylist())))
    digest = sha256_text(canonical_json(sorted(p.rsplit("/", 1)[-1] for p in shards)))[:16]
    left = store.replace_cache_files(model_id, merged, f"compacted-{digest}", shards)
    return {"shards_before": len(shards), "shards_after": left, "vectors": merged.num_rows}


def sweep_temporary_files(store: Store, older_than: timedelta = STALE_TEMPORARY) -> int:
    """Delete the temporary files of writes that were killed before their rename."""
    return store.sweep_temporary_files(older_than.total_seconds())


def refresh_catalog(lake: Lake | Store, path: str, attempts: int = 20) -> dict[str, int]:
    """Rebuild the catalog's views; waits while another process holds the catalog file."""
    import duckdb

    from ingest_pipeline.storage.catalog import build_catalog

    for attempt in range(attempts):
        try:
            return build_catalog(lake, path)
        except duckdb.IOException:
            if attempt == attempts - 1:
                raise
            time.sleep(0.5)
    return {}


def housekeeping_summary(reports: list[TableReport]) -> list[dict[str, Any]]:
    return [vars(r) for r in reports]
