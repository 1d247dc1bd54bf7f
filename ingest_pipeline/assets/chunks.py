"""One asset per installed chunker version: ``chunks/<id>_v<version>``."""

import time
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetKey,
    Field,
    MetadataValue,
    asset,
)

from ingest_pipeline import media_types as mt
from ingest_pipeline import stages
from ingest_pipeline.assets.checks import document_check, materialized_with_checks, processed_check
from ingest_pipeline.assets.common import (
    BATCH_POLICY,
    LEADS,
    SERVED,
    about_asset,
    chunk_map_key,
    claim_listing,
    document_keys,
    embeddings_key,
    for_each_document,
    forced,
    lake_files,
    report_partitions,
    runs_step_here,
    served_first,
)
from ingest_pipeline.assets.sources import pages
from ingest_pipeline.partitions import documents_partitions
from ingest_pipeline.registry import ChunkerInfo, ChunkerRegistry, chunker_config, reconfigured
from ingest_pipeline.resources import (
    ChunkersResource,
    EmbedderResource,
    IngestResource,
    ParseWorkerResource,
    StoreResource,
)
from ingest_pipeline.runtime.budget import OverBudget, stage_budget
from ingest_pipeline.stages.claims import claim_detail, claim_findings, flagged_pages
from ingest_pipeline.stages.page_pictures import page_picture
from ingest_pipeline.storage.stage_names import StageName

_SCALARS = {"integer": int, "number": float, "boolean": bool, "string": str}


def chunk_asset_key(info: ChunkerInfo) -> AssetKey:
    return AssetKey.from_user_string(StageName.chunker(info.ref).asset)


def config_schema_for(chunker: Any) -> dict[str, Field]:
    """Dagster config fields mirroring the chunker's pydantic config, defaulting to the
    configured values, so the launchpad can edit them (a new config hash follows)."""
    model = getattr(chunker, "config", None)
    if model is None or not hasattr(model, "model_json_schema"):
        return {}
    props = model.model_json_schema().get("properties", {})
    current = chunker_config(chunker)
    fields = {}
    for name, prop in props.items():
        kind = prop.get("type")
        value = current.get(name)
        if kind in _SCALARS:
            fields[name] = Field(
                _SCALARS[kind], default_value=value, is_required=False, description=prop.get("description")
            )
        elif kind == "array" and prop.get("items", {}).get("type") == "string":
            fields[name] = Field(
                [str],
                default_value=sorted(value or []),
                is_required=False,
                description=prop.get("description"),
            )
    return fields


def build_chunk_asset(
    registry: ChunkerRegistry, chunker: Any, served: bool = False, leads: Sequence[str] = ()
):
    """The version's asset; ``served``: an indexed profile uses it; ``leads``: the indexed
    profiles it leads for its formats, whose texts it hands to the model as it goes."""
    info = registry.info(chunker)
    check_names = tuple(getattr(chunker, "check_names", ()) or ())

    @asset(**_asset_spec(chunker, info, check_names, served, leads))
    def _chunks(
        context: AssetExecutionContext,
        ingest: IngestResource,
        store: StoreResource,
        chunkers: ChunkersResource,
        parse: ParseWorkerResource,
        embedder: EmbedderResource,
    ):
        settings, st, worker = ingest.settings(), store.store(), parse.worker()
        active, active_info = chunker, info
        overrides = dict(context.op_config or {})
        if overrides and overrides != {k: v for k, v in chunker_config(chunker).items() if k in overrides}:
            active = reconfigured(chunker, overrides)
            active_info = chunkers.registry().info(active)
        started, force = time.perf_counter(), forced(context, ingest)
        keys = document_keys(context, settings, st)
        feeder = _Feeder(context, st, embedder, _profiles_led_here(context, settings, leads))
        stage = StageName.chunker(active_info.ref).stage

        def chunk(doc: str):
            outcome = stages.guarded(
                st, stage, doc, context.run_id, stages.run_chunker,
                settings, st, active, active_info, doc, context.run_id, worker,
                force=force, keep_pieces=bool(feeder.profiles), registry=chunkers.registry(),
            )  # fmt: skip
            feeder.feed(doc, outcome)
            return outcome

        # a version whose texts go to the model ahead takes the shortest documents first, so
        # the model starts on their texts seconds into the step instead of after the longest
        order = _shortest_first(st, keys) if feeder.profiles else keys
        outcomes = for_each_document(context, order, chunk)
        feeder.log()
        written = {o.document: o.kept["meta"] for o in outcomes if "meta" in o.kept}  # not read back
        metas = {
            doc: written[doc] if doc in written else st.claim_meta(active_info.asset_name, doc) or {}
            for doc in keys
        }
        stories = report_partitions(
            context,
            outcomes,
            started,
            lambda o: _claim_metadata(st, settings, active_info, metas.get(o.document, {}), o),
        )
        findings = {doc: claim_findings({doc: metas[doc]}, check_names) for doc in keys}
        yield from materialized_with_checks(context, outcomes, stories, findings)

    return _chunks


LISTED = ["page", "piece", "text", "bbox", "bbox_reason", "role", "header_path"]


def _claim_metadata(st, settings, info: ChunkerInfo, meta: Mapping[str, Any], outcome) -> dict[str, Any]:
    """A chunker version's partition: its claim's detail, every piece it cut, readable, and
    for a PDF the pictures of its first page with pieces and of the pages its checks flagged."""
    detail = claim_detail(meta, info, failed=outcome.status == "failed")
    listed = meta and outcome.status != "skipped"  # a skipped document's old claim is not this run's
    table = st.lake.read("claims", info.asset_name, outcome.document, columns=LISTED) if listed else None
    if table is not None and table.num_rows:
        source = stages.load_source(st, outcome.document)[0]
        path = outcome.kept.get("path") or source["path"]
        detail["all_pieces"] = claim_listing(table, path, info.ref)
        if mt.base(source.get("media_type")) == mt.PDF:
            picture = _claim_picture(st, settings, info, outcome.document, path, table, meta)
            if picture:
                detail[PIECES_PICTURE] = MetadataValue.md(picture)
    return detail


PIECES_PICTURE = "page_picture (piece boxes drawn)"


def _claim_picture(st, settings, info: ChunkerInfo, document: str, path: str, table, meta) -> str | None:
    """The pictures of a claim's pages with its pieces' boxes, under the stage's budget (a
    document over it just has no picture)."""
    rows = [
        {"document_id": document, "path": path, "page": page, "index": piece, "bbox": bbox}
        for page, piece, bbox in zip(*(table.column(c).to_pylist() for c in ("page", "piece", "bbox")))
    ]
    stage = StageName.chunker(info.ref).stage
    try:
        with stage_budget(stage, settings.stage_timeout, settings.stage_memory_bytes):
            return page_picture(
                st, settings, rows, flagged_pages(meta), chunker=info.ref, flagged_by=f"{info.ref}'s checks"
            )
    except OverBudget:
        return None


def _asset_spec(chunker: Any, info: ChunkerInfo, check_names: tuple, served: bool, leads: Sequence[str]):
    """The ``@asset`` arguments of a chunker version's asset."""
    check_descriptions = dict(getattr(chunker, "check_descriptions", {}) or {})
    key = chunk_asset_key(info)
    kind = "default" if info.default else "opt-in"
    return dict(
        key=key,
        partitions_def=documents_partitions,
        backfill_policy=BATCH_POLICY,
        group_name="chunkers",
        deps=[pages],
        kinds={"parquet"},
        code_version=f"{info.version}:{info.config_hash}",
        description=f"{info.ref} ({kind}): {info.summary or 'chunks'}. Claims per page, in reading order.",
        config_schema=config_schema_for(chunker),
        check_specs=[
            document_check(
                name,
                key,
                check_descriptions.get(name) or f"{info.ref}'s own check '{name}' over the claims it cut",
            )
            for name in check_names
        ]
        + [processed_check(key)],
        metadata={
            "chunker": info.ref,
            "default": info.default,
            "media_types": list(info.media_types or ["*"]),
            **about_asset(
                lake_files(f"claims/{info.asset_name}"),
                f"select document_id, page, piece, text from claims where chunker = '{info.ref}'",
            ),
        },
        tags={"chunker": info.asset_name},
        op_tags=served_first(LEADS if leads else SERVED if served else 0),
    )


def _profiles_led_here(context: AssetExecutionContext, settings, leads: Sequence[str]) -> list:
    """The indexed profiles this version leads whose chunk map and embeddings steps run in
    this process: each document's texts go to the model as soon as its claims are written
    (the chunk map then says which of them it holds)."""
    return [
        p
        for p in settings.indexed_profiles
        if p.name in leads
        and all(
            runs_step_here(context, settings, key) for key in (chunk_map_key(p.name), embeddings_key(p.name))
        )
    ]


class _Feeder:
    """Hands each new document's texts of the led profiles to the model's prefetch."""

    def __init__(self, context: AssetExecutionContext, store, embedder, profiles: list) -> None:
        self.context, self.store, self.embedder, self.profiles = context, store, embedder, profiles
        self.handed = {p.name: 0 for p in profiles}

    def feed(self, doc: str, outcome) -> None:
        pieces = outcome.kept.pop("pieces", None)
        if not pieces or outcome.status != "new":
            return
        for profile in self.profiles:
            try:
                model = self.embedder.for_profile(profile.name)
                texts = stages.texts_ahead(profile, model, outcome.kept["path"], pieces)
                self.handed[profile.name] += stages.EmbeddingPrefetch.feed(
                    self.store, model, profile.name, texts, self.context.run_id
                )
            except Exception as exc:  # noqa: BLE001 - the embeddings step embeds them anyway
                self.context.log.warning(f"{doc}: its texts could not go to the model ahead ({exc})")

    def log(self) -> None:
        for name, count in self.handed.items():
            if count:
                self.context.log.info(
                    f"Handed {count} texts of profile '{name}' to the model as the documents' "
                    f"claims were written; it embeds them while the run goes on"
                )


def build_chunk_assets(
    registry: ChunkerRegistry,
    served: AbstractSet[str] = frozenset(),
    leads: Mapping[str, Sequence[str]] | None = None,
) -> list:
    """A chunk asset per installed version; ``served``: the asset names of the versions an
    indexed profile uses, whose steps a run takes first (``served_first``); ``leads``: per
    asset name, the indexed profiles the version leads for its formats (it goes first of all)."""
    leads = leads or {}
    return [
        build_chunk_asset(
            registry,
            c,
            registry.info(c).asset_name in served,
            tuple(leads.get(registry.info(c).asset_name, ())),
        )
        for c in registry.all()
    ]


def _shortest_first(store, keys: list[str]) -> list[str]:
    """The documents by their page count (as their pages step read them), fewest first;
    ties (and documents without pages yet) keep their order."""

    def pages(doc: str) -> int:
        return int(((store.pages_meta(doc) or {}).get("summary") or {}).get("pages") or 0)

    return sorted(keys, key=pages)
