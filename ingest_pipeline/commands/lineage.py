"""Follow a chunk back to its bytes: source, reader, chunker version, config, run and
materialization, page and box."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from ingest_pipeline.identity import real_name, sha256_bytes
from ingest_pipeline.storage.catalog import query

if TYPE_CHECKING:
    from ingest_pipeline.parts import Parts


def _materialization(
    instance: Any, key_path: list[str], partition: str, run_id: str
) -> dict[str, Any] | None:
    from dagster import AssetKey, AssetRecordsFilter

    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(key_path), asset_partitions=[partition]), limit=200
    ).records
    for record in records:
        if record.run_id == run_id:
            return {
                "asset": "/".join(key_path),
                "partition": partition,
                "run_id": run_id,
                "storage_id": record.storage_id,
                "timestamp": record.timestamp,
            }
    return None


def explain_chunk(
    parts: Parts, chunk_id: str, profile: str | None = None, instance: Any = None
) -> list[dict]:
    """The chain behind a chunk id, one entry per profile that holds it."""
    rows = query(
        parts.lake,
        "SELECT * FROM chunk_lineage WHERE chunk_id = ? AND (? IS NULL OR profile = ?)",
        [chunk_id, profile, profile],
    ).to_pylist()
    if not rows:
        return []
    if instance is None:
        from ingest_pipeline.instance.home import instance_for

        instance = instance_for(parts.settings.dagster_home)
    explained = []
    for row in rows:
        claim_asset = ["chunks", row["chunker"].replace("@", "_v")]
        verified = None
        if row["uri"] and os.path.exists(real_name(row["uri"])):
            with open(real_name(row["uri"]), "rb") as handle:
                verified = sha256_bytes(handle.read()) == row["source_sha256"]
        explained.append(
            {
                "chunk_id": row["chunk_id"],
                "label": row["label"],
                "profile": row["profile"],
                "source": {
                    "path": row["path"],
                    "uri": row["uri"],
                    "sha256": row["source_sha256"],
                    "media_type": row["media_type"],
                    "bytes_match": verified,
                },
                "reader": row["reader"],
                "chunker": row["chunker"],
                "config_hash": row["config_hash"],
                "config": _config_values(parts, row["config_hash"]),
                "page": row["page"],
                "index": row["index"],
                "bbox": row["bbox"],
                "bbox_reason": row["bbox_reason"],
                "run_id": row["run_id"],
                "materializations": [
                    m
                    for m in (
                        _materialization(
                            instance, [f"chunk_map_{row['profile']}"], row["document_id"], row["run_id"]
                        ),
                        _materialization(instance, claim_asset, row["document_id"], row["run_id"]),
                    )
                    if m
                ],
            }
        )
    return explained


def _config_values(parts: Parts, config_hash: str) -> dict[str, Any] | None:
    """What the chunk's config hash stands for (the ``configs`` table), else None (a chunk
    cut before configurations were kept)."""
    from ingest_pipeline.storage.configs import values_of

    kept = values_of(parts.store, config_hash)
    if kept is None:
        return None
    return {
        "values": kept["config"],
        "code_version": kept["code_version"],
        "first_seen": kept["first_seen"].isoformat(),
        "last_seen": kept["last_seen"].isoformat(),
    }


def format_chain(chain: dict[str, Any]) -> str:
    src = chain["source"]
    box = chain["bbox"]
    where = (
        f"[{box['x0']:.3f}, {box['y0']:.3f}, {box['x1']:.3f}, {box['y1']:.3f}]"
        if box
        else chain["bbox_reason"]
    )
    match = {True: "bytes on disk match", False: "bytes on disk CHANGED since", None: "file not found"}[
        src["bytes_match"]
    ]
    lines = [
        f"chunk {chain['chunk_id']} ({chain['label']}) in profile '{chain['profile']}'",
        f"  source   {src['path']}  sha256 {src['sha256']}  ({match})",
        f"  reader   {chain['reader']}",
        f"  chunker  {chain['chunker']}  config {chain['config_hash']}",
        _config_line(chain["config"]),
        f"  page     {chain['page']}  box {where}",
        f"  run      {chain['run_id']}",
    ]
    for m in chain["materializations"]:
        lines.append(f"  written  {m['asset']} [{m['partition']}] event {m['storage_id']}")
    return "\n".join(lines)


def _config_line(config: dict[str, Any] | None) -> str:
    if config is None:
        return "  settings (not kept: cut before the configs table existed)"
    values = json.dumps(config["values"], sort_keys=True)
    return f"  settings {values}  ({config['code_version']}, first seen {config['first_seen']})"
