"""The source sensor's tick in shard mode: partitions are shards, not documents."""

from __future__ import annotations

import json
from collections.abc import Iterable

from dagster import (
    AddDynamicPartitionsRequest,
    DeleteDynamicPartitionsRequest,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
)

from ingest_pipeline import shards
from ingest_pipeline.partitions import DOCUMENTS, contiguous_batches
from ingest_pipeline.pipeline import Pipeline
from ingest_pipeline.stages import remove_document

MAX_SHARDS_PER_TICK = 256
SHARDS_PER_RUN = 4


def evaluate_shards(context: SensorEvaluationContext, p: Pipeline, job_name: str, catalog_job: str,
                    listing: Iterable[shards.Listed] | None = None) -> SensorResult:
    """One tick: list the source root once, find the shards whose digest moved, diff those
    against their manifests, and run them; vanished files lose their rows."""
    from ingest_pipeline.sensors import range_tags

    scheme = p.settings.shard_scheme
    cursor = json.loads(context.cursor) if context.cursor else {}
    previous = cursor.get("shards", {})
    if listing is None:
        listing = shards.list_source_root(p.settings.source_root)
    scan = shards.scan(p.lake, scheme, listing, previous, limit=MAX_SHARDS_PER_TICK)
    removed_docs = 0
    for change in scan.changes:
        for doc in change.removed:
            remove_document(p.lake, p.index, doc)
            removed_docs += 1
    known = set(context.instance.get_dynamic_partitions(DOCUMENTS))  # read once per tick
    to_run = sorted(c.shard for c in scan.changes if c.new or c.changed)
    new_keys = [s for s in to_run if s not in known]
    gone = [s for s in scan.vanished_shards if s in known]
    ordered = sorted((known - set(gone)) | set(new_keys))
    requests = [RunRequest(job_name=job_name, tags=range_tags(batch[0], batch[-1]))
                for batch in contiguous_batches(ordered, set(to_run), SHARDS_PER_RUN)]
    touched = sum(len(c.new) + len(c.changed) for c in scan.changes)
    if requests or removed_docs:
        requests.append(RunRequest(job_name=catalog_job))
    partition_requests = []
    if new_keys:
        partition_requests.append(AddDynamicPartitionsRequest(DOCUMENTS, new_keys))
    if gone:
        partition_requests.append(DeleteDynamicPartitionsRequest(DOCUMENTS, gone))
    new_cursor = json.dumps({"shards": scan.digests}, sort_keys=True, separators=(",", ":"))
    if not requests and not partition_requests:
        return SensorResult(skip_reason=SkipReason(f"no changes in {scan.files} files"), cursor=new_cursor)
    ingest_runs = len(requests) - (1 if requests and requests[-1].job_name == catalog_job else 0)
    context.log.info(f"{scan.files} files: {touched} new or changed, {removed_docs} removed, {len(to_run)} shards "
                     f"in {ingest_runs} ingest runs"
                     + (f" ({scan.deferred} shards next tick)" if scan.deferred else ""))
    return SensorResult(run_requests=requests, dynamic_partitions_requests=partition_requests, cursor=new_cursor)
