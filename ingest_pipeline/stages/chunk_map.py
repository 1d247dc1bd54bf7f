"""The ``chunk_map/<profile>`` stage: merge the claims of a profile's chunker order per
page, first in order wins (``merge_stored``), mint chunk ids and count tokens (table
``chunks``); and withdraw a chunk map whose file no longer reads. Its checks are in
``chunk_checks``, the text the model sees in ``embedding_text``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ingest_pipeline.contract import PageOutput
from ingest_pipeline.embedding.port import Embedder
from ingest_pipeline.identity import chunk_id
from ingest_pipeline.registry import ChunkerRegistry
from ingest_pipeline.runtime.budget import check as budget_check
from ingest_pipeline.runtime.faults import crash_point
from ingest_pipeline.settings import Profile, Settings
from ingest_pipeline.stages.chunk_checks import table_grid_problem
from ingest_pipeline.stages.claims import claim_content, claim_metas
from ingest_pipeline.stages.common import (
    STAGE_VERSIONS,
    UNCHANGED,
    NoChunks,
    Outcome,
    StageError,
    UpstreamMissing,
    fingerprint_of,
    now,
)
from ingest_pipeline.stages.embedding_text import Expander
from ingest_pipeline.stages.merge_stored import (
    PIECE_COLUMNS,
    Merged,
    merge_claim_tables,
    merged_by_pieces,
)
from ingest_pipeline.stages.pages import load_pages
from ingest_pipeline.stages.routes import NotRouted, routed_profile
from ingest_pipeline.stages.sources import load_source
from ingest_pipeline.storage import tables
from ingest_pipeline.storage.store import Store

# A chunk map of more rows is not held for its checks as Python rows beside everything
# the build still holds: they read it back from the lake.
KEEP_ROWS_UP_TO = 5000


def empty_reason(store: Store, profile: str, document: str) -> str | None:
    """Why a document has zero chunks in a profile's chunk map, when that is a success."""
    meta = store.chunk_map_meta(profile, document) or {}
    return meta.get("no_chunks") if meta.get("empty") else None


def build_chunk_map(
    store: Store,
    registry: ChunkerRegistry,
    profile: Profile,
    embedder: Embedder,
    document: str,
    run_id: str,
    force: bool = False,
    settings: Settings | None = None,
) -> Outcome:
    """Merge the claims of the profile's chunker order into the document's chunk map.
    With ``settings``, the document's route decides: a profile it does not go through
    withdraws its chunk map and skips it, and the served profile cuts it with the chunker
    versions of the profile the route serves it as."""
    base = profile
    source, profile, pages, pages_fp = _inputs(store, settings, profile, document)
    order = [registry.info(c) for c in registry.order_for(profile.chunkers, profile.name)]
    metas = claim_metas(store, order, document)
    claim_fps = [claim_content(m) for m in metas]
    fingerprint = fingerprint_of(
        STAGE_VERSIONS["chunk_map"],
        profile.name,
        profile.options(),
        pages_fp,
        claim_fps,
        embedder.model_id,
        embedder.max_tokens,
        *([[i.ref for i in order]] if profile != base else []),  # cut as another profile
    )
    previous = store.chunk_map_meta(profile.name, document)
    if previous and previous.get("fingerprint") == fingerprint and not force:
        if previous.get("no_chunks") and not previous.get("empty"):
            raise NoChunks(previous["no_chunks"])
        return Outcome(document, "unchanged", {**previous.get("summary", {}), **UNCHANGED})
    expand = Expander(profile, embedder, source["path"])
    # None for a claim stored without today's columns: then the pieces' way
    merged = merge_claim_tables(store, order, metas, document, pages, expand) or merged_by_pieces(
        store, order, metas, document, pages, expand
    )
    written = _chunk_table(merged.table, document, source, profile.name, run_id, pages, expand)
    summary = _summary(merged, written)
    no_chunks = None if written.num_rows else _why_no_chunks(pages, summary)
    # Nothing to chunk is not an error (SPEC F06) when every page read and no chunker
    # raised: a blank file, blank pages, Markdown whose only content is skipped. Pages that
    # failed or chunkers that raised leave a broken document, and that stays a failure.
    empty = bool(no_chunks) and not summary["failed_chunkers"] and all(p.readable for p in pages)
    if empty:
        if any(p.status == "read" for p in pages):
            no_chunks += "; the chunkers kept nothing of the read pages"
        summary["no_chunks"] = no_chunks
    summary.update(_route_summary(settings, source, profile != base))
    store.write_chunk_map(
        profile.name,
        document,
        written,
        meta={
            "fingerprint": fingerprint,
            "summary": summary,
            "order": [i.ref for i in order],
            "no_chunks": no_chunks,
            "empty": empty,
        },
    )
    crash_point("chunk_maps")
    if no_chunks and not empty:
        raise NoChunks(no_chunks)
    if written.num_rows > KEEP_ROWS_UP_TO:  # the checks read a big map back, once this is freed
        return Outcome(document, "empty" if empty else "new", summary)
    # the rows as chunk_rows reads them back; the image bytes leave the rows the checks read
    kept = {
        "rows": written.drop_columns(["image"]).to_pylist(),
        "pages": [
            {"document_id": document, "page": p.page, "status": p.status, "text": p.text} for p in pages
        ],
    }
    return Outcome(document, "empty" if empty else "new", summary, kept)


def _chunk_table(
    merged: pa.Table,
    document: str,
    source: dict[str, Any],
    profile: str,
    run_id: str,
    pages: Sequence[PageOutput],
    expand: Expander,
) -> pa.Table:
    """A merged document's chunk map (``tables.CHUNKS``): each chunk's index on its page,
    its id and label, its characters and its tokens as the model counts them."""
    page_list = merged.column("page").to_pylist()
    texts = merged.column("text").to_pylist()
    embeds = merged.column("embed_text").to_pylist()
    images = merged.column("image")
    pictured = pc.indices_nonzero(images.is_valid())
    image_bytes = dict(zip(pictured.to_pylist(), images.take(pictured).to_pylist()))
    counts = iter(
        expand.counts([e or t for i, (t, e) in enumerate(zip(texts, embeds)) if i not in image_bytes])
    )
    ids, indexes, labels, tokens = [], [], [], []
    index, last_page = 0, None
    for i, (page, text, chunker, cfg) in enumerate(
        zip(page_list, texts, merged.column("chunker").to_pylist(), merged.column("config_hash").to_pylist())
    ):
        budget_check()
        if page != last_page:
            index, last_page = 0, page
        picture = image_bytes.get(i)
        ids.append(chunk_id(document, chunker, cfg, page, index, text if picture is None else picture))
        indexes.append(index)
        labels.append(f"page:{page}/chunk:{index}")
        tokens.append(next(counts) if picture is None else None)
        index += 1
    readers = {p.page: p.reader for p in pages}

    def same(value: Any) -> pa.Array:
        return pa.array([value] * merged.num_rows, pa.string())

    return pa.table(
        {
            "chunk_id": ids,
            "label": labels,
            "profile": same(profile),
            "document_id": same(document),
            "path": same(source["path"]),
            "page": merged.column("page"),
            "index": pa.array(indexes, pa.int32()),
            **{name: merged.column(name) for name in PIECE_COLUMNS},
            "chars": pa.array([len(t) if t else 0 for t in texts], pa.int32()),
            "tokens": pa.array(tokens, pa.int32()),
            "chunker": merged.column("chunker"),
            "config_hash": merged.column("config_hash"),
            "reader": pa.array([readers.get(p) for p in page_list], pa.string()),
            "source_sha256": same(source["sha256"]),
            "run_id": same(run_id),
        },
        schema=tables.CHUNKS,
    )


def _summary(merged: Merged, chunks: pa.Table) -> dict[str, Any]:
    """What a chunk map's materialization says of it: chunks per version, what the merge
    dropped, the versions that raised, the parts of split pieces, table grid problems. Only
    the rows whose stored JSON can hold a split or a table grid are read into Python."""
    by_chunker: dict[str, int] = {}
    for chunker in chunks.column("chunker").to_pylist():
        by_chunker[chunker] = by_chunker.get(chunker, 0) + 1

    def holding(column: str, text: str) -> pa.Table:
        return chunks.filter(pc.fill_null(pc.match_substring(chunks.column(column), text), False))

    split = holding("meta", "token_split").column("meta").to_pylist()
    problems = []
    tabled = holding("layout", '"table"').select(["label", "text", "layout", "meta"]).to_pylist()
    for row in tabled:
        if row["text"]:
            problem = table_grid_problem(row["text"], row["layout"], row["meta"])
            if problem:
                problems.append({"label": row["label"], "problem": problem})
    return {
        "chunks": chunks.num_rows,
        "by_chunker": by_chunker,
        "dropped": merged.dropped,
        "failed_chunkers": merged.failed,
        "split_parts": sum(1 for m in split if "token_split" in json.loads(m)),
        "table_grid_problems": problems[:20],
    }


def _inputs(store: Store, settings: Settings | None, profile: Profile, document: str):
    """The document's source row, the profile its route cuts it with, its pages and their
    fingerprint; a document whose file no longer reads leaves search."""
    try:
        source, _ = load_source(store, document)
        profile = routed_profile(settings, settings.route_of(source), profile) if settings else profile
        pages, pages_fp = load_pages(store, document)
        if (store.pages_meta(document) or {}).get("unopened"):  # no reader opened its bytes (A13)
            raise UpstreamMissing(f"no reader could open {document}")
    except NotRouted:  # its chunk map (if any) leaves search
        withdraw_chunk_map(store, profile.name, document)
        raise
    except UpstreamMissing as exc:
        withdrawn = withdraw_chunk_map(store, profile.name, document)
        if withdrawn is None:
            raise
        raise StageError(
            f"withdrawn from search: the file no longer reads ({exc}); its {withdrawn} chunks "
            f"stay in the lake's history"
        ) from None
    return source, profile, pages, pages_fp


def _route_summary(settings: Settings | None, source: dict[str, Any], cut: bool) -> dict[str, Any]:
    """The route a chunk map was cut under, where the root has routes."""
    if settings is None or not settings.routes.configured:
        return {}
    route = settings.route_of(source)
    return {"route": route.name, **({"cut_as": route.serve} if cut else {})}


def withdraw_chunk_map(store: Store, profile: str, document: str) -> int | None:
    """Move a document's served chunk map and vectors into the lake's history (out of the
    public views and of search); returns how many chunks it held, None if it had none."""
    chunks = store.chunk_map(profile, document, columns=["source_sha256"])
    if chunks is None:
        return None
    shas = sorted(set(chunks.column("source_sha256").to_pylist()) - {None}) or ["unknown"]
    version = f"{shas[0][:16]}-{now().strftime('%Y%m%dT%H%M%S%f')}"
    store.withdraw(profile, document, version, at=now())
    return chunks.num_rows


def _why_no_chunks(pages: Sequence[PageOutput], summary: dict[str, Any]) -> str:
    """Say why a document yields no chunk, from its pages' verdicts."""
    statuses: dict[str, int] = {}
    for page in pages:
        statuses[page.status] = statuses.get(page.status, 0) + 1
    parts = [f"{n} {status}" for status, n in sorted(statuses.items())]
    reasons = sorted({p.reason for p in pages if p.reason and p.status in ("failed", "unreadable")})
    text = f"no chunks: {len(pages)} page(s), " + ", ".join(parts or ["none"])
    if reasons:
        text += " (" + "; ".join(reasons)[:200] + ")"
    if summary.get("failed_chunkers"):
        text += "; chunkers that raised: " + ", ".join(summary["failed_chunkers"])
    return text
