"""The housekeeping job and its schedule: compact the lake's cache and sweep killed writes,
optimize the LanceDB tables (waiting for the ``lancedb`` pool, so never beside an ingest's
LanceDB writes), then refresh the catalog."""

from dagster import (
    DefaultScheduleStatus,
    In,
    Nothing,
    OpExecutionContext,
    Output,
    ScheduleDefinition,
    job,
    op,
)

from ingest_pipeline.instance.pools import LANCEDB_POOL
from ingest_pipeline.resources import EmbedderResource, IndexResource, IngestResource, StoreResource
from ingest_pipeline.storage import housekeeping

HOUSEKEEPING_JOB = "housekeeping"
HOUSEKEEPING_CRON = "17 */6 * * *"  # four times a day, off the hour


@op(description="Sweep temporary files of killed writes and fold the embedding cache's shards into one.")
def compact_lake(context: OpExecutionContext, store: StoreResource, embedder: EmbedderResource):
    swept = housekeeping.sweep_temporary_files(store.store())
    totals = {"shards_before": 0, "shards_after": 0, "vectors": 0}
    for model_id in sorted(embedder.model_ids()):  # each indexed profile's embedder's cache
        cache = housekeeping.compact_embedding_cache(store.store(), model_id)
        context.log.info(f"embedding cache of {model_id}: {cache}")
        totals = {k: totals[k] + cache[k] for k in totals}
    context.log.info(f"swept {swept} temporary files")
    return Output(
        None, metadata={"temporary_files_removed": swept, **{f"cache_{k}": v for k, v in totals.items()}}
    )


@op(
    pool=LANCEDB_POOL,
    description="LanceDB optimize per table: compaction, old versions removed, indices "
    "created where missing and brought up to date. Holds the lancedb pool slot.",
)
def optimize_lancedb(context: OpExecutionContext, index: IndexResource):
    reports = housekeeping.optimize_lancedb(index.index())
    for report in reports:
        context.log.info(
            f"{report.table}: {report.rows} rows, fragments {report.fragments_before} -> "
            f"{report.fragments_after}, versions {report.versions_before} -> {report.versions_after}"
            + (f", created {', '.join(report.created)}" if report.created else "")
        )
    return Output(None, metadata={"tables": housekeeping.housekeeping_summary(reports)})


@op(
    ins={"after_lake": In(Nothing), "after_lancedb": In(Nothing)},
    description="Rebuild the catalog's DuckDB views over the lake.",
)
def refresh_catalog_views(context: OpExecutionContext, ingest: IngestResource, store: StoreResource):
    counts = housekeeping.refresh_catalog(store.store(), ingest.settings().catalog_path)
    return Output(None, metadata={"rows": counts})


@job(
    name=HOUSEKEEPING_JOB,
    description="Lake compaction, LanceDB optimize and a catalog refresh; the LanceDB step "
    "waits for the lancedb pool, so it never runs beside an ingest's writes.",
)
def housekeeping_job():
    refresh_catalog_views(after_lake=compact_lake(), after_lancedb=optimize_lancedb())


housekeeping_schedule = ScheduleDefinition(
    name="housekeeping_schedule",
    job=housekeeping_job,
    cron_schedule=HOUSEKEEPING_CRON,
    default_status=DefaultScheduleStatus.RUNNING,
    description="Housekeeping of the storage root four times a day.",
)
