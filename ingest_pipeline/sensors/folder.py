"""The sensor that turns the source folder into partitions and batched runs.

A file counts as *seen* only once a run for it has ended: until then its batch is *pending*
in the cursor. A batch whose run failed or was cancelled is requested again on a later tick,
up to ``run_retries`` times; after that each of its documents gets an ``errors`` row saying
why, and is left alone until its bytes change. The catalog is refreshed after the runs it
reflects have ended, never beside them.
"""

from __future__ import annotations

import os
import time

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from ingest_pipeline.documents import chosen_in_folder, entry_for, walk_files
from ingest_pipeline.partitions import DOCUMENTS
from ingest_pipeline.resources import IndexResource, IngestResource, Parts, StoreResource
from ingest_pipeline.sensors.batches import (
    SOURCE_TAG,
    SensorCursor,
    partition_requests_for,
    request_batches,
    settle_pending,
)
from ingest_pipeline.stages import StageError, reconcile, record_error

MAX_FILES_PER_TICK = 200
# Vanished files forgotten per tick (one lake walk and one LanceDB delete per table each tick).
MAX_REMOVALS_PER_TICK = 1000


def evaluate_source_folder(
    context: SensorEvaluationContext,
    p: Parts,
    job_name: str,
    catalog_job: str,
    batch_size: int | None = None,
    retries: int | None = None,
):
    """One tick: settle the batches whose runs ended, request new and changed files, forget
    vanished ones."""
    settings = p.settings
    batch_size = batch_size or settings.run_batch
    retries = settings.run_retries if retries is None else retries
    root = settings.source_root
    cursor = SensorCursor.load(context.cursor)
    current = _files_on_disk(root)
    partition_keys = context.instance.get_dynamic_partitions(DOCUMENTS)  # read once per tick
    now = time.time()

    # 1. Batches whose runs ended: success marks their files seen, failure asks again.
    settlement = settle_pending(context.instance, cursor, retries, now)
    settled, retry_files, notes = settlement.settled, settlement.retry, settlement.notes
    for rel, _sig, why, run_id, tries in settlement.gave_up:
        entry = entry_for(settings, os.path.join(root, rel))
        record_error(
            p.store,
            "run",
            entry.document_id,
            StageError(f"{why}; tried {tries} times, not retried until the file changes"),
            run_id,
        )

    # 2. New and changed files, and those to retry, unless a run for them is still pending.
    # Only the files the source filters make documents ([sources]); the others stay watched
    # for removal alone.
    in_flight = cursor.pending_paths()
    documents = set(chosen_in_folder(settings, [path for path, _ in current.values()]))
    changed = [
        rel
        for rel, (path, sig) in sorted(current.items())
        if path in documents and rel not in in_flight and (cursor.seen.get(rel) != sig or rel in retry_files)
    ]
    deferred = len(changed) > MAX_FILES_PER_TICK
    changed = changed[:MAX_FILES_PER_TICK]
    entries = [entry_for(settings, current[rel][0]) for rel in changed]

    # 3. Vanished files leave LanceDB, the lake and the partitions, a bounded number per tick.
    gone = sorted(rel for rel in cursor.seen if rel not in current)
    deferred = deferred or len(gone) > MAX_REMOVALS_PER_TICK
    gone = gone[:MAX_REMOVALS_PER_TICK]
    gone_ids = [entry_for(settings, os.path.join(root, rel)).document_id for rel in gone]
    plan = reconcile(p.store, p.index, entries, gone_ids, partition_keys, batch_size)
    removed = plan.remove
    for rel in gone:
        cursor.seen.pop(rel, None)

    rel_of = {e.document_id: rel for e, rel in zip(entries, changed)}
    wanted = {k: (rel, current[rel][1]) for k, rel in rel_of.items()}
    requests = request_batches(cursor, plan.batches, wanted, retry_files, job_name, now)
    if settled or removed:  # after the runs it reflects, never beside them
        requests.append(RunRequest(job_name=catalog_job, tags={SOURCE_TAG: "sensor"}))
    partition_requests = partition_requests_for(plan)
    for note in notes:
        context.log.warning(note)
    if not requests and not partition_requests:
        waiting = f"; waiting for {len(cursor.pending)} run(s)" if cursor.pending else ""
        return SensorResult(skip_reason=SkipReason(f"no changes under {root}{waiting}"), cursor=cursor.dump())
    context.log.info(
        f"{len(entries)} new or changed, {len(removed)} removed, {settled} batch(es) settled, "
        f"{len(requests)} runs" + (" (more next tick)" if deferred else "")
    )
    return SensorResult(
        run_requests=requests, dynamic_partitions_requests=partition_requests, cursor=cursor.dump()
    )


def _files_on_disk(root: str) -> dict[str, tuple[str, list]]:
    """Every candidate file under the source root: its relative path -> (path, [size, mtime])."""
    current: dict[str, tuple[str, list]] = {}
    for path in walk_files(root) if os.path.isdir(root) else []:
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            continue
        current[os.path.relpath(path, root)] = (path, [stat.st_size, stat.st_mtime_ns])
    return current


def build_source_sensor(job, catalog_job, interval_seconds: int = 15):
    @sensor(
        name="source_files_sensor",
        jobs=[job, catalog_job],
        minimum_interval_seconds=interval_seconds,
        default_status=DefaultSensorStatus.RUNNING,
        description="Watches the source folder: adds partitions for new files, runs new and changed "
        "ones in batches (a file counts as seen once its run ended; failed runs are asked "
        "again), refreshes the catalog after them, and removes the rows of deleted files.",
    )
    def source_files_sensor(
        context: SensorEvaluationContext, ingest: IngestResource, store: StoreResource, index: IndexResource
    ):
        p = Parts({"ingest": ingest, "store": store, "index": index})
        if p.settings.shard_scheme is not None:  # partitions are shards of documents
            from ingest_pipeline.sensors.shard_mode import evaluate_shards

            return evaluate_shards(context, p, job.name, catalog_job.name)
        return evaluate_source_folder(context, p, job.name, catalog_job.name)

    return source_files_sensor
