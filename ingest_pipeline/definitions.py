"""Assembles the code location: assets, checks, jobs, the sensor and the resources."""

from dagster import AssetSelection, Definitions, define_asset_job, in_process_executor, multiprocess_executor

from ingest_pipeline.assets.catalog import catalog
from ingest_pipeline.assets.chunks import build_chunk_assets
from ingest_pipeline.assets.common import lead_versions
from ingest_pipeline.assets.evaluation import build_eval_asset
from ingest_pipeline.assets.profiles import build_profile_assets
from ingest_pipeline.assets.sources import pages, sources
from ingest_pipeline.instance.failure_records import RECORD_JOB
from ingest_pipeline.instance.run_tags import k8s_run_tags
from ingest_pipeline.jobs import housekeeping_job, housekeeping_schedule
from ingest_pipeline.partitions import documents_partitions
from ingest_pipeline.resources import resources_for
from ingest_pipeline.sensors.failed_documents import build_failed_documents_sensor
from ingest_pipeline.sensors.folder import build_source_sensor
from ingest_pipeline.settings import Settings, load_settings
from ingest_pipeline.stages.routes import served_as

INGEST_JOB = "ingest_documents"
CATALOG_JOB = "refresh_catalog"
# The kind of work a run does; deploy/dagster.yaml limits concurrent runs per kind.
WORK_TAG = "ingest_pipeline/work"


def executor_for(settings: Settings):
    """One process per run by default: Dagster's per-step process start costs seconds, and the
    parse worker already isolates hostile files. ``multiprocess`` runs each step in its own
    process, for machines with cores to spare."""
    return multiprocess_executor if settings.executor == "multiprocess" else in_process_executor


def build_definitions(settings: Settings, resources: dict | None = None) -> Definitions:
    """The whole graph for one storage root: a chunk asset per installed chunker version
    and the per-profile chain for each configured profile. ``resources`` (default: those of
    ``resources_for(settings)``) are bound to every job; their chunker registry is the graph's."""
    resources = resources or resources_for(settings)
    registry = resources["chunkers"].registry()  # discovered once, for the graph and its runs alike
    profile_assets = []
    used: set[str] = set()
    served: set[str] = set()  # the versions an indexed profile uses: a run takes them first
    leads: dict[str, list[str]] = {}  # version -> the indexed profiles it leads for its formats
    for profile in settings.profiles:
        cut_as = served_as(settings) if profile.name == settings.default_profile else []
        profile_assets += build_profile_assets(
            registry,
            profile,
            resources["embedder"].for_profile(profile.name),
            indexed=settings.is_indexed(profile),
            cut_as=cut_as,
        )
        versions = {
            registry.info(c).asset_name
            for p in (profile, *cut_as)
            for c in registry.order_for(p.chunkers, profile.name)
        }
        used |= versions
        if settings.is_indexed(profile):
            served |= versions
            for version in lead_versions(registry, profile):
                leads.setdefault(version, []).append(profile.name)
    chunk_assets = build_chunk_assets(registry, served, leads)
    per_document = [sources, pages, *chunk_assets, *profile_assets]
    # The ingest job runs the chunker versions some profile uses; the others stay in the
    # graph, to be materialized on demand (an opt-in version is asked only when named).
    in_use = [a for a in chunk_assets if a.key.path[-1] in used]
    ingest_job = define_asset_job(
        INGEST_JOB,
        selection=AssetSelection.assets(sources, pages, *in_use, *profile_assets),
        partitions_def=documents_partitions,
        tags={WORK_TAG: "ingest", **k8s_run_tags("ingest")},
        description="The per-document assets the profiles need, for a batch of documents "
        "(one run, many partitions).",
    )
    record_job = define_asset_job(
        RECORD_JOB,
        selection=AssetSelection.assets(*per_document),
        partitions_def=documents_partitions,
        tags={WORK_TAG: "record", **k8s_run_tags("record")},
        description="Records a batch's failed documents as failed partitions: each step fails "
        "at once with the reasons the batch gave, reading nothing (instance.failure_records).",
    )
    catalog_job = define_asset_job(
        CATALOG_JOB,
        selection=AssetSelection.assets(catalog),
        tags={WORK_TAG: "catalog", **k8s_run_tags("catalog")},
        description="Rebuild the DuckDB views over the lake.",
    )
    evals = [build_eval_asset(profile) for profile in settings.indexed_profiles]
    return Definitions(
        assets=[*per_document, catalog, *evals],
        jobs=[ingest_job, catalog_job, record_job, housekeeping_job],
        schedules=[housekeeping_schedule],
        sensors=[
            build_source_sensor(ingest_job, catalog_job, settings.sensor_interval),
            build_failed_documents_sensor(record_job, [k for a in per_document for k in a.keys]),
        ],
        resources=resources,
        executor=executor_for(settings),
    )


defs = build_definitions(load_settings())
