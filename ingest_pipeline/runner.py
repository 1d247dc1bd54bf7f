"""Ingest files in process: register them as partitions, run the asset graph over them in
batched runs, forget vanished ones, and report what happened. The CLI calls this."""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ingest_pipeline.documents import collect, load_inventory, save_inventory, vanished
from ingest_pipeline.partitions import DOCUMENTS, contiguous_batches
from ingest_pipeline.pipeline import Pipeline
from ingest_pipeline.stages import remove_document

RUN_BATCH = 16
# In-process runs log to the Dagster instance (the UI shows them); the terminal gets errors only.
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


@dataclass
class IngestReport:
    documents: int = 0
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    warnings: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    texts_embedded: int = 0
    texts_from_cache: int = 0
    chunks: int = 0
    profile: str = ""
    run_ids: list[str] = field(default_factory=list)
    seconds: float = 0.0
    paths: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "documents": self.documents, "new": len(self.new), "changed": len(self.changed),
            "unchanged": len(self.unchanged), "failed": len(self.failed), "removed": len(self.removed),
            "texts_embedded": self.texts_embedded, "texts_from_cache": self.texts_from_cache,
            "chunks": self.chunks, "profile": self.profile, "seconds": round(self.seconds, 2), "run_ids": self.run_ids,
            "failures": {self.paths.get(d, d): errs for d, errs in sorted(self.failed.items())},
            "removed_documents": self.removed,
            "chunker_errors": {self.paths.get(d, d): errs for d, errs in sorted(self.warnings.items())},
        }


def ingest(
    pipeline: Pipeline,
    paths: Sequence[str] = (),
    instance: Any = None,
    progress: Callable[[int, int], None] | None = None,
    batch_size: int = RUN_BATCH,
) -> IngestReport:
    """Materialize every per-document asset for the documents under ``paths`` (default:
    the source root) in process, then refresh the catalog."""
    from ingest_pipeline.definitions import CATALOG_JOB, INGEST_JOB, build_definitions
    from ingest_pipeline.instance import instance_for
    from ingest_pipeline.sensors import range_tags

    started = time.perf_counter()
    settings, lake = pipeline.settings, pipeline.lake
    instance = instance or instance_for(settings.dagster_home)
    roots = list(paths) or [settings.source_root]
    if "://" not in settings.source_root:
        os.makedirs(settings.source_root, exist_ok=True)
    entries = collect(settings, roots)
    report = IngestReport(documents=len(entries), paths={e.document_id: e.path for e in entries})

    inventory = load_inventory(lake)
    for entry in vanished(inventory, roots):
        remove_document(lake, pipeline.index, entry.document_id)
        if instance.has_dynamic_partition(DOCUMENTS, entry.document_id):
            instance.delete_dynamic_partition(DOCUMENTS, entry.document_id)
        report.removed.append(entry.path)

    save_inventory(lake, entries)
    known = set(instance.get_dynamic_partitions(DOCUMENTS))
    new_keys = [e.document_id for e in entries if e.document_id not in known]
    if new_keys:
        instance.add_dynamic_partitions(DOCUMENTS, new_keys)
    ordered = instance.get_dynamic_partitions(DOCUMENTS)
    wanted = {e.document_id for e in entries}

    defs = build_definitions(settings)
    job = defs.resolve_job_def(INGEST_JOB)
    resources = _resource_for(pipeline)
    done = 0
    if progress:
        progress(0, len(wanted))
    for batch in contiguous_batches(ordered, wanted, batch_size):
        result = job.execute_in_process(
            instance=instance, tags=range_tags(batch[0], batch[-1]), resources=resources, raise_on_error=False,
            run_config=QUIET,
        )
        report.run_ids.append(result.run_id)
        served = f"embeddings_{settings.default_profile}"
        for event in result.get_asset_materialization_events():
            mat = event.event_specific_data.materialization
            if mat.asset_key.to_user_string() != served:
                continue
            meta = {k: v.value for k, v in mat.metadata.items()}  # this partition's own counts
            if not str(meta.get("status", "")).startswith("unchanged"):
                report.texts_embedded += int(meta.get("embedded", 0) or 0)
                report.texts_from_cache += int(meta.get("cached", 0) or 0)
        if not result.success:
            for doc in batch:
                report.failed.setdefault(doc, []).append(
                    {"stage": "run", "reason": f"run {result.run_id} failed; see the Dagster UI"})
        done += len(batch)
        if progress:
            progress(done, len(wanted))
    defs.resolve_job_def(CATALOG_JOB).execute_in_process(instance=instance, resources=resources,
                                                         raise_on_error=False, run_config=QUIET)
    _summarize(pipeline, report, entries)
    report.seconds = time.perf_counter() - started
    return report


def _resource_for(pipeline: Pipeline):
    from ingest_pipeline.resources import resources_for

    return resources_for(pipeline.settings)


def _summarize(pipeline: Pipeline, report: IngestReport, entries) -> None:
    from ingest_pipeline.catalog import query

    lake = pipeline.lake
    run_ids = set(report.run_ids)
    wanted = [e.document_id for e in entries]
    if not wanted:
        return
    keys = ", ".join("'" + k + "'" for k in wanted)
    errors = query(lake, f"SELECT document_id, stage, reason FROM errors WHERE document_id IN ({keys})").to_pylist()
    for row in errors:
        entry = {"stage": row["stage"], "reason": row["reason"]}
        if row["stage"].startswith("chunks/"):  # that chunker's pages went to the next one in order
            report.warnings.setdefault(row["document_id"], []).append(entry)
        else:
            report.failed.setdefault(row["document_id"], []).append(entry)
    sources = {r["document_id"]: r for r in query(
        lake, f"SELECT document_id, run_id FROM sources WHERE document_id IN ({keys})").to_pylist()}
    for doc in wanted:
        if doc in report.failed:
            continue
        row = sources.get(doc)
        if row is None:
            report.failed.setdefault(doc, []).append({"stage": "sources", "reason": "not observed"})
        elif row["run_id"] in run_ids:
            report.new.append(doc)
        else:
            report.unchanged.append(doc)
    profile = report.profile = pipeline.settings.default_profile
    report.chunks = query(lake, f"SELECT count(*) AS n FROM chunks WHERE profile = '{profile}' "
                                f"AND document_id IN ({keys})").to_pylist()[0]["n"]


def print_progress(done: int, total: int, stream=sys.stderr) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} documents")
    if done >= total:
        stream.write("\n")
    stream.flush()


def format_report(report: IngestReport) -> str:
    lines = [
        f"{report.documents} documents: {len(report.new)} new or changed, {len(report.unchanged)} unchanged, "
        f"{len(report.failed)} failed" + (f", {len(report.removed)} removed" if report.removed else ""),
        f"{report.chunks} chunks in the served profile '{report.profile}'; {report.texts_embedded} texts embedded, "
        f"{report.texts_from_cache} from the embedding cache; {report.seconds:.1f} s",
    ]
    if report.failed:
        lines.append("failed:")
        for doc, errs in sorted(report.failed.items(), key=lambda kv: report.paths.get(kv[0], kv[0])):
            reasons = "; ".join(f"{e['stage']}: {e['reason']}" for e in errs)
            lines.append(f"  {report.paths.get(doc, doc)}  {reasons}")
    if report.warnings:
        lines.append("chunker errors (their pages went to the next chunker in order):")
        for doc, errs in sorted(report.warnings.items(), key=lambda kv: report.paths.get(kv[0], kv[0])):
            lines.append(f"  {report.paths.get(doc, doc)}  " + "; ".join(f"{e['stage']}: {e['reason']}" for e in errs))
    counts = Counter(p.split("/")[0] for p in (report.paths.get(d, d) for d in report.new) if "/" in p)
    if len(counts) > 1:
        lines.append("new by folder: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return "\n".join(lines)
