"""The ``lancedb/<profile>`` stage: make a profile's LanceDB table hold exactly a
document's current chunks, the completion marker that says a document is done, and the
check that LanceDB's rows equal the chunk map's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ingest_pipeline.embedding.port import Embedder
from ingest_pipeline.settings import Profile
from ingest_pipeline.stages.common import (
    STAGE_VERSIONS,
    UNCHANGED,
    Finding,
    Outcome,
    UpstreamMissing,
    fingerprint_of,
)
from ingest_pipeline.storage import tables
from ingest_pipeline.storage.store import Store
from ingest_pipeline.storage.vector_index import (
    LEGACY_MODEL_ID,
    TableModel,
    VectorIndex,
    index_schema,
    search_text,
)

# What the step reads of a chunk map: the columns a LanceDB row takes over, and the embedding
# text its keyword text is made from; a table's cells and the layout stay in the lake.
INDEXED_COLUMNS = [name for name in index_schema(1).names if name in tables.CHUNKS.names] + ["embed_text"]


def index_document(
    store: Store,
    index: VectorIndex,
    profile: Profile,
    document: str,
    run_id: str,
    force: bool = False,
    embedder: Embedder | None = None,
) -> Outcome:
    """Make the profile's LanceDB table hold exactly this document's current chunks; the
    table records ``embedder``'s identity (a table another embedder built is made anew)."""
    chunks = store.chunk_map(profile.name, document, columns=INDEXED_COLUMNS)
    vectors = store.embeddings(profile.name, document)
    model = _table_model(embedder, vectors, index.dim)
    if chunks is None and store.has_index_marker(profile.name, document):
        # The chunk map was withdrawn (the file no longer reads): its rows leave search.
        empty = pa.Table.from_pylist([], schema=index_schema(model.dim))
        removed = index.sync_document(profile.name, document, empty, model)
        store.delete_index_marker(profile.name, document)
        return Outcome(
            document, "skipped", {"reason": "chunk map withdrawn", "rows_removed": removed["rows_before"]}
        )
    if chunks is None or vectors is None:
        raise UpstreamMissing(f"no chunks or embeddings for {document}")
    emb_fp = (store.embeddings_meta(profile.name, document) or {}).get("fingerprint")
    fingerprint = fingerprint_of(STAGE_VERSIONS["lancedb"], emb_fp)
    marker = store.index_marker(profile.name, document)
    if (
        not force
        and marker
        and marker.get("fingerprint") == fingerprint
        and index.count(profile.name, document) == marker.get("rows")
    ):
        return Outcome(document, "unchanged", {"rows": marker.get("rows"), **UNCHANGED})
    rows = []
    for row in chunks.to_pylist():
        # Image chunks are indexed without a vector until an image embedder is configured:
        # a filter finds them, vector search skips them.
        is_image = row["text"] is None
        rows.append({**row, "modality": "image" if is_image else "text", "search_text": search_text(row)})
    schema = index_schema(model.dim)
    data = pa.Table.from_pylist(rows, schema=schema.remove(schema.get_field_index("vector")))
    # each row's vector (null where it has none) taken over in Arrow, not as a list of floats a row
    at = pc.index_in(chunks.column("chunk_id"), value_set=vectors.column("chunk_id").combine_chunks())
    data = data.append_column("vector", vectors.column("vector").take(at).cast(schema.field("vector").type))
    result = index.sync_document(profile.name, document, data, model)
    shas = set(chunks.column("source_sha256").to_pylist())
    store.write_index_marker(
        profile.name,
        document,
        result["rows"],
        meta={
            "fingerprint": fingerprint,
            "rows": result["rows"],
            "run_id": run_id,
            "source_sha256": shas.pop() if len(shas) == 1 else None,
        },
    )
    return Outcome(document, "new", result)


def _table_model(embedder: Embedder | None, vectors: pa.Table | None, dim: int) -> TableModel:
    """The embedder a profile's table records; its width read from the stored vectors when
    there are any (a remote model need not be asked)."""
    if embedder is None:
        return TableModel(LEGACY_MODEL_ID, dim)
    width = None
    if vectors is not None and vectors.num_rows:
        first = next((v for v in vectors.column("vector").to_pylist() if v is not None), None)
        width = len(first) if first is not None else None
    return TableModel(embedder.model_id, width or embedder.dim, embedder.identity())


def finished(store: Store, profile: str, document: str) -> dict[str, Any] | None:
    """The document's completion marker for a profile, if it covers its current bytes.

    The index marker is the last thing a run writes for a document, so a document is done
    only once it exists for the sha256 its source row holds; a run killed earlier leaves
    none (or one for older bytes), and the next run's report counts it as new work."""
    marker = store.index_marker(profile, document)
    source = store.source_meta(document)
    if not marker or not source:
        return None
    if marker.get("source_sha256") not in (None, source.get("sha256")):
        return None
    return marker


def index_findings(
    store: Store, index: VectorIndex, profile: str, documents: Sequence[str]
) -> tuple[dict[str, int], Finding]:
    """Each document's LanceDB rows, and whether they equal its chunk map's rows (LanceDB's
    rows of the whole batch read in one scan)."""
    mismatches, counts = [], {}
    found = index.counts(profile, documents)
    for doc in documents:
        chunks = store.chunk_map(profile, doc, columns=["chunk_id"])
        expected = chunks.num_rows if chunks is not None else 0
        actual = counts[doc] = found.get(doc, 0)
        if expected != actual:
            mismatches.append({"document": doc, "parquet": expected, "lancedb": actual})
    return counts, Finding("rows_match_parquet", not mismatches, "mismatches", mismatches)
