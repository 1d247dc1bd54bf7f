"""The first two per-document assets: the source bytes and the pages read from them."""

import queue
import time

from dagster import AssetExecutionContext, AssetKey, asset

from ingest_pipeline import stages
from ingest_pipeline.assets.checks import materialized_with_checks, processed_check
from ingest_pipeline.assets.common import (
    BATCH_POLICY,
    about_asset,
    document_keys,
    for_each_document,
    forced,
    lake_files,
    report_partitions,
)
from ingest_pipeline.partitions import documents_partitions
from ingest_pipeline.resources import IngestResource, ParseWorkerResource, StoreResource

READ_ALONE = 4  # fewer documents than this are read by one worker: a second one's start-up is not worth it


@asset(
    partitions_def=documents_partitions,
    backfill_policy=BATCH_POLICY,
    group_name="ingest",
    kinds={"parquet"},
    code_version=str(stages.STAGE_VERSIONS["sources"]),
    metadata=about_asset(lake_files("sources"), "select path, media_type, bytes from sources order by path"),
    check_specs=[processed_check(AssetKey("sources"))],
)
def sources(context: AssetExecutionContext, ingest: IngestResource, store: StoreResource):
    """A source file: media type detected from its bytes, size, sha256, mtime and path."""
    settings, st = ingest.settings(), store.store()
    started = time.perf_counter()
    keys = document_keys(context, settings, st, register=True)
    outcomes = for_each_document(
        context,
        keys,
        lambda key: stages.guarded(
            st,
            "sources",
            key,
            context.run_id,
            stages.observe_source,
            settings,
            st,
            key,
            context.run_id,
            force=forced(context, ingest),
        ),
    )
    stories = report_partitions(context, outcomes, started)
    yield from materialized_with_checks(context, outcomes, stories)


@asset(
    partitions_def=documents_partitions,
    backfill_policy=BATCH_POLICY,
    group_name="ingest",
    deps=[sources],
    kinds={"parquet"},
    code_version=str(stages.STAGE_VERSIONS["pages"]),
    metadata=about_asset(
        lake_files("pages"), "select document_id, page, status, reader, reason from pages order by all"
    ),
    check_specs=[processed_check(AssetKey("pages"))],
)
def pages(
    context: AssetExecutionContext, ingest: IngestResource, store: StoreResource, parse: ParseWorkerResource
):
    """One row per page with the reader's verdict (read, blank, failed, unreadable) and text.

    Documents are read side by side, each worker process on one (``read_workers``): a
    reader is single-threaded, PDFium not thread-safe even across documents, so a second
    core helps only as a second process."""
    settings, st = ingest.settings(), store.store()
    started = time.perf_counter()
    keys = document_keys(context, settings, st)
    workers = parse.workers(settings.read_workers if len(keys) >= READ_ALONE else 1)
    free: queue.SimpleQueue = queue.SimpleQueue()
    for worker in workers:
        if len(workers) > 1:
            worker.start()  # from this thread, which outlives the step's reading threads
        free.put(worker)

    def read(key: str):
        worker = free.get()
        try:
            return stages.guarded(
                st,
                "pages",
                key,
                context.run_id,
                stages.read_document,
                settings,
                st,
                key,
                context.run_id,
                worker,
                force=forced(context, ingest),
            )
        finally:
            free.put(worker)

    outcomes = for_each_document(context, keys, read, threads=len(workers))
    stories = report_partitions(context, outcomes, started)
    yield from materialized_with_checks(context, outcomes, stories)
