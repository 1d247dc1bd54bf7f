"""One asset per installed chunker version: ``chunks/<id>_v<version>``."""


import time
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    Field,
    MaterializeResult,
    asset,
)

from ingest_pipeline import stages
from ingest_pipeline.assets.common import BATCH_POLICY, for_each_document, summary_metadata
from ingest_pipeline.assets.sources import pages
from ingest_pipeline.partitions import documents_partitions
from ingest_pipeline.registry import ChunkerInfo, ChunkerRegistry, chunker_config
from ingest_pipeline.resources import IngestResource

_SCALARS = {"integer": int, "number": float, "boolean": bool, "string": str}


def chunk_asset_key(info: ChunkerInfo) -> AssetKey:
    return AssetKey(["chunks", info.asset_name])


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
            fields[name] = Field(_SCALARS[kind], default_value=value, is_required=False,
                                 description=prop.get("description"))
        elif kind == "array" and prop.get("items", {}).get("type") == "string":
            fields[name] = Field([str], default_value=sorted(value or []), is_required=False,
                                 description=prop.get("description"))
    return fields


def build_chunk_asset(registry: ChunkerRegistry, chunker: Any):
    info = registry.info(chunker)
    check_names = tuple(getattr(chunker, "check_names", ()) or ())
    key = chunk_asset_key(info)
    kind = "default" if info.default else "opt-in"
    description = f"{info.ref} ({kind}): {info.summary or 'chunks'}. Claims per page, in reading order."

    @asset(
        key=key,
        partitions_def=documents_partitions,
        backfill_policy=BATCH_POLICY,
        group_name="chunkers",
        deps=[pages],
        kinds={"parquet"},
        code_version=f"{info.version}:{info.config_hash}",
        description=description,
        config_schema=config_schema_for(chunker),
        check_specs=[AssetCheckSpec(name, asset=key) for name in check_names],
        metadata={"chunker": info.ref, "default": info.default, "media_types": list(info.media_types or ["*"])},
        tags={"chunker": info.asset_name},
    )
    def _chunks(context: AssetExecutionContext, ingest: IngestResource) -> MaterializeResult:
        p = ingest.pipeline()
        active, active_info = chunker, info
        overrides = dict(context.op_config or {})
        if overrides and overrides != {k: v for k, v in chunker_config(chunker).items() if k in overrides}:
            active = type(chunker)(overrides)
            active_info = ChunkerRegistry.info(p.registry, active)
        started = time.perf_counter()
        outcomes = for_each_document(context, context.partition_keys, lambda doc: stages.guarded(
            p.lake, f"chunks/{active_info.ref}", doc, context.run_id,
            stages.run_chunker, p.settings, p.lake, active, active_info, doc, context.run_id, p.parser))
        pieces = sum(int(o.detail.get("pieces", 0) or 0) for o in outcomes)
        checks = []
        for name in check_names:
            failures, warn = [], False
            for doc in context.partition_keys:
                meta = p.lake.meta("claims", active_info.asset_name, doc) or {}
                for c in meta.get("checks", []):
                    if c["name"] == name and not c["passed"]:
                        failures.append({"document": doc, **c.get("metadata", {})})
                        warn = warn or c.get("severity") == "warn"
            checks.append(AssetCheckResult(
                check_name=name, passed=not failures,
                severity=AssetCheckSeverity.WARN if warn else AssetCheckSeverity.ERROR,
                metadata={"failures": failures[:20], "documents_failing": len(failures)}))
        metrics: dict[str, Any] = {}
        for doc in context.partition_keys:
            doc_metrics = (p.lake.meta("claims", active_info.asset_name, doc) or {}).get("metrics") or {}
            if doc_metrics:
                metrics[doc] = doc_metrics
        return MaterializeResult(
            metadata=summary_metadata(outcomes, started, pieces=pieces, chunker=active_info.ref,
                                      config_hash=active_info.config_hash,
                                      **({"chunker_metrics": metrics} if metrics else {})),
            check_results=checks,
        )

    return _chunks


def build_chunk_assets(registry: ChunkerRegistry) -> list:
    return [build_chunk_asset(registry, c) for c in registry.all()]
