"""Running the real asset graph on a temporary DAGSTER_HOME, the way the CLI does."""

from __future__ import annotations

from pathlib import Path

from ingest_pipeline.commands.ingest import QUIET
from ingest_pipeline.definitions import INGEST_JOB, build_definitions
from ingest_pipeline.documents import collect
from ingest_pipeline.instance.home import instance_for
from ingest_pipeline.partitions import DOCUMENTS
from ingest_pipeline.resources import parts_for
from ingest_pipeline.sensors.batches import range_tags


def fresh_pipeline(data_dir: Path):
    return parts_for(str(data_dir))


def register(pipeline, instance, paths=None) -> list[str]:
    entries = collect(pipeline.settings, paths or [pipeline.settings.source_root])
    pipeline.store.save_inventory(entries)
    keys = [e.document_id for e in entries]
    new = [k for k in keys if not instance.has_dynamic_partition(DOCUMENTS, k)]
    if new:
        instance.add_dynamic_partitions(DOCUMENTS, new)
    return keys


def run_batch(
    pipeline,
    instance,
    keys: list[str],
    ops_config: dict | None = None,
    tags: dict | None = None,
    resources_config: dict | None = None,
):
    """One run over a contiguous range of partitions, in process. ``resources_config`` is run
    config for the resources the code location binds, as the launchpad would send it."""
    ordered = instance.get_dynamic_partitions(DOCUMENTS)
    positions = sorted(ordered.index(k) for k in keys)
    assert positions == list(range(positions[0], positions[0] + len(positions))), "keys must be contiguous"
    defs = build_definitions(pipeline.settings, pipeline.resources)
    return defs.resolve_job_def(INGEST_JOB).execute_in_process(
        instance=instance,
        tags={**range_tags(ordered[positions[0]], ordered[positions[-1]]), **(tags or {})},
        # With run config for resources, the job's own bound resources take it (the UI's path).
        resources=None if resources_config else pipeline.resources,
        run_config={
            **QUIET,
            **({"ops": ops_config} if ops_config else {}),
            **({"resources": resources_config} if resources_config else {}),
        },
        raise_on_error=False,
    )


def materializations(result) -> dict[str, dict[str, dict]]:
    """Asset key -> partition (None when unpartitioned) -> its materialization's metadata
    values."""
    return _by_asset(e.event_specific_data.materialization for e in result.get_asset_materialization_events())


def stories(result) -> dict[str, dict[str, dict]]:
    """Asset key -> partition -> that partition's own story: the metadata values of the
    observation the run logged for it."""
    return _by_asset(e.event_specific_data.asset_observation for e in result.get_asset_observation_events())


def _by_asset(events) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for event in events:
        out.setdefault(event.asset_key.to_user_string(), {})[event.partition] = {
            k: v.value for k, v in event.metadata.items()
        }
    return out


def total(result, asset: str, field: str) -> int:
    """A count summed over the partitions a run told."""
    return sum(int(m.get(field, 0) or 0) for m in stories(result).get(asset, {}).values())


def statuses(result, asset: str) -> dict[str, str]:
    """Partition -> the first word of its status line (new, unchanged, FAILED ...)."""
    return {k: str(m["status"]).split(":")[0].split()[0] for k, m in stories(result).get(asset, {}).items()}


def temporary_instance(data_dir: Path):
    return instance_for(str(data_dir / "dagster_home"))


def apply_partition_requests(instance, result) -> None:
    """What the daemon does with a sensor result's dynamic-partition requests."""
    from dagster import AddDynamicPartitionsRequest

    for request in result.dynamic_partitions_requests or []:
        if isinstance(request, AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(DOCUMENTS, list(request.partition_keys))
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(DOCUMENTS, key)


def sensor_tick(settings, instance, cursor=None, sensor=None):
    """One tick of the real source sensor, evaluated and applied as the daemon would
    (runs are requested, not launched)."""
    from dagster import build_sensor_context

    from ingest_pipeline.resources import resources_for

    sensor = sensor or build_definitions(settings).resolve_sensor_def("source_files_sensor")
    with build_sensor_context(instance=instance, cursor=cursor, resources=resources_for(settings)) as context:
        result = sensor(context)
    apply_partition_requests(instance, result)
    return result
