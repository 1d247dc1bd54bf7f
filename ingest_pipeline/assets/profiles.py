"""Per-profile assets: the merged chunk map, its embeddings and its LanceDB rows."""


import re
import time

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    MaterializeResult,
    MetadataValue,
    asset,
)

from ingest_pipeline import progress, stages
from ingest_pipeline.assets.chunks import chunk_asset_key
from ingest_pipeline.assets.common import (
    BATCH_POLICY,
    chunk_map_key,
    document_keys,
    embeddings_key,
    findings_table,
    for_each_document,
    forced,
    lancedb_key,
    preview_markdown,
    report_partitions,
)
from ingest_pipeline.assets.sources import pages
from ingest_pipeline.contract import ContractError, validate_bbox
from ingest_pipeline.partitions import documents_partitions
from ingest_pipeline.registry import ChunkerRegistry
from ingest_pipeline.resources import (
    ChunkersResource, EmbedderResource, IndexResource, IngestResource, Parts, StoreResource,
)
from ingest_pipeline.settings import Profile


CHUNK_MAP_CHECKS = {
    "valid_boxes": "Every chunk box is inside the page, with x0 < x1 and y0 < y1.",
    "unique_chunk_ids": "No two chunks of the profile share a chunk id.",
    "no_empty_chunks": "No text chunk is empty or whitespace only.",
    "within_token_limit": "Every chunk fits the embedder's token limit, or is flagged as over it.",
    "page_text_covered": "Each read page's words appear in that page's chunks (95% floor; warns).",
    "table_grid_consistent": "Every table chunk the model sees (after token splits) has one line per layout row "
                             "and one field per column, cells inside the grid and apart.",
}


def build_profile_assets(registry: ChunkerRegistry, profile: Profile, max_tokens: int, indexed: bool = True) -> list:
    """The profile's chunk map, and for an indexed profile its embeddings and LanceDB rows."""
    order = [registry.info(c) for c in registry.order_for(profile.chunkers)]
    map_key, emb_key, lance_key = chunk_map_key(profile.name), embeddings_key(profile.name), lancedb_key(profile.name)
    refs = ", ".join(i.ref for i in order)
    group = f"profile_{profile.name}"

    @asset(
        key=map_key, partitions_def=documents_partitions, backfill_policy=BATCH_POLICY, group_name=group,
        deps=[pages, *[chunk_asset_key(i) for i in order]], kinds={"parquet"},
        code_version=f"{stages.STAGE_VERSIONS['chunk_map']}:{'+'.join(f'{i.ref}:{i.config_hash}' for i in order)}",
        description=f"Profile '{profile.name}': claims merged per page, first in order wins ({refs}).",
        metadata={"order": [i.ref for i in order], "profile": profile.name},
        check_specs=[AssetCheckSpec(n, asset=map_key, description=d) for n, d in CHUNK_MAP_CHECKS.items()],
    )
    def _chunk_map(context: AssetExecutionContext, ingest: IngestResource, store: StoreResource,
                   chunkers: ChunkersResource, embedder: EmbedderResource) -> MaterializeResult:
        p = Parts({"ingest": ingest, "store": store, "chunkers": chunkers, "embedder": embedder})
        started = time.perf_counter()
        outcomes = for_each_document(context, document_keys(context, p.settings, p.store), lambda doc: stages.guarded(
            p.store, f"chunk_map/{profile.name}", doc, context.run_id, stages.build_chunk_map,
            p.store, p.registry, profile, p.embedder, doc, context.run_id,
            force=forced(context, ingest)))
        rows_by_doc = {doc: p.store.chunk_rows(profile.name, doc) for doc in document_keys(context, p.settings, p.store)}

        def own(outcome):
            rows = rows_by_doc.get(outcome.document, [])
            extra = {"profile": profile.name, "chunks": len(rows),
                     "chunkers_used": sorted({r["chunker"] for r in rows})}
            if rows:
                extra["preview"] = preview_markdown(rows)
                picture = page_picture(p, rows)
                if picture:
                    extra[PAGE_PICTURE] = MetadataValue.md(picture)
            return extra

        report_partitions(context, outcomes, started, own)
        rows = [r for doc in document_keys(context, p.settings, p.store) for r in rows_by_doc[doc]]
        pages_read = []
        for doc in document_keys(context, p.settings, p.store):
            pages_read.extend(r for r in p.store.page_rows(doc, columns=["document_id", "page", "status", "text"])
                              if r["status"] == "read" and r["text"])
        checks = [*chunk_map_checks(rows, max_tokens), page_text_check(pages_read, rows)]
        return MaterializeResult(check_results=checks)

    if not indexed:  # nothing searches it: no vectors, no LanceDB table
        return [_chunk_map]

    @asset(
        key=emb_key, partitions_def=documents_partitions, backfill_policy=BATCH_POLICY, group_name=group,
        deps=[map_key], kinds={"parquet"}, code_version=str(stages.STAGE_VERSIONS["embeddings"]),
        description=f"Profile '{profile.name}': a vector per text chunk, through the embedding cache.",
        metadata={"profile": profile.name},
    )
    def _embeddings(context: AssetExecutionContext, ingest: IngestResource, store: StoreResource,
                    embedder: EmbedderResource) -> MaterializeResult:
        p = Parts({"ingest": ingest, "store": store, "embedder": embedder})
        started = time.perf_counter()
        outcomes = stages.embed_documents(p.store, p.embedder, profile, document_keys(context, p.settings, p.store), context.run_id,
                                          on_done=lambda o: progress.report(emb_key.to_user_string(), o),
                                          force=forced(context, ingest))
        report_partitions(context, outcomes, started, lambda o: {"model": p.embedder.model_id})
        return MaterializeResult()

    @asset(
        key=lance_key, partitions_def=documents_partitions, backfill_policy=BATCH_POLICY, group_name=group,
        deps=[emb_key], kinds={"lancedb"}, pool="lancedb", code_version=str(stages.STAGE_VERSIONS["lancedb"]),
        description=f"Profile '{profile.name}': the documents' rows in LanceDB table chunks_{profile.name}.",
        metadata={"profile": profile.name},
        check_specs=[AssetCheckSpec("rows_match_parquet", asset=lance_key,
                                    description="Each document's LanceDB rows equal its chunk map's rows.")],
    )
    def _lancedb(context: AssetExecutionContext, ingest: IngestResource, store: StoreResource,
                 index: IndexResource) -> MaterializeResult:
        p = Parts({"ingest": ingest, "store": store, "index": index})
        started = time.perf_counter()
        outcomes = for_each_document(context, document_keys(context, p.settings, p.store), lambda doc: stages.guarded(
            p.store, f"lancedb/{profile.name}", doc, context.run_id, stages.index_document,
            p.store, p.index, profile, doc, context.run_id,
            force=forced(context, ingest)))
        if any(o.status == "new" for o in outcomes):
            p.index.refresh_text_index(profile.name)
        mismatches, counts = [], {}
        for doc in document_keys(context, p.settings, p.store):
            emb = p.store.chunk_map(profile.name, doc, columns=["chunk_id"])
            expected = emb.num_rows if emb is not None else 0
            actual = counts[doc] = p.index.count(profile.name, doc)
            if expected != actual:
                mismatches.append({"document": doc, "parquet": expected, "lancedb": actual})
        table_rows = p.index.count(profile.name)
        report_partitions(context, outcomes, started, lambda o: {
            "table": f"chunks_{profile.name}", "document_rows": counts.get(o.document, 0),
            "table_rows": table_rows})
        return MaterializeResult(
            check_results=[AssetCheckResult(check_name="rows_match_parquet", passed=not mismatches,
                                            metadata={"mismatches": findings_table(mismatches)})],
        )

    return [_chunk_map, _embeddings, _lancedb]


def page_picture(p, rows: list[dict]) -> str | None:
    """Markdown showing the first page with geometry in the batch, its chunk boxes drawn."""
    from ingest_pipeline.previews import preview_markdown_image, render_page_preview
    from ingest_pipeline.readers.base import password_for

    first = next((r for r in rows if r["bbox"] is not None), None)
    if first is None:
        return None
    same_page = [r for r in rows if r["document_id"] == first["document_id"] and r["page"] == first["page"]
                 and r["bbox"] is not None]
    try:
        source, _ = stages.load_source(p.store, first["document_id"])
        content = stages.source_bytes(source)
    except Exception:
        return None
    aspect = None
    for row in p.store.page_rows(first["document_id"]):
        if row["page"] == first["page"] and row["width"] and row["height"]:
            aspect = row["width"] / row["height"]
    boxes = [(r["bbox"]["x0"], r["bbox"]["y0"], r["bbox"]["x1"], r["bbox"]["y1"]) for r in same_page]
    png = render_page_preview(content, source["media_type"], first["page"], boxes,
                              labels=[str(r["index"]) for r in same_page], aspect=aspect,
                              password=password_for(source["path"], p.settings.passwords))
    if png is None:
        return None
    return f"{first['path']}, page {first['page']}:\n\n" + preview_markdown_image(png, f"{first['path']} p{first['page']}")


PAGE_PICTURE = "page_picture (chunk boxes drawn)"
_WORD = re.compile(r"\w+")
COVERAGE_FLOOR = 0.95


def page_text_check(pages: list[dict], rows: list[dict]) -> AssetCheckResult:
    """Each read page's words (as its reader read them) appear in that page's chunks, at
    least COVERAGE_FLOOR of them (chunk text need not rebuild the page text exactly)."""
    chunk_words: dict[tuple[str, int], set[str]] = {}
    for row in rows:
        if row.get("text"):
            chunk_words.setdefault((row["document_id"], row["page"]), set()).update(
                w.lower() for w in _WORD.findall(row["text"]))
    low = []
    for page in pages:
        words = [w.lower() for w in _WORD.findall(page["text"])]
        if not words:
            continue
        have = chunk_words.get((page["document_id"], page["page"]), set())
        share = sum(1 for w in words if w in have) / len(words)
        if share < COVERAGE_FLOOR:
            low.append({"document": page["document_id"], "page": page["page"], "covered": round(share, 3)})
    return AssetCheckResult(check_name="page_text_covered", passed=not low, severity=AssetCheckSeverity.WARN,
                            metadata={"pages_below_floor": findings_table(low), "count": len(low),
                                      "pages": len(pages), "floor": COVERAGE_FLOOR})


def chunk_map_checks(rows: list[dict], max_tokens: int) -> list[AssetCheckResult]:
    from ingest_pipeline.chunkers.grid import _grid_problem
    from ingest_pipeline.contract import Layout

    bad_boxes, empty, over, grids = [], [], [], []
    flagged = 0
    seen, dupes = set(), []
    for row in rows:
        if row["bbox"] is not None:
            b = row["bbox"]
            try:
                validate_bbox((b["x0"], b["y0"], b["x1"], b["y1"]))
            except ContractError as exc:
                bad_boxes.append({"document": row.get("document_id"), "page": row.get("page"),
                                  "chunk_id": row["chunk_id"], "error": str(exc)})
        if row["chunk_id"] in seen:
            dupes.append({"document": row.get("document_id"), "page": row.get("page"), "chunk_id": row["chunk_id"]})
        seen.add(row["chunk_id"])
        if not (row.get("text") or "").strip() and row.get("content_type") != "image" and row.get("text") is not None:
            empty.append({"document": row.get("document_id"), "page": row.get("page"), "chunk_id": row["chunk_id"]})
        meta = row.get("meta") or ""
        if '"token_overflow": true' in meta:
            flagged += 1
        layout = Layout.from_json(row.get("layout"))
        if layout is not None and layout.table is not None:
            problem = _grid_problem(row.get("text") or "", layout.table, '"ragged": true' in meta)
            if problem:
                grids.append({"document": row["document_id"], "page": row["page"], "chunk_id": row["chunk_id"],
                              "problem": problem})
        if row.get("tokens") and row["tokens"] > max_tokens and '"token_overflow": true' not in meta:
            over.append({"document": row.get("document_id"), "page": row.get("page"), "chunk_id": row["chunk_id"],
                         "tokens": row["tokens"]})
    return [
        AssetCheckResult(check_name="valid_boxes", passed=not bad_boxes,
                         metadata={"invalid": findings_table(bad_boxes), "count": len(bad_boxes)}),
        AssetCheckResult(check_name="unique_chunk_ids", passed=not dupes,
                         metadata={"duplicates": findings_table(dupes), "count": len(dupes)}),
        AssetCheckResult(check_name="no_empty_chunks", passed=not empty,
                         metadata={"empty": findings_table(empty), "count": len(empty)}),
        AssetCheckResult(check_name="within_token_limit", passed=not over,
                         metadata={"over_limit_unflagged": findings_table(over), "count": len(over),
                                   "flagged": flagged, "max_tokens": max_tokens}),
        AssetCheckResult(check_name="table_grid_consistent", passed=not grids,
                         metadata={"tables": findings_table(grids), "count": len(grids)}),
    ]
