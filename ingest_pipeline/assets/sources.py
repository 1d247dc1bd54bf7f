"""The first two per-document assets: the source bytes and the pages read from them."""


import time

from dagster import AssetExecutionContext, MaterializeResult, asset

from ingest_pipeline import stages
from ingest_pipeline.assets.common import BATCH_POLICY, document_keys, for_each_document, forced, report_partitions
from ingest_pipeline.partitions import documents_partitions
from ingest_pipeline.resources import IngestResource, ParseWorkerResource


@asset(partitions_def=documents_partitions, backfill_policy=BATCH_POLICY, group_name="ingest",
       kinds={"parquet"}, code_version=str(stages.STAGE_VERSIONS["sources"]))
def sources(context: AssetExecutionContext, ingest: IngestResource) -> MaterializeResult:
    """A source file: media type detected from its bytes, size, sha256, mtime and path."""
    p = ingest.pipeline()
    started = time.perf_counter()
    outcomes = for_each_document(context, document_keys(context, p, register=True), lambda key: stages.guarded(
        p.store, "sources", key, context.run_id, stages.observe_source, p.settings, p.store, key, context.run_id,
        force=forced(context, ingest)))
    report_partitions(context, outcomes, started)
    return MaterializeResult()


@asset(partitions_def=documents_partitions, backfill_policy=BATCH_POLICY, group_name="ingest", deps=[sources],
       kinds={"parquet"}, code_version=str(stages.STAGE_VERSIONS["pages"]))
def pages(context: AssetExecutionContext, ingest: IngestResource, parse: ParseWorkerResource) -> MaterializeResult:
    """One row per page with the reader's verdict (read, blank, failed, unreadable) and text."""
    p = ingest.pipeline()
    worker = parse.worker()
    started = time.perf_counter()
    outcomes = for_each_document(context, document_keys(context, p), lambda key: stages.guarded(
        p.store, "pages", key, context.run_id, stages.read_document, p.settings, p.store, key, context.run_id, worker,
        force=forced(context, ingest)))
    report_partitions(context, outcomes, started)
    return MaterializeResult()
