"""Where a document's own metadata lands in Dagster, and what describes an asset as a whole:
each partition's story is an observation the partition's page shows (stamped after its
materialization, to the millisecond the UI compares), the materializations carry no
document's figures, and every per-document asset's definition says what it is."""

import pytest
from dagster import DagsterEventType

from ingest_pipeline.definitions import build_definitions
from ingest_pipeline.samples import write_samples
from ingest_pipeline.storage.catalog import query
from ingest_pipeline_tests.dagster_helpers import fresh_pipeline, register, run_batch, temporary_instance


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """One run of the asset graph over the samples, which both tests read."""
    data = tmp_path_factory.mktemp("stories") / "data"
    (data / "sources").mkdir(parents=True)
    write_samples(str(data / "sources"))
    pipeline = fresh_pipeline(data)
    instance = temporary_instance(data)
    result = run_batch(pipeline, instance, register(pipeline, instance))
    assert result.success
    return pipeline, instance, result


def _stamps(instance, run_id: str, kind: DagsterEventType) -> dict[tuple[str, str], list[int]]:
    """(asset, partition) -> the milliseconds of the run's events of that kind on it."""
    found: dict[tuple[str, str], list[int]] = {}
    for record in instance.all_logs(run_id, of_type=kind):
        event = record.dagster_event
        if event.partition is not None:
            key = (event.asset_key.to_user_string(), event.partition)
            found.setdefault(key, []).append(int(record.timestamp * 1000))
    return found


def test_each_partition_tells_its_story_after_its_materialization_which_carries_none(ran):
    _, instance, result = ran
    materialized = _stamps(instance, result.run_id, DagsterEventType.ASSET_MATERIALIZATION)
    told = _stamps(instance, result.run_id, DagsterEventType.ASSET_OBSERVATION)
    assert {"sources", "pages", "chunk_map_retrieval", "lancedb_retrieval"} <= {a for a, _ in told}
    assert set(told) == set(materialized)  # one story for every partition the run materialized
    for key, stamps in told.items():  # the UI shows a story only if later, in whole milliseconds
        assert len(stamps) == 1 and stamps[0] > max(materialized[key]), key

    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        if materialization.partition is not None:  # the Overview shows the latest one's metadata
            assert not materialization.metadata, materialization.asset_key


def test_every_per_document_asset_describes_itself_and_its_query_runs(ran):
    pipeline = ran[0]
    specs = build_definitions(pipeline.settings, pipeline.resources).resolve_all_asset_specs()
    per_document = [s for s in specs if s.partitions_def is not None]
    assert {"sources", "pages", "chunk_map_retrieval", "lancedb_retrieval"} <= {
        s.key.to_user_string() for s in per_document
    }
    rows = {}
    for spec in per_document:
        about = {k: str(getattr(v, "value", v)) for k, v in spec.metadata.items()}
        assert "each_document" in about and "Partitions tab" in about["each_document"], spec.key
        assert about["files"].startswith(("lake/", "lancedb/")), (spec.key, about["files"])
        assert "query" in about or "search" in about, spec.key
        if "query" in about:  # it runs as written (a chunker no sample suits finds no rows)
            sql = about["query"].split('"', 1)[1].rsplit('"', 1)[0]
            rows[spec.key.to_user_string()] = query(pipeline.lake, sql).num_rows
    served = ["sources", "pages", "chunks/pdf_v4", "chunk_map_retrieval", "embeddings_retrieval"]
    assert all(rows[name] > 0 for name in served), rows
    chunk_map = next(s for s in per_document if s.key.to_user_string() == "chunk_map_retrieval")
    assert "where profile = 'retrieval'" in str(chunk_map.metadata["query"].value)
