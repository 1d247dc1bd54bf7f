"""The sensor that turns the source folder into partitions and batched runs."""


import json
import os

from dagster import (
    AddDynamicPartitionsRequest,
    DefaultSensorStatus,
    DeleteDynamicPartitionsRequest,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from ingest_pipeline.documents import entry_for, save_inventory, walk_files
from ingest_pipeline.partitions import DOCUMENTS, contiguous_batches
from ingest_pipeline.pipeline import Pipeline
from ingest_pipeline.resources import IngestResource
from ingest_pipeline.stages import remove_document

MAX_FILES_PER_TICK = 200
BATCH_SIZE = 25


def range_tags(start: str, end: str) -> dict[str, str]:
    return {ASSET_PARTITION_RANGE_START_TAG: start, ASSET_PARTITION_RANGE_END_TAG: end}


def evaluate_source_folder(context: SensorEvaluationContext, p: Pipeline, job_name: str, catalog_job: str):
    """One tick: new and changed files (by size and mtime) become runs, vanished ones leave."""
    root = p.settings.source_root
    cursor = json.loads(context.cursor) if context.cursor else {}
    seen: dict[str, list] = cursor.get("seen", {})
    files = walk_files(root) if os.path.isdir(root) else []
    current = {}
    for path in files:
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            continue
        current[os.path.relpath(path, root)] = (path, [stat.st_size, stat.st_mtime_ns])
    known = set(context.instance.get_dynamic_partitions(DOCUMENTS))  # read once per tick
    changed = [rel for rel, (_, sig) in sorted(current.items()) if seen.get(rel) != sig]
    deferred = len(changed) > MAX_FILES_PER_TICK
    changed = changed[:MAX_FILES_PER_TICK]
    entries = [entry_for(p.settings, current[rel][0]) for rel in changed]
    save_inventory(p.lake, entries)
    new_keys = [e.document_id for e in entries if e.document_id not in known]

    gone = [rel for rel in seen if rel not in current]
    removed = []
    for rel in gone:
        entry = entry_for(p.settings, os.path.join(root, rel))
        remove_document(p.lake, p.index, entry.document_id)
        if entry.document_id in known:
            removed.append(entry.document_id)
        seen.pop(rel, None)
    for rel in changed:
        seen[rel] = current[rel][1]

    ordered = [k for k in context.instance.get_dynamic_partitions(DOCUMENTS) if k not in removed] + [
        k for k in new_keys]
    wanted = {e.document_id for e in entries}
    requests = [
        RunRequest(job_name=job_name, tags=range_tags(batch[0], batch[-1]))
        for batch in contiguous_batches(ordered, wanted, BATCH_SIZE)
    ]
    if requests or removed:
        requests.append(RunRequest(job_name=catalog_job))
    partition_requests = []
    if new_keys:
        partition_requests.append(AddDynamicPartitionsRequest(DOCUMENTS, new_keys))
    if removed:
        partition_requests.append(DeleteDynamicPartitionsRequest(DOCUMENTS, removed))
    new_cursor = json.dumps({"seen": seen}, sort_keys=True)
    if not requests and not partition_requests:
        return SensorResult(skip_reason=SkipReason(f"no changes under {root}"), cursor=new_cursor)
    context.log.info(f"{len(entries)} new or changed, {len(removed)} removed, {len(requests)} runs"
                     + (" (more next tick)" if deferred else ""))
    return SensorResult(run_requests=requests, dynamic_partitions_requests=partition_requests, cursor=new_cursor)


def build_source_sensor(job, catalog_job, interval_seconds: int = 30):
    @sensor(name="source_files_sensor", jobs=[job, catalog_job], minimum_interval_seconds=interval_seconds,
            default_status=DefaultSensorStatus.RUNNING,
            description="Watches the source folder: adds partitions for new files, runs new and changed "
                        "ones in batches, and removes the rows of deleted ones.")
    def source_files_sensor(context: SensorEvaluationContext, ingest: IngestResource):
        return evaluate_source_folder(context, ingest.pipeline(), job.name, catalog_job.name)

    return source_files_sensor
