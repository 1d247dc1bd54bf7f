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
from ingest_pipeline.settings import SourceFilter
from ingest_pipeline.stages import (
    FORCE_TAG,
    IN_PROCESS_TAG,
    EmbeddingPrefetch,
    StageError,
    empty_reason,
    finished,
    reconcile,
    record_error,
)
from ingest_pipeline.stages.reconcile import contiguous_batches
from ingest_pipeline.storage import catalog, queries
from ingest_pipeline.storage.freshness import Freshness
from ingest_pipeline.storage.stage_names import StageName

# In-process runs log to the Dagster instance (the UI shows them); the terminal gets errors only.
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
SILENT = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


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
    skipped: dict[str, str] = field(default_factory=dict)  # turned away by the routes: document -> why
    texts_embedded: int = 0
    texts_from_cache: int = 0
    chunks: int = 0
    profile: str = ""
    run_ids: list[str] = field(default_factory=list)
    seconds: float = 0.0
    paths: dict[str, str] = field(default_factory=dict)
    stages: list[dict[str, Any]] = field(default_factory=list)  # the progress table's final counts per column
    # Steps of the ingest itself that failed (the catalog refresh): {"step", "reason"}.
    failed_steps: list[dict[str, str]] = field(default_factory=list)
    # The exception that stopped the ingest before its end, if any (the report is partial).
    interrupted: str | None = None
    repaired: list[str] = field(default_factory=list)  # damaged lake files set aside, rebuilt by this run

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
            "skipped": len(self.skipped),
            "skipped_documents": {self.paths.get(d, d): r for d, r in sorted(self.skipped.items())},
            "chunker_errors": {self.paths.get(d, d): errs for d, errs in sorted(self.warnings.items())},
            "stages": self.stages,
            "failed_steps": self.failed_steps,
            "interrupted": self.interrupted,
            "documents_by_status": {
                "new": sorted(self.paths.get(d, d) for d in self.new),
                "changed": sorted(self.paths.get(d, d) for d in self.changed),
                "unchanged": sorted(self.paths.get(d, d) for d in self.unchanged),
                "failed": sorted(self.paths.get(d, d) for d in self.failed),
            },
        }

    def status_of(self, document: str) -> str:
        """new | changed | unchanged | failed | skipped: a failed document is only failed."""
        if document in self.failed:
            return "failed"
        if document in self.skipped:
            return "skipped"
        if document in self.new:
            return "new"
        return "changed" if document in self.changed else "unchanged"


class Watcher(Protocol):
    """What the command line draws while ``ingest`` works (see ``progress_display``)."""

    def started(self, board: StageBoard) -> None: ...

    def changed(self, board: StageBoard, event: DocumentEvent, done: tuple[Column, str] | None) -> None: ...

    def finished(self, board: StageBoard) -> None: ...


@dataclass
class IngestPlan:
    """What one ingest will do, decided before any run: the documents under its roots, the
    ones gone, the runs' batches, and the documents still current (not run at all)."""

    entries: list[Any]
    wanted: set[str]
    batches: list[list[str]]
    current: set[str]
    checks: dict[str, Any]
    freshness: Freshness
    board: StageBoard
    indexed_before: set[str]
    report: IngestReport


def ingest(
    parts: Parts,
    paths: Sequence[str] = (),
    instance: Any = None,
    watcher: Watcher | None = None,
    batch_size: int | None = None,
    force: bool = False,
    sources: SourceFilter | None = None,
) -> IngestReport:
    """Materialize every per-document asset for the documents under ``paths`` (default:
    the source root) in process, then refresh the catalog: plan, run, report. Every count
    in the report is of this run: each document's outcome per asset is heard as it
    finishes. A document whose current marker still holds (``freshness``) is not run: its
    assets' stored outcomes are heard as unchanged. ``force`` ignores the markers and
    recomputes every stage of these documents whatever their fingerprints (each run is
    tagged ``ingest/force=true``, so the UI shows why). ``batch_size``: documents per run
    (default: ``[dagster] run_batch``, the size the sensor's runs have too). ``sources``:
    which files of the folders are documents (default: the settings' ``[sources]``)."""
    from ingest_pipeline.definitions import build_definitions
    from ingest_pipeline.instance.home import instance_for

    started = time.perf_counter()
    instance = instance or instance_for(parts.settings.dagster_home)
    defs = build_definitions(parts.settings, parts.resources)  # the runs use these very resources
    lake = parts.store.lake
    repaired = lake.set_aside(lake.damaged())  # what they held is missing now: the stages write it again
    batch_size = batch_size or parts.settings.run_batch
    plan = plan_ingest(parts, defs, paths, instance, batch_size, force, sources)
    plan.report.repaired = repaired
    heard: dict[str, dict[str, DocumentEvent]] = {}
    try:
        run_plan(parts, defs, plan, instance, watcher, force, heard)
    except BaseException as exc:  # the report of what did finish goes with the exception
        plan.report.interrupted = f"{type(exc).__name__}: {exc}".splitlines()[0]
        try:
            report_plan(parts, plan, heard)
        except Exception:  # noqa: BLE001 - the first exception is the one to tell
            pass
        plan.report.seconds = time.perf_counter() - started
        exc.ingest_report = plan.report  # type: ignore[attr-defined]
        raise
    report_plan(parts, plan, heard)
    plan.report.seconds = time.perf_counter() - started
    return plan.report


def plan_ingest(
    parts: Parts,
    defs,
    paths: Sequence[str],
    instance: Any,
    batch_size: int,
    force: bool,
    sources: SourceFilter | None = None,
) -> IngestPlan:
    """Collect the documents, forget the vanished ones, sync the partitions and cut the
    batches; the documents whose markers hold are left out of every batch."""
    from ingest_pipeline.definitions import INGEST_JOB

    settings, store = parts.settings, parts.store
    for run in fail_stale_runs(instance):
        sys.stderr.write(
            f"run {run.run_id} ({run.job_name}) was left unfinished by process {run.pid}, which is "
            "gone: marked failed, its pool slots freed\n"
        )
    roots = list(paths) or [settings.source_root]
    if "://" not in settings.source_root:
        os.makedirs(settings.source_root, exist_ok=True)
    inventory = store.inventory()
    refused: list[tuple[str, str]] = []
    entries = collect(settings, roots, known=inventory, sources=sources, refused=refused)
    report = IngestReport(documents=len(entries), paths={e.document_id: e.path for e in entries})
    _report_refused(store, report, refused)
    gone = vanished(inventory, roots) + superseded(inventory, entries)
    report.removed = [entry.path for entry in gone]
    partitions = reconcile(
        store,
        parts.index,
        entries,
        [e.document_id for e in gone],
        instance.get_dynamic_partitions(DOCUMENTS),
        batch_size,
    )
    for key in partitions.remove:
        instance.delete_dynamic_partition(DOCUMENTS, key)
    if partitions.add:
        instance.add_dynamic_partitions(DOCUMENTS, partitions.add)
    wanted = {e.document_id for e in entries}
    assets = sorted(
        k.to_user_string() for k in defs.resolve_job_def(INGEST_JOB).asset_layer.selected_asset_keys
    )
    freshness = Freshness(parts, assets, sorted(wanted))
    checks = {} if force else {e.document_id: freshness.check(e) for e in entries}
    current = {doc for doc, check in checks.items() if check.current}
    return IngestPlan(
        entries=entries,
        wanted=wanted,
        batches=list(contiguous_batches(partitions.ordered, wanted - current, batch_size)),
        current=current,
        checks=checks,
        freshness=freshness,
        board=StageBoard(len(wanted), assets, report.paths, settings.column_order),
        indexed_before=store.indexed_documents(settings.default_profile),
        report=report,
    )


class RefusedName(StageError):
    """A file found in a source folder whose name cannot be made a document."""


def _report_refused(store, report: IngestReport, refused: list[tuple[str, str]]) -> None:
    """A file the walk could not name is one failed document of the report and one errors
    row (stage ``sources``, under an id made from its name), and the rest goes on."""
    from ingest_pipeline.identity import document_id

    for label, why in refused:
        doc = document_id(f"refused:{label}", label)
        exc = RefusedName(f"refused: this file's name cannot be handled ({why})")
        row = record_error(store, "sources", doc, exc, run_id="", path=label)
        report.documents += 1
        report.paths[doc] = label
        report.failed.setdefault(doc, []).append({"stage": "sources", "reason": row["reason"]})


def run_plan(
    parts: Parts,
    defs,
    plan: IngestPlan,
    instance: Any,
    watcher: Watcher | None,
    force: bool,
    heard: dict[str, dict[str, DocumentEvent]] | None = None,
) -> dict[str, dict[str, DocumentEvent]]:
    """Run the ingest job over each batch in this process, then the catalog job; returns
    what was heard of each document, asset by asset (into ``heard``, so a caller keeps what
    was heard before an exception). A failed catalog refresh is a failed step of the report."""
    from ingest_pipeline.definitions import CATALOG_JOB, INGEST_JOB
    from ingest_pipeline.sensors.batches import range_tags

    report, board, resources = plan.report, plan.board, parts.resources
    heard = {} if heard is None else heard

    def hear(event: DocumentEvent) -> None:
        if event.document not in plan.wanted:
            return
        heard.setdefault(event.document, {})[event.asset] = event
        done = board.add(event)
        if watcher:
            watcher.changed(board, event, done)

    if watcher:
        watcher.started(board)
    for doc in sorted(plan.current):  # told as the stages themselves would tell an unchanged document
        for asset, (status, detail) in plan.checks[doc].outcomes.items():
            hear(DocumentEvent(asset, doc, status, detail))
    job = defs.resolve_job_def(INGEST_JOB)
    try:
        parse = resources["parse"]  # one parse worker for all the batches, not one per run
        with listening(hear), kept_worker(parse.timeout, parse.memory_bytes()):
            for batch in plan.batches:
                tags = {**range_tags(batch[0], batch[-1]), **process_tags(), IN_PROCESS_TAG: "true"}
                result = job.execute_in_process(
                    instance=instance,
                    resources=resources,
                    raise_on_error=False,
                    run_config=QUIET,
                    tags={**tags, **({FORCE_TAG: "true"} if force else {})},
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
    record_failures(defs, instance, resources, report.run_ids)
    if report.run_ids or report.removed or not _catalog_exists(parts.settings):
        refreshed = defs.resolve_job_def(CATALOG_JOB).execute_in_process(
            instance=instance,
            resources=resources,
            tags=process_tags(),
            raise_on_error=False,
            run_config=QUIET,
        )
        if not refreshed.success:
            report.failed_steps.append(
                {
                    "step": CATALOG_JOB,
                    "reason": f"run {refreshed.run_id} failed: `query` may read stale views; "
                    "see the Dagster UI",
                }
            )
    return heard


def record_failures(defs, instance: Any, resources: dict, run_ids: Sequence[str]) -> None:
    """The record runs of the batches' failed documents, in this process (under the daemon
    the ``failed_documents_sensor`` asks for them): Dagster then shows those partitions
    failed. They read events only; a record run's failure is its purpose, not an error."""
    from ingest_pipeline.instance.failure_records import RECORD_JOB, failed_statuses, failure_records

    if not run_ids:
        return
    job = defs.resolve_job_def(RECORD_JOB)
    ordered = instance.get_dynamic_partitions(DOCUMENTS)
    for run_id in run_ids:
        statuses = failed_statuses(instance, run_id)
        for record in failure_records(statuses, ordered, job.asset_layer.selected_asset_keys):
            job.execute_in_process(
                instance=instance,
                resources=resources,
                raise_on_error=False,
                run_config=SILENT,  # the failure is the point: not printed as an error
                asset_selection=list(record.assets),
                tags={**record.tags(run_id), **process_tags(), IN_PROCESS_TAG: "true"},
            )


def report_plan(parts: Parts, plan: IngestPlan, heard: dict[str, dict[str, DocumentEvent]]) -> None:
    """Fill the plan's report from what was heard and what the lake holds now, and mark the
    documents that finished as current."""
    con = catalog.connect(parts.store, only=("errors", "chunks"))  # the two views the report reads
    try:
        _summarize(parts, plan.report, plan.entries, heard, plan.indexed_before, con)
        plan.freshness.reload_errors(sorted(plan.wanted - plan.current), con)
        _mark(plan.freshness, plan.report, plan.entries, plan.current)
    finally:
        con.close()
    plan.report.stages = plan.board.as_dicts()


def _mark(freshness: Freshness, report: IngestReport, entries, current: set[str]) -> None:
    """Mark each document that finished as current; forget the marker of one the run broke on."""
    for entry in entries:
        failures = report.failed.get(entry.document_id, [])
        if any(_transient(f) for f in failures):
            freshness.forget(entry.document_id)  # not the document's fault: look again next time
        elif entry.document_id not in current:
            try:
                freshness.mark(entry)
            except OSError:  # the file went away after its run: no marker, so the next run looks again
                freshness.forget(entry.document_id)


def _transient(failure: dict[str, Any]) -> bool:
    """A failure the document's bytes did not cause: the run broke or never got to it, or
    the embedder failed (an endpoint down, a model that could not load)."""
    stage = StageName.of_stage(failure["stage"])
    return (
        failure["stage"] == "run"
        or failure["reason"].startswith("not ")
        or (stage is not None and stage.kind == "embeddings")
    )


def _served(parts: Parts, doc: str) -> bool:
    """Whether the document's route puts it in the served index (``serve = false`` does not)."""
    if not parts.settings.routes.configured:  # one route, which serves everything
        return True
    source = parts.store.source(doc)
    return source is None or parts.settings.route_of(source).served


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
    store = parts.store
    wanted = [e.document_id for e in entries]
    if not wanted:
        return
    for row in catalog.query(store, queries.ERRORS_OF_DOCUMENTS, [wanted], con=con).to_pylist():
        entry = {"stage": row["stage"], "reason": row["reason"]}
        stage = StageName.of_stage(row["stage"])
        if stage is not None and stage.is_chunker:  # that chunker's pages went to the next one in order
            report.warnings.setdefault(row["document_id"], []).append(entry)
        else:
            report.failed.setdefault(row["document_id"], []).append(entry)
    profile = report.profile = parts.settings.default_profile
    for doc in wanted:
        if doc not in report.failed:
            _classify(parts, report, doc, heard.get(doc, {}), doc in indexed_before)
    served = StageName("embeddings", profile).asset
    for doc_events in heard.values():  # the served profile's texts, as this run embedded or reused them
        event = doc_events.get(served)
        if event is not None:
            report.texts_embedded += int(event.detail.get("embedded", 0) or 0)
            report.texts_from_cache += int(event.detail.get("cached", 0) or 0)
    for doc in wanted:
        reason = None if doc in report.failed else empty_reason(store, profile, doc)
        if reason:
            report.empty[doc] = reason
    report.chunks = catalog.query(store, queries.PROFILE_CHUNK_COUNT, [profile, wanted], con=con).to_pylist()[
        0
    ]["n"]


def _classify(
    parts: Parts, report: IngestReport, doc: str, events: dict[str, DocumentEvent], indexed_before: bool
) -> None:
    """Put a document that has no errors row under new, changed, unchanged or failed."""
    profile = report.profile
    indexed_stage = StageName("lancedb", profile)
    source, indexed = events.get("sources"), events.get(indexed_stage.asset)
    if source is None:
        report.failed.setdefault(doc, []).append({"stage": "sources", "reason": "not observed in this run"})
    elif away := (parts.store.source_meta(doc) or {}).get("turned_away"):  # not an error
        report.skipped[doc] = str(away)
    elif (
        parts.settings.is_indexed(profile)
        and _served(parts, doc)
        and (indexed is None or indexed.status not in ("new", "unchanged"))
        and finished(parts.store, profile, doc) is None
    ):
        report.failed.setdefault(doc, []).append(
            {"stage": indexed_stage.stage, "reason": "not finished: no index marker for its current bytes"}
        )
    elif source.status == "new" or (not indexed_before and indexed is not None and indexed.status == "new"):
        report.new.append(doc)  # new bytes, or bytes an earlier (killed) run observed and never indexed
    elif source.status == "changed" or any(
        e.status not in ("unchanged", "skipped", "failed") for e in events.values()
    ):
        report.changed.append(doc)  # new bytes, or a setting changed and a stage recomputed
    else:
        report.unchanged.append(doc)
