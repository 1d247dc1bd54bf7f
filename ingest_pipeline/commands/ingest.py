"""Ingest files in process: register them as partitions, run the asset graph over them in
batched runs, forget vanished ones, and report what happened. The CLI calls this."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ingest_pipeline.documents import collect, superseded, vanished
from ingest_pipeline.instance.stale_runs import fail_stale_runs, process_tags
from ingest_pipeline.partitions import DOCUMENTS
from ingest_pipeline.resources import Parts
from ingest_pipeline.runtime.isolation import kept_worker
from ingest_pipeline.runtime.progress import Column, DocumentEvent, StageBoard, listening
from ingest_pipeline.stages import (
    FORCE_TAG,
    IN_PROCESS_TAG,
    EmbeddingPrefetch,
    empty_reason,
    finished,
    reconcile,
)
from ingest_pipeline.stages.reconcile import contiguous_batches
from ingest_pipeline.storage import catalog, queries
from ingest_pipeline.storage.freshness import Freshness

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
    empty: dict[str, str] = field(default_factory=dict)  # no chunks, no error: document -> why
    texts_embedded: int = 0
    texts_from_cache: int = 0
    chunks: int = 0
    profile: str = ""
    run_ids: list[str] = field(default_factory=list)
    seconds: float = 0.0
    paths: dict[str, str] = field(default_factory=dict)
    stages: list[dict[str, Any]] = field(default_factory=list)  # the progress table's final counts per column

    def as_dict(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "new": len(self.new),
            "changed": len(self.changed),
            "unchanged": len(self.unchanged),
            "failed": len(self.failed),
            "removed": len(self.removed),
            "texts_embedded": self.texts_embedded,
            "texts_from_cache": self.texts_from_cache,
            "chunks": self.chunks,
            "profile": self.profile,
            "seconds": round(self.seconds, 2),
            "run_ids": self.run_ids,
            "failures": {self.paths.get(d, d): errs for d, errs in sorted(self.failed.items())},
            "removed_documents": self.removed,
            "empty": len(self.empty),
            "empty_documents": {self.paths.get(d, d): r for d, r in sorted(self.empty.items())},
            "chunker_errors": {self.paths.get(d, d): errs for d, errs in sorted(self.warnings.items())},
            "stages": self.stages,
            "documents_by_status": {
                "new": sorted(self.paths.get(d, d) for d in self.new),
                "changed": sorted(self.paths.get(d, d) for d in self.changed),
                "unchanged": sorted(self.paths.get(d, d) for d in self.unchanged),
                "failed": sorted(self.paths.get(d, d) for d in self.failed),
            },
        }

    def status_of(self, document: str) -> str:
        """new | changed | unchanged | failed: a failed document is only failed."""
        if document in self.failed:
            return "failed"
        if document in self.new:
            return "new"
        return "changed" if document in self.changed else "unchanged"


class Watcher(Protocol):
    """What the command line draws while ``ingest`` works (see ``progress_display``)."""

    def started(self, board: StageBoard) -> None: ...

    def changed(self, board: StageBoard, event: DocumentEvent, done: tuple[Column, str] | None) -> None: ...

    def finished(self, board: StageBoard) -> None: ...


def ingest(
    parts: Parts,
    paths: Sequence[str] = (),
    instance: Any = None,
    watcher: Watcher | None = None,
    batch_size: int | None = None,
    force: bool = False,
) -> IngestReport:
    """Materialize every per-document asset for the documents under ``paths`` (default:
    the source root) in process, then refresh the catalog. Every count in the report is
    of this run: each document's outcome per asset is heard as it finishes. A document
    whose current marker still holds (``freshness``) is not run: its assets' stored
    outcomes are heard as unchanged. ``force`` ignores the markers and recomputes every
    stage of these documents whatever their fingerprints (each run is tagged
    ``ingest/force=true``, so the UI shows why). ``batch_size``: documents per run (default:
    ``[dagster] run_batch``, the size the sensor's runs have too)."""
    from ingest_pipeline.definitions import CATALOG_JOB, INGEST_JOB, build_definitions
    from ingest_pipeline.instance.home import instance_for
    from ingest_pipeline.sensors.batches import range_tags

    started = time.perf_counter()
    settings, store = parts.settings, parts.store
    batch_size = batch_size or settings.run_batch
    instance = instance or instance_for(settings.dagster_home)
    for run in fail_stale_runs(instance):
        sys.stderr.write(
            f"run {run.run_id} ({run.job_name}) was left unfinished by process {run.pid}, which is "
            "gone: marked failed, its pool slots freed\n"
        )
    roots = list(paths) or [settings.source_root]
    if "://" not in settings.source_root:
        os.makedirs(settings.source_root, exist_ok=True)
    inventory = store.inventory()
    entries = collect(settings, roots, known=inventory)
    report = IngestReport(documents=len(entries), paths={e.document_id: e.path for e in entries})

    gone = vanished(inventory, roots) + superseded(inventory, entries)
    report.removed = [entry.path for entry in gone]
    plan = reconcile(
        store,
        parts.index,
        entries,
        [e.document_id for e in gone],
        instance.get_dynamic_partitions(DOCUMENTS),
        batch_size,
    )
    for key in plan.remove:
        instance.delete_dynamic_partition(DOCUMENTS, key)
    if plan.add:
        instance.add_dynamic_partitions(DOCUMENTS, plan.add)
    wanted = {e.document_id for e in entries}
    indexed_before = store.indexed_documents(settings.default_profile)

    resources = parts.resources  # the runs use the very resources these parts come from
    defs = build_definitions(settings, resources)
    job = defs.resolve_job_def(INGEST_JOB)
    board = StageBoard(
        len(wanted), sorted(k.to_user_string() for k in job.asset_layer.selected_asset_keys), report.paths
    )
    heard: dict[str, dict[str, DocumentEvent]] = {}

    def hear(event: DocumentEvent) -> None:
        if event.document not in wanted:
            return
        heard.setdefault(event.document, {})[event.asset] = event
        done = board.add(event)
        if watcher:
            watcher.changed(board, event, done)

    freshness = Freshness(
        parts, [k.to_user_string() for k in job.asset_layer.selected_asset_keys], sorted(wanted)
    )
    checks = {} if force else {e.document_id: freshness.check(e) for e in entries}
    current = {doc for doc, check in checks.items() if check.current}
    if watcher:
        watcher.started(board)
    for doc in sorted(current):  # told as the stages themselves would tell an unchanged document
        for asset, (status, detail) in checks[doc].outcomes.items():
            hear(DocumentEvent(asset, doc, status, detail))
    try:
        parse = resources["parse"]  # one parse worker for all the batches, not one per run
        with listening(hear), kept_worker(parse.timeout, parse.memory_bytes()):
            for batch in contiguous_batches(plan.ordered, wanted - current, batch_size):
                result = job.execute_in_process(
                    instance=instance,
                    resources=resources,
                    raise_on_error=False,
                    run_config=QUIET,
                    tags={
                        **range_tags(batch[0], batch[-1]),
                        **process_tags(),
                        IN_PROCESS_TAG: "true",
                        **({FORCE_TAG: "true"} if force else {}),
                    },
                )
                report.run_ids.append(result.run_id)
                EmbeddingPrefetch.stop_run(result.run_id)  # one its embeddings step did not take
                if not result.success:
                    for doc in batch:
                        report.failed.setdefault(doc, []).append(
                            {"stage": "run", "reason": f"run {result.run_id} failed; see the Dagster UI"}
                        )
    finally:
        if watcher:
            watcher.finished(board)
    if report.run_ids or report.removed or not _catalog_exists(settings):
        defs.resolve_job_def(CATALOG_JOB).execute_in_process(
            instance=instance,
            resources=resources,
            tags=process_tags(),
            raise_on_error=False,
            run_config=QUIET,
        )
    con = catalog.connect(
        store, only=("errors", "chunks")
    )  # the runs' results, through the two views they need
    try:
        _summarize(parts, report, entries, heard, indexed_before, con)
        freshness.reload_errors(sorted(wanted - current), con)
        _mark(freshness, report, entries, current)
    finally:
        con.close()
    report.stages = board.as_dicts()
    report.seconds = time.perf_counter() - started
    return report


def _mark(freshness: Freshness, report: IngestReport, entries, current: set[str]) -> None:
    """Mark each document that finished as current; forget the marker of one the run broke on."""
    for entry in entries:
        failures = report.failed.get(entry.document_id, [])
        if any(f["stage"] == "run" or f["reason"].startswith("not ") for f in failures):
            freshness.forget(entry.document_id)  # the run broke or never got to it: look again next time
        elif entry.document_id not in current:
            try:
                freshness.mark(entry)
            except OSError:  # the file went away after its run: no marker, so the next run looks again
                freshness.forget(entry.document_id)


def _catalog_exists(settings) -> bool:
    """A local catalog file is there (on a bucket root the catalog is built per query)."""
    return "://" not in settings.catalog_path and os.path.exists(settings.catalog_path)


def _summarize(
    parts: Parts,
    report: IngestReport,
    entries,
    heard: dict[str, dict[str, DocumentEvent]],
    indexed_before: set[str],
    con: Any = None,
) -> None:
    """Each document's status from what this run heard of it; failures from the errors table.
    ``indexed_before``: the documents the served profile had an index marker for when the
    run began (one the run indexed for the first time is new work, even if a killed run had
    observed its bytes already)."""
    from ingest_pipeline.storage.catalog import query

    store = parts.store
    wanted = [e.document_id for e in entries]
    if not wanted:
        return
    errors = query(
        store,
        queries.ERRORS_OF_DOCUMENTS,
        [wanted],
        con=con,
    ).to_pylist()
    for row in errors:
        entry = {"stage": row["stage"], "reason": row["reason"]}
        if row["stage"].startswith("chunks/"):  # that chunker's pages went to the next one in order
            report.warnings.setdefault(row["document_id"], []).append(entry)
        else:
            report.failed.setdefault(row["document_id"], []).append(entry)
    from ingest_pipeline.assets.common import embeddings_key, lancedb_key

    profile = report.profile = parts.settings.default_profile
    lancedb = lancedb_key(profile).to_user_string()
    indexing = parts.settings.is_indexed(profile)
    for doc in wanted:
        if doc in report.failed:
            continue
        events = heard.get(doc, {})
        source, indexed = events.get("sources"), events.get(lancedb)
        if source is None:
            report.failed.setdefault(doc, []).append(
                {"stage": "sources", "reason": "not observed in this run"}
            )
        elif (
            indexing
            and (indexed is None or indexed.status not in ("new", "unchanged"))
            and finished(store, profile, doc) is None
        ):
            report.failed.setdefault(doc, []).append(
                {
                    "stage": f"lancedb/{profile}",
                    "reason": "not finished: no index marker for its current bytes",
                }
            )
        elif source.status == "new" or (
            doc not in indexed_before and indexed is not None and indexed.status == "new"
        ):
            report.new.append(doc)  # new bytes, or bytes an earlier (killed) run observed and never indexed
        elif source.status == "changed" or any(
            e.status not in ("unchanged", "skipped", "failed") for e in events.values()
        ):
            report.changed.append(doc)  # new bytes, or a setting changed and a stage recomputed
        else:
            report.unchanged.append(doc)
    served = embeddings_key(profile).to_user_string()
    for doc_events in heard.values():  # the served profile's texts, as this run embedded or reused them
        event = doc_events.get(served)
        if event is not None:
            report.texts_embedded += int(event.detail.get("embedded", 0) or 0)
            report.texts_from_cache += int(event.detail.get("cached", 0) or 0)
    for doc in wanted:
        reason = None if doc in report.failed else empty_reason(store, profile, doc)
        if reason:
            report.empty[doc] = reason
    report.chunks = query(
        store,
        queries.PROFILE_CHUNK_COUNT,
        [profile, wanted],
        con=con,
    ).to_pylist()[0]["n"]
