"""Per-profile assets: the merged chunk map, its embeddings and its LanceDB rows. Each calls
its stage per document and turns the stage's outcomes and findings into metadata and checks."""

import time
from collections.abc import Sequence

from dagster import (
    AssetCheckResult,
    AssetExecutionContext,
    MetadataValue,
    asset,
)

from ingest_pipeline import stages
from ingest_pipeline.assets.checks import (
    by_document,
    check_result,
    document_check,
    materialized_with_checks,
    processed_check,
)
from ingest_pipeline.assets.chunks import chunk_asset_key
from ingest_pipeline.assets.common import (
    BATCH_POLICY,
    SERVED,
    about_asset,
    chunk_listing,
    chunk_map_key,
    document_keys,
    embed_last,
    embeddings_key,
    for_each_document,
    forced,
    lake_files,
    lancedb_key,
    report_partitions,
    runs_step_here,
    served_first,
)
from ingest_pipeline.assets.sources import pages
from ingest_pipeline.embedding.port import Embedder
from ingest_pipeline.instance.pools import LANCEDB_POOL
from ingest_pipeline.partitions import documents_partitions
from ingest_pipeline.registry import ChunkerRegistry
from ingest_pipeline.resources import (
    ChunkersResource,
    EmbedderResource,
    IndexResource,
    IngestResource,
    StoreResource,
)
from ingest_pipeline.runtime import progress
from ingest_pipeline.runtime.budget import OverBudget, stage_budget
from ingest_pipeline.settings import Profile
from ingest_pipeline.stages.chunk_checks import chunk_map_findings, chunk_row_findings, page_text_finding
from ingest_pipeline.stages.index import index_findings
from ingest_pipeline.stages.page_pictures import page_picture
from ingest_pipeline.storage.stage_names import StageName
from ingest_pipeline.storage.vector_index import table_name

CHUNK_MAP_CHECKS = {
    "valid_boxes": "Every chunk box is inside the page, with x0 < x1 and y0 < y1.",
    "unique_chunk_ids": "No two chunks of the profile share a chunk id.",
    "no_empty_chunks": "No text chunk is empty or whitespace only.",
    "within_token_limit": "Every chunk fits the embedder's token limit, or is flagged as over it.",
    "page_text_covered": "Each read page's words appear in its chunks or in lines left out on purpose "
    "(95% floor; warns).",
    "table_grid_consistent": "Every table chunk the model sees (after token splits) has one line per "
    "layout row and one field per column, cells inside the grid and apart.",
}


def build_profile_assets(
    registry: ChunkerRegistry,
    profile: Profile,
    model: Embedder,
    indexed: bool = True,
    cut_as: Sequence[Profile] = (),
) -> list:
    """The profile's chunk map, and for an indexed profile its embeddings and LanceDB rows.
    ``model`` is the profile's embedder: its identity is part of each asset's code version,
    so changing it shows in the graph as a change of exactly this profile's assets.
    ``cut_as``: the profiles whose chunker versions cut some of its documents (the served
    profile's, by the routes' ``serve``), which its chunk map then depends on too."""
    chunk_map = chunk_map_asset(registry, profile, model, indexed, cut_as)
    if not indexed:  # nothing searches it: no vectors, no LanceDB table
        return [chunk_map]
    return [chunk_map, embeddings_asset(profile, model), lancedb_asset(profile, model)]


def _chunk_map_version(model: Embedder, order: list, cut_as: Sequence[Profile]) -> str:
    """What the chunk map's output depends on besides its documents."""
    versions = "+".join(f"{i.ref}:{i.config_hash}" for i in order)
    routed = "".join(f"|{p.name}" for p in cut_as)
    return f"{stages.STAGE_VERSIONS['chunk_map']}:{model.model_id}:{model.max_tokens}:{versions}{routed}"


def _routed_versions(registry: ChunkerRegistry, order: list, cut_as: Sequence[Profile], profile: str) -> list:
    """The chunker versions of the ``cut_as`` profiles, as ``profile`` cuts with them, that
    are not in ``order``."""
    routed = [registry.info(c) for p in cut_as for c in registry.order_for(p.chunkers, profile)]
    return list({i.ref: i for i in routed if i not in order}.values())


def _about_chunk_map(profile: Profile, model: Embedder, order: list) -> dict:
    return {
        "order": [i.ref for i in order],
        "profile": profile.name,
        "embedder": model.ref,
        **about_asset(
            lake_files(f"chunks/{profile.name}"),
            f"select path, page, role, text from chunks where profile = '{profile.name}'",
        ),
    }


def chunk_map_asset(registry: ChunkerRegistry, profile: Profile, model: Embedder, indexed: bool, cut_as=()):
    """The profile's merged chunk map: its chunker versions' claims, first in order wins,
    sized in its embedder's tokens."""
    max_tokens = model.max_tokens
    order = [registry.info(c) for c in registry.order_for(profile.chunkers, profile.name)]
    routed = _routed_versions(registry, order, cut_as, profile.name)
    map_key = chunk_map_key(profile.name)

    @asset(
        key=map_key,
        partitions_def=documents_partitions,
        backfill_policy=BATCH_POLICY,
        group_name=f"profile_{profile.name}",
        deps=[pages, *[chunk_asset_key(i) for i in [*order, *routed]]],
        kinds={"parquet"},
        code_version=_chunk_map_version(model, order, cut_as),
        description=f"Profile '{profile.name}': claims merged per page, first in order wins "
        f"({', '.join(i.ref for i in order)}).",
        metadata=_about_chunk_map(profile, model, order),
        check_specs=[
            *(document_check(n, map_key, d) for n, d in CHUNK_MAP_CHECKS.items()),
            processed_check(map_key),
        ],
        op_tags=served_first(SERVED if indexed else 0),
    )
    def _chunk_map(
        context: AssetExecutionContext,
        ingest: IngestResource,
        store: StoreResource,
        chunkers: ChunkersResource,
        embedder: EmbedderResource,
    ):
        settings, st, registry = ingest.settings(), store.store(), chunkers.registry()
        started, force = time.perf_counter(), forced(context, ingest)
        keys = document_keys(context, settings, st)
        stage = StageName("chunk_map", profile.name).stage
        model = embedder.for_profile(profile.name)  # chunks are sized in its tokens

        def build(doc: str):
            with stage_budget(stage, settings.stage_timeout, settings.stage_memory_bytes):
                return stages.guarded(
                    st, stage, doc, context.run_id, stages.build_chunk_map,
                    st, registry, profile, model, doc, context.run_id, force=force, settings=settings,
                )  # fmt: skip

        if keys:  # the tokenizer loads before any document's budget starts
            model.count_tokens(["loaded"])
        outcomes = for_each_document(context, keys, build)
        if indexed and runs_step_here(context, settings, embeddings_key(profile.name)):
            _embed_ahead(context, st, model, profile, keys, force)
        over = {}

        def budgeted(doc: str, work):  # a document's checks and picture, under its budget
            with stage_budget(stage, settings.stage_timeout, settings.stage_memory_bytes):
                try:
                    return work()
                except OverBudget as exc:
                    over[doc] = stages.record_error(st, stage, doc, exc, context.run_id)["reason"]
                    return None

        rows_by_doc, findings = chunk_map_findings(
            st, profile.name, keys, max_tokens, {o.document: o.kept for o in outcomes}, budgeted
        )
        flagged = {  # pages under the coverage floor, drawn too
            doc: [row["page"] for f in found if f.check == "page_text_covered" for row in f.rows]
            for doc, found in findings.items()
        }
        outcomes = [_over_budget(o, over, stage) for o in outcomes]
        stories = report_partitions(
            context,
            outcomes,
            started,
            lambda o: _chunk_map_metadata(st, settings, profile, rows_by_doc, o, budgeted, flagged),
        )
        yield from materialized_with_checks(context, outcomes, stories, findings)

    return _chunk_map


def _embed_ahead(context, st, embedder, profile: Profile, keys: list[str], force: bool) -> None:
    """Start the model on the profile's new texts while the run's other steps go on."""
    ahead = stages.EmbeddingPrefetch.start(st, embedder, profile, keys, context.run_id, force=force)
    if ahead:
        context.log.info(
            f"Embedding {len(ahead.texts)} new texts of profile '{profile.name}' while the run's "
            f"other steps go on; {embeddings_key(profile.name).to_user_string()} takes them"
        )


def _over_budget(outcome, over: dict[str, str], stage: str):
    """A document whose checks went over budget is failed, with the errors row's reason."""
    if outcome.document not in over or outcome.status == "failed":
        return outcome
    return stages.Outcome(
        outcome.document, "failed", {"reason": over[outcome.document], "stage": stage}, outcome.kept
    )


def _chunk_map_metadata(
    st, settings, profile: Profile, rows_by_doc: dict, outcome, budgeted, flagged: dict[str, list[int]]
) -> dict:
    """A chunk map partition's own metadata: its counts, every chunk's text and the pictures
    of its first page with boxes and of the pages the coverage check flagged."""
    rows = rows_by_doc.get(outcome.document, [])
    extra = {
        "profile": profile.name,
        "chunks": len(rows),
        "chunkers_used": sorted({r["chunker"] for r in rows}),
    }
    if rows:
        extra["all_chunks"] = chunk_listing(rows, rows[0].get("path") or outcome.document, profile.name)
        picture = budgeted(
            outcome.document,
            lambda: page_picture(st, settings, rows, flagged.get(outcome.document, ()), profile.name),
        )
        if picture:
            extra[PAGE_PICTURE] = MetadataValue.md(picture)
    return extra


def embeddings_asset(profile: Profile, model: Embedder):
    """A vector per text chunk of the profile, through the embedding cache."""
    emb_key = embeddings_key(profile.name)

    @asset(
        key=emb_key,
        partitions_def=documents_partitions,
        backfill_policy=BATCH_POLICY,
        group_name=f"profile_{profile.name}",
        deps=[chunk_map_key(profile.name)],
        kinds={"parquet"},
        code_version=f"{stages.STAGE_VERSIONS['embeddings']}:{model.model_id}",
        description=f"Profile '{profile.name}': a vector per text chunk by {model.ref}, through the "
        "embedding cache.",
        metadata={
            "profile": profile.name,
            "embedder": model.ref,
            "model": model.model_id,
            **about_asset(
                lake_files(f"embeddings/{profile.name}"),
                f"select document_id, count(*) as vectors from embeddings where profile = '{profile.name}' "
                "group by all",
            ),
        },
        check_specs=[processed_check(emb_key)],
        op_tags=embed_last(),
    )
    def _embeddings(
        context: AssetExecutionContext,
        ingest: IngestResource,
        store: StoreResource,
        embedder: EmbedderResource,
    ):
        st, model = store.store(), embedder.for_profile(profile.name)
        started = time.perf_counter()
        keys = document_keys(context, ingest.settings(), st)
        ahead = stages.EmbeddingPrefetch.take(context.run_id, profile.name)
        outcomes = stages.embed_documents(
            st,
            model,
            profile,
            keys,
            context.run_id,
            on_done=lambda o: progress.report(emb_key.to_user_string(), o),
            force=forced(context, ingest),
            prefetched=ahead,
        )
        stories = report_partitions(
            context, outcomes, started, lambda o: {"embedder": model.ref, "model": model.model_id}
        )
        yield from materialized_with_checks(context, outcomes, stories)

    return _embeddings


def lancedb_asset(profile: Profile, model: Embedder):
    """The profile's documents' rows in its LanceDB table."""
    lance_key = lancedb_key(profile.name)

    @asset(
        key=lance_key,
        partitions_def=documents_partitions,
        backfill_policy=BATCH_POLICY,
        group_name=f"profile_{profile.name}",
        deps=[embeddings_key(profile.name)],
        kinds={"lancedb"},
        pool=LANCEDB_POOL,
        code_version=f"{stages.STAGE_VERSIONS['lancedb']}:{model.model_id}",
        description=f"Profile '{profile.name}': the documents' rows in LanceDB table "
        f"{table_name(profile.name)}.",
        metadata={
            "profile": profile.name,
            "embedder": model.ref,
            "model": model.model_id,
            **about_asset(
                f"lancedb/{table_name(profile.name)}.lance, one LanceDB table for every document",
                search=f'ingest-pipeline search "your question" --profile {profile.name}',
            ),
        },
        check_specs=[
            document_check(
                "rows_match_parquet", lance_key, "Each document's LanceDB rows equal its chunk map's rows."
            ),
            processed_check(lance_key),
        ],
    )
    def _lancedb(
        context: AssetExecutionContext,
        ingest: IngestResource,
        store: StoreResource,
        index: IndexResource,
        embedder: EmbedderResource,
    ):
        st, lance, model = store.store(), index.index(), embedder.for_profile(profile.name)
        started, force = time.perf_counter(), forced(context, ingest)
        keys = document_keys(context, ingest.settings(), st)
        stage = StageName("lancedb", profile.name).stage

        def write(doc: str):
            return stages.guarded(
                st, stage, doc, context.run_id,
                stages.index_document, st, lance, profile, doc, context.run_id, force=force, embedder=model,
            )  # fmt: skip

        outcomes = for_each_document(context, keys, write)
        if any(o.status == "new" for o in outcomes):
            lance.refresh_text_index(profile.name)
        counts, finding = index_findings(st, lance, profile.name, keys)
        table_rows = lance.count(profile.name)
        rows_of = lambda o: {  # noqa: E731
            "table": table_name(profile.name),
            "embedder": model.ref,
            "document_rows": counts.get(o.document, 0),
            "table_rows": table_rows,
        }
        stories = report_partitions(context, outcomes, started, rows_of)
        findings = {doc: [found] for doc, found in by_document(finding, keys).items()}
        yield from materialized_with_checks(context, outcomes, stories, findings)

    return _lancedb


PAGE_PICTURE = "page_picture (chunk boxes drawn)"


def page_text_check(pages: list[dict], rows: list[dict]) -> AssetCheckResult:
    """The page coverage check over plain rows (see ``stages.chunk_map.page_text_finding``)."""
    return check_result(page_text_finding(pages, rows))


def chunk_map_checks(rows: list[dict], max_tokens: int) -> list[AssetCheckResult]:
    """The chunk-row checks over plain rows (see ``stages.chunk_map.chunk_row_findings``)."""
    return [check_result(f) for f in chunk_row_findings(rows, max_tokens)]
