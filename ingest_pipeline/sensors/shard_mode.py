"""The source sensor's tick in shard mode: partitions are shards, not documents.

It keeps the per-document sensor's rules (ingest_pipeline.sensors.folder), with a shard where that
one has a file: a shard counts as *seen* (its digest in the cursor's ``seen``) only once the
run covering it has ended well; until then its batch is *pending* under its batch tag and
the shard is neither rescanned nor asked for again. A failed or cancelled run is asked again
up to ``run_retries`` times, then every document of the shard gets an ``errors`` row and the
shard is left alone until one of its files changes. The catalog is refreshed after the runs
it reflects, never beside them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

from dagster import (
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
)

from ingest_pipeline.documents import DocumentEntry
from ingest_pipeline.partitions import DOCUMENTS
from ingest_pipeline.resources import Parts
from ingest_pipeline.sensors.batches import (
    SOURCE_TAG,
    SensorCursor,
    partition_requests_for,
    request_batches,
    settle_pending,
)
from ingest_pipeline.stages import StageError, plan_partitions, record_error, remove_documents
from ingest_pipeline.storage import shards
from ingest_pipeline.storage.shard_keys import Listed, ShardScheme

MAX_SHARDS_PER_TICK = 256
SHARDS_PER_RUN = 4


def load_cursor(raw: str | None):
    """The shard sensor's cursor, the per-document sensor's ``SensorCursor`` keyed by shard.
    A cursor written before runs were tracked (``{"shards": {...}}``) reads as all seen."""
    if raw and raw.lstrip().startswith("{") and '"shards"' in raw:
        data = json.loads(raw)
        if "shards" in data and "seen" not in data:
            return SensorCursor(seen=dict(data["shards"]), pending={})
    return SensorCursor.load(raw)


def _give_up(p: Parts, scheme: ShardScheme, shard: str, why: str, run_id: str, tries: int) -> int:
    """An ``errors`` row for every document of a shard whose run was given up on (with its
    inventory row first, so the error names the file)."""
    members = list(shards.documents_of(p.store, scheme, [shard]))
    p.store.save_inventory([DocumentEntry(d, path, uri) for d, path, uri in members if uri])
    for doc, _, _ in members:
        record_error(
            p.store,
            "run",
            doc,
            StageError(
                f"{why}; the run of {shard} was tried {tries} times, not retried until a file of the shard "
                f"changes"
            ),
            run_id,
        )
    return len(members)


def evaluate_shards(
    context: SensorEvaluationContext,
    p: Parts,
    job_name: str,
    catalog_job: str,
    listing: Iterable[Listed] | None = None,
    retries: int | None = None,
    batch_size: int = SHARDS_PER_RUN,
) -> SensorResult:
    """One tick: settle the batches whose runs ended, list the source root once, find the
    shards whose digest moved (leaving those a run is still working on), diff those against
    their manifests and run them; vanished files lose their rows."""
    scheme = p.settings.shard_scheme
    retries = p.settings.run_retries if retries is None else retries
    cursor = load_cursor(context.cursor)
    now = time.time()

    # 1. Batches whose runs ended: success marks their shards seen, failure asks again.
    settlement = settle_pending(context.instance, cursor, retries, now)
    errors_rows = sum(
        _give_up(p, scheme, shard, why, run_id, tries)
        for shard, _digest, why, run_id, tries in settlement.gave_up
    )

    # 2. Shards whose digest moved since they were last seen, except those in flight.
    if listing is None:
        listing = shards.list_source_root(p.settings.source_root)
    in_flight = cursor.pending_paths()
    scan = shards.scan(
        p.store,
        scheme,
        listing,
        cursor.seen,
        limit=MAX_SHARDS_PER_TICK,
        skip=in_flight,
        first=settlement.retry,
    )
    vanished = set(scan.vanished_shards)
    removed_docs = sorted({doc for c in scan.changes for doc in c.removed})
    if removed_docs:
        remove_documents(p.store, p.index, removed_docs)
    retry = settlement.retry
    to_run = sorted(
        c.shard for c in scan.changes if c.shard not in vanished and (c.needs_run or c.shard in retry)
    )
    for change in scan.changes:  # removals alone are done: the shard is seen as it now is
        if change.shard not in vanished and change.shard not in set(to_run):
            cursor.seen[change.shard] = scan.digests[change.shard]
    for shard in vanished:
        cursor.seen.pop(shard, None)

    # 3. Partitions and runs, in the instance's order of partition keys.
    plan = plan_partitions(context.instance.get_dynamic_partitions(DOCUMENTS), to_run, vanished, batch_size)
    wanted = {s: (s, scan.digests[s]) for s in to_run}
    requests = request_batches(cursor, plan.batches, wanted, retry, job_name, now)
    touched = sum(len(c.new) + len(c.changed) for c in scan.changes)
    ingest_runs = len(requests)
    if settlement.settled or removed_docs:  # after the runs it reflects, never beside them
        requests.append(RunRequest(job_name=catalog_job, tags={SOURCE_TAG: "sensor"}))
    partition_requests = partition_requests_for(plan)
    for note in settlement.notes:
        context.log.warning(note)
    if errors_rows:
        context.log.warning(f"{errors_rows} documents got an errors row: their shard's run was given up on")
    if not requests and not partition_requests:
        waiting = f"; waiting for {len(cursor.pending)} run(s)" if cursor.pending else ""
        return SensorResult(
            skip_reason=SkipReason(f"no changes in {scan.files} files{waiting}"), cursor=cursor.dump()
        )
    context.log.info(
        f"{scan.files} files: {touched} new or changed, {len(removed_docs)} removed, "
        f"{settlement.settled} batch(es) settled, {len(to_run)} shards in {ingest_runs} ingest runs"
        + (f" ({scan.deferred} shards next tick)" if scan.deferred else "")
    )
    return SensorResult(
        run_requests=requests, dynamic_partitions_requests=partition_requests, cursor=cursor.dump()
    )
